package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

// These tests run ompd-inspect's command line in-process on the fixture
// programs of testdata/, live and from cores written by gcore and by the
// kernel, and assert exact values: which OS threads, team sizes,
// functions, file:line, states and ICV values.

// source is one way of looking at a fixture's state.
type source string

const (
	live   source = "live"
	gcore  source = "gcore"
	kernel source = "kernel core"
)

var allSources = []source{live, gcore, kernel}

// cli runs ompd-inspect with args and returns stdout, stderr and the exit
// code.
func cli(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

// reportOf runs a --json view and decodes the report.
func reportOf(t *testing.T, args ...string) *inspect.Report {
	t.Helper()
	out, errs, code := cli(append(args, "--json")...)
	if code != 0 {
		t.Fatalf("ompd-inspect %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	var r inspect.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("ompd-inspect %s: bad JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
	return &r
}

// targetArgs gets a fixture into its announced state as src and returns
// the ompd-inspect arguments that reach it and its READY values. A live
// fixture is checked at cleanup, a gcored one at once, to be left running.
func targetArgs(t *testing.T, name string, src source, env []string) ([]string, fixture.Ready) {
	t.Helper()
	return targetArgsWith(t, name, src, fixture.StartOptions{Env: env})
}

// targetArgsWith is targetArgs with all the fixture's start options.
func targetArgsWith(t *testing.T, name string, src source, opts fixture.StartOptions) ([]string, fixture.Ready) {
	t.Helper()
	switch src {
	case kernel:
		path, ready := fixture.KernelCore(t, name, opts)
		return []string{"core", path}, ready
	case gcore:
		p := fixture.Start(t, name, opts)
		path := p.Gcore(t)
		assertRunning(t, p)
		return []string{"core", path}, p.Ready
	}
	p := fixture.Start(t, name, opts)
	t.Cleanup(func() { assertRunning(t, p) })
	return []string{"attach", strconv.Itoa(p.PID)}, p.Ready
}

// state gets a fixture into its announced state as src and returns its
// report and READY values.
func state(t *testing.T, name string, src source, env ...string) (*inspect.Report, fixture.Ready) {
	t.Helper()
	args, ready := targetArgs(t, name, src, env)
	return reportOf(t, args...), ready
}

// assertRunning fails when any thread of p is left stopped or traced.
func assertRunning(t *testing.T, p *fixture.Process) {
	t.Helper()
	if stopped := p.StoppedThreads(t); len(stopped) != 0 {
		t.Fatalf("threads %v of process %d are left stopped or traced", stopped, p.PID)
	}
}

// find returns the one element of items for which match is true, failing
// the test with what when there is none.
func find[T any](t *testing.T, items []T, match func(T) bool, what string) T {
	t.Helper()
	for _, x := range items {
		if match(x) {
			return x
		}
	}
	t.Fatalf("%s not in report", what)
	var zero T
	return zero
}

func threadOf(t *testing.T, r *inspect.Report, tid int) inspect.Thread {
	t.Helper()
	return find(t, r.Threads, func(th inspect.Thread) bool { return th.OSTID == tid }, fmt.Sprintf("thread %d", tid))
}

func regionByID(t *testing.T, r *inspect.Report, id string) inspect.Region {
	t.Helper()
	return find(t, r.Regions, func(reg inspect.Region) bool { return reg.ID == id }, "region "+id)
}

func taskByID(t *testing.T, r *inspect.Report, id string) inspect.Task {
	t.Helper()
	return find(t, r.Tasks, func(k inspect.Task) bool { return k.ID == id }, "task "+id)
}

// loc is the location ompd-inspect must give for marker in file: the
// compiler records the source path it was given, so only the file name and
// line are compared exactly.
func loc(t *testing.T, file, marker string) string {
	return file + ":" + strconv.Itoa(fixture.SourceLine(t, file, marker))
}

func sameLoc(got, want string) bool {
	return got == want || strings.HasSuffix(got, "/"+want)
}

func str(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

// reportEachSource checks the running fixture p (named name, started with
// opts) live, from a gcore core of it, and from a kernel core of a run of
// its own in abort mode: check gets the report and the READY line of the
// process the report is of; after live and gcore, p must still run.
func reportEachSource(t *testing.T, p *fixture.Process, name string, opts fixture.StartOptions, check func(t *testing.T, r *inspect.Report, ready fixture.Ready)) {
	forEachSource(t, func(t *testing.T, src source) {
		var args []string
		ready := p.Ready
		switch src {
		case live:
			args = []string{"attach", strconv.Itoa(p.PID)}
		case gcore:
			args = []string{"core", p.Gcore(t)}
		case kernel:
			var path string
			path, ready = fixture.KernelCore(t, name, opts)
			args = []string{"core", path}
		}
		check(t, reportOf(t, args...), ready)
		if src != kernel {
			assertRunning(t, p)
		}
	})
}

func forEachSource(t *testing.T, f func(t *testing.T, src source)) {
	for _, src := range allSources {
		t.Run(strings.ReplaceAll(string(src), " ", "_"), func(t *testing.T) { f(t, src) })
	}
}

func TestNestedRegions(t *testing.T) {
	forEachSource(t, func(t *testing.T, src source) {
		r, ready := state(t, "nested", src, "OMP_DEBUG=enabled")
		if !r.Runtime.StateTracking || len(r.Runtime.NeedsStateTracking) != 0 {
			t.Errorf("state tracking = %v, needs %v; want on, nothing missing", r.Runtime.StateTracking, r.Runtime.NeedsStateTracking)
		}
		if r.Runtime.LayoutSource != "ompd-symbols" || filepath.Base(r.Runtime.Library) != "libomp.so" {
			t.Errorf("runtime = %+v", r.Runtime)
		}
		if len(r.Threads) != 9 || len(r.Regions) != 4 {
			t.Fatalf("%d threads, %d regions; want 9 and 4: %+v", len(r.Threads), len(r.Regions), r.Regions)
		}
		innermost := ready.Ints(t, "innermost")
		// The innermost region: the current region of its spinning threads.
		inner := regionByID(t, r, str(threadOf(t, r, innermost[0]).Region))
		middleA := regionByID(t, r, str(inner.Parent))
		outer := regionByID(t, r, str(middleA.Parent))
		middleB := regionByID(t, r, str(threadOf(t, r, ready.Ints(t, "middle_b")[2]).Region))
		want := []struct {
			name     string
			reg      inspect.Region
			level    int
			tids     []int
			marker   string
			function string
		}{
			{"outer", outer, 1, ready.Ints(t, "outer"), "outer", "main.omp_outlined"},
			{"middle_a", middleA, 2, ready.Ints(t, "middle_a"), "middle", "outer_body.omp_outlined"},
			{"middle_b", middleB, 2, ready.Ints(t, "middle_b"), "middle", "outer_body.omp_outlined"},
			{"innermost", inner, 3, ready.Ints(t, "innermost"), "inner", "innermost_region.omp_outlined"},
		}
		for _, w := range want {
			if w.reg.Level != w.level || w.reg.TeamSize != len(w.tids) || !slices.Equal(w.reg.Threads, w.tids) {
				t.Errorf("%s: level %d, team of %d, threads %v; want level %d, threads %v",
					w.name, w.reg.Level, w.reg.TeamSize, w.reg.Threads, w.level, w.tids)
			}
			if !sameLoc(w.reg.Location, loc(t, "nested.c", w.marker)) || w.reg.Function != w.function {
				t.Errorf("%s: at %s in %s; want %s in %s", w.name, w.reg.Location, w.reg.Function, loc(t, "nested.c", w.marker), w.function)
			}
		}
		if outer.Parent != nil || str(middleB.Parent) != outer.ID {
			t.Errorf("outer's parent %s, middle_b's parent %s; want none and %s", str(outer.Parent), str(middleB.Parent), outer.ID)
		}
		states := map[string]string{}
		for _, k := range []string{"spinning", "straggler"} {
			for _, tid := range ready.Ints(t, k) {
				states[strconv.Itoa(tid)] = "work_parallel"
			}
		}
		for _, tid := range ready.Ints(t, "implicit_barrier") {
			states[strconv.Itoa(tid)] = "wait_barrier_implicit_parallel"
		}
		for _, tid := range ready.Ints(t, "explicit_barrier") {
			states[strconv.Itoa(tid)] = "wait_barrier_explicit"
		}
		for tidS, st := range states {
			tid, _ := strconv.Atoi(tidS)
			if th := threadOf(t, r, tid); str(th.State) != st {
				t.Errorf("thread %d: state %s; want %s", tid, str(th.State), st)
			}
		}
		// Every thread's current region and thread number.
		for _, w := range want[1:] {
			for num, tid := range w.tids {
				th := threadOf(t, r, tid)
				if w.name == "middle_a" && num == 1 {
					continue // it encountered the innermost region: its region is that one
				}
				if str(th.Region) != w.reg.ID || th.ThreadNum == nil || *th.ThreadNum != num {
					t.Errorf("thread %d: region %s, thread_num %v; want %s (%s), %d", tid, str(th.Region), th.ThreadNum, w.reg.ID, w.name, num)
				}
			}
		}
		// team-size-var and levels-var of each region.
		for _, w := range want {
			if got := icv(t, r, "team-size-var", w.reg.ID); got != float64(len(w.tids)) {
				t.Errorf("%s: team-size-var %v", w.name, got)
			}
			if got := icv(t, r, "levels-var", w.reg.ID); got != float64(w.level) {
				t.Errorf("%s: levels-var %v", w.name, got)
			}
		}
		if got := icv(t, r, "active-levels-var", inner.ID); got != float64(3) {
			t.Errorf("innermost: active-levels-var %v; want 3", got)
		}
	})
}

// icv returns the value of ICV name owned by owner (nil: address space).
func icv(t *testing.T, r *inspect.Report, name string, owner any) any {
	t.Helper()
	for _, v := range r.ICVs {
		if v.Name != name {
			continue
		}
		switch o := v.Owner.(type) {
		case nil:
			if owner == nil {
				return v.Value
			}
		case float64:
			if n, ok := owner.(int); ok && float64(n) == o {
				return v.Value
			}
		case string:
			if s, ok := owner.(string); ok && s == o {
				return v.Value
			}
		}
	}
	t.Fatalf("ICV %s of %v not in report", name, owner)
	return nil
}

func TestTasks(t *testing.T) {
	forEachSource(t, func(t *testing.T, src source) {
		r, ready := state(t, "tasks", src, "OMP_DEBUG=enabled")
		producer, depOut, final := ready.Int(t, "producer"), ready.Int(t, "dep_out"), ready.Int(t, "final")
		region := str(threadOf(t, r, producer).Region)
		if reg := regionByID(t, r, region); reg.TeamSize != 3 || !sameLoc(reg.Location, loc(t, "tasks.c", "parallel")) {
			t.Fatalf("region: %+v", reg)
		}
		implicit := taskByID(t, r, str(threadOf(t, r, producer).Task))
		if implicit.Kind != "implicit" || implicit.Status != "running" || str(implicit.Region) != region {
			t.Errorf("producer's task: %+v", implicit)
		}
		// dep_out: untied, running on its thread.
		dep := taskByID(t, r, str(threadOf(t, r, depOut).Task))
		if dep.Kind != "explicit" || dep.Status != "running" || dep.Thread == nil || *dep.Thread != depOut ||
			!sameLoc(dep.Location, loc(t, "tasks.c", "task_dep_out")) || strings.Join(dep.Flags, ",") != "untied" ||
			str(dep.Parent) != implicit.ID {
			t.Errorf("dep_out task: %+v", dep)
		}
		// child of the final task: running, final (inherited) and undeferred;
		// its parent, the final task, is suspended.
		child := taskByID(t, r, str(threadOf(t, r, final).Task))
		if !sameLoc(child.Location, loc(t, "tasks.c", "task_child")) || strings.Join(child.Flags, ",") != "final,undeferred" {
			t.Errorf("child task: %+v", child)
		}
		fin := taskByID(t, r, str(child.Parent))
		if !sameLoc(fin.Location, loc(t, "tasks.c", "task_final")) || fin.Status != "suspended" ||
			strings.Join(fin.Flags, ",") != "final" || str(fin.Parent) != implicit.ID {
			t.Errorf("final task: %+v", fin)
		}
		// The queued tasks, by construct.
		queued := map[string]int{}
		for _, k := range r.Tasks {
			if k.Status != "queued" {
				continue
			}
			if k.Thread != nil || k.Kind != "explicit" {
				t.Errorf("queued task %+v", k)
			}
			key := filepath.Base(k.Location) + " " + strings.Join(k.Flags, ",") + " parent=" + str(k.Parent)
			queued[key]++
		}
		wantQueued := map[string]int{
			loc(t, "tasks.c", "task_queued") + "  parent=" + implicit.ID:              3,
			loc(t, "tasks.c", "task_queued_untied") + " untied parent=" + implicit.ID: 1,
			loc(t, "tasks.c", "task_queued_child") + "  parent=" + dep.ID:             1,
		}
		if fmt.Sprint(queued) != fmt.Sprint(wantQueued) || ready.Int(t, "queued_ready") != 5 {
			t.Errorf("queued tasks %v; want %v", queued, wantQueued)
		}
		// Task stacks: each thread's tasks down to its own implicit task,
		// which is suspended in the same region.
		for _, c := range []struct {
			tid  int
			want []string
		}{
			{producer, []string{implicit.ID}},
			{depOut, []string{dep.ID, "implicit"}},
			{final, []string{child.ID, fin.ID, "implicit"}},
		} {
			stack := threadOf(t, r, c.tid).TaskStack
			if len(stack) != len(c.want) {
				t.Errorf("thread %d: task stack %v; want %v", c.tid, stack, c.want)
				continue
			}
			for i, id := range c.want {
				if id != "implicit" {
					if stack[i] != id {
						t.Errorf("thread %d: task stack %v; want %v", c.tid, stack, c.want)
					}
					continue
				}
				it := taskByID(t, r, stack[i])
				if it.Kind != "implicit" || it.Status != "suspended" || str(it.Region) != region || it.ID == implicit.ID ||
					it.Parent == nil || str(it.Parent) != str(implicit.Parent) {
					t.Errorf("thread %d: bottom of its task stack: %+v; want its suspended implicit task", c.tid, it)
				}
			}
		}
		// dep_in: blocked on dep_out, in no deque.
		var blocked []inspect.Task
		for _, k := range r.Tasks {
			if k.Status == "blocked" {
				blocked = append(blocked, k)
			}
		}
		if len(blocked) != ready.Int(t, "queued_dep") {
			t.Fatalf("%d blocked tasks %+v; want %d", len(blocked), blocked, ready.Int(t, "queued_dep"))
		}
		depIn := blocked[0]
		if depIn.Kind != "explicit" || depIn.Thread != nil || !sameLoc(depIn.Location, loc(t, "tasks.c", "task_dep_in")) ||
			str(depIn.Parent) != implicit.ID || strings.Join(depIn.WaitsFor, ",") != dep.ID ||
			depIn.PendingDependences == nil || *depIn.PendingDependences != 1 || len(depIn.Flags) != 0 {
			t.Errorf("dep_in task: %+v; want blocked on %s with 1 pending dependence", depIn, dep.ID)
		}
		if got := icv(t, r, "final-task-var", child.ID); got != float64(1) {
			t.Errorf("final-task-var of the child: %v", got)
		}
		if got := icv(t, r, "implicit-task-var", dep.ID); got != float64(0) {
			t.Errorf("implicit-task-var of dep_out: %v", got)
		}
	})
}

func TestBarrierNeverReached(t *testing.T) {
	forEachSource(t, func(t *testing.T, src source) {
		r, ready := state(t, "barrier", src, "OMP_DEBUG=enabled")
		members := []int{ready.Int(t, "t0"), ready.Int(t, "t1"), ready.Int(t, "t2"), ready.Int(t, "t3")}
		reg := regionByID(t, r, str(threadOf(t, r, members[0]).Region))
		if reg.TeamSize != 4 || !slices.Equal(reg.Threads, members) || !sameLoc(reg.Location, loc(t, "barrier.c", "parallel")) {
			t.Errorf("region %+v", reg)
		}
		for i, tid := range members {
			want := "wait_barrier_explicit"
			if i == 3 {
				want = "work_parallel"
			}
			if th := threadOf(t, r, tid); str(th.State) != want || th.ThreadNum == nil || *th.ThreadNum != i {
				t.Errorf("thread %d (num %d): state %s; want %s", tid, i, str(th.State), want)
			}
		}
	})
}

func TestLockWait(t *testing.T) {
	forEachSource(t, func(t *testing.T, src source) {
		r, ready := state(t, "lock", src, "OMP_DEBUG=enabled")
		// The wait id is implementation defined (OMPT): libomp records
		// its internal lock object, not the omp_lock_t's address. Both
		// waiters wait for the same lock, so they have the same id, one
		// that neither the holder nor any region or task has.
		waiters := ready.Ints(t, "waiters")
		var ids []uint64
		for _, tid := range waiters {
			th := threadOf(t, r, tid)
			if str(th.State) != "wait_lock" || th.WaitID == nil || *th.WaitID == 0 {
				t.Fatalf("waiter %d: state %s, wait id %v; want wait_lock with a wait id", tid, str(th.State), th.WaitID)
			}
			ids = append(ids, *th.WaitID)
		}
		if len(ids) != 2 || ids[0] != ids[1] {
			t.Errorf("waiters %v have wait ids %#x; want one lock's id for both", waiters, ids)
		}
		if h := threadOf(t, r, ready.Int(t, "holder")); h.WaitID == nil || *h.WaitID != 0 {
			t.Errorf("holder: wait id %v; want 0", h.WaitID)
		}
		var others []string
		for _, reg := range r.Regions {
			others = append(others, reg.ID)
		}
		for _, k := range r.Tasks {
			others = append(others, k.ID)
		}
		if len(ids) > 0 && slices.Contains(others, fmt.Sprintf("%#x", ids[0])) {
			t.Errorf("the lock's wait id %#x is a region's or task's id", ids[0])
		}
		if th := threadOf(t, r, ready.Int(t, "holder")); str(th.State) != "work_parallel" {
			t.Errorf("holder: state %s", str(th.State))
		}
	})
}

// icvEnv sets ICVs through the environment; icvs.c sets others through
// the API.
var icvEnv = []string{"OMP_DEBUG=enabled", "OMP_NUM_THREADS=6,3", "OMP_PROC_BIND=spread,close", "OMP_THREAD_LIMIT=12",
	"OMP_STACKSIZE=4M", "OMP_CANCELLATION=true", "OMP_MAX_TASK_PRIORITY=7", "OMP_DISPLAY_AFFINITY=false", "OMP_DEFAULT_DEVICE=0"}

func TestICVs(t *testing.T) {
	forEachSource(t, func(t *testing.T, src source) {
		r, ready := state(t, "icvs", src, icvEnv...)
		checkICVs(t, r, ready, "200ms")
	})
}

// TestICVsStock: on each of Debian's stripped runtimes, every ICV equals
// what the program's own omp_* calls say, live and from both kinds of
// core.
func TestICVsStock(t *testing.T) {
	for _, v := range fixture.StockVersions {
		for _, src := range allSources {
			t.Run(fmt.Sprintf("%d/%s", v, src), func(t *testing.T) {
				args, ready := targetArgsWith(t, "icvs", src, fixture.StartOptions{Env: icvEnv, Stripped: true, Runtime: fixture.StockLibomp(v)})
				r := reportOf(t, append(args, "summary")...)
				// Releases before 17 print the block time without its unit.
				blocktime := "200ms"
				if v < 17 {
					blocktime = "200"
				}
				checkICVs(t, r, ready, blocktime)
			})
		}
	}
}

// checkICVs compares the report of the icvs fixture with the ICVs the
// program read itself (its READY line).
func checkICVs(t *testing.T, r *inspect.Report, ready fixture.Ready, blocktime string) {
	t.Helper()
	tid := ready.Int(t, "t0")
	th := threadOf(t, r, tid)
	task, region := str(th.Task), str(th.Region)
	want := []struct {
		name  string
		owner any
		value any
	}{
		{"dyn-var", tid, float64(ready.Int(t, "dynamic"))},
		{"nthreads-var", tid, float64(ready.Int(t, "max_threads"))},
		{"thread-num-var", tid, float64(ready.Int(t, "thread_num"))},
		{"default-device-var", tid, float64(ready.Int(t, "default_device"))},
		{"run-sched-var", task, ready["schedule_kind_name"] + "," + ready["schedule_chunk"]},
		{"thread-limit-var", task, float64(ready.Int(t, "thread_limit"))},
		{"max-active-levels-var", task, float64(ready.Int(t, "max_active_levels"))},
		{"bind-var", task, float64(ready.Int(t, "proc_bind"))},
		{"levels-var", region, float64(ready.Int(t, "level"))},
		{"active-levels-var", region, float64(ready.Int(t, "active_level"))},
		{"team-size-var", region, float64(ready.Int(t, "team_size"))},
		{"stacksize-var", nil, float64(ready.Int(t, "stacksize"))},
		{"cancel-var", nil, float64(ready.Int(t, "cancellation"))},
		{"max-task-priority-var", nil, float64(ready.Int(t, "max_task_priority"))},
		{"num-procs-var", nil, float64(ready.Int(t, "num_procs"))},
		{"debug-var", nil, float64(1)},
		{"display-affinity-var", nil, float64(0)},
		{"tool-libraries-var", nil, ""},
	}
	for _, w := range want {
		if got := icv(t, r, w.name, w.owner); got != w.value {
			t.Errorf("%s: %#v; want %#v", w.name, got, w.value)
		}
	}
	if ready["schedule_kind_name"] != "guided" || ready["schedule_chunk"] != "5" || ready["thread_limit"] != "12" {
		t.Errorf("fixture did not set the ICVs it should: %v", ready)
	}
	// The runtime writes its display block in __kmp_do_serial_initialize
	// before it reads the environment, so the block holds the
	// defaults, whatever the program set (a runtime defect, see
	// docs/compatibility.md). ompd-inspect reports what the runtime holds.
	envs := map[string]string{}
	for _, v := range r.ControlVars {
		envs[v.Name] = v.Value
	}
	if len(r.ControlVars) < 50 || envs["OMP_THREAD_LIMIT"] != "0" || envs["OMP_CANCELLATION"] != "false" ||
		envs["KMP_BLOCKTIME"] != blocktime || envs["OMP_MAX_ACTIVE_LEVELS"] == "" {
		t.Errorf("control vars (%d): OMP_THREAD_LIMIT=%q OMP_CANCELLATION=%q KMP_BLOCKTIME=%q", len(r.ControlVars),
			envs["OMP_THREAD_LIMIT"], envs["OMP_CANCELLATION"], envs["KMP_BLOCKTIME"])
	}
}

// Without OMP_DEBUG=enabled, states and frames are not tracked: the report
// says so and everything else is the same.
func TestWithoutStateTracking(t *testing.T) {
	p := fixture.Start(t, "nested", fixture.StartOptions{})
	r := reportOf(t, "attach", strconv.Itoa(p.PID))
	assertRunning(t, p)
	if r.Runtime.StateTracking {
		t.Fatalf("state tracking on without OMP_DEBUG")
	}
	wantMissing := "threads[].state threads[].wait_id tasks[].exit_frame tasks[].enter_frame"
	if got := strings.Join(r.Runtime.NeedsStateTracking, " "); got != wantMissing || !strings.Contains(r.Runtime.Hint, "OMP_DEBUG=enabled") {
		t.Errorf("needs_state_tracking %q, hint %q", got, r.Runtime.Hint)
	}
	levels := []int{}
	for _, reg := range r.Regions {
		levels = append(levels, reg.Level*10+reg.TeamSize)
	}
	sort.Ints(levels)
	if fmt.Sprint(levels) != "[12 23 23 34]" {
		t.Errorf("regions (level*10+team size) %v; want [12 23 23 34]", levels)
	}
	for _, th := range r.Threads {
		if th.State != nil || th.WaitID != nil || th.GTID == nil {
			t.Errorf("thread %d: state %v wait %v gtid %v", th.OSTID, th.State, th.WaitID, th.GTID)
		}
	}
	if len(r.Tasks) == 0 {
		t.Error("no tasks")
	}
	for _, k := range r.Tasks {
		if k.ExitFrame != nil || k.EnterFrame != nil {
			t.Errorf("task %s: frames %v %v without state tracking", k.ID, str(k.ExitFrame), str(k.EnterFrame))
		}
	}
	// The second look runs ompd-inspect as a separate process, as users do
	// (two in-process attaches to a child of the test binary once found it
	// gone: see the issue notes).
	outB, err := exec.Command(builtCLI(t), "attach", strconv.Itoa(p.PID)).CombinedOutput()
	out, errs, code := string(outB), fmt.Sprint(err), 0
	if err != nil {
		code = 1
	}
	if code != 0 || !strings.Contains(out, "tracking  off (start with OMP_DEBUG=enabled for states, wait ids and task frames)") ||
		!strings.Contains(out, "(state not tracked)") {
		t.Errorf("summary without tracking (exit %d, %s):\n%s", code, errs, out)
	}
	assertRunning(t, p)
}

// The text summary: counts, grouping and the region tree.
func TestSummaryText(t *testing.T) {
	p := fixture.Start(t, "barrier", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}})
	out, errs, code := cli("attach", strconv.Itoa(p.PID))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	assertRunning(t, p)
	members := fmt.Sprintf("%s %s %s %s", p.Ready["t0"], p.Ready["t1"], p.Ready["t2"], p.Ready["t3"])
	first3 := strings.ReplaceAll(p.Ready["waiting"], ",", " ")
	for _, want := range []string{
		"counts    4 threads (4 OpenMP), 1 parallel regions,",
		fmt.Sprintf("3  wait_barrier_explicit  team_body at barrier.c:%d     tids %s\n", fixture.SourceLine(t, "barrier.c", "barrier"), first3),
		fmt.Sprintf("1  work_parallel          stuck_worker at barrier.c:%d  tids %s\n", fixture.SourceLine(t, "barrier.c", "stuck_spin"), p.Ready["stuck"]),
		"- level 1  team of 4  ",
		"barrier.c:" + strconv.Itoa(fixture.SourceLine(t, "barrier.c", "parallel")) + "  main.omp_outlined",
		"threads " + members + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}
