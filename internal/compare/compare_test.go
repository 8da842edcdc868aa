package compare

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

func sp(s string) *string { return &s }
func ip(i int) *int       { return &i }

// objIDs names the regions and tasks of the synthetic target:
//
//	region A: the outer team of threads 11 and 12
//	region B: a serialized region nested in A, encountered by thread 12
//	          while it ran explicit task E
//	Init: the initial task, parent of the implicit tasks I11 and I12 of A
//	E:    an explicit task created by I11, suspended on thread 12
//	N:    the implicit task of B, running on thread 12
type objIDs struct{ a, b, init, i11, i12, e, n string }

// nativeIDs are runtime addresses, dllIDs handle names numbered in another
// order. dllIDs hold the traps for renaming: task#1 is a prefix of task#10
// and task#11.
var (
	nativeIDs = objIDs{a: "0x1000", b: "0x2000", init: "0x3100", i11: "0x3000", i12: "0x3200", e: "0x55aa", n: "0x3300"}
	dllIDs    = objIDs{a: "region#2", b: "region#1", init: "task#3", i11: "task#1", i12: "task#2", e: "task#10", n: "task#11"}
)

// Field counts of the world's report, computed by hand:
//
//	runtime: library, version, openmp_version, ompd_dll_locations,
//	  state_tracking                                              5
//	threads: os_tid, gtid, openmp, thread_num, state, wait_id, region,
//	  task, task_stack, function (location and user_frame are
//	  omitted)                                                   2 x 10 = 20
//	regions: id, parent, level, active_level, team_size, serialized,
//	  function, entry_addr, location, construct_function, threads 2 x 11 = 22
//	tasks: id, kind, function, location, construct_function, parent,
//	  region, thread, status, entry_addr, flags, exit_frame,
//	  enter_frame (waits_for, pending_dependences omitted)      5 x 13 = 65
//	icvs                                                          6
//	control_vars                                                  2
//	                                                    summary 120
//	backtraces: thread 11: activity + frame (kind, thread, pc,
//	  function) = 5; thread 12: activity + frame 0 (kind, thread, pc,
//	  function, user_function, file, line) + 2 markers (kind, thread,
//	  pc, region|task, text, boundary) = 1+7+6+6 = 20             25
//	                                                         bt 145
const (
	nRuntime  = 5
	nThreads  = 20
	nRegions  = 22
	nTasks    = 65
	nICVs     = 6
	nEnv      = 2
	nSummary  = nRuntime + nThreads + nRegions + nTasks + nICVs + nEnv
	nBT       = nSummary + 25
	nTaskFlds = 13
)

// world builds the report of the synthetic target with the given ids. With
// reorder, the threads, regions, tasks and ICVs are listed in another order.
func world(id objIDs, reorder bool) *inspect.Report {
	r := &inspect.Report{
		Target: inspect.TargetInfo{Kind: "process", PID: 10, Executable: "/tmp/a.out"},
		Runtime: inspect.Runtime{
			Library: "/usr/lib/libomp.so", Version: "LLVM OMP version: 5.0.20140926", OpenMPVersion: 201811,
			OMPDDLLLocations: []string{"/usr/lib/libompd.so"}, StateTracking: true,
		},
		Threads: []inspect.Thread{
			{OSTID: 12, GTID: ip(1), OpenMP: true, ThreadNum: ip(0), State: sp("work_parallel"), Region: sp(id.b), Task: sp(id.n),
				TaskStack: []string{id.n, id.e, id.i12}, Function: "main._omp_fn.3"},
			{OSTID: 11, GTID: ip(0), OpenMP: true, ThreadNum: ip(0), State: sp("wait_barrier_implicit"), WaitID: func() *uint64 { w := uint64(4096); return &w }(),
				Region: sp(id.a), Task: sp(id.i11), TaskStack: []string{id.i11}, Function: "main._omp_fn.0"},
		},
		Regions: []inspect.Region{
			{ID: id.a, Level: 1, ActiveLevel: 1, TeamSize: 2, Function: "main._omp_fn.0", EntryAddr: "0x401000",
				Location: "main.c:10", ConstructFunction: "main", Threads: []int{11, 12}},
			{ID: id.b, Parent: sp(id.a), Level: 2, ActiveLevel: 1, TeamSize: 1, Serialized: true, Function: "main._omp_fn.3",
				EntryAddr: "0x401300", Location: "main.c:18", ConstructFunction: "main._omp_fn.2", Threads: []int{12}},
		},
		Tasks: []inspect.Task{
			{ID: id.init, Kind: "implicit", Status: "suspended", Flags: []string{}},
			{ID: id.i11, Kind: "implicit", Function: "main._omp_fn.0", Location: "main.c:10", ConstructFunction: "main",
				Parent: sp(id.init), Region: sp(id.a), Thread: ip(11), Status: "running", EntryAddr: "0x401000", Flags: []string{},
				ExitFrame: sp("0x7ffc0010"), EnterFrame: sp("0x7ffc0080")},
			{ID: id.i12, Kind: "implicit", Function: "main._omp_fn.0", Location: "main.c:10", ConstructFunction: "main",
				Parent: sp(id.init), Region: sp(id.a), Status: "suspended", EntryAddr: "0x401000", Flags: []string{}},
			{ID: id.e, Kind: "explicit", Function: "main._omp_fn.2", Location: "main.c:16", ConstructFunction: "main._omp_fn.0",
				Parent: sp(id.i11), Region: sp(id.a), Status: "suspended", EntryAddr: "0x401200", Flags: []string{"untied"}},
			{ID: id.n, Kind: "implicit", Function: "main._omp_fn.3", Location: "main.c:18", ConstructFunction: "main._omp_fn.2",
				Parent: sp(id.e), Region: sp(id.b), Thread: ip(12), Status: "running", EntryAddr: "0x401300", Flags: []string{}},
		},
		ICVs: []inspect.ICV{
			{Name: "thread-limit-var", Scope: "address_space", Value: 2147483647},
			{Name: "nthreads-var", Scope: "thread", Owner: 11, Value: 2},
			{Name: "nthreads-var", Scope: "thread", Owner: 12, Value: 2},
			{Name: "levels-var", Scope: "parallel", Owner: id.a, Value: 1},
			{Name: "levels-var", Scope: "parallel", Owner: id.b, Value: 2},
			{Name: "nthreads-var", Scope: "task", Owner: id.n, Value: "2,1"},
		},
		ControlVars: []inspect.ControlVar{{Name: "OMP_DYNAMIC", Value: "FALSE"}, {Name: "OMP_NUM_THREADS", Value: "2,1"}},
		Backtraces: []inspect.Backtrace{
			{OSTID: 11, GTID: ip(0), OpenMP: true, Activity: "waiting in a barrier", Frames: []inspect.Frame{
				{Kind: inspect.KindRuntime, Thread: 11, PC: sp("0x7f0010"), Function: "__kmp_hyper_barrier_release"},
			}},
			{OSTID: 12, GTID: ip(1), OpenMP: true, Activity: "running task", Frames: []inspect.Frame{
				{Kind: inspect.KindUser, Thread: 12, PC: sp("0x401234"), Function: "main._omp_fn.3", UserFunction: "main", File: "main.c", Line: 19},
				{Kind: inspect.KindRegionMarker, Thread: 12, Region: sp(id.b), Boundary: "entry-point",
					Text: "#pragma omp parallel at main.c:18 — team of 1, thread 0"},
				{Kind: inspect.KindTaskMarker, Thread: 12, Task: sp(id.e), Boundary: "entry-point",
					Text: fmt.Sprintf("#pragma omp task at main.c:16 — task %s, parent %s", id.e, id.i11)},
			}},
		},
	}
	if reorder {
		reverse(r.Threads)
		reverse(r.Regions)
		reverse(r.Tasks)
		reverse(r.ICVs)
		reverse(r.Backtraces)
	}
	return r
}

func reverse[T any](s []T) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// pair returns the native and dll reports of the same target.
func pair() (a, b *inspect.Report) {
	a, b = world(nativeIDs, false), world(dllIDs, true)
	a.Runtime.Backend, b.Runtime.Backend = "native", "dll"
	return a, b
}

func findTask(r *inspect.Report, id string) *inspect.Task {
	for i := range r.Tasks {
		if r.Tasks[i].ID == id {
			return &r.Tasks[i]
		}
	}
	panic("no task " + id)
}

func findRegion(r *inspect.Report, id string) *inspect.Region {
	for i := range r.Regions {
		if r.Regions[i].ID == id {
			return &r.Regions[i]
		}
	}
	panic("no region " + id)
}

func findThread(r *inspect.Report, tid int) *inspect.Thread {
	for i := range r.Threads {
		if r.Threads[i].OSTID == tid {
			return &r.Threads[i]
		}
	}
	panic(fmt.Sprint("no thread ", tid))
}

func paths(ds []Difference) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, d.Path)
	}
	return out
}

func wantDiffs(t *testing.T, got, want []Difference) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("differences:\n%s\nwant:\n%s", dump(got), dump(want))
	}
}

func dump(ds []Difference) string {
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "  %q A=%s B=%s known=%q\n", d.Path, d.A, d.B, d.Known)
	}
	return b.String()
}

func TestIdenticalReportsDifferentIDs(t *testing.T) {
	for _, tc := range []struct {
		view View
		want int
	}{
		{"", nSummary}, {"summary", nSummary}, {"bt", nBT},
	} {
		a, b := pair()
		res := Reports(a, b, tc.view)
		if res.Compared != tc.want || len(res.Differences) != 0 {
			t.Errorf("view %q: compared %d, want %d; differences:\n%s", tc.view, res.Compared, tc.want, dump(res.Differences))
		}
		if res.Differences == nil {
			t.Errorf("view %q: Differences is nil, want an empty list (JSON [])", tc.view)
		}
	}
}

func TestReportsDoesNotModifyReports(t *testing.T) {
	a, b := pair()
	a0, b0 := pair()
	Reports(a, b, "bt")
	if !reflect.DeepEqual(a, a0) || !reflect.DeepEqual(b, b0) {
		t.Errorf("Reports modified its arguments")
	}
}

func TestCanonicalWorld(t *testing.T) {
	// Thread 11 (listed second) comes first: A, then I11 and its parent
	// Init; then thread 12: B (its parent A is named), N, its parent E
	// (E's parent I11 is named), then from its task stack I12.
	for _, tc := range []struct {
		name string
		r    *inspect.Report
		id   objIDs
	}{
		{"native", world(nativeIDs, false), nativeIDs},
		{"dll", world(dllIDs, true), dllIDs},
	} {
		c := canonical(tc.r, nil)
		wantR := map[string]string{tc.id.a: "R1", tc.id.b: "R2"}
		wantT := map[string]string{tc.id.i11: "T1", tc.id.init: "T2", tc.id.n: "T3", tc.id.e: "T4", tc.id.i12: "T5"}
		if !reflect.DeepEqual(c.regions, wantR) {
			t.Errorf("%s: regions %v, want %v", tc.name, c.regions, wantR)
		}
		if !reflect.DeepEqual(c.tasks, wantT) {
			t.Errorf("%s: tasks %v, want %v", tc.name, c.tasks, wantT)
		}
	}
}

func TestCanonicalOrder(t *testing.T) {
	// Thread 5 before thread 7 (sorted by os_tid); for each thread its
	// region chain, then its current task's parent chain, then its task
	// stack (thread 6 has a current task but no stack); then the objects
	// no thread reaches, in report order: each
	// task with its parents and then its region, then the regions.
	r := &inspect.Report{
		Threads: []inspect.Thread{
			{OSTID: 7, Region: sp("q"), Task: sp("y"), TaskStack: []string{"y"}},
			{OSTID: 5, Region: sp("r"), Task: sp("x"), TaskStack: []string{"x", "s1"}},
			{OSTID: 6, Task: sp("w")}, // no region, no task stack
		},
		Regions: []inspect.Region{
			{ID: "lone"}, {ID: "r", Parent: sp("rp")}, {ID: "rp"}, {ID: "q", Parent: sp("r")},
		},
		Tasks: []inspect.Task{
			{ID: "u1", Region: sp("ur")},
			{ID: "x", Parent: sp("p1")},
			{ID: "p1", Parent: sp("p2")}, // p2 is not in the report; named anyway
			{ID: "s1", Parent: sp("p2")},
			{ID: "y", Parent: sp("x")},
			{ID: "u2", Parent: sp("up")},
		},
	}
	c := canonical(r, nil)
	wantR := map[string]string{"r": "R1", "rp": "R2", "q": "R3", "ur": "R4", "lone": "R5"}
	wantT := map[string]string{"x": "T1", "p1": "T2", "p2": "T3", "s1": "T4", "w": "T5", "y": "T6", "u1": "T7", "u2": "T8", "up": "T9"}
	if !reflect.DeepEqual(c.regions, wantR) {
		t.Errorf("regions %v, want %v", c.regions, wantR)
	}
	if !reflect.DeepEqual(c.tasks, wantT) {
		t.Errorf("tasks %v, want %v", c.tasks, wantT)
	}
	if got := c.region("nowhere"); got != "?nowhere" {
		t.Errorf("region(nowhere) = %q, want ?nowhere", got)
	}
	if got := c.task("nowhere"); got != "?nowhere" {
		t.Errorf("task(nowhere) = %q, want ?nowhere", got)
	}
}

func TestCanonicalParentCycle(t *testing.T) {
	// Parent cycles end where the walk meets a named object.
	r := &inspect.Report{
		Threads: []inspect.Thread{{OSTID: 1, Region: sp("a"), Task: sp("t")}},
		Regions: []inspect.Region{{ID: "a", Parent: sp("b")}, {ID: "b", Parent: sp("a")}},
		Tasks:   []inspect.Task{{ID: "t", Parent: sp("t")}},
	}
	c := canonical(r, nil)
	if want := map[string]string{"a": "R1", "b": "R2"}; !reflect.DeepEqual(c.regions, want) {
		t.Errorf("regions %v, want %v", c.regions, want)
	}
	if want := map[string]string{"t": "T1"}; !reflect.DeepEqual(c.tasks, want) {
		t.Errorf("tasks %v, want %v", c.tasks, want)
	}
}

func TestObjectsInOneReport(t *testing.T) {
	a, b := pair()
	// A region only the dll reports, nested in B and reached by no thread:
	// R3. A task only the native backend reports, reached by no thread: T6.
	b.Regions = append(b.Regions, inspect.Region{ID: "region#3", Parent: sp(dllIDs.b), Level: 3, ActiveLevel: 1,
		TeamSize: 4, Threads: []int{12}})
	a.Tasks = append(a.Tasks, inspect.Task{ID: "0x6000", Kind: "explicit", Parent: sp(nativeIDs.e),
		Region: sp(nativeIDs.b), Status: "suspended", Flags: []string{}})
	res := Reports(a, b, "summary")
	want := []Difference{
		{Path: "regions[R3].active_level", A: None, B: "1"},
		{Path: "regions[R3].construct_function", A: None, B: `""`},
		{Path: "regions[R3].entry_addr", A: None, B: `""`},
		{Path: "regions[R3].function", A: None, B: `""`},
		{Path: "regions[R3].id", A: None, B: `"R3"`},
		{Path: "regions[R3].level", A: None, B: "3"},
		{Path: "regions[R3].location", A: None, B: `""`},
		{Path: "regions[R3].parent", A: None, B: `"R2"`},
		{Path: "regions[R3].serialized", A: None, B: "false"},
		{Path: "regions[R3].team_size", A: None, B: "4"},
		{Path: "regions[R3].threads", A: None, B: "[12]"},
		{Path: "tasks[T6].construct_function", A: `""`, B: None},
		{Path: "tasks[T6].enter_frame", A: "null", B: None},
		{Path: "tasks[T6].entry_addr", A: `""`, B: None},
		{Path: "tasks[T6].exit_frame", A: "null", B: None},
		{Path: "tasks[T6].flags", A: "[]", B: None},
		{Path: "tasks[T6].function", A: `""`, B: None},
		{Path: "tasks[T6].id", A: `"T6"`, B: None},
		{Path: "tasks[T6].kind", A: `"explicit"`, B: None},
		{Path: "tasks[T6].location", A: `""`, B: None},
		{Path: "tasks[T6].parent", A: `"T4"`, B: None},
		{Path: "tasks[T6].region", A: `"R2"`, B: None},
		{Path: "tasks[T6].status", A: `"suspended"`, B: None},
		{Path: "tasks[T6].thread", A: "null", B: None},
	}
	wantDiffs(t, res.Differences, want)
	if res.Compared != nSummary+11+nTaskFlds {
		t.Errorf("compared %d, want %d", res.Compared, nSummary+11+nTaskFlds)
	}
	if None != "(none)" {
		t.Errorf("None = %q", None)
	}
}

func TestThreadsOutOfOrderMatchByOSTID(t *testing.T) {
	// A thread only one report has.
	a, b := pair()
	b.Threads = append(b.Threads, inspect.Thread{OSTID: 13, TaskStack: []string{}})
	res := Reports(a, b, "threads")
	want := []Difference{
		{Path: "threads[os_tid=13].gtid", A: None, B: "null"},
		{Path: "threads[os_tid=13].openmp", A: None, B: "false"},
		{Path: "threads[os_tid=13].os_tid", A: None, B: "13"},
		{Path: "threads[os_tid=13].region", A: None, B: "null"},
		{Path: "threads[os_tid=13].state", A: None, B: "null"},
		{Path: "threads[os_tid=13].task", A: None, B: "null"},
		{Path: "threads[os_tid=13].task_stack", A: None, B: "[]"},
		{Path: "threads[os_tid=13].thread_num", A: None, B: "null"},
		{Path: "threads[os_tid=13].wait_id", A: None, B: "null"},
	}
	wantDiffs(t, res.Differences, want)
	if res.Compared != nThreads+9 {
		t.Errorf("compared %d, want %d", res.Compared, nThreads+9)
	}
}

func TestChangedField(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(b *inspect.Report)
		want   Difference
	}{
		{"thread state", func(b *inspect.Report) { findThread(b, 11).State = sp("work_parallel") },
			Difference{Path: "threads[os_tid=11].state", A: `"wait_barrier_implicit"`, B: `"work_parallel"`}},
		// The dll backend gives no gtids; whether a thread is an OpenMP
		// thread it gives, and that is compared.
		{"openmp thread", func(b *inspect.Report) { findThread(b, 11).OpenMP = false },
			Difference{Path: "threads[os_tid=11].openmp", A: "true", B: "false"}},
		{"thread task stack", func(b *inspect.Report) {
			findThread(b, 12).TaskStack = []string{dllIDs.n, dllIDs.i12}
		}, Difference{Path: "threads[os_tid=12].task_stack", A: `["T3","T4","T5"]`, B: `["T3","T5"]`}},
		{"region team size", func(b *inspect.Report) { findRegion(b, dllIDs.b).TeamSize = 3 },
			Difference{Path: "regions[R2].team_size", A: "1", B: "3"}},
		{"task parent", func(b *inspect.Report) { findTask(b, dllIDs.e).Parent = sp(dllIDs.i12) },
			Difference{Path: "tasks[T4].parent", A: `"T1"`, B: `"T5"`}},
		{"task region", func(b *inspect.Report) { findTask(b, dllIDs.n).Region = sp(dllIDs.a) },
			Difference{Path: "tasks[T3].region", A: `"R2"`, B: `"R1"`}},
		{"icv", func(b *inspect.Report) { b.ICVs[0].Value = "3,1" }, // reordered: N's
			Difference{Path: "icvs[nthreads-var task T3]", A: `"2,1"`, B: `"3,1"`}},
		{"thread icv", func(b *inspect.Report) { b.ICVs[4].Value = 4 }, // reordered: thread 11's
			Difference{Path: "icvs[nthreads-var thread 11]", A: "2", B: "4"}},
		{"control var", func(b *inspect.Report) { b.ControlVars[1].Value = "4" },
			Difference{Path: "control_vars[OMP_NUM_THREADS]", A: `"2,1"`, B: `"4"`}},
		{"runtime", func(b *inspect.Report) { b.Runtime.OMPDDLLLocations = nil },
			Difference{Path: "runtime.ompd_dll_locations", A: `["/usr/lib/libompd.so"]`, B: "null"}},
	} {
		a, b := pair()
		tc.change(b)
		res := Reports(a, b, "summary")
		wantDiffs(t, res.Differences, []Difference{tc.want})
		if res.Compared != nSummary {
			t.Errorf("%s: compared %d, want %d", tc.name, res.Compared, nSummary)
		}
	}
}

func TestChangedFrame(t *testing.T) {
	a, b := pair()
	// The dll's marker names another parent: E's text after renaming.
	b.Backtraces[0].Frames[2].Text = "#pragma omp task at main.c:16 — task task#10, parent task#2"
	b.Backtraces[1].Activity = "idle"
	res := Reports(a, b, "bt")
	wantDiffs(t, res.Differences, []Difference{
		{Path: "backtraces[os_tid=11].activity", A: `"waiting in a barrier"`, B: `"idle"`},
		{Path: "backtraces[os_tid=12].frames[2].text", A: `"#pragma omp task at main.c:16 — task T4, parent T1"`,
			B: `"#pragma omp task at main.c:16 — task T4, parent T5"`},
	})
}

func TestUnavailable(t *testing.T) {
	unavailable := []string{"threads[].gtid", "tasks[].location", "backtraces[].frames[].user_function", "tasks[status=queued]"}
	// What the dll backend cannot give differs; the native report has a
	// queued task with an ICV of its own.
	build := func() (a, b *inspect.Report) {
		a, b = pair()
		for i := range b.Threads {
			b.Threads[i].GTID = nil
		}
		for i := range b.Tasks {
			b.Tasks[i].Location = ""
		}
		b.Backtraces[0].Frames[0].UserFunction = ""
		a.Tasks = append(a.Tasks, inspect.Task{ID: "0x7000", Kind: "explicit", Function: "main._omp_fn.4", Location: "main.c:30",
			Parent: sp(nativeIDs.i11), Region: sp(nativeIDs.a), Status: "queued", EntryAddr: "0x401400", Flags: []string{}})
		a.ICVs = append(a.ICVs, inspect.ICV{Name: "nthreads-var", Scope: "task", Owner: "0x7000", Value: 2})
		return a, b
	}
	// 2 gtids, 5 task locations and 1 user function fewer.
	const want = nBT - 2 - 5 - 1
	for _, which := range []string{"dll", "native"} {
		a, b := build()
		if which == "dll" {
			b.Runtime.Unavailable = unavailable
		} else {
			a.Runtime.Unavailable = unavailable
		}
		res := Reports(a, b, "bt")
		if len(res.Differences) != 0 || res.Compared != want {
			t.Errorf("unavailable in %s: compared %d, want %d; differences:\n%s", which, res.Compared, want, dump(res.Differences))
		}
	}

	// Without tasks[status=queued] the queued task (T6, location skipped)
	// and its ICV are compared.
	a, b := build()
	b.Runtime.Unavailable = unavailable[:3]
	res := Reports(a, b, "bt")
	wantDiffs(t, res.Differences, []Difference{
		{Path: "icvs[nthreads-var task T6]", A: "2", B: None},
		{Path: "tasks[T6].construct_function", A: `""`, B: None},
		{Path: "tasks[T6].enter_frame", A: "null", B: None},
		{Path: "tasks[T6].entry_addr", A: `"0x401400"`, B: None},
		{Path: "tasks[T6].exit_frame", A: "null", B: None},
		{Path: "tasks[T6].flags", A: "[]", B: None},
		{Path: "tasks[T6].function", A: `"main._omp_fn.4"`, B: None},
		{Path: "tasks[T6].id", A: `"T6"`, B: None},
		{Path: "tasks[T6].kind", A: `"explicit"`, B: None},
		{Path: "tasks[T6].parent", A: `"T1"`, B: None},
		{Path: "tasks[T6].region", A: `"R1"`, B: None},
		{Path: "tasks[T6].status", A: `"queued"`, B: None},
		{Path: "tasks[T6].thread", A: "null", B: None},
	})
	if res.Compared != want+13 {
		t.Errorf("compared %d, want %d", res.Compared, want+13)
	}

	// Without any Unavailable every difference shows.
	a, b = build()
	res = Reports(a, b, "bt")
	if got := len(res.Differences); got != 2+4+1+13+1 { // Init has no location; + the queued task's
		t.Errorf("%d differences, want 21:\n%s", got, dump(res.Differences))
	}
}

func TestUnavailableRuntimeField(t *testing.T) {
	a, b := pair()
	b.Runtime.Version = "LLVM 19"
	b.Runtime.Unavailable = []string{"runtime.version"}
	res := Reports(a, b, "summary")
	if len(res.Differences) != 0 || res.Compared != nSummary-1 {
		t.Errorf("compared %d, want %d; differences:\n%s", res.Compared, nSummary-1, dump(res.Differences))
	}
}

func TestRenameLongestFirst(t *testing.T) {
	c := ids{
		regions: map[string]string{"0x1000": "R1"},
		tasks:   map[string]string{"task#1": "T1", "task#10": "T4", "0x10008": "T5"},
	}
	// Replacing task#1 before task#10 would give "task T10", and 0x1000
	// before 0x10008 "R18".
	for in, want := range map[string]string{
		"task task#10, parent task#1": "task T4, parent T1",
		"0x10008 in 0x1000":           "T5 in R1",
		"task#1task#10":               "T1T4",
		"no ids":                      "no ids",
		"":                            "",
	} {
		if got := c.rename(in); got != want {
			t.Errorf("rename(%q) = %q, want %q", in, got, want)
		}
	}
	// Through Reports: the world's dll has task#1 (I11), task#10 (E) and
	// task#11 (N); its markers compare equal with the native ones.
	for _, r := range []*inspect.Report{world(nativeIDs, false), world(dllIDs, true)} {
		got := canonical(r, nil).rename(fmt.Sprintf("task %s, parent %s, child %s", r.Tasks[0].ID, r.Tasks[1].ID, r.Tasks[4].ID))
		// native order: Init, I11, I12, E, N; dll reversed: N, E, I12, I11, Init.
		want := map[string]string{
			nativeIDs.init: "task T2, parent T1, child T3",
			dllIDs.n:       "task T3, parent T4, child T2",
		}[r.Tasks[0].ID]
		if got != want {
			t.Errorf("rename in %s: %q, want %q", r.Tasks[0].ID, got, want)
		}
	}
}

func TestFrameIDs(t *testing.T) {
	a, b := pair()
	a.Backtraces[1].Frames[1].Region = sp(nativeIDs.a) // R1 instead of R2
	b.Backtraces[0].Frames[2].Task = sp("task#99")     // unknown id
	res := Reports(a, b, "bt")
	wantDiffs(t, res.Differences, []Difference{
		{Path: "backtraces[os_tid=12].frames[1].region", A: `"R1"`, B: `"R2"`},
		{Path: "backtraces[os_tid=12].frames[2].task", A: `"T4"`, B: `"?task#99"`},
	})
	// A frame only one report has.
	a, b = pair()
	b.Backtraces[1].Frames = append(b.Backtraces[1].Frames, inspect.Frame{Kind: inspect.KindSystem, Thread: 11, PC: sp("0x7f2000")})
	res = Reports(a, b, "bt")
	wantDiffs(t, res.Differences, []Difference{
		{Path: "backtraces[os_tid=11].frames[1].kind", A: None, B: `"system"`},
		{Path: "backtraces[os_tid=11].frames[1].pc", A: None, B: `"0x7f2000"`},
		{Path: "backtraces[os_tid=11].frames[1].thread", A: None, B: "11"},
	})
	if res.Compared != nBT+3 {
		t.Errorf("compared %d, want %d", res.Compared, nBT+3)
	}
}

func TestICVOwners(t *testing.T) {
	a, b := pair()
	a.ICVs = append(a.ICVs,
		inspect.ICV{Name: "levels-var", Scope: "parallel", Owner: "0x9999", Value: 3},
		inspect.ICV{Name: "max-active-levels-var", Scope: "address_space", Value: math.NaN()})
	b.ICVs = append(b.ICVs,
		inspect.ICV{Name: "levels-var", Scope: "parallel", Owner: "region#9", Value: 3},
		inspect.ICV{Name: "max-active-levels-var", Scope: "address_space", Value: 1})
	res := Reports(a, b, "icvs")
	wantDiffs(t, res.Differences, []Difference{
		{Path: "icvs[levels-var parallel ?0x9999]", A: "3", B: None},
		{Path: "icvs[levels-var parallel ?region#9]", A: None, B: "3"},
		{Path: "icvs[max-active-levels-var address_space]", A: "NaN", B: "1"},
	})
	if res.Compared != nICVs+3 {
		t.Errorf("compared %d, want %d", res.Compared, nICVs+3)
	}
}

// knownCase returns reports without state tracking where the dll gives no
// entry points for region A, task I11 and thread 11.
func knownCase(tracking bool) (a, b *inspect.Report) {
	a, b = pair()
	a.Runtime.StateTracking, b.Runtime.StateTracking = tracking, tracking
	findRegion(b, dllIDs.a).Function = ""
	findTask(b, dllIDs.i11).EntryAddr = ""
	findThread(b, 11).Function = ""
	return a, b
}

func TestKnownEntryPoints(t *testing.T) {
	a, b := knownCase(false)
	res := Reports(a, b, "summary")
	wantDiffs(t, res.Differences, []Difference{
		{Path: "regions[R1].function", A: `"main._omp_fn.0"`, B: `""`, Known: KnownEntryPoints},
		{Path: "tasks[T1].entry_addr", A: `"0x401000"`, B: `""`, Known: KnownEntryPoints},
		{Path: "threads[os_tid=11].function", A: `"main._omp_fn.0"`, B: None, Known: KnownEntryPoints},
	})
	if n := Unexpected(res.Differences); n != 0 {
		t.Errorf("Unexpected = %d, want 0", n)
	}

	// With state tracking the library has no excuse.
	a, b = knownCase(true)
	res = Reports(a, b, "summary")
	wantDiffs(t, res.Differences, []Difference{
		{Path: "regions[R1].function", A: `"main._omp_fn.0"`, B: `""`},
		{Path: "tasks[T1].entry_addr", A: `"0x401000"`, B: `""`},
		{Path: "threads[os_tid=11].function", A: `"main._omp_fn.0"`, B: None},
	})
	if n := Unexpected(res.Differences); n != 3 {
		t.Errorf("Unexpected = %d, want 3", n)
	}
}

func TestNotKnown(t *testing.T) {
	a, b := pair()
	a.Runtime.StateTracking, b.Runtime.StateTracking = false, false
	// The dll gave a value; a field that is no entry point; the native
	// backend has no value either (a region only the dll reports).
	findRegion(b, dllIDs.a).Function = "main._omp_fn.9"
	findTask(b, dllIDs.i11).Location = ""
	findTask(b, dllIDs.i11).ConstructFunction = ""
	b.Regions = append(b.Regions, inspect.Region{ID: "region#3", Parent: sp(dllIDs.b)})
	res := Reports(a, b, "summary")
	notKnown := map[string]bool{
		"regions[R1].function":           true,
		"regions[R3].function":           true,
		"tasks[T1].location":             true,
		"tasks[T1].construct_function":   true,
		"regions[R3].entry_addr":         true,
		"regions[R3].construct_function": true,
	}
	for _, d := range res.Differences {
		if d.Known != "" {
			t.Errorf("%s (A %s, B %s) known as %q", d.Path, d.A, d.B, d.Known)
		}
		delete(notKnown, d.Path)
	}
	if len(notKnown) != 0 {
		t.Errorf("missing differences %v in:\n%s", notKnown, dump(res.Differences))
	}
	if n, want := Unexpected(res.Differences), 3+11; n != want {
		t.Errorf("Unexpected = %d, want %d:\n%s", n, want, dump(res.Differences))
	}
}

func TestKnownDirect(t *testing.T) {
	off := &inspect.Report{}
	on := &inspect.Report{Runtime: inspect.Runtime{StateTracking: true}}
	for _, tc := range []struct {
		d    Difference
		a    *inspect.Report
		want string
	}{
		{Difference{Path: "regions[R1].entry_addr", A: `"0x1"`, B: None}, off, KnownEntryPoints},
		{Difference{Path: "tasks[T2].function", A: `"f"`, B: `""`}, off, KnownEntryPoints},
		{Difference{Path: "threads[os_tid=3].function", A: `"f"`, B: None}, off, KnownEntryPoints},
		{Difference{Path: "threads[os_tid=3].function", A: `"f"`, B: None}, on, ""},
		{Difference{Path: "threads[os_tid=3].function", A: `"f"`, B: `"g"`}, off, ""},
		{Difference{Path: "threads[os_tid=3].function", A: None, B: `""`}, off, ""},
		{Difference{Path: "tasks[T2].construct_function", A: `"f"`, B: `""`}, off, ""},
		{Difference{Path: "backtraces[os_tid=3].frames[0].function", A: `"f"`, B: None}, off, ""},
		{Difference{Path: "icvs[x task T1].function", A: `"f"`, B: None}, off, ""},
	} {
		if got := known(tc.d, tc.a); got != tc.want {
			t.Errorf("known(%+v, tracking %v) = %q, want %q", tc.d, tc.a.Runtime.StateTracking, got, tc.want)
		}
	}
}

func TestViews(t *testing.T) {
	a, b := pair()
	b.Runtime.Version = "LLVM 19"
	findThread(b, 12).ThreadNum = ip(1)
	findRegion(b, dllIDs.a).TeamSize = 4
	findTask(b, dllIDs.e).Status = "running"
	b.ICVs[5].Value = 1000 // reordered: thread-limit-var
	b.ControlVars[0].Value = "TRUE"
	b.Backtraces[0].Activity = "computing"
	all := []Difference{
		{Path: "control_vars[OMP_DYNAMIC]", A: `"FALSE"`, B: `"TRUE"`},
		{Path: "icvs[thread-limit-var address_space]", A: "2147483647", B: "1000"},
		{Path: "regions[R1].team_size", A: "2", B: "4"},
		{Path: "runtime.version", A: `"LLVM OMP version: 5.0.20140926"`, B: `"LLVM 19"`},
		{Path: "tasks[T4].status", A: `"suspended"`, B: `"running"`},
		{Path: "threads[os_tid=12].thread_num", A: "0", B: "1"},
	}
	bt := Difference{Path: "backtraces[os_tid=12].activity", A: `"running task"`, B: `"computing"`}
	for _, tc := range []struct {
		view     View
		compared int
		want     []Difference
	}{
		{"", nSummary, all},
		{"summary", nSummary, all},
		{"bt", nBT, append([]Difference{bt}, all...)},
		{"threads", nThreads, all[5:6]},
		{"regions", nRegions, all[2:3]},
		{"tasks", nTasks, all[4:5]},
		{"icvs", nICVs, all[1:2]},
		{"env", nEnv, all[0:1]},
		{"no-such-view", 0, []Difference{}},
	} {
		res := Reports(a, b, tc.view)
		if !reflect.DeepEqual(res.Differences, tc.want) || res.Compared != tc.compared {
			t.Errorf("view %q: compared %d (want %d), differences:\n%s\nwant:\n%s", tc.view, res.Compared, tc.compared,
				dump(res.Differences), dump(tc.want))
		}
	}
}

func TestViewPrefixes(t *testing.T) {
	// Every path of a view starts with the view's prefix, also when
	// everything differs (reports of different targets).
	a := world(nativeIDs, false)
	b := &inspect.Report{}
	for view, prefix := range map[View]string{"threads": "threads[", "icvs": "icvs[", "regions": "regions[",
		"tasks": "tasks[", "env": "control_vars["} {
		res := Reports(a, b, view)
		if len(res.Differences) == 0 {
			t.Errorf("view %s: no differences", view)
		}
		for _, p := range paths(res.Differences) {
			if !strings.HasPrefix(p, prefix) {
				t.Errorf("view %s: path %s", view, p)
			}
		}
	}
	res := Reports(a, b, "bt")
	nbt := 0
	for _, p := range paths(res.Differences) {
		if strings.HasPrefix(p, "backtraces[") {
			nbt++
		}
	}
	if nbt != 25 {
		t.Errorf("bt: %d backtrace differences, want 25", nbt)
	}
	for _, p := range paths(Reports(a, b, "summary").Differences) {
		if strings.HasPrefix(p, "backtraces[") {
			t.Errorf("summary: path %s", p)
		}
	}
}

func TestUnexpected(t *testing.T) {
	ds := []Difference{{Path: "a"}, {Path: "b", Known: KnownEntryPoints}, {Path: "c", Known: "x"}, {Path: "d"}}
	if n := Unexpected(ds); n != 2 {
		t.Errorf("Unexpected = %d, want 2", n)
	}
	if n := Unexpected(nil); n != 0 {
		t.Errorf("Unexpected(nil) = %d, want 0", n)
	}
}

func TestFormat(t *testing.T) {
	d := Difference{Path: "threads[os_tid=12].state", A: `"wait_barrier_implicit"`, B: `"work_parallel"`}
	if got, want := d.Format(), `threads[os_tid=12].state: native "wait_barrier_implicit", dll "work_parallel"`; got != want {
		t.Errorf("Format() = %q, want %q", got, want)
	}
	d = Difference{Path: "regions[R1].function", A: `"main._omp_fn.0"`, B: `""`, Known: KnownEntryPoints}
	want := `regions[R1].function: native "main._omp_fn.0", dll "" — known: ` +
		"LLVM's libompd gives no task entry point without state tracking (ompd_rc_needs_state_tracking); the runtime records it in every mode"
	if got := d.Format(); got != want {
		t.Errorf("Format() = %q, want %q", got, want)
	}
	d = Difference{Path: "tasks[T2].thread", A: None, B: "12"}
	if got, want := d.Format(), "tasks[T2].thread: native (none), dll 12"; got != want {
		t.Errorf("Format() = %q, want %q", got, want)
	}
}

func TestDifferenceJSON(t *testing.T) {
	b, err := json.Marshal([]Difference{
		{Path: "p", A: "1", B: "2"},
		{Path: "q", A: `"x"`, B: None, Known: "k"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"path":"p","native":"1","dll":"2"},{"path":"q","native":"\"x\"","dll":"(none)","known":"k"}]`
	if string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
	res, err := json.Marshal(Result{Compared: 3, Differences: []Difference{}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"compared":3,"differences":[]}`; string(res) != want {
		t.Errorf("JSON %s, want %s", res, want)
	}
}

func TestBlockedTaskWaitsFor(t *testing.T) {
	// A blocked task reached by no thread (T6), compared with the tasks it
	// waits for renamed.
	add := func(r *inspect.Report, id objIDs, self string, waits ...string) {
		r.Tasks = append(r.Tasks, inspect.Task{ID: self, Kind: "explicit", Parent: sp(id.i11), Region: sp(id.a),
			Status: "blocked", Flags: []string{}, WaitsFor: waits, PendingDependences: ip(len(waits))})
	}
	a, b := pair()
	add(a, nativeIDs, "0x8000", nativeIDs.e, nativeIDs.i12)
	add(b, dllIDs, "task#5", dllIDs.e, dllIDs.i12)
	res := Reports(a, b, "tasks")
	if len(res.Differences) != 0 || res.Compared != nTasks+nTaskFlds+2 {
		t.Errorf("compared %d, want %d; differences:\n%s", res.Compared, nTasks+nTaskFlds+2, dump(res.Differences))
	}
	a, b = pair()
	add(a, nativeIDs, "0x8000", nativeIDs.e, nativeIDs.i12)
	add(b, dllIDs, "task#5", dllIDs.e)
	res = Reports(a, b, "tasks")
	wantDiffs(t, res.Differences, []Difference{
		{Path: "tasks[T6].pending_dependences", A: "2", B: "1"},
		{Path: "tasks[T6].waits_for", A: `["T4","T5"]`, B: `["T4"]`},
	})
}
