package llvm_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/ompd/llvm"
	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/core"
	"github.com/ompd-inspect/ompd-inspect/target/ptrace"
)

// blockedCase is one way of running deadlock.c.
type blockedCase struct {
	name string
	opts fixture.StartOptions
	// checks: simple locks and critical sections record their owner:
	// the process runs with KMP_CONSISTENCY_CHECK=all, or with a direct
	// lock kind (KMP_LOCK_KIND=futex), whose lock word names its owner.
	checks bool
	// noStates: the process runs without OMP_DEBUG=enabled.
	noStates bool
	// fromCall: the lock waits come from the threads' calls into the
	// runtime: without state tracking, or with a lock kind whose waiters
	// set no state (all but the queuing lock).
	fromCall bool
	// symbols: the runtime's symbols give the locks of atomic constructs
	// (the OMPD build); a stripped runtime's do not.
	symbols bool
}

// TestBlockedOnDeadlock: deadlock.c on the OMPD build and on Debian's
// stripped libomp 13 to 19 (type layouts from their release tables), with
// KMP_CONSISTENCY_CHECK=all and (OMPD build, libomp 19) without, with
// state tracking and (OMPD build, libomp 19) without it, with queuing,
// futex, ticket and DRDPA locks, live and from a gcore core: every waiter of
// deadlock.c says exactly what it waits for (the user's lock its call
// passed, the critical section by name) and who holds it (or, where libomp
// records no owner, exactly why that is not known), and the two
// deadlocked threads each hold the lock the other waits for.
func TestBlockedOnDeadlock(t *testing.T) {
	stock := fixture.StockLibomp(19)
	cases := []blockedCase{
		{name: "ompd/checks", checks: true, symbols: true,
			opts: fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled", "KMP_CONSISTENCY_CHECK=all"}}},
		{name: "ompd/default", symbols: true,
			opts: fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}}},
		{name: "stock19/default",
			opts: fixture.StartOptions{Stripped: true, Runtime: stock, Env: []string{"OMP_DEBUG=enabled"}}},
		{name: "ompd/stacks", symbols: true, noStates: true, fromCall: true, opts: fixture.StartOptions{}},
		{name: "ompd/stacks-checks", checks: true, symbols: true, noStates: true, fromCall: true,
			opts: fixture.StartOptions{Env: []string{"KMP_CONSISTENCY_CHECK=all"}}},
		{name: "ompd/stacks-futex", checks: true, symbols: true, noStates: true, fromCall: true,
			opts: fixture.StartOptions{Env: []string{"KMP_LOCK_KIND=futex"}}},
		{name: "ompd/ticket-checks", checks: true, symbols: true, fromCall: true,
			opts: fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled", "KMP_CONSISTENCY_CHECK=all", "KMP_LOCK_KIND=ticket"}}},
		{name: "ompd/stacks-drdpa-checks", checks: true, symbols: true, noStates: true, fromCall: true,
			opts: fixture.StartOptions{Env: []string{"KMP_CONSISTENCY_CHECK=all", "KMP_LOCK_KIND=drdpa"}}},
		{name: "stock19/stacks-futex", checks: true, noStates: true, fromCall: true,
			opts: fixture.StartOptions{Stripped: true, Runtime: stock, Env: []string{"KMP_LOCK_KIND=futex"}}},
		{name: "stock19/stacks-checks", checks: true, noStates: true, fromCall: true,
			opts: fixture.StartOptions{Stripped: true, Runtime: stock, Env: []string{"KMP_CONSISTENCY_CHECK=all"}}},
		{name: "stock13/stacks-checks", checks: true, noStates: true, fromCall: true,
			opts: fixture.StartOptions{Stripped: true, Runtime: fixture.StockLibomp(13), Env: []string{"KMP_CONSISTENCY_CHECK=all"}}},
		{name: "stock19/futex", checks: true, fromCall: true,
			opts: fixture.StartOptions{Stripped: true, Runtime: stock, Env: []string{"OMP_DEBUG=enabled", "KMP_LOCK_KIND=futex"}}},
	}
	for _, v := range fixture.StockVersions {
		cases = append(cases, blockedCase{name: "stock" + strconv.Itoa(v) + "/checks", checks: true,
			opts: fixture.StartOptions{Stripped: true, Runtime: fixture.StockLibomp(v), Env: []string{"OMP_DEBUG=enabled", "KMP_CONSISTENCY_CHECK=all"}}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := fixture.Start(t, "deadlock", c.opts)
			t.Run("live", func(t *testing.T) {
				proc, err := ptrace.Attach(p.PID, ptrace.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer proc.Close()
				checkDeadlock(t, c, proc, p.Ready)
			})
			t.Run("gcore", func(t *testing.T) {
				cr, err := core.Open(p.Gcore(t), core.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer cr.Close()
				checkDeadlock(t, c, cr, p.Ready)
			})
		})
	}
}

// attachLLVM initializes the native OMPD on a target, as the report
// builder does.
func attachLLVM(t *testing.T, tg target.Target) (*llvm.AddressSpace, *inspect.Callbacks) {
	t.Helper()
	rt, err := inspect.FindRuntime(tg)
	if err != nil {
		t.Fatal(err)
	}
	know, err := inspect.KnowledgeOf(rt)
	if err != nil {
		t.Fatal(err)
	}
	cb := inspect.NewCallbacks(tg, rt)
	cb.UseKnowledge(know)
	if err := know.CheckMemory(tg, rt); err != nil {
		t.Fatal(err)
	}
	as, err := llvm.ProcessInitialize(cb, rt.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return as, cb
}

func checkDeadlock(t *testing.T, c blockedCase, tg target.Target, ready fixture.Ready) {
	t.Helper()
	as, _ := attachLLVM(t, tg)
	if as.StateTracking() == c.noStates {
		t.Fatalf("state tracking %v; want %v", as.StateTracking(), !c.noStates)
	}
	tidOf := map[uint64]int{}
	tpOf := map[int]uint64{}
	for _, th := range tg.Threads() {
		tidOf[th.ThreadPointer()] = th.TID
		tpOf[th.TID] = th.ThreadPointer()
	}
	wait := func(role string) *ompd.Wait {
		t.Helper()
		tid := ready.Int(t, role)
		h, err := llvm.Backend(as).ThreadHandle(ompd.ThreadIDPthread, tpOf[tid])
		if err != nil {
			t.Fatalf("%s (tid %d): %v", role, tid, err)
		}
		wt, ok := h.(ompd.Waiter)
		if !ok {
			t.Fatalf("the native backend's thread handle %T is no ompd.Waiter", h)
		}
		bo, err := wt.BlockedOn()
		if err != nil {
			t.Fatalf("%s (tid %d): BlockedOn: %v", role, tid, err)
		}
		return bo
	}
	holderTID := func(w *ompd.Wait) int {
		if w.Holder == 0 {
			return 0
		}
		tid, ok := tidOf[w.Holder]
		if !ok {
			t.Errorf("holder %#x is none of the target's threads", w.Holder)
		}
		return tid
	}
	noHolder := func(role string, w *ompd.Wait, want ...string) {
		t.Helper()
		if w.Holder != 0 {
			t.Errorf("%s: holder %d (%#x), want none recorded", role, holderTID(w), w.Holder)
		}
		for _, s := range want {
			if !strings.Contains(w.HolderUnknown, s) {
				t.Errorf("%s: holder_unknown %q, want it to say %q", role, w.HolderUnknown, s)
			}
		}
	}
	heldBy := func(role string, w *ompd.Wait, holder string) {
		t.Helper()
		if got, want := holderTID(w), ready.Int(t, holder); got != want || w.HolderUnknown != "" {
			t.Errorf("%s: held by tid %d (%q), want %s (tid %d)", role, got, w.HolderUnknown, holder, want)
		}
	}
	kind := func(role string, w *ompd.Wait, k ompd.WaitKind) {
		t.Helper()
		if w == nil {
			t.Fatalf("%s: BlockedOn() = nil, want a %s wait", role, k)
		}
		if w.What != k || w.Object == 0 {
			t.Errorf("%s: waits for %s at %#x, want %s at a lock", role, w.What, w.Object, k)
		}
		if w.FromCall != c.fromCall {
			t.Errorf("%s: found from the thread's call %v, want %v", role, w.FromCall, c.fromCall)
		}
	}

	// The two deadlocked threads: each waits for a lock, held by the
	// other.
	a, b := wait("dl_a"), wait("dl_b")
	kind("dl_a", a, ompd.WaitLock)
	kind("dl_b", b, ompd.WaitLock)
	if a.Object == b.Object {
		t.Errorf("dl_a and dl_b wait for the same lock %#x", a.Object)
	}
	// Each waits for the user's omp_lock_t its call passed: lock_b for
	// dl_a, lock_a for dl_b.
	if got := readyAddr(t, ready, "lock_b"); got != a.Object {
		t.Errorf("dl_a waits for %#x; lock_b is at %#x", a.Object, got)
	}
	if got := readyAddr(t, ready, "lock_a"); got != b.Object {
		t.Errorf("dl_b waits for %#x; lock_a is at %#x", b.Object, got)
	}

	atomicNote := !c.symbols // a stripped runtime does not locate its atomic locks
	if c.checks {
		heldBy("dl_a", a, "dl_b")
		heldBy("dl_b", b, "dl_a")
	} else {
		why := []string{"only with KMP_CONSISTENCY_CHECK=all; this process runs without it"}
		if atomicNote {
			why = append(why, "locks of atomic constructs")
		}
		noHolder("dl_a", a, why...)
		noHolder("dl_b", b, why...)
	}

	// The nestable lock records its owner always.
	n := wait("nest_waiter")
	kind("nest_waiter", n, ompd.WaitNestLock)
	heldBy("nest_waiter", n, "nest_holder")
	if got := readyAddr(t, ready, "nest_lock"); got != n.Object {
		t.Errorf("nest_waiter waits for %#x; nest_lock is at %#x", n.Object, got)
	}

	// The critical sections.
	cw, nw := wait("crit_waiter"), wait("named_waiter")
	kind("crit_waiter", cw, ompd.WaitCritical)
	kind("named_waiter", nw, ompd.WaitCritical)
	if cw.Object == nw.Object {
		t.Errorf("the unnamed and the named critical section have the same lock %#x", cw.Object)
	}
	// Each is its kmp_critical_name, the object clang names after the
	// critical section.
	if cw.Name != "" || nw.Name != "fx_named" {
		t.Errorf("critical sections named %q and %q; want the unnamed one and fx_named", cw.Name, nw.Name)
	}
	if c.checks {
		heldBy("crit_waiter", cw, "crit_holder")
		heldBy("named_waiter", nw, "named_holder")
	} else {
		why := "libomp records the owner of a critical section only with KMP_CONSISTENCY_CHECK=all; this process runs without it"
		noHolder("crit_waiter", cw, why)
		noHolder("named_waiter", nw, why)
	}

	// The holders run user code: they wait for nothing.
	for _, role := range []string{"nest_holder", "crit_holder", "named_holder"} {
		if w := wait(role); w != nil {
			t.Errorf("%s: BlockedOn() = %+v, want nil (it runs user code)", role, w)
		}
	}
}

// readyAddr is the address READY gives under key.
func readyAddr(t *testing.T, ready fixture.Ready, key string) uint64 {
	t.Helper()
	addr, err := strconv.ParseUint(strings.TrimPrefix(ready.Get(t, key), "0x"), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// symbolLog is inspect.Callbacks that records the symbols looked up.
type symbolLog struct {
	*inspect.Callbacks
	names map[string]bool
}

func (s *symbolLog) SymbolAddr(name, hint string) (ompd.Address, error) {
	s.names[name] = true
	return s.Callbacks.SymbolAddr(name, hint)
}

// Asking what threads that take no lock wait for does not read the
// runtime's environment block (KMP_CONSISTENCY_CHECK is read only to
// explain a lock that records no owner): wide.c on Debian's libomp 19
// without state tracking, whose every thread's call into the runtime is
// looked at.
func TestBlockedOnLeavesEnvironment(t *testing.T) {
	p := fixture.Start(t, "wide", fixture.StartOptions{Stripped: true, Runtime: fixture.StockLibomp(19), Env: []string{"FX_WIDE=4"}})
	proc, err := ptrace.Attach(p.PID, ptrace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Close()
	_, cb := attachLLVM(t, proc)
	rt, _ := inspect.FindRuntime(proc)
	log := &symbolLog{Callbacks: cb, names: map[string]bool{}}
	as, err := llvm.ProcessInitialize(log, rt.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if as.StateTracking() {
		t.Fatal("state tracking on without OMP_DEBUG=enabled")
	}
	asked := 0
	for _, th := range proc.Threads() {
		h, err := llvm.Backend(as).ThreadHandle(ompd.ThreadIDPthread, th.ThreadPointer())
		if err != nil {
			t.Fatalf("thread %d: %v", th.TID, err)
		}
		w, ok := h.(ompd.Waiter)
		if !ok {
			t.Fatal("the native thread handle says nothing of waits")
		}
		if bo, err := w.BlockedOn(); err != nil || bo != nil {
			t.Errorf("thread %d (no lock taken) waits for %+v, %v; want nothing", th.TID, bo, err)
		}
		asked++
	}
	if asked != 4 || !log.names["__kmp_threads"] {
		t.Fatalf("%d threads asked, symbols looked up %v", asked, log.names)
	}
	if log.names["ompd_env_block"] {
		t.Error("the environment block was read")
	}
	if _, err := as.DisplayControlVars(); err != nil || !log.names["ompd_env_block"] {
		t.Errorf("DisplayControlVars: %v, env block looked up %v", err, log.names["ompd_env_block"])
	}
}
