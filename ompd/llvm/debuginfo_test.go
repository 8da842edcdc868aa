package llvm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/ompd/llvm"
)

// What needs ompd.TypeLayouts: source locations, runtime task ids, queued
// tasks.

func TestLocation(t *testing.T) {
	forLayouts(t, full, func(t *testing.T, s *scenario) {
		as := s.init(t)
		th := func(pt uint64) *llvm.Thread { return try(as.ThreadHandle(ompd.ThreadIDPthread, pt)).must(t) }
		t2 := try(th(ptTh1).CurrentParallel()).must(t)
		t1 := try(t2.Enclosing()).must(t)
		t0 := try(t1.Enclosing()).must(t)
		e1 := try(th(ptTh1).CurrentTask()).must(t)
		imp10 := try(th(ptTh0).CurrentTask()).must(t)
		for _, c := range []struct {
			what string
			loc  func() (ompd.Location, error)
			want ompd.Location
			str  string
		}{
			{"T1", t1.Location, ompd.Location{File: "demo.c", Function: "main", Line: 12, Column: 3}, "demo.c:12"},
			{"T2", t2.Location, ompd.Location{File: "demo.c", Function: "inner", Line: 30, Column: 5}, "demo.c:30"},
			{"E1", e1.Location, ompd.Location{File: "src/demo.c", Function: "work", Line: 41, Column: 9}, "src/demo.c:41"},
			{"imp1.0", imp10.Location, ompd.Location{File: "demo.c", Function: "main", Line: 12, Column: 3}, "demo.c:12"},
		} {
			got, err := c.loc()
			if err != nil || got != c.want || got.String() != c.str {
				t.Errorf("%s: Location() = %+v (%q), %v; want %+v", c.what, got, got.String(), err, c.want)
			}
		}
		// T0 has no ident_t; S's is the compiler's "unknown" (no -g).
		if _, err := t0.Location(); !errors.Is(err, ompd.ErrNoLocation) {
			t.Errorf("T0: %v, want ErrNoLocation", err)
		}
		sl2 := try(th(ptTh2).CurrentParallel()).must(t)
		if _, err := sl2.Location(); !errors.Is(err, ompd.ErrNoLocation) {
			t.Errorf("S: %v, want ErrNoLocation", err)
		}
		if (ompd.Location{}).String() != "" {
			t.Error("empty Location has a String")
		}
		if id := try(e1.RuntimeID()).must(t); id != -7 {
			t.Errorf("E1: RuntimeID() = %d, want -7", id)
		}
		if id := try(imp10.RuntimeID()).must(t); id != 2 {
			t.Errorf("imp1.0: RuntimeID() = %d, want 2", id)
		}
	})
}

func TestLocationMalformed(t *testing.T) {
	for _, c := range []struct {
		psource string
		err     error  // nil: any error containing want
		want    string // substring of the error
		loc     ompd.Location
	}{
		{psource: ";demo.c;main;12;3;;", loc: ompd.Location{File: "demo.c", Function: "main", Line: 12, Column: 3}},
		{psource: ";demo.c;main;12;3", loc: ompd.Location{File: "demo.c", Function: "main", Line: 12, Column: 3}},
		{psource: ";unknown;unknown;0;0;;", err: ompd.ErrNoLocation},
		{psource: ";demo.c;main;x;3;;", want: "malformed source location"},
		{psource: ";demo.c;main;12;;;", want: "malformed source location"},
		{psource: "demo.c;main;12;3;;", want: "malformed source location"},
		{psource: ";demo.c;main;12", want: "malformed source location"},
		{psource: "", want: "malformed source location"},
	} {
		s := newScenario(t, layouts[0], full)
		id := s.b.obj("ident_t")
		s.b.set(id, "ident_t", "psource", s.b.cstring(c.psource))
		s.setTeam("T2", "t_ident", id)
		as := s.init(t)
		p := try(try(as.ThreadHandle(ompd.ThreadIDPthread, ptTh1)).must(t).CurrentParallel()).must(t)
		got, err := p.Location()
		switch {
		case c.err != nil:
			if !errors.Is(err, c.err) {
				t.Errorf("%q: %v, want %v", c.psource, err, c.err)
			}
		case c.want != "":
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%q: %+v, %v; want an error containing %q", c.psource, got, err, c.want)
			}
		default:
			if err != nil || got != c.loc {
				t.Errorf("%q: %+v, %v; want %+v", c.psource, got, err, c.loc)
			}
		}
	}
	// A NULL psource.
	s := newScenario(t, layouts[0], full)
	s.setTeam("T2", "t_ident", s.b.obj("ident_t"))
	p := try(try(s.init(t).ThreadHandle(ompd.ThreadIDPthread, ptTh1)).must(t).CurrentParallel()).must(t)
	if _, err := p.Location(); !errors.Is(err, ompd.ErrNoLocation) {
		t.Errorf("NULL psource: %v, want ErrNoLocation", err)
	}
}

// Without TypeLayouts, the calls that need DWARF say so; everything else
// works.
func TestWithoutTypeLayouts(t *testing.T) {
	s := newScenario(t, layouts[0], tracking)
	as := s.init(t)
	th1 := try(as.ThreadHandle(ompd.ThreadIDPthread, ptTh1)).must(t)
	p := try(th1.CurrentParallel()).must(t)
	k := try(th1.CurrentTask()).must(t)
	for what, err := range map[string]error{
		"Parallel.Location": second(p.Location()),
		"Task.Location":     second(k.Location()),
		"Task.RuntimeID":    second(k.RuntimeID()),
		"QueuedTasks":       second(as.QueuedTasks()),
	} {
		if !errors.Is(err, ompd.ErrNoTypeLayouts) {
			t.Errorf("%s: %v, want ErrNoTypeLayouts", what, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestQueuedTasks(t *testing.T) {
	forLayouts(t, full, func(t *testing.T, s *scenario) {
		as := s.init(t)
		qs := try(as.QueuedTasks()).must(t)
		var names []string
		for _, q := range qs {
			names = append(names, s.name(q.Addr()))
		}
		// TT1 deque 0 from its head (slot 6, wrapping to 0 and 1), then
		// TT2's: Q5, a NULL slot, Q2 again (returned once).
		if want := "Q1 Q2 Q3 Q4 Q5"; strings.Join(names, " ") != want {
			t.Fatalf("QueuedTasks() = %v, want %s", names, want)
		}
		for i, q := range qs {
			f := try(q.Flags()).must(t)
			if f != (ompd.Flags{Explicit: true}) {
				t.Errorf("Q%d: Flags() = %+v", i+1, f)
			}
			if fn := try(q.Function()).must(t); fn != fnQ+0x10*uint64(i) {
				t.Errorf("Q%d: Function() = %#x", i+1, fn)
			}
			if id := try(q.RuntimeID()).must(t); id != int64(9+i) {
				t.Errorf("Q%d: RuntimeID() = %d", i+1, id)
			}
			l := try(q.Location()).must(t)
			if l != (ompd.Location{File: "demo.c", Function: "producer", Line: 55, Column: 7}) {
				t.Errorf("Q%d: Location() = %+v", i+1, l)
			}
			gen := try(q.Generating()).must(t)
			wantGen := "imp1.0"
			if i == 4 {
				wantGen = "imp2.0"
			}
			if s.name(gen.Addr()) != wantGen {
				t.Errorf("Q%d: Generating() = %s, want %s", i+1, s.name(gen.Addr()), wantGen)
			}
		}
		// Q1's schedule kind (99) is not one LLVM defines: the empty string.
		v, err := icvByName(t, as, qs[0], "run-sched-var")
		if err != nil || v != text("") {
			t.Errorf("run-sched-var of an unknown kind = %+v, %v; want \"\"", v, err)
		}
	})
}

// Deques the runtime could not have built are reported, and do not hide
// the tasks of the other deques.
func TestQueuedTasksInconsistent(t *testing.T) {
	for _, c := range []struct {
		name  string
		field string
		v     uint64
		want  string
		tasks string // what is still returned: TT2's deque
	}{
		{"size not a power of two", "td_deque_size", 6, "4 tasks in 6 slots: inconsistent", "Q5 Q2"},
		{"more tasks than slots", "td_deque_ntasks", 9, "9 tasks in 8 slots: inconsistent", "Q5 Q2"},
		{"negative size", "td_deque_size", 0xffffffff, "inconsistent", "Q5 Q2"},
		{"huge size", "td_deque_size", llvm.MaxQueued * 2, "inconsistent", "Q5 Q2"},
		{"negative ntasks", "td_deque_ntasks", 0xfffffff0, "", "Q5 Q2"},
		{"unreadable deque", "td_deque", 0xdead0000, "reading deque at 0xdead0000", "Q5 Q2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newScenario(t, layouts[0], full)
			hd := try(s.b.tgt.mem.readPtr(s, s.b.addrOf(s.tt["TT1"], "kmp_task_team_t", "tt.tt_threads_data"))).must(t)
			s.b.set(hd, "kmp_thread_data_t", "td."+c.field, c.v)
			var qs []*llvm.Task
			var err error
			within(t, "QueuedTasks", func() { qs, err = s.init(t).QueuedTasks() })
			if c.want == "" {
				if err != nil {
					t.Errorf("QueuedTasks: %v", err)
				}
			} else {
				wantErrContains(t, err, "task deque 0 of task team", c.want)
			}
			var names []string
			for _, q := range qs {
				names = append(names, s.name(q.Addr()))
			}
			if strings.Join(names, " ") != c.tasks {
				t.Errorf("QueuedTasks() = %v, want %s", names, c.tasks)
			}
		})
	}
	t.Run("task team too large", func(t *testing.T) {
		s := newScenario(t, layouts[0], full)
		s.b.set(s.tt["TT1"], "kmp_task_team_t", "tt.tt_nproc", llvm.MaxThreads+1)
		qs, err := s.init(t).QueuedTasks()
		wantErrContains(t, err, "tt_nproc 65537")
		if len(qs) != 2 || s.name(qs[0].Addr()) != "Q5" || s.name(qs[1].Addr()) != "Q2" {
			t.Errorf("QueuedTasks() = %d tasks", len(qs))
		}
	})
}

// TestLocationRefresh: a source location is read once per ident_t, and
// again after Refresh (a trace's next stop), which then sees a changed
// psource.
func TestLocationRefresh(t *testing.T) {
	s := newScenario(t, layouts[0], full)
	id := s.b.obj("ident_t")
	s.b.set(id, "ident_t", "psource", s.b.cstring(";demo.c;main;12;3;;"))
	s.setTeam("T2", "t_ident", id)
	as := s.init(t)
	loc := func() ompd.Location {
		p := try(try(as.ThreadHandle(ompd.ThreadIDPthread, ptTh1)).must(t).CurrentParallel()).must(t)
		return try(p.Location()).must(t)
	}
	if got := loc(); got.Line != 12 {
		t.Fatalf("line %d, want 12", got.Line)
	}
	s.b.set(id, "ident_t", "psource", s.b.cstring(";demo.c;main;40;1;;"))
	if got := loc(); got.Line != 12 {
		t.Fatalf("before Refresh: line %d, want the 12 read first", got.Line)
	}
	as.Refresh()
	if got := loc(); got.Line != 40 {
		t.Fatalf("after Refresh: line %d, want 40", got.Line)
	}
}
