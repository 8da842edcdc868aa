package main

// These tests check, under stress, the promises of docs/reliability.md:
// attaching to a live process never harms it. They run the busy fixture
// (testdata/busy.c), whose threads never stay in one state: they fork and
// join nested teams, go in and out of the runtime's thread pool, create
// and run tasks, and check every result; its checksums are a deterministic
// function of the iteration count, which busyChecksums recomputes.
//
//   - TestAttachCycles500 attaches, inspects and detaches 500 times in a
//     row and checks after every cycle that the target is alive and
//     untraced and that the report holds only facts true of the program.
//   - TestSignalsDuringAttach interrupts ompd-inspect with SIGINT, SIGTERM
//     and SIGKILL at pseudo-random points.
//   - TestTargetGoneWhileAttached makes the target die, exit or execute a
//     new image around and during an attach.
//
// No test asserts a duration: every wait is bounded only so that a hang
// fails the test instead of stalling it.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

const (
	// attachCycles is how many cycles TestAttachCycles500 runs.
	attachCycles = 500
	// separateEvery makes every separateEvery-th cycle run the built
	// ompd-inspect as a separate process, as a user does; the other cycles
	// run it in this process, which is also the target's parent.
	separateEvery = 5
	// summaryEvery makes every summaryEvery-th cycle ask for the summary
	// (the whole report, with stacks: the slowest view); the other cycles
	// alternate the regions and tasks views.
	summaryEvery = 25

	// signalRuns is how many runs TestSignalsDuringAttach interrupts with
	// SIGINT or SIGTERM at a random delay, tracedSignalRuns how many the
	// moment the target is seen traced, killRuns how many it kills with
	// SIGKILL in each of these two ways.
	signalRuns       = 100
	tracedSignalRuns = 20
	killRuns         = 5
	// maxSignalDelay bounds the random delay between starting ompd-inspect
	// and signalling it.
	maxSignalDelay = 50 * time.Millisecond

	// cliTimeout bounds one run of ompd-inspect. Attaching waits about
	// three seconds at most for a thread to stop and every walk is
	// bounded; a run that takes longer hangs.
	cliTimeout = 30 * time.Second
	// stateTimeout bounds waiting for a process to reach a state that the
	// test has caused (a zombie after SIGKILL, for instance).
	stateTimeout = 10 * time.Second

	// busyReportMS is the interval of busy's OK lines in these tests
	// (BUSY_REPORT_MS), short so that progress shows quickly.
	busyReportMS = "20"
)

// reliabilitySeed seeds the pseudo-random choices of the tests in this
// file; 0 takes the clock. Every test logs the seed it used.
var reliabilitySeed = flag.Uint64("reliability.seed", 0, "seed of the random delays of TestSignalsDuringAttach and TestTargetGoneWhileAttached (0: from the clock)")

// newRand returns the test's random source and logs its seed.
func newRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := *reliabilitySeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("random seed %d (rerun with: go test -run '^%s$' ./cmd/ompd-inspect -args -reliability.seed=%d)", seed, t.Name(), seed)
	return rand.New(rand.NewPCG(seed, 0x6f6d7064))
}

// randDuration returns a duration drawn uniformly from [lo, hi].
func randDuration(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// busyEnv is the environment of the busy fixture in these tests, plus
// extra.
func busyEnv(extra ...string) []string {
	return append([]string{"OMP_DEBUG=enabled", "BUSY_REPORT_MS=" + busyReportMS}, extra...)
}

// The constants of testdata/busy.c that its checksum depends on.
const (
	busyTerms = 2 * 2 * 4 * 2000 // OUTER * INNER * TASKS * SLICE
	busyMod   = 10007
	busyMul   = 7919
)

// busyChecksums recomputes the checksums busy.c prints, as it documents
// them: checksum(0) = 0, checksum(n) = checksum(n-1)*31 + S(n) in uint64,
// with S(n) the sum of (n*7919 + k*k) mod 10007 over k < busyTerms. S(n)
// depends only on n*7919 mod 10007: each residue is summed once, from how
// many k give each value of k*k mod 10007.
type busyChecksums struct {
	squares [busyMod]uint64   // squares[q]: how many k < busyTerms have k*k mod 10007 = q
	sums    map[uint64]uint64 // S by residue n*7919 mod 10007
	n, sum  uint64            // sum is checksum(n)
}

func newBusyChecksums() *busyChecksums {
	c := &busyChecksums{sums: map[uint64]uint64{}}
	for k := uint64(0); k < busyTerms; k++ {
		c.squares[k*k%busyMod]++
	}
	return c
}

// s returns S(n).
func (c *busyChecksums) s(n uint64) uint64 {
	r := n * busyMul % busyMod
	if v, ok := c.sums[r]; ok {
		return v
	}
	var v uint64
	for q, count := range c.squares {
		v += count * ((r + uint64(q)) % busyMod)
	}
	c.sums[r] = v
	return v
}

// at returns checksum(n). Calls with growing n cost only the new
// iterations.
func (c *busyChecksums) at(n uint64) uint64 {
	if n < c.n {
		c.n, c.sum = 0, 0
	}
	for c.n < n {
		c.n++
		c.sum = c.sum*31 + c.s(c.n)
	}
	return c.sum
}

// check verifies a line "WORD <iterations> <checksum> ..." of busy's
// output (OK, DONE or EXEC) and returns its iteration count.
func (c *busyChecksums) check(t testing.TB, line string) uint64 {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 3 {
		t.Fatalf("busy: line %q is not WORD <iterations> <checksum>", line)
	}
	n, err1 := strconv.ParseUint(f[1], 10, 64)
	sum, err2 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil || n == 0 {
		t.Fatalf("busy: line %q is not WORD <iterations> <checksum>", line)
	}
	if want := c.at(n); sum != want {
		t.Fatalf("busy computed a wrong result: line %q, the checksum of %d iterations is %d", line, n, want)
	}
	return n
}

// checkBusyProgress waits for two OK lines of p from line index from on
// (two, so that the second was printed after from was taken even if the
// first had been written just before and not read yet), verifies their
// checksums and that their counts grow, and fails if busy reported a
// failed iteration.
func checkBusyProgress(t testing.TB, p *fixture.Process, sums *busyChecksums, from int) {
	t.Helper()
	i1, l1 := p.WaitLine(t, from, "OK ")
	_, l2 := p.WaitLine(t, i1+1, "OK ")
	n1, n2 := sums.check(t, l1), sums.check(t, l2)
	if n2 <= n1 {
		t.Fatalf("busy: iteration counts %d then %d do not grow", n1, n2)
	}
	if strings.Contains(p.Stderr(), "FAIL") {
		t.Fatalf("busy reported a failure: %s", p.Stderr())
	}
}

// cliProc is the built ompd-inspect running as a separate process.
type cliProc struct {
	cmd            *exec.Cmd
	stdout, stderr fixture.SyncBuffer
	done           chan struct{} // closed once the process is reaped
}

// cliEnv is ompd-inspect's environment: the test's, without the variable
// that makes it pause while attached, plus extra.
func cliEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OMPD_INSPECT_PAUSE_ATTACHED=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// startCLI starts the built ompd-inspect with args and env. A cleanup
// kills it with SIGKILL if it still runs and reaps it.
func startCLI(t testing.TB, env []string, args ...string) *cliProc {
	t.Helper()
	c := &cliProc{done: make(chan struct{})}
	c.cmd = exec.Command(builtCLI(t), args...)
	c.cmd.Env = env
	c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("starting ompd-inspect %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		c.cmd.Wait() // the status is read from cmd.ProcessState
		close(c.done)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
			return
		default:
		}
		c.cmd.Process.Kill()
		select {
		case <-c.done:
		case <-time.After(stateTimeout):
			t.Errorf("ompd-inspect (pid %d) did not die of SIGKILL within %v", c.cmd.Process.Pid, stateTimeout)
		}
	})
	return c
}

// signal sends sig to ompd-inspect unless it has exited.
func (c *cliProc) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("sending %v to ompd-inspect: %v", sig, err)
	}
}

// cliOutcome is how a run of ompd-inspect ended.
type cliOutcome struct {
	code   int            // exit code; -1 when killed by a signal
	sig    syscall.Signal // the signal that killed it, else 0
	stdout string
	stderr string
}

func (o cliOutcome) String() string {
	how := fmt.Sprintf("exit %d", o.code)
	if o.sig != 0 {
		how = "killed by " + unix.SignalName(o.sig)
	}
	out := o.stdout
	if len(out) > 300 {
		out = out[:300] + "..."
	}
	return fmt.Sprintf("%s, stderr %q, stdout %q", how, o.stderr, out)
}

// wait waits, at most cliTimeout, for ompd-inspect to end. If it does not,
// the test fails with the states of its threads and the target's; target
// is the target's pid.
func (c *cliProc) wait(t testing.TB, target int) cliOutcome {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(cliTimeout):
		t.Fatalf("ompd-inspect %s hangs: still running after %v\nompd-inspect threads: %s\ntarget threads: %s\nstderr: %q",
			strings.Join(c.cmd.Args[1:], " "), cliTimeout, threadStates(c.cmd.Process.Pid), threadStates(target), c.stderr.String())
	}
	ws := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	o := cliOutcome{code: ws.ExitStatus(), stdout: c.stdout.String(), stderr: c.stderr.String()}
	if ws.Signaled() {
		o.code, o.sig = -1, ws.Signal()
	}
	return o
}

// waitStderr waits, at most stateTimeout, until ompd-inspect's stderr
// holds want.
func (c *cliProc) waitStderr(t testing.TB, want string) {
	t.Helper()
	deadline := time.Now().Add(stateTimeout)
	for !strings.Contains(c.stderr.String(), want) {
		select {
		case <-c.done:
			t.Fatalf("ompd-inspect ended before writing %q: stderr %q, stdout %q", want, c.stderr.String(), c.stdout.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("ompd-inspect did not write %q within %v: stderr %q", want, stateTimeout, c.stderr.String())
		}
		time.Sleep(time.Millisecond)
	}
}

// waitTraced waits until process pid is traced, and reports false if c
// ended first.
func waitTraced(t testing.TB, pid int, c *cliProc) bool {
	t.Helper()
	deadline := time.Now().Add(cliTimeout)
	for tracerOfPID(pid) == 0 {
		select {
		case <-c.done:
			return false
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d was not traced within %v of starting ompd-inspect", pid, cliTimeout)
		}
		time.Sleep(50 * time.Microsecond)
	}
	return true
}

// startTraced starts ompd-inspect with args and returns it once the target
// pid is seen traced. A run that ends before the test sees it attached
// (this goroutine did not run meanwhile) must have succeeded; it is run
// again, a bounded number of times.
func startTraced(t testing.TB, pid int, args ...string) *cliProc {
	t.Helper()
	for range 20 {
		c := startCLI(t, cliEnv(), args...)
		if waitTraced(t, pid, c) {
			return c
		}
		if o := c.wait(t, pid); o.code != 0 {
			t.Fatalf("ompd-inspect %s: %v", strings.Join(args, " "), o)
		}
	}
	t.Fatalf("ompd-inspect %s was never seen attached in 20 runs", strings.Join(args, " "))
	return nil
}

// runInProcess runs ompd-inspect's command line in this process, like
// cli, and fails the test if it does not return within cliTimeout.
func runInProcess(t testing.TB, target int, args ...string) cliOutcome {
	t.Helper()
	done := make(chan cliOutcome, 1)
	go func() {
		out, errs, code := cli(args...)
		done <- cliOutcome{code: code, stdout: out, stderr: errs}
	}()
	select {
	case o := <-done:
		return o
	case <-time.After(cliTimeout):
		t.Fatalf("ompd-inspect %s (in process) hangs: no result after %v\ntarget threads: %s", strings.Join(args, " "), cliTimeout, threadStates(target))
		return cliOutcome{}
	}
}

// statusField returns a field of /proc/PID/status, "" when unreadable.
func statusField(pid int, key string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// tracerOfPID returns the TracerPid of process pid's main thread, 0 when
// untraced or gone.
func tracerOfPID(pid int) int {
	n, _ := strconv.Atoi(statusField(pid, "TracerPid"))
	return n
}

// procState returns the state letter of process pid's main thread, 0 when
// it is gone.
func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0
	}
	return s[i+2]
}

// waitZombie waits, at most stateTimeout, until process pid (a child of
// this process, not reaped) has ended.
func waitZombie(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(stateTimeout)
	for procState(pid) != 'Z' {
		if time.Now().After(deadline) {
			t.Fatalf("process %d did not end within %v: threads %s", pid, stateTimeout, threadStates(pid))
		}
		time.Sleep(time.Millisecond)
	}
}

// threadStates describes the threads of process pid, for failure messages:
// "tid:state(tracer)".
func threadStates(pid int) string {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return fmt.Sprintf("(process %d: %v)", pid, err)
	}
	var out []string
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
		state, tracer := "?", "?"
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "State:"); ok {
				state = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "TracerPid:"); ok {
				tracer = strings.TrimSpace(v)
			}
		}
		wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/wchan", pid, tid))
		out = append(out, fmt.Sprintf("%d:%s(tracer %s, wchan %s)", tid, state, tracer, wchan))
	}
	return strings.Join(out, " ")
}

// runtimeMapping returns the path of the OpenMP runtime mapped into
// process pid, from /proc/PID/maps.
func runtimeMapping(t testing.TB, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && strings.HasPrefix(filepath.Base(f[5]), "libomp") {
			return f[5]
		}
	}
	t.Fatalf("process %d maps no libomp:\n%s", pid, b)
	return ""
}

// assertTargetFine fails the test unless p is alive (not even a zombie)
// and none of its threads is stopped or traced.
func assertTargetFine(t testing.TB, p *fixture.Process, what string) {
	t.Helper()
	if d := deathOf(p.PID); d != "" {
		t.Fatalf("%s: %s%s", what, d, stderrNote(p))
	}
	if stopped := p.StoppedThreads(t); len(stopped) != 0 {
		t.Fatalf("%s: threads %v of process %d are left stopped or traced: %s", what, stopped, p.PID, threadStates(p.PID))
	}
}

func stderrNote(p *fixture.Process) string {
	if s := p.Stderr(); s != "" {
		return "; its stderr: " + s
	}
	return ""
}

// killedBy fails the test unless p, reaped, was killed by sig.
func killedBy(t testing.TB, p *fixture.Process, sig syscall.Signal) {
	t.Helper()
	p.Kill(t) // reaps; a SIGKILL to a zombie changes nothing
	ws, ok := p.Status()
	if !ok || !ws.Signaled() || ws.Signal() != sig {
		t.Errorf("process %d: wait status %#x, want killed by %v", p.PID, uint32(ws), sig)
	}
}

// poolThreadWarning is the one warning the busy fixture gives in states
// that are consistent: a thread parked in the runtime's pool has no
// current task, so its thread-scope ICVs cannot be read.
var poolThreadWarning = regexp.MustCompile(`^ICV [a-z-]+ \(thread \d+\): reading [a-z-]+: unavailable: thread at 0x[0-9a-f]+ has no current task$`)

// numbers matches what varies between two instances of one warning.
var numbers = regexp.MustCompile(`0x[0-9a-f]+|\d+`)

// warningKind sorts a warning of a report on busy: "pool" (a thread in the
// pool, a consistent state), "unwinding" (a stack walk stopped early) or
// "inconsistent" (anything else: the runtime's structures were caught
// half-updated, or read wrong).
func warningKind(w string) string {
	switch {
	case poolThreadWarning.MatchString(w):
		return "pool"
	case strings.HasPrefix(w, "unwinding: "):
		return "unwinding"
	default:
		return "inconsistent"
	}
}

// busyFacts is what every report on the busy fixture must say, whatever
// moment it catches.
type busyFacts struct {
	pid       int
	exe       string         // the executable's path
	library   string         // the runtime's path, from /proc/PID/maps
	regionLoc map[int]string // busy.c:LINE of the parallel construct, by nesting level
	taskLoc   string         // busy.c:LINE of the task construct
}

func newBusyFacts(t *testing.T, p *fixture.Process) *busyFacts {
	return &busyFacts{
		pid:       p.PID,
		exe:       fixture.Exe(t, "busy"),
		library:   runtimeMapping(t, p.PID),
		regionLoc: map[int]string{1: loc(t, "busy.c", "outer"), 2: loc(t, "busy.c", "inner")},
		taskLoc:   loc(t, "busy.c", "task"),
	}
}

// check returns what is wrong in a report of view (summary, regions or
// tasks). known holds the target's threads seen just before and just
// after the attach (busy's threads never exit).
func (f *busyFacts) check(r *inspect.Report, view string, known map[int]bool) []string {
	var bad []string
	errorf := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }

	if r.Target.Kind != "process" || r.Target.PID != f.pid || r.Target.Executable != f.exe {
		errorf("target %+v, want process %d, executable %s", r.Target, f.pid, f.exe)
	}
	if r.Runtime.Library != f.library || !r.Runtime.StateTracking || r.Runtime.Backend != "native" {
		errorf("runtime library %q, state tracking %v, backend %q; want %s, true, native",
			r.Runtime.Library, r.Runtime.StateTracking, r.Runtime.Backend, f.library)
	}

	threads := map[int]bool{}
	for _, th := range r.Threads {
		if !known[th.OSTID] {
			errorf("thread %d is not a thread of the process", th.OSTID)
		}
		if threads[th.OSTID] {
			errorf("thread %d listed twice", th.OSTID)
		}
		threads[th.OSTID] = true
	}
	if view == "summary" && !threads[f.pid] {
		errorf("the main thread %d is not listed", f.pid)
	}

	regions := map[string]inspect.Region{}
	for _, reg := range r.Regions {
		regions[reg.ID] = reg
	}
	if (view == "summary" || view == "regions") && len(r.Regions) == 0 {
		// After busy's first iteration the worker of the outer (hot) team
		// stays in it, between iterations too.
		errorf("no parallel region")
	}
	for _, reg := range r.Regions {
		switch {
		case reg.Level == 1 && reg.Parent != nil:
			errorf("region %s at level 1 has parent %s", reg.ID, *reg.Parent)
		case reg.Level == 2 && (reg.Parent == nil || regions[*reg.Parent].Level != 1):
			errorf("region %s at level 2 has parent %s, not a region at level 1", reg.ID, str(reg.Parent))
		case reg.Level != 1 && reg.Level != 2:
			errorf("region %s at level %d", reg.ID, reg.Level)
		}
		if reg.TeamSize != 2 || reg.Serialized {
			errorf("region %s: team of %d, serialized %v; busy's teams are of 2", reg.ID, reg.TeamSize, reg.Serialized)
		}
		if !sameLoc(reg.Location, f.regionLoc[reg.Level]) || reg.ConstructFunction != "parallel_sum" {
			errorf("region %s at level %d: location %q in %q, want %s in parallel_sum", reg.ID, reg.Level, reg.Location, reg.ConstructFunction, f.regionLoc[reg.Level])
		}
		// A team between its join and its next fork has no entry function
		// (libomp clears t_pkfn for debuggers).
		if reg.EntryAddr != "0x0" && !strings.HasPrefix(reg.Function, "parallel_sum.") {
			errorf("region %s: function %q at %s, want an outlined function of parallel_sum", reg.ID, reg.Function, reg.EntryAddr)
		}
		if len(reg.Threads) > reg.TeamSize {
			errorf("region %s: %d threads %v in a team of %d", reg.ID, len(reg.Threads), reg.Threads, reg.TeamSize)
		}
		seen := map[int]bool{}
		for _, tid := range reg.Threads {
			if !known[tid] || (view == "summary" && !threads[tid]) || seen[tid] {
				errorf("region %s: thread %d is not a thread of the process, not in the report, or twice", reg.ID, tid)
			}
			seen[tid] = true
		}
	}

	tasks := map[string]bool{}
	for _, k := range r.Tasks {
		if tasks[k.ID] {
			errorf("task %s listed twice", k.ID)
		}
		tasks[k.ID] = true
	}
	if (view == "summary" || view == "tasks") && len(r.Tasks) == 0 {
		errorf("no task (the initial task at least is always there)")
	}
	for _, k := range r.Tasks {
		switch k.Status {
		case "running", "suspended", "queued":
		default:
			errorf("task %s: status %q", k.ID, k.Status)
		}
		if k.Status == "running" && k.Thread == nil {
			errorf("task %s runs on no thread", k.ID)
		}
		if k.Thread != nil && (!known[*k.Thread] || (view == "summary" && !threads[*k.Thread])) {
			errorf("task %s runs on thread %d, not a thread of the process", k.ID, *k.Thread)
		}
		switch k.Kind {
		case "explicit":
			if !sameLoc(k.Location, f.taskLoc) || k.ConstructFunction != "parallel_sum" || k.Parent == nil {
				errorf("explicit task %s: location %q in %q, parent %s; want %s in parallel_sum, with a parent", k.ID, k.Location, k.ConstructFunction, str(k.Parent), f.taskLoc)
			}
		case "implicit":
			if k.Location != "" && !sameLoc(k.Location, f.regionLoc[1]) && !sameLoc(k.Location, f.regionLoc[2]) {
				errorf("implicit task %s: location %q, want none (the initial task) or a parallel construct of busy.c", k.ID, k.Location)
			}
			if k.Status == "queued" {
				errorf("implicit task %s is queued", k.ID)
			}
		default:
			errorf("task %s: kind %q", k.ID, k.Kind)
		}
	}

	for _, th := range r.Threads {
		if th.Region != nil {
			if _, ok := regions[*th.Region]; !ok {
				errorf("thread %d: region %s is not in the report", th.OSTID, *th.Region)
			}
		}
		if th.Task != nil && !tasks[*th.Task] {
			errorf("thread %d: task %s is not in the report", th.OSTID, *th.Task)
		}
	}
	return bad
}

// tidSet returns the threads of p as a set, added to into.
func tidSet(t testing.TB, p *fixture.Process, into map[int]bool) map[int]bool {
	t.Helper()
	if into == nil {
		into = map[int]bool{}
	}
	for _, tid := range p.ThreadIDs(t) {
		into[tid] = true
	}
	return into
}

// cycleStats counts what TestAttachCycles500 saw.
type cycleStats struct {
	cycles, separate          int
	views                     map[string]int
	inconsistent              int            // cycles with a warning of inconsistent state
	inconsistentSeparate      int            // of which in a separate process
	unwinding                 int            // cycles with an unwinding warning
	pool                      int            // cycles with only pool-thread warnings
	idleHotTeam               int            // cycles showing the outer team idle between iterations
	transitional              int            // cycles showing an inner team being set up or freed
	templates                 map[string]int // warnings with the numbers blanked out
	examples                  []string       // the first inconsistent warnings, in full
	maxRegions, maxTasksCount int
}

// TestAttachCycles500 attaches to the busy fixture 500 times in a row,
// reads its state and detaches; a fifth of the cycles run ompd-inspect as
// a separate process, the others in this process. After every cycle the
// target must be alive with no thread stopped or traced, ompd-inspect must
// have exited 0 with nothing on stderr, and its report must state only
// facts that hold at any moment of busy's life: the executable and
// runtime paths, thread ids that exist, teams of 2 at levels 1 and 2 of
// busy's parallel constructs, tasks of its task construct (busyFacts).
// Warnings are counted, not failed: those that are not about a pooled
// thread or a stack walk mean the runtime's structures were caught
// half-updated, and their count is logged. At the end busy must have gone
// on computing correct results.
// maxInconsistentCycles bounds the attach cycles whose report may warn of
// a half-updated structure.
const maxInconsistentCycles = 10

func TestAttachCycles500(t *testing.T) {
	builtCLI(t)
	p := fixture.Start(t, "busy", fixture.StartOptions{Env: busyEnv()})
	sums := newBusyChecksums()
	facts := newBusyFacts(t, p)
	pid := strconv.Itoa(p.PID)
	st := cycleStats{views: map[string]int{}, templates: map[string]int{}}

	start := time.Now()
	for i := range attachCycles {
		view := "regions"
		switch {
		case i%summaryEvery == summaryEvery/2:
			view = "summary"
		case i%2 == 1:
			view = "tasks"
		}
		separate := i%separateEvery == separateEvery-1
		args := []string{"attach", pid, view, "--json"}

		known := tidSet(t, p, nil)
		var o cliOutcome
		if separate {
			o = startCLI(t, cliEnv(), args...).wait(t, p.PID)
		} else {
			o = runInProcess(t, p.PID, args...)
		}
		assertTargetFine(t, p, fmt.Sprintf("cycle %d (%s, separate %v)", i, view, separate))
		tidSet(t, p, known)

		if o.code != 0 || o.stderr != "" {
			t.Fatalf("cycle %d: ompd-inspect %s (separate %v): %v", i, strings.Join(args, " "), separate, o)
		}
		var r inspect.Report
		if err := json.Unmarshal([]byte(o.stdout), &r); err != nil {
			t.Fatalf("cycle %d: bad JSON: %v\n%s", i, err, o.stdout)
		}
		if bad := facts.check(&r, view, known); len(bad) > 0 {
			t.Fatalf("cycle %d: ompd-inspect %s (separate %v) reported what cannot be:\n  %s\nwarnings: %q\nreport:\n%s",
				i, strings.Join(args, " "), separate, strings.Join(bad, "\n  "), r.Warnings, o.stdout)
		}

		st.cycles++
		st.views[view]++
		if separate {
			st.separate++
		}
		kinds := map[string]bool{}
		for _, w := range r.Warnings {
			k := warningKind(w)
			kinds[k] = true
			st.templates[k+": "+numbers.ReplaceAllString(w, "#")]++
			if k == "inconsistent" && len(st.examples) < 10 {
				st.examples = append(st.examples, fmt.Sprintf("cycle %d: %s", i, w))
			}
		}
		switch {
		case kinds["inconsistent"]:
			st.inconsistent++
			if separate {
				st.inconsistentSeparate++
			}
		case kinds["pool"] && !kinds["unwinding"]:
			st.pool++
		}
		if kinds["unwinding"] {
			st.unwinding++
		}
		// libomp clears a team's entry function (t_pkfn) when the team is
		// done and while it sets it up. The outer (hot) team's workers stay
		// in it between iterations: a consistent state. An inner team
		// without one is being set up, or has been freed while its master
		// still points to it (libomp's __kmp_join_call frees the team
		// before it moves the master back to the parent team): a
		// half-updated state, which ompd-inspect reports without a warning.
		idle, transitional := false, false
		for _, reg := range r.Regions {
			if reg.EntryAddr == "0x0" {
				idle = idle || reg.Level == 1
				transitional = transitional || reg.Level == 2
			}
		}
		if idle {
			st.idleHotTeam++
		}
		if transitional {
			st.transitional++
		}
		st.maxRegions = max(st.maxRegions, len(r.Regions))
		st.maxTasksCount = max(st.maxTasksCount, len(r.Tasks))
	}
	elapsed := time.Since(start)

	// busy went on computing: every OK line so far is right, and new ones
	// come after the last cycle.
	var last uint64
	for _, line := range p.Lines() {
		if strings.HasPrefix(line, "OK ") {
			n := sums.check(t, line)
			if n <= last {
				t.Fatalf("busy: iteration count %d after %d", n, last)
			}
			last = n
		}
	}
	checkBusyProgress(t, p, sums, len(p.Lines()))
	assertTargetFine(t, p, "after the cycles")

	t.Logf("%d cycles (%d in this process, %d as a separate process; views %v) in %v, %v a cycle",
		st.cycles, st.cycles-st.separate, st.separate, st.views, elapsed.Round(time.Millisecond), (elapsed / time.Duration(st.cycles)).Round(time.Millisecond))
	t.Logf("cycles whose report warned of inconsistent (half-updated) state: %d of %d (%d of them in a separate process)",
		st.inconsistent, st.cycles, st.inconsistentSeparate)
	t.Logf("cycles that caught an inner team being set up or freed (level 2, entry function 0x0; no warning): %d of %d", st.transitional, st.cycles)
	t.Logf("cycles that caught the outer team idle between iterations (level 1, entry function 0x0): %d; cycles with unwinding warnings: %d; with only pooled-thread warnings: %d; at most %d regions and %d tasks in one report",
		st.idleHotTeam, st.unwinding, st.pool, st.maxRegions, st.maxTasksCount)
	var tpl []string
	for k, n := range st.templates {
		tpl = append(tpl, fmt.Sprintf("%5d  %s", n, k))
	}
	sort.Sort(sort.Reverse(sort.StringSlice(tpl)))
	t.Logf("warnings seen (count, kind: text with numbers as #):\n%s", strings.Join(tpl, "\n"))
	if len(st.examples) > 0 {
		t.Logf("first inconsistent-state warnings:\n%s", strings.Join(st.examples, "\n"))
	}
	t.Logf("busy computed on correctly: %d iterations checked at the last OK line before the end", last)
	// A half-updated structure is caught rarely (0 or 1 cycle in 500 in
	// the runs measured); warnings in many cycles mean ompd-inspect
	// misreads a consistent state.
	if st.inconsistent > maxInconsistentCycles {
		t.Errorf("%d of %d cycles warned of inconsistent state; want at most %d", st.inconsistent, st.cycles, maxInconsistentCycles)
	}
}

// detachedLine and notAttachedLine are the lines ompd-inspect prints when
// SIGINT, SIGTERM or SIGHUP ends it: once it has seized a thread of
// process pid (attaching, attached, or detached and writing its output),
// or before (ptrace.InterruptedError).
func detachedLine(sig syscall.Signal, pid int) string {
	return fmt.Sprintf("ompd-inspect: %s: detached from process %d\n", unix.SignalName(sig), pid)
}

func notAttachedLine(sig syscall.Signal, pid int) string {
	return fmt.Sprintf("ompd-inspect: %s: interrupted before attaching to process %d\n", unix.SignalName(sig), pid)
}

// signalOutcome names how a run of ompd-inspect that was sent sig ended,
// or returns a description of what is wrong with it. pid is the target's;
// traced tells whether the target was seen traced just before the signal
// was sent, so that ompd-inspect had begun attaching: its handling of the
// signals was in force, from before its first ptrace request until its
// output was written.
func signalOutcome(o cliOutcome, sig syscall.Signal, pid int, traced bool) (kind string, bad string) {
	complete := func() bool {
		var r inspect.Report
		return json.Unmarshal([]byte(o.stdout), &r) == nil && r.Target.PID == pid
	}
	switch {
	case o.code == 0:
		// It finished before the signal came.
		if o.stderr != "" {
			return "", "exit 0 with something on stderr"
		}
		if !complete() {
			return "", fmt.Sprintf("exit 0 without a report on process %d", pid)
		}
		return "finished before the signal (exit 0)", ""
	case sig != unix.SIGKILL && o.code == 128+int(sig):
		switch {
		case o.stderr == detachedLine(sig, pid) && o.stdout == "":
			return fmt.Sprintf("detached and exited %d", o.code), ""
		case o.stderr == detachedLine(sig, pid):
			// Detached, and writing the report when the signal came.
			return fmt.Sprintf("detached and exited %d while writing the report", o.code), ""
		case o.stderr == notAttachedLine(sig, pid) && o.stdout == "" && !traced:
			return fmt.Sprintf("interrupted before attaching, exited %d", o.code), ""
		}
		return "", fmt.Sprintf("exit %d, want stderr %q (or %q before attaching), and nothing on stdout unless it was writing the report",
			o.code, detachedLine(sig, pid), notAttachedLine(sig, pid))
	case o.sig == sig && sig == unix.SIGKILL:
		return "killed", ""
	case o.sig == sig:
		// The signal came while its default action was in force: before
		// ompd-inspect caught it (starting up, before any ptrace request),
		// or once its output was complete. A shell reports this as
		// 128+signal too, but nothing is written on stderr.
		switch {
		case o.stderr != "":
			return "", "killed by the signal with something on stderr"
		case o.stdout == "" && traced:
			return "", "killed by the signal, without its line, while the target was traced: the signal was not handled during the attach"
		case o.stdout == "":
			return "killed by the signal before it was caught (starting up; nothing written)", ""
		case !complete():
			return "", "killed by the signal while writing its report: the signal was not handled until the output was written"
		}
		return "killed by the signal after writing its report", ""
	}
	return "", "neither exit 0, nor 128+signal with one line, nor death by the signal"
}

// TestSignalsDuringAttach interrupts separate ompd-inspect processes
// attached to (or attaching to, or reading) the busy fixture: SIGINT or
// SIGTERM at a random delay (0 to 50 ms after the start), then the moment
// the target is seen traced, then SIGKILL in both ways. Every run must
// end (bounded wait) either with exit 0 and a report (it finished first),
// or with 128+signal and exactly the one line "ompd-inspect: SIG...:
// detached from process N" ("...: interrupted before attaching to process
// N" if no thread was seized yet), or killed by the signal before
// ompd-inspect caught it, with nothing written (a shell reports 128+signal
// all the same), or after it wrote its whole report. ompd-inspect catches
// the signals before its first ptrace request, so a run signalled while
// the target was seen traced must never die of the signal: it was
// attaching (ptrace.Attach looks for the signal between threads and
// polls), attached (DetachOnSignals), or detached and writing. After
// every run no thread of the target may be stopped or traced, and it must
// be alive and going on with correct results. Last, a target whose main
// thread sleeps uninterruptibly keeps ompd-inspect attaching for seconds:
// SIGINT, SIGTERM and SIGHUP sent then must each give the exact line.
func TestSignalsDuringAttach(t *testing.T) {
	builtCLI(t)
	rng := newRand(t)
	p := fixture.Start(t, "busy", fixture.StartOptions{Env: busyEnv()})
	sums := newBusyChecksums()
	pid := strconv.Itoa(p.PID)

	type phase struct {
		name   string
		runs   int
		traced bool // signal the moment the target is traced, else after a random delay
		sig    func() syscall.Signal
	}
	intOrTerm := func() syscall.Signal {
		if rng.IntN(2) == 0 {
			return unix.SIGINT
		}
		return unix.SIGTERM
	}
	kill := func() syscall.Signal { return unix.SIGKILL }
	phases := []phase{
		{"SIGINT/SIGTERM after a random delay", signalRuns, false, intOrTerm},
		{"SIGINT/SIGTERM once the target is traced", tracedSignalRuns, true, intOrTerm},
		{"SIGKILL after a random delay", killRuns, false, kill},
		{"SIGKILL once the target is traced", killRuns, true, kill},
	}
	start := time.Now()
	for _, ph := range phases {
		counts := map[string]int{}
		sent := map[string]int{}
		tracedAtSignal := 0
		for i := range ph.runs {
			sig := ph.sig()
			delay := randDuration(rng, 0, maxSignalDelay)
			c := startCLI(t, cliEnv(), "attach", pid, "regions", "--json")
			if ph.traced {
				waitTraced(t, p.PID, c)
			} else {
				time.Sleep(delay)
			}
			traced := tracerOfPID(p.PID) != 0
			if traced {
				tracedAtSignal++
			}
			c.signal(t, sig)
			sent[unix.SignalName(sig)]++
			o := c.wait(t, p.PID)
			what := fmt.Sprintf("%s, run %d (%s", ph.name, i, unix.SignalName(sig))
			if !ph.traced {
				what += fmt.Sprintf(" after %v", delay)
			}
			what += ")"
			kind, bad := signalOutcome(o, sig, p.PID, traced)
			if bad != "" {
				t.Fatalf("%s: %s: %v", what, bad, o)
			}
			if traced {
				kind += " [target traced when signalled]"
			}
			counts[kind]++
			assertTargetFine(t, p, what)
			checkBusyProgress(t, p, sums, len(p.Lines()))
		}
		t.Logf("%s: %d runs, signals sent %v, target traced when signalled %d times; outcomes %v", ph.name, ph.runs, sent, tracedAtSignal, counts)
		// The handler must have had its say: death by the signal alone is
		// also what an ompd-inspect without one would give. Attach opens
		// and prepares the modules' files before it stops the target, so
		// a random delay mostly lands before the attach: the handler's
		// line then says so.
		handled := 0
		for kind, n := range counts {
			if strings.HasPrefix(kind, "detached and exited") || strings.HasPrefix(kind, "interrupted before attaching") {
				handled += n
			}
		}
		if !ph.traced && ph.name != "SIGKILL after a random delay" && handled == 0 {
			t.Errorf("%s: no run exited with 128+signal and its one line: %v", ph.name, counts)
		}
	}
	t.Logf("%d runs in %v", signalRuns+tracedSignalRuns+2*killRuns, time.Since(start).Round(time.Millisecond))
	signalWhileAttachWaits(t)
}

// signalWhileAttachWaits sends SIGINT, SIGTERM and SIGHUP to ompd-inspect
// while ptrace.Attach waits (for at least three seconds, its bound) for a
// thread in uninterruptible sleep to stop: each must end it with exactly
// "ompd-inspect: SIG...: detached from process N" and 128+signal, and
// leave the target untraced.
func signalWhileAttachWaits(t *testing.T) {
	// target/ptrace's vforker: its main thread waits in vfork, in
	// uninterruptible sleep, until its child is killed; it prints
	// "pid PID", the child "child PID", and "resumed" after.
	dir := t.TempDir()
	src := filepath.Join(fixture.RepoRoot(t), "target", "ptrace", "testdata", "vforker.c")
	exe := filepath.Join(dir, "vforker")
	if out, err := exec.Command("gcc", "-O1", "-Wall", "-o", exe, src).CombinedOutput(); err != nil {
		t.Fatalf("compiling vforker.c: %v\n%s", err, out)
	}
	cmd := exec.Command(exe)
	var out fixture.SyncBuffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	var child int
	t.Cleanup(func() {
		if child != 0 {
			syscall.Kill(child, unix.SIGKILL)
		}
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(stateTimeout)
	for child == 0 || procState(pid) != 'D' {
		if time.Now().After(deadline) {
			t.Fatalf("vforker did not wait in vfork: output %q, threads %s", out.String(), threadStates(pid))
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if v, ok := strings.CutPrefix(line, "child "); ok {
				child, _ = strconv.Atoi(v)
			}
		}
		time.Sleep(time.Millisecond)
	}
	for _, sig := range []syscall.Signal{unix.SIGINT, unix.SIGTERM, unix.SIGHUP} {
		c := startCLI(t, cliEnv(), "attach", strconv.Itoa(pid))
		if !waitTraced(t, pid, c) {
			t.Fatalf("ompd-inspect ended before attaching: %v", c.wait(t, pid))
		}
		c.signal(t, sig)
		o := c.wait(t, pid)
		if o.code != 128+int(sig) || o.stderr != detachedLine(sig, pid) || o.stdout != "" {
			t.Errorf("%s while attaching: %v; want exit %d, stderr %q", unix.SignalName(sig), o, 128+int(sig), detachedLine(sig, pid))
		}
		if tr := tracerOfPID(pid); tr != 0 || procState(pid) != 'D' {
			t.Fatalf("after %s: vforker traced by %d, state %c", unix.SignalName(sig), tr, procState(pid))
		}
	}
	// Released, it goes on when its child goes.
	syscall.Kill(child, unix.SIGKILL)
	deadline = time.Now().Add(stateTimeout)
	for !strings.Contains(out.String(), "resumed\n") {
		if time.Now().After(deadline) {
			t.Fatalf("vforker did not resume: output %q, threads %s", out.String(), threadStates(pid))
		}
		time.Sleep(time.Millisecond)
	}
}

// pauseLine is what ompd-inspect writes once attached when
// OMPD_INSPECT_PAUSE_ATTACHED is set (main.go, inspectProcess).
func pauseLine(pid int) string {
	return fmt.Sprintf("ompd-inspect: attached to process %d; waiting for a signal\n", pid)
}

// deadReport tells whether a report printed with exit 0 was read from a
// process that died meanwhile: the busy fixture always has a parallel
// region, and reads of a live, stopped busy never fail.
func deadReport(r *inspect.Report) bool {
	if len(r.Regions) == 0 {
		return true
	}
	for _, w := range r.Warnings {
		if strings.Contains(w, "address not mapped") || strings.Contains(w, "no such process") {
			return true
		}
	}
	return false
}

// TestTargetGoneWhileAttached makes the target go away around and during
// an attach, and checks that ompd-inspect always ends (bounded waits)
// with exit 0 and a true report, or exit 1 or 128+signal with one clear
// line, and never panics:
//
//   - killed while ompd-inspect holds it (OMPD_INSPECT_PAUSE_ATTACHED):
//     the signal to ompd-inspect then gives the exact detach line;
//   - sent SIGTERM while held: the signal is delivered on detach, and the
//     target dies of it;
//   - exited but not reaped before the attach: the exact zombie message;
//   - killed while ompd-inspect attaches or reads it: exit 1 and exactly
//     the line that it ended while being read, or, if the kill came after
//     the reading, a report with no failed read;
//   - killed right after the attach, before the report is built: the
//     exact line that it ended while being read;
//   - exiting (libomp shutting its threads down in its exit handler), and
//     executing new images, alternately from the main thread between two
//     iterations and from a worker in the middle of a parallel region,
//     while ompd-inspect attaches again and again; every image must have
//     computed right, and the last one must run on untraced. A failed run
//     must give exactly one of the lines for it: ended or zombie
//     (goneLines); executed a new program while being attached, or a new
//     image caught before its runtime is loaded or has initialized OMPD
//     (execLines).
//
// A stopped process can neither exit nor execute a new image: the last
// two cases are races, repeated with random timing, and their outcomes
// are logged.
func TestTargetGoneWhileAttached(t *testing.T) {
	builtCLI(t)
	rng := newRand(t)

	t.Run("killed_while_held", func(t *testing.T) {
		for _, sig := range []syscall.Signal{unix.SIGTERM, unix.SIGINT} {
			p := fixture.Start(t, "busy", fixture.StartOptions{Env: busyEnv()})
			c := startCLI(t, cliEnv("OMPD_INSPECT_PAUSE_ATTACHED=1"), "attach", strconv.Itoa(p.PID), "regions", "--json")
			c.waitStderr(t, pauseLine(p.PID))
			if len(p.StoppedThreads(t)) == 0 {
				t.Fatalf("process %d is not stopped while held", p.PID)
			}
			if err := syscall.Kill(p.PID, unix.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitZombie(t, p.PID)
			c.signal(t, sig)
			o := c.wait(t, p.PID)
			want := pauseLine(p.PID) + fmt.Sprintf("ompd-inspect: %s: detached from process %d\n", unix.SignalName(sig), p.PID)
			if o.code != 128+int(sig) || o.stderr != want || o.stdout != "" {
				t.Errorf("%v after the target died: %v; want exit %d, stderr %q", sig, o, 128+int(sig), want)
			}
			killedBy(t, p, unix.SIGKILL)
		}
	})

	t.Run("terminated_while_held", func(t *testing.T) {
		p := fixture.Start(t, "busy", fixture.StartOptions{Env: busyEnv()})
		c := startCLI(t, cliEnv("OMPD_INSPECT_PAUSE_ATTACHED=1"), "attach", strconv.Itoa(p.PID), "regions", "--json")
		c.waitStderr(t, pauseLine(p.PID))
		if err := syscall.Kill(p.PID, unix.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if d := deathOf(p.PID); d != "" || procState(p.PID) == 'Z' {
			t.Fatalf("process %d ended while held: %s", p.PID, d)
		}
		c.signal(t, unix.SIGINT)
		o := c.wait(t, p.PID)
		want := pauseLine(p.PID) + fmt.Sprintf("ompd-inspect: SIGINT: detached from process %d\n", p.PID)
		if o.code != 130 || o.stderr != want || o.stdout != "" {
			t.Errorf("SIGINT: %v; want exit 130, stderr %q", o, want)
		}
		waitZombie(t, p.PID)
		killedBy(t, p, unix.SIGTERM)
	})

	t.Run("exited_before_attach", func(t *testing.T) {
		p := fixture.Start(t, "busy", fixture.StartOptions{Env: busyEnv("BUSY_EXIT_MS=0")})
		_, done := p.WaitLine(t, 1, "DONE ")
		newBusyChecksums().check(t, done)
		waitZombie(t, p.PID)
		o := startCLI(t, cliEnv(), "attach", strconv.Itoa(p.PID), "regions", "--json").wait(t, p.PID)
		want := fmt.Sprintf("ompd-inspect: process %d: is a zombie (it has exited and its parent has not reaped it); there is nothing to inspect\n", p.PID)
		if o.code != 1 || o.stderr != want || o.stdout != "" {
			t.Errorf("attach to a zombie: %v; want exit 1, stderr %q", o, want)
		}
		p.Kill(t)
		if ws, _ := p.Status(); !ws.Exited() || ws.ExitStatus() != 0 {
			t.Errorf("busy: wait status %#x, want exit 0", uint32(ws))
		}
	})

	// The kill comes after a delay that sweeps, in killSweep steps, the
	// time one uninterrupted run takes from the moment the target is seen
	// traced: the kills land in every phase of attaching and reading,
	// whatever the machine's speed.
	t.Run("killed_while_read", func(t *testing.T) {
		const killSweep = 20
		p := fixture.Start(t, "busy", fixture.StartOptions{Env: busyEnv()})
		c := startTraced(t, p.PID, "attach", strconv.Itoa(p.PID), "regions", "--json")
		began := time.Now()
		if o := c.wait(t, p.PID); o.code != 0 {
			t.Fatalf("ompd-inspect on a live busy: %v", o)
		}
		window := time.Since(began) * 6 / 5
		killedBy(t, p, unix.SIGKILL)

		outcomes := newOutcomeLog()
		var dead []string
		for i := range killSweep {
			delay := time.Duration((float64(i) + rng.Float64()) * float64(window) / killSweep)
			p := fixture.Start(t, "busy", fixture.StartOptions{Env: busyEnv()})
			c := startTraced(t, p.PID, "attach", strconv.Itoa(p.PID), "regions", "--json")
			time.Sleep(delay)
			if err := syscall.Kill(p.PID, unix.SIGKILL); err != nil {
				t.Fatal(err)
			}
			o := c.wait(t, p.PID)
			what := fmt.Sprintf("run %d (SIGKILL %v after the target was seen traced)", i, delay.Round(time.Microsecond))
			switch o.code {
			case 1:
				if !slices.Contains(goneLines(p.PID), o.stderr) || o.stdout != "" {
					t.Errorf("%s: %v; want nothing on stdout and one of the lines %q", what, o, goneLines(p.PID))
				}
				outcomes.add(numbers.ReplaceAllString(strings.TrimSpace(o.stderr), "#"), "")
			case 0:
				var r inspect.Report
				switch {
				case json.Unmarshal([]byte(o.stdout), &r) != nil || o.stderr != "":
					t.Errorf("%s: exit 0 without a report: %v", what, o)
				case deadReport(&r):
					outcomes.add("exit 0, a report of the dead process", "")
					dead = append(dead, fmt.Sprintf("%s: %d regions, %d warnings, the first %q", what, len(r.Regions), len(r.Warnings), r.Warnings[:min(2, len(r.Warnings))]))
				default:
					outcomes.add("exit 0, a true report (the kill came after it)", "")
				}
			default:
				t.Errorf("%s: %v; want exit 0 or 1", what, o)
			}
			killedBy(t, p, unix.SIGKILL)
		}
		t.Logf("%d kills, spread over the %v an uninterrupted run took (+20%%) from the moment the target was traced: %v", killSweep, window.Round(time.Millisecond), outcomes)
		if len(dead) > 0 {
			t.Errorf("in %d of %d runs ompd-inspect printed a report of a process that died while it was read and exited 0; want exit 1 and one line saying the process is gone:\n%s",
				len(dead), killSweep, strings.Join(dead, "\n"))
		}
	})

	// Killed once attached, before the report is built (OMPD set-up and
	// everything after read a dead process): the exact line, in process
	// (afterAttach).
	t.Run("killed_before_setup", func(t *testing.T) {
		p := fixture.Start(t, "busy", fixture.StartOptions{Env: busyEnv()})
		afterAttach = func(pid int) {
			// This runs in runInProcess's goroutine: no t.Fatal here.
			if err := syscall.Kill(pid, unix.SIGKILL); err != nil {
				t.Errorf("kill: %v", err)
				return
			}
			deadline := time.Now().Add(stateTimeout)
			for procState(pid) != 'Z' {
				if time.Now().After(deadline) {
					t.Errorf("process %d did not end within %v of SIGKILL: threads %s", pid, stateTimeout, threadStates(pid))
					return
				}
				time.Sleep(time.Millisecond)
			}
		}
		defer func() { afterAttach = nil }()
		o := runInProcess(t, p.PID, "attach", strconv.Itoa(p.PID), "regions", "--json")
		if want := goneLines(p.PID)[0]; o.code != 1 || o.stderr != want || o.stdout != "" {
			t.Errorf("killed before the report was built: %v; want exit 1, stderr %q", o, want)
		}
		killedBy(t, p, unix.SIGKILL)
	})

	t.Run("exiting", func(t *testing.T) {
		const targets = 12
		outcomes := newOutcomeLog()
		for i := range targets {
			exitAfter := randDuration(rng, time.Millisecond, 100*time.Millisecond)
			p := fixture.Start(t, "busy", fixture.StartOptions{Env: busyEnv(fmt.Sprintf("BUSY_EXIT_MS=%d", exitAfter.Milliseconds()))})
			for run := 0; procState(p.PID) != 'Z'; run++ {
				if run == 100 {
					t.Fatalf("target %d: busy did not exit after %v: %s", i, exitAfter, threadStates(p.PID))
				}
				o := startCLI(t, cliEnv(), "attach", strconv.Itoa(p.PID), "regions", "--json").wait(t, p.PID)
				goneOutcome(t, outcomes, fmt.Sprintf("target %d (exit after %v), run %d", i, exitAfter, run), o, p.PID, goneLines(p.PID))
			}
			_, done := p.WaitLine(t, 1, "DONE ")
			newBusyChecksums().check(t, done)
			p.Kill(t)
			if ws, _ := p.Status(); !ws.Exited() || ws.ExitStatus() != 0 {
				t.Errorf("target %d: busy: wait status %#x, want exit 0%s", i, uint32(ws), stderrNote(p))
			}
		}
		t.Logf("%d targets exiting: outcomes %v", targets, outcomes)
	})

	t.Run("executing", func(t *testing.T) {
		const targets, execs = 2, 8
		outcomes := newOutcomeLog()
		for i := range targets {
			execAfter := randDuration(rng, 10*time.Millisecond, 40*time.Millisecond)
			p := fixture.Start(t, "busy", fixture.StartOptions{Env: busyEnv(fmt.Sprintf("BUSY_EXECS=%d", execs), fmt.Sprintf("BUSY_EXEC_MS=%d", execAfter.Milliseconds()))})
			what := fmt.Sprintf("target %d (executing itself %d times, every %v)", i, execs, execAfter)
			lines := execLines(p.PID)
			// lastExec returns the index of the line "EXEC n checksum 1",
			// printed by the last image that executes a new one, or -1.
			lastExec := func() int {
				for j, line := range p.Lines() {
					if f := strings.Fields(line); len(f) == 4 && f[0] == "EXEC" && f[3] == "1" {
						return j
					}
				}
				return -1
			}
			for run := 0; ; run++ {
				if run == 200 {
					t.Fatalf("%s: no EXEC ... 1 line after %d runs; output %q", what, run, p.Lines())
				}
				o := startCLI(t, cliEnv(), "attach", strconv.Itoa(p.PID), "regions", "--json").wait(t, p.PID)
				goneOutcome(t, outcomes, fmt.Sprintf("%s, run %d", what, run), o, p.PID, lines)
				if d := deathOf(p.PID); d != "" {
					t.Fatalf("%s: %s%s", what, d, stderrNote(p))
				}
				if lastExec() >= 0 {
					break
				}
			}
			// Every image ran right up to its exec, and the last one runs
			// on untraced.
			sums := newBusyChecksums()
			left := execs
			for _, line := range p.Lines() {
				if strings.HasPrefix(line, "EXEC ") {
					sums.check(t, line)
					if f := strings.Fields(line); len(f) != 4 || f[3] != strconv.Itoa(left) {
						t.Fatalf("%s: line %q, want EXEC n checksum %d", what, line, left)
					}
					left--
				}
			}
			ready, _ := p.WaitLine(t, lastExec()+1, "READY ")
			checkBusyProgress(t, p, sums, ready+1)
			assertTargetFine(t, p, what)
		}
		t.Logf("%d targets executing %d new images each: outcomes %v", targets, execs, outcomes)
	})
}

// outcomeLog counts outcomes of runs of ompd-inspect by kind, with the
// first few examples of noteworthy ones.
type outcomeLog struct {
	counts   map[string]int
	examples []string
}

func newOutcomeLog() *outcomeLog { return &outcomeLog{counts: map[string]int{}} }

// add counts one outcome of kind, and keeps example (when not "") among
// the first five.
func (l *outcomeLog) add(kind, example string) {
	l.counts[kind]++
	if example != "" && len(l.examples) < 5 {
		l.examples = append(l.examples, example)
	}
}

func (l *outcomeLog) String() string {
	var kinds []string
	for k, n := range l.counts {
		kinds = append(kinds, fmt.Sprintf("\n  %4d  %s", n, k))
	}
	sort.Strings(kinds)
	s := strings.Join(kinds, "")
	if len(l.examples) > 0 {
		s += "\n  examples:\n    " + strings.Join(l.examples, "\n    ")
	}
	return s
}

// goneLines are the lines (on stderr, with exit 1) a target process pid
// that ends while ompd-inspect attaches or reads it may give: it ended
// while being attached or read, or it was a zombie already.
func goneLines(pid int) []string {
	return []string{
		fmt.Sprintf("ompd-inspect: process %d: the process ended while it was being read (killed, or it exited); nothing is reported\n", pid),
		fmt.Sprintf("ompd-inspect: process %d: is a zombie (it has exited and its parent has not reaped it); there is nothing to inspect\n", pid),
	}
}

// execLines are the lines a busy process pid that executes new images
// may give: it executed one while ompd-inspect attached it. (Attached to
// a new image before its runtime was loaded or had initialized its OMPD
// support, ompd-inspect reports the threads, with a warning.)
func execLines(pid int) []string {
	return []string{
		fmt.Sprintf("ompd-inspect: process %d: it executed a new program (exec) while being attached; try again\n", pid),
	}
}

// goneOutcome checks a run of ompd-inspect on a target that may be going
// away or executing a new image (what names the run) and logs its
// outcome: exit 0 with a report on the target (which may warn of
// inconsistent state: the runtime may be shutting down or starting), or
// exit 1 with one of lines on stderr and nothing on stdout.
func goneOutcome(t *testing.T, log *outcomeLog, what string, o cliOutcome, pid int, lines []string) {
	t.Helper()
	switch o.code {
	case 0:
		var r inspect.Report
		if err := json.Unmarshal([]byte(o.stdout), &r); err != nil || r.Target.PID != pid || o.stderr != "" {
			t.Errorf("%s: exit 0 without a report on process %d: %v", what, pid, o)
			return
		}
		for _, w := range r.Warnings {
			if warningKind(w) == "inconsistent" {
				log.add("exit 0, a report with warnings of inconsistent state", what+": "+w)
				return
			}
		}
		log.add("exit 0, a report", "")
	case 1:
		if !slices.Contains(lines, o.stderr) || o.stdout != "" {
			t.Errorf("%s: %v; want nothing on stdout and one of the lines %q", what, o, lines)
		}
		log.add(numbers.ReplaceAllString(strings.TrimSpace(o.stderr), "#"), "")
	default:
		t.Errorf("%s: %v; want exit 0 or 1", what, o)
	}
}
