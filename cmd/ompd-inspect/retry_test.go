package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/target/ptrace"
)

func intp(n int) *int       { return &n }
func strp(s string) *string { return &s }
func u64p(n uint64) *uint64 { return &n }

// cloneReport returns a deep copy of r.
func cloneReport(r *inspect.Report) *inspect.Report {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	var c inspect.Report
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	return &c
}

// handReport is a report of a nested team: thread 10 (the initial thread)
// and 11 in the outer team 0x100, 10 and 12 in the inner team 0x200, 13 in
// no region.
func handReport() *inspect.Report {
	return &inspect.Report{
		Target:  inspect.TargetInfo{Kind: "process", PID: 10},
		Runtime: inspect.Runtime{Backend: "native"},
		Regions: []inspect.Region{
			{ID: "0x100", Level: 1, ActiveLevel: 1, TeamSize: 2, Location: "a.c:1", Function: "f", EntryAddr: "0x4000", Threads: []int{10, 11}},
			{ID: "0x200", Parent: strp("0x100"), Level: 2, ActiveLevel: 2, TeamSize: 2, Location: "a.c:2", Function: "g", EntryAddr: "0x4100", Threads: []int{10, 12}},
		},
		Threads: []inspect.Thread{
			{OSTID: 10, GTID: intp(0), ThreadNum: intp(0), State: strp("work_parallel"), Region: strp("0x200"), Task: strp("0x300")},
			{OSTID: 11, GTID: intp(1), ThreadNum: intp(1), State: strp("wait_barrier_implicit_parallel"), Region: strp("0x100"), Task: strp("0x301")},
			{OSTID: 12, GTID: intp(2), ThreadNum: intp(1), State: strp("work_parallel"), Region: strp("0x200"), Task: strp("0x302"), WaitID: u64p(7)},
			{OSTID: 13, GTID: intp(3), State: strp("idle")},
		},
		Tasks: []inspect.Task{
			{ID: "0x300", Kind: "implicit", Status: "running", Thread: intp(10)},
			{ID: "0x400", Kind: "explicit", Status: "queued", Parent: strp("0x300")},
		},
		Warnings: []string{"ICV dyn-var (thread 13): reading dyn-var: unavailable: thread at 0x9000 has no current task"},
	}
}

// TestRetryAgreement checks what two snapshots must share to agree, on
// hand-built reports, with the exact difference named.
func TestRetryAgreement(t *testing.T) {
	const (
		outer = "(level 1, team of 2, a.c:1, f, threads 10 11)"
		inner = "(level 2, team of 2, a.c:2, g, threads 10 12) in " + outer
	)
	tests := []struct {
		name   string
		change func(r *inspect.Report)
		want   string
	}{
		{"the same", func(r *inspect.Report) {}, ""},
		{"other ids, states and tasks; an unwinding warning", func(r *inspect.Report) {
			// The runtime reused other team structures (other ids); the
			// threads changed states and tasks; a stack walk stopped early.
			r.Regions[0].ID, r.Regions[1].ID, r.Regions[1].Parent = "0x900", "0x800", strp("0x900")
			r.Threads[0].Region, r.Threads[1].Region, r.Threads[2].Region = strp("0x800"), strp("0x900"), strp("0x800")
			r.Threads[0].State, r.Threads[2].WaitID = strp("wait_barrier_implicit_parallel"), nil
			r.Tasks = append(r.Tasks, inspect.Task{ID: "0x500", Kind: "explicit", Status: "queued"})
			r.Warnings = append(r.Warnings, "unwinding: thread 12: no CFI at 0x1234")
		}, ""},
		{"regions listed in another order", func(r *inspect.Report) {
			r.Regions[0], r.Regions[1] = r.Regions[1], r.Regions[0]
		}, ""},
		{"a team size", func(r *inspect.Report) { r.Regions[1].TeamSize = 3 },
			"only the one before has region " + inner},
		{"serialized", func(r *inspect.Report) { r.Regions[0].Serialized = true },
			"only the one before has region " + outer},
		{"an entry function cleared (a team being set up)", func(r *inspect.Report) { r.Regions[1].Function = "" },
			"only the last has region (level 2, team of 2, a.c:2, -, threads 10 12) in " + outer},
		{"a thread left its team", func(r *inspect.Report) {
			r.Regions[0].Threads = []int{10}
			r.Threads[1].Region, r.Threads[1].ThreadNum = nil, nil
		}, "only the one before has region " + outer},
		{"a thread left its region only", func(r *inspect.Report) {
			r.Threads[1].Region, r.Threads[1].ThreadNum = nil, nil
		}, "only the last has thread 11: gtid 1, in no region"},
		{"another thread number", func(r *inspect.Report) { r.Threads[2].ThreadNum = intp(0) },
			"only the last has thread 12: gtid 2, number 0 in region " + inner},
		{"a new thread", func(r *inspect.Report) {
			r.Threads = append(r.Threads, inspect.Thread{OSTID: 14})
		}, "only the last has thread 14: not an OpenMP thread, in no region"},
		{"a region missing from the list", func(r *inspect.Report) {
			r.Regions = r.Regions[:1]
		}, "only the one before has region " + inner},
		{"a warning of inconsistent state", func(r *inspect.Report) {
			r.Warnings = append(r.Warnings, "region 0x200: thread 1: t_threads[1] of team 0x200 is NULL")
		}, `only the last has warning "region 0x200: thread 1: t_threads[1] of team 0x200 is NULL"`},
		{"warnings in another order", func(r *inspect.Report) {
			r.Warnings = append([]string{"runtime version: unavailable"}, r.Warnings...)
		}, `only the last has warning "runtime version: unavailable"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := handReport(), handReport()
			tc.change(b)
			if got := snapshotDiff([]*inspect.Report{a}, []*inspect.Report{b}); got != tc.want {
				t.Errorf("difference %q\nwant %q", got, tc.want)
			}
		})
	}
	// The order of the warnings does not matter.
	a, b := handReport(), handReport()
	a.Warnings = []string{"x", "y"}
	b.Warnings = []string{"y", "x"}
	if d := reportDiff(a, b); d != "" {
		t.Errorf("warnings in another order: %q", d)
	}
	// With two backends, both must agree; the difference names the backend.
	na, da, nb, db := handReport(), handReport(), handReport(), handReport()
	da.Runtime.Backend, db.Runtime.Backend = "dll", "dll"
	db.Threads[3].GTID = nil
	want := "dll backend: only the one before has thread 13: gtid 3, in no region"
	if d := snapshotDiff([]*inspect.Report{na, da}, []*inspect.Report{nb, db}); d != want {
		t.Errorf("two backends: %q, want %q", d, want)
	}
	// A thread in a region the report does not list, and a cycle of
	// parents: described, and the walk ends.
	c := handReport()
	c.Threads[3].Region = strp("0x999")
	c.Regions[0].Parent = strp("0x200")
	s := structure(c)
	if !slices.Contains(s, "thread 13: gtid 3, in region 0x999 (not listed)") ||
		!slices.Contains(s, "region "+inner) ||
		!slices.Contains(s, "region "+outer+" in (level 2, team of 2, a.c:2, g, threads 10 12)") {
		t.Errorf("structure %q", s)
	}
}

// TestRetrySnapshots checks the loop with snapshots given by the test.
func TestRetrySnapshots(t *testing.T) {
	a := []*inspect.Report{handReport()}
	b := []*inspect.Report{cloneReport(a[0])}
	b[0].Regions[1].TeamSize = 3
	bDiffers := "only the one before has region (level 2, team of 2, a.c:2, g, threads 10 12) in (level 1, team of 2, a.c:1, f, threads 10 11)"

	type run struct {
		retries int
		snaps   [][]*inspect.Report
		takeErr int // the snapshot (from 1) whose take fails, 0: none
		pauses  int // the pause (from 1) that is interrupted, 0: none
	}
	takeErr := errors.New("process 10: the process ended while it was being read (killed, or it exited); nothing is reported")
	pauseErr := &ptrace.InterruptedError{PID: 10, Signal: syscall.SIGINT, Attached: true}
	tests := []struct {
		name   string
		run    run
		taken  int
		note   string
		err    error
		paused int
	}{
		{"agree at once", run{retries: 5, snaps: [][]*inspect.Report{a, a}}, 2,
			"ompd-inspect: --retry: 2 snapshots taken; the last two agree", nil, 1},
		{"agree at the third", run{retries: 5, snaps: [][]*inspect.Report{a, b, b}}, 3,
			"ompd-inspect: --retry: 3 snapshots taken; the last two agree", nil, 2},
		{"agree at the last allowed", run{retries: 2, snaps: [][]*inspect.Report{a, b, b}}, 3,
			"ompd-inspect: --retry: 3 snapshots taken; the last two agree", nil, 2},
		{"never agree", run{retries: 3, snaps: [][]*inspect.Report{b, a, b, a, a}}, 4,
			"ompd-inspect: warning: --retry: 4 snapshots taken and no two in a row agree; the last one is shown (only the last has region (level 2, team of 2, a.c:2, g, threads 10 12) in (level 1, team of 2, a.c:1, f, threads 10 11))", nil, 3},
		{"one retry, no agreement", run{retries: 1, snaps: [][]*inspect.Report{a, b, b}}, 2,
			"ompd-inspect: warning: --retry: 2 snapshots taken and no two in a row agree; the last one is shown (" + bDiffers + ")", nil, 1},
		{"a snapshot fails", run{retries: 5, snaps: [][]*inspect.Report{a, b, b}, takeErr: 2}, 0, "", takeErr, 1},
		{"interrupted between two", run{retries: 5, snaps: [][]*inspect.Report{a, b, b}, pauses: 2}, 0, "", pauseErr, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			taken, paused := 0, 0
			var seen int
			snapshotTaken = func([]*inspect.Report) { seen++ }
			defer func() { snapshotTaken = nil }()
			res, err := retrySnapshots(tc.run.retries, func() ([]*inspect.Report, error) {
				taken++
				if taken == tc.run.takeErr {
					return nil, takeErr
				}
				return tc.run.snaps[taken-1], nil
			}, func() error {
				paused++
				if paused == tc.run.pauses {
					return pauseErr
				}
				return nil
			})
			if err != tc.err {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if paused != tc.paused {
				t.Errorf("%d pauses, want %d", paused, tc.paused)
			}
			if err != nil {
				return
			}
			if res.taken != tc.taken || seen != tc.taken || taken != tc.taken {
				t.Errorf("%d snapshots counted, %d seen, %d taken; want %d", res.taken, seen, taken, tc.taken)
			}
			if res.note() != tc.note {
				t.Errorf("note %q\nwant %q", res.note(), tc.note)
			}
			if res.last[0] != tc.run.snaps[tc.taken-1][0] {
				t.Errorf("the last snapshot is not the one printed")
			}
		})
	}
}

// TestRetryPauseInterrupted: a signal between two snapshots ends the
// retries with the line DetachOnSignals prints.
func TestRetryPauseInterrupted(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGTERM
	err := pauseUnlessSignalled(42, sigs)
	var ie *ptrace.InterruptedError
	if err == nil || err.Error() != "SIGTERM: detached from process 42" || !errors.As(err, &ie) || ie.ExitCode() != 143 {
		t.Fatalf("pause: %v, want SIGTERM: detached from process 42, exit code 143", err)
	}
	if err := pauseUnlessSignalled(42, make(chan os.Signal, 1)); err != nil {
		t.Fatalf("pause without a signal: %v", err)
	}
}

// TestRetryFlag checks --retry's values before anything is attached.
func TestRetryFlag(t *testing.T) {
	wantError(t, "ompd-inspect: 3 is not a view; a number of retries goes after '=' (--retry=3)", "attach", "1", "--retry", "3")
	wantError(t, "ompd-inspect: 3 is not a view; a number of retries goes after '=' (--retry=3)", "attach", "1", "--retry=5", "3")
	wantError(t, "ompd-inspect: --retry=0: the number of retries goes from 1 to 20", "attach", "1", "--retry=0")
	wantError(t, "ompd-inspect: --retry=21: the number of retries goes from 1 to 20", "attach", "1", "--retry=21")
	wantError(t, "ompd-inspect: --retry does not go with --trace", "attach", "1", "--retry", "--trace")
	wantError(t, "ompd-inspect: unknown flag: --retry", "core", "x.core", "--retry")
	wantError(t, "ompd-inspect: process 4194303: no such process", "attach", "4194303", "--retry")
}

// TestRetryStable: a program that stays in one state gives two agreeing
// snapshots.
func TestRetryStable(t *testing.T) {
	p := fixture.Start(t, "barrier", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}})
	var snaps [][]*inspect.Report
	snapshotTaken = func(reps []*inspect.Report) { snaps = append(snaps, reps) }
	defer func() { snapshotTaken = nil }()
	out, errs, code := cli("attach", strconv.Itoa(p.PID), "regions", "--json", "--retry")
	want := "ompd-inspect: --retry: 2 snapshots taken; the last two agree\n"
	if code != 0 || errs != want {
		t.Fatalf("exit %d, stderr %q; want exit 0, stderr %q", code, errs, want)
	}
	var r inspect.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Regions) != 1 || r.Regions[0].TeamSize != 4 {
		t.Fatalf("report %v, regions %+v", err, r.Regions)
	}
	if len(snaps) != 2 || snapshotDiff(snaps[0], snaps[1]) != "" {
		t.Fatalf("%d snapshots", len(snaps))
	}
	assertRunning(t, p)
}

// retryNote matches the line attach --retry prints after the report.
var retryNote = regexp.MustCompile(`^ompd-inspect: (?:--retry: (\d+) snapshots taken; the last two agree|warning: --retry: (\d+) snapshots taken and no two in a row agree; the last one is shown \((.*)\))\n$`)

// TestRetryBusy runs attach --retry=20 on busy, whose teams fork and join
// all the time: the line must count the snapshots taken; when it says the
// last two agree, they do and no two before did, and the report printed
// is the last; when it says none agreed, 21 were taken, no two in a row
// agree, and it names the difference of the last two.
func TestRetryBusy(t *testing.T) {
	p := fixture.Start(t, "busy", fixture.StartOptions{Env: busyEnv()})
	sums := newBusyChecksums()
	facts := newBusyFacts(t, p)
	for run := range 3 {
		var snaps [][]*inspect.Report
		snapshotTaken = func(reps []*inspect.Report) { snaps = append(snaps, reps) }
		known := tidSet(t, p, nil)
		out, errs, code := cli("attach", strconv.Itoa(p.PID), "regions", "--json", "--retry=20")
		snapshotTaken = nil
		assertTargetFine(t, p, fmt.Sprintf("run %d", run))
		tidSet(t, p, known)
		m := retryNote.FindStringSubmatch(errs)
		if code != 0 || m == nil {
			t.Fatalf("run %d: exit %d, stderr %q", run, code, errs)
		}
		var want string
		if m[1] != "" {
			if len(snaps) < 2 {
				t.Fatalf("run %d: %d snapshots", run, len(snaps))
			}
			last, prev := snaps[len(snaps)-1], snaps[len(snaps)-2]
			if d := snapshotDiff(prev, last); d != "" {
				t.Errorf("run %d: the last two snapshots differ: %s", run, d)
			}
			for i := 1; i < len(snaps)-1; i++ {
				if snapshotDiff(snaps[i-1], snaps[i]) == "" {
					t.Errorf("run %d: snapshots %d and %d agree, yet ompd-inspect took more", run, i, i+1)
				}
			}
			want = fmt.Sprintf("ompd-inspect: --retry: %d snapshots taken; the last two agree\n", len(snaps))
		} else {
			if len(snaps) != 21 {
				t.Fatalf("run %d: %d snapshots without agreement, want 21", run, len(snaps))
			}
			for i := 1; i < len(snaps); i++ {
				if snapshotDiff(snaps[i-1], snaps[i]) == "" {
					t.Errorf("run %d: snapshots %d and %d agree, yet ompd-inspect says none did", run, i, i+1)
				}
			}
			want = fmt.Sprintf("ompd-inspect: warning: --retry: 21 snapshots taken and no two in a row agree; the last one is shown (%s)\n",
				snapshotDiff(snaps[19], snaps[20]))
		}
		if errs != want {
			t.Errorf("run %d: stderr %q\nwant %q", run, errs, want)
		}
		// The report printed is the last snapshot's.
		last := snaps[len(snaps)-1][0]
		var r inspect.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("run %d: bad JSON: %v", run, err)
		}
		gotRegions, _ := json.Marshal(r.Regions)
		wantRegions, _ := json.Marshal(last.Regions)
		if string(gotRegions) != string(wantRegions) || strings.Join(r.Warnings, "\n") != strings.Join(last.Warnings, "\n") {
			t.Errorf("run %d: the report printed is not the last snapshot:\n%s\nwant\n%s", run, gotRegions, wantRegions)
		}
		for i, s := range snaps {
			if bad := facts.check(s[0], "regions", known); len(bad) > 0 {
				t.Errorf("run %d, snapshot %d: %s", run, i+1, strings.Join(bad, "; "))
			}
		}
		t.Logf("run %d: %s", run, strings.TrimSpace(errs))
	}
	checkBusyProgress(t, p, sums, len(p.Lines()))
}
