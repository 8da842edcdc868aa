package main

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

// waitForMode is what libomp records of testdata/waitfor.c's waits.
type waitForMode struct {
	// states: OMP_DEBUG=enabled: each lock waiter's state and wait id.
	// Without it only the threads' stacks show waits (and the locks
	// their callers passed).
	states bool
	// owners: every simple lock names its owner: KMP_CONSISTENCY_CHECK=all
	// (the queuing lock's owner_id; without state tracking it is reached
	// through the table of indirect locks) or a direct lock kind
	// (KMP_LOCK_KIND=futex: the lock word holds the owner).
	owners bool
	// unknown is a simple lock's holder_unknown when !owners.
	unknown string
}

// noChecks is why a queuing lock's holder is not known without checks.
const noChecks = "libomp records the owner of a simple lock only with KMP_CONSISTENCY_CHECK=all; this process runs without it"

// TestWaitForLLVM: testdata/waitfor.c on libomp holds (a) a lock whose
// holder runs in user code, (b) a deadlock through a barrier (a straggler
// waits for a lock held by a thread at the barrier) and (c) a taskwait with
// a running child (on a thread blocked on a lock held by a parked thread
// outside the team), a queued child (kept out by a mutexinoutset mutex the
// running child holds) and a blocked one (a dependence). The report says
// exactly what each thread waits for (the user's omp_lock_t, which each
// thread's caller passed), whom, where, from what source; the wait graph
// and the diagnosis follow from what libomp records: with
// KMP_CONSISTENCY_CHECK=all, or with futex locks, the owners of simple
// locks, so the deadlock; with queuing locks without checks no holder and
// no deadlock. Live, from a gcore core and from a kernel core; on the OMPD
// build with and without state tracking and on Debian's stripped libomp
// 19 (without state tracking its table of indirect locks is recovered).
func TestWaitForLLVM(t *testing.T) {
	checks := []string{"OMP_DEBUG=enabled", "KMP_CONSISTENCY_CHECK=all"}
	futex := []string{"KMP_LOCK_KIND=futex"}
	configs := []struct {
		name string
		opts fixture.StartOptions
		mode waitForMode
	}{
		{"ompd_checks", fixture.StartOptions{Env: checks}, waitForMode{states: true, owners: true}},
		{"ompd_nochecks", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}}, waitForMode{states: true, unknown: noChecks}},
		{"ompd_stacks", fixture.StartOptions{}, waitForMode{unknown: noChecks}},
		{"ompd_stacks_checks", fixture.StartOptions{Env: []string{"KMP_CONSISTENCY_CHECK=all"}}, waitForMode{owners: true}},
		{"ompd_stacks_futex", fixture.StartOptions{Env: futex}, waitForMode{owners: true}},
		{"stock19_checks", fixture.StartOptions{Env: checks, Stripped: true, Runtime: fixture.StockLibomp(19)}, waitForMode{states: true, owners: true}},
		{"stock19_stacks_futex", fixture.StartOptions{Env: futex, Stripped: true, Runtime: fixture.StockLibomp(19)}, waitForMode{owners: true}},
		{"stock19_stacks_checks", fixture.StartOptions{Env: []string{"KMP_CONSISTENCY_CHECK=all"}, Stripped: true, Runtime: fixture.StockLibomp(19)}, waitForMode{owners: true}},
	}
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			p := fixture.Start(t, "waitfor", c.opts)
			reportEachSource(t, p, "waitfor", c.opts, func(t *testing.T, r *inspect.Report, ready fixture.Ready) {
				checkWaitFor(t, r, ready, c.mode)
			})
		})
	}
}

func checkWaitFor(t *testing.T, r *inspect.Report, ready fixture.Ready, mode waitForMode) {
	t.Helper()
	tid := func(role string) int { return ready.Int(t, role) }
	line := func(name string) string {
		return fmt.Sprintf("waitfor.c:%d", fixture.SourceLine(t, "waitfor.c", name))
	}
	userLock := func(key string) string {
		v, err := strconv.ParseUint(strings.TrimPrefix(ready[key], "0x"), 16, 64)
		if err != nil {
			t.Fatalf("READY %s=%q: %v", key, ready[key], err)
		}
		return fmt.Sprintf("%#x", v)
	}
	busyHolder, busyWaiter := tid("busy_holder"), tid("busy_waiter")
	barHolder, straggler := tid("bar_holder"), tid("straggler")
	taskwaiter, runner, extHolder := tid("taskwaiter"), tid("runner"), tid("ext_holder")

	blocked := func(role int) *inspect.BlockedOn {
		t.Helper()
		th := threadOf(t, r, role)
		if th.BlockedOn == nil {
			t.Fatalf("thread %d: not blocked (state %s)", role, str(th.State))
		}
		return th.BlockedOn
	}
	for _, role := range []string{"busy_holder", "ext_holder"} {
		if th := threadOf(t, r, tid(role)); th.BlockedOn != nil {
			t.Errorf("%s %d runs or sleeps in user code; blocked_on %+v", role, tid(role), *th.BlockedOn)
		}
	}

	// What libomp records, by mode.
	lockSource, barrierSource := "runtime", "state"
	if !mode.states {
		lockSource, barrierSource = "stack", "stack"
	}
	unknown := mode.unknown // a simple lock's holder_unknown
	// libomp never sets the state wait_taskwait (a thread in
	// __kmpc_omp_taskwait stays in work_parallel): only its stack shows
	// the taskwait, in every mode.
	const taskwaitSource = "stack"

	// The lock objects are the user's omp_lock_t variables the waiters'
	// callers passed (the program prints their addresses).
	objBusy, objBar, objExt := userLock("busy_lock"), userLock("bar_lock"), userLock("ext_lock")
	lockDoing := func(obj string) string { return "waits for lock " + obj }
	// What a running thread does: its state, "running" without one.
	stateDoing := func(role int) string {
		if !mode.states {
			return "running"
		}
		return str(threadOf(t, r, role).State)
	}
	if mode.states {
		if s := stateDoing(busyHolder); s != "work_parallel" {
			t.Errorf("busy_holder %d in state %s; want work_parallel", busyHolder, s)
		}
		if s := stateDoing(extHolder); s != "work_serial" {
			t.Errorf("ext_holder %d in state %s; want work_serial", extHolder, s)
		}
	}

	regionB := str(threadOf(t, r, barHolder).Region)
	if got := str(threadOf(t, r, straggler).Region); got != regionB || regionB == "<null>" {
		t.Fatalf("bar_holder in region %s, straggler in %s; want one region", regionB, got)
	}
	if reg := regionByID(t, r, regionB); !sameLoc(reg.Location, line("region_b")) || !slices.Equal(reg.Threads, []int{barHolder, straggler}) {
		t.Errorf("region %s at %s of %v; want %s of [%d %d]", regionB, reg.Location, reg.Threads, line("region_b"), barHolder, straggler)
	}
	taskT := str(threadOf(t, r, taskwaiter).Task)

	holderIf := func(h int) *int {
		if mode.owners {
			return &h
		}
		return nil
	}
	targetsIf := func(w ...inspect.WaitTarget) []inspect.WaitTarget {
		if mode.owners {
			return w
		}
		return []inspect.WaitTarget{}
	}
	want := map[int]inspect.BlockedOn{
		// (a) the holder runs: the waiter waits for it, nothing more.
		busyWaiter: {What: "lock", Object: objBusy, Location: line("busy_wait"), Holder: holderIf(busyHolder), HolderUnknown: unknown,
			WaitingFor: targetsIf(inspect.WaitTarget{OSTID: busyHolder, Location: line("busy_spin"), Doing: stateDoing(busyHolder)}),
			Source:     lockSource},
		// (b) each of the two waits for the other.
		barHolder: {What: "barrier", Object: regionB, Location: line("bar_wait"),
			WaitingFor: []inspect.WaitTarget{{OSTID: straggler, Location: line("straggler_wait"), Doing: lockDoing(objBar)}},
			Source:     barrierSource},
		straggler: {What: "lock", Object: objBar, Location: line("straggler_wait"), Holder: holderIf(barHolder), HolderUnknown: unknown,
			WaitingFor: targetsIf(inspect.WaitTarget{OSTID: barHolder, Location: line("bar_wait"), Doing: "waits at a barrier"}),
			Source:     lockSource},
		// (c) the taskwait waits for the runner of D and for C and E,
		// which no thread runs; the runner for the parked ext_holder.
		taskwaiter: {What: "taskwait", Object: taskT, Location: line("taskwait"),
			WaitingFor:     []inspect.WaitTarget{{OSTID: runner, Location: line("ext_wait"), Doing: lockDoing(objExt)}},
			QueuedChildren: 2, Source: taskwaitSource},
		runner: {What: "lock", Object: objExt, Location: line("ext_wait"), Holder: holderIf(extHolder), HolderUnknown: unknown,
			WaitingFor: targetsIf(inspect.WaitTarget{OSTID: extHolder, Location: line("park"), Doing: stateDoing(extHolder)}),
			Source:     lockSource},
	}
	for role, w := range want {
		if got := blocked(role); !reflect.DeepEqual(*got, w) {
			t.Errorf("thread %d blocked on\n  %s\nwant\n  %s", role, fmtBlocked(*got), fmtBlocked(w))
		}
	}

	// (c) the taskwait's children, as the runtime shows them: D running
	// on the runner, C queued (ready, in the taskwaiter's deque), E
	// blocked on D.
	kids := map[string]inspect.Task{}
	for _, k := range r.Tasks {
		if k.Kind == "explicit" && k.Parent != nil && *k.Parent == taskT {
			kids[k.Location] = k
		}
	}
	d, c, e := kids[line("task_d")], kids[line("task_c")], kids[line("task_e")]
	if len(kids) != 3 || d.ID == "" || c.ID == "" || e.ID == "" {
		t.Fatalf("children of the taskwaiter's task %s: %+v; want three, at %s, %s and %s", taskT, kids, line("task_d"), line("task_c"), line("task_e"))
	}
	if d.Status != "running" || !reflect.DeepEqual(d.Thread, &runner) || str(threadOf(t, r, runner).Task) != d.ID {
		t.Errorf("child D %s: %s on %v; want running on the runner %d", d.ID, d.Status, deref(d.Thread), runner)
	}
	if c.Status != "queued" || c.Thread != nil || len(c.WaitsFor) != 0 {
		t.Errorf("child C %s: %s on %v waiting for %v; want queued", c.ID, c.Status, deref(c.Thread), c.WaitsFor)
	}
	if e.Status != "blocked" || e.Thread != nil || !slices.Equal(e.WaitsFor, []string{d.ID}) {
		t.Errorf("child E %s: %s on %v waiting for %v; want blocked on D %s", e.ID, e.Status, deref(e.Thread), e.WaitsFor, d.ID)
	}

	// The wait graph: one edge per thread waited for.
	wantEdges := []inspect.WaitEdge{
		{From: barHolder, To: straggler, What: "barrier", Object: regionB},
		{From: taskwaiter, To: runner, What: "taskwait", Object: taskT},
	}
	if mode.owners {
		wantEdges = append(wantEdges,
			inspect.WaitEdge{From: busyWaiter, To: busyHolder, What: "lock", Object: objBusy},
			inspect.WaitEdge{From: straggler, To: barHolder, What: "lock", Object: objBar},
			inspect.WaitEdge{From: runner, To: extHolder, What: "lock", Object: objExt})
	}
	sort.Slice(wantEdges, func(i, j int) bool {
		if wantEdges[i].From != wantEdges[j].From {
			return wantEdges[i].From < wantEdges[j].From
		}
		return wantEdges[i].To < wantEdges[j].To
	})
	if !reflect.DeepEqual(r.WaitGraph, wantEdges) {
		t.Errorf("wait graph\n  %+v\nwant\n  %+v", r.WaitGraph, wantEdges)
	}

	// The diagnosis. With owners recorded: the deadlock of bar_holder and
	// the straggler (its objects along the cycle, from the lower tid) and
	// the barrier it blocks; (a) and (c) prove nothing wrong: their
	// holders run or sleep in user code. Without owners no deadlock:
	// the barrier the straggler blocks, and the three waits whose holder
	// is not known.
	type diag struct {
		kind    string
		threads []int
		objects []string
	}
	barrierBlocked := diag{"barrier_blocked", []int{straggler}, []string{regionB}}
	var wantDiag []diag
	if mode.owners {
		objs := []string{regionB, objBar}
		if straggler < barHolder {
			objs = []string{objBar, regionB}
		}
		wantDiag = []diag{{"deadlock", []int{min(barHolder, straggler), max(barHolder, straggler)}, objs}, barrierBlocked}
	} else {
		waiters := []int{busyWaiter, straggler, runner}
		slices.Sort(waiters)
		objs := []string{objBusy, objBar, objExt}
		wantDiag = []diag{barrierBlocked, {"holder_unknown", waiters, objs}}
	}
	var got []diag
	for _, dg := range r.Diagnosis {
		objs := dg.Objects
		if dg.Kind == "holder_unknown" { // in the order of the report's threads
			objs = slices.Sorted(slices.Values(objs))
		}
		got = append(got, diag{dg.Kind, dg.Threads, objs})
		if dg.Kind == "holder_unknown" && !strings.HasSuffix(dg.Text, "the holders are not known ("+unknown+")") {
			t.Errorf("holder_unknown %q: want it to end with why: %q", dg.Text, unknown)
		}
	}
	for i := range wantDiag {
		if wantDiag[i].kind == "holder_unknown" {
			wantDiag[i].objects = slices.Sorted(slices.Values(wantDiag[i].objects))
		}
	}
	if !reflect.DeepEqual(got, wantDiag) {
		t.Errorf("diagnosis %+v\nwant %+v\n(texts: %+v)", got, wantDiag, r.Diagnosis)
	}
}

func fmtBlocked(b inspect.BlockedOn) string {
	return fmt.Sprintf("%s %q at %s holder %v unknown %q for %+v queued %d name %q from %s",
		b.What, b.Object, b.Location, deref(b.Holder), b.HolderUnknown, b.WaitingFor, b.QueuedChildren, b.Name, b.Source)
}
