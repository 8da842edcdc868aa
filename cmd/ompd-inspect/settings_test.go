package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/target/ptrace"
)

func TestShowsSettings(t *testing.T) {
	for _, c := range []struct {
		view string
		json bool
		want bool
	}{
		{"summary", false, false}, {"summary", true, true},
		{"threads", false, false}, {"threads", true, false},
		{"regions", true, false}, {"tasks", true, false}, {"bt", true, false},
		{"icvs", false, true}, {"env", false, true}, {"all", false, true}, {"all", true, true},
	} {
		if got := showsSettings(c.view, c.json); got != c.want {
			t.Errorf("showsSettings(%q, json %v) = %v, want %v", c.view, c.json, got, c.want)
		}
	}
}

// The views that show neither the ICVs nor the control variables read a
// report without them, and show exactly what they show from the whole
// report; the views that show them read them: thread-limit-var and
// max-task-priority-var as the program read them back (READY), and the
// runtime's control variables as the whole report has them.
func TestSettingsReadForTheirViews(t *testing.T) {
	p := fixture.Start(t, "icvs", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled", "OMP_THREAD_LIMIT=12", "OMP_MAX_TASK_PRIORITY=7"}})
	pt, err := ptrace.Attach(p.PID, ptrace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pt.Close()
	read := func(view string, json bool) *inspect.Report {
		t.Helper()
		reps, err := buildReports(pt, inspect.Source{Kind: "process"}, view, viewFlags{json: json})
		if err != nil {
			t.Fatalf("%s view: %v", view, err)
		}
		return reps[0]
	}
	shown := func(rep *inspect.Report, view string) string {
		t.Helper()
		var b strings.Builder
		if err := show(&b, rep, view, viewFlags{}); err != nil {
			t.Fatalf("%s view: %v", view, err)
		}
		return b.String()
	}
	// icv is the value of the first ICV named name (one per task for a
	// task's ICV: the program's threads share these).
	icv := func(rep *inspect.Report, name string) string {
		for _, v := range rep.ICVs {
			if v.Name == name {
				return fmt.Sprint(v.Value)
			}
		}
		return "none"
	}
	full := read("summary", true)
	want := map[string]string{
		"thread-limit-var":      p.Ready["thread_limit"],
		"max-task-priority-var": p.Ready["max_task_priority"],
	}
	if want["thread-limit-var"] != "12" || want["max-task-priority-var"] != "7" {
		t.Fatalf("the program read back thread_limit %s and max_task_priority %s, want 12 and 7", want["thread-limit-var"], want["max-task-priority-var"])
	}
	check := func(what string, rep *inspect.Report) {
		t.Helper()
		for name, w := range want {
			if got := icv(rep, name); got != w {
				t.Errorf("%s: %s %s, want %s", what, name, got, w)
			}
		}
		if len(rep.ControlVars) < 50 || fmt.Sprint(rep.ControlVars) != fmt.Sprint(full.ControlVars) {
			t.Errorf("%s: %d control variables, want the whole report's %d", what, len(rep.ControlVars), len(full.ControlVars))
		}
	}
	check("summary --json", full)
	for _, v := range []string{"icvs", "env", "all"} {
		check(v+" view", read(v, false))
	}
	for _, v := range []string{"summary", "threads", "regions", "tasks", "bt"} {
		rep := read(v, false)
		if len(rep.ICVs) != 0 || len(rep.ControlVars) != 0 {
			t.Errorf("%s view: the report read %d ICVs and %d control variables, want none", v, len(rep.ICVs), len(rep.ControlVars))
		}
		if got, want := shown(rep, v), shown(full, v); got != want {
			t.Errorf("%s view without the settings:\n%s\nwant, as from the whole report:\n%s", v, got, want)
		}
	}
}
