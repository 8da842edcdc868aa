package waits

import (
	"reflect"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

func ip(i int) *int       { return &i }
func sp(s string) *string { return &s }
func frame(line int) *inspect.FrameRef {
	return &inspect.FrameRef{Function: "work", File: "/src/solver.c", Line: line}
}

// lockWait is a runtime-given wait for a lock with a known holder.
func lockWait(obj string, holder int) *inspect.BlockedOn {
	return &inspect.BlockedOn{What: "lock", Object: obj, Holder: ip(holder), Source: "runtime"}
}

func thread(tid int, state string, line int, bo *inspect.BlockedOn) inspect.Thread {
	return inspect.Thread{OSTID: tid, OpenMP: true, State: sp(state), Region: sp("0xteam"), UserFrame: frame(line), BlockedOn: bo}
}

func TestDeadlockOfTwoLocks(t *testing.T) {
	rep := &inspect.Report{
		Runtime: inspect.Runtime{StateSource: "runtime"},
		Threads: []inspect.Thread{
			thread(4711, "wait_lock", 40, lockWait("0xb", 4712)),
			thread(4712, "wait_lock", 52, lockWait("0xa", 4711)),
			thread(4713, "work_parallel", 60, nil),
		},
		Regions: []inspect.Region{{ID: "0xteam", Level: 1, TeamSize: 3, Threads: []int{4711, 4712, 4713}}},
	}
	Analyze(rep)
	wantEdges := []inspect.WaitEdge{{From: 4711, To: 4712, What: "lock", Object: "0xb"}, {From: 4712, To: 4711, What: "lock", Object: "0xa"}}
	if !reflect.DeepEqual(rep.WaitGraph, wantEdges) {
		t.Errorf("wait graph %+v, want %+v", rep.WaitGraph, wantEdges)
	}
	want := []inspect.Diagnosis{{
		Kind: "deadlock", Threads: []int{4711, 4712}, Objects: []string{"0xb", "0xa"},
		Text: "threads 4711 and 4712 are deadlocked: 4711 waits for lock 0xb (solver.c:40), held by 4712; 4712 waits for lock 0xa (solver.c:52), held by 4711",
	}}
	if !reflect.DeepEqual(rep.Diagnosis, want) {
		t.Errorf("diagnosis\n %+v\nwant\n %+v", rep.Diagnosis, want)
	}
	bo := rep.Threads[0].BlockedOn
	if bo.Location != "solver.c:40" || len(bo.WaitingFor) != 1 || bo.WaitingFor[0] != (inspect.WaitTarget{OSTID: 4712, Location: "solver.c:52", Doing: "waits for lock 0xa"}) {
		t.Errorf("4711 blocked on %+v", bo)
	}
	if rep.Threads[2].BlockedOn != nil {
		t.Errorf("running thread blocked on %+v", rep.Threads[2].BlockedOn)
	}
}

// A lock held by a thread that runs user code is no deadlock: the holder
// has no edge, whatever waits for it.
func TestHolderRunningIsNoDeadlock(t *testing.T) {
	rep := &inspect.Report{
		Threads: []inspect.Thread{
			thread(1, "wait_lock", 10, lockWait("0xa", 2)),
			thread(2, "work_parallel", 20, nil),
		},
	}
	Analyze(rep)
	if len(rep.Diagnosis) != 0 {
		t.Errorf("diagnosis %+v, want none", rep.Diagnosis)
	}
	if len(rep.WaitGraph) != 1 {
		t.Errorf("wait graph %+v", rep.WaitGraph)
	}
}

// A barrier whose straggler waits for a lock held by a thread at the
// barrier: a deadlock through the barrier, and the barrier is blocked.
func TestBarrierStragglerOnLock(t *testing.T) {
	rep := &inspect.Report{
		Threads: []inspect.Thread{
			thread(1, "wait_barrier_explicit", 10, &inspect.BlockedOn{What: "barrier", Object: "0xteam", Source: "runtime"}),
			thread(2, "wait_barrier_explicit", 11, nil),
			thread(3, "wait_lock", 30, lockWait("0xa", 1)),
		},
		Regions: []inspect.Region{{ID: "0xteam", Level: 1, TeamSize: 3, Location: "/src/solver.c:5", Threads: []int{1, 2, 3}}},
	}
	Analyze(rep)
	if got := rep.Threads[1].BlockedOn; got == nil || got.What != "barrier" || got.Object != "0xteam" || got.Source != "state" {
		t.Fatalf("thread 2 blocked on %+v, want the barrier of 0xteam from its state", got)
	}
	// Both waiters at the barrier wait for the one member that has not
	// arrived.
	wantFor := []inspect.WaitTarget{{OSTID: 3, Location: "solver.c:30", Doing: "waits for lock 0xa"}}
	for _, i := range []int{0, 1} {
		if got := rep.Threads[i].BlockedOn.WaitingFor; !reflect.DeepEqual(got, wantFor) {
			t.Errorf("thread %d waits for %+v, want %+v", i+1, got, wantFor)
		}
	}
	var kinds []string
	for _, d := range rep.Diagnosis {
		kinds = append(kinds, d.Kind)
	}
	if !reflect.DeepEqual(kinds, []string{"deadlock", "barrier_blocked"}) {
		t.Fatalf("diagnosis kinds %v: %+v", kinds, rep.Diagnosis)
	}
	if d := rep.Diagnosis[0]; !reflect.DeepEqual(d.Threads, []int{1, 3}) ||
		d.Text != "threads 1 and 3 are deadlocked: 1 waits for the barrier of region 0xteam (solver.c:10); 3 waits for lock 0xa (solver.c:30), held by 1" {
		t.Errorf("deadlock %+v", d)
	}
	if d := rep.Diagnosis[1]; d.Text != "the barrier of region 0xteam (solver.c:5) cannot complete: 3 waits for lock 0xa (solver.c:30), held by 1" {
		t.Errorf("barrier %+v", d)
	}
}

// A lock held by a thread waiting at a barrier whose other member runs: no
// deadlock is proven, the holder's wait is said.
func TestLockHeldAtBarrier(t *testing.T) {
	rep := &inspect.Report{
		Threads: []inspect.Thread{
			thread(1, "wait_barrier_explicit", 10, nil),
			thread(2, "work_parallel", 20, nil),
			thread(3, "wait_lock", 30, lockWait("0xa", 1)),
		},
		Regions: []inspect.Region{{ID: "0xteam", Level: 1, TeamSize: 2, Threads: []int{1, 2}}},
	}
	rep.Threads[2].Region = sp("0xother")
	Analyze(rep)
	if len(rep.Diagnosis) != 1 || rep.Diagnosis[0].Kind != "lock_held_at_barrier" ||
		rep.Diagnosis[0].Text != "lock 0xa is held by 1, which is blocked: 1 waits for the barrier of region 0xteam (solver.c:10); waiting for it: 3" {
		t.Errorf("diagnosis %+v", rep.Diagnosis)
	}
}

// Waits whose holder is not recorded are listed, never turned into a
// deadlock.
func TestHolderUnknown(t *testing.T) {
	rep := &inspect.Report{
		Threads: []inspect.Thread{
			thread(1, "wait_lock", 10, &inspect.BlockedOn{What: "lock", Object: "0xa", HolderUnknown: "libgomp's simple locks record no owner", Source: "runtime"}),
			thread(2, "wait_critical", 20, nil),
		},
	}
	Analyze(rep)
	want := []inspect.Diagnosis{{Kind: "holder_unknown", Threads: []int{1, 2}, Objects: []string{"0xa"},
		Text: "1 waits for lock 0xa (solver.c:10); 2 waits for critical section (solver.c:20); the holders are not known (see each thread's blocked_on.holder_unknown)"}}
	if !reflect.DeepEqual(rep.Diagnosis, want) {
		t.Errorf("diagnosis\n %+v\nwant\n %+v", rep.Diagnosis, want)
	}
	if bo := rep.Threads[1].BlockedOn; bo == nil || bo.What != "critical" || bo.Source != "state" || bo.HolderUnknown == "" {
		t.Errorf("thread 2 blocked on %+v", bo)
	}
}

// A taskwait waits for the threads running its children and counts the
// queued ones.
func TestTaskwait(t *testing.T) {
	rep := &inspect.Report{
		Threads: []inspect.Thread{
			{OSTID: 1, OpenMP: true, State: sp("wait_taskwait"), Task: sp("0xparent"), UserFrame: frame(10)},
			{OSTID: 2, OpenMP: true, State: sp("wait_lock"), Task: sp("0xchild1"), UserFrame: frame(20), BlockedOn: lockWait("0xa", 3)},
			{OSTID: 3, OpenMP: true, State: sp("work_parallel"), UserFrame: frame(30)},
		},
		Tasks: []inspect.Task{
			{ID: "0xparent", Kind: "implicit", Status: "running", Thread: ip(1)},
			{ID: "0xchild1", Kind: "explicit", Status: "running", Thread: ip(2), Parent: sp("0xparent")},
			{ID: "0xchild2", Kind: "explicit", Status: "queued", Parent: sp("0xparent")},
		},
	}
	Analyze(rep)
	bo := rep.Threads[0].BlockedOn
	if bo == nil || bo.What != "taskwait" || bo.Object != "0xparent" || bo.QueuedChildren != 1 ||
		!reflect.DeepEqual(bo.WaitingFor, []inspect.WaitTarget{{OSTID: 2, Location: "solver.c:20", Doing: "waits for lock 0xa"}}) {
		t.Errorf("thread 1 blocked on %+v", bo)
	}
	if len(rep.Diagnosis) != 0 {
		t.Errorf("diagnosis %+v, want none (the lock's holder runs)", rep.Diagnosis)
	}
}

func TestCyclesOrdered(t *testing.T) {
	edges := []inspect.WaitEdge{{From: 9, To: 7}, {From: 7, To: 8}, {From: 8, To: 9}, {From: 5, To: 5}, {From: 1, To: 2}}
	got := cycles(edges)
	want := [][]int{{5}, {7, 8, 9}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cycles %v, want %v", got, want)
	}
}

// A thread listed twice (a damaged core, say), once waiting at a barrier
// and once not: it is never made to wait for itself.
func TestBarrierNeverWaitsForItself(t *testing.T) {
	rep := &inspect.Report{
		Threads: []inspect.Thread{
			thread(1, "wait_barrier_explicit", 10, &inspect.BlockedOn{What: "barrier", Object: "0xteam", Source: "runtime"}),
			thread(2, "work_parallel", 20, nil),
			thread(1, "work_parallel", 11, nil),
		},
		Regions: []inspect.Region{{ID: "0xteam", Level: 1, TeamSize: 2, Threads: []int{1, 2}}},
	}
	Analyze(rep)
	bo := rep.Threads[0].BlockedOn
	if bo == nil || len(bo.WaitingFor) != 1 || bo.WaitingFor[0].OSTID != 2 {
		t.Fatalf("thread 1 blocked on %+v; want it waiting for thread 2 only", bo)
	}
	for _, e := range rep.WaitGraph {
		if e.From == e.To {
			t.Errorf("wait graph edge %+v from a thread to itself", e)
		}
	}
}
