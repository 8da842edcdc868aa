package render

import (
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

// The reports the view tests render, built by hand: no process is needed.

func sp(s string) *string      { return &s }
func ip(i int) *int            { return &i }
func u64p(v uint64) *uint64    { return &v }
func ids(s ...string) []string { return s }

// Ids of the demo target's regions and tasks, as the native backend names
// them (runtime addresses).
const (
	r1     = "0x7f52d0000d40" // level 1, team of 2: threads 4210 and 4211
	r2     = "0x7f52d0003a00" // level 2 in r1, team of 3 encountered by 4211: 4211, 4212, 4213
	r3     = "0x7f52c8000b80" // level 2 in r1, serialized, encountered by 4210
	tInit  = "0x7f52d0000a00" // the initial task
	t10    = "0x7f52d0001000" // 4210's implicit task of r1
	t11    = "0x7f52d0001100" // 4211's implicit task of r1
	t30    = "0x7f52c8000c00" // the implicit task of r3 (4210)
	t20    = "0x7f52d0003c00" // 4211's implicit task of r2
	t21    = "0x7f52d0003d00" // 4212's implicit task of r2
	t22    = "0x7f52d0003e00" // 4213's implicit task of r2
	tE     = "0x55d0c0a03000" // an explicit task of t20, running on 4212
	tQueue = "0x55d0c0a03400" // an explicit task of t20, queued
	tBlock = "0x55d0c0a03800" // an explicit task of t20, waiting for tE
)

// nativeReport is the native backend's report of the demo target, with
// state tracking: 4210 holds up a serialized region waiting for a lock,
// 4211 and 4213 wait in a barrier of r2, 4212 runs the explicit task tE
// in that barrier, 4214 is idle in the thread pool and 4215 is a thread
// the program started itself (not an OpenMP thread). Its backtraces are
// those of bt --all-frames for 4212, 4210 and 4215.
func nativeReport() *inspect.Report {
	return &inspect.Report{
		Target: inspect.TargetInfo{Kind: "process", PID: 4210, Executable: "/home/ana/demo"},
		Runtime: inspect.Runtime{
			Library: "/opt/llvm/lib/libomp.so", Version: "LLVM OpenMP runtime, OpenMP 5.1", OpenMPVersion: 202011,
			OMPDDLLLocations: []string{"libompd.so"}, TypeInfo: "dwarf",
			StateTracking: true, NeedsStateTracking: []string{}, Backend: "native", Unavailable: []string{},
		},
		Threads: []inspect.Thread{
			{OSTID: 4210, GTID: ip(0), OpenMP: true, ThreadNum: ip(0), State: sp("wait_lock"), WaitID: u64p(0x55d0c0a012a0),
				Region: sp(r3), Task: sp(t30), TaskStack: ids(t30, t10), Location: "demo.c:60", Function: "compute._omp_fn.2",
				UserFrame: &inspect.FrameRef{Function: "take", File: "/home/ana/demo.c", Line: 22}},
			{OSTID: 4211, GTID: ip(1), OpenMP: true, ThreadNum: ip(0), State: sp("wait_barrier_explicit"), WaitID: u64p(0),
				Region: sp(r2), Task: sp(t20), TaskStack: ids(t20), Location: "demo.c:52", Function: "outer_work._omp_fn.1",
				UserFrame: &inspect.FrameRef{Function: "outer_work", File: "/home/ana/demo.c", Line: 55}},
			{OSTID: 4212, GTID: ip(2), OpenMP: true, ThreadNum: ip(1), State: sp("work_parallel"), WaitID: u64p(0),
				Region: sp(r2), Task: sp(tE), TaskStack: ids(tE, t21), Location: "demo.c:70", Function: ".omp_task_entry.",
				UserFrame: &inspect.FrameRef{Function: "explode", File: "/home/ana/demo.c", Line: 30}},
			{OSTID: 4213, GTID: ip(3), OpenMP: true, ThreadNum: ip(2), State: sp("wait_barrier_explicit"), WaitID: u64p(0),
				Region: sp(r2), Task: sp(t22), TaskStack: ids(t22), Location: "demo.c:52", Function: "outer_work._omp_fn.1",
				UserFrame: &inspect.FrameRef{Function: "outer_work", File: "/home/ana/demo.c", Line: 55}},
			{OSTID: 4214, GTID: ip(4), OpenMP: true, State: sp("idle"), WaitID: u64p(0), TaskStack: ids()},
			{OSTID: 4215, TaskStack: ids(),
				UserFrame: &inspect.FrameRef{Function: "logger_main", File: "/home/ana/logger.c", Line: 12}},
		},
		Regions: []inspect.Region{
			{ID: r1, Level: 1, ActiveLevel: 1, TeamSize: 2, Function: "main._omp_fn.0", EntryAddr: "0x55d0c0401e00",
				Location: "demo.c:40", ConstructFunction: "main", Threads: []int{4210, 4211}},
			{ID: r3, Parent: sp(r1), Level: 2, ActiveLevel: 1, TeamSize: 1, Serialized: true, Function: "compute._omp_fn.2",
				EntryAddr: "0x55d0c0401a40", Location: "demo.c:60", ConstructFunction: "compute", Threads: []int{4210}},
			{ID: r2, Parent: sp(r1), Level: 2, ActiveLevel: 2, TeamSize: 3, Function: "outer_work._omp_fn.1",
				EntryAddr: "0x55d0c0401c00", Location: "demo.c:52", ConstructFunction: "outer_work", Threads: []int{4211, 4212, 4213}},
		},
		Tasks: []inspect.Task{
			{ID: t30, Kind: "implicit", Function: "compute._omp_fn.2", Location: "demo.c:60", Parent: sp(t10), Region: sp(r3),
				Thread: ip(4210), Status: "running", EntryAddr: "0x55d0c0401a40", Flags: ids(), ExitFrame: sp("0x7ffd5e0a1b40"), EnterFrame: sp("0x0")},
			{ID: t10, Kind: "implicit", Function: "main._omp_fn.0", Location: "demo.c:40", Parent: sp(tInit), Region: sp(r1),
				Status: "suspended", EntryAddr: "0x55d0c0401e00", Flags: ids(), ExitFrame: sp("0x7ffd5e0a1c80"), EnterFrame: sp("0x7ffd5e0a1bd0")},
			{ID: tInit, Kind: "implicit", Status: "suspended", Flags: ids(), ExitFrame: sp("0x0"), EnterFrame: sp("0x7ffd5e0a1d10")},
			{ID: t20, Kind: "implicit", Function: "outer_work._omp_fn.1", Location: "demo.c:52", Parent: sp(t11), Region: sp(r2),
				Thread: ip(4211), Status: "running", EntryAddr: "0x55d0c0401c00", Flags: ids()},
			{ID: t11, Kind: "implicit", Function: "main._omp_fn.0", Location: "demo.c:40", Parent: sp(tInit), Region: sp(r1),
				Status: "suspended", EntryAddr: "0x55d0c0401e00", Flags: ids()},
			{ID: tE, Kind: "explicit", Function: ".omp_task_entry.", Location: "demo.c:70", Parent: sp(t20), Region: sp(r2),
				Thread: ip(4212), Status: "running", EntryAddr: "0x55d0c0401b00", Flags: ids()},
			{ID: t21, Kind: "implicit", Function: "outer_work._omp_fn.1", Location: "demo.c:52", Parent: sp(t11), Region: sp(r2),
				Status: "suspended", EntryAddr: "0x55d0c0401c00", Flags: ids()},
			{ID: t22, Kind: "implicit", Function: "outer_work._omp_fn.1", Location: "demo.c:52", Parent: sp(t11), Region: sp(r2),
				Thread: ip(4213), Status: "running", EntryAddr: "0x55d0c0401c00", Flags: ids()},
			{ID: tQueue, Kind: "explicit", Function: ".omp_task_entry..4", Location: "demo.c:71", Parent: sp(t20), Region: sp(r2),
				Status: "queued", EntryAddr: "0x55d0c0401b80", Flags: ids("final", "untied")},
			{ID: tBlock, Kind: "explicit", Function: ".omp_task_entry..6", Location: "demo.c:75", Parent: sp(t20), Region: sp(r2),
				Status: "blocked", EntryAddr: "0x55d0c0401bc0", Flags: ids(), WaitsFor: ids(tE), PendingDependences: ip(1)},
		},
		ICVs: []inspect.ICV{
			{Name: "thread-limit-var", Scope: "address_space", Value: 2147483647},
			{Name: "nthreads-var", Scope: "thread", Owner: 4210, Value: "2,3"},
			{Name: "levels-var", Scope: "parallel", Owner: r3, Value: 2},
			{Name: "active-levels-var", Scope: "parallel", Owner: r3, Value: 1},
			{Name: "run-sched-var", Scope: "task", Owner: t30, Value: "guided,5"},
		},
		ControlVars: []inspect.ControlVar{
			{Name: "KMP_BLOCKTIME", Value: "200ms"},
			{Name: "OMP_NUM_THREADS", Value: "2,3"},
			{Name: "OMP_DEBUG", Value: "enabled"},
		},
		Backtraces: []inspect.Backtrace{
			{OSTID: 4212, GTID: ip(2), OpenMP: true, State: sp("work_parallel"), Activity: "user code", Stop: "outermost frame", Complete: true,
				Frames: []inspect.Frame{
					user(4212, "0x55d0c0401a10", "explode", "", 30),
					user(4212, "0x55d0c0401b44", ".omp_task_entry.", "outer_work", 70),
					{Kind: inspect.KindTaskMarker, Thread: 4212, Task: sp(tE), Boundary: "ompd-frame",
						Text: "#pragma omp task at demo.c:70 — task 0x55d0c0a03000, parent 0x7f52d0003c00"},
					native(inspect.KindRuntime, 4212, "0x7f52d1a4c2f1", "__kmp_invoke_task"),
					user(4212, "0x55d0c0401c20", "outer_work._omp_fn.1", "outer_work", 55),
					{Kind: inspect.KindRegionMarker, Thread: 4212, Region: sp(r2), Boundary: "ompd-frame",
						Text: "#pragma omp parallel at demo.c:52 — team of 3, thread 1"},
					native(inspect.KindRuntime, 4212, "0x7f52d1a3f0b2", "__kmp_launch_thread"),
					native(inspect.KindSystem, 4212, "0x7f52d1294ac3", "start_thread"),
					{Kind: inspect.KindHop, Thread: 4211, Text: "continued on thread 0 (4211), which encountered the region"},
					native(inspect.KindRuntime, 4211, "0x7f52d1a3c4d1", "__kmp_fork_call"),
					user(4211, "0x55d0c0401d88", "outer_work", "", 52),
					user(4211, "0x55d0c0401e10", "main._omp_fn.0", "main", 41),
					{Kind: inspect.KindRegionMarker, Thread: 4211, Region: sp(r1), Boundary: "ompd-frame",
						Text: "#pragma omp parallel at demo.c:40 — team of 2, thread 1"},
					native(inspect.KindRuntime, 4211, "0x7f52d1a3f0b2", "__kmp_launch_thread"),
					native(inspect.KindSystem, 4211, "0x7f52d1294ac3", "start_thread"),
					{Kind: inspect.KindHop, Thread: 4210, Text: "continued on thread 0 (4210), which encountered the region"},
					native(inspect.KindRuntime, 4210, "0x7f52d1a3c4d1", "__kmp_fork_call"),
					user(4210, "0x55d0c0401f00", "main", "", 40),
					native(inspect.KindSystem, 4210, "0x7f52d1229d90", "__libc_start_call_main"),
				}},
			{OSTID: 4210, GTID: ip(0), OpenMP: true, State: sp("wait_lock"), Activity: "lock", Stop: "outermost frame", Complete: true,
				Frames: []inspect.Frame{
					native(inspect.KindRuntime, 4210, "0x7f52d1a61b37", "__kmp_acquire_queuing_lock"),
					native(inspect.KindRuntime, 4210, "0x7f52d1a5f0c4", "omp_set_lock"),
					{Kind: inspect.KindUser, Thread: 4210, PC: sp("0x55d0c0401a88"), Function: "take", File: "/home/ana/demo.c", Line: 22, Inlined: true},
					user(4210, "0x55d0c0401a88", "compute._omp_fn.2", "compute", 63),
					{Kind: inspect.KindRegionMarker, Thread: 4210, Region: sp(r3), Boundary: "ompd-frame",
						Text: "#pragma omp parallel at demo.c:60 — team of 1, thread 0"},
					native(inspect.KindRuntime, 4210, "0x7f52d1a8e5a3", "__kmp_invoke_microtask"),
					user(4210, "0x55d0c0401cf0", "compute", "", 60),
					user(4210, "0x55d0c0401e40", "main._omp_fn.0", "main", 43),
					{Kind: inspect.KindRegionMarker, Thread: 4210, Region: sp(r1), Boundary: "ompd-frame",
						Text: "#pragma omp parallel at demo.c:40 — team of 2, thread 0"},
					native(inspect.KindRuntime, 4210, "0x7f52d1a3c4d1", "__kmp_fork_call"),
					user(4210, "0x55d0c0401f00", "main", "", 40),
					native(inspect.KindSystem, 4210, "0x7f52d1229d90", "__libc_start_call_main"),
				}},
			{OSTID: 4215, Activity: "user code", Stop: "pc not in any module", Complete: false,
				Frames: []inspect.Frame{
					native(inspect.KindSystem, 4215, "0x7f52d12e4e2d", "clock_nanosleep"),
					{Kind: inspect.KindUser, Thread: 4215, PC: sp("0x55d0c04012f4"), Function: "logger_main", File: "/home/ana/logger.c", Line: 12},
				}},
		},
		Warnings: []string{
			"unwinding: thread 4215: pc 0x1 is in no module",
		},
	}
}

// user is a frame of user code in demo.c; userFn is the function that
// contains the construct of an outlined function.
func user(tid int, pc, fn, userFn string, line int) inspect.Frame {
	return inspect.Frame{Kind: inspect.KindUser, Thread: tid, PC: sp(pc), Function: fn, UserFunction: userFn,
		File: "/home/ana/demo.c", Line: line}
}

// native is a frame of the runtime or of a system library: no source
// position.
func native(kind string, tid int, pc, fn string) inspect.Frame {
	return inspect.Frame{Kind: kind, Thread: tid, PC: sp(pc), Function: fn}
}

// dllUnavailable is what LLVM's OMPD library cannot give (the list the
// dll backend puts in runtime.unavailable).
var dllUnavailable = []string{
	"backtraces[].frames[].user_function", "regions[].construct_function", "regions[].location", "regions[].serialized",
	"tasks[].construct_function", "tasks[].flags", "tasks[].location",
	"tasks[status=blocked]", "tasks[status=queued]",
	"threads[].gtid", "threads[].location",
}

// dllReport is the dll backend's report of the same target, without state
// tracking: no gtids (OMPD has no call for them) but the same OpenMP
// threads, no states, no entry points (LLVM's library gives none without
// state tracking), no queued or blocked tasks; ids are the backend's
// handle names. It has no locations either, as for a program without
// debug information (where the DWARF fallback finds none). The summary's
// user frames are there (the stacks need no OMPD).
func dllReport() *inspect.Report {
	n := nativeReport()
	frames := map[int]*inspect.FrameRef{}
	for _, th := range n.Threads {
		frames[th.OSTID] = th.UserFrame
	}
	const (
		d1, d2, d3                              = "region#1", "region#2", "region#3"
		dInit, d10, d11, d30, d20, d21, d22, dE = "task#3", "task#2", "task#5", "task#1", "task#4", "task#7", "task#8", "task#6"
	)
	return &inspect.Report{
		Target: n.Target,
		Runtime: inspect.Runtime{
			Library: "/opt/llvm/lib/libomp.so", Version: "LLVM OpenMP runtime, OpenMP 5.1", OpenMPVersion: 202011,
			OMPDDLLLocations: []string{"libompd.so"}, TypeInfo: "dwarf",
			StateTracking:      false,
			NeedsStateTracking: []string{"threads[].state", "threads[].wait_id", "tasks[].exit_frame", "tasks[].enter_frame"},
			Hint:               "the program runs without OMPD state tracking: thread states, wait ids and task frames are not recorded. Start it with OMP_DEBUG=enabled to see them",
			Backend:            "dll",
			OMPDLibrary: &inspect.OMPDLibrary{Path: "/opt/llvm/lib/libompd.so", Version: "LLVM OpenMP 19.1.7",
				Messages: []string{"ompd_get_task_function: needs state tracking\n", "ompd_get_task_function: needs state tracking\n"}},
			Unavailable: dllUnavailable,
		},
		Threads: []inspect.Thread{
			{OSTID: 4210, OpenMP: true, ThreadNum: ip(0), Region: sp(d2), Task: sp(d30), TaskStack: ids(d30, d10), UserFrame: frames[4210]},
			{OSTID: 4211, OpenMP: true, ThreadNum: ip(0), Region: sp(d3), Task: sp(d20), TaskStack: ids(d20), UserFrame: frames[4211]},
			{OSTID: 4212, OpenMP: true, ThreadNum: ip(1), Region: sp(d3), Task: sp(dE), TaskStack: ids(dE, d21), UserFrame: frames[4212]},
			{OSTID: 4213, OpenMP: true, ThreadNum: ip(2), Region: sp(d3), Task: sp(d22), TaskStack: ids(d22), UserFrame: frames[4213]},
			{OSTID: 4214, OpenMP: true, TaskStack: ids()},
			{OSTID: 4215, TaskStack: ids(), UserFrame: frames[4215]},
		},
		Regions: []inspect.Region{
			{ID: d1, Level: 1, ActiveLevel: 1, TeamSize: 2, Threads: []int{4210, 4211}},
			{ID: d2, Parent: sp(d1), Level: 2, ActiveLevel: 1, TeamSize: 1, Threads: []int{4210}},
			{ID: d3, Parent: sp(d1), Level: 2, ActiveLevel: 2, TeamSize: 3, Threads: []int{4211, 4212, 4213}},
		},
		Tasks: []inspect.Task{
			{ID: d30, Kind: "implicit", Parent: sp(d10), Region: sp(d2), Thread: ip(4210), Status: "running", Flags: ids()},
			{ID: d10, Kind: "implicit", Parent: sp(dInit), Region: sp(d1), Status: "suspended", Flags: ids()},
			{ID: dInit, Kind: "implicit", Status: "suspended", Flags: ids()},
			{ID: d20, Kind: "implicit", Parent: sp(d11), Region: sp(d3), Thread: ip(4211), Status: "running", Flags: ids()},
			{ID: d11, Kind: "implicit", Parent: sp(dInit), Region: sp(d1), Status: "suspended", Flags: ids()},
			{ID: dE, Kind: "explicit", Parent: sp(d20), Region: sp(d3), Thread: ip(4212), Status: "running", Flags: ids()},
			{ID: d21, Kind: "implicit", Parent: sp(d11), Region: sp(d3), Status: "suspended", Flags: ids()},
			{ID: d22, Kind: "implicit", Parent: sp(d11), Region: sp(d3), Thread: ip(4213), Status: "running", Flags: ids()},
		},
		ICVs: []inspect.ICV{
			{Name: "thread-limit-var", Scope: "address_space", Value: 2147483647},
			{Name: "nthreads-var", Scope: "thread", Owner: 4210, Value: "2,3"},
		},
		ControlVars: n.ControlVars,
		Backtraces: []inspect.Backtrace{
			{OSTID: 4213, OpenMP: true, Activity: "barrier (explicit or end of worksharing)", Stop: "outermost frame", Complete: true,
				Frames: []inspect.Frame{
					user(4213, "0x55d0c0401c20", "outer_work._omp_fn.1", "", 55),
					{Kind: inspect.KindRegionMarker, Thread: 4213, Region: sp(d3), Boundary: "entry-point",
						Text: "#pragma omp parallel at unknown location — team of 3, thread 2"},
					{Kind: inspect.KindHop, Thread: 4211, Text: "continued on thread 0 (4211), which encountered the region"},
					user(4211, "0x55d0c0401d88", "outer_work", "", 52),
				}},
			{OSTID: 4215, Activity: "user code", Stop: "outermost frame", Complete: true,
				Frames: []inspect.Frame{
					{Kind: inspect.KindUser, Thread: 4215, PC: sp("0x55d0c04012f4"), Function: "logger_main", File: "/home/ana/logger.c", Line: 12},
				}},
		},
		Warnings: []string{},
	}
}

// noOpenMPReport is a core of a program whose runtime is loaded but that
// has not started any OpenMP thread yet: its threads are not OpenMP
// threads; nothing is in a region.
func noOpenMPReport() *inspect.Report {
	return &inspect.Report{
		Target: inspect.TargetInfo{Kind: "core", PID: 977, Executable: "/usr/bin/late", Core: "/tmp/core.977"},
		Runtime: inspect.Runtime{
			Library: "/opt/llvm/lib/libomp.so", Version: "LLVM OpenMP runtime, OpenMP 5.1", OpenMPVersion: 202011,
			StateTracking: true, NeedsStateTracking: []string{}, Backend: "native", Unavailable: []string{},
		},
		Threads: []inspect.Thread{
			{OSTID: 977, TaskStack: ids()},
			{OSTID: 978, TaskStack: ids(), UserFrame: &inspect.FrameRef{Function: "poll_loop", File: "", Line: 0}},
		},
		Regions:     []inspect.Region{},
		Tasks:       []inspect.Task{},
		ICVs:        []inspect.ICV{},
		ControlVars: []inspect.ControlVar{},
		Backtraces: []inspect.Backtrace{
			{OSTID: 977, Activity: "no OpenMP frames", Stop: "outermost frame", Complete: true, Frames: []inspect.Frame{}},
		},
		Warnings: []string{
			"construct locations from the runtime and queued tasks are unavailable: no DWARF type information in /opt/llvm/lib/libomp.so",
			"unwinding: thread 978: memory unreadable: reading the return address at 0x7ffd0000fff8",
		},
	}
}

// wantText compares a view's whole output with want and, when they
// differ, shows both and the first line that differs.
func wantText(t *testing.T, what, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	line := 0
	for line < len(g) && line < len(w) && g[line] == w[line] {
		line++
	}
	first := func(s []string) string {
		if line < len(s) {
			return s[line]
		}
		return "(end of output)"
	}
	t.Errorf("%s: line %d differs:\n got %q\nwant %q\nwhole output:\n%s\nwant:\n%s", what, line+1, first(g), first(w), got, want)
}
