package gomp

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/target"
)

// TestBlockedOnLiveAndGcore: blocked.c (gcc-12), every kind of wait at
// once, live and from a gcore core: BlockedOn gives exactly what each role
// thread waits for, with the addresses the program printed.
func TestBlockedOnLiveAndGcore(t *testing.T) {
	exe := build(t, "blocked", "gcc-12", "blocked.c")
	p := fixture.Start(t, "blocked", fixture.StartOptions{Exe: exe, Env: []string{"OMP_WAIT_POLICY=passive"}})
	liveAndGcore(t, p, func(t *testing.T, tg target.Target) { checkBlocked(t, tg, p.Ready) })
}

func checkBlocked(t *testing.T, tg target.Target, ready fixture.Ready) {
	t.Helper()
	cb, err := newTestCallbacks(tg)
	if err != nil {
		t.Fatal(err)
	}
	as, err := NewAddressSpace(cb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if as.CriticalLock == 0 || as.AtomicLock == 0 || as.CriticalLock == as.AtomicLock {
		t.Fatalf("default_lock %#x, atomic_lock %#x", as.CriticalLock, as.AtomicLock)
	}
	if len(as.mutexSites) == 0 || as.imageEnd <= as.Image.Base {
		t.Fatalf("mutex wait's syscalls %v, image end %#x", as.mutexSites, as.imageEnd)
	}
	hex := func(key string) uint64 {
		v, err := strconv.ParseUint(strings.TrimPrefix(ready[key], "0x"), 16, 64)
		if err != nil {
			t.Fatalf("READY %s=%q: %v", key, ready[key], err)
		}
		return v
	}
	tps := map[int]uint64{}
	for _, th := range tg.Threads() {
		tps[th.TID] = th.ThreadPointer()
	}
	tp := func(key string) uint64 {
		tid, err := strconv.Atoi(ready[key])
		if err != nil || tps[tid] == 0 {
			t.Fatalf("READY %s=%q: no such thread", key, ready[key])
		}
		return tps[tid]
	}
	thread := func(tp uint64) *Thread {
		th, err := as.Thread(tp)
		if err != nil {
			t.Fatal(err)
		}
		return th
	}
	// The unnamed critical section and the atomic lock are held with a
	// waiter: -1.
	for _, a := range []uint64{as.CriticalLock, as.AtomicLock} {
		if v, err := as.m.u32(a); err != nil || int32(v) != -1 {
			t.Errorf("mutex at %#x holds %d (%v), want -1 (locked, waiters)", a, int32(v), err)
		}
	}

	want := map[uint64]*ompd.Wait{}
	lockTeam := thread(tp("lock_ab")).Team
	want[tp("lock_ab")] = &ompd.Wait{What: ompd.WaitLock, Object: hex("lock_b"), HolderUnknown: noOwnerLock}
	want[tp("lock_ba")] = &ompd.Wait{What: ompd.WaitLock, Object: hex("lock_a"), HolderUnknown: noOwnerLock}
	for _, s := range strings.Split(ready["barrier"], ",") {
		tid, _ := strconv.Atoi(s)
		if thread(tps[tid]).Team != lockTeam || lockTeam == 0 {
			t.Errorf("barrier thread %d is not in the lock threads' team %#x", tid, lockTeam)
		}
		want[tps[tid]] = &ompd.Wait{What: ompd.WaitBarrier, Object: lockTeam, Team: lockTeam}
	}
	want[tp("nest_waiter")] = &ompd.Wait{What: ompd.WaitNestLock, Object: hex("nest"), Holder: tp("nest_holder")}
	want[tp("crit_waiter")] = &ompd.Wait{What: ompd.WaitCritical, Object: hex("crit_x"), Name: "blocked_x", HolderUnknown: noOwnerCritical}
	want[tp("ucrit_waiter")] = &ompd.Wait{What: ompd.WaitCritical, Object: as.CriticalLock, HolderUnknown: noOwnerCritical}
	want[tp("atomic_waiter")] = &ompd.Wait{What: ompd.WaitAtomic, Object: as.AtomicLock, HolderUnknown: noOwnerAtomic}

	// The taskwait's task is thread 0's implicit task; the taskgroup is
	// its task's current one; the ordered wait's object is the loop both
	// ordered threads share.
	tw := thread(tp("taskwait"))
	if impl, err := as.ImplicitTask(tw.Team, 0); err != nil || tw.TeamID != 0 || impl != tw.Task {
		t.Errorf("taskwait thread: number %d task %#x, want thread 0's implicit task %#x (%v)", tw.TeamID, tw.Task, impl, err)
	}
	want[tw.TP] = &ompd.Wait{What: ompd.WaitTaskwait, Object: tw.Task}
	tgt := thread(tp("taskgroup"))
	group, err := as.field(tgt.Task, "gomp_task.taskgroup")
	if err != nil || group == 0 {
		t.Fatalf("taskgroup thread's taskgroup: %#x %v", group, err)
	}
	want[tgt.TP] = &ompd.Wait{What: ompd.WaitTaskgroup, Object: group}
	ts, _ := as.Layout.Get("gomp_thread.ts")
	ws := map[string]uint64{}
	for _, k := range []string{"ordered_holder", "ordered_waiter"} {
		ws[k], err = as.field(thread(tp(k)).Addr+uint64(ts), "gomp_team_state.work_share")
		if err != nil || ws[k] == 0 {
			t.Fatalf("%s's work share: %#x %v", k, ws[k], err)
		}
	}
	if ws["ordered_holder"] != ws["ordered_waiter"] {
		t.Errorf("the ordered threads' work shares differ: %v", ws)
	}
	want[tp("ordered_waiter")] = &ompd.Wait{What: ompd.WaitOrdered, Object: ws["ordered_waiter"]}

	// Everyone else does not wait in a futex: nil.
	for _, th := range tg.Threads() {
		got, err := as.BlockedOn(thread(th.ThreadPointer()))
		if err != nil {
			t.Errorf("thread %d: %v", th.TID, err)
			continue
		}
		w := want[th.ThreadPointer()]
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("thread %d: BlockedOn\n %+v\nwant\n %+v", th.TID, got, w)
		}
	}
	if n := len(tg.Threads()); n != 19 {
		t.Errorf("%d threads, want 19", n)
	}

	// Through the backend's thread handle.
	h, err := Backend(as).ThreadHandle(ompd.ThreadIDPthread, tp("nest_waiter"))
	if err != nil {
		t.Fatal(err)
	}
	if w, ok := h.(ompd.Waiter); !ok {
		t.Errorf("%T is no ompd.Waiter", h)
	} else if got, err := w.BlockedOn(); err != nil || got == nil || got.Holder != tp("nest_holder") {
		t.Errorf("BlockedOn through the handle: %+v %v", got, err)
	}
}

// fakeWaiter serves a fakeState with registers (every thread asleep in
// futex(2) on futex[tp] at a syscall of the fake mutex wait) and a thread
// list.
type fakeWaiter struct {
	*fakeMem
	futex map[uint64]uint64
	tps   []uint64
	rip   uint64
}

func (f *fakeWaiter) ThreadContext(kind ompd.ThreadIDKind, id uint64) (ompd.ThreadContext, error) {
	return id, nil
}

func (f *fakeWaiter) ThreadRegisters(ctx ompd.ThreadContext) (Registers, error) {
	tp := ctx.(uint64)
	if fx, ok := f.futex[tp]; ok {
		return Registers{Rip: f.rip, OrigRax: sysFutex, Rdi: fx, FSBase: tp}, nil
	}
	return Registers{Rip: f.rip, FSBase: tp}, nil
}

func (f *fakeWaiter) ThreadPointers() []uint64 { return f.tps }

// TestNestLockHolderUnknown: a nest lock whose owner matches no thread,
// and one whose owner field is torn (0 while locked, or no task's ICVs),
// give no holder and say why; an owner that is a thread's task gives it.
func TestNestLockHolderUnknown(t *testing.T) {
	s := newState(t)
	fw := &fakeWaiter{fakeMem: s.f, futex: map[uint64]uint64{}, tps: []uint64{s.tp0, s.tp1, s.tp2}}
	s.as.cb = fw
	lock := s.f.alloc(16)
	owner := lock + s.off("omp_nest_lock_t.owner")
	icv := s.off("gomp_task.icv")
	check := func(what string, holder uint64, unknown string) {
		t.Helper()
		h, why := s.as.nestLockHolder(lock)
		if h != holder || why != unknown {
			t.Errorf("%s: holder %#x %q, want %#x %q", what, h, why, holder, unknown)
		}
	}
	// Owned by thr2's implicit task (its current task).
	s.f.put(owner, s.implicit(s.t2, 1)+icv, 8)
	check("thr2's task", s.tp2, "")
	// Owned by T2's thread 0's implicit task, run by thr1 (T2's thread
	// 0); thr0 is thread 0 of T1, whose implicit task 1 (thr1's) is
	// not thr0's.
	s.f.put(owner, s.t2impl0+icv, 8)
	check("thr1's task", s.tp1, "")
	// T1's implicit task 1: thr1 runs it as thread 0 of T2, the team it
	// forked as thread 1 of T1.
	s.f.put(owner, s.t1impl1+icv, 8)
	check("thr1's outer implicit task", s.tp1, "")
	// A queued task: nobody runs it.
	s.f.put(owner, s.a+icv, 8)
	check("a queued task", 0, fmt.Sprintf("the owner the nest lock records (the ICVs of task %#x) matches no thread", s.a))
	// Torn: no owner while locked; a pointer below any task's ICVs.
	s.f.put(owner, 0, 8)
	check("no owner", 0, "the nest lock records no owner (it is being acquired or released)")
	s.f.put(owner, 8, 8)
	check("a small owner", 0, "the owner the nest lock records (0x8) is no task's ICVs")
	// Without a thread list.
	s.f.put(owner, s.implicit(s.t2, 1)+icv, 8)
	s.as.cb = s.f
	check("no thread list", 0, fmt.Sprintf("the owner the nest lock records (the ICVs of task %#x) cannot be matched: the callbacks list no threads", s.implicit(s.t2, 1)))
}

// TestBlockedOnFakeWaits: the waits told by the futex alone, on the fake
// state: a taskwait, a taskgroup, an ordered wait, the critical and atomic
// locks; a futex nothing explains, outside libgomp's mutex wait, is nil.
func TestBlockedOnFakeWaits(t *testing.T) {
	s := newState(t)
	code := s.f.alloc(16)
	s.f.put(code, 0x0f, 1) // syscall
	s.f.put(code+1, 0x05, 1)
	fw := &fakeWaiter{fakeMem: s.f, futex: map[uint64]uint64{}, rip: code + 2}
	s.as.cb = fw
	thr2 := func() *Thread {
		th, err := s.as.Thread(s.tp2)
		if err != nil {
			t.Fatal(err)
		}
		return th
	}
	check := func(what string, want *ompd.Wait) {
		t.Helper()
		got, err := s.as.BlockedOn(thr2())
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %+v %v, want %+v", what, got, err, want)
		}
	}
	task := s.implicit(s.t2, 1)
	tw := s.f.alloc(int64(s.off("sizeof gomp_taskwait")))
	s.set(task, "gomp_task.taskwait", tw)
	fw.futex[s.tp2] = tw + s.off("gomp_taskwait.taskwait_sem")
	check("taskwait", &ompd.Wait{What: ompd.WaitTaskwait, Object: task})
	tg := s.f.alloc(int64(s.off("sizeof gomp_taskgroup")))
	s.set(task, "gomp_task.taskgroup", tg)
	fw.futex[s.tp2] = tg + s.off("gomp_taskgroup.taskgroup_sem")
	check("taskgroup", &ompd.Wait{What: ompd.WaitTaskgroup, Object: tg})
	fw.futex[s.tp2] = s.thr2 + s.off("gomp_thread.release") // ordered_release[1]
	check("ordered", &ompd.Wait{What: ompd.WaitOrdered})
	s.as.CriticalLock, s.as.AtomicLock = 0x601000, 0x601004
	fw.futex[s.tp2] = 0x601000
	check("critical", &ompd.Wait{What: ompd.WaitCritical, Object: 0x601000, HolderUnknown: noOwnerCritical})
	fw.futex[s.tp2] = 0x601004
	check("atomic", &ompd.Wait{What: ompd.WaitAtomic, Object: 0x601004, HolderUnknown: noOwnerAtomic})
	fw.futex[s.tp2] = 0x602000
	check("another futex", nil)
	delete(fw.futex, s.tp2)
	check("no futex", nil)
}
