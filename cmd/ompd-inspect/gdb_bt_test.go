package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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

// These tests compare the backtrace of every thread of every fixture
// program, as `ompd-inspect bt --all-frames --no-continue` prints it, with
// gdb's `thread apply all bt` of the same stop: live (the process held in a
// job-control stop while first ompd-inspect and then gdb look at it) and
// from a gcore core.
//
// ompd-inspect's frames with a pc of their own are its frames that are not
// inlined into the next one: physical frames and tail call frames. gdb
// prints two kinds of frames that are no physical frame: a function inlined
// into another (an inline frame, with the pc of the frame it is inlined
// into), and a tail call it rebuilds from DWARF call-site information
// (DW_TAG_call_site with DW_AT_call_tail_call): the function that jumped to
// the next one, shown at the address right after its jump, which no stack
// slot holds. glibc's futex wait under pthread_cond_wait is one
// (__futex_abstimed_wait_cancelable64 jumps to
// __futex_abstimed_wait_common). ompd-inspect rebuilds tail call frames
// too (json tail_call), so both must show the same ones. The text of `bt`
// does not tell these apart from physical frames, so the same gdb run lists
// every frame's type through its Python API; each frame `bt` prints with an
// address must have that pc there and belong (itself, or as inlined into it)
// to a physical frame or to a tail call frame, and each tail call frame must
// follow a jump instruction.

// gdbBTFixtures are the fixture programs whose every thread is compared:
// all that load the OpenMP runtime and hold a state after READY (plain.c
// has no runtime, so bt refuses it; late.c and trace.c run to their end).
var gdbBTFixtures = []string{"nested", "tasks", "barrier", "lock", "icvs", "demo", "busy", "crash", "wide", "waits"}

// gdbBTWaits are waits the comparison must have met: the first thread of
// a fixture's READY key has function on its stack, as gdb prints it.
var gdbBTWaits = []struct{ what, fixture, key, function string }{
	{"an explicit barrier", "barrier", "waiting", "__kmpc_barrier"},
	{"an explicit barrier, asleep", "waits", "barrier_waiter", "___pthread_cond_wait"},
	{"the implicit barrier at a region's end", "nested", "implicit_barrier", "__kmp_join_barrier"},
	{"a lock", "lock", "waiters", "__kmpc_set_lock"},
	{"a critical section", "waits", "critical_waiter", "__kmpc_critical_with_hint"},
	{"a taskwait", "demo", "chunk2", "__kmpc_omp_taskwait"},
	{"a taskwait", "crash", "crasher", "__kmpc_omp_taskwait"},
	{"idle in the thread pool", "waits", "idle", "__kmp_fork_barrier"},
	{"usleep", "waits", "sleeper", "usleep"},
	{"a signal handler", "waits", "handler", gdbSigtramp},
	{"a signal handler that interrupted the vDSO", "waits", "vdso", gdbSigtramp},
}

// gdbSigtramp is how gdb's bt names a sigreturn trampoline frame.
const gdbSigtramp = "<signal handler called>"

// gdbBTTimeout bounds one run of gdb.
const gdbBTTimeout = 5 * time.Minute

// TestBacktracesMatchGDB compares, for every thread of every fixture in
// gdbBTFixtures, live and from a gcore core, ompd-inspect's physical and
// tail call frames with gdb's (see the comment above): the same pcs in the
// same order, exactly, a tail call frame where gdb has one and nowhere
// else, named as gdb names it. It checks that the threads listed in
// gdbBTWaits were among them, that the vdso thread of waits.c has a frame
// at the pc its signal interrupted inside the vDSO, right after the
// trampoline, and that gdb shows a tail call frame on waits.c's barrier
// waiter (asleep in pthread_cond_wait), so that tail call frames are
// compared.
func TestBacktracesMatchGDB(t *testing.T) {
	script := writeGDBFramesScript(t)
	for _, name := range gdbBTFixtures {
		t.Run(name, func(t *testing.T) {
			p := fixture.Start(t, name, fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}})
			t.Run("live", func(t *testing.T) {
				pid := strconv.Itoa(p.PID)
				holdStopped(t, p)
				tids := p.ThreadIDs(t)
				ours := cliPhysicalFrames(t, "attach", pid)
				waitHeldStopped(t, p, "after ompd-inspect detached")
				gdb := gdbBacktraces(t, script, "-p", pid)
				waitHeldStopped(t, p, "after gdb detached")
				if err := syscall.Kill(p.PID, syscall.SIGCONT); err != nil {
					t.Fatalf("SIGCONT %d: %v", p.PID, err)
				}
				assertRunning(t, p)
				checkAgainstGDB(t, p, tids, ours, gdb)
			})
			t.Run("gcore", func(t *testing.T) {
				path := p.Gcore(t)
				ours := cliPhysicalFrames(t, "core", path)
				gdb := gdbBacktraces(t, script, fixture.Exe(t, name), path)
				checkAgainstGDB(t, p, nil, ours, gdb)
			})
		})
	}
}

// holdStopped stops p with SIGSTOP and waits for the kernel to report the
// group stop complete (every thread stopped) to its parent, this process:
// the threads' registers stay put until SIGCONT, which a cleanup sends
// should the test end first.
func holdStopped(t *testing.T, p *fixture.Process) {
	t.Helper()
	if err := syscall.Kill(p.PID, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP %d: %v", p.PID, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(p.PID, syscall.SIGCONT) })
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(p.PID, &ws, unix.WUNTRACED, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatalf("waiting for %s (pid %d) to stop: %v", p.Name, p.PID, err)
		}
		if ws.Stopped() && ws.StopSignal() == syscall.SIGSTOP {
			return
		}
		if ws.Exited() || ws.Signaled() {
			t.Fatalf("%s (pid %d) ended while being stopped: %#x", p.Name, p.PID, uint32(ws))
		}
	}
}

// heldStoppedTries and heldStoppedInterval bound waitHeldStopped.
const (
	heldStoppedTries    = 10000
	heldStoppedInterval = time.Millisecond
)

// waitHeldStopped fails if a thread of p is traced, and waits until every
// thread of p is back in the job-control stop. A tracer that detaches from
// a thread in a group stop wakes it, and the kernel puts it back into the
// stop without returning to user mode; until then /proc shows it running.
func waitHeldStopped(t *testing.T, p *fixture.Process, when string) {
	t.Helper()
	for range heldStoppedTries {
		running := 0
		for _, tid := range p.ThreadIDs(t) {
			state, tracer := threadStatus(t, p.PID, tid)
			if tracer != "0" {
				t.Fatalf("%s: thread %d of %s is traced by %s", when, tid, p.Name, tracer)
			}
			if !strings.HasPrefix(state, "T") {
				running++
			}
		}
		if running == 0 {
			return
		}
		time.Sleep(heldStoppedInterval)
	}
	t.Fatalf("%s: the threads of %s (pid %d) did not all return to the job-control stop: %s", when, p.Name, p.PID, threadStates(p.PID))
}

// threadStatus returns the State and TracerPid lines of a thread's
// /proc status.
func threadStatus(t *testing.T, pid, tid int) (state, tracer string) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "State":
			state = strings.TrimSpace(v)
		case "TracerPid":
			tracer = strings.TrimSpace(v)
		}
	}
	return state, tracer
}

// ourFrame is a frame of ompd-inspect's backtrace with a pc of its own: a
// physical frame or a tail call frame.
type ourFrame struct {
	pc       uint64
	function string
	tail     bool
}

// cliPhysicalFrames runs `ompd-inspect TARGET... bt --all-frames
// --no-continue --json` and returns, by thread, its frames with a pc that
// are not inlined into the next (physical and tail call frames), innermost
// first.
func cliPhysicalFrames(t *testing.T, target ...string) map[int][]ourFrame {
	t.Helper()
	args := append(append([]string{}, target...), "bt", "--all-frames", "--no-continue", "--json")
	out, errs, code := cli(args...)
	if code != 0 {
		t.Fatalf("ompd-inspect %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	var r struct {
		Backtraces []inspect.Backtrace `json:"backtraces"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("ompd-inspect %s: bad JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
	frames := map[int][]ourFrame{}
	for _, bt := range r.Backtraces {
		if _, dup := frames[bt.OSTID]; dup {
			t.Fatalf("ompd-inspect %s: thread %d has two backtraces", strings.Join(args, " "), bt.OSTID)
		}
		pcs := []ourFrame{}
		for _, f := range bt.Frames {
			if f.PC == nil {
				continue
			}
			if f.Thread != bt.OSTID {
				t.Fatalf("thread %d: frame %+v is on thread %d with --no-continue", bt.OSTID, f, f.Thread)
			}
			if f.Inlined {
				if f.TailCall {
					t.Fatalf("thread %d: frame %+v is both inlined and a tail call", bt.OSTID, f)
				}
				continue
			}
			pc, err := strconv.ParseUint(strings.TrimPrefix(*f.PC, "0x"), 16, 64)
			if err != nil {
				t.Fatalf("thread %d: frame pc %q: %v", bt.OSTID, *f.PC, err)
			}
			pcs = append(pcs, ourFrame{pc: pc, function: f.Function, tail: f.TailCall})
		}
		frames[bt.OSTID] = pcs
	}
	return frames
}

// gdbFramesScript lists every frame of every thread through gdb's Python
// API, one line each, after an @@PY line:
//
//	@@THREAD <lwp>
//	@@FRAME <level> <type> <pc> [<hex of the 6 bytes before pc>, for a tail call frame]
//	@@STOP <why the walk ended early>
const gdbFramesScript = `import gdb

TYPES = {
    gdb.NORMAL_FRAME: "normal",
    gdb.DUMMY_FRAME: "dummy",
    gdb.INLINE_FRAME: "inline",
    gdb.TAILCALL_FRAME: "tailcall",
    gdb.SIGTRAMP_FRAME: "sigtramp",
    gdb.ARCH_FRAME: "arch",
    gdb.SENTINEL_FRAME: "sentinel",
}

print("@@PY")
inf = gdb.selected_inferior()
for th in sorted(inf.threads(), key=lambda t: t.num):
    th.switch()
    print("@@THREAD %d" % th.ptid[1])
    f = gdb.newest_frame()
    while f is not None:
        extra = ""
        if f.type() == gdb.TAILCALL_FRAME:
            try:
                extra = " " + bytes(inf.read_memory(f.pc() - 6, 6)).hex()
            except gdb.error:
                extra = " -"
        print("@@FRAME %d %s %#x%s" % (f.level(), TYPES.get(f.type(), "?"), f.pc(), extra))
        try:
            f = f.older()
        except gdb.error as e:
            print("@@STOP %s" % e)
            break
`

// writeGDBFramesScript writes gdbFramesScript into a temporary directory
// and returns its path.
func writeGDBFramesScript(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "frames.py")
	if err := os.WriteFile(path, []byte(gdbFramesScript), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// gdbBTLine is one frame line of gdb's bt.
type gdbBTLine struct {
	level    int
	addr     uint64
	hasAddr  bool   // the line shows "0x... in"
	function string // what bt names the frame
	text     string
}

// gdbPyFrame is one frame as gdb's Python API shows it.
type gdbPyFrame struct {
	level  int
	typ    string // normal, inline, tailcall, sigtramp, ...
	pc     uint64
	before []byte // a tail call frame's 6 code bytes before pc; nil if unreadable
}

// gdbThread is one thread's stack in gdb's output.
type gdbThread struct {
	bt     []gdbBTLine
	btStop string // "Backtrace stopped: ..." if bt printed it
	frames []gdbPyFrame
	pyStop string
	pySeen bool
}

func (g *gdbThread) String() string {
	var b strings.Builder
	for i, l := range g.bt {
		typ := "?"
		if i < len(g.frames) {
			typ = g.frames[i].typ
		}
		fmt.Fprintf(&b, "    %-8s %s\n", typ, l.text)
	}
	if g.btStop != "" {
		fmt.Fprintf(&b, "    %s\n", g.btStop)
	}
	return b.String()
}

var (
	gdbThreadHeader = regexp.MustCompile(`^Thread \d+ \(.*?\bLWP (\d+)\)`)
	gdbFrameLine    = regexp.MustCompile(`^#(\d+)\s+(?:0x([0-9a-f]+) in )?(.*)$`)
)

// gdbBacktraces runs gdb in batch mode on args (-p PID, or an executable
// and a core) with `thread apply all bt` and then the frames script, and
// returns the threads by LWP.
func gdbBacktraces(t *testing.T, script string, args ...string) map[int]*gdbThread {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), gdbBTTimeout)
	defer cancel()
	full := append([]string{"-nx", "-batch"}, args...)
	full = append(full,
		"-ex", "set pagination off",
		"-ex", "set width 0",
		"-ex", "set print frame-arguments none",
		"-ex", "set backtrace past-main on",
		"-ex", `echo @@BT\n`,
		"-ex", "thread apply all bt",
		"-ex", "source "+script)
	cmd := exec.CommandContext(ctx, "gdb", full...)
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("gdb %s: %v\n%s%s", strings.Join(full, " "), err, stdout.String(), stderr.String())
	}
	threads, err := parseGDBBacktraces(stdout.String())
	if err != nil {
		t.Fatalf("gdb %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(full, " "), err, stdout.String(), stderr.String())
	}
	return threads
}

// parseGDBBacktraces parses the output of gdbBacktraces' gdb run.
func parseGDBBacktraces(out string) (map[int]*gdbThread, error) {
	threads := map[int]*gdbThread{}
	var cur *gdbThread
	section := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	parseHex := func(s string) (uint64, error) { return strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64) }
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "@@BT" || line == "@@PY":
			section, cur = line, nil
		case section == "@@BT":
			if m := gdbThreadHeader.FindStringSubmatch(line); m != nil {
				tid, _ := strconv.Atoi(m[1])
				if threads[tid] != nil {
					return nil, fmt.Errorf("bt shows LWP %d twice", tid)
				}
				cur = &gdbThread{}
				threads[tid] = cur
				continue
			}
			if cur == nil {
				continue
			}
			if strings.HasPrefix(line, "Backtrace stopped:") {
				cur.btStop = line
				continue
			}
			m := gdbFrameLine.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			l := gdbBTLine{text: line, function: m[3]}
			l.level, _ = strconv.Atoi(m[1])
			if m[2] != "" {
				v, err := parseHex(m[2])
				if err != nil {
					return nil, fmt.Errorf("bt line %q: %v", line, err)
				}
				l.addr, l.hasAddr = v, true
			}
			if !strings.HasPrefix(l.function, gdbSigtramp) {
				if i := strings.Index(l.function, " ("); i >= 0 {
					l.function = l.function[:i]
				}
			}
			cur.bt = append(cur.bt, l)
		case section == "@@PY" && strings.HasPrefix(line, "@@THREAD "):
			tid, err := strconv.Atoi(strings.TrimPrefix(line, "@@THREAD "))
			if err != nil {
				return nil, fmt.Errorf("%q: %v", line, err)
			}
			cur = threads[tid]
			if cur == nil {
				return nil, fmt.Errorf("the Python API lists LWP %d, which bt did not show", tid)
			}
			if cur.pySeen {
				return nil, fmt.Errorf("the Python API lists LWP %d twice", tid)
			}
			cur.pySeen = true
		case section == "@@PY" && strings.HasPrefix(line, "@@FRAME "):
			f := strings.Fields(strings.TrimPrefix(line, "@@FRAME "))
			if cur == nil || len(f) < 3 || len(f) > 4 {
				return nil, fmt.Errorf("cannot parse %q", line)
			}
			var fr gdbPyFrame
			var err error
			if fr.level, err = strconv.Atoi(f[0]); err != nil {
				return nil, fmt.Errorf("%q: %v", line, err)
			}
			fr.typ = f[1]
			if fr.pc, err = parseHex(f[2]); err != nil {
				return nil, fmt.Errorf("%q: %v", line, err)
			}
			if len(f) == 4 && f[3] != "-" {
				b, err := hex.DecodeString(f[3])
				if err != nil || len(b) != 6 {
					return nil, fmt.Errorf("%q: bad code bytes", line)
				}
				fr.before = b
			}
			cur.frames = append(cur.frames, fr)
		case section == "@@PY" && strings.HasPrefix(line, "@@STOP "):
			if cur == nil {
				return nil, fmt.Errorf("%q outside a thread", line)
			}
			cur.pyStop = strings.TrimPrefix(line, "@@STOP ")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(threads) == 0 {
		return nil, errors.New("no thread in bt's output")
	}
	for tid, g := range threads {
		if !g.pySeen {
			return nil, fmt.Errorf("bt shows LWP %d, which the Python API did not list", tid)
		}
	}
	return threads, nil
}

// jumpEndsAt reports whether the 6 code bytes before an address end with
// a jump instruction: jmp rel32 or rel8, a conditional jump rel32 or
// rel8, jmp *%reg, or jmp *disp32(%rip).
func jumpEndsAt(b []byte) bool {
	if len(b) != 6 {
		return false
	}
	switch {
	case b[1] == 0xe9, // jmp rel32
		b[4] == 0xeb,                      // jmp rel8
		b[0] == 0x0f && b[1]&0xf0 == 0x80, // jcc rel32
		b[4]&0xf0 == 0x70,                 // jcc rel8
		b[4] == 0xff && b[5]&0xf8 == 0xe0, // jmp *%reg
		b[0] == 0xff && b[1] == 0x25:      // jmp *disp32(%rip)
		return true
	}
	return false
}

// physical returns gdb's frames with a pc of their own: physical frames
// (normal and sigtramp) and tail call frames, innermost first, with the
// names bt gives them, and how many of them are tail call frames, after
// checking that its bt text and its Python listing describe the same
// frames: every frame bt prints with an address has that pc and is, or is
// inlined into, a physical or a tail call frame; every tail call frame
// follows a jump.
func (g *gdbThread) physical() ([]ourFrame, int, error) {
	if len(g.bt) != len(g.frames) {
		return nil, 0, fmt.Errorf("bt shows %d frames, the Python API %d", len(g.bt), len(g.frames))
	}
	var pcs []ourFrame
	tail := 0
	for i, f := range g.frames {
		if f.level != i || g.bt[i].level != i {
			return nil, 0, fmt.Errorf("frame %d: levels %d (bt) and %d (Python)", i, g.bt[i].level, f.level)
		}
		switch f.typ {
		case "normal", "sigtramp":
			pcs = append(pcs, ourFrame{pc: f.pc, function: g.bt[i].function})
		case "tailcall":
			tail++
			if !jumpEndsAt(f.before) {
				return nil, 0, fmt.Errorf("frame %d: a tail call frame at %#x whose code before is % x, no jump", i, f.pc, f.before)
			}
			pcs = append(pcs, ourFrame{pc: f.pc, function: g.bt[i].function, tail: true})
		case "inline":
		default:
			return nil, 0, fmt.Errorf("frame %d: unexpected frame type %s", i, f.typ)
		}
		l := g.bt[i]
		if !l.hasAddr {
			continue
		}
		if l.addr != f.pc {
			return nil, 0, fmt.Errorf("frame %d: bt prints %#x, the Python API says pc %#x", i, l.addr, f.pc)
		}
		owner := i
		for owner < len(g.frames) && g.frames[owner].typ == "inline" {
			owner++
		}
		if owner == len(g.frames) {
			return nil, 0, fmt.Errorf("frame %d: inlined into no frame", i)
		}
		if g.frames[owner].pc != l.addr {
			return nil, 0, fmt.Errorf("frame %d at %#x is inlined into frame %d at %#x", i, l.addr, owner, g.frames[owner].pc)
		}
	}
	return pcs, tail, nil
}

// hasFunction reports whether bt names a frame of the thread function.
func (g *gdbThread) hasFunction(function string) bool {
	return slices.ContainsFunc(g.bt, func(l gdbBTLine) bool { return l.function == function })
}

// checkAgainstGDB compares ours with gdb's threads for fixture p (tids, if
// not nil, are the threads the process had) and checks the waits of
// gdbBTWaits and the vDSO and tail call frames of waits.c.
func checkAgainstGDB(t *testing.T, p *fixture.Process, tids []int, ours map[int][]ourFrame, gdb map[int]*gdbThread) {
	t.Helper()
	var gdbTIDs, ourTIDs []int
	for tid := range gdb {
		gdbTIDs = append(gdbTIDs, tid)
	}
	for tid := range ours {
		ourTIDs = append(ourTIDs, tid)
	}
	sort.Ints(gdbTIDs)
	sort.Ints(ourTIDs)
	if !slices.Equal(gdbTIDs, ourTIDs) {
		t.Errorf("threads: gdb %v, ompd-inspect %v", gdbTIDs, ourTIDs)
	}
	if tids != nil {
		tids = slices.Sorted(slices.Values(tids))
		if !slices.Equal(tids, gdbTIDs) {
			t.Errorf("threads: /proc %v, gdb %v", tids, gdbTIDs)
		}
	}
	frames, tails := 0, 0
	for _, tid := range gdbTIDs {
		g := gdb[tid]
		want, tail, err := g.physical()
		if err != nil {
			t.Errorf("thread %d: gdb: %v\n%s", tid, err, g)
			continue
		}
		if g.pyStop != "" || g.btStop != "" {
			t.Errorf("thread %d: gdb's walk ended early: %q %q\n%s", tid, g.pyStop, g.btStop, g)
		}
		frames += len(want)
		tails += tail
		got, ok := ours[tid]
		if !ok {
			continue
		}
		if !sameFrames(got, want) {
			t.Errorf("thread %d: ompd-inspect's physical and tail call frames differ from gdb's\nompd-inspect: %s\ngdb:          %s\ngdb's bt:\n%s",
				tid, frameList(got), frameList(want), g)
		}
	}
	t.Logf("%s: %d threads, %d frames compared, %d of them tail call frames", p.Name, len(gdbTIDs), frames, tails)

	threadOf := func(key string) *gdbThread {
		t.Helper()
		tid := p.Ready.Ints(t, key)[0]
		g := gdb[tid]
		if g == nil {
			t.Fatalf("READY %s=%d: gdb shows no such thread", key, tid)
		}
		return g
	}
	for _, w := range gdbBTWaits {
		if w.fixture != p.Name {
			continue
		}
		if g := threadOf(w.key); !g.hasFunction(w.function) {
			t.Errorf("%s: thread %s has no %s frame; gdb:\n%s", w.what, w.key, w.function, g)
		}
	}
	if p.Name != "waits" {
		return
	}
	// The vDSO frame, interrupted by the signal: right after the
	// trampoline.
	lo, hi, pc := p.Ready.Uint64(t, "vdso_lo"), p.Ready.Uint64(t, "vdso_hi"), p.Ready.Uint64(t, "vdso_pc")
	if pc < lo || pc >= hi {
		t.Errorf("READY vdso_pc %#x is outside the vDSO [%#x, %#x)", pc, lo, hi)
	}
	g := threadOf("vdso")
	i := slices.IndexFunc(g.frames, func(f gdbPyFrame) bool { return f.pc == pc && f.typ == "normal" })
	if i < 1 || g.frames[i-1].typ != "sigtramp" {
		t.Errorf("the vdso thread has no frame at %#x in the vDSO right after a signal trampoline; gdb:\n%s", pc, g)
	}
	// The thread asleep in pthread_cond_wait: gdb shows a tail call
	// frame, which ompd-inspect must show too (compared above).
	if _, tail, err := threadOf("barrier_waiter").physical(); err == nil && tail == 0 {
		t.Errorf("gdb shows no tail call frame on the barrier waiter, asleep in pthread_cond_wait:\n%s", threadOf("barrier_waiter"))
	}
}

// sameFrames reports whether ompd-inspect's frames (ours) are gdb's: the
// same pcs in the same order, tail call frames at the same places, and
// each tail call frame named as gdb names it.
func sameFrames(ours, gdb []ourFrame) bool {
	if len(ours) != len(gdb) {
		return false
	}
	for i, o := range ours {
		g := gdb[i]
		if o.pc != g.pc || o.tail != g.tail {
			return false
		}
		if o.tail && !sameFunction(o.function, g.function) {
			return false
		}
	}
	return true
}

// sameFunction reports whether gdb's bt names a function ours, as
// ompd-inspect names it (DW_AT_name). gdb prints a C function's
// DW_AT_linkage_name when it has one: glibc declares its internal
// functions (hidden_proto) with the asm label __GI_<name>, so that gdb
// shows __GI___futex_abstimed_wait_cancelable64 for
// __futex_abstimed_wait_cancelable64.
func sameFunction(ours, gdb string) bool {
	return ours != "" && (gdb == ours || gdb == "__GI_"+ours)
}

// frameList formats frames for messages: their pcs, a tail call frame's
// with its function.
func frameList(frames []ourFrame) string {
	s := make([]string, len(frames))
	for i, f := range frames {
		s[i] = fmt.Sprintf("%#x", f.pc)
		if f.tail {
			s[i] += fmt.Sprintf("(tail call %s)", f.function)
		}
	}
	return "[" + strings.Join(s, " ") + "]"
}
