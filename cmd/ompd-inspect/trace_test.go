package main

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/internal/trace"
)

// traceHangGuard bounds one traced run; it only keeps a broken build from
// hanging the test binary, and is not a measurement.
const traceHangGuard = 3 * time.Minute

// traceRun is the result of one ompd-inspect run or attach --trace.
type traceRun struct {
	code    int
	stdout  string // the program's standard output (run) or ompd-inspect's
	stderr  string
	events  []trace.Event
	summary *trace.Summary
	exit    *trace.Exit
	stops   []traceStop
	warns   []string
}

type traceStop struct {
	Event  trace.Event     `json:"stop"`
	Report *inspect.Report `json:"report"`
}

// runTraced runs the built ompd-inspect with args plus --json and
// --output FILE, and decodes the trace file's JSON lines.
func runTraced(t *testing.T, env []string, args ...string) traceRun {
	t.Helper()
	out := filepath.Join(t.TempDir(), "trace.json")
	// The trace flags go before "--" (run) or anywhere (attach).
	i := slices.Index(args, "--")
	if i < 0 {
		i = len(args)
	}
	full := append(append(append([]string{}, args[:i]...), "--json", "--output", out), args[i:]...)
	ctx, cancel := context.WithTimeout(context.Background(), traceHangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, builtCLI(t), full...)
	cmd.Env = append(os.Environ(), env...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := traceRun{stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Fatalf("ompd-inspect %s: killed by %v; stderr:\n%s", strings.Join(full, " "), ws.Signal(), r.stderr)
		}
	case err != nil:
		t.Fatalf("ompd-inspect %s: %v", strings.Join(full, " "), err)
	}
	r.decode(t, out)
	return r
}

// decode reads the JSON lines of a trace file.
func (r *traceRun) decode(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(line, &probe); err != nil {
			t.Fatalf("trace line is not JSON: %v\n%s", err, line)
		}
		var err error
		switch {
		case probe["event"] != nil:
			var ev trace.Event
			err = json.Unmarshal(line, &ev)
			r.events = append(r.events, ev)
		case probe["summary"] != nil:
			err = json.Unmarshal(probe["summary"], &r.summary)
		case probe["exit"] != nil:
			err = json.Unmarshal(probe["exit"], &r.exit)
		case probe["stop"] != nil:
			var st traceStop
			err = json.Unmarshal(line, &st)
			r.stops = append(r.stops, st)
		case probe["warning"] != nil:
			var w string
			err = json.Unmarshal(probe["warning"], &w)
			r.warns = append(r.warns, w)
		default:
			t.Fatalf("unknown trace line %s", line)
		}
		if err != nil {
			t.Fatalf("trace line %s: %v", line, err)
		}
	}
}

// count counts the events of a kind, at a location when loc is not empty.
func (r *traceRun) count(kind, loc string) int {
	n := 0
	for _, ev := range r.events {
		if ev.Kind != kind {
			continue
		}
		if loc != "" && (ev.Region == nil || ev.Region.Location != loc) && (ev.Task == nil || ev.Task.Location != loc) {
			continue
		}
		n++
	}
	return n
}

func (r *traceRun) kinds() map[string]int {
	m := map[string]int{}
	for _, ev := range r.events {
		m[ev.Kind]++
	}
	return m
}

// untraced runs a fixture program directly, with OMP_DEBUG=enabled like
// ompd-inspect run gives it, and returns its stdout and exit code.
func untraced(t *testing.T, name string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), traceHangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, fixture.Exe(t, name), args...)
	cmd.Env = append(os.Environ(), "OMP_DEBUG=enabled")
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// TestTraceEvents: every event of trace.c, with its exact count, location,
// team size and nesting; the program's output and exit code are its own.
func TestTraceEvents(t *testing.T) {
	fixture.Build(t)
	// OMP_NUM_THREADS=5: every region asks for 5 threads unless its
	// num_threads clause says otherwise (each of trace.c's does).
	r := runTraced(t, []string{"OMP_NUM_THREADS=5"}, "run", "--events", "all", "--", fixture.Exe(t, "trace"))
	if r.code != 3 || r.stdout != "sum=11770\n" {
		t.Fatalf("exit code %d, stdout %q; want 3 and the program's sum=11770 (stderr %s)", r.code, r.stdout, r.stderr)
	}
	want := map[string]int{
		trace.KindRuntimeReady: 1,
		// 5 loop + 1 outer + 2 inner + 1 tasks + 1 serialized.
		trace.KindParallelBegin: 10, trace.KindParallelEnd: 10,
		// 7 tasks, and the untied task twice: clang runs it in two parts
		// (the first re-queues it), and the runtime passes the locations
		// for each part. The parts may run one after the other on one
		// thread or on two, or overlap on two threads (the second taken
		// before the first has passed task-end), ending in either order.
		trace.KindTaskBegin: 9, trace.KindTaskEnd: 9,
		// The initial thread and the 3 workers the teams of 4 need.
		trace.KindThreadBegin: 4, trace.KindThreadEnd: 4,
	}
	if got := r.kinds(); !maps.Equal(got, want) {
		t.Errorf("events by kind %v, want %v", got, want)
	}
	loop, outer, inner := loc(t, "trace.c", "loop"), loc(t, "trace.c", "outer"), loc(t, "trace.c", "inner")
	tasks, serial := loc(t, "trace.c", "tasks"), loc(t, "trace.c", "serial")
	task, untied := loc(t, "trace.c", "task"), loc(t, "trace.c", "untied")
	for _, c := range []struct {
		loc         string
		n, team, lv int
		fn          string
	}{
		// The entry functions are clang's outlined bodies, named after
		// the function with the construct (their numbering is clang's).
		{loop, 5, 3, 1, "constructs.omp_outlined"},
		{outer, 1, 2, 1, "constructs.omp_outlined."},
		{inner, 2, 2, 2, "constructs.omp_outlined_debug__."},
		{tasks, 1, 4, 1, "constructs.omp_outlined."},
		// A serialized region's team records no entry function.
		{serial, 1, 1, 1, ""},
	} {
		for _, kind := range []string{trace.KindParallelBegin, trace.KindParallelEnd} {
			if got := r.count(kind, c.loc); got != c.n {
				t.Errorf("%s at %s: %d events, want %d", kind, c.loc, got, c.n)
			}
		}
		for _, ev := range r.events {
			if ev.Region == nil || ev.Region.Location != c.loc {
				continue
			}
			if ev.Region.TeamSize != c.team || ev.Region.Level != c.lv || !strings.HasPrefix(ev.Region.Function, c.fn) || (c.fn == "") != (ev.Region.Function == "") || ev.GTID == nil {
				t.Errorf("%s at %s: team %d level %d function %q; want team %d level %d function %q...", ev.Kind, c.loc,
					ev.Region.TeamSize, ev.Region.Level, ev.Region.Function, c.team, c.lv, c.fn)
			}
			if ev.Kind == trace.KindParallelBegin && (ev.Region.Requested == nil || *ev.Region.Requested != 5) {
				t.Errorf("parallel-begin at %s: requested team size %v, want the nthreads-var 5", c.loc, ev.Region.Requested)
			}
			if ev.Kind == trace.KindParallelEnd && (ev.Duration == nil || len(ev.Region.Threads) != c.team || !slices.Contains(ev.Region.Threads, *ev.GTID)) {
				t.Errorf("parallel-end at %s: duration %v, team gtids %v; want a duration and %d gtids with the primary's %d", c.loc, ev.Duration, ev.Region.Threads, c.team, *ev.GTID)
			}
		}
	}
	// The four outlined bodies are four different functions.
	fns := map[string]string{}
	for _, ev := range r.events {
		if ev.Region != nil && ev.Region.Function != "" {
			fns[ev.Region.Location] = ev.Region.Function
		}
	}
	distinct := map[string]bool{}
	for _, fn := range fns {
		distinct[fn] = true
	}
	if len(fns) != 4 || len(distinct) != 4 {
		t.Errorf("entry functions by location %v, want 4 different ones", fns)
	}
	// Each inner region's parent is the outer region, and it begins on
	// one of the outer team's threads.
	var outerID string
	for _, ev := range r.events {
		if ev.Kind == trace.KindParallelBegin && ev.Region.Location == outer {
			outerID = ev.Region.ID
		}
	}
	for _, ev := range r.events {
		if ev.Kind == trace.KindParallelBegin && ev.Region.Location == inner && ev.Region.Parent != outerID {
			t.Errorf("inner region %s: parent %q, want the outer region %s", ev.Region.ID, ev.Region.Parent, outerID)
		}
	}
	if got := r.count(trace.KindTaskBegin, task); got != 7 {
		t.Errorf("task-begin at %s: %d, want 7", task, got)
	}
	if got := r.count(trace.KindTaskEnd, task); got != 7 {
		t.Errorf("task-end at %s: %d, want 7", task, got)
	}
	if got := r.count(trace.KindTaskBegin, untied); got != 2 {
		t.Errorf("task-begin at %s: %d, want 2 (two parts)", untied, got)
	}
	parents := map[string]bool{}
	for _, ev := range r.events {
		if ev.Task == nil {
			continue
		}
		if ev.Task.Parent == "" {
			t.Errorf("%s %s: no parent task", ev.Kind, ev.Task.ID)
		}
		parents[ev.Task.Parent] = true
		wantFlags := []string{"explicit"}
		if ev.Task.Location == untied {
			wantFlags = []string{"explicit", "untied"}
		}
		if !slices.Equal(ev.Task.Flags, wantFlags) || ev.Task.Function == "" {
			t.Errorf("%s %s at %s: flags %v function %q; want %v and a function", ev.Kind, ev.Task.ID, ev.Task.Location, ev.Task.Flags, ev.Task.Function, wantFlags)
		}
		if ev.Kind == trace.KindTaskEnd && ev.Duration == nil {
			t.Errorf("task-end %s: no duration", ev.Task.ID)
		}
	}
	// All 8 tasks come from the single thread's implicit task.
	if len(parents) != 1 {
		t.Errorf("task parents %v, want exactly one (the implicit task of the single thread)", parents)
	}
	// Both parts are of one task.
	parts := map[string]int{}
	for _, ev := range r.events {
		if ev.Kind == trace.KindTaskBegin && ev.Task.Location == untied {
			parts[ev.Task.ID]++
		}
	}
	if len(parts) != 1 {
		t.Errorf("untied task-begins by task id %v, want both parts of one task", parts)
	}
	checkPairs(t, r.events, trace.KindTaskBegin, trace.KindTaskEnd, 9)
	checkPairs(t, r.events, trace.KindParallelBegin, trace.KindParallelEnd, 10)
}

// checkPairs checks that every end event of a trace has the duration from
// the begin of the same region or task on the same thread (the innermost
// one not ended yet), whatever the order of the threads' events, and that
// there are want such pairs and no other begin or end.
func checkPairs(t *testing.T, events []trace.Event, begin, end string, want int) {
	t.Helper()
	id := func(ev trace.Event) string {
		if ev.Region != nil {
			return ev.Region.ID
		}
		return ev.Task.ID
	}
	type open struct {
		id   string
		time float64
	}
	opens := map[int][]open{} // by os_tid
	pairs := 0
	for _, ev := range events {
		switch ev.Kind {
		case begin:
			opens[ev.OSTID] = append(opens[ev.OSTID], open{id(ev), ev.Time})
		case end:
			stack := opens[ev.OSTID]
			i := len(stack) - 1
			for i >= 0 && stack[i].id != id(ev) {
				i--
			}
			if i < 0 {
				t.Errorf("%s %s on thread %d at %v: no %s of it on that thread before", end, id(ev), ev.OSTID, ev.Time, begin)
				continue
			}
			if d := ev.Time - stack[i].time; ev.Duration == nil || *ev.Duration != d {
				got := "none"
				if ev.Duration != nil {
					got = fmt.Sprint(*ev.Duration)
				}
				t.Errorf("%s %s on thread %d at %v: duration %s, want %v (from its %s at %v)", end, id(ev), ev.OSTID, ev.Time, got, d, begin, stack[i].time)
			}
			opens[ev.OSTID] = append(stack[:i:i], stack[i+1:]...)
			pairs++
		}
	}
	for tid, stack := range opens {
		for _, o := range stack {
			t.Errorf("%s %s on thread %d at %v: never ended", begin, o.id, tid, o.time)
		}
	}
	if pairs != want {
		t.Errorf("%d %s/%s pairs, want %d", pairs, begin, end, want)
	}
}

// TestTraceSummary: --summary per construct location.
func TestTraceSummary(t *testing.T) {
	fixture.Build(t)
	r := runTraced(t, nil, "run", "--summary", "--", fixture.Exe(t, "trace"))
	if r.code != 3 || r.stdout != "sum=11770\n" || r.summary == nil {
		t.Fatalf("exit code %d, stdout %q, summary %v (stderr %s)", r.code, r.stdout, r.summary, r.stderr)
	}
	if len(r.events) != 0 {
		t.Errorf("--summary printed %d events", len(r.events))
	}
	type row struct {
		class, loc         string
		count, ended, team int
		mean               float64
		threads            int // -1: depends on scheduling
	}
	want := []row{
		{"parallel", loc(t, "trace.c", "loop"), 5, 5, 15, 3, 3},
		{"parallel", loc(t, "trace.c", "outer"), 1, 1, 2, 2, 2},
		{"parallel", loc(t, "trace.c", "inner"), 2, 2, 4, 2, -1},
		{"parallel", loc(t, "trace.c", "tasks"), 1, 1, 4, 4, 4},
		{"parallel", loc(t, "trace.c", "serial"), 1, 1, 1, 1, 1},
		{"task", loc(t, "trace.c", "task"), 7, 7, 0, 0, -1},
		{"task", loc(t, "trace.c", "untied"), 2, 2, 0, 0, -1},
	}
	if len(r.summary.Rows) != len(want) {
		t.Fatalf("summary has %d rows, want %d: %+v", len(r.summary.Rows), len(want), r.summary.Rows)
	}
	for i, w := range want {
		g := r.summary.Rows[i]
		if g.Class != w.class || g.Location != w.loc || g.Count != w.count || g.Ended != w.ended || g.TeamTotal != w.team || g.TeamMean != w.mean ||
			(w.threads >= 0 && g.Threads != w.threads) || g.Threads < 1 || g.TimeTotal <= 0 || g.TimeMean <= 0 {
			t.Errorf("row %d: %+v, want %+v", i, g, w)
		}
	}
	wantEvents := map[string]int{"runtime-ready": 1, "parallel-begin": 10, "parallel-end": 10, "task-begin": 9, "task-end": 9, "thread-begin": 4, "thread-end": 4}
	if !maps.Equal(r.summary.Events, wantEvents) || r.summary.Threads != 4 {
		t.Errorf("summary events %v threads %d, want %v and 4", r.summary.Events, r.summary.Threads, wantEvents)
	}
	if r.exit == nil || r.exit.Code != 3 {
		t.Errorf("exit record %+v, want code 3", r.exit)
	}
}

// TestTraceSummaryText: the table as printed.
func TestTraceSummaryText(t *testing.T) {
	fixture.Build(t)
	ctx, cancel := context.WithTimeout(context.Background(), traceHangGuard)
	defer cancel()
	cmd := exec.CommandContext(ctx, builtCLI(t), "run", "--summary", "--", fixture.Exe(t, "trace"), "regions", "20")
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v; stderr %s", err, se.String())
	}
	if so.String() != "regions=20\n" {
		t.Errorf("program output %q", so.String())
	}
	var table []string
	for _, l := range strings.Split(se.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 && (f[0] == "CONSTRUCT" || f[0] == "parallel" || f[0] == "events:") {
			table = append(table, strings.Join(f, " "))
		}
	}
	bench := loc(t, "trace.c", "bench")
	if len(table) != 3 || table[0] != "CONSTRUCT LOCATION FUNCTION COUNT TEAM TOTAL TEAM MEAN THREADS TIME TOTAL TIME MEAN" ||
		!strings.HasPrefix(table[1], "parallel "+bench+" main.omp_outlined") || !strings.Contains(table[1], " 20 40 2.00 2 ") ||
		table[2] != "events: parallel-begin 20, parallel-end 20, thread-begin 2, thread-end 2, runtime-ready 1; threads: 2" {
		t.Errorf("summary table:\n%s", strings.Join(table, "\n"))
	}
}

// TestTraceStopAt: the full report at the first inner region's begin.
func TestTraceStopAt(t *testing.T) {
	fixture.Build(t)
	inner, outer := loc(t, "trace.c", "inner"), loc(t, "trace.c", "outer")
	r := runTraced(t, nil, "run", "--events", "parallel", "--stop-at", "parallel-begin:trace.c:"+strconv.Itoa(fixture.SourceLine(t, "trace.c", "inner")), "--then", "kill", "--", fixture.Exe(t, "trace"))
	if r.code != 137 || r.stdout != "" || r.exit == nil || !r.exit.Killed {
		t.Fatalf("exit code %d, stdout %q, exit %+v; want 137, no output (killed before the sum)", r.code, r.stdout, r.exit)
	}
	if len(r.stops) != 1 || r.stops[0].Report == nil {
		t.Fatalf("%d stop reports, want 1", len(r.stops))
	}
	ev := r.stops[0].Event
	if ev.Kind != trace.KindParallelBegin || ev.Region == nil || ev.Region.Location != inner || ev.Region.Level != 2 || ev.Region.TeamSize != 2 {
		t.Fatalf("stopped at %+v %+v, want the begin of the level-2 region at %s", ev, ev.Region, inner)
	}
	// --events parallel: nothing else is printed.
	for _, e := range r.events {
		if e.Kind != trace.KindParallelBegin && e.Kind != trace.KindParallelEnd {
			t.Errorf("%s event printed with --events parallel", e.Kind)
		}
	}
	// The events before: 5 loop regions and the outer begin.
	if got := r.count(trace.KindParallelBegin, ""); got != 7 || r.count(trace.KindParallelBegin, outer) != 1 {
		t.Errorf("%d parallel-begin events printed, want 7 (5 loop, outer, the stop)", got)
	}
	rep := r.stops[0].Report
	var levels []int
	stopped := false
	for _, reg := range rep.Regions {
		levels = append(levels, reg.Level)
		// The other thread of the outer team may have begun its own
		// inner region by the time of the stop (where the watch on the
		// team pointer does not fire, the event is described at the
		// thread's next location).
		if reg.Level == 2 && (reg.Location != inner || reg.TeamSize != 2) {
			t.Errorf("report's level-2 region %+v, want one at %s of 2", reg, inner)
		}
		stopped = stopped || (reg.Level == 2 && reg.ID == ev.Region.ID)
	}
	if !stopped {
		t.Errorf("report's regions %+v lack the stopped region %s", rep.Regions, ev.Region.ID)
	}
	if !slices.Contains(levels, 1) || !slices.Contains(levels, 2) {
		t.Errorf("report regions at levels %v, want 1 and 2", levels)
	}
	// The stopped thread's innermost user frame is the outer region's
	// body at the inner construct.
	found := false
	for _, bt := range rep.Backtraces {
		if bt.OSTID != ev.OSTID {
			continue
		}
		found = true
		for _, f := range bt.Frames {
			if f.Kind == inspect.KindUser {
				if f.Line != fixture.SourceLine(t, "trace.c", "inner") || !strings.HasPrefix(f.Function, "constructs.omp_outlined_debug__") {
					t.Errorf("thread %d's innermost user frame %s at line %d, want the outer body at %s", ev.OSTID, f.Function, f.Line, inner)
				}
				break
			}
		}
	}
	if !found {
		t.Errorf("no backtrace of the stopped thread %d", ev.OSTID)
	}
}

// TestTraceThenDetach: after --stop-at (a class: the first task event),
// the program runs on untraced and finishes as it would have.
func TestTraceThenDetach(t *testing.T) {
	fixture.Build(t)
	r := runTraced(t, nil, "run", "--stop-at", "task", "--then", "detach", "--", fixture.Exe(t, "trace"))
	if r.code != 0 || r.exit == nil || !r.exit.Detached || len(r.stops) != 1 || r.stops[0].Event.Kind != trace.KindTaskBegin {
		t.Fatalf("exit code %d, exit %+v, %d stops; want 0, detached at one task-begin", r.code, r.exit, len(r.stops))
	}
	// The program's output reaches ompd-inspect's stdout pipe after
	// ompd-inspect has exited; Run waits for the pipe to close.
	if r.stdout != "sum=11770\n" {
		t.Errorf("program output %q, want sum=11770", r.stdout)
	}
	if got := r.count(trace.KindTaskBegin, ""); got != 1 {
		t.Errorf("%d task-begin events, want the one stopped at", got)
	}
}

// TestTraceThenContinue: --then continue reports the first matching event
// only, and the trace goes on to the end.
func TestTraceThenContinue(t *testing.T) {
	fixture.Build(t)
	task := loc(t, "trace.c", "task")
	r := runTraced(t, nil, "run", "--events", "task", "--stop-at", "task-end:trace.c:"+strconv.Itoa(fixture.SourceLine(t, "trace.c", "task")), "--", fixture.Exe(t, "trace"))
	if r.code != 3 || r.stdout != "sum=11770\n" || r.exit == nil || r.exit.Code != 3 {
		t.Fatalf("exit code %d, stdout %q, exit %+v; want the program's 3 and sum=11770", r.code, r.stdout, r.exit)
	}
	if len(r.stops) != 1 || r.stops[0].Event.Kind != trace.KindTaskEnd || r.stops[0].Event.Task == nil || r.stops[0].Event.Task.Location != task {
		t.Fatalf("%d stops (%+v), want one, at a task-end at %s", len(r.stops), r.stops, task)
	}
	if got := r.count(trace.KindTaskEnd, task); got != 7 {
		t.Errorf("task-end at %s: %d after the stop, want all 7", task, got)
	}
}

// TestTraceProgramUnchanged: programs that handle signals, fork, or load
// the runtime late give the same output and exit code traced as not.
func TestTraceProgramUnchanged(t *testing.T) {
	fixture.Build(t)
	for _, c := range []struct {
		name  string
		args  []string
		count map[string]int // parallel-begin by location
	}{
		{"trace", []string{"signals"}, map[string]int{loc(t, "trace.c", "loop"): 5}},
		// The forked child's regions are not traced: it is released with
		// the breakpoints removed, and exits 5 (child=5) only if its
		// regions ran.
		{"trace", []string{"fork"}, map[string]int{loc(t, "trace.c", "loop"): 5, loc(t, "trace.c", "child"): 0}},
		{"late", nil, map[string]int{loc(t, "libwork.c", "work"): 4}},
	} {
		t.Run(c.name+strings.Join(c.args, ""), func(t *testing.T) {
			wantOut, wantCode := untraced(t, c.name, c.args...)
			r := runTraced(t, nil, append([]string{"run", "--events", "all", "--", fixture.Exe(t, c.name)}, c.args...)...)
			if r.stdout != wantOut || r.code != wantCode {
				t.Errorf("traced: output %q exit %d; untraced: %q exit %d", r.stdout, r.code, wantOut, wantCode)
			}
			for l, n := range c.count {
				if got := r.count(trace.KindParallelBegin, l); got != n {
					t.Errorf("parallel-begin at %s: %d, want %d", l, got, n)
				}
			}
		})
	}
}

// TestTraceInterrupted: SIGINT to ompd-inspect while it traces a busy
// process removes every breakpoint (the original bytes are back) and
// detaches; the program runs on and finishes normally.
func TestTraceInterrupted(t *testing.T) {
	fixture.Build(t)
	t.Run("OMPD build", func(t *testing.T) {
		traceInterrupted(t, fixture.Exe(t, "trace"), nil, ompdBuildLocations(t))
	})
	t.Run("Debian 19", func(t *testing.T) {
		// attach --trace on a stripped runtime: its locations recovered.
		lib := fixture.StockLibomp(19)
		k, im := recoverStock(t, lib)
		locs := map[string]location{}
		for _, s := range k.FileSymbols(im) {
			if strings.HasPrefix(s.Name, "ompd_bp_") || s.Name == "ompd_dll_locations_valid" {
				locs[s.Name] = location{lib: lib, addr: s.Value, size: s.Size}
			}
		}
		traceInterrupted(t, fixture.StrippedExe(t, "trace"), []string{"LD_PRELOAD=" + lib}, locs)
	})
}

// location is an OMPD breakpoint location in a runtime file: its
// link-time address and size.
type location struct {
	lib        string
	addr, size uint64
}

// ompdBuildLocations returns the OMPD build's breakpoint locations, from
// its symbol table.
func ompdBuildLocations(t *testing.T) map[string]location {
	t.Helper()
	lib := filepath.Join(fixture.OMPDLibDir(), "libomp.so")
	locs := map[string]location{}
	for _, s := range fixture.ELFSymbols(t, lib) {
		if strings.HasPrefix(s.Name, "ompd_bp_") || s.Name == "ompd_dll_locations_valid" {
			locs[s.Name] = location{lib: lib, addr: s.Value, size: s.Size}
		}
	}
	return locs
}

// traceInterrupted: attach --trace on a program (exe, with env), then
// SIGINT: ompd-inspect says it removed the breakpoints, no thread is left
// traced, every location holds its original code, and the program goes
// on to its own end.
func traceInterrupted(t *testing.T, exe string, env []string, locs map[string]location) {
	prog := exec.Command(exe, "hold")
	prog.Env = append(append(os.Environ(), "OMP_DEBUG=enabled"), env...)
	stdout, err := prog.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := prog.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Process.Kill(); prog.Wait() })
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "HOLD pid=") {
		t.Fatalf("first line %q, want HOLD", lines.Text())
	}
	pid := prog.Process.Pid

	out := filepath.Join(t.TempDir(), "trace.json")
	cli := startCLI(t, cliEnv(), "attach", strconv.Itoa(pid), "--trace", "--json", "--events", "parallel", "--output", out)
	// Wait until some events are traced (bounded by the hang guard).
	deadline := time.Now().Add(traceHangGuard)
	for {
		data, _ := os.ReadFile(out)
		if bytes.Count(data, []byte(`"event":"parallel-end"`)) >= 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no events traced; stderr %s", cli.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cli.signal(t, syscall.SIGINT)
	o := cli.wait(t, pid)
	want := fmt.Sprintf("ompd-inspect: SIGINT: removed the breakpoints and detached from process %d\n", pid)
	if o.code != 130 || o.stderr != want {
		t.Fatalf("ompd-inspect: %v; want exit 130 and %q", o, want)
	}
	var r traceRun
	r.decode(t, out)
	if r.exit == nil || !r.exit.Interrupted || !r.exit.Detached || r.exit.Code != 130 {
		t.Errorf("exit record %+v, want interrupted, detached, code 130", r.exit)
	}
	for _, e := range r.events {
		if e.Kind != trace.KindParallelBegin && e.Kind != trace.KindParallelEnd {
			t.Errorf("%s event printed with --events parallel", e.Kind)
		}
	}
	// Every thread untraced and not stopped; every location holds its
	// original instruction again.
	for _, tid := range fixture.ThreadIDsOf(t, pid) {
		if state, tracer := fixture.TaskState(t, pid, tid); tracer != 0 || state == 't' || state == 'T' {
			t.Errorf("thread %d: state %c, tracer %d after the interrupt", tid, state, tracer)
		}
	}
	checkLocationsRestored(t, pid, locs)
	// The program goes on: it finishes its hold loop on SIGUSR1.
	if err := prog.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for lines.Scan() {
		rest = append(rest, lines.Text())
	}
	werr := prog.Wait()
	if !slices.Equal(rest, []string{"held=yes", "sum=11770"}) || prog.ProcessState.ExitCode() != 3 {
		t.Errorf("program after the trace: output %q, exit %v; want held=yes, sum=11770, exit 3", rest, werr)
	}
}

// checkLocationsRestored compares the code of every OMPD breakpoint
// location in the process's libomp with the library file: no int3 may be
// left.
func checkLocationsRestored(t *testing.T, pid int, locs map[string]location) {
	t.Helper()
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var base uint64
	rt := runtimeMapping(t, pid)
	for _, l := range strings.Split(string(maps), "\n") {
		f := strings.Fields(l)
		if len(f) >= 6 && f[5] == rt && f[2] == "00000000" {
			start, _, _ := strings.Cut(f[0], "-")
			base, _ = strconv.ParseUint(start, 16, 64)
			break
		}
	}
	if base == 0 {
		t.Fatal("libomp's first mapping not found")
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	// Every location is in the one runtime file.
	var lib string
	for _, l := range locs {
		lib = l.lib
	}
	file, err := elf.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for name, l := range locs {
		want, got := make([]byte, l.size), make([]byte, l.size)
		for _, sec := range file.Sections {
			if sec.Type == elf.SHT_PROGBITS && sec.Flags&elf.SHF_ALLOC != 0 && l.addr >= sec.Addr && l.addr+l.size <= sec.Addr+sec.Size {
				if _, err := sec.ReadAt(want, int64(l.addr-sec.Addr)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := mem.ReadAt(got, int64(base+l.addr)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: code % x in the process, % x in %s", name, got, want, l.lib)
		}
	}
	if len(locs) != 7 {
		t.Errorf("checked %d locations, want 7 (ompd_dll_locations_valid and 6 ompd_bp_*)", len(locs))
	}
}

// noOMPDRuntime returns a copy of Debian's libomp 19 whose OMP_DEBUG
// string is changed, so that nothing shows its OMPD support.
func noOMPDRuntime(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(fixture.StockLibomp(19))
	if err != nil {
		t.Fatalf("%v (scripts/setup.sh extracts it)", err)
	}
	i := bytes.Index(data, []byte("\x00OMP_DEBUG\x00"))
	if i < 0 {
		t.Fatal("no OMP_DEBUG string in Debian's libomp 19")
	}
	data[i+1] = 'X'
	lib := filepath.Join(t.TempDir(), "libomp.so.5")
	if err := os.WriteFile(lib, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return lib
}

// TestTraceStock: on each of Debian's stripped runtimes, with the
// breakpoint locations recovered from its code, a trace sees what it sees
// on the OMPD build: the same events, regions, team sizes and tasks.
func TestTraceStock(t *testing.T) {
	fixture.Build(t)
	rows := func(r traceRun) []string {
		var out []string
		for _, row := range r.summary.Rows {
			out = append(out, fmt.Sprintf("%s %s count %d ended %d team %d", row.Class, row.Function, row.Count, row.Ended, row.TeamTotal))
		}
		slices.Sort(out)
		return out
	}
	ref := runTraced(t, []string{"OMP_NUM_THREADS=5"}, "run", "--summary", "--", fixture.Exe(t, "trace"))
	want := rows(ref)
	if len(want) != 7 {
		t.Fatalf("the OMPD build's summary has %d rows, want 7: %q", len(want), want)
	}
	for _, v := range fixture.StockVersions {
		t.Run(strconv.Itoa(v), func(t *testing.T) {
			// The program execs from env, which preloads the runtime: the
			// trace follows the exec.
			r := runTraced(t, []string{"OMP_NUM_THREADS=5"}, "run", "--summary", "--", "/usr/bin/env", "LD_PRELOAD="+fixture.StockLibomp(v), fixture.StrippedExe(t, "trace"))
			if r.code != 3 || r.stdout != "sum=11770\n" {
				t.Fatalf("exit %d, output %q; want 3 and sum=11770 (stderr %s)", r.code, r.stdout, r.stderr)
			}
			if !maps.Equal(r.summary.Events, ref.summary.Events) {
				t.Errorf("events %v; the OMPD build's %v", r.summary.Events, ref.summary.Events)
			}
			if got := rows(r); !slices.Equal(got, want) {
				t.Errorf("constructs\n%s\nthe OMPD build's\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestTraceRefusals: what cannot be traced gets one line, and the target
// is left as it was.
func TestTraceRefusals(t *testing.T) {
	fixture.Build(t)
	t.Run("without collection", func(t *testing.T) {
		p := fixture.Start(t, "nested", fixture.StartOptions{})
		wantError(t, fmt.Sprintf("ompd-inspect: process %d runs without OMPD data collection, so its runtime passes no breakpoint location: restart it with OMP_DEBUG=enabled in its environment (or start it with `ompd-inspect run`)", p.PID),
			"attach", strconv.Itoa(p.PID), "--trace")
		if stopped := p.StoppedThreads(t); len(stopped) != 0 {
			t.Errorf("threads %v left stopped", stopped)
		}
	})
	t.Run("runtime without OMPD", func(t *testing.T) {
		// Debian's 19 with its OMPD support made unrecognizable: the
		// program runs as it would, with one warning.
		lib := noOMPDRuntime(t)
		r := runTraced(t, nil, "run", "--", "/usr/bin/env", "LD_PRELOAD="+lib, fixture.StrippedExe(t, "trace"))
		want := "no OpenMP events can be seen: the OpenMP runtime " + lib + " has no OMPD layout symbols (it is stripped, as Debian's libomp is), no debug file was found for it, and its code does not reveal them: " +
			lib + `: no ompd_init (the runtime may be built without OMPD support): no string "OMP_DEBUG" in .rodata`
		if r.code != 3 || r.stdout != "sum=11770\n" || !slices.Equal(r.warns, []string{want}) || len(r.events) != 0 {
			t.Errorf("exit %d, output %q, warnings %q, %d events; want 3, sum=11770, %q", r.code, r.stdout, r.warns, len(r.events), want)
		}
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--events", "regions", "--", "true"}, `--events: "regions" is not an event class; want parallel, task, thread, device, runtime or all`},
		{[]string{"run", "--then", "kill", "--", "true"}, "--then goes with --stop-at"},
		{[]string{"run", "--stop-at", "parallel:x.c", "--", "true"}, `--stop-at "parallel:x.c": want EVENT or EVENT:FILE:LINE`},
		{[]string{"run", "--stop-at", "barrier", "--", "true"}, `--stop-at "barrier": "barrier" is not an event; want one of parallel-begin, parallel-end, task-begin, task-end, thread-begin, thread-end, device-begin, device-end, runtime-ready (or a class: parallel, task, thread, device, runtime)`},
		{[]string{"run", "--stop-at", "task:a.c:0", "--", "true"}, `--stop-at "task:a.c:0": want EVENT:FILE:LINE with a line number above 0`},
		{[]string{"run", "--", "/nonexistent/prog"}, `program /nonexistent/prog: exec: "/nonexistent/prog": stat /nonexistent/prog: no such file or directory`},
		{[]string{"attach", "1", "--summary"}, "--events, --summary, --stop-at, --then and --output go with --trace"},
		{[]string{"attach", "1", "threads", "--trace"}, "--trace takes no view and no view flags"},
	} {
		wantError(t, "ompd-inspect: "+c.want, c.args...)
	}
}
