package gomp

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// runtimeHint names libgomp to Callbacks.SymbolAddr.
const runtimeHint = "libgomp"

// AddressSpace is libgomp's state in one stopped target: its release, the
// layout of its structures, where its thread state and globals are.
type AddressSpace struct {
	cb ompd.Callbacks
	m  *mem

	// Image is what libgomp's loaded image says (version nodes, build-id).
	Image *Image
	// Release is the GCC release identified.
	Release Release
	// Layout holds the offsets in use: the release's table less what the
	// code contradicted, or, for an unknown release, what the code showed.
	Layout *Layout
	// Confirmed lists the layout keys libgomp's code confirmed.
	Confirmed []string
	// TLSOffset is the address of gomp_tls_data (a thread's struct
	// gomp_thread) minus the thread pointer, the same for every thread
	// (initial-exec TLS).
	TLSOffset int64
	// GlobalICV, CancelVar and MaxTaskPriorityVar are the addresses of
	// gomp_global_icv, gomp_cancel_var and gomp_max_task_priority_var, 0
	// when the code did not show them.
	GlobalICV, CancelVar, MaxTaskPriorityVar uint64
	// MaxActiveLevelsVar is the address of gomp_max_active_levels_var,
	// the global that holds max-active-levels-var in releases whose
	// task ICVs have no such field (GCC 10); 0 otherwise.
	MaxActiveLevelsVar uint64
	// CriticalLock and AtomicLock are the addresses of libgomp's static
	// mutexes of the unnamed critical section (critical.c's
	// default_lock) and of atomic constructs (atomic.c's atomic_lock),
	// the first rip-relative operands of GOMP_critical_start's and
	// GOMP_atomic_start's code; 0 when the code did not show them
	// (nothing is warned: only BlockedOn uses them).
	CriticalLock, AtomicLock uint64
	// mutexSites are the syscall instructions of libgomp's mutex wait
	// (gomp_mutex_lock_slow, the jump target of omp_set_lock), each with
	// the bytes its function has pushed there (-1: not known); imageEnd
	// is the end of libgomp's loaded image (its highest PT_LOAD). Found
	// by findMutexWait for BlockedOn.
	mutexSites map[uint64]int64
	imageEnd   uint64
	// threadNum is omp_get_thread_num's address, tlsSlot the GOT slot
	// its code reads the TLS offset from (Learned); given says the
	// address space was made from a Learned.
	threadNum, tlsSlot uint64
	given              bool
	// Warnings says what was dropped or could not be checked.
	Warnings []string
}

// Learned is what NewAddressSpace learned from libgomp's loaded image
// and code: all of an AddressSpace but its callbacks and the TLS offset,
// which the process's GOT holds. The same image at the same address gives
// it again (code and headers do not change as the process runs), so
// NewAddressSpace, given it for that image at the stop after a rehearsal,
// reads and decodes none of libgomp's code: three quarters of the read of
// 4 threads. The address spaces given it share its layout, image, lists
// and maps, which nothing changes once NewAddressSpace has returned.
type Learned struct {
	as AddressSpace // without callbacks
}

// Release is the libgomp release learned of.
func (l *Learned) Release() Release { return l.as.Release }

// Learned returns what as learned from libgomp's image and code, for
// NewAddressSpace; nil when as was made from a Learned, which has it all.
func (as *AddressSpace) Learned() *Learned {
	if as.given {
		return nil
	}
	l := &Learned{as: *as}
	l.as.cb, l.as.m, l.as.TLSOffset = nil, nil, 0
	l.as.Warnings = slices.Clone(as.Warnings)
	return l
}

// check is one offset, or a sum of offsets, that an exported function's
// code uses.
type check struct {
	fn    string
	keys  []string
	found int64
}

// NewAddressSpace finds libgomp through cb: its release (version nodes,
// build-id), its layout table, and checks the table against the offsets
// its exported functions use. It fails only when the thread state cannot be
// found at all (no omp_get_thread_num, or its code is not the expected
// one); the rest degrades with warnings. learned, when not nil, is what
// an address space of the same image learned (AddressSpace.Learned): when
// libgomp lies where it did then, only the TLS offset is read again.
func NewAddressSpace(cb ompd.Callbacks, learned *Learned) (*AddressSpace, error) {
	tn, err := cb.SymbolAddr("omp_get_thread_num", runtimeHint)
	if err != nil {
		return nil, fmt.Errorf("libgomp: omp_get_thread_num: %w", err)
	}
	if learned != nil && learned.as.threadNum == tn {
		as := learned.as
		as.cb, as.m, as.given = cb, &mem{cb}, true
		as.Warnings = slices.Clone(learned.as.Warnings)
		if err := as.readTLSOffset(); err != nil {
			return nil, err
		}
		return &as, nil
	}
	as := &AddressSpace{cb: cb, m: &mem{cb}, threadNum: tn}
	img, err := as.m.readImage(tn)
	if err != nil {
		as.warnf("libgomp's ELF image: %v", err)
	}
	if img == nil {
		img = &Image{}
	}
	as.Image = img
	as.Release, err = identify(img)
	if err != nil {
		return nil, fmt.Errorf("libgomp: release tables: %w", err)
	}
	if as.Release.Major != 0 {
		as.Layout, err = LayoutFor(as.Release.Major)
		if err != nil {
			as.warnf("libgomp of GCC %d: %v; only the offsets its code confirms are used", as.Release.Major, err)
		}
	} else {
		as.warnf("unknown libgomp release (version node %q, build-id %q): only the offsets its code confirms are used", as.Release.Node, img.BuildID)
	}
	if as.Layout == nil {
		as.Layout = &Layout{vals: map[string]int64{}}
	}

	// The TLS offset of gomp_tls_data: the GOT slot omp_get_thread_num
	// reads.
	code, err := as.m.decodeAt(tn)
	if err != nil && code == nil {
		return nil, fmt.Errorf("libgomp: omp_get_thread_num: %w", err)
	}
	slot, ok := gotSlot(code)
	if !ok {
		return nil, errors.New("libgomp: omp_get_thread_num does not read a TLS offset from the GOT")
	}
	as.tlsSlot = slot
	if err := as.readTLSOffset(); err != nil {
		return nil, err
	}

	as.runChecks(tn, code)
	as.CriticalLock = as.staticMutex("GOMP_critical_start")
	as.AtomicLock = as.staticMutex("GOMP_atomic_start")
	as.findMutexWait()
	as.Layout.seal()
	return as, nil
}

// readTLSOffset reads the TLS offset of gomp_tls_data from its GOT slot.
func (as *AddressSpace) readTLSOffset() error {
	off, err := as.m.u64(as.tlsSlot)
	if err != nil {
		return fmt.Errorf("libgomp: the GOT slot of gomp_tls_data at %#x: %w", as.tlsSlot, err)
	}
	as.TLSOffset = int64(off)
	return nil
}

func (as *AddressSpace) warnf(format string, args ...any) {
	as.Warnings = append(as.Warnings, fmt.Sprintf(format, args...))
}

// code decodes an exported function, nil with a warning when it cannot.
func (as *AddressSpace) code(fn string) []inst {
	addr, err := as.cb.SymbolAddr(fn, runtimeHint)
	if err != nil {
		as.warnf("libgomp: %s: %v", fn, err)
		return nil
	}
	c, err := as.m.decodeAt(addr)
	if err != nil {
		as.warnf("libgomp: code of %s: %v", fn, err)
		return nil
	}
	return c
}

// staticMutex is the address of the static mutex an entry point locks
// (gomp_mutex_lock inlined: lock cmpxchg on it, rip-relative), 0 when its
// code does not show one.
func (as *AddressSpace) staticMutex(fn string) uint64 {
	addr, err := as.cb.SymbolAddr(fn, runtimeHint)
	if err != nil {
		return 0
	}
	c, _ := as.m.decodeAt(addr)
	a, _ := ripOperand(c)
	return a
}

// runChecks collects what the exported getters reveal and applies it.
func (as *AddressSpace) runChecks(tnAddr uint64, tn []inst) {
	var checks []check
	add := func(fn string, found int64, ok bool, keys ...string) {
		if !ok {
			as.warnf("libgomp: %s's code does not show %s", fn, strings.Join(keys, "+"))
			return
		}
		checks = append(checks, check{fn: fn, keys: keys, found: found})
	}
	const (
		ts    = "gomp_thread.ts"
		task  = "gomp_thread.task"
		icv   = "gomp_task.icv"
		ticv  = "gomp_task_icv."
		state = "gomp_team_state."
	)
	// Order matters for an unknown release: each check may derive the one
	// key it lacks from the keys the earlier ones confirmed.
	if c := as.code("omp_get_team_size"); c != nil {
		imms := positive(addImms(c))
		add("omp_get_team_size", at(imms, 0), len(imms) >= 2, ts)
		add("omp_get_team_size", at(imms, 1), len(imms) >= 2, "gomp_team.prev_ts")
	}
	if c := as.code("omp_get_ancestor_thread_num"); c != nil {
		l := plainLoads(c)
		add("omp_get_ancestor_thread_num", at(l, len(l)-1), len(l) > 0, state+"team_id")
	}
	d, ok := fsDisp(tn)
	add("omp_get_thread_num", d, ok, ts, state+"team_id")
	for fn, key := range map[string]string{"omp_get_level": state + "level", "omp_get_active_level": state + "active_level"} {
		if c := as.code(fn); c != nil {
			d, ok := fsDisp(c)
			add(fn, d, ok, ts, key)
		}
	}
	if c := as.code("omp_get_num_threads"); c != nil {
		d, ok := fsDisp(c)
		add("omp_get_num_threads", d, ok, ts, state+"team")
		l := plainLoads(c)
		add("omp_get_num_threads", at(l, 0), len(l) > 0, "gomp_team.nthreads")
	}
	if c := as.code("omp_get_max_threads"); c != nil {
		d, ok := fsDisp(c)
		add("omp_get_max_threads", d, ok, task)
		d, ok = leaBase(c)
		add("omp_get_max_threads", d, ok, icv)
		l := plainLoads(c)
		add("omp_get_max_threads", at(l, len(l)-1), len(l) > 0, ticv+"nthreads_var")
		if a, ok := ripAddr(c, true); ok {
			as.GlobalICV = a
		} else {
			as.warnf("libgomp: omp_get_max_threads's code does not show gomp_global_icv")
		}
	}
	if c := as.code("omp_get_schedule"); c != nil {
		l := plainLoads(c)
		add("omp_get_schedule", at(l, 0), len(l) >= 2, ticv+"run_sched_var")
		add("omp_get_schedule", at(l, 1), len(l) >= 2, ticv+"run_sched_chunk_size")
	}
	if c := as.code("omp_get_max_active_levels"); c != nil {
		_, inTable := as.Layout.Get(ticv + "max_active_levels_var")
		_, perThread := fsDisp(c)
		if a, ok := ripAddr(c, false); ok && !inTable && !perThread {
			// A release that keeps it in a global, not in the
			// thread's task (GCC 10): the getter reads no thread
			// state.
			as.MaxActiveLevelsVar = a
		} else {
			l := plainLoads(c)
			add("omp_get_max_active_levels", at(l, len(l)-1), len(l) > 0, ticv+"max_active_levels_var")
		}
	}
	for fn, key := range map[string]string{
		"omp_get_default_device": "default_device_var",
		"omp_get_thread_limit":   "thread_limit_var",
		"omp_get_dynamic":        "dyn_var",
		"omp_get_proc_bind":      "bind_var",
	} {
		if c := as.code(fn); c != nil {
			l := plainLoads(c)
			add(fn, at(l, len(l)-1), len(l) > 0, ticv+key)
		}
	}
	if c := as.code("omp_in_final"); c != nil {
		l := plainLoads(c)
		add("omp_in_final", at(l, len(l)-1), len(l) > 0, "gomp_task.final_task")
	}
	if c := as.code("GOMP_barrier"); c != nil {
		d, ok := fsDisp(c)
		add("GOMP_barrier", d, ok, ts, state+"team")
		imms := positive(addImms(c))
		add("GOMP_barrier", at(imms, 0), len(imms) > 0, "gomp_team.barrier")
	}
	if c := as.code("omp_get_cancellation"); c != nil {
		as.CancelVar, _ = ripAddr(c, false)
	}
	if c := as.code("omp_get_max_task_priority"); c != nil {
		as.MaxTaskPriorityVar, _ = ripAddr(c, false)
	}
	// Sort the checks so that a release without a table derives in a
	// stable order: checks of fewer keys first.
	sort.SliceStable(checks, func(i, j int) bool { return len(checks[i].keys) < len(checks[j].keys) })
	as.apply(checks)
}

// apply compares each check with the layout. All keys known: equal confirms
// them, different drops them with a warning. One key unknown: the code
// gives it.
func (as *AddressSpace) apply(checks []check) {
	l := as.Layout
	confirmed := map[string]bool{}
	dropped := map[string]bool{}
	for _, c := range checks {
		var sum int64
		missing := ""
		nmissing := 0
		for _, k := range c.keys {
			if v, ok := l.vals[k]; ok {
				sum += v
			} else {
				missing = k
				nmissing++
			}
		}
		switch {
		case nmissing == 0 && sum == c.found:
			for _, k := range c.keys {
				confirmed[k] = true
			}
		case nmissing == 0:
			as.warnf("libgomp: %s uses %d for %s, the layout says %d: dropped", c.fn, c.found, strings.Join(c.keys, "+"), sum)
			for _, k := range c.keys {
				delete(l.vals, k)
				dropped[k] = true
			}
		case nmissing == 1 && !dropped[missing]:
			l.vals[missing] = c.found - sum
			confirmed[missing] = true
			for _, k := range c.keys {
				confirmed[k] = true
			}
		}
	}
	// A confirmed key that a later check dropped is not confirmed.
	for k := range dropped {
		delete(confirmed, k)
	}
	if l.Release == 0 {
		// Unknown release: keep only what the code showed, with the
		// fields' sizes, which are those of their C types in every
		// release (the newest table's).
		sizes, err := LayoutFor(newestTable)
		for k := range l.vals {
			if !confirmed[k] {
				delete(l.vals, k)
			}
		}
		for k := range confirmed {
			if err != nil {
				break
			}
			if v, ok := sizes.Get("sizeof " + k); ok {
				l.vals["sizeof "+k] = v
			}
		}
	}
	for k := range confirmed {
		as.Confirmed = append(as.Confirmed, k)
	}
	sort.Strings(as.Confirmed)
}

func positive(v []int64) []int64 {
	var out []int64
	for _, x := range v {
		if x > 0 {
			out = append(out, x)
		}
	}
	return out
}

func at(v []int64, i int) int64 {
	if i < 0 || i >= len(v) {
		return 0
	}
	return v[i]
}
