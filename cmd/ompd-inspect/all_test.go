package main

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

// TestAllView: the all view is every view of one snapshot: its text is the
// summary, then each other view's body under its title, and its JSON the
// whole report with the backtraces. The oracle is the single views of the
// same parked program, each from an attach of its own.
func TestAllView(t *testing.T) {
	p := fixture.Start(t, "nested", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}})
	pid := strconv.Itoa(p.PID)
	view := func(args ...string) string {
		t.Helper()
		out, errs, code := cli(append([]string{"attach", pid}, args...)...)
		if code != 0 {
			t.Fatalf("attach %s %v: exit %d: %s", pid, args, code, errs)
		}
		return out
	}
	// body drops a view's header (up to the first blank line) and its
	// warnings.
	body := func(s string) string {
		_, rest, _ := strings.Cut(s, "\n\n")
		rest, _, _ = strings.Cut(rest, "\nwarnings:\n")
		return rest
	}
	summary, _, _ := strings.Cut(view("summary"), "\nwarnings:\n")
	want := summary
	for _, v := range []string{"threads", "regions", "tasks", "icvs", "env"} {
		want += "\n== " + v + " ==\n\n" + body(view(v))
	}
	want += "\n== backtraces ==\n\n" + body(view("bt"))
	got, _, _ := strings.Cut(view("all"), "\nwarnings:\n")
	if got != want {
		t.Errorf("all view:\n%s\nwant the views one after the other:\n%s", got, want)
	}

	var all, bt struct {
		inspect.Report
		Backtraces []inspect.Backtrace `json:"backtraces"`
	}
	if err := json.Unmarshal([]byte(view("all", "--json")), &all); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(view("bt", "--json")), &bt); err != nil {
		t.Fatal(err)
	}
	summaryJSON := reportOf(t, "attach", pid)
	if !reflect.DeepEqual(all.Backtraces, bt.Backtraces) || len(all.Backtraces) != len(p.ThreadIDs(t)) {
		t.Errorf("all --json has %d backtraces, bt --json %d; want the same, one per thread", len(all.Backtraces), len(bt.Backtraces))
	}
	if !reflect.DeepEqual(all.Threads, summaryJSON.Threads) || !reflect.DeepEqual(all.Regions, summaryJSON.Regions) ||
		!reflect.DeepEqual(all.Tasks, summaryJSON.Tasks) || !reflect.DeepEqual(all.ICVs, summaryJSON.ICVs) {
		t.Errorf("all --json differs from the summary's report in threads, regions, tasks or ICVs")
	}
	if _, _, code := cli("attach", pid, "all", "--group"); code == 0 {
		t.Errorf("all --group: exit 0, want an error")
	}
}

// TestStatsLine: --stats adds one line on stderr with the number of
// threads stopped and the phases (no figure is asserted: timing is for
// benchmarks), and leaves stdout as without it.
func TestStatsLine(t *testing.T) {
	p := fixture.Start(t, "nested", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}})
	pid := strconv.Itoa(p.PID)
	out, errs, code := cli("attach", pid, "regions", "--stats")
	plain, _, _ := cli("attach", pid, "regions")
	if code != 0 || out != plain {
		t.Fatalf("attach --stats: exit %d, stdout differs from without --stats: %v\n%s", code, out != plain, errs)
	}
	n := len(p.ThreadIDs(t))
	prefix := "stats: " + strconv.Itoa(n) + " threads; stopped "
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, prefix) || !strings.Contains(last, " (attach ") || !strings.Contains(last, ", read ") ||
		!strings.Contains(last, ", detach ") || !strings.Contains(last, " (before the stop ") ||
		!strings.Contains(last, ", after the release ") || !strings.Contains(last, "; peak RSS ") {
		t.Errorf("stderr ends with %q; want %q... with the phases and the peak RSS", last, prefix)
	}
}
