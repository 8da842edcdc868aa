package llvm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// icvTable lists the ICVs, in the order and with the scopes of LLVM's own
// OMPD library, so that ids agree between the two. The ompd-* names are
// the aliases that library keeps for OpenMP 5.0.
var icvTable = []ompd.ICV{
	{Name: "dyn-var", Scope: ompd.ScopeThread},
	{Name: "run-sched-var", Scope: ompd.ScopeTask, String: true},
	{Name: "stacksize-var", Scope: ompd.ScopeAddressSpace},
	{Name: "cancel-var", Scope: ompd.ScopeAddressSpace},
	{Name: "max-task-priority-var", Scope: ompd.ScopeAddressSpace},
	{Name: "debug-var", Scope: ompd.ScopeAddressSpace},
	{Name: "nthreads-var", Scope: ompd.ScopeThread},
	{Name: "display-affinity-var", Scope: ompd.ScopeAddressSpace},
	{Name: "affinity-format-var", Scope: ompd.ScopeAddressSpace, String: true},
	{Name: "default-device-var", Scope: ompd.ScopeThread},
	{Name: "tool-var", Scope: ompd.ScopeAddressSpace},
	{Name: "tool-libraries-var", Scope: ompd.ScopeAddressSpace, String: true},
	{Name: "tool-verbose-init-var", Scope: ompd.ScopeAddressSpace, String: true},
	{Name: "levels-var", Scope: ompd.ScopeParallel},
	{Name: "active-levels-var", Scope: ompd.ScopeParallel},
	{Name: "thread-limit-var", Scope: ompd.ScopeTask},
	{Name: "max-active-levels-var", Scope: ompd.ScopeTask},
	{Name: "bind-var", Scope: ompd.ScopeTask},
	{Name: "num-procs-var", Scope: ompd.ScopeAddressSpace},
	{Name: "ompd-num-procs-var", Scope: ompd.ScopeAddressSpace},
	{Name: "thread-num-var", Scope: ompd.ScopeThread},
	{Name: "ompd-thread-num-var", Scope: ompd.ScopeThread},
	{Name: "final-task-var", Scope: ompd.ScopeTask},
	{Name: "ompd-final-var", Scope: ompd.ScopeTask},
	{Name: "ompd-final-task-var", Scope: ompd.ScopeTask},
	{Name: "implicit-task-var", Scope: ompd.ScopeTask},
	{Name: "ompd-implicit-var", Scope: ompd.ScopeTask},
	{Name: "ompd-implicit-task-var", Scope: ompd.ScopeTask},
	{Name: "team-size-var", Scope: ompd.ScopeParallel},
	{Name: "ompd-team-size-var", Scope: ompd.ScopeParallel},
}

// icvOps name the operation of reading each ICV of icvTable, for errors:
// made once, not at each of the tens of thousands of reads of a report.
var icvOps = func() []string {
	ops := make([]string, len(icvTable))
	for i, icv := range icvTable {
		ops[i] = "reading " + icv.Name
	}
	return ops
}()

// EnumerateICVs lists the ICVs (ompd_enumerate_icvs), IDs from 1.
func (as *AddressSpace) EnumerateICVs() []ompd.ICV {
	out := make([]ompd.ICV, len(icvTable))
	for i, icv := range icvTable {
		icv.ID = ompd.ICVID(i + 1)
		out[i] = icv
	}
	return out
}

func lookupICV(id ompd.ICVID) (ompd.ICV, error) {
	if id < 1 || int(id) > len(icvTable) {
		return ompd.ICV{}, fail("ompd_get_icv_from_scope", ompd.RCBadInput, fmt.Errorf("no ICV with id %d", id))
	}
	icv := icvTable[id-1]
	icv.ID = id
	return icv, nil
}

// ICVValue reads ICV id from handle, which must be the handle of the ICV's
// scope: *AddressSpace, *Thread, *Parallel or *Task (ompd_get_icv_from_scope
// and ompd_get_icv_string_from_scope in one).
func (as *AddressSpace) ICVValue(handle any, id ompd.ICVID) (ompd.Value, error) {
	icv, err := lookupICV(id)
	if err != nil {
		return ompd.Value{}, err
	}
	op := icvOps[id-1]
	num := func(v int64, err error) (ompd.Value, error) {
		var e *ompd.Error
		if errors.As(err, &e) {
			return ompd.Value{}, err // it says what was read already
		}
		if err != nil {
			return ompd.Value{}, fail(op, ompd.RCError, err)
		}
		return ompd.Value{Num: v}, nil
	}
	str := func(s string, err error) (ompd.Value, error) {
		if err != nil {
			return ompd.Value{}, fail(op, ompd.RCError, err)
		}
		return ompd.Value{Str: s, IsString: true}, nil
	}
	m := as.mem
	switch icv.Scope {
	case ompd.ScopeAddressSpace:
		if _, ok := handle.(*AddressSpace); !ok {
			return ompd.Value{}, fail(op, ompd.RCBadInput, fmt.Errorf("%s has address_space scope; got %T", icv.Name, handle))
		}
		switch icv.Name {
		case "stacksize-var":
			return num(m.globalValue("__kmp_stksize"))
		case "cancel-var":
			return num(m.globalValue("__kmp_omp_cancellation"))
		case "max-task-priority-var":
			return num(m.globalValue("__kmp_max_task_priority"))
		case "debug-var":
			if as.state != 0 {
				return ompd.Value{Num: 1}, nil
			}
			return ompd.Value{Num: 0}, nil
		case "display-affinity-var":
			return num(m.globalValue("__kmp_display_affinity"))
		case "affinity-format-var":
			return str(m.globalString("__kmp_affinity_format"))
		case "tool-var":
			return num(m.globalValue("__kmp_tool"))
		case "tool-libraries-var":
			return str(m.globalString("__kmp_tool_libraries"))
		case "tool-verbose-init-var":
			return str(m.globalString("__kmp_tool_verbose_init"))
		case "num-procs-var", "ompd-num-procs-var":
			return num(m.globalValue("__kmp_avail_proc"))
		}
	case ompd.ScopeThread:
		t, ok := handle.(*Thread)
		if !ok {
			return ompd.Value{}, fail(op, ompd.RCBadInput, fmt.Errorf("%s has thread scope; got %T", icv.Name, handle))
		}
		switch icv.Name {
		case "thread-num-var", "ompd-thread-num-var":
			n, err := t.ThreadNum()
			return num(int64(n), err)
		}
		td, err := m.readField(t.th, "kmp_base_info_t", "th_current_task")
		if err != nil {
			return ompd.Value{}, fail(op, ompd.RCError, err)
		}
		if td == 0 {
			return ompd.Value{}, fail(op, ompd.RCUnavailable, fmt.Errorf("thread at %#x has no current task", t.th))
		}
		icvs, err := m.field(td, "kmp_taskdata_t", "td_icvs")
		if err != nil {
			return ompd.Value{}, fail(op, ompd.RCError, err)
		}
		switch icv.Name {
		case "dyn-var":
			return num(m.readFieldInt(icvs, "kmp_internal_control_t", "dynamic"))
		case "default-device-var":
			return num(m.readFieldInt(icvs, "kmp_internal_control_t", "default_device"))
		case "nthreads-var":
			nproc, err := m.readFieldInt(icvs, "kmp_internal_control_t", "nproc")
			if err != nil {
				return ompd.Value{}, fail(op, ompd.RCError, err)
			}
			return as.nestedList(op, td, nproc, "__kmp_nested_nth", "kmp_nested_nthreads_t", "nth")
		}
	case ompd.ScopeParallel:
		p, ok := handle.(*Parallel)
		if !ok {
			return ompd.Value{}, fail(op, ompd.RCBadInput, fmt.Errorf("%s has parallel scope; got %T", icv.Name, handle))
		}
		switch icv.Name {
		case "levels-var":
			v, err := p.Level()
			return num(int64(v), err)
		case "active-levels-var":
			v, err := p.ActiveLevel()
			return num(int64(v), err)
		case "team-size-var", "ompd-team-size-var":
			v, err := p.TeamSize()
			return num(int64(v), err)
		}
	case ompd.ScopeTask:
		k, ok := handle.(*Task)
		if !ok {
			return ompd.Value{}, fail(op, ompd.RCBadInput, fmt.Errorf("%s has task scope; got %T", icv.Name, handle))
		}
		switch icv.Name {
		case "final-task-var", "ompd-final-var", "ompd-final-task-var":
			f, err := k.Flags()
			return num(b2i(f.Final), err)
		case "implicit-task-var", "ompd-implicit-var", "ompd-implicit-task-var":
			f, err := k.Flags()
			return num(b2i(!f.Explicit), err)
		}
		icvs, err := m.field(k.td, "kmp_taskdata_t", "td_icvs")
		if err != nil {
			return ompd.Value{}, fail(op, ompd.RCError, err)
		}
		switch icv.Name {
		case "thread-limit-var":
			return num(m.readFieldInt(icvs, "kmp_internal_control_t", "thread_limit"))
		case "max-active-levels-var":
			return num(m.readFieldInt(icvs, "kmp_internal_control_t", "max_active_levels"))
		case "run-sched-var":
			return str(as.runSched(icvs))
		case "bind-var":
			bind, err := m.readFieldInt(icvs, "kmp_internal_control_t", "proc_bind")
			if err != nil {
				return ompd.Value{}, fail(op, ompd.RCError, err)
			}
			return as.nestedList(op, k.td, bind, "__kmp_nested_proc_bind", "kmp_nested_proc_bind_t", "bind_types")
		}
	}
	return ompd.Value{}, fail(op, ompd.RCUnsupported, nil)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// nestedList completes a list ICV (nthreads-var, bind-var): the task's own
// value, then the runtime's nested list entries for the levels below the
// task's team level. One element gives a number, more give the
// comma-separated list LLVM's library prints.
func (as *AddressSpace) nestedList(op string, td ompd.Address, first int64, global, typ, arrField string) (ompd.Value, error) {
	m := as.mem
	gaddr, err := as.cb.SymbolAddr(global, m.lay.hint)
	if err != nil {
		return ompd.Value{}, fail(op, ompd.RCError, err)
	}
	used, err := m.readFieldInt(gaddr, typ, "used")
	if err != nil {
		return ompd.Value{}, fail(op, ompd.RCError, err)
	}
	teamPtr, err := m.readField(td, "kmp_taskdata_t", "td_team")
	if err != nil {
		return ompd.Value{}, fail(op, ompd.RCError, err)
	}
	var level int64
	if teamPtr != 0 {
		team, err := m.field(teamPtr, "kmp_team_p", "t")
		if err != nil {
			return ompd.Value{}, fail(op, ompd.RCError, err)
		}
		if level, err = m.readFieldInt(team, "kmp_base_team_t", "t_level"); err != nil {
			return ompd.Value{}, fail(op, ompd.RCError, err)
		}
	}
	if level < 0 {
		return ompd.Value{}, fail(op, ompd.RCError, fmt.Errorf("team level %d is negative", level))
	}
	if used <= 0 || level+1 >= used {
		return ompd.Value{Num: first}, nil
	}
	if used > 1024 {
		return ompd.Value{}, fail(op, ompd.RCError, fmt.Errorf("%s.used is %d, more than 1024 levels", global, used))
	}
	arr, err := m.readField(gaddr, typ, arrField)
	if err != nil {
		return ompd.Value{}, fail(op, ompd.RCError, err)
	}
	parts := []string{strconv.FormatInt(first, 10)}
	for l := level + 1; l < used; l++ {
		v, err := m.int(arr+uint64(l)*uint64(as.sizes.Int), uint64(as.sizes.Int))
		if err != nil {
			return ompd.Value{}, fail(op, ompd.RCError, fmt.Errorf("reading %s.%s[%d]: %w", global, arrField, l, err))
		}
		parts = append(parts, strconv.FormatInt(v, 10))
	}
	return ompd.Value{Str: strings.Join(parts, ","), IsString: true}, nil
}

// Schedule kinds of LLVM's runtime (enum sched_type) and its modifier bits.
const (
	schStaticChunked          = 33
	schStatic                 = 34
	schDynamicChunked         = 35
	schGuidedChunked          = 36
	schAuto                   = 38
	schTrapezoidal            = 39
	schStaticGreedy           = 40
	schStaticBalanced         = 41
	schGuidedIterativeChunked = 42
	schGuidedAnalyticalChunk  = 43
	schStaticSteal            = 44
	schModMonotonic           = 1 << 29
	schModNonmonotonic        = 1 << 30
)

// runSched formats run-sched-var as LLVM's library does: an optional
// "monotonic:" or "nonmonotonic:" modifier, the kind, and ",chunk" (0 for
// unchunked static); an unknown kind gives the empty string.
func (as *AddressSpace) runSched(icvs ompd.Address) (string, error) {
	m := as.mem
	sched, err := m.field(icvs, "kmp_internal_control_t", "sched")
	if err != nil {
		return "", err
	}
	kind, err := m.readFieldInt(sched, "kmp_r_sched_t", "r_sched_type")
	if err != nil {
		return "", err
	}
	chunk, err := m.readFieldInt(sched, "kmp_r_sched_t", "chunk")
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if kind&schModMonotonic != 0 {
		b.WriteString("monotonic:")
	} else if kind&schModNonmonotonic != 0 {
		b.WriteString("nonmonotonic:")
	}
	switch kind &^ (schModMonotonic | schModNonmonotonic) {
	case schStatic, schStaticGreedy, schStaticBalanced:
		b.WriteString("static")
		chunk = 0
	case schStaticChunked:
		b.WriteString("static")
	case schDynamicChunked:
		b.WriteString("dynamic")
	case schGuidedChunked, schGuidedIterativeChunked, schGuidedAnalyticalChunk:
		b.WriteString("guided")
	case schAuto:
		b.WriteString("auto")
	case schTrapezoidal:
		b.WriteString("trapezoidal")
	case schStaticSteal:
		b.WriteString("static_steal")
	default:
		return "", nil
	}
	fmt.Fprintf(&b, ",%d", int32(chunk))
	return b.String(), nil
}
