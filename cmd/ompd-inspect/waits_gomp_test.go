package main

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

// TestWhyThreadsWaitGomp: testdata/gomp/blocked.c (gcc-12) holds a thread
// blocked on every kind of object libgomp lets a thread wait for; the
// report says, for each, exactly what it waits for, where, and who holds
// it when libgomp records it, live, from a gcore core and from a kernel
// core. The addresses and the roles' tids are the program's own (READY).
func TestWhyThreadsWaitGomp(t *testing.T) {
	c := gompCase{name: "blocked", compiler: "gcc-12", srcs: []string{"blocked.c"}}
	exe := gompBuild(t, &c)
	opts := fixture.StartOptions{Exe: exe, Env: []string{"OMP_WAIT_POLICY=passive"}}
	p := fixture.Start(t, "blocked", opts)
	reportEachSource(t, p, "blocked", opts, checkBlockedGomp)
}

func checkBlockedGomp(t *testing.T, r *inspect.Report, ready fixture.Ready) {
	t.Helper()
	tid := func(role string) int {
		v, err := strconv.Atoi(ready[role])
		if err != nil {
			t.Fatalf("READY %s=%q: %v", role, ready[role], err)
		}
		return v
	}
	tids := func(role string) []int {
		var out []int
		for _, s := range strings.Split(ready[role], ",") {
			v, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("READY %s=%q: %v", role, ready[role], err)
			}
			out = append(out, v)
		}
		return out
	}
	addr := func(key string) string {
		v, err := strconv.ParseUint(strings.TrimPrefix(ready[key], "0x"), 16, 64)
		if err != nil {
			t.Fatalf("READY %s=%q: %v", key, ready[key], err)
		}
		return fmt.Sprintf("%#x", v)
	}
	line := func(name string) string {
		return fmt.Sprintf("blocked.c:%d", fixture.SourceLine(t, "gomp/blocked.c", name))
	}
	blocked := func(role int) *inspect.BlockedOn {
		th := threadOf(t, r, role)
		if th.BlockedOn == nil {
			t.Fatalf("thread %d: not blocked (state %s)", role, str(th.State))
		}
		return th.BlockedOn
	}
	regionOf := func(role int) string { return str(threadOf(t, r, role).Region) }
	const simple = "libgomp's simple locks record no owner"
	const crit = "libgomp's critical sections record no owner"

	type want struct {
		role          int
		what, object  string
		name, loc     string
		holder        *int
		holderUnknown string
	}
	nestHolder := tid("nest_holder")
	wants := []want{
		{tid("lock_ab"), "lock", addr("lock_b"), "", line("set_lock"), nil, simple},
		{tid("lock_ba"), "lock", addr("lock_a"), "", line("set_lock"), nil, simple},
		{tid("nest_waiter"), "nest_lock", addr("nest"), "", line("set_nest"), &nestHolder, ""},
		{tid("crit_waiter"), "critical", addr("crit_x"), "blocked_x", line("crit_x"), nil, crit},
		{tid("ucrit_waiter"), "critical", "", "", line("ucrit"), nil, crit},
		{tid("atomic_waiter"), "atomic", "", "", line("atomic"), nil, ""},
		{tid("taskwait"), "taskwait", "", "", line("taskwait"), nil, ""},
	}
	for _, b := range tids("barrier") {
		wants = append(wants, want{b, "barrier", regionOf(tid("lock_ab")), "", line("barrier"), nil, ""})
	}
	for _, w := range wants {
		bo := blocked(w.role)
		if bo.What != w.what || (w.object != "" && bo.Object != w.object) || bo.Name != w.name || bo.Location != w.loc ||
			!reflect.DeepEqual(bo.Holder, w.holder) || (w.holderUnknown != "" && bo.HolderUnknown != w.holderUnknown) || bo.Source != "runtime" {
			t.Errorf("thread %d: blocked on %+v (holder %v); want %s %s %q at %s, holder %v, holder_unknown %q, from the runtime",
				w.role, *bo, deref(bo.Holder), w.what, w.object, w.name, w.loc, deref(w.holder), w.holderUnknown)
		}
	}
	// The unnamed critical section and the atomic lock are libgomp's own
	// statics: two distinct addresses, neither the named section's.
	u, a := blocked(tid("ucrit_waiter")).Object, blocked(tid("atomic_waiter")).Object
	if u == "" || a == "" || u == a || u == addr("crit_x") {
		t.Errorf("unnamed critical %q and atomic %q: want two distinct addresses of libgomp", u, a)
	}
	// The barrier waits for the two threads that wait for locks.
	lockers := []int{tid("lock_ab"), tid("lock_ba")}
	slices.Sort(lockers)
	for _, b := range tids("barrier") {
		var got []int
		for _, w := range blocked(b).WaitingFor {
			got = append(got, w.OSTID)
			if !strings.HasPrefix(w.Doing, "waits for lock 0x") || w.Location != line("set_lock") {
				t.Errorf("barrier thread %d waits for %+v; want a thread waiting for a lock at %s", b, w, line("set_lock"))
			}
		}
		if !slices.Equal(got, lockers) {
			t.Errorf("barrier thread %d waits for %v; want %v", b, got, lockers)
		}
	}
	// The taskwait waits for the thread running its child: one of the
	// runners.
	tw := blocked(tid("taskwait"))
	if len(tw.WaitingFor) != 1 || !slices.Contains(tids("runners"), tw.WaitingFor[0].OSTID) || tw.QueuedChildren != 0 {
		t.Errorf("taskwait waits for %+v (queued %d); want one of the runners %v", tw.WaitingFor, tw.QueuedChildren, tids("runners"))
	}
	// The end of the taskgroup waits for the thread running its member
	// task: the other runner.
	tg := blocked(tid("taskgroup"))
	if len(tg.WaitingFor) != 1 || !slices.Contains(tids("runners"), tg.WaitingFor[0].OSTID) || tg.QueuedChildren != 0 ||
		(len(tw.WaitingFor) == 1 && tg.WaitingFor[0].OSTID == tw.WaitingFor[0].OSTID) {
		t.Errorf("taskgroup waits for %+v (queued %d); want the runner that is not the taskwait's (%+v), of %v", tg.WaitingFor, tg.QueuedChildren, tw.WaitingFor, tids("runners"))
	}
	for _, role := range []string{"taskgroup", "ordered_waiter"} {
		what := map[string]string{"taskgroup": "taskgroup", "ordered_waiter": "ordered"}[role]
		if bo := blocked(tid(role)); bo.What != what || bo.Source != "runtime" {
			t.Errorf("%s %d blocked on %+v; want %s", role, tid(role), *bo, what)
		}
	}
	// The holders of simple locks are not recorded: no deadlock can be
	// proven between lock_ab and lock_ba, though each waits for the
	// other's lock; the barrier they block is.
	var kinds []string
	for _, d := range r.Diagnosis {
		kinds = append(kinds, d.Kind)
	}
	if !slices.Equal(kinds, []string{"barrier_blocked", "holder_unknown"}) {
		t.Fatalf("diagnosis kinds %v; want barrier_blocked, holder_unknown: %+v", kinds, r.Diagnosis)
	}
	if d := r.Diagnosis[0]; !slices.Equal(d.Threads, lockers) || !slices.Equal(d.Objects, []string{regionOf(tid("lock_ab"))}) {
		t.Errorf("barrier_blocked %+v; want threads %v, object the region", d, lockers)
	}
	unknown := []int{tid("lock_ab"), tid("lock_ba"), tid("crit_waiter"), tid("ucrit_waiter"), tid("atomic_waiter")}
	slices.Sort(unknown)
	if d := r.Diagnosis[1]; !slices.Equal(d.Threads, unknown) {
		t.Errorf("holder_unknown threads %v; want %v", d.Threads, unknown)
	}
	// The wait graph: each barrier thread to each locker, the nest
	// lock's waiter to its holder, the taskwait to its child's runner.
	edges := map[[2]int]string{}
	for _, e := range r.WaitGraph {
		edges[[2]int{e.From, e.To}] = e.What
	}
	wantEdges := map[[2]int]string{
		{tid("nest_waiter"), nestHolder}:           "nest_lock",
		{tid("taskwait"), tw.WaitingFor[0].OSTID}:  "taskwait",
		{tid("taskgroup"), tg.WaitingFor[0].OSTID}: "taskgroup",
	}
	for _, b := range tids("barrier") {
		for _, l := range lockers {
			wantEdges[[2]int{b, l}] = "barrier"
		}
	}
	if !reflect.DeepEqual(edges, wantEdges) {
		t.Errorf("wait graph %v; want %v", edges, wantEdges)
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}
