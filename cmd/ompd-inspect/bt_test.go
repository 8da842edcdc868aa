package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

// btReport is the JSON of the bt view.
type btReport struct {
	Runtime    inspect.Runtime     `json:"runtime"`
	Backtraces []inspect.Backtrace `json:"backtraces"`
	Groups     []struct {
		Threads []int `json:"threads"`
	} `json:"groups"`
}

// btOf runs the bt view on a fixture in the given source and returns the
// JSON, the READY values and the target arguments (to run more views).
func btOf(t *testing.T, name string, src source, env []string, flags ...string) (*btReport, fixture.Ready, []string) {
	t.Helper()
	args, ready := targetArgs(t, name, src, env)
	return runBT(t, args, flags...), ready, args
}

func runBT(t *testing.T, target []string, flags ...string) *btReport {
	t.Helper()
	args := append(append(append([]string{}, target...), "bt", "--json"), flags...)
	out, errs, code := cli(args...)
	if code != 0 {
		t.Fatalf("ompd-inspect %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	var r btReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	return &r
}

func btOfThread(t *testing.T, r *btReport, tid int) inspect.Backtrace {
	t.Helper()
	return find(t, r.Backtraces, func(bt inspect.Backtrace) bool { return bt.OSTID == tid }, fmt.Sprintf("backtrace of thread %d", tid))
}

// signature renders the frames of a folded backtrace that are not system
// code, one string each: "function:line" for user frames ("+inlined"
// when inlined), "parallel FILE:LINE team N thread M" and "task FILE:LINE"
// for markers, "hop TID" for hops. Each frame must be on the thread the
// previous hop named.
func signature(t *testing.T, bt inspect.Backtrace) []string {
	t.Helper()
	var out []string
	on := bt.OSTID
	for _, f := range bt.Frames {
		if f.Kind != inspect.KindHop && f.Thread != on {
			t.Errorf("thread %d: frame %+v is on thread %d, not on %d", bt.OSTID, f, f.Thread, on)
		}
		switch f.Kind {
		case inspect.KindUser:
			s := fmt.Sprintf("%s:%d", f.Function, f.Line)
			if f.Inlined {
				s += "+inlined"
			}
			out = append(out, s)
		case inspect.KindRegionMarker:
			var loc string
			var team, num int
			if _, err := fmt.Sscanf(strings.TrimPrefix(f.Text, "at the end of "), "#pragma omp parallel at %s — team of %d, thread %d", &loc, &team, &num); err != nil {
				t.Errorf("region marker %q: %v", f.Text, err)
			}
			out = append(out, fmt.Sprintf("parallel %s team %d thread %d", loc, team, num))
		case inspect.KindTaskMarker:
			var loc string
			if _, err := fmt.Sscanf(f.Text, "#pragma omp task at %s", &loc); err != nil {
				t.Errorf("task marker %q: %v", f.Text, err)
			}
			out = append(out, "task "+loc)
		case inspect.KindHop:
			on = f.Thread
			out = append(out, fmt.Sprintf("hop %d", f.Thread))
		case inspect.KindRuntime:
			t.Errorf("thread %d: runtime frame %s in the default view", bt.OSTID, f.Function)
		}
	}
	return out
}

func line(t *testing.T, file, marker string) int { return fixture.SourceLine(t, file, marker) }

// TestBacktraceCrashInTask: the thread that crashes (kernel core) or spins
// (live, gcore) inside an explicit task of a nested region shows the user
// frame, the task marker with its line, both region markers, the hop to
// the thread that encountered the inner region, and the path to main.
func TestBacktraceCrashInTask(t *testing.T) {
	forEachSource(t, func(t *testing.T, src source) {
		r, ready, target := btOf(t, "crash", src, []string{"OMP_DEBUG=enabled"})
		crasher, initial := ready.Int(t, "crasher"), ready.Int(t, "initial")
		top := "spin"
		if src == kernel {
			top = "abort"
		}
		want := crashSignature(t, top, initial)

		bt := btOfThread(t, r, crasher)
		if got := signature(t, bt); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("crasher %d:\n got %s\nwant %s", crasher, strings.Join(got, "\n     "), strings.Join(want, "\n     "))
		}
		// With state tracking, every marker was placed by its OMPD task frame.
		for _, f := range bt.Frames {
			if (f.Kind == inspect.KindRegionMarker || f.Kind == inspect.KindTaskMarker) && f.Boundary != "ompd-frame" {
				t.Errorf("marker %q placed by %s; want ompd-frame", f.Text, f.Boundary)
			}
		}
		// Outlined functions are named after the function with the construct.
		for _, f := range bt.Frames {
			wantUser := map[string]string{".omp_outlined.": "produce", ".omp_task_entry.": "produce",
				"start_inner.omp_outlined": "start_inner", "main.omp_outlined_debug__": "main"}[f.Function]
			if wantUser != "" && f.UserFunction != wantUser {
				t.Errorf("%s: user function %q; want %q", f.Function, f.UserFunction, wantUser)
			}
		}
		if bt.Activity != "user code" {
			t.Errorf("crasher: activity %q", bt.Activity)
		}
		// --all-frames shows the runtime between the task and produce and,
		// in the kernel core, abort above explode.
		all := btOfThread(t, runBT(t, target, "--all-frames", "--no-continue"), crasher)
		var fns []string
		for _, f := range all.Frames {
			if f.Thread != crasher {
				t.Errorf("--no-continue shows frame %+v of thread %d", f, f.Thread)
			}
			if f.Kind == inspect.KindUser || f.Kind == inspect.KindRuntime || f.Kind == inspect.KindSystem {
				fns = append(fns, f.Function)
			}
		}
		joined := " " + strings.Join(fns, " ") + " "
		for _, w := range []string{" .omp_task_entry. __kmp_invoke_task ", " __kmpc_omp_taskwait produce ", " __kmp_invoke_microtask "} {
			if !strings.Contains(joined, w) {
				t.Errorf("--all-frames of the crasher lacks %q: %s", w, joined)
			}
		}
		if src == kernel && !strings.Contains(joined, " abort explode ") {
			t.Errorf("kernel core: --all-frames lacks abort right above explode: %s", joined)
		}
		if last := all.Frames[len(all.Frames)-1]; !all.Complete || last.Kind != inspect.KindSystem {
			t.Errorf("crasher's own stack: complete=%v (%s), last frame %+v", all.Complete, all.Stop, last)
		}
	})
}

// crashSignature is the folded stack (see signature) of crash.c's crashing
// thread, whose top frame is at LINE:top.
func crashSignature(t *testing.T, top string, initial int) []string {
	l := func(m string) int { return line(t, "crash.c", m) }
	return []string{
		fmt.Sprintf("explode:%d", l(top)),
		fmt.Sprintf(".omp_outlined.:%d+inlined", l("call_explode")),
		fmt.Sprintf(".omp_task_entry.:%d", l("task")),
		fmt.Sprintf("task crash.c:%d", l("task")),
		fmt.Sprintf("produce:%d", l("taskwait")),
		fmt.Sprintf("start_inner.omp_outlined_debug__:%d", l("call_produce")),
		fmt.Sprintf("start_inner.omp_outlined:%d", l("inner")),
		fmt.Sprintf("parallel crash.c:%d team 2 thread 1", l("inner")),
		fmt.Sprintf("hop %d", initial),
		fmt.Sprintf("start_inner:%d", l("inner")),
		fmt.Sprintf("main.omp_outlined_debug__:%d", l("call_inner")),
		fmt.Sprintf("main.omp_outlined:%d", l("outer")),
		fmt.Sprintf("parallel crash.c:%d team 2 thread 0", l("outer")),
		fmt.Sprintf("main:%d", l("outer")),
	}
}

// TestBacktraceNested: every thread of the 3-deep nested regions shows
// its region markers with the right lines, team sizes and thread numbers,
// and continues on the encountering threads up to main.
func TestBacktraceNested(t *testing.T) {
	forEachSource(t, func(t *testing.T, src source) {
		r, ready, target := btOf(t, "nested", src, []string{"OMP_DEBUG=enabled"})
		l := func(m string) string { return "nested.c:" + strconv.Itoa(line(t, "nested.c", m)) }
		initial := ready.Int(t, "initial")
		innermostMaster := ready.Int(t, "innermost_master")
		middleB := ready.Int(t, "middle_b_master")
		spinning := ready.Ints(t, "spinning")
		for _, tid := range spinning {
			sig := signature(t, btOfThread(t, r, tid))
			top := "innermost_spin"
			if src == kernel && tid == innermostMaster {
				top = "abort" // the announcing thread aborts
			}
			if len(sig) == 0 || sig[0] != "innermost_work:"+strconv.Itoa(line(t, "nested.c", top)) || sig[len(sig)-1] != "main:"+strconv.Itoa(line(t, "nested.c", "outer")) {
				t.Errorf("thread %d: %v", tid, sig)
				continue
			}
			var markers, hops []string
			for _, s := range sig {
				switch {
				case strings.HasPrefix(s, "parallel "):
					markers = append(markers, s)
				case strings.HasPrefix(s, "hop "):
					hops = append(hops, s)
				}
			}
			num := slices.Index(spinning, tid)
			wantMarkers := []string{
				fmt.Sprintf("parallel %s team 4 thread %d", l("inner"), num),
				fmt.Sprintf("parallel %s team 3 thread %d", l("middle"), ready.Int(t, "innermost_encounter_num")),
				fmt.Sprintf("parallel %s team 2 thread 0", l("outer")),
			}
			wantHops := []string{fmt.Sprintf("hop %d", initial)}
			if tid != innermostMaster {
				wantHops = append([]string{fmt.Sprintf("hop %d", innermostMaster)}, wantHops...)
			}
			if strings.Join(markers, ",") != strings.Join(wantMarkers, ",") || strings.Join(hops, ",") != strings.Join(wantHops, ",") {
				t.Errorf("thread %d (innermost thread %d):\n markers %v\n    want %v\n hops %v want %v", tid, num, markers, wantMarkers, hops, wantHops)
			}
		}
		// The straggler of the second middle team hops to its master, then
		// to the initial thread.
		sig := signature(t, btOfThread(t, r, ready.Int(t, "straggler")))
		var hops []string
		for _, s := range sig {
			if strings.HasPrefix(s, "hop ") {
				hops = append(hops, s)
			}
		}
		if want := []string{fmt.Sprintf("hop %d", middleB), fmt.Sprintf("hop %d", initial)}; strings.Join(hops, ",") != strings.Join(want, ",") {
			t.Errorf("straggler: hops %v; want %v (%v)", hops, want, sig)
		}
		// A worker waiting at the end of its region shows that region's
		// end and continues on the thread that encountered it.
		for _, tid := range ready.Ints(t, "implicit_barrier") {
			if tid == initial {
				continue
			}
			bt := btOfThread(t, r, tid)
			if bt.Activity != "implicit barrier at the end of a parallel region" || len(bt.Frames) == 0 ||
				!strings.HasPrefix(bt.Frames[0].Text, "at the end of #pragma omp parallel at "+filepath.Base(l("middle"))) {
				t.Errorf("thread %d at the end of its region: %s %+v", tid, bt.Activity, bt.Frames)
			}
		}
		// The three innermost workers share one stack; --group prints them
		// once.
		g := runBT(t, target, "--group")
		var workers []int
		for _, tid := range spinning {
			if tid != innermostMaster {
				workers = append(workers, tid)
			}
		}
		sort.Ints(workers)
		found := false
		for _, grp := range g.Groups {
			got := append([]int(nil), grp.Threads...)
			sort.Ints(got)
			if fmt.Sprint(got) == fmt.Sprint(workers) {
				found = true
			}
		}
		if !found {
			t.Errorf("no group of exactly the innermost workers %v: %+v", workers, g.Groups)
		}
	})
}

// TestBacktraceWithoutStateTracking: markers are placed by the runtime's
// entry points, with the same result.
func TestBacktraceWithoutStateTracking(t *testing.T) {
	r, ready, _ := btOf(t, "crash", live, nil)
	bt := btOfThread(t, r, ready.Int(t, "crasher"))
	want := crashSignature(t, "spin", ready.Int(t, "initial"))
	if got := signature(t, bt); strings.Join(got, "\n") != strings.Join(want, "\n") || bt.State != nil {
		t.Errorf("without state tracking (state %v):\n got %s\nwant %s", bt.State, strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
	for _, f := range bt.Frames {
		if (f.Kind == inspect.KindRegionMarker || f.Kind == inspect.KindTaskMarker) && f.Boundary != "entry-point" {
			t.Errorf("marker %q placed by %s without state tracking", f.Text, f.Boundary)
		}
	}
}

// TestBacktraceThreadSelection: --thread takes an os_tid or a gtid; an
// unknown one is an error.
func TestBacktraceThreadSelection(t *testing.T) {
	p := fixture.Start(t, "crash", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}})
	pid := strconv.Itoa(p.PID)
	crasher := p.Ready.Int(t, "crasher")
	r := runBT(t, []string{"attach", pid}, "--thread", strconv.Itoa(crasher))
	if len(r.Backtraces) != 1 || r.Backtraces[0].OSTID != crasher || r.Backtraces[0].GTID == nil {
		t.Fatalf("--thread %d: %+v", crasher, r.Backtraces)
	}
	gtid := *r.Backtraces[0].GTID
	r = runBT(t, []string{"attach", pid}, "--thread", strconv.Itoa(gtid))
	if len(r.Backtraces) != 1 || r.Backtraces[0].OSTID != crasher {
		t.Fatalf("--thread %d (gtid): %+v", gtid, r.Backtraces)
	}
	_, errs, code := cli("attach", pid, "bt", "--thread", "999999")
	if want := fmt.Sprintf("ompd-inspect: 999999 is neither an OS thread id nor a gtid of process %d\n", p.PID); code != 1 || errs != want {
		t.Errorf("unknown thread: exit %d, %q; want %q", code, errs, want)
	}
	_, errs, code = cli("attach", pid, "threads", "--group")
	if code != 1 || errs != "ompd-inspect: --all-frames, --no-continue and --group go with the bt view\n" {
		t.Errorf("--group on threads: exit %d, %q", code, errs)
	}
	assertRunning(t, p)
}

// TestBacktraceActivities: what each thread waits for is read from its
// stack, without state tracking too.
func TestBacktraceActivities(t *testing.T) {
	for _, env := range [][]string{{"OMP_DEBUG=enabled"}, nil} {
		r, ready, _ := btOf(t, "lock", live, env)
		for _, tid := range ready.Ints(t, "waiters") {
			if a := btOfThread(t, r, tid).Activity; a != "lock" {
				t.Errorf("lock waiter %d (env %v): activity %q", tid, env, a)
			}
		}
		if a := btOfThread(t, r, ready.Int(t, "holder")).Activity; a != "user code" {
			t.Errorf("lock holder (env %v): activity %q", env, a)
		}
		r, ready, _ = btOf(t, "barrier", live, env)
		for _, tid := range ready.Ints(t, "waiting") {
			bt := btOfThread(t, r, tid)
			if bt.Activity != "barrier (explicit or end of worksharing)" || len(bt.Frames) == 0 ||
				bt.Frames[0].Line != line(t, "barrier.c", "barrier") {
				t.Errorf("barrier waiter %d (env %v): %q, first frame %+v", tid, env, bt.Activity, bt.Frames)
			}
		}
	}
}

// TestBacktraceNestedTasks: the thread running an included task inside the
// final task shows both task markers, innermost first, then its implicit
// task's region.
func TestBacktraceNestedTasks(t *testing.T) {
	forEachSource(t, func(t *testing.T, src source) {
		r, ready, _ := btOf(t, "tasks", src, []string{"OMP_DEBUG=enabled"})
		var markers []string
		for _, s := range signature(t, btOfThread(t, r, ready.Int(t, "final"))) {
			if strings.HasPrefix(s, "task ") || strings.HasPrefix(s, "parallel ") {
				markers = append(markers, s)
			}
		}
		want := []string{
			fmt.Sprintf("task tasks.c:%d", line(t, "tasks.c", "task_child")),
			fmt.Sprintf("task tasks.c:%d", line(t, "tasks.c", "task_final")),
			fmt.Sprintf("parallel tasks.c:%d team 3 thread %d", line(t, "tasks.c", "parallel"), ready.Int(t, "final_num")),
		}
		if strings.Join(markers, ",") != strings.Join(want, ",") {
			t.Errorf("final thread markers %v; want %v", markers, want)
		}
	})
}
