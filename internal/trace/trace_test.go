package trace

import (
	"testing"
)

func TestParseStopAt(t *testing.T) {
	for _, c := range []struct {
		in   string
		want StopAt
		err  string
	}{
		{"task", StopAt{Kind: "task"}, ""},
		{"parallel-begin:nested.c:42", StopAt{Kind: "parallel-begin", File: "nested.c", Line: 42}, ""},
		{"task-end:C:/src/a:b.c:7", StopAt{Kind: "task-end", File: "C:/src/a:b.c", Line: 7}, ""},
		{"barrier", StopAt{}, `--stop-at "barrier": "barrier" is not an event; want one of parallel-begin, parallel-end, task-begin, task-end, thread-begin, thread-end, device-begin, device-end, runtime-ready (or a class: parallel, task, thread, device, runtime)`},
		{"task:a.c", StopAt{}, `--stop-at "task:a.c": want EVENT or EVENT:FILE:LINE`},
		{"task:a.c:0", StopAt{}, `--stop-at "task:a.c:0": want EVENT:FILE:LINE with a line number above 0`},
		{"task::5", StopAt{}, `--stop-at "task::5": want EVENT:FILE:LINE with a line number above 0`},
		{"task:a.c:x", StopAt{}, `--stop-at "task:a.c:x": want EVENT:FILE:LINE with a line number above 0`},
	} {
		st, err := ParseStopAt(c.in)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.err || (err == nil && *st != c.want) {
			t.Errorf("ParseStopAt(%q) = %+v, %q; want %+v, %q", c.in, st, got, c.want, c.err)
		}
	}
}

func TestStopAtMatches(t *testing.T) {
	region := &Event{Kind: KindParallelBegin, Region: &Region{Location: "/src/dir/nested.c:42"}}
	task := &Event{Kind: KindTaskEnd, Task: &Task{Location: "nested.c:42"}}
	thread := &Event{Kind: KindThreadBegin}
	for _, c := range []struct {
		st   StopAt
		ev   *Event
		want bool
	}{
		{StopAt{Kind: "parallel"}, region, true},
		{StopAt{Kind: "parallel-end"}, region, false},
		{StopAt{Kind: "parallel-begin", File: "nested.c", Line: 42}, region, true},
		{StopAt{Kind: "parallel-begin", File: "dir/nested.c", Line: 42}, region, true},
		{StopAt{Kind: "parallel-begin", File: "ested.c", Line: 42}, region, false},
		{StopAt{Kind: "parallel-begin", File: "nested.c", Line: 4}, region, false},
		{StopAt{Kind: "task", File: "nested.c", Line: 42}, task, true},
		{StopAt{Kind: "thread"}, thread, true},
		{StopAt{Kind: "thread", File: "nested.c", Line: 42}, thread, false},
	} {
		if got := c.st.matches(c.ev); got != c.want {
			t.Errorf("%+v matches %s at %+v: %v, want %v", c.st, c.ev.Kind, c.ev, got, c.want)
		}
	}
}

func TestSummary(t *testing.T) {
	s := newSummer()
	k95 := s.begin(ClassParallel, "x.c:95", "f", 4, nil)
	k105 := s.begin(ClassParallel, "x.c:105", "g", 2, nil)
	s.begin(ClassParallel, "x.c:105", "g", 3, nil)
	kt := s.begin(ClassTask, "a.c:1", "t", 0, []int{0, 9, 9})
	s.end(k95, 0.5, []int{0, 1, 2, 3})
	s.end(k105, 0.25, []int{0, 1})
	s.end(kt, 1, nil)
	got := s.summary().Rows
	want := []SummaryRow{
		{Class: ClassParallel, Location: "x.c:95", Function: "f", Count: 1, Ended: 1, TeamTotal: 4, TeamMean: 4, Threads: 4, TimeTotal: 0.5, TimeMean: 0.5},
		{Class: ClassParallel, Location: "x.c:105", Function: "g", Count: 2, Ended: 1, TeamTotal: 5, TeamMean: 2.5, Threads: 2, TimeTotal: 0.25, TimeMean: 0.25},
		{Class: ClassTask, Location: "a.c:1", Function: "t", Count: 1, Ended: 1, Threads: 2, TimeTotal: 1, TimeMean: 1},
	}
	if len(got) != len(want) {
		t.Fatalf("rows %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
