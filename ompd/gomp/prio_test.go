package gomp

import (
	"debug/elf"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/core"
	"github.com/ompd-inspect/ompd-inspect/target/ptrace"
)

// TestPriorityQueuesLiveAndGcore: prio.c (gcc-12) queues tasks of
// priorities 0, 3, 3 and 7, which turns the team's task queue and the
// creating task's children queue into priority splay trees; both are read
// live under ptrace and from a gcore core of the same state.
func TestPriorityQueuesLiveAndGcore(t *testing.T) {
	exe := build(t, "prio", "gcc-12", "prio.c")
	p := fixture.Start(t, "prio", fixture.StartOptions{Exe: exe, Env: []string{
		"OMP_WAIT_POLICY=passive", "OMP_MAX_TASK_PRIORITY=9"}})
	names := exeFunctions(t, exe)
	t.Run("live", func(t *testing.T) {
		proc, err := ptrace.Attach(p.PID, ptrace.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer proc.Close()
		checkPriorities(t, proc, p.Ready, names)
	})
	t.Run("gcore", func(t *testing.T) {
		c, err := core.Open(p.Gcore(t), core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		checkPriorities(t, c, p.Ready, names)
	})
}

// exeFunctions maps the link-time addresses of exe's functions to their
// names, from its symbol table (debug/elf, not the target's reader).
func exeFunctions(t *testing.T, exe string) map[uint64]string {
	t.Helper()
	out := map[uint64]string{}
	for _, s := range fixture.ELFSymbols(t, exe) {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
			out[s.Value] = s.Name
		}
	}
	return out
}

// checkPriorities compares the queued tasks read from tg with what
// prio.c announced: each task's function is spawn_pN._omp_fn.0 and its
// priority N; the priorities are READY's prios.
func checkPriorities(t *testing.T, tg target.Target, ready fixture.Ready, names map[uint64]string) {
	t.Helper()
	cb, err := newTestCallbacks(tg)
	if err != nil {
		t.Fatal(err)
	}
	as, err := NewAddressSpace(cb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if as.Release.Major != 12 || len(as.Warnings) != 0 {
		t.Fatalf("release %+v, warnings %q: want GCC 12 and none", as.Release, as.Warnings)
	}
	creator := ready.Int(t, "creator")
	var thr *Thread
	for _, th := range tg.Threads() {
		if th.TID == creator {
			if thr, err = as.Thread(th.ThreadPointer()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if thr == nil || thr.Idle || thr.Team == 0 || thr.TeamID != 0 || thr.Level != 1 || thr.Task == 0 {
		t.Fatalf("creator thread %d: %+v, want thread 0 of a level-1 team with a task", creator, thr)
	}
	// The queues are splay trees: the root pointer is set.
	tq, _ := as.Layout.Get("gomp_team.task_queue")
	cq, _ := as.Layout.Get("gomp_task.children_queue")
	root, _ := as.Layout.Get("priority_queue.t.root")
	for what, q := range map[string]uint64{"team queue": thr.Team + uint64(tq), "children queue": thr.Task + uint64(cq)} {
		if r, err := as.m.u64(q + uint64(root)); err != nil || r == 0 {
			t.Errorf("%s: splay tree root %#x (%v), want one", what, r, err)
		}
	}

	bias := tg.Modules()[0].Bias
	var want []int
	for _, s := range strings.Split(ready.Get(t, "prios"), ",") {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, v)
	}
	slices.Sort(want)
	check := func(what string, addrs []uint64, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(addrs) != ready.Int(t, "queued") {
			t.Fatalf("%s: %d tasks, want %d", what, len(addrs), ready.Int(t, "queued"))
		}
		var got []int
		seen := map[uint64]bool{}
		for _, a := range addrs {
			if seen[a] {
				t.Errorf("%s: task %#x twice", what, a)
			}
			seen[a] = true
			k, err := as.Task(a)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			name := names[k.Fn-bias]
			var fromName int
			if _, err := fmt.Sscanf(name, "spawn_p%d._omp_fn.0", &fromName); err != nil || !strings.HasSuffix(name, "._omp_fn.0") {
				t.Errorf("%s: task %#x runs %#x (%q), want a spawn_pN._omp_fn.0", what, a, k.Fn, name)
				continue
			}
			if k.Priority != fromName || k.Kind != TaskWaiting || k.Parent != thr.Task || k.FnData == 0 {
				t.Errorf("%s: task %#x (%s): priority %d kind %s parent %#x fn_data %#x, want priority %d, waiting, parent %#x",
					what, a, name, k.Priority, k.KindName, k.Parent, k.FnData, fromName, thr.Task)
			}
			got = append(got, k.Priority)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: priorities %v, want %v", what, got, want)
		}
	}
	q, err := as.TeamQueue(thr.Team)
	check("team queue", q, err)
	c, err := as.ChildrenQueue(thr.Task)
	check("children queue", c, err)
	slices.Sort(q)
	slices.Sort(c)
	if !slices.Equal(q, c) {
		t.Errorf("team queue %#x and children queue %#x differ", q, c)
	}

	// Through the backend: a thread handle of the creator makes its team
	// known, and QueuedTasks gives the same tasks.
	g := Backend(as)
	if _, err := g.ThreadHandle(ompd.ThreadIDPthread, thr.TP); err != nil {
		t.Fatal(err)
	}
	bq, err := g.QueuedTasks()
	if err != nil || len(bq) != len(q) {
		t.Fatalf("QueuedTasks: %d tasks (%v), want %d", len(bq), err, len(q))
	}
	for _, k := range bq {
		fn, err := k.Function()
		if err != nil || !strings.HasPrefix(names[uint64(fn)-bias], "spawn_p") {
			t.Errorf("QueuedTasks: task %s runs %#x (%v)", k.Label(), fn, err)
		}
	}
}
