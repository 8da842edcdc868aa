package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

// wantError runs ompd-inspect and asserts exit code 1 and exactly one
// line on stderr equal to want, and nothing on stdout.
func wantError(t *testing.T, want string, args ...string) {
	t.Helper()
	out, errs, code := cli(args...)
	checkErrorLine(t, "ompd-inspect "+strings.Join(args, " "), code, out, errs, want)
}

// checkErrorLine asserts that a run (what) ended with exit code 1,
// nothing on stdout and exactly the line want on stderr.
func checkErrorLine(t *testing.T, what string, code int, stdout, stderr, want string) {
	t.Helper()
	if code != 1 || stdout != "" || stderr != want+"\n" {
		t.Errorf("%s:\n exit %d, stdout %q\n stderr %q\n want stderr %q", what, code, stdout, stderr, want+"\n")
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte("not a core\n"), 0o644)

	wantError(t, `ompd-inspect: "abc" is not a process id`, "attach", "abc")
	wantError(t, `ompd-inspect: unknown view "stacks" (views: summary, threads, regions, tasks, icvs, env, bt, all)`, "attach", "1", "stacks")
	wantError(t, "ompd-inspect: process 4194303: no such process", "attach", "4194303")
	wantError(t, "ompd-inspect: "+text+": not an ELF file", "core", text)
	exe := fixture.Exe(t, "plain")
	wantError(t, "ompd-inspect: "+exe+": not a core file (ELF type ET_DYN)", "core", exe)
	wantError(t, "ompd-inspect: opening core: open "+filepath.Join(dir, "missing")+": no such file or directory", "core", filepath.Join(dir, "missing"))
}

// TestNotOpenMP: a program without OpenMP still gets its threads and
// their stacks, with one warning that says why there is nothing else.
func TestNotOpenMP(t *testing.T) {
	p := fixture.Start(t, "plain", fixture.StartOptions{})
	out, errs, code := cli("attach", strconv.Itoa(p.PID), "bt", "--json")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	var r inspect.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	want := "no OpenMP state: not an OpenMP program: no OpenMP runtime (libomp, libiomp5, libgomp) is loaded; the threads and their stacks are shown without it"
	if !slices.Equal(r.Warnings, []string{want}) {
		t.Errorf("warnings %q; want [%q]", r.Warnings, want)
	}
	tids := p.ThreadIDs(t)
	if len(r.Backtraces) != len(tids) {
		t.Fatalf("%d backtraces for the %d threads %v", len(r.Backtraces), len(tids), tids)
	}
	for _, bt := range r.Backtraces {
		var user []string
		for _, f := range bt.Frames {
			if f.Kind == inspect.KindUser {
				user = append(user, f.Function)
			}
		}
		want := []string{"plain_worker"}
		if bt.OSTID == p.PID {
			want = []string{"main"}
		}
		if bt.OpenMP || !bt.Complete || !slices.Equal(user, want) {
			t.Errorf("thread %d: openmp %v, complete %v, user frames %q; want %q", bt.OSTID, bt.OpenMP, bt.Complete, user, want)
		}
	}
	text, _, _ := cli("attach", strconv.Itoa(p.PID))
	if !strings.Contains(text, "\nruntime   none: no OpenMP state (see warnings)\n") || !strings.Contains(text, "counts    3 threads (0 OpenMP), 0 parallel regions") {
		t.Errorf("summary:\n%s", text)
	}
	assertRunning(t, p)
}

// TestStrippedRuntime: Debian's stripped libomp is inspected with the
// layout and globals recovered from its code, and the report says so.
func TestStrippedRuntime(t *testing.T) {
	p := fixture.Start(t, "nested", fixture.StartOptions{Stripped: true})
	r := reportOf(t, "attach", strconv.Itoa(p.PID), "regions")
	rt := r.Runtime
	if rt.Library != "/usr/lib/llvm-19/lib/libomp.so.5" || rt.LayoutSource != "recovered-from-code" || rt.SymbolsSource != "recovered-from-code" ||
		rt.Release != "Debian libomp5-19 1:19.1.7-3~deb12u1" || rt.TypeInfo != "release-table" {
		t.Errorf("runtime %+v; want Debian's 19, everything recovered from its code, types from its release's table", rt)
	}
	sizes := map[int]int{}
	for _, reg := range r.Regions {
		sizes[reg.TeamSize]++
	}
	if want := p.Ready.Int(t, "outer_size"); len(r.Regions) != 4 || sizes[want] != 1 || sizes[3] != 2 || sizes[4] != 1 {
		t.Errorf("%d regions with team sizes %v; want the fixture's 4: one of %d, two of 3, one of 4", len(r.Regions), sizes, want)
	}
	assertRunning(t, p)
}

func TestAlreadyTraced(t *testing.T) {
	p := fixture.Start(t, "barrier", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}})
	// gdb stays attached while it waits for commands on a pipe that is
	// closed only in cleanup. No "shell" command: its forked child,
	// stopped by job control before it execs, outlived gdb. gdb runs in
	// a process group of its own, killed whole.
	cmds, keep, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	gdb := exec.Command("gdb", "-nx", "-q", "-p", strconv.Itoa(p.PID))
	gdb.Stdin, gdb.Stdout, gdb.Stderr = cmds, nil, nil
	gdb.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := gdb.Start(); err != nil {
		t.Fatal(err)
	}
	cmds.Close()
	t.Cleanup(func() {
		syscall.Kill(-gdb.Process.Pid, syscall.SIGKILL)
		gdb.Wait()
		keep.Close()
	})
	// Wait until gdb is attached.
	for i := 0; i < 600; i++ {
		st, _ := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/status")
		if strings.Contains(string(st), "TracerPid:\t"+strconv.Itoa(gdb.Process.Pid)) {
			break
		}
		syscall.Nanosleep(&syscall.Timespec{Nsec: 50e6}, nil)
	}
	wantError(t, "ompd-inspect: process "+strconv.Itoa(p.PID)+" is already traced by process "+strconv.Itoa(gdb.Process.Pid)+" (gdb)",
		"attach", strconv.Itoa(p.PID))
}

// A core whose executable moved: the report says so and fails; --exe and
// --search-path find it; a file with another build-id is refused.
func TestCoreBinaries(t *testing.T) {
	dir := t.TempDir()
	// A private copy: the shared builds in testdata/bin are used by other
	// test binaries at the same time and must never move.
	exe := fixture.CopyExe(t, "barrier", dir)
	p := fixture.Start(t, "barrier", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}, Exe: exe})
	corePath := p.Gcore(t)
	r := reportOf(t, "core", corePath)
	if len(r.Regions) != 1 || r.Regions[0].TeamSize != 4 || r.Regions[0].Function != "main.omp_outlined" {
		t.Fatalf("regions %+v", r.Regions)
	}
	// Move the executable away: the report says which file is missing.
	moved := filepath.Join(dir, "elsewhere")
	if err := os.Mkdir(moved, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(exe, filepath.Join(moved, "barrier")); err != nil {
		t.Fatal(err)
	}
	r = reportOf(t, "core", corePath)
	missing := false
	for _, w := range r.Warnings {
		if strings.Contains(w, exe) {
			missing = true
		}
	}
	if !missing || (len(r.Regions) == 1 && r.Regions[0].Function == "main.omp_outlined") {
		t.Errorf("core with a missing executable: warnings %q, regions %+v", r.Warnings, r.Regions)
	}
	r = reportOf(t, "core", corePath, "--exe", filepath.Join(moved, "barrier"))
	if len(r.Regions) != 1 || r.Regions[0].Function != "main.omp_outlined" {
		t.Errorf("with --exe: regions %+v", r.Regions)
	}
	r = reportOf(t, "core", corePath, "--search-path", moved)
	if len(r.Regions) != 1 || r.Regions[0].Function != "main.omp_outlined" {
		t.Errorf("with --search-path: regions %+v", r.Regions)
	}
	// Another build of the same program: refused, and said so.
	other := filepath.Join(dir, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	fixture.CopyFile(t, fixture.Exe(t, "lock"), filepath.Join(other, "barrier"))
	r = reportOf(t, "core", corePath, "--search-path", other)
	refused := false
	for _, w := range r.Warnings {
		if strings.Contains(w, "build-id") && strings.Contains(w, filepath.Join(other, "barrier")) {
			refused = true
		}
	}
	if !refused || (len(r.Regions) == 1 && r.Regions[0].Function == "main.omp_outlined") {
		t.Errorf("a binary with another build-id was not refused: warnings %q, regions %+v", r.Warnings, r.Regions)
	}
}

func TestTruncatedCore(t *testing.T) {
	p := fixture.Start(t, "barrier", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}})
	full := p.Gcore(t)
	b, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.core")
	os.WriteFile(cut, b[:4096], 0o644)
	out, errs, code := cli("core", cut)
	if code != 1 || out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "ompd-inspect: ") {
		t.Errorf("core cut to 4 KiB: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// SIGTERM, SIGINT or SIGHUP while ompd-inspect is attached: it detaches,
// says so in one line, exits 128+signal, and the target runs on untraced.
func TestSignalWhileAttached(t *testing.T) {
	bin := builtCLI(t)
	p := fixture.Start(t, "nested", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}})
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		cmd := exec.Command(bin, "attach", strconv.Itoa(p.PID))
		cmd.Env = append(os.Environ(), "OMPD_INSPECT_PAUSE_ATTACHED=1")
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pause := pauseLine(p.PID)
		buf := make([]byte, len(pause))
		if _, err := io.ReadFull(stderr, buf); err != nil || string(buf) != pause {
			t.Fatalf("no pause line: %q (%v)", buf, err)
		}
		if len(p.StoppedThreads(t)) == 0 {
			t.Fatalf("process %d is not stopped while attached", p.PID)
		}
		cmd.Process.Signal(sig)
		rest, _ := io.ReadAll(stderr)
		err := cmd.Wait()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 128+int(sig) {
			t.Errorf("%v: exit %v; want %d", sig, err, 128+int(sig))
		}
		if want := detachedLine(sig, p.PID); string(rest) != want {
			t.Errorf("%v: stderr %q after the pause line, want %q", sig, rest, want)
		}
		assertRunning(t, p)
	}
}

// cliBin caches the ompd-inspect binary built for tests that must run it
// as a separate process.
var cliBin struct {
	once sync.Once
	path string
	err  error
}

// builtCLI builds ompd-inspect once per test binary and returns its path.
func builtCLI(t testing.TB) string {
	t.Helper()
	cliBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "ompd-inspect-test")
		if err != nil {
			cliBin.err = err
			return
		}
		cliBin.path = filepath.Join(dir, "ompd-inspect")
		if out, err := exec.Command("go", "build", "-o", cliBin.path, ".").CombinedOutput(); err != nil {
			cliBin.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if cliBin.err != nil {
		t.Fatal(cliBin.err)
	}
	return cliBin.path
}

// reportOfProcess runs the built ompd-inspect as a separate process, as a
// user does (the tracer is then not the target's parent), and decodes its
// JSON report.
func reportOfProcess(t *testing.T, args ...string) *inspect.Report {
	t.Helper()
	out, err := exec.Command(builtCLI(t), append(args, "--json")...).Output()
	if err != nil {
		t.Fatalf("ompd-inspect %s: %v", strings.Join(args, " "), err)
	}
	var r inspect.Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("ompd-inspect %s: bad JSON: %v", strings.Join(args, " "), err)
	}
	return &r
}
