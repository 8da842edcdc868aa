package render

import (
	"bytes"
	"io"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

// The first lines of every view of each report, and the last.
const (
	nativeHeader = `process 4210  /home/ana/demo
runtime   /opt/llvm/lib/libomp.so  (LLVM OpenMP runtime, OpenMP 5.1)
tracking  on
`
	nativeFooter = `
warnings:
  unwinding: thread 4215: pc 0x1 is in no module
`
	dllHeader = `process 4210  /home/ana/demo
runtime   /opt/llvm/lib/libomp.so  (LLVM OpenMP runtime, OpenMP 5.1)
ompd      /opt/llvm/lib/libompd.so  (LLVM OpenMP 19.1.7)
tracking  off (start with OMP_DEBUG=enabled for states, wait ids and task frames)
`
	dllFooter = `
printed by /opt/llvm/lib/libompd.so:
  ompd_get_task_function: needs state tracking
  ompd_get_task_function: needs state tracking
`
	coreHeader = `core /tmp/core.977 (process 977)  /usr/bin/late
runtime   /opt/llvm/lib/libomp.so  (LLVM OpenMP runtime, OpenMP 5.1)
tracking  on
`
	coreFooter = `
warnings:
  construct locations from the runtime and queued tasks are unavailable: no DWARF type information in /opt/llvm/lib/libomp.so
  unwinding: thread 978: memory unreadable: reading the return address at 0x7ffd0000fff8
`
)

// viewCase is one report rendered by one view, and the whole text wanted.
type viewCase struct {
	name   string
	report *inspect.Report
	want   string
}

func runViews(t *testing.T, view func(io.Writer, *inspect.Report), cases []viewCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			view(&b, c.report)
			wantText(t, c.name, b.String(), c.want)
		})
	}
}

// TestSummary: the counts (OpenMP threads counted from threads[].openmp,
// also when there are no gtids), the threads grouped by state and
// innermost user frame (largest group first), the region tree.
func TestSummary(t *testing.T) {
	// Without stacks, a thread is placed by its current task.
	noStacks := dllReport()
	for i := range noStacks.Threads {
		noStacks.Threads[i].UserFrame = nil
	}
	noStacks.Threads[1].Function = "outer_work._omp_fn.1"
	noStacks.Threads[2].Function = ".omp_task_entry."
	noStacks.Threads[2].Location = "demo.c:70"
	noStacks.Runtime.OMPDLibrary.Messages = nil

	runViews(t, Summary, []viewCase{
		{"native", nativeReport(), nativeHeader +
			`counts    6 threads (5 OpenMP), 3 parallel regions, 10 tasks (1 queued, 1 blocked on dependences)

threads by state and innermost user frame:
  2  wait_barrier_explicit   outer_work at demo.c:55     tids 4211 4213
  1  wait_lock               take at demo.c:22           tids 4210
  1  work_parallel           explode at demo.c:30        tids 4212
  1  idle                    -                           tids 4214
  1  (not an OpenMP thread)  logger_main at logger.c:12  tids 4215

parallel regions:
  - level 1  team of 2  demo.c:40  main._omp_fn.0  [0x7f52d0000d40]  threads 4210 4211
      - level 2  serialized  demo.c:60  compute._omp_fn.2  [0x7f52c8000b80]  threads 4210
      - level 2  team of 3  demo.c:52  outer_work._omp_fn.1  [0x7f52d0003a00]  threads 4211 4212 4213
` + nativeFooter},
		// No gtids, yet 5 OpenMP threads; queued and blocked tasks are
		// not known, not 0.
		{"dll", dllReport(), dllHeader +
			`counts    6 threads (5 OpenMP), 3 parallel regions, 8 tasks (? queued, ? blocked on dependences)

threads by state and innermost user frame:
  2  (state not tracked)     outer_work at demo.c:55     tids 4211 4213
  1  (state not tracked)     take at demo.c:22           tids 4210
  1  (state not tracked)     explode at demo.c:30        tids 4212
  1  (state not tracked)     -                           tids 4214
  1  (not an OpenMP thread)  logger_main at logger.c:12  tids 4215

parallel regions:
  - level 1  team of 2  -  -  [region#1]  threads 4210 4211
      - level 2  team of 1  -  -  [region#2]  threads 4210
      - level 2  team of 3  -  -  [region#3]  threads 4211 4212 4213
` + dllFooter},
		{"dll without stacks", noStacks, dllHeader +
			`counts    6 threads (5 OpenMP), 3 parallel regions, 8 tasks (? queued, ? blocked on dependences)

threads by state and innermost user frame:
  3  (state not tracked)     -                                   tids 4210 4213 4214
  1  (state not tracked)     task outer_work._omp_fn.1           tids 4211
  1  (state not tracked)     task at demo.c:70 .omp_task_entry.  tids 4212
  1  (not an OpenMP thread)  -                                   tids 4215

parallel regions:
  - level 1  team of 2  -  -  [region#1]  threads 4210 4211
      - level 2  team of 1  -  -  [region#2]  threads 4210
      - level 2  team of 3  -  -  [region#3]  threads 4211 4212 4213
`},
		{"no OpenMP threads", noOpenMPReport(), coreHeader +
			`counts    2 threads (0 OpenMP), 0 parallel regions, 0 tasks (0 queued, 0 blocked on dependences)

threads by state and innermost user frame:
  1  (not an OpenMP thread)  -          tids 977
  1  (not an OpenMP thread)  poll_loop  tids 978

parallel regions:
  (no thread is in a parallel region)
` + coreFooter},
	})
}

// TestThreads: one line per OS thread; "-" for what does not apply or is
// not known; the state column says which threads are not OpenMP threads;
// an OpenMP thread whose gtid the backend cannot tell has gtid "?".
func TestThreads(t *testing.T) {
	runViews(t, Threads, []viewCase{
		{"native", nativeReport(), nativeHeader + `
OS TID  GTID  NUM  STATE                   WAIT ID         REGION          TASK            LOCATION   FUNCTION
4210    0     0    wait_lock               0x55d0c0a012a0  0x7f52c8000b80  0x7f52c8000c00  demo.c:60  compute._omp_fn.2
4211    1     0    wait_barrier_explicit   0x0             0x7f52d0003a00  0x7f52d0003c00  demo.c:52  outer_work._omp_fn.1
4212    2     1    work_parallel           0x0             0x7f52d0003a00  0x55d0c0a03000  demo.c:70  .omp_task_entry.
4213    3     2    wait_barrier_explicit   0x0             0x7f52d0003a00  0x7f52d0003e00  demo.c:52  outer_work._omp_fn.1
4214    4     -    idle                    0x0             -               -               -          -
4215    -     -    (not an OpenMP thread)  -               -               -               -          -
` + nativeFooter},
		{"dll", dllReport(), dllHeader + `
OS TID  GTID  NUM  STATE                   WAIT ID  REGION    TASK    LOCATION  FUNCTION
4210    ?     0    (state not tracked)     -        region#2  task#1  -         -
4211    ?     0    (state not tracked)     -        region#3  task#4  -         -
4212    ?     1    (state not tracked)     -        region#3  task#6  -         -
4213    ?     2    (state not tracked)     -        region#3  task#8  -         -
4214    ?     -    (state not tracked)     -        -         -       -         -
4215    -     -    (not an OpenMP thread)  -        -         -       -         -
` + dllFooter},
		{"no OpenMP threads", noOpenMPReport(), coreHeader + `
OS TID  GTID  NUM  STATE                   WAIT ID  REGION  TASK  LOCATION  FUNCTION
977     -     -    (not an OpenMP thread)  -        -       -     -         -
978     -     -    (not an OpenMP thread)  -        -       -     -         -
` + coreFooter},
	})
}

// TestRegions: the tree, children indented under their parent, a region
// whose parent is not listed at the top.
func TestRegions(t *testing.T) {
	deep := nativeReport()
	deep.Runtime.StateTracking = false
	deep.Warnings = nil
	deep.Regions = append(deep.Regions,
		inspect.Region{ID: "0x7f52d0005000", Parent: sp(r2), Level: 3, ActiveLevel: 3, TeamSize: 2,
			Function: "inner._omp_fn.3", Location: "demo.c:90", Threads: []int{4212, 4216}},
		inspect.Region{ID: "0x7f52d0006000", Parent: sp("0x7f52d0009000"), Level: 2, ActiveLevel: 2, TeamSize: 2,
			Threads: []int{4217, 4218}})
	runViews(t, Regions, []viewCase{
		{"native", nativeReport(), nativeHeader + `
  - level 1  team of 2  demo.c:40  main._omp_fn.0  [0x7f52d0000d40]  threads 4210 4211
      - level 2  serialized  demo.c:60  compute._omp_fn.2  [0x7f52c8000b80]  threads 4210
      - level 2  team of 3  demo.c:52  outer_work._omp_fn.1  [0x7f52d0003a00]  threads 4211 4212 4213
` + nativeFooter},
		{"three levels and an orphan", deep, `process 4210  /home/ana/demo
runtime   /opt/llvm/lib/libomp.so  (LLVM OpenMP runtime, OpenMP 5.1)
tracking  off (start with OMP_DEBUG=enabled for states, wait ids and task frames)

  - level 1  team of 2  demo.c:40  main._omp_fn.0  [0x7f52d0000d40]  threads 4210 4211
      - level 2  serialized  demo.c:60  compute._omp_fn.2  [0x7f52c8000b80]  threads 4210
      - level 2  team of 3  demo.c:52  outer_work._omp_fn.1  [0x7f52d0003a00]  threads 4211 4212 4213
          - level 3  team of 2  demo.c:90  inner._omp_fn.3  [0x7f52d0005000]  threads 4212 4216
  - level 2  team of 2  -  -  [0x7f52d0006000]  threads 4217 4218
`},
		{"dll", dllReport(), dllHeader + `
  - level 1  team of 2  -  -  [region#1]  threads 4210 4211
      - level 2  team of 1  -  -  [region#2]  threads 4210
      - level 2  team of 3  -  -  [region#3]  threads 4211 4212 4213
` + dllFooter},
		{"no OpenMP threads", noOpenMPReport(), coreHeader + `
  (no thread is in a parallel region)
` + coreFooter},
	})
}

// TestTasks: the table, and the tasks blocked on dependences with what
// they wait for.
func TestTasks(t *testing.T) {
	unknownDeps := nativeReport()
	unknownDeps.Warnings = nil
	unknownDeps.Tasks = unknownDeps.Tasks[len(unknownDeps.Tasks)-2:]
	blocked := &unknownDeps.Tasks[1]
	blocked.WaitsFor, blocked.PendingDependences = nil, nil
	unknownDeps.Tasks = append(unknownDeps.Tasks, inspect.Task{ID: "0x55d0c0a03c00", Kind: "explicit", Function: ".omp_task_entry..8",
		Parent: sp(t20), Region: sp(r2), Status: "blocked", Flags: ids("untied"), WaitsFor: ids(tE, tQueue), PendingDependences: ip(2)})
	runViews(t, Tasks, []viewCase{
		{"native", nativeReport(), nativeHeader + `
TASK            KIND      STATUS     THREAD  PARENT          REGION          FLAGS         LOCATION   FUNCTION
0x7f52c8000c00  implicit  running    4210    0x7f52d0001000  0x7f52c8000b80  -             demo.c:60  compute._omp_fn.2
0x7f52d0001000  implicit  suspended  -       0x7f52d0000a00  0x7f52d0000d40  -             demo.c:40  main._omp_fn.0
0x7f52d0000a00  implicit  suspended  -       -               -               -             -          -
0x7f52d0003c00  implicit  running    4211    0x7f52d0001100  0x7f52d0003a00  -             demo.c:52  outer_work._omp_fn.1
0x7f52d0001100  implicit  suspended  -       0x7f52d0000a00  0x7f52d0000d40  -             demo.c:40  main._omp_fn.0
0x55d0c0a03000  explicit  running    4212    0x7f52d0003c00  0x7f52d0003a00  -             demo.c:70  .omp_task_entry.
0x7f52d0003d00  implicit  suspended  -       0x7f52d0001100  0x7f52d0003a00  -             demo.c:52  outer_work._omp_fn.1
0x7f52d0003e00  implicit  running    4213    0x7f52d0001100  0x7f52d0003a00  -             demo.c:52  outer_work._omp_fn.1
0x55d0c0a03400  explicit  queued     -       0x7f52d0003c00  0x7f52d0003a00  final,untied  demo.c:71  .omp_task_entry..4
0x55d0c0a03800  explicit  blocked    -       0x7f52d0003c00  0x7f52d0003a00  -             demo.c:75  .omp_task_entry..6

blocked on dependences:
  0x55d0c0a03800 (demo.c:75) waits for 0x55d0c0a03000; 1 unfinished predecessor(s)
` + nativeFooter},
		// The runtime's count unknown, predecessors not found; several
		// predecessors; no location.
		{"dependences", unknownDeps, nativeHeader + `
TASK            KIND      STATUS   THREAD  PARENT          REGION          FLAGS         LOCATION   FUNCTION
0x55d0c0a03400  explicit  queued   -       0x7f52d0003c00  0x7f52d0003a00  final,untied  demo.c:71  .omp_task_entry..4
0x55d0c0a03800  explicit  blocked  -       0x7f52d0003c00  0x7f52d0003a00  -             demo.c:75  .omp_task_entry..6
0x55d0c0a03c00  explicit  blocked  -       0x7f52d0003c00  0x7f52d0003a00  untied        -          .omp_task_entry..8

blocked on dependences:
  0x55d0c0a03800 (demo.c:75) waits for -; ? unfinished predecessor(s)
  0x55d0c0a03c00 (-) waits for 0x55d0c0a03000, 0x55d0c0a03400; 2 unfinished predecessor(s)
`},
		{"dll", dllReport(), dllHeader + `
TASK    KIND      STATUS     THREAD  PARENT  REGION    FLAGS  LOCATION  FUNCTION
task#1  implicit  running    4210    task#2  region#2  -      -         -
task#2  implicit  suspended  -       task#3  region#1  -      -         -
task#3  implicit  suspended  -       -       -         -      -         -
task#4  implicit  running    4211    task#5  region#3  -      -         -
task#5  implicit  suspended  -       task#3  region#1  -      -         -
task#6  explicit  running    4212    task#4  region#3  -      -         -
task#7  implicit  suspended  -       task#5  region#3  -      -         -
task#8  implicit  running    4213    task#5  region#3  -      -         -
` + dllFooter},
		{"no tasks", noOpenMPReport(), coreHeader + `
TASK  KIND  STATUS  THREAD  PARENT  REGION  FLAGS  LOCATION  FUNCTION
` + coreFooter},
	})
}

// TestICVs: the ICVs given, with their owners; numbers and strings as
// they are.
func TestICVs(t *testing.T) {
	n := nativeReport()
	thread, ok := n.ThreadICVs(4212) // the address space's, and none of 4212's own
	if !ok {
		t.Fatal("ThreadICVs(4212): not a thread")
	}
	cases := []struct {
		name string
		r    *inspect.Report
		icvs []inspect.ICV
		want string
	}{
		{"native", n, n.ICVs, nativeHeader + `
ICV                SCOPE          OWNER           VALUE
thread-limit-var   address_space  -               2147483647
nthreads-var       thread         4210            2,3
levels-var         parallel       0x7f52c8000b80  2
active-levels-var  parallel       0x7f52c8000b80  1
run-sched-var      task           0x7f52c8000c00  guided,5
` + nativeFooter},
		{"--thread 4212", n, thread, nativeHeader + `
ICV               SCOPE          OWNER  VALUE
thread-limit-var  address_space  -      2147483647
` + nativeFooter},
		{"dll", dllReport(), dllReport().ICVs, dllHeader + `
ICV               SCOPE          OWNER  VALUE
thread-limit-var  address_space  -      2147483647
nthreads-var      thread         4210   2,3
` + dllFooter},
		{"none", noOpenMPReport(), nil, coreHeader + `
ICV  SCOPE  OWNER  VALUE
` + coreFooter},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			ICVs(&b, c.r, c.icvs)
			wantText(t, c.name, b.String(), c.want)
		})
	}
}

// TestEnv: the control variables, names aligned.
func TestEnv(t *testing.T) {
	runViews(t, Env, []viewCase{
		{"native", nativeReport(), nativeHeader + `
KMP_BLOCKTIME    200ms
OMP_NUM_THREADS  2,3
OMP_DEBUG        enabled
` + nativeFooter},
		{"dll", dllReport(), dllHeader + `
KMP_BLOCKTIME    200ms
OMP_NUM_THREADS  2,3
OMP_DEBUG        enabled
` + dllFooter},
		{"none", noOpenMPReport(), coreHeader + `
  (the runtime recorded no control variables)
` + coreFooter},
	})
}

// TestHeaderKnowledge: the header says where a stripped runtime's
// symbols come from, and a report without OpenMP state says there is
// none instead of describing a runtime.
func TestHeaderKnowledge(t *testing.T) {
	rec := nativeReport()
	rec.Runtime.SymbolsSource, rec.Runtime.LayoutSource = inspect.SourceRecovered, inspect.SourceRecovered
	rec.Runtime.Release = "Debian libomp5-19 1:19.1.7-3~deb12u1"
	dbg := nativeReport()
	dbg.Runtime.SymbolsSource, dbg.Runtime.DebugFile = inspect.SourceDebugFile, "/d/.build-id/88/dd4c.debug"
	gone := nativeReport()
	gone.Runtime = inspect.Runtime{Library: "/opt/llvm/lib/libomp.so", Backend: "native"}
	none := noOpenMPReport()
	none.Runtime = inspect.Runtime{Backend: "native"}
	for _, c := range []struct {
		name string
		r    *inspect.Report
		want string
	}{
		{"recovered", rec, "runtime   /opt/llvm/lib/libomp.so  (LLVM OpenMP runtime, OpenMP 5.1)\nsymbols   recovered from the runtime's code  (Debian libomp5-19 1:19.1.7-3~deb12u1)\ntracking  on\n"},
		{"debug file", dbg, "runtime   /opt/llvm/lib/libomp.so  (LLVM OpenMP runtime, OpenMP 5.1)\nsymbols   /d/.build-id/88/dd4c.debug\ntracking  on\n"},
		{"unreadable", gone, "runtime   /opt/llvm/lib/libomp.so  (its OpenMP state cannot be read: see warnings)\n"},
		{"no runtime", none, "runtime   none: no OpenMP state (see warnings)\n"},
	} {
		var b bytes.Buffer
		header(&b, c.r)
		got := b.String()
		if i := bytes.IndexByte(b.Bytes(), '\n'); i >= 0 {
			got = got[i+1:] // after the target line
		}
		wantText(t, c.name, got, c.want)
	}
}
