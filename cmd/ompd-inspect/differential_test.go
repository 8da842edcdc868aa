package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/compare"
	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/ompd/dll"
)

// comparison is the JSON of --backend both.
type comparison struct {
	Target      inspect.TargetInfo   `json:"target"`
	Native      inspect.Runtime      `json:"native"`
	DLL         inspect.Runtime      `json:"dll"`
	Compared    int                  `json:"compared"`
	Differences []compare.Difference `json:"differences"`
	Warnings    struct {
		Native []string `json:"native"`
		DLL    []string `json:"dll"`
	} `json:"warnings"`
}

// dllUnavailable is what LLVM's library cannot give: no OMPD 5.1 call
// answers these (docs/compatibility.md). The differential tests fail if the
// list changes, so that no field silently drops out of the comparison.
var dllUnavailable = []string{
	"backtraces[].frames[].user_function", "regions[].construct_function", "regions[].location", "regions[].serialized",
	"tasks[].construct_function", "tasks[].flags", "tasks[].location",
	"tasks[status=blocked]", "tasks[status=queued]",
	"threads[].blocked_on", "threads[].gtid", "threads[].location",
}

// compareBackends runs --backend both on a target and returns the result:
// with the bt view every field of every view plus the backtraces, with
// summary every field but the backtraces.
func compareBackends(t *testing.T, target []string, view string) comparison {
	t.Helper()
	return compareBackendsWith(t, target, view, fixture.LibompdPath(), fixture.LibompdPath())
}

// compareBackendsWith is compareBackends with the library given by
// --ompd-library (lib; "" lets the runtime name it) and the one that must
// be loaded (want).
func compareBackendsWith(t *testing.T, target []string, view, lib, want string) comparison {
	t.Helper()
	args := append(append([]string{}, target...), view, "--backend", "both", "--json")
	if lib != "" {
		args = append(args, "--ompd-library", lib)
	}
	out, errs, code := cli(args...)
	var c comparison
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("ompd-inspect %s: exit %d, bad JSON: %v\n%s%s", strings.Join(args, " "), code, err, out, errs)
	}
	wantCode := 0
	if compare.Unexpected(c.Differences) > 0 {
		wantCode = 1
	}
	if code != wantCode {
		t.Errorf("exit code %d with %d unexpected differences; want %d: %s", code, compare.Unexpected(c.Differences), wantCode, errs)
	}
	if c.Native.Backend != "native" || c.DLL.Backend != "dll" || c.DLL.OMPDLibrary == nil || c.DLL.OMPDLibrary.Path != want {
		t.Fatalf("backends: native %q, dll %q with %+v", c.Native.Backend, c.DLL.Backend, c.DLL.OMPDLibrary)
	}
	if !strings.HasPrefix(c.DLL.OMPDLibrary.Version, "LLVM OpenMP") {
		t.Errorf("library version %q", c.DLL.OMPDLibrary.Version)
	}
	if strings.Join(c.DLL.Unavailable, ",") != strings.Join(dllUnavailable, ",") || len(c.Native.Unavailable) != 0 {
		t.Errorf("fields not compared: dll %v, native %v; want dll %v, native none", c.DLL.Unavailable, c.Native.Unavailable, dllUnavailable)
	}
	// Every handle the library gave was released (a leak is a warning),
	// and the library answered every call the native backend answered.
	if !slices.Equal(c.Warnings.DLL, c.Warnings.Native) {
		t.Errorf("warnings: native %q, dll %q", c.Warnings.Native, c.Warnings.DLL)
	}
	return c
}

// differentialFixtures are the fixture programs compared, with the number
// of fields each comparison must at least cover: about 85% of what it
// covers today (nested 2391, tasks 853, barrier 831, lock 652, icvs 263,
// demo 810, crash 842 live), a floor that catches a comparison gone empty.
var differentialFixtures = []struct {
	name      string
	minFields int
}{
	{"nested", 2000}, {"tasks", 700}, {"barrier", 700}, {"lock", 550},
	{"icvs", 220}, {"demo", 680}, {"crash", 700},
}

// TestBackendsAgree: for every fixture, live, from a gcore core and from a
// kernel core, with state tracking, the native backend and LLVM's own OMPD
// library give the same value for every field both can fill.
func TestBackendsAgree(t *testing.T) {
	if !dll.BuiltIn {
		t.Fatal("the dll backend is not built in: the differential tests need cgo")
	}
	for _, fx := range differentialFixtures {
		t.Run(fx.name, func(t *testing.T) {
			forEachSource(t, func(t *testing.T, src source) {
				target, _ := targetArgs(t, fx.name, src, []string{"OMP_DEBUG=enabled"})
				c := compareBackends(t, target, "bt")
				t.Logf("compared %d fields", c.Compared)
				if c.Compared < fx.minFields {
					t.Errorf("only %d fields compared; want at least %d", c.Compared, fx.minFields)
				}
				for _, d := range c.Differences {
					t.Errorf("%s", d.Format())
				}
			})
		})
	}
}

// TestBackendsAgreeStock: on Debian's stripped libomp 14, 15, 16 and 19
// (13 ships no libompd), Debian's own OMPD library of the same release,
// found beside the runtime where its ompd_dll_locations points, serves its
// symbol look-ups from what ompd-inspect recovered, and gives the same
// value as the native backend for every field both fill, live and from a
// gcore core, with state tracking.
func TestBackendsAgreeStock(t *testing.T) {
	if !dll.BuiltIn {
		t.Fatal("the dll backend is not built in: the differential tests need cgo")
	}
	for _, v := range []int{14, 15, 16, 19} {
		lib := fixture.StockLibomp(v)
		for _, name := range []string{"nested", "tasks", "lock"} {
			for _, src := range []source{live, gcore} {
				t.Run(fmt.Sprintf("%d/%s/%s", v, name, src), func(t *testing.T) {
					target, _ := targetArgsWith(t, name, src, fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}, Stripped: true, Runtime: lib})
					c := compareBackendsWith(t, target, "bt", "", filepath.Join(filepath.Dir(lib), "libompd.so"))
					if c.Compared < 500 {
						t.Errorf("only %d fields compared", c.Compared)
					}
					for _, d := range c.Differences {
						t.Errorf("%s", d.Format())
					}
				})
			}
		}
	}
}

// TestBackendsWithoutStateTracking: without OMP_DEBUG=enabled, LLVM's
// library refuses task entry points (ompd_rc_needs_state_tracking) that the
// runtime records in every mode; those differences, and only those, are
// known. The backtraces are not compared: without entry points the dll
// backend's stacks have no task markers (docs/compatibility.md).
func TestBackendsWithoutStateTracking(t *testing.T) {
	for _, name := range []string{"nested", "tasks"} {
		t.Run(name, func(t *testing.T) {
			target, _ := targetArgs(t, name, live, nil)
			c := compareBackends(t, target, "summary")
			if c.Native.StateTracking || c.DLL.StateTracking {
				t.Fatalf("state tracking on: native %v, dll %v", c.Native.StateTracking, c.DLL.StateTracking)
			}
			var unexpected []string
			known := 0
			for _, d := range c.Differences {
				if d.Known == "" {
					unexpected = append(unexpected, d.Format())
					continue
				}
				known++
				if d.B != compare.None && d.B != `""` {
					t.Errorf("%s: the library gave %s, yet the difference is called known", d.Path, d.B)
				}
				// The evidence: the runtime's memory holds the entry point
				// (the native backend read it): an outlined function the
				// compiler made for the construct, or the initial task's 0.
				if strings.HasSuffix(d.Path, ".function") && !strings.Contains(d.A, "omp_outlined") && !strings.Contains(d.A, "omp_task_entry") {
					t.Errorf("%s: native %s is no outlined function", d.Path, d.A)
				}
			}
			sort.Strings(unexpected)
			for _, u := range unexpected {
				t.Error(u)
			}
			// Exactly the entry points the native report has: every
			// region's function and entry, every task's entry (and
			// function when named), every thread's function.
			r := reportOf(t, append(append([]string{}, target...), "summary")...)
			want := 0
			for _, reg := range r.Regions {
				want += nonEmpty(reg.Function, reg.EntryAddr)
			}
			for _, k := range r.Tasks {
				if k.Status != "queued" && k.Status != "blocked" {
					want += nonEmpty(k.Function, k.EntryAddr)
				}
			}
			for _, th := range r.Threads {
				want += nonEmpty(th.Function)
			}
			if known != want || want == 0 {
				t.Errorf("%d known differences; want %d, one per entry point the native backend reads", known, want)
			}
		})
	}
}

// TestDLLBackendErrors: one clear line for each way the library cannot be
// used, and a non-zero exit.
func TestDLLBackendErrors(t *testing.T) {
	p := fixture.Start(t, "nested", fixture.StartOptions{})
	pid := strconv.Itoa(p.PID)
	wantError(t, "ompd-inspect: the dll backend: loading OMPD library /nonexistent/libompd.so: /nonexistent/libompd.so: cannot open shared object file: No such file or directory; the native backend (--backend native) works without it",
		"attach", pid, "--backend", "dll", "--ompd-library", "/nonexistent/libompd.so")
	wantError(t, "ompd-inspect: the dll backend: loading OMPD library /lib/x86_64-linux-gnu/libz.so.1: /lib/x86_64-linux-gnu/libz.so.1 defines no ompd_initialize; the native backend (--backend native) works without it",
		"attach", pid, "--backend", "dll", "--ompd-library", "/lib/x86_64-linux-gnu/libz.so.1")
	// Without --ompd-library: the runtime names libompd.so and a path next
	// to itself, neither of which exists here.
	rt := fixture.OMPDLibDir() + "/libompd.so"
	wantProcessError(t, builtCLI(t), "ompd-inspect: the dll backend: loading OMPD library libompd.so: not found in LD_LIBRARY_PATH, the directories of /etc/ld.so.conf or the default library directories; loading OMPD library "+rt+": no such file; the native backend (--backend native) works without it",
		"attach", pid, "--backend", "dll")
	wantError(t, "ompd-inspect: unknown --backend \"gdb\": want native, dll or both", "attach", pid, "--backend", "gdb")
	wantError(t, "ompd-inspect: --ompd-library goes with --backend dll or both", "attach", pid, "--ompd-library", fixture.LibompdPath())
	wantError(t, "ompd-inspect: --backend both compares whole views: --thread, --all-frames, --no-continue and --group do not go with it",
		"attach", pid, "bt", "--backend", "both", "--thread", pid)
	assertRunning(t, p)
}

// wantProcessError runs an ompd-inspect binary and asserts exit code 1,
// exactly one line on stderr equal to want, and nothing on stdout.
func wantProcessError(t *testing.T, bin, want string, args ...string) {
	t.Helper()
	var out, errs strings.Builder
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errs
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	checkErrorLine(t, bin+" "+strings.Join(args, " "), code, out.String(), errs.String(), want)
}

// TestDLLBackendWithoutCgo: a build without cgo says that the dll backend
// is not built in, and the native backend still works.
func TestDLLBackendWithoutCgo(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ompd-inspect-nocgo")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build with CGO_ENABLED=0: %v\n%s", err, out)
	}
	p := fixture.Start(t, "nested", fixture.StartOptions{})
	pid := strconv.Itoa(p.PID)
	wantProcessError(t, bin, "ompd-inspect: the dll backend is not built in (ompd-inspect was built with CGO_ENABLED=0); the native backend (--backend native) works without it",
		"attach", pid, "--backend", "dll")
	out, err := exec.Command(bin, "attach", pid, "regions").Output()
	if err != nil || !strings.Contains(string(out), "team of 4") {
		t.Errorf("native backend without cgo: %v\n%s", err, out)
	}
	assertRunning(t, p)
}

// nonEmpty counts the non-empty strings.
func nonEmpty(ss ...string) int {
	n := 0
	for _, s := range ss {
		if s != "" {
			n++
		}
	}
	return n
}

// TestDLLBackendText: with the dll backend, which gives no gtids, the text
// views still know which threads are OpenMP threads (threads[].openmp):
// the summary counts them and shows their states, the threads view gives
// "?" for their unknown gtids, the bt headers call them OpenMP threads,
// and --thread says that gtids are not known.
func TestDLLBackendText(t *testing.T) {
	p := fixture.Start(t, "barrier", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}})
	pid := strconv.Itoa(p.PID)
	dllArgs := func(view string, more ...string) []string {
		return append([]string{"attach", pid, view, "--backend", "dll", "--ompd-library", fixture.LibompdPath()}, more...)
	}
	text := func(args []string) string {
		t.Helper()
		out, errs, code := cli(args...)
		if code != 0 {
			t.Fatalf("ompd-inspect %s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
		return out
	}

	summary := text(dllArgs("summary"))
	first3 := strings.ReplaceAll(p.Ready["waiting"], ",", " ")
	for _, want := range []string{
		// 4 threads, all OpenMP; 4 implicit tasks and the initial task;
		// the library finds no queued or blocked tasks, so their number
		// is not known.
		"\ncounts    4 threads (4 OpenMP), 1 parallel regions, 5 tasks (? queued, ? blocked on dependences)\n",
		fmt.Sprintf("\n  3  wait_barrier_explicit  team_body at barrier.c:%d     tids %s\n", fixture.SourceLine(t, "barrier.c", "barrier"), first3),
		fmt.Sprintf("\n  1  work_parallel          stuck_worker at barrier.c:%d  tids %s\n", fixture.SourceLine(t, "barrier.c", "stuck_spin"), p.Ready["stuck"]),
	} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary with --backend dll lacks %q:\n%s", want, summary)
		}
	}
	if strings.Contains(summary, "not an OpenMP thread") {
		t.Errorf("summary with --backend dll calls a thread not an OpenMP thread:\n%s", summary)
	}

	// OS TID, GTID, NUM and STATE of each thread, by thread number.
	threads := text(dllArgs("threads"))
	rows := map[string][]string{}
	for _, line := range strings.Split(threads, "\n") {
		if f := strings.Fields(line); len(f) >= 4 {
			rows[f[0]] = f[:4]
		}
	}
	for num, state := range []string{"wait_barrier_explicit", "wait_barrier_explicit", "wait_barrier_explicit", "work_parallel"} {
		tid := p.Ready[fmt.Sprintf("t%d", num)]
		want := []string{tid, "?", strconv.Itoa(num), state}
		if !slices.Equal(rows[tid], want) {
			t.Errorf("threads view with --backend dll: thread %s is %q; want %q:\n%s", tid, rows[tid], want, threads)
		}
	}

	bt := text(dllArgs("bt"))
	for num, doing := range []string{
		// The one region is named region#1 by the dll backend.
		"barrier (explicit or end of worksharing); OpenMP state wait_barrier_explicit; waits for barrier region#1",
		"barrier (explicit or end of worksharing); OpenMP state wait_barrier_explicit; waits for barrier region#1",
		"barrier (explicit or end of worksharing); OpenMP state wait_barrier_explicit; waits for barrier region#1",
		"user code; OpenMP state work_parallel",
	} {
		want := fmt.Sprintf("\nthread %s (OpenMP thread, thread %d of its team)  %s\n", p.Ready[fmt.Sprintf("t%d", num)], num, doing)
		if !strings.Contains(bt, want) {
			t.Errorf("bt with --backend dll lacks %q:\n%s", want, bt)
		}
	}

	// --thread with thread 1's gtid: the native backend finds the thread;
	// the library gives no gtids.
	th := threadOf(t, reportOf(t, "attach", pid, "threads"), p.Ready.Int(t, "t1"))
	if th.GTID == nil || !th.OpenMP {
		t.Fatalf("native backend: thread 1 (%s) has gtid %v, openmp %v", p.Ready["t1"], th.GTID, th.OpenMP)
	}
	gtid := strconv.Itoa(*th.GTID)
	if r := reportOf(t, "attach", pid, "bt", "--thread", gtid); len(r.Backtraces) != 1 || r.Backtraces[0].OSTID != th.OSTID {
		t.Errorf("native --thread %s: %+v; want the backtrace of thread 1 (%d)", gtid, r.Backtraces, th.OSTID)
	}
	wantError(t, fmt.Sprintf("ompd-inspect: %s is not an OS thread id of process %s (the dll backend gives no gtids)", gtid, pid), dllArgs("bt", "--thread", gtid)...)
	assertRunning(t, p)
}

// TestRetryWithoutGTIDs: attach --retry --backend dll compares snapshots
// whose threads have no gtids: an OpenMP thread is described as one, and
// a thread that stops being an OpenMP thread between two snapshots makes
// them differ. (It belongs with retry_test.go's TestRetryAgreement.)
func TestRetryWithoutGTIDs(t *testing.T) {
	a := handReport()
	a.Runtime.Backend = "dll"
	for i := range a.Threads {
		a.Threads[i].GTID, a.Threads[i].OpenMP = nil, true
	}
	b := cloneReport(a)
	if d := reportDiff(a, b); d != "" {
		t.Errorf("the same snapshot twice: %q", d)
	}
	if s := structure(a); !slices.Contains(s, "thread 13: an OpenMP thread, in no region") {
		t.Errorf("structure %q", s)
	}
	b.Threads[3].OpenMP = false
	if d, want := reportDiff(a, b), "only the one before has thread 13: an OpenMP thread, in no region"; d != want {
		t.Errorf("thread 13 no longer an OpenMP thread: %q, want %q", d, want)
	}
}
