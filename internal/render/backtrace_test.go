package render

import (
	"bytes"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/compare"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

// TestBacktraces: each thread's header (who it is to the runtime, what it
// does, its OMPD state), its frames numbered across hops, the markers (──)
// where regions and tasks begin, the hops (══) to the encountering
// thread's stack, the kind of frames that are not user code, inlined
// frames, tail call frames, and where unwinding stopped.
func TestBacktraces(t *testing.T) {
	native := nativeReport()
	dll := dllReport()
	noOMP := noOpenMPReport()
	cases := []struct {
		name string
		r    *inspect.Report
		bts  []inspect.Backtrace
		want string
	}{
		{"native --all-frames", native, native.Backtraces, nativeHeader + `
thread 4212 (gtid 2, thread 1 of its team)  user code; OpenMP state work_parallel
  #0  0x55d0c0401a10 explode at demo.c:30
  #1  0x55d0c0401b44 .omp_task_entry. [in outer_work] at demo.c:70
  ── #pragma omp task at demo.c:70 — task 0x55d0c0a03000, parent 0x7f52d0003c00
  #2  0x7f52d1a4c2f1 __kmp_invoke_task  (runtime)
  #3  0x55d0c0401c20 outer_work._omp_fn.1 [in outer_work] at demo.c:55
  ── #pragma omp parallel at demo.c:52 — team of 3, thread 1
  #4  0x7f52d1a3f0b2 __kmp_launch_thread  (runtime)
  #5  0x7f52d1294ac3 start_thread  (system)
  ══ continued on thread 0 (4211), which encountered the region
  #6  0x7f52d1a3c4d1 __kmp_fork_call  (runtime)
  #7  0x55d0c0401d88 outer_work at demo.c:52
  #8  0x55d0c0401e10 main._omp_fn.0 [in main] at demo.c:41
  ── #pragma omp parallel at demo.c:40 — team of 2, thread 1
  #9  0x7f52d1a3f0b2 __kmp_launch_thread  (runtime)
  #10 0x7f52d1294ac3 start_thread  (system)
  ══ continued on thread 0 (4210), which encountered the region
  #11 0x7f52d1a3c4d1 __kmp_fork_call  (runtime)
  #12 0x55d0c0401f00 main at demo.c:40
  #13 0x7f52d1229d90 __libc_start_call_main  (system)

thread 4210 (gtid 0, thread 0 of its team)  lock; OpenMP state wait_lock
  #0  0x7f52d1a61b37 __kmp_acquire_queuing_lock  (runtime)
  #1  0x7f52d1a5f0c4 omp_set_lock  (runtime)
  #2  0x55d0c0401a88 take [inlined] at demo.c:22
  #3  0x55d0c0401a88 compute._omp_fn.2 [in compute] at demo.c:63
  ── #pragma omp parallel at demo.c:60 — team of 1, thread 0
  #4  0x7f52d1a8e5a3 __kmp_invoke_microtask  (runtime)
  #5  0x55d0c0401cf0 compute at demo.c:60
  #6  0x55d0c0401e40 main._omp_fn.0 [in main] at demo.c:43
  ── #pragma omp parallel at demo.c:40 — team of 2, thread 0
  #7  0x7f52d1a3c4d1 __kmp_fork_call  (runtime)
  #8  0x55d0c0401f00 main at demo.c:40
  #9  0x7f52d1229d90 __libc_start_call_main  (system)

thread 4215 (not an OpenMP thread)  user code
  #0  0x7f52d12e4e2d clock_nanosleep  (system)
  #1  0x55d0c04012f4 logger_main at logger.c:12
  (unwinding stopped: pc not in any module)
` + nativeFooter},
		// An OpenMP thread without a gtid (the dll backend) is not called
		// "not an OpenMP thread"; no state without state tracking.
		{"dll", dll, dll.Backtraces, dllHeader + `
thread 4213 (OpenMP thread, thread 2 of its team)  barrier (explicit or end of worksharing)
  #0  0x55d0c0401c20 outer_work._omp_fn.1 at demo.c:55
  ── #pragma omp parallel at unknown location — team of 3, thread 2
  ══ continued on thread 0 (4211), which encountered the region
  #1  0x55d0c0401d88 outer_work at demo.c:52

thread 4215 (not an OpenMP thread)  user code
  #0  0x55d0c04012f4 logger_main at logger.c:12
` + dllFooter},
		// An OpenMP thread of the native backend, idle in the pool: no
		// team number; no frames left in the default view.
		{"idle", native, []inspect.Backtrace{{OSTID: 4214, GTID: ip(4), OpenMP: true, State: sp("idle"),
			Activity: "idle in the thread pool", Stop: "outermost frame", Complete: true, Frames: []inspect.Frame{}}}, nativeHeader + `
thread 4214 (gtid 4)  idle in the thread pool; OpenMP state idle
` + nativeFooter},
		// A worker asleep in pthread_cond_wait, with all frames: the
		// tail call frame (__futex_abstimed_wait_cancelable64 jumped to
		// __futex_abstimed_wait_common) has its own pc, after its jump,
		// and is numbered like any frame.
		{"tail call", native, []inspect.Backtrace{{OSTID: 4218, GTID: ip(6), OpenMP: true, State: sp("wait_barrier"),
			Activity: "barrier (explicit or end of worksharing)", Stop: "outermost frame", Complete: true, Frames: []inspect.Frame{
				{Kind: inspect.KindSystem, Thread: 4218, PC: sp("0x7f52d1291e4e"), Function: "__futex_abstimed_wait_common64", File: "/build/glibc/nptl/futex-internal.c", Line: 57, Inlined: true},
				{Kind: inspect.KindSystem, Thread: 4218, PC: sp("0x7f52d1291e4e"), Function: "__futex_abstimed_wait_common", File: "/build/glibc/nptl/futex-internal.c", Line: 87},
				{Kind: inspect.KindSystem, Thread: 4218, PC: sp("0x7f52d1291f7b"), Function: "__futex_abstimed_wait_cancelable64", File: "/build/glibc/nptl/futex-internal.c", Line: 139, TailCall: true},
				{Kind: inspect.KindSystem, Thread: 4218, PC: sp("0x7f52d12945d8"), Function: "__pthread_cond_wait_common", File: "/build/glibc/nptl/pthread_cond_wait.c", Line: 503, Inlined: true},
				{Kind: inspect.KindSystem, Thread: 4218, PC: sp("0x7f52d12945d8"), Function: "___pthread_cond_wait", File: "/build/glibc/nptl/pthread_cond_wait.c", Line: 618},
				{Kind: inspect.KindRuntime, Thread: 4218, PC: sp("0x7f52d1a6e1b2"), Function: "__kmp_suspend_64"},
				{Kind: inspect.KindRuntime, Thread: 4218, PC: sp("0x7f52d1a5a4c0"), Function: "__kmpc_barrier"},
				{Kind: inspect.KindUser, Thread: 4218, PC: sp("0x55d0c0401c40"), Function: "outer_work._omp_fn.1", UserFunction: "outer_work", File: "/home/ana/demo.c", Line: 57},
			}}}, nativeHeader + `
thread 4218 (gtid 6)  barrier (explicit or end of worksharing); OpenMP state wait_barrier
  #0  0x7f52d1291e4e __futex_abstimed_wait_common64 [inlined] at futex-internal.c:57  (system)
  #1  0x7f52d1291e4e __futex_abstimed_wait_common at futex-internal.c:87  (system)
  #2  0x7f52d1291f7b __futex_abstimed_wait_cancelable64 [tail call] at futex-internal.c:139  (system)
  #3  0x7f52d12945d8 __pthread_cond_wait_common [inlined] at pthread_cond_wait.c:503  (system)
  #4  0x7f52d12945d8 ___pthread_cond_wait at pthread_cond_wait.c:618  (system)
  #5  0x7f52d1a6e1b2 __kmp_suspend_64  (runtime)
  #6  0x7f52d1a5a4c0 __kmpc_barrier  (runtime)
  #7  0x55d0c0401c40 outer_work._omp_fn.1 [in outer_work] at demo.c:57
` + nativeFooter},
		{"no frames", noOMP, noOMP.Backtraces, coreHeader + `
thread 977 (not an OpenMP thread)  no OpenMP frames
` + coreFooter},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			Backtraces(&b, c.r, c.bts)
			wantText(t, c.name, b.String(), c.want)
		})
	}
}

// TestBacktraceGroups: each group once, with the count and ids of its
// threads ("1 thread" / "2 threads") and what they do, then the first
// thread's frames.
func TestBacktraceGroups(t *testing.T) {
	r := nativeReport()
	r.Threads = append(r.Threads,
		inspect.Thread{OSTID: 4216, GTID: ip(5), OpenMP: true, State: sp("idle"), WaitID: u64p(0), TaskStack: ids()},
		inspect.Thread{OSTID: 4217, TaskStack: ids(), UserFrame: &inspect.FrameRef{Function: "logger_main", File: "/home/ana/logger.c", Line: 12}})
	logger := func(tid int) inspect.Backtrace {
		return inspect.Backtrace{OSTID: tid, Activity: "user code", Stop: "outermost frame", Complete: true, Frames: []inspect.Frame{
			native(inspect.KindSystem, tid, "0x7f52d12e4e2d", "clock_nanosleep"),
			{Kind: inspect.KindUser, Thread: tid, PC: sp("0x55d0c04012f4"), Function: "logger_main", File: "/home/ana/logger.c", Line: 12},
		}}
	}
	// 4212 as the default view shows it: runtime frames and system frames
	// that lead to no user code folded away.
	var worker inspect.Backtrace
	for _, bt := range r.Backtraces {
		if bt.OSTID == 4212 {
			worker = bt
		}
	}
	var shown []inspect.Frame
	for _, f := range worker.Frames {
		if f.Kind != inspect.KindRuntime && f.Kind != inspect.KindSystem {
			shown = append(shown, f)
		}
	}
	worker.Frames = shown
	groups := []BacktraceGroup{
		{Threads: []int{4214, 4216}, Backtrace: inspect.Backtrace{OSTID: 4214, GTID: ip(4), OpenMP: true, State: sp("idle"),
			Activity: "idle in the thread pool", Stop: "outermost frame", Complete: true, Frames: []inspect.Frame{}}},
		{Threads: []int{4212}, Backtrace: worker},
		{Threads: []int{4215, 4217}, Backtrace: logger(4215)},
	}
	var b bytes.Buffer
	BacktraceGroups(&b, r, groups)
	wantText(t, "groups", b.String(), nativeHeader+`
2 threads: 4214, 4216
  doing: idle in the thread pool

1 thread: 4212
  doing: user code
  #0  0x55d0c0401a10 explode at demo.c:30
  #1  0x55d0c0401b44 .omp_task_entry. [in outer_work] at demo.c:70
  ── #pragma omp task at demo.c:70 — task 0x55d0c0a03000, parent 0x7f52d0003c00
  #2  0x55d0c0401c20 outer_work._omp_fn.1 [in outer_work] at demo.c:55
  ── #pragma omp parallel at demo.c:52 — team of 3, thread 1
  ══ continued on thread 0 (4211), which encountered the region
  #3  0x55d0c0401d88 outer_work at demo.c:52
  #4  0x55d0c0401e10 main._omp_fn.0 [in main] at demo.c:41
  ── #pragma omp parallel at demo.c:40 — team of 2, thread 1
  ══ continued on thread 0 (4210), which encountered the region
  #5  0x55d0c0401f00 main at demo.c:40

2 threads: 4215, 4217
  doing: user code
  #0  0x7f52d12e4e2d clock_nanosleep  (system)
  #1  0x55d0c04012f4 logger_main at logger.c:12
`+nativeFooter)
}

// TestDifferences: --backend both's text: the library compared, the
// fields not compared, each difference, and the verdict.
func TestDifferences(t *testing.T) {
	const intro = `Comparing ompd-inspect's native OMPD with /opt/llvm/lib/libompd.so (LLVM OpenMP 19.1.7)
Not compared (no OMPD call gives them): backtraces[].frames[].user_function, regions[].construct_function, regions[].location, regions[].serialized, tasks[].construct_function, tasks[].flags, tasks[].location, tasks[status=blocked], tasks[status=queued], threads[].gtid, threads[].location
`
	knownFn := compare.Difference{Path: "regions[R1].function", A: `"main._omp_fn.0"`, B: `""`, Known: compare.KnownEntryPoints}
	knownEntry := compare.Difference{Path: "regions[R1].entry_addr", A: `"0x55d0c0401e00"`, B: `""`, Known: compare.KnownEntryPoints}
	openmp := compare.Difference{Path: "threads[os_tid=4214].openmp", A: "true", B: "false"}
	noVersion := dllReport()
	noVersion.Runtime.OMPDLibrary.Version = ""
	noVersion.Runtime.Unavailable = []string{}
	noLibrary := dllReport()
	noLibrary.Runtime.OMPDLibrary = nil
	noLibrary.Runtime.Unavailable = []string{"threads[].gtid"}
	cases := []struct {
		name string
		b    *inspect.Report
		res  compare.Result
		want string
	}{
		{"none", dllReport(), compare.Result{Compared: 2391, Differences: []compare.Difference{}}, intro + `No differences in 2391 fields.
`},
		{"known", dllReport(), compare.Result{Compared: 1022, Differences: []compare.Difference{knownEntry, knownFn}}, intro +
			`  regions[R1].entry_addr: native "0x55d0c0401e00", dll "" — known: ` + compare.KnownEntryPoints + `
  regions[R1].function: native "main._omp_fn.0", dll "" — known: ` + compare.KnownEntryPoints + `
2 differences, all known defects of the library.
`},
		{"not known", dllReport(), compare.Result{Compared: 1022, Differences: []compare.Difference{knownFn, openmp}}, intro +
			`  regions[R1].function: native "main._omp_fn.0", dll "" — known: ` + compare.KnownEntryPoints + `
  threads[os_tid=4214].openmp: native true, dll false
2 differences, 1 not known.
`},
		{"library without version", noVersion, compare.Result{Compared: 12, Differences: []compare.Difference{openmp}},
			`Comparing ompd-inspect's native OMPD with /opt/llvm/lib/libompd.so
  threads[os_tid=4214].openmp: native true, dll false
1 difference, not known.
`},
		{"one known", dllReport(), compare.Result{Compared: 12, Differences: []compare.Difference{knownFn}}, intro +
			`  regions[R1].function: native "main._omp_fn.0", dll "" — known: ` + compare.KnownEntryPoints + `
1 difference, a known defect of the library.
`},
		{"no library", noLibrary, compare.Result{Compared: 12, Differences: []compare.Difference{}},
			`Comparing ompd-inspect's native OMPD with the OMPD library
Not compared (no OMPD call gives them): threads[].gtid
No differences in 12 fields.
`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			Differences(&b, nativeReport(), c.b, c.res)
			wantText(t, c.name, b.String(), c.want)
		})
	}
}
