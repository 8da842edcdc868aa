package unwind

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/target/core"
	"github.com/ompd-inspect/ompd-inspect/target/ptrace"
)

// sharedDir holds files shared by the tests of the test binary (see
// makeTempDir).
var sharedDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "unwind-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "unwind:", err)
		os.Exit(2)
	}
	sharedDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	if kids := fixture.Children(os.Getpid()); len(kids) > 0 {
		fmt.Fprintf(os.Stderr, "unwind: processes left behind by the tests: %v\n", kids)
		code = 1
	}
	os.Exit(code)
}

// The fixtures whose every thread is compared with gdb.
var gdbFixtures = []string{"nested", "tasks", "barrier", "lock", "icvs", "demo", "crash", "waits"}

// stopPollTries and stopPollInterval bound waiting for a job-control stop.
const (
	stopPollTries    = 10000
	stopPollInterval = time.Millisecond
)

// taskState returns the state letter of thread tid of pid.
func taskState(pid, tid int) (byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	end := strings.LastIndexByte(s, ')')
	if end < 0 || end+2 >= len(s) {
		return 0, fmt.Errorf("/proc/%d/task/%d/stat: malformed", pid, tid)
	}
	return s[end+2], nil
}

// jobStop stops process p with SIGSTOP and waits until every thread is in
// the job-control stop, so that its registers stay put while both we and
// gdb look at it. It registers a SIGCONT at cleanup.
func jobStop(t *testing.T, p *fixture.Process) {
	t.Helper()
	if err := syscall.Kill(p.PID, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %d: %v", p.PID, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(p.PID, syscall.SIGCONT) })
	for range stopPollTries {
		all := true
		for _, tid := range p.ThreadIDs(t) {
			st, err := taskState(p.PID, tid)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if st != 'T' && st != 't' {
				all = false
				break
			}
		}
		if all {
			return
		}
		time.Sleep(stopPollInterval)
	}
	t.Fatalf("%s (pid %d): threads did not all stop after SIGSTOP", p.Name, p.PID)
}

// liveVsGDB holds process p in a job-control stop, attaches, unwinds
// every thread and detaches, then compares with gdb attached to the still
// stopped process, and lets it run again. It returns our stacks.
func liveVsGDB(t *testing.T, p *fixture.Process) map[int]ourStack {
	t.Helper()
	jobStop(t, p)
	tg, err := ptrace.Attach(p.PID, ptrace.Options{})
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	ours := unwindAll(t, tg)
	if err := tg.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	gdb, out := runGDB(t, "-p", strconv.Itoa(p.PID))
	compareWithGDB(t, p.Name+" live", ours, gdb, out)
	if err := syscall.Kill(p.PID, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	return ours
}

// gcoreVsGDB writes a core of p with gcore, unwinds every thread from it
// and compares with gdb reading the same core with executable exe.
func gcoreVsGDB(t *testing.T, p *fixture.Process, exe string) map[int]ourStack {
	t.Helper()
	path := p.Gcore(t)
	return coreVsGDB(t, p.Name+" gcore", path, exe, nil)
}

// kernelVsGDB has the kernel write a core of program name (see
// fixture.KernelCore), unwinds every thread from it and compares with gdb.
// It returns our stacks and the thread that aborted.
func kernelVsGDB(t *testing.T, name string, opts fixture.StartOptions, exe string) (map[int]ourStack, int) {
	t.Helper()
	path, _ := fixture.KernelCore(t, name, opts)
	crash := 0
	ours := coreVsGDB(t, name+" kernel core", path, exe, &crash)
	return ours, crash
}

func coreVsGDB(t *testing.T, what, path, exe string, crash *int) map[int]ourStack {
	t.Helper()
	c, err := core.Open(path, core.Options{})
	if err != nil {
		t.Fatalf("core.Open: %v", err)
	}
	defer c.Close()
	if crash != nil {
		*crash = c.CrashTID()
	}
	ours := unwindAll(t, c)
	gdb, out := runGDB(t, exe, path)
	compareWithGDB(t, what, ours, gdb, out)
	return ours
}

// wantRun asserts that the stack holds the functions names on consecutive
// frames, found by the methods hows.
func wantRun(t *testing.T, what string, s ourStack, names []string, hows []Method) {
	t.Helper()
	i := slices.Index(s.names, names[0])
	if i < 0 || i+len(names) > len(s.names) {
		t.Errorf("%s: want frames %v, got\n%s", what, names, s)
		return
	}
	for j := range names {
		if s.names[i+j] != names[j] || s.frames[i+j].How != hows[j] {
			t.Errorf("%s: want frames %v found by %v from #%d, got\n%s", what, names, hows, i, s)
			return
		}
	}
}

// TestFixturesMatchGDB compares, for every thread of each OpenMP fixture,
// our frames with gdb's machine frames (function, pc, rsp, rbp): live (the
// process is held in a job-control stop so that both see the same
// registers), from a gcore core and from a kernel core, whose aborting
// thread must show the fixture's function that called abort().
func TestFixturesMatchGDB(t *testing.T) {
	for _, name := range gdbFixtures {
		t.Run(name, func(t *testing.T) {
			opts := fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}}
			p := fixture.Start(t, name, opts)
			t.Run("live", func(t *testing.T) { liveVsGDB(t, p) })
			t.Run("gcore", func(t *testing.T) { gcoreVsGDB(t, p, fixture.Exe(t, name)) })
			t.Run("kernel", func(t *testing.T) {
				ours, crash := kernelVsGDB(t, name, opts, fixture.Exe(t, name))
				s := ours[crash]
				// glibc's abort() raises SIGABRT through pthread_kill;
				// every frame up to the caller has CFI.
				if !slices.Contains(s.names, "abort") || !slices.Contains(s.names, abortCaller[name]) {
					t.Errorf("the aborting thread %d does not show abort called by %s:\n%s", crash, abortCaller[name], s)
				}
			})
		})
	}
}

// abortCaller is the function of each fixture that calls abort() in abort
// mode (at LINE:abort).
var abortCaller = map[string]string{
	"nested":  "innermost_work",
	"tasks":   "producer_wait",
	"barrier": "stuck_worker",
	"lock":    "hold_lock",
	"icvs":    "icv_wait",
	"demo":    "solve",
	"crash":   "explode",
	"waits":   "main",
}

// TestStrippedRuntimeMatchesGDB compares the fixtures linked against
// Debian's stripped libomp (only .eh_frame and dynamic symbols) with gdb,
// from gcore cores.
func TestStrippedRuntimeMatchesGDB(t *testing.T) {
	for _, name := range gdbFixtures {
		t.Run(name, func(t *testing.T) {
			p := fixture.Start(t, name, fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}, Stripped: true})
			gcoreVsGDB(t, p, fixture.StrippedExe(t, name))
		})
	}
}

// continueProcess ends the job-control stop of p.
func continueProcess(t *testing.T, p *fixture.Process) {
	t.Helper()
	if err := syscall.Kill(p.PID, syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT %d: %v", p.PID, err)
	}
}
