package stacks

import (
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/ompd/llvm"
)

func fr(kind string, thread int, fn string) inspect.Frame {
	return inspect.Frame{Kind: kind, Thread: thread, Function: fn}
}

func functions(bt inspect.Backtrace) string {
	var s []string
	for _, f := range bt.Frames {
		s = append(s, f.Function+f.Text)
	}
	return strings.Join(s, " ")
}

// A worker waiting in a barrier, continued on thread 1.
var worker = inspect.Backtrace{OSTID: 2, Frames: []inspect.Frame{
	fr(inspect.KindSystem, 2, "futex"),
	fr(inspect.KindRuntime, 2, "__kmp_wait"),
	fr(inspect.KindRuntime, 2, "__kmpc_barrier"),
	fr(inspect.KindSystem, 2, "nanosleep"),
	fr(inspect.KindUser, 2, "body"),
	fr(inspect.KindUser, 2, "main.omp_outlined"),
	{Kind: inspect.KindRegionMarker, Thread: 2, Text: "region"},
	fr(inspect.KindRuntime, 2, "__kmp_invoke_microtask"),
	fr(inspect.KindSystem, 2, "start_thread"),
	{Kind: inspect.KindHop, Thread: 1, Text: "hop"},
	fr(inspect.KindUser, 1, "main"),
	fr(inspect.KindSystem, 1, "__libc_start_main"),
}}

func TestFilter(t *testing.T) {
	for _, c := range []struct {
		all, cont bool
		want      string
	}{
		// futex was called by the runtime and start_thread leads to no
		// user code: folded; nanosleep leads to body: shown.
		{false, true, "nanosleep body main.omp_outlined region hop main"},
		{false, false, "nanosleep body main.omp_outlined region"},
		{true, true, "futex __kmp_wait __kmpc_barrier nanosleep body main.omp_outlined region __kmp_invoke_microtask start_thread hop main __libc_start_main"},
		{true, false, "futex __kmp_wait __kmpc_barrier nanosleep body main.omp_outlined region __kmp_invoke_microtask start_thread"},
	} {
		if got := functions(Filter(worker, c.all, c.cont)); got != c.want {
			t.Errorf("Filter(all=%v, cont=%v) = %q; want %q", c.all, c.cont, got, c.want)
		}
	}
}

func TestGroupKeyIgnoresThreads(t *testing.T) {
	other := worker
	other.OSTID = 3
	other.Frames = append([]inspect.Frame(nil), worker.Frames...)
	for i := range other.Frames {
		if other.Frames[i].Thread == 2 {
			other.Frames[i].Thread = 3
		}
	}
	other.Frames[6].Text = "region, thread 2" // marker texts differ by thread number
	if GroupKey(worker) != GroupKey(other) {
		t.Error("two workers of one team with the same frames have different group keys")
	}
	other.Frames[4].Line = 99
	if GroupKey(worker) == GroupKey(other) {
		t.Error("a different line gives the same group key")
	}
}

func TestActivity(t *testing.T) {
	p := func(kind, fn string) phys { return phys{kind: kind, function: fn} }
	for _, c := range []struct {
		frames   []phys
		inRegion bool
		want     string
	}{
		{[]phys{p(inspect.KindSystem, "futex"), p(inspect.KindRuntime, "__kmp_acquire_queuing_lock"), p(inspect.KindRuntime, "__kmpc_set_lock"), p(inspect.KindUser, "f")}, true, ActivityLock},
		{[]phys{p(inspect.KindRuntime, "__kmp_suspend_64"), p(inspect.KindRuntime, "__kmp_fork_barrier"), p(inspect.KindRuntime, "__kmp_launch_thread")}, false, ActivityIdle},
		{[]phys{p(inspect.KindRuntime, "__kmp_suspend_64"), p(inspect.KindRuntime, "__kmp_fork_barrier"), p(inspect.KindRuntime, "__kmp_launch_thread")}, true, ActivityBarrierImplicit},
		{[]phys{p(inspect.KindSystem, "nanosleep"), p(inspect.KindUser, "work")}, true, ActivityUser},
		{[]phys{p(inspect.KindRuntime, "__kmp_x"), p(inspect.KindUser, "work")}, true, ActivityRuntime},
		{[]phys{p(inspect.KindSystem, "poll")}, false, ActivityNotOpenMP},
		{nil, false, activityUnknownUnwinding},
	} {
		if got := activity(c.frames, c.inRegion, llvm.Family); got != c.want {
			t.Errorf("activity(%v, %v) = %q; want %q", c.frames, c.inRegion, got, c.want)
		}
	}
}

func TestOutlinedNames(t *testing.T) {
	for name, want := range map[string]string{"main.omp_outlined": "main", "outer_body.omp_outlined_debug__": "outer_body",
		"main._omp_fn.0": "main", ".omp_outlined.": "", ".omp_task_entry.": ""} {
		if !isOutlined(name) || prefixName(name) != want {
			t.Errorf("%s: outlined %v, prefix %q; want true, %q", name, isOutlined(name), prefixName(name), want)
		}
	}
	if isOutlined("main") {
		t.Error("main is not outlined")
	}
}

// TestTaskAt: a task entry frame is matched to the thread's task stack,
// innermost unused task first; several candidates outside it give the
// construct without a task.
func TestTaskAt(t *testing.T) {
	a := &inspect.Task{ID: "0xa", Kind: "explicit", Function: "entry", Status: "running", Location: "t.c:5"}
	b2 := &inspect.Task{ID: "0xb", Kind: "explicit", Function: "entry", Status: "suspended", Location: "t.c:5"}
	c := &inspect.Task{ID: "0xc", Kind: "explicit", Function: "entry", Status: "running", Location: "t.c:5"}
	b := &builder{
		taskFns: map[string][]*inspect.Task{"entry": {a, b2, c}},
		threads: map[int]*inspect.Thread{1: {OSTID: 1, TaskStack: []string{"0xb", "0xa", "0xi"}}, 2: {OSTID: 2}},
	}
	ts := &threadStack{tid: 1, frames: []phys{{kind: inspect.KindUser, function: "entry"}, {kind: inspect.KindUser, function: "entry"}}}
	used := map[string]bool{}
	for i, want := range []string{"0xb", "0xa"} {
		_, k, ok := b.taskAt(ts, i, used)
		if !ok || k == nil || k.ID != want {
			t.Errorf("frame %d: task %+v, %v; want %s", i, k, ok, want)
		}
	}
	other := &threadStack{tid: 2, frames: []phys{{kind: inspect.KindUser, function: "entry"}}}
	construct, k, ok := b.taskAt(other, 0, map[string]bool{})
	if !ok || k != nil || construct.Location != "t.c:5" {
		t.Errorf("ambiguous: construct %+v task %+v ok %v; want the construct and no task", construct, k, ok)
	}
	if m := b.taskMarker(other, 0, construct, nil); m.Task != nil || m.Text != "#pragma omp task at t.c:5 — one of several tasks of this construct" {
		t.Errorf("ambiguous marker %+v", m)
	}
	if _, _, ok := b.taskAt(&threadStack{tid: 2, frames: []phys{{kind: inspect.KindUser, function: "work"}}}, 0, map[string]bool{}); ok {
		t.Error("a frame that runs no task entry was taken for a task")
	}
}

// TestTailCallFrames: a tail call frame (no stack frame of its own) is
// shown, marked, between the frame it jumped to and its caller; a region
// boundary is found on it like on a native frame, and the OMPD exit
// frame is matched with the next native frame's frame address, past tail
// call frames.
func TestTailCallFrames(t *testing.T) {
	region := "0xr1"
	task := &inspect.Task{ID: "0xi1", Kind: "implicit", Region: &region, ExitFrame: sp("0x2000")}
	newBuilder := func(ts *threadStack) *builder {
		return &builder{
			rep:        &inspect.Report{},
			stacks:     map[int]*threadStack{1: ts},
			threads:    map[int]*inspect.Thread{1: {OSTID: 1, Region: &region}},
			regions:    map[string]*inspect.Region{region: {ID: region, Function: "main.omp_outlined", TeamSize: 1, Threads: []int{1}, Location: "/src/m.c:7"}},
			tasks:      map[string]*inspect.Task{task.ID: task},
			exitFrames: map[uint64]*inspect.Task{0x2000: task},
		}
	}
	show := func(frames []inspect.Frame) string {
		var s []string
		for _, f := range frames {
			switch {
			case f.Kind == inspect.KindRegionMarker:
				s = append(s, "marker:"+f.Boundary)
			case f.TailCall:
				s = append(s, f.Function+"@"+*f.PC+"[tail]")
			default:
				s = append(s, f.Function+"@"+*f.PC)
			}
		}
		return strings.Join(s, " ")
	}
	for _, c := range []struct {
		name   string
		frames []phys
		want   string
	}{
		// The outlined function jumped to body: it begins the region.
		{"outlined function tail-called", []phys{
			{pc: 0x10, cfa: 0x1000, kind: inspect.KindUser, function: "body"},
			{pc: 0x20, kind: inspect.KindUser, function: "main.omp_outlined", tail: true},
			{pc: 0x30, cfa: 0x2010, kind: inspect.KindRuntime, function: "__kmp_invoke_microtask"},
			{pc: 0x40, cfa: 0x2100, kind: inspect.KindRuntime, function: "__kmpc_fork_call"},
			{pc: 0x50, cfa: 0x2200, kind: inspect.KindUser, function: "main"},
		}, "body@0x10 main.omp_outlined@0x20[tail] marker:ompd-frame __kmp_invoke_microtask@0x30 __kmpc_fork_call@0x40 main@0x50"},
		// A runtime function jumped to the outlined function: the exit
		// frame is the next native frame's.
		{"runtime tail-called the outlined function", []phys{
			{pc: 0x10, cfa: 0x1000, kind: inspect.KindUser, function: "main.omp_outlined"},
			{pc: 0x20, kind: inspect.KindRuntime, function: "__kmp_invoke_task_func", tail: true},
			{pc: 0x30, cfa: 0x2010, kind: inspect.KindRuntime, function: "__kmp_invoke_microtask"},
			{pc: 0x40, cfa: 0x2100, kind: inspect.KindRuntime, function: "__kmpc_fork_call"},
			{pc: 0x50, cfa: 0x2200, kind: inspect.KindUser, function: "main"},
		}, "main.omp_outlined@0x10 marker:ompd-frame __kmp_invoke_task_func@0x20[tail] __kmp_invoke_microtask@0x30 __kmpc_fork_call@0x40 main@0x50"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts := &threadStack{tid: 1, frames: c.frames, boundaries: map[string]int{}}
			b := newBuilder(ts)
			b.findBoundaries(ts)
			if got := show(b.logical(nil, ts, 0, 0, map[string]bool{})); got != c.want {
				t.Errorf("frames\n\t%s\nwant\n\t%s", got, c.want)
			}
		})
	}
}

func sp(s string) *string { return &s }

// TestParseAddr: the tasks' frame addresses are read back exactly, and
// anything else is no address.
func TestParseAddr(t *testing.T) {
	for in, want := range map[string]uint64{
		"0x7ffd5f0e1c40":     0x7ffd5f0e1c40,
		"0xffffffffffffffff": ^uint64(0),
		"0x0":                0,
		"7ffd5f0e1c40":       0,
		"0x":                 0,
		"0x12zz":             0,
		"":                   0,
	} {
		if got := parseAddr(in); got != want {
			t.Errorf("parseAddr(%q) = %#x, want %#x", in, got, want)
		}
	}
}
