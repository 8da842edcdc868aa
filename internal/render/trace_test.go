package render

import (
	"bytes"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/trace"
)

func fp(f float64) *float64 { return &f }

// TestEventLine: one line per event. Each case is one event and its whole
// line, so a change of the format changes the cases it concerns only.
func TestEventLine(t *testing.T) {
	cases := []struct {
		name string
		ev   trace.Event
		want string
	}{
		{"runtime ready, no gtid yet",
			trace.Event{Time: 0.000412, Kind: trace.KindRuntimeReady, OSTID: 4210},
			"  0.000412 thread 4210 runtime-ready"},
		{"thread begin",
			trace.Event{Time: 0.0021, Kind: trace.KindThreadBegin, OSTID: 4211, GTID: ip(1)},
			"  0.002100 thread 4211 (gtid 1) thread-begin"},
		{"parallel begin at level 1, requested size known",
			trace.Event{Time: 0.001875, Kind: trace.KindParallelBegin, OSTID: 4210, GTID: ip(0),
				Region: &trace.Region{ID: r1, Function: "main._omp_fn.0", Location: "demo.c:40", TeamSize: 2, Requested: ip(2), Level: 1}},
			"  0.001875 thread 4210 (gtid 0) parallel-begin region 0x7f52d0000d40 main._omp_fn.0 at demo.c:40 team 2 (nthreads-var 2) level 1"},
		{"nested parallel begin, fewer threads than requested",
			trace.Event{Time: 0.0124, Kind: trace.KindParallelBegin, OSTID: 4211, GTID: ip(1),
				Region: &trace.Region{ID: r2, Function: "outer_work._omp_fn.1", Location: "demo.c:52", TeamSize: 3, Requested: ip(4), Level: 2, Parent: r1}},
			"  0.012400 thread 4211 (gtid 1) parallel-begin region 0x7f52d0003a00 outer_work._omp_fn.1 at demo.c:52 team 3 (nthreads-var 4) level 2 in 0x7f52d0000d40"},
		{"serialized region: no function recorded, requested size unknown",
			trace.Event{Time: 1.5, Kind: trace.KindParallelBegin, OSTID: 4210, GTID: ip(0),
				Region: &trace.Region{ID: r3, Location: "demo.c:60", TeamSize: 1, Level: 2, Serialized: true, Parent: r1}},
			"  1.500000 thread 4210 (gtid 0) parallel-begin region 0x7f52c8000b80 - at demo.c:60 team 1 level 2 serialized in 0x7f52d0000d40"},
		{"parallel end with the team's gtids and the duration",
			trace.Event{Time: 0.0131, Kind: trace.KindParallelEnd, OSTID: 4211, GTID: ip(1), Duration: fp(0.0007),
				Region: &trace.Region{ID: r2, Function: "outer_work._omp_fn.1", Location: "demo.c:52", TeamSize: 3, Level: 2, Parent: r1, Threads: []int{1, 2, 3}}},
			"  0.013100 thread 4211 (gtid 1) parallel-end region 0x7f52d0003a00 outer_work._omp_fn.1 at demo.c:52 team 3 level 2 in 0x7f52d0000d40 gtids 1 2 3 after 700.0µs"},
		{"explicit task begin",
			trace.Event{Time: 0.0125, Kind: trace.KindTaskBegin, OSTID: 4212, GTID: ip(2),
				Task: &trace.Task{ID: tE, Function: ".omp_task_entry.", Location: "demo.c:70", Parent: t20, Region: r2, Flags: []string{"explicit"}}},
			"  0.012500 thread 4212 (gtid 2) task-begin task 0x55d0c0a03000 .omp_task_entry. at demo.c:70 explicit parent 0x7f52d0003c00"},
		{"untied final task begin",
			trace.Event{Time: 0.0126, Kind: trace.KindTaskBegin, OSTID: 4213, GTID: ip(3),
				Task: &trace.Task{ID: tQueue, Function: ".omp_task_entry..4", Location: "demo.c:71", Parent: t20, Region: r2, Flags: []string{"explicit", "final", "untied"}}},
			"  0.012600 thread 4213 (gtid 3) task-begin task 0x55d0c0a03400 .omp_task_entry..4 at demo.c:71 explicit,final,untied parent 0x7f52d0003c00"},
		{"task end, long after its begin",
			trace.Event{Time: 2.25, Kind: trace.KindTaskEnd, OSTID: 4212, GTID: ip(2), Duration: fp(2.2376),
				Task: &trace.Task{ID: tE, Function: ".omp_task_entry.", Location: "demo.c:70", Parent: t20, Region: r2, Flags: []string{"explicit"}}},
			"  2.250000 thread 4212 (gtid 2) task-end task 0x55d0c0a03000 .omp_task_entry. at demo.c:70 explicit parent 0x7f52d0003c00 after 2.238s"},
		{"implicit task without location, with warnings",
			trace.Event{Time: 0.0019, Kind: trace.KindTaskBegin, OSTID: 4211, GTID: ip(1),
				Task:     &trace.Task{ID: t11, Function: "main._omp_fn.0", Flags: []string{"implicit"}},
				Warnings: []string{"task parent: unavailable", "construct location: no DWARF"}},
			"  0.001900 thread 4211 (gtid 1) task-begin task 0x7f52d0001100 main._omp_fn.0 at - implicit [task parent: unavailable] [construct location: no DWARF]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := EventLine(c.ev); got != c.want {
				t.Errorf("\n got %q\nwant %q", got, c.want)
			}
		})
	}
}

// TestSeconds: seconds, milliseconds or microseconds, by size.
func TestSeconds(t *testing.T) {
	for _, c := range []struct {
		s    float64
		want string
	}{
		{0, "0.0µs"}, {0.0000004, "0.4µs"}, {0.000999, "999.0µs"}, {0.001, "1.000ms"},
		{0.0123456, "12.346ms"}, {0.9995, "999.500ms"}, {1, "1.000s"}, {75.5, "75.500s"},
	} {
		if got := Seconds(c.s); got != c.want {
			t.Errorf("Seconds(%v) = %q, want %q", c.s, got, c.want)
		}
	}
}

// TestTraceSummary: one row per construct ("-" where a column does not
// apply or nothing ended), then the event counts in trace.Kinds order and
// the ignored task ends.
func TestTraceSummary(t *testing.T) {
	sum := &trace.Summary{
		Rows: []trace.SummaryRow{
			{Class: trace.ClassParallel, Location: "demo.c:40", Function: "main._omp_fn.0", Count: 1, Ended: 1,
				TeamTotal: 2, TeamMean: 2, Threads: 2, TimeTotal: 1.25, TimeMean: 1.25},
			{Class: trace.ClassParallel, Location: "demo.c:52", Function: "outer_work._omp_fn.1", Count: 3, Ended: 2,
				TeamTotal: 8, TeamMean: 8.0 / 3, Threads: 4, TimeTotal: 0.0042, TimeMean: 0.0021},
			{Class: trace.ClassTask, Location: "demo.c:70", Function: ".omp_task_entry.", Count: 5, Ended: 0, Threads: 3},
			{Class: trace.ClassParallel, Count: 1, Ended: 1, TeamTotal: 1, TeamMean: 1, Threads: 1, TimeTotal: 0.00002, TimeMean: 0.00002},
		},
		Events:  map[string]int{trace.KindTaskBegin: 5, trace.KindParallelBegin: 5, trace.KindParallelEnd: 4, trace.KindRuntimeReady: 1},
		Threads: 4,
		Ignored: 7,
	}
	var b bytes.Buffer
	TraceSummary(&b, sum)
	wantText(t, "summary", b.String(), `CONSTRUCT  LOCATION   FUNCTION              COUNT  TEAM TOTAL  TEAM MEAN  THREADS  TIME TOTAL  TIME MEAN
parallel   demo.c:40  main._omp_fn.0        1      2           2.00       2        1.250s      1.250s
parallel   demo.c:52  outer_work._omp_fn.1  3      8           2.67       4        4.200ms     2.100ms
task       demo.c:70  .omp_task_entry.      5      -           -          3        -           -
parallel   -          -                     1      1           1.00       1        20.0µs      20.0µs
events: parallel-begin 5, parallel-end 4, task-begin 5, runtime-ready 1; threads: 4
ignored: 7 passes of ompd_bp_task_end that end no task (the runtime passes it after a barrier's task loop too)
`)

	b.Reset()
	TraceSummary(&b, &trace.Summary{Events: map[string]int{}})
	wantText(t, "empty summary", b.String(), `CONSTRUCT  LOCATION  FUNCTION  COUNT  TEAM TOTAL  TEAM MEAN  THREADS  TIME TOTAL  TIME MEAN
events: none; threads: 0
`)
}
