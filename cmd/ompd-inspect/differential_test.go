package main

import (
	"encoding/json"
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
	"threads[].gtid", "threads[].location",
}

// compareBackends runs --backend both on a target and returns the result:
// with the bt view every field of every view plus the backtraces, with
// summary every field but the backtraces.
func compareBackends(t *testing.T, target []string, view string) comparison {
	t.Helper()
	args := append(append([]string{}, target...), view, "--backend", "both", "--ompd-library", fixture.LibompdPath(), "--json")
	out, errs, code := cli(args...)
	var c comparison
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("ompd-inspect %s: exit %d, bad JSON: %v\n%s%s", strings.Join(args, " "), code, err, out, errs)
	}
	want := 0
	if compare.Unexpected(c.Differences) > 0 {
		want = 1
	}
	if code != want {
		t.Errorf("exit code %d with %d unexpected differences; want %d: %s", code, compare.Unexpected(c.Differences), want, errs)
	}
	if c.Native.Backend != "native" || c.DLL.Backend != "dll" || c.DLL.OMPDLibrary == nil || c.DLL.OMPDLibrary.Path != fixture.LibompdPath() {
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
