package trace

import (
	"fmt"
	"strings"
	"testing"
)

// TestPairTask: task-end events are matched to the begin of the same part
// of a task (the same task on the same thread) in every order the parts
// of an untied task can take, and the summary counts what was matched.
// Times are powers of two, so durations are exact.
func TestPairTask(t *testing.T) {
	// A step is one event: "bA T" is task T beginning on thread A.
	type step struct {
		ev   string
		time float64
		want float64 // duration of an end event; -1: none
	}
	type summary struct {
		count, ended, threads int
		total                 float64
	}
	threads := map[byte]int{'A': 1001, 'B': 1002} // OS tid; gtid = tid - 1001
	for _, c := range []struct {
		name  string
		steps []step
		want  summary // the row of task T
		open  int     // parts left open
	}{
		{"parts one after the other on one thread", []step{
			{"bA T", 1, 0}, {"eA T", 2, 1}, {"bA T", 4, 0}, {"eA T", 8, 4},
		}, summary{2, 2, 1, 5}, 0},
		{"parts one after the other on two threads", []step{
			{"bA T", 1, 0}, {"eA T", 2, 1}, {"bB T", 4, 0}, {"eB T", 8, 4},
		}, summary{2, 2, 2, 5}, 0},
		{"parts overlap, the first ends first", []step{
			{"bA T", 1, 0}, {"bB T", 2, 0}, {"eA T", 4, 3}, {"eB T", 8, 6},
		}, summary{2, 2, 2, 9}, 0},
		{"parts overlap, the second ends first", []step{
			{"bA T", 1, 0}, {"bB T", 2, 0}, {"eB T", 4, 2}, {"eA T", 8, 7},
		}, summary{2, 2, 2, 9}, 0},
		{"second part run inside the first on one thread", []step{
			{"bA T", 1, 0}, {"bA T", 2, 0}, {"eA T", 4, 2}, {"eA T", 8, 7},
		}, summary{2, 2, 1, 9}, 0},
		{"another task run inside a part", []step{
			{"bA T", 1, 0}, {"bA U", 2, 0}, {"bB T", 4, 0}, {"eA U", 8, 6}, {"eB T", 16, 12}, {"eA T", 32, 31},
		}, summary{2, 2, 2, 43}, 0},
		{"a part begun before the trace", []step{
			{"eB T", 1, -1}, {"bA T", 2, 0}, {"eA T", 4, 2},
		}, summary{1, 1, 1, 2}, 0},
		{"a part that does not end on another thread", []step{
			{"bA T", 1, 0}, {"eB T", 2, -1},
		}, summary{1, 0, 1, 0}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &session{tasks: make(opens), sum: newSummer()}
			for _, st := range c.steps {
				kind := KindTaskBegin
				if st.ev[0] == 'e' {
					kind = KindTaskEnd
				}
				tid := threads[st.ev[1]]
				gtid := tid - 1001
				id := strings.Fields(st.ev)[1]
				ev := &Event{Time: st.time, Kind: kind, OSTID: tid, GTID: &gtid,
					Task: &Task{ID: id, Location: "t.c:" + id, Function: "entry" + id}}
				s.pairTask(ev)
				got := "none"
				if ev.Duration != nil {
					got = fmt.Sprint(*ev.Duration)
				}
				want := "none"
				if kind == KindTaskEnd && st.want >= 0 {
					want = fmt.Sprint(st.want)
				}
				if got != want {
					t.Errorf("%s at %v: duration %s, want %s", st.ev, st.time, got, want)
				}
			}
			var row *SummaryRow
			for _, r := range s.sum.summary().Rows {
				if r.Location == "t.c:T" {
					row = &r
				}
			}
			if row == nil {
				t.Fatalf("no summary row for task T: %+v", s.sum.summary().Rows)
			}
			got := summary{row.Count, row.Ended, row.Threads, row.TimeTotal}
			if got != c.want {
				t.Errorf("summary row count %d ended %d threads %d time %v, want %+v", got.count, got.ended, got.threads, got.total, c.want)
			}
			left := 0
			for _, stack := range s.tasks {
				left += len(stack)
			}
			if left != c.open {
				t.Errorf("%d parts left open, want %d: %v", left, c.open, s.tasks)
			}
		})
	}
}

// TestOpensRegions: regions pair per thread too; an end matches the
// innermost open begin with its id and leaves the others open.
func TestOpensRegions(t *testing.T) {
	p := make(opens)
	p.begin(1, open{id: "r1", time: 1})
	p.begin(1, open{id: "r2", time: 2})
	p.begin(2, open{id: "r2", time: 3})
	p.begin(1, open{id: "r2", time: 4})
	for _, c := range []struct {
		tid  int
		id   string
		time float64 // of the matched begin; 0: none
	}{
		{1, "r2", 4}, {2, "r1", 0}, {1, "r1", 1}, {2, "r2", 3}, {1, "r2", 2}, {1, "r2", 0},
	} {
		o, ok := p.end(c.tid, c.id)
		if ok != (c.time != 0) || o.time != c.time {
			t.Errorf("end(%d, %s) = %+v, %v; want the begin at %v", c.tid, c.id, o, ok, c.time)
		}
	}
	if len(p) != 0 {
		t.Errorf("left open: %v", p)
	}
}

// TestOpensForget: what an ended thread began is not paired with an end
// on a later thread that reuses its id.
func TestOpensForget(t *testing.T) {
	p := make(opens)
	p.begin(7, open{id: "0xa", time: 1})
	p.forget(7)
	if o, ok := p.end(7, "0xa"); ok {
		t.Errorf("end after forget paired with %+v", o)
	}
	if len(p) != 0 {
		t.Errorf("%d threads left open", len(p))
	}
}
