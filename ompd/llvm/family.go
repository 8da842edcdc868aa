package llvm

import (
	"path/filepath"
	"strings"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// Family is LLVM's OpenMP runtime (libomp, and Intel's libiomp5 of the
// same code) as a runtime family.
var Family ompd.Family = family{}

type family struct{}

func (family) Name() string { return "LLVM OpenMP runtime" }

// Recognizes: the runtime defines __kmpc_fork_call (it also defines the
// GOMP_* entry points of its libgomp compatibility layer).
func (family) Recognizes(has func(string) bool) bool { return has("__kmpc_fork_call") }

func (family) MaybeRuntime(name string) bool {
	base := filepath.Base(name)
	return strings.HasPrefix(base, "libomp") || strings.HasPrefix(base, "libiomp5")
}

// activities maps the runtime's entry points (and its internal waits) to
// the activity of a thread inside them. The GOMP_* ones are its libgomp
// compatibility layer, which gcc-compiled code calls.
var activities = map[string]ompd.Activity{
	"__kmpc_barrier":            ompd.ActivityBarrierExplicit,
	"__kmp_join_barrier":        ompd.ActivityBarrierImplicit,
	"__kmp_join_call":           ompd.ActivityBarrierImplicit,
	"__kmpc_set_lock":           ompd.ActivityLock,
	"__kmpc_set_nest_lock":      ompd.ActivityLock,
	"omp_set_lock":              ompd.ActivityLock,
	"omp_set_nest_lock":         ompd.ActivityLock,
	"__kmpc_critical":           ompd.ActivityCritical,
	"__kmpc_critical_with_hint": ompd.ActivityCritical,
	"__kmpc_omp_taskwait":       ompd.ActivityTaskwait,
	"__kmpc_end_taskgroup":      ompd.ActivityTaskgroup,
	"__kmpc_ordered":            ompd.ActivityOrdered,
	"__kmp_fork_barrier":        ompd.ActivityIdle,
	"GOMP_barrier":              ompd.ActivityBarrierExplicit,
	"GOMP_critical_start":       ompd.ActivityCritical,
	"GOMP_critical_name_start":  ompd.ActivityCritical,
	"GOMP_taskwait":             ompd.ActivityTaskwait,
	"GOMP_taskgroup_end":        ompd.ActivityTaskgroup,
	"GOMP_ordered_start":        ompd.ActivityOrdered,
	"GOMP_parallel_end":         ompd.ActivityBarrierImplicit,
}

func (family) Activity(fn string) (ompd.Activity, bool) {
	a, ok := activities[fn]
	return a, ok
}

// forkEntries are the entry points a thread calls to start a parallel
// region.
var forkEntries = map[string]bool{
	"__kmpc_fork_call": true, "__kmpc_fork_call_if": true, "__kmpc_fork_teams": true,
	"GOMP_parallel": true, "GOMP_parallel_start": true,
}

func (family) ForkEntry(fn string) bool { return forkEntries[fn] }
func (family) ForkFunction() string     { return "__kmp_fork_call" }
func (family) GTIDSymbol() string       { return "__kmp_gtid" }

// Traceable: LLVM's runtimes built with OMPD support pass ompd_bp_*.
func (family) Traceable() bool { return true }

// HasLayoutSymbols reports whether an LLVM runtime names its OMPD layout
// variables itself (an OMPD build that keeps its symbols, or one whose
// debug file does); has reports whether it defines a symbol.
func HasLayoutSymbols(has func(string) bool) bool { return has("ompd_sizeof__kmp_info_t") }

// WarmTypes looks up the runtime type that describing a task needs first,
// so that the type layouts are indexed before anything is measured.
func WarmTypes(tl ompd.TypeLayouts) { _, _ = tl.TypeSize("kmp_taskdata_t") }
