package ptrace

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ompd-inspect/ompd-inspect/target"
)

// Helper processes: the test binary re-executes itself with helperEnv set
// to attach from another process.
const (
	helperEnv    = "OMPD_PTRACE_TEST_HELPER"
	helperPIDEnv = "OMPD_PTRACE_TEST_PID"
	helperSigEnv = "OMPD_PTRACE_TEST_SIGNAL"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(m.Run())
}

// runHelper attaches to the process named by helperPIDEnv. Modes:
// "hold" prints "attached" and holds the process until standard input
// closes; "signals" does the same after DetachOnSignals; "refused" expects
// Attach to fail and prints its error. "interrupt" is "signals" with the
// signals caught (signal.Notify) before Attach and passed to it as
// Options.Interrupt, as the CLI does; "interrupt-attaching" too, and it
// sends itself the signal named by helperSigEnv right after seizing the
// main thread, waiting until the signal is in the channel: an interrupted
// Attach prints its error as the CLI does and exits with its code.
func runHelper(mode string) int {
	pid, err := strconv.Atoi(os.Getenv(helperPIDEnv))
	if err != nil {
		fmt.Println("helper: bad pid:", err)
		return 2
	}
	var opts Options
	if mode == "interrupt" || mode == "interrupt-attaching" {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP)
		opts.Interrupt = sigs
		if mode == "interrupt-attaching" {
			sig, err := strconv.Atoi(os.Getenv(helperSigEnv))
			if err != nil {
				fmt.Println("helper: bad signal:", err)
				return 2
			}
			opts.afterSeize = func(tid int) {
				if tid != pid {
					return
				}
				_ = unix.Kill(os.Getpid(), syscall.Signal(sig))
				for len(sigs) == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}
	}
	p, err := Attach(pid, opts)
	if ie := (*InterruptedError)(nil); errors.As(err, &ie) {
		fmt.Fprintf(os.Stderr, "ompd-inspect: %v\n", err)
		return ie.ExitCode()
	}
	if err != nil {
		fmt.Println("error:", err)
		if mode == "refused" {
			return 0
		}
		return 2
	}
	defer p.Close()
	switch mode {
	case "module-symbol":
		// The executable's the_global, as its module's image gives it,
		// and the warnings.
		if exe := p.Modules()[0]; exe.Image == nil {
			fmt.Println("no image")
		} else if sym, ok := exe.Image.Symbol("the_global"); ok {
			fmt.Printf("symbol %#x\n", sym.Value+exe.Bias)
		} else {
			fmt.Println("no symbol")
		}
		for _, w := range p.Warnings() {
			fmt.Println("warning:", w)
		}
		return 0
	case "hold":
	case "signals", "interrupt":
		stop := p.DetachOnSignals()
		defer stop()
	default:
		fmt.Println("helper: attached, but expected to be refused")
		return 2
	}
	fmt.Println("attached")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// lineTimeout bounds waiting for a line of output (never asserted on).
const lineTimeout = 60 * time.Second

// pollTries and pollInterval bound polling for a state change.
const (
	pollTries    = 20000
	pollInterval = time.Millisecond
)

// proc is a process started by a test; it is killed in t.Cleanup.
type proc struct {
	cmd   *exec.Cmd
	pid   int
	lines chan string
}

// next returns the next line the process printed.
func (pr *proc) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-pr.lines:
		if !ok {
			t.Fatalf("process %d closed its output", pr.pid)
		}
		return l
	case <-time.After(lineTimeout):
		t.Fatalf("process %d printed nothing", pr.pid)
	}
	return ""
}

// start starts cmd with its standard output read line by line, and kills
// it (and reaps it) in t.Cleanup.
func start(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	w.Close()
	pr := &proc{cmd: cmd, pid: cmd.Process.Pid, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			pr.lines <- sc.Text()
		}
		close(pr.lines)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		r.Close()
	})
	return pr
}

// buildC compiles testdata/NAME.c into a temporary directory.
func buildC(t *testing.T, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("gcc", "-O1", "-g", "-Wall", "-pthread", "-o", out, filepath.Join("testdata", name+".c"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compiling %s.c: %v\n%s", name, err, b)
	}
	return out
}

// threadsTarget is a running testdata/threads.c and what it printed.
type threadsTarget struct {
	*proc
	exe       string
	tids      []int // main thread first
	global    uint64
	globalVal uint64
	counter   uint64
	usr1      uint64
	region    uint64
	regionLen int
}

func startThreads(t *testing.T) *threadsTarget {
	t.Helper()
	exe := buildC(t, "threads")
	return startThreadsCmd(t, exec.Command(exe), exe)
}

// startThreadsCmd starts cmd, which runs a threads program whose path is
// exe, and reads what it printed.
func startThreadsCmd(t *testing.T, cmd *exec.Cmd, exe string) *threadsTarget {
	t.Helper()
	pr := start(t, cmd)
	tt := &threadsTarget{proc: pr, exe: exe}
	for {
		f := strings.Fields(pr.next(t))
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "tids":
			for _, s := range f[1:] {
				tt.tids = append(tt.tids, atoi(t, s))
			}
		case "global":
			tt.global = hexu(t, f[1])
			tt.globalVal = hexu(t, f[2])
		case "counter":
			tt.counter = hexu(t, f[1])
		case "usr1":
			tt.usr1 = hexu(t, f[1])
		case "region":
			tt.region = hexu(t, f[1])
			tt.regionLen = atoi(t, f[2])
		case "ready":
			return tt
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func hexu(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// expectedTIDs is the thread order Threads must return: main first, then
// ascending.
func expectedTIDs(tids []int) []int {
	rest := append([]int(nil), tids[1:]...)
	sort.Ints(rest)
	return append([]int{tids[0]}, rest...)
}

func threadTIDs(p *Process) []int {
	var tids []int
	for _, th := range p.Threads() {
		tids = append(tids, th.TID)
	}
	return tids
}

// taskStatus reads /proc/PID/task/TID/status as a map; nil when the task
// is gone.
func taskStatus(pid, tid int) map[string]string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
	if err != nil {
		return nil
	}
	m := make(map[string]string)
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

func tasks(t *testing.T, pid int) []int {
	t.Helper()
	tids, err := listTasks(pid)
	if err != nil {
		t.Fatal(err)
	}
	return tids
}

// waitAllTasks polls until every task of pid satisfies ok, and fails with
// the last offending status otherwise.
func waitAllTasks(t *testing.T, pid int, what string, ok func(st map[string]string) bool) {
	t.Helper()
	var bad string
	for range pollTries {
		bad = ""
		for _, tid := range tasks(t, pid) {
			st := taskStatus(pid, tid)
			if st != nil && !ok(st) {
				bad = fmt.Sprintf("thread %d: State %q TracerPid %s", tid, st["State"], st["TracerPid"])
				break
			}
		}
		if bad == "" {
			return
		}
		time.Sleep(pollInterval)
	}
	t.Fatalf("process %d: not %s: %s", pid, what, bad)
}

// waitRunning waits until no thread of pid is stopped or traced.
func waitRunning(t *testing.T, pid int) {
	t.Helper()
	waitAllTasks(t, pid, "running and untraced", func(st map[string]string) bool {
		s := st["State"]
		return (strings.HasPrefix(s, "R") || strings.HasPrefix(s, "S")) && st["TracerPid"] == "0"
	})
}

// waitJobStopped waits until every thread of pid is stopped by job
// control and untraced.
func waitJobStopped(t *testing.T, pid int) {
	t.Helper()
	waitAllTasks(t, pid, "stopped and untraced", func(st map[string]string) bool {
		return st["State"] == "T (stopped)" && st["TracerPid"] == "0"
	})
}

// checkNoPendingSignals asserts that no signal is pending for pid or any
// of its threads (a stray SIGSTOP would show here).
func checkNoPendingSignals(t *testing.T, pid int) {
	t.Helper()
	for _, tid := range tasks(t, pid) {
		st := taskStatus(pid, tid)
		if st == nil {
			continue
		}
		if st["SigPnd"] != "0000000000000000" || st["ShdPnd"] != "0000000000000000" {
			t.Fatalf("thread %d: pending signals SigPnd %s ShdPnd %s", tid, st["SigPnd"], st["ShdPnd"])
		}
	}
}

// checkStoppedByUs asserts that every thread of pid is in a tracing stop
// under this test process.
func checkStoppedByUs(t *testing.T, pid int) {
	t.Helper()
	for _, tid := range tasks(t, pid) {
		st := taskStatus(pid, tid)
		if st == nil {
			continue
		}
		tracer := atoi(t, st["TracerPid"])
		if st["State"] != "t (tracing stop)" || tracer == 0 {
			t.Fatalf("thread %d: State %q TracerPid %d, want a tracing stop", tid, st["State"], tracer)
		}
		if tpid, _ := tracerOf(tracer); tpid != os.Getpid() {
			t.Fatalf("thread %d: traced by process %d, want %d", tid, tpid, os.Getpid())
		}
	}
}

// readMemFile reads 8 bytes at addr through /proc/PID/mem, independently
// of the package.
func readMemFile(t *testing.T, pid int, addr uint64) uint64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [8]byte
	if _, err := f.ReadAt(b[:], int64(addr)); err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint64(b[:])
}

// waitCounterAbove waits until the counter at addr exceeds prev and
// returns it.
func waitCounterAbove(t *testing.T, pid int, addr, prev uint64) uint64 {
	t.Helper()
	var v uint64
	for range pollTries {
		if v = readMemFile(t, pid, addr); v > prev {
			return v
		}
		time.Sleep(pollInterval)
	}
	t.Fatalf("process %d: counter stayed at %d (was %d): the process does not run", pid, v, prev)
	return 0
}

// attach attaches and closes in t.Cleanup.
func attach(t *testing.T, pid int, opts Options) *Process {
	t.Helper()
	p, err := Attach(pid, opts)
	if err != nil {
		t.Fatalf("Attach(%d): %v", pid, err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// checkThreads asserts the thread list and the registers of a threads
// target.
func checkThreads(t *testing.T, p *Process, tt *threadsTarget) {
	t.Helper()
	if got, want := threadTIDs(p), expectedTIDs(tt.tids); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("threads %v, want %v", got, want)
	}
	seen := make(map[uint64]int)
	for _, th := range p.Threads() {
		if th.Regs.FSBase == 0 || th.Regs.Rip == 0 || th.Regs.Rsp == 0 {
			t.Fatalf("thread %d: fs_base %#x rip %#x rsp %#x, want all nonzero", th.TID, th.Regs.FSBase, th.Regs.Rip, th.Regs.Rsp)
		}
		if other, dup := seen[th.Regs.FSBase]; dup {
			t.Fatalf("threads %d and %d share fs_base %#x", other, th.TID, th.Regs.FSBase)
		}
		seen[th.Regs.FSBase] = th.TID
		if th.ThreadPointer() != th.Regs.FSBase || th.Signal != 0 {
			t.Fatalf("thread %d: ThreadPointer %#x Signal %d", th.TID, th.ThreadPointer(), th.Signal)
		}
	}
	got, err := target.ReadUint64(p, tt.global)
	if err != nil || got != tt.globalVal {
		t.Fatalf("the_global at %#x: %#x, %v; want %#x", tt.global, got, err, tt.globalVal)
	}
}

// mapsRange returns the lowest start and highest end of path's mappings in
// /proc/PID/maps.
func mapsRange(t *testing.T, pid int, path string) (start, end uint64) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	start = ^uint64(0)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[5] != path {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start = min(start, hexu(t, lo))
		end = max(end, hexu(t, hi))
	}
	if end == 0 {
		t.Fatalf("%s is not mapped in process %d", path, pid)
	}
	return start, end
}

func TestAttachThreads(t *testing.T) {
	tt := startThreads(t)
	p := attach(t, tt.pid, Options{})

	if p.PID() != tt.pid || p.WasStopped() {
		t.Fatalf("PID %d WasStopped %v, want %d false", p.PID(), p.WasStopped(), tt.pid)
	}
	checkThreads(t, p, tt)
	checkStoppedByUs(t, tt.pid)
	if w := p.Warnings(); len(w) != 0 {
		t.Fatalf("warnings %q, want none", w)
	}
	// Once every thread was held, the process's thread count said so: the
	// task list was read once.
	if p.listings != 1 {
		t.Errorf("the task list was read %d times, want once", p.listings)
	}

	// One read of a cold page is one fetch.
	if lookups, fetches := p.cache.Stats(); lookups != 1 || fetches != 1 {
		t.Fatalf("cache stats after one read: %d lookups %d fetches, want 1 1", lookups, fetches)
	}
	// The process does not run while attached.
	c1, err := target.ReadUint64(p, tt.counter)
	if err != nil {
		t.Fatal(err)
	}
	if c2 := readMemFile(t, tt.pid, tt.counter); c2 != c1 {
		t.Fatalf("counter moved while attached: %d then %d", c1, c2)
	}

	// Modules: the executable first, libc, symbols.
	exe, err := filepath.EvalSymlinks(tt.exe)
	if err != nil {
		t.Fatal(err)
	}
	mods := p.Modules()
	if len(mods) == 0 || mods[0].Name != exe || mods[0].File != exe || mods[0].Image == nil {
		t.Fatalf("first module %+v, want the executable %s", mods[0], exe)
	}
	start, end := mapsRange(t, tt.pid, exe)
	if mods[0].Start != start || mods[0].End != end || mods[0].Bias != start {
		t.Fatalf("executable at %#x-%#x bias %#x, want %#x-%#x bias %#x", mods[0].Start, mods[0].End, mods[0].Bias, start, end, start)
	}
	var libc *target.Module
	names := make(map[string]bool)
	for _, m := range mods {
		if names[m.Name] {
			t.Fatalf("module %s listed twice", m.Name)
		}
		names[m.Name] = true
		if filepath.Base(m.Name) == "libc.so.6" {
			libc = m
		}
	}
	if libc == nil || libc.Image == nil || libc.File != libc.Name {
		t.Fatalf("no usable libc.so.6 among %d modules", len(mods))
	}
	start, end = mapsRange(t, tt.pid, libc.Name)
	if libc.Start != start || libc.End != end || libc.Bias != start {
		t.Fatalf("libc at %#x-%#x bias %#x, want %#x-%#x bias %#x", libc.Start, libc.End, libc.Bias, start, end, start)
	}
	sym, err := target.LookupSymbol(p, "the_global", nil)
	if err != nil {
		t.Fatal(err)
	}
	if sym.Addr != tt.global || sym.Module != mods[0] || sym.Size != 8 {
		t.Fatalf("the_global: %#x size %d in %s, want %#x size 8 in the executable", sym.Addr, sym.Size, sym.Module.Name, tt.global)
	}
	if m := target.ModuleAt(p, tt.global); m != mods[0] {
		t.Fatalf("ModuleAt(the_global) = %v, want the executable", m)
	}

	// Close leaves it running, untraced, with nothing pending.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	var b [8]byte
	err = p.ReadMemory(tt.global, b[:])
	if want := fmt.Sprintf("process %d: reading 8 bytes at %#x: detached from the process", tt.pid, tt.global); err == nil || err.Error() != want {
		t.Fatalf("ReadMemory after Close: %v, want %s", err, want)
	}
	waitRunning(t, tt.pid)
	checkNoPendingSignals(t, tt.pid)
	waitCounterAbove(t, tt.pid, tt.counter, c1)
}

func TestReadMemory(t *testing.T) {
	tt := startThreads(t)
	for _, viaFile := range []bool{false, true} {
		t.Run(fmt.Sprintf("viaFile=%v", viaFile), func(t *testing.T) {
			p := attach(t, tt.pid, Options{})
			p.mem.useFile.Store(viaFile)
			want := make([]byte, tt.regionLen)
			for i := range want {
				want[i] = byte(i*7 + 3)
			}

			// A run longer than one process_vm_readv call takes.
			buf := make([]byte, tt.regionLen)
			n, err := p.ReadPages(tt.region, buf)
			if err != nil || n != len(buf) || string(buf) != string(want) {
				t.Fatalf("ReadPages(region): %d, %v; content equal: %v", n, err, string(buf) == string(want))
			}
			// Unaligned, through the cache.
			small := make([]byte, 10)
			if err := p.ReadMemory(tt.region+4090, small); err != nil || string(small) != string(want[4090:4100]) {
				t.Fatalf("ReadMemory(region+4090): %v % x", err, small)
			}

			// A run whose tail is unmapped returns the mapped part.
			last := tt.region + uint64(tt.regionLen) - target.PageSize
			buf = make([]byte, 2*target.PageSize)
			n, err = p.ReadPages(last, buf)
			wantErr := fmt.Sprintf("process %d: reading 8192 bytes at %#x: %#x: address not mapped", tt.pid, last, last+target.PageSize)
			if n != target.PageSize || err == nil || err.Error() != wantErr || !errors.Is(err, target.ErrUnmapped) {
				t.Fatalf("ReadPages across the end: %d, %v; want 4096, %s", n, err, wantErr)
			}
			if string(buf[:n]) != string(want[len(want)-target.PageSize:]) {
				t.Fatal("ReadPages across the end: wrong bytes")
			}
			// Nothing mapped at all.
			n, err = p.ReadPages(last+target.PageSize, buf[:16])
			if n != 0 || !errors.Is(err, target.ErrUnmapped) {
				t.Fatalf("ReadPages(unmapped): %d, %v", n, err)
			}
			err = p.ReadMemory(last+target.PageSize-4, small)
			wantErr = fmt.Sprintf("process %d: reading 10 bytes at %#x: %#x: address not mapped", tt.pid, last+target.PageSize-4, last+target.PageSize)
			if err == nil || err.Error() != wantErr || !errors.Is(err, target.ErrUnmapped) {
				t.Fatalf("ReadMemory across the end: %v, want %s", err, wantErr)
			}
			got, err := target.ReadUint64(p, tt.global)
			if err != nil || got != tt.globalVal {
				t.Fatalf("the_global: %#x, %v", got, err)
			}
			if p.mem.useFile.Load() != viaFile {
				t.Fatalf("useFile changed to %v", p.mem.useFile.Load())
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			waitRunning(t, tt.pid)
		})
	}
}

// TestReadPageList: a list of scattered pages of the fixture's region is
// read in one call in the order asked; a page past the region's end stops
// the list there; with /proc/PID/mem lists are not read. Prefetch keeps
// what it read: the cache then serves those pages without a fetch.
func TestReadPageList(t *testing.T) {
	tt := startThreads(t)
	p := attach(t, tt.pid, Options{})
	defer p.Close()
	want := make([]byte, tt.regionLen)
	for i := range want {
		want[i] = byte(i*7 + 3)
	}
	pages := tt.regionLen / target.PageSize
	if pages < 4 {
		t.Fatalf("the region has %d pages; want at least 4", pages)
	}
	page := func(i int) uint64 { return tt.region + uint64(i)*target.PageSize }
	end := tt.region + uint64(tt.regionLen)
	addrs := []uint64{page(3), page(0), page(2), end, page(1)}
	buf := make([]byte, len(addrs)*target.PageSize)
	n, err := p.ReadPageList(addrs, buf)
	if n != 3 || err != nil {
		t.Fatalf("ReadPageList: %d, %v; want the 3 pages before the region's end", n, err)
	}
	for k, i := range []int{3, 0, 2} {
		if string(buf[k*target.PageSize:(k+1)*target.PageSize]) != string(want[i*target.PageSize:(i+1)*target.PageSize]) {
			t.Fatalf("slot %d: not page %d of the region", k, i)
		}
	}
	if n, err := p.ReadPageList([]uint64{end}, buf); n != 0 || err != nil {
		t.Fatalf("ReadPageList of an unmapped page: %d, %v", n, err)
	}

	_, before := p.cache.Stats()
	p.Prefetch([]uint64{page(1) + 5, page(3), end})
	_, after := p.cache.Stats()
	if after != before+1 {
		t.Fatalf("Prefetch made %d fetches; want 1 (one list, whose last page is unmapped)", after-before)
	}
	small := make([]byte, 8)
	if err := p.ReadMemory(page(3)+8, small); err != nil || string(small) != string(want[3*target.PageSize+8:3*target.PageSize+16]) {
		t.Fatalf("prefetched page: %v", err)
	}
	if _, now := p.cache.Stats(); now != after {
		t.Fatalf("reading a prefetched page fetched %d times", now-after)
	}

	long := make([]uint64, maxIovecs+1)
	for i := range long {
		long[i] = page(0)
	}
	if n, err := p.ReadPageList(long, make([]byte, len(long)*target.PageSize)); n != 0 || err == nil {
		t.Fatalf("ReadPageList of %d pages: %d, %v; want an error", len(long), n, err)
	}

	p.mem.useFile.Store(true)
	if n, err := p.ReadPageList(addrs, buf); n != 0 || !errors.Is(err, target.ErrNoPageList) {
		t.Fatalf("ReadPageList through /proc/PID/mem: %d, %v", n, err)
	}
}

func TestStoppedProcessStaysStopped(t *testing.T) {
	tt := startThreads(t)
	if err := unix.Kill(tt.pid, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Kill(tt.pid, unix.SIGCONT) })
	waitJobStopped(t, tt.pid)
	c1 := readMemFile(t, tt.pid, tt.counter)

	p := attach(t, tt.pid, Options{})
	if !p.WasStopped() {
		t.Fatal("WasStopped false for a stopped process")
	}
	checkThreads(t, p, tt)
	checkStoppedByUs(t, tt.pid)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	waitJobStopped(t, tt.pid)
	checkNoPendingSignals(t, tt.pid)
	if c2 := readMemFile(t, tt.pid, tt.counter); c2 != c1 {
		t.Fatalf("counter moved while stopped: %d then %d", c1, c2)
	}

	if err := unix.Kill(tt.pid, unix.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, tt.pid)
	checkNoPendingSignals(t, tt.pid)
	waitCounterAbove(t, tt.pid, tt.counter, c1)
}

func TestAttachRepeatedly(t *testing.T) {
	tt := startThreads(t)
	prev := readMemFile(t, tt.pid, tt.counter)
	for i := range 50 {
		p, err := Attach(tt.pid, Options{})
		if err != nil {
			t.Fatalf("attach %d: %v", i, err)
		}
		checkThreads(t, p, tt)
		checkStoppedByUs(t, tt.pid)
		if w := p.Warnings(); len(w) != 0 {
			t.Fatalf("attach %d: warnings %q", i, w)
		}
		if err := p.Close(); err != nil {
			t.Fatalf("attach %d: Close: %v", i, err)
		}
		waitRunning(t, tt.pid)
		checkNoPendingSignals(t, tt.pid)
		prev = waitCounterAbove(t, tt.pid, tt.counter, prev)
	}
}

func TestAlreadyTraced(t *testing.T) {
	tt := startThreads(t)
	first := attach(t, tt.pid, Options{})

	comm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Attach(tt.pid, Options{})
	want := fmt.Sprintf("process %d is already traced by process %d (%s)", tt.pid, os.Getpid(), strings.TrimSpace(string(comm)))
	if err == nil || err.Error() != want {
		t.Fatalf("second Attach: %v, want %s", err, want)
	}
	var ate *AlreadyTracedError
	if !errors.As(err, &ate) || !errors.Is(err, unix.EPERM) || ate.TracerPID != os.Getpid() {
		t.Fatalf("second Attach: %#v does not unwrap to *AlreadyTracedError and EPERM", err)
	}
	// The first attachment is intact.
	checkThreads(t, first, tt)
	checkStoppedByUs(t, tt.pid)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, tt.pid)
}

func TestAttachErrors(t *testing.T) {
	pidMax, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	// Process ids stay below pid_max, so pid_max itself never exists.
	missing := atoi(t, strings.TrimSpace(string(pidMax)))
	self := os.Getpid()
	ourThread := 0
	for _, tid := range tasks(t, self) {
		if tid != self {
			ourThread = tid
			break
		}
	}
	tests := []struct {
		name string
		pid  int
		want string
	}{
		{"missing", missing, fmt.Sprintf("process %d: no such process", missing)},
		{"self", self, fmt.Sprintf("process %d: cannot attach to ompd-inspect's own process", self)},
		{"our thread", ourThread, fmt.Sprintf("process %d: cannot attach to a thread of ompd-inspect's own process", ourThread)},
		{"zero", 0, "process 0: not a valid process id"},
		{"negative", -1, "process -1: not a valid process id"},
	}
	// A thread id is not a process id.
	tt := startThreads(t)
	tests = append(tests, struct {
		name string
		pid  int
		want string
	}{"thread", tt.tids[1], fmt.Sprintf("process %d: is a thread of process %d; attach to %d instead", tt.tids[1], tt.pid, tt.pid)})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Attach(tc.pid, Options{})
			if err == nil {
				p.Close()
				t.Fatalf("Attach(%d) succeeded", tc.pid)
			}
			if err.Error() != tc.want {
				t.Fatalf("Attach(%d): %v, want %s", tc.pid, err, tc.want)
			}
		})
	}
	if _, err := Attach(missing, Options{}); !errors.Is(err, unix.ESRCH) {
		t.Fatalf("Attach(missing): %v does not wrap ESRCH", err)
	}
	waitRunning(t, tt.pid)
}

func TestZombie(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Wait() })
	pid := cmd.Process.Pid
	waitAllTasks(t, pid, "a zombie", func(st map[string]string) bool { return st["State"] == "Z (zombie)" })
	_, err := Attach(pid, Options{})
	want := fmt.Sprintf("process %d: is a zombie (it has exited and its parent has not reaped it); there is nothing to inspect", pid)
	if err == nil || err.Error() != want {
		t.Fatalf("Attach(zombie): %v, want %s", err, want)
	}
}

func TestThreadsAppearingWhileAttaching(t *testing.T) {
	exe := buildC(t, "spawner")
	pr := start(t, exec.Command(exe))
	if l := pr.next(t); l != "ready" {
		t.Fatalf("spawner printed %q", l)
	}
	warning := regexp.MustCompile(`^thread \d+ (exited while attaching|has exited); it is not listed$`)
	for i := range 20 {
		p, err := Attach(pr.pid, Options{})
		if err != nil {
			t.Fatalf("attach %d: %v", i, err)
		}
		// A failure below must not leave the threads traced: the
		// spawner could not be stopped and the test would hang.
		t.Cleanup(func() { _ = p.Close() })
		listed := make(map[int]bool)
		seen := make(map[uint64]int)
		for _, th := range p.Threads() {
			listed[th.TID] = true
			if th.Regs.FSBase == 0 || th.Regs.Rip == 0 || th.Regs.Rsp == 0 {
				t.Fatalf("attach %d: thread %d: fs_base %#x rip %#x rsp %#x", i, th.TID, th.Regs.FSBase, th.Regs.Rip, th.Regs.Rsp)
			}
			if other, dup := seen[th.Regs.FSBase]; dup {
				t.Fatalf("attach %d: threads %d and %d share fs_base %#x", i, other, th.TID, th.Regs.FSBase)
			}
			seen[th.Regs.FSBase] = th.TID
		}
		if p.Threads()[0].TID != pr.pid || len(listed) < 4 {
			t.Fatalf("attach %d: threads %v, want the main thread first and at least 4", i, threadTIDs(p))
		}
		// Every task is listed and stopped, except threads already dead.
		for _, tid := range tasks(t, pr.pid) {
			st := taskStatus(pr.pid, tid)
			switch {
			case st == nil || strings.HasPrefix(st["State"], "Z") || strings.HasPrefix(st["State"], "X"):
				if listed[tid] {
					t.Fatalf("attach %d: listed thread %d is dead", i, tid)
				}
			case !listed[tid]:
				t.Fatalf("attach %d: thread %d (State %q) is not listed", i, tid, st["State"])
			case st["State"] != "t (tracing stop)":
				t.Fatalf("attach %d: thread %d is in State %q", i, tid, st["State"])
			}
		}
		for tid := range listed {
			if taskStatus(pr.pid, tid) == nil {
				t.Fatalf("attach %d: listed thread %d does not exist", i, tid)
			}
		}
		for _, w := range p.Warnings() {
			if !warning.MatchString(w) {
				t.Fatalf("attach %d: unexpected warning %q", i, w)
			}
		}
		if err := p.Close(); err != nil {
			t.Fatalf("attach %d: Close: %v", i, err)
		}
		waitRunning(t, pr.pid)
		checkNoPendingSignals(t, pr.pid)
	}
}

// startVforker starts vforker and waits until its main thread sleeps
// uninterruptibly, waiting for its vfork child; it returns the process,
// its pid and the child's.
func startVforker(t *testing.T) (pr *proc, pid, child int) {
	t.Helper()
	pr = start(t, exec.Command(buildC(t, "vforker")))
	pid = atoi(t, strings.TrimPrefix(pr.next(t), "pid "))
	if pid != pr.pid {
		t.Fatalf("vforker says pid %d, started %d", pid, pr.pid)
	}
	child = atoi(t, strings.TrimPrefix(pr.next(t), "child "))
	t.Cleanup(func() { _ = unix.Kill(child, unix.SIGKILL) })
	waitAllTasks(t, pid, "in vfork", func(st map[string]string) bool { return st["State"] == "D (disk sleep)" })
	return pr, pid, child
}

// checkVforkerReleased checks, after an attach that did not complete,
// that vforker is untraced and, once its child goes, runs on with no
// signal pending.
func checkVforkerReleased(t *testing.T, pr *proc, pid, child int) {
	t.Helper()
	if st := taskStatus(pid, pid); st["TracerPid"] != "0" {
		t.Fatalf("after the attach: TracerPid %s", st["TracerPid"])
	}
	if err := unix.Kill(child, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if l := pr.next(t); l != "resumed" {
		t.Fatalf("vforker printed %q", l)
	}
	waitRunning(t, pid)
	checkNoPendingSignals(t, pid)
}

func TestThreadThatNeverStops(t *testing.T) {
	pr, pid, child := startVforker(t)

	// Each pause while no thread stops doubles, from firstStopPause, up to
	// StopInterval and stays there (70 tries: past the 62 doublings that
	// would overflow a pause left to grow).
	var pauses []time.Duration
	_, err := Attach(pid, Options{StopTries: 70, StopInterval: time.Millisecond, onPause: func(d time.Duration) { pauses = append(pauses, d) }})
	want := fmt.Sprintf("process %d: thread %d did not stop after 70 tries (state D (disk sleep)); detached from the process", pid, pid)
	if err == nil || err.Error() != want {
		t.Fatalf("Attach: %v, want %s", err, want)
	}
	wantPauses := []time.Duration{25 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond, 200 * time.Microsecond,
		400 * time.Microsecond, 800 * time.Microsecond}
	for len(wantPauses) < 69 {
		wantPauses = append(wantPauses, time.Millisecond)
	}
	if !slices.Equal(pauses, wantPauses) {
		t.Errorf("pauses %v, want %v", pauses, wantPauses)
	}
	// When the child goes, the parent runs on: it was left untraced and
	// nothing stops it.
	checkVforkerReleased(t, pr, pid, child)
}

func TestSignalDuringAttachIsDelivered(t *testing.T) {
	tt := startThreads(t)
	sleeper := tt.tids[3]
	var hookErr error
	opts := Options{afterSeize: func(tid int) {
		if tid != sleeper {
			return
		}
		// Make the sleeper take SIGUSR1 before the interrupt: it stops
		// in a signal-delivery-stop.
		if hookErr = unix.Tgkill(tt.pid, sleeper, unix.SIGUSR1); hookErr != nil {
			return
		}
		for range pollTries {
			if st := taskStatus(tt.pid, sleeper); st["State"] == "t (tracing stop)" {
				return
			}
			time.Sleep(pollInterval)
		}
	}}
	p := attach(t, tt.pid, opts)
	if hookErr != nil {
		t.Fatalf("sending SIGUSR1: %v", hookErr)
	}
	checkThreads(t, p, tt)
	if sig := p.tstate[sleeper].signal; sig != int(unix.SIGUSR1) {
		t.Fatalf("sleeper stopped with signal %d, want SIGUSR1", sig)
	}
	if n, err := target.ReadUint64(p, tt.usr1); err != nil || n != 0 {
		t.Fatalf("usr1_count while attached: %d, %v; want 0", n, err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, tt.pid)
	var n uint64
	for range pollTries {
		if n = readMemFile(t, tt.pid, tt.usr1); n != 0 {
			break
		}
		time.Sleep(pollInterval)
	}
	if n != 1 {
		t.Fatalf("usr1_count after Close: %d, want 1", n)
	}
	checkNoPendingSignals(t, tt.pid)
}

// startHelper runs this test binary as a helper attaching to pid; its
// standard input stays open until the test ends.
func startHelper(t *testing.T, mode string, pid int) (*proc, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperPIDEnv+"="+strconv.Itoa(pid))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	pr := start(t, cmd)
	t.Cleanup(func() { stdin.Close() })
	if l := pr.next(t); l != "attached" {
		t.Fatalf("helper printed %q (stderr %q)", l, stderr.String())
	}
	// The helper, not this process, traces the target.
	for _, tid := range tasks(t, pid) {
		st := taskStatus(pid, tid)
		if tpid, _ := tracerOf(atoi(t, st["TracerPid"])); tpid != pr.pid || st["State"] != "t (tracing stop)" {
			t.Fatalf("thread %d: State %q traced by %d, want a tracing stop under the helper %d", tid, st["State"], tpid, pr.pid)
		}
	}
	return pr, stdin
}

func TestKilledInspectorLeavesProcessRunning(t *testing.T) {
	tt := startThreads(t)
	c1 := readMemFile(t, tt.pid, tt.counter)
	helper, _ := startHelper(t, "hold", tt.pid)
	if err := helper.cmd.Process.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := helper.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != unix.SIGKILL {
		t.Fatalf("helper: %v, want killed by SIGKILL", err)
	}
	waitRunning(t, tt.pid)
	checkNoPendingSignals(t, tt.pid)
	waitCounterAbove(t, tt.pid, tt.counter, c1)
}

// TestDetachOnSignals signals a helper that holds the process after
// DetachOnSignals, with its own channel ("signals") or with the channel it
// gave Attach as Options.Interrupt ("interrupt").
func TestDetachOnSignals(t *testing.T) {
	tt := startThreads(t)
	for _, run := range []struct {
		mode string
		sig  syscall.Signal
	}{
		{"signals", unix.SIGTERM}, {"signals", unix.SIGINT}, {"signals", unix.SIGHUP},
		{"interrupt", unix.SIGTERM}, {"interrupt", unix.SIGINT}, {"interrupt", unix.SIGHUP},
	} {
		sig := run.sig
		t.Run(run.mode+"/"+unix.SignalName(sig), func(t *testing.T) {
			c1 := readMemFile(t, tt.pid, tt.counter)
			helper, _ := startHelper(t, run.mode, tt.pid)
			if err := helper.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err := helper.cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 128+int(sig) {
				t.Fatalf("helper: %v, want exit status %d", err, 128+int(sig))
			}
			want := fmt.Sprintf("ompd-inspect: %s: detached from process %d\n", unix.SignalName(sig), tt.pid)
			if got := helper.cmd.Stderr.(*strings.Builder).String(); got != want {
				t.Fatalf("helper stderr %q, want %q", got, want)
			}
			waitRunning(t, tt.pid)
			checkNoPendingSignals(t, tt.pid)
			waitCounterAbove(t, tt.pid, tt.counter, c1)
		})
	}
}

func TestDetachOnSignalsStop(t *testing.T) {
	tt := startThreads(t)
	p := attach(t, tt.pid, Options{})
	stop := p.DetachOnSignals()
	stop()
	stop()
	checkStoppedByUs(t, tt.pid)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, tt.pid)
}

// TestSeizeRetriesUnexplainedRefusal: a refusal (EPERM) that nothing in
// /proc explains, as another thread's exec makes for the old group
// leader's id, is tried again: a thread refused twice is seized the third
// time and the attach succeeds; one refused every time is reported as
// refused, after as many tries as seize makes.
func TestSeizeRetriesUnexplainedRefusal(t *testing.T) {
	tt := startThreads(t)
	tries := map[int]int{}
	refuse := func(times int) func(int) error {
		clear(tries)
		return func(tid int) error {
			tries[tid]++
			if tid == tt.pid && tries[tid] <= times {
				return unix.EPERM
			}
			return nil
		}
	}
	p := attach(t, tt.pid, Options{refuseSeize: refuse(epermRetries)})
	if tries[tt.pid] != epermRetries+1 {
		t.Errorf("the main thread was tried %d times, want %d", tries[tt.pid], epermRetries+1)
	}
	checkThreads(t, p, tt)
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	_, err := Attach(tt.pid, Options{refuseSeize: refuse(epermRetries + 1)})
	if err == nil || !errors.Is(err, unix.EPERM) || !strings.Contains(err.Error(), "attaching refused") {
		t.Fatalf("Attach with every seize of the main thread refused: %v; want attaching refused", err)
	}
	if tries[tt.pid] != epermRetries+1 {
		t.Errorf("the main thread was tried %d times, want %d", tries[tt.pid], epermRetries+1)
	}
	waitRunning(t, tt.pid)
}

func TestPermissionRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a helper as another user")
	}
	tt := startThreads(t)
	dir, bin := helperForNobody(t)
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=refused", helperPIDEnv+"="+strconv.Itoa(tt.pid))
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var hint string
	scope, err := os.ReadFile(yamaScopeFile)
	switch s := strings.TrimSpace(string(scope)); {
	case err != nil:
		hint = "there is no kernel.yama.ptrace_scope on this system, so the process probably belongs to another user, has changed its credentials or is not dumpable"
	case s == "0":
		hint = "kernel.yama.ptrace_scope is 0, so the process probably belongs to another user, has changed its credentials or is not dumpable"
	case s == "1":
		hint = "kernel.yama.ptrace_scope is 1, so only an ancestor of the process, or a process it allowed with prctl(PR_SET_PTRACER), may attach without CAP_SYS_PTRACE"
	case s == "2":
		hint = "kernel.yama.ptrace_scope is 2, so only a process with CAP_SYS_PTRACE may attach"
	default:
		t.Skipf("kernel.yama.ptrace_scope is %s", s)
	}
	want := fmt.Sprintf("error: process %d: attaching refused: operation not permitted; %s; attaching needs CAP_SYS_PTRACE (for example running as root), which ompd-inspect does not have\n", tt.pid, hint)
	if string(out) != want {
		t.Fatalf("helper printed\n%q\nwant\n%q", out, want)
	}
	waitRunning(t, tt.pid)
	checkNoPendingSignals(t, tt.pid)
}

// helperForNobody copies the test binary into a new directory that user
// nobody can enter, and returns the directory and the copy, which nobody
// can run as a helper (runHelper).
func helperForNobody(t *testing.T) (dir, bin string) {
	t.Helper()
	dir = t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin = filepath.Join(dir, "helper.test")
	copyExecutable(t, os.Args[0], bin)
	return dir, bin
}

// copyExecutable copies the file from to to, executable by anyone.
func copyExecutable(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestMainThreadExited(t *testing.T) {
	exe := buildC(t, "leaderexit")
	pr := start(t, exec.Command(exe))
	global := hexu(t, strings.TrimPrefix(pr.next(t), "global "))
	counter := hexu(t, strings.TrimPrefix(pr.next(t), "counter "))
	if l := pr.next(t); l != "ready" {
		t.Fatalf("leaderexit printed %q", l)
	}
	pid := pr.pid
	// Other threads run; only the main thread is a zombie.
	liveOrZombie := func(st map[string]string) bool {
		if st["Pid"] == strconv.Itoa(pid) {
			return st["State"] == "Z (zombie)"
		}
		s := st["State"]
		return (strings.HasPrefix(s, "R") || strings.HasPrefix(s, "S")) && st["TracerPid"] == "0"
	}
	waitAllTasks(t, pid, "running with a zombie main thread", liveOrZombie)
	var others []int
	for _, tid := range tasks(t, pid) {
		if tid != pid {
			others = append(others, tid)
		}
	}

	// Before the stop the process is read through a live thread: the
	// rehearsal sees its memory and its modules, though the main thread
	// (shown first, without registers) has exited.
	var rehearsed []target.Thread
	var rehearsalMods []string
	var rehearsalVal uint64
	var rehearsalErr error
	p := attach(t, pid, Options{RehearsalBudget: time.Minute, Rehearse: func(r *Running) {
		rehearsed = r.Threads()
		for _, m := range r.Modules() {
			rehearsalMods = append(rehearsalMods, fmt.Sprintf("%s %#x-%#x %v", m.Name, m.Start, m.End, m.Image != nil))
		}
		rehearsalVal, rehearsalErr = target.ReadUint64(r, global)
	}})
	if len(rehearsed) == 0 || rehearsed[0].TID != pid || rehearsed[0].Regs.Rsp != 0 {
		t.Fatalf("rehearsal threads %+v; want the main thread first, without registers", rehearsed)
	}
	if rehearsalErr != nil || rehearsalVal != 0x1122334455667788 {
		t.Fatalf("the_global read in the rehearsal: %#x, %v", rehearsalVal, rehearsalErr)
	}
	var mods []string
	for _, m := range p.Modules() {
		mods = append(mods, fmt.Sprintf("%s %#x-%#x %v", m.Name, m.Start, m.End, m.Image != nil))
	}
	if len(mods) == 0 || fmt.Sprint(mods) != fmt.Sprint(rehearsalMods) {
		t.Fatalf("modules in the rehearsal:\n%v\nonce stopped:\n%v", rehearsalMods, mods)
	}
	if got := threadTIDs(p); fmt.Sprint(got) != fmt.Sprint(others) {
		t.Fatalf("threads %v, want %v", got, others)
	}
	if w, want := p.Warnings(), []string{fmt.Sprintf("thread %d has exited; it is not listed", pid)}; !reflect.DeepEqual(w, want) {
		t.Fatalf("warnings %q, want %q", w, want)
	}
	if v, err := target.ReadUint64(p, global); err != nil || v != 0x1122334455667788 {
		t.Fatalf("the_global: %#x, %v", v, err)
	}
	exePath, err := filepath.EvalSymlinks(exe)
	if err != nil {
		t.Fatal(err)
	}
	if mods := p.Modules(); len(mods) == 0 || mods[0].Name != exePath {
		t.Fatalf("modules do not start with the executable %s", exePath)
	}
	if sym, err := target.LookupSymbol(p, "the_global", nil); err != nil || sym.Addr != global {
		t.Fatalf("the_global: %+v, %v; want address %#x", sym, err, global)
	}
	c1 := readMemFile(t, others[0], counter)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	waitAllTasks(t, pid, "running with a zombie main thread", liveOrZombie)
	waitCounterAbove(t, others[0], counter, c1)
}

// TestInterruptBeforeAttach: a signal already on Options.Interrupt stops
// Attach before its first request.
func TestInterruptBeforeAttach(t *testing.T) {
	tt := startThreads(t)
	sigs := make(chan os.Signal, 1)
	sigs <- unix.SIGINT
	_, err := Attach(tt.pid, Options{Interrupt: sigs})
	want := fmt.Sprintf("SIGINT: interrupted before attaching to process %d", tt.pid)
	var ie *InterruptedError
	if err == nil || err.Error() != want || !errors.As(err, &ie) || ie.ExitCode() != 130 || ie.Attached {
		t.Fatalf("Attach: %v (%#v), want %s, exit code 130", err, ie, want)
	}
	waitRunning(t, tt.pid)
}

// TestInterruptWhileSeizing: a signal that arrives after some threads are
// seized makes Attach release them and say so.
func TestInterruptWhileSeizing(t *testing.T) {
	tt := startThreads(t)
	c1 := readMemFile(t, tt.pid, tt.counter)
	sigs := make(chan os.Signal, 1)
	third := expectedTIDs(tt.tids)[2]
	_, err := Attach(tt.pid, Options{Interrupt: sigs, afterSeize: func(tid int) {
		if tid == third {
			sigs <- unix.SIGTERM
		}
	}})
	want := fmt.Sprintf("SIGTERM: detached from process %d", tt.pid)
	var ie *InterruptedError
	if err == nil || err.Error() != want || !errors.As(err, &ie) || ie.ExitCode() != 143 || ie.Signal != unix.SIGTERM {
		t.Fatalf("Attach: %v, want %s, exit code 143", err, want)
	}
	waitRunning(t, tt.pid)
	checkNoPendingSignals(t, tt.pid)
	waitCounterAbove(t, tt.pid, tt.counter, c1)
}

// TestInterruptWhileWaiting: the main thread of vforker sleeps
// uninterruptibly, so Attach, allowed to poll for a very long time, waits;
// a signal ends the wait at once, and the process is left untraced.
func TestInterruptWhileWaiting(t *testing.T) {
	pr, pid, child := startVforker(t)

	sigs := make(chan os.Signal, 1)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for range pollTries {
			if st := taskStatus(pid, pid); st != nil && st["TracerPid"] != "0" {
				sigs <- unix.SIGHUP
				return
			}
			time.Sleep(pollInterval)
		}
	}()
	// 100000 polls, all but the first few 500µs apart, take about 50 s:
	// only the signal ends Attach.
	_, err := Attach(pid, Options{Interrupt: sigs, StopTries: 100000})
	<-sent
	want := fmt.Sprintf("SIGHUP: detached from process %d", pid)
	if err == nil || err.Error() != want {
		t.Fatalf("Attach: %v, want %s", err, want)
	}
	checkVforkerReleased(t, pr, pid, child)
}

// TestSignalWhileAttaching runs a helper that catches the signals before
// Attach, as the CLI does, and receives one while seizing: it prints the
// same line as DetachOnSignals and exits with 128+signal.
func TestSignalWhileAttaching(t *testing.T) {
	tt := startThreads(t)
	for _, sig := range []syscall.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP} {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			c1 := readMemFile(t, tt.pid, tt.counter)
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), helperEnv+"=interrupt-attaching", helperPIDEnv+"="+strconv.Itoa(tt.pid), helperSigEnv+"="+strconv.Itoa(int(sig)))
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 128+int(sig) {
				t.Fatalf("helper: %v, want exit status %d (stdout %q, stderr %q)", err, 128+int(sig), stdout.String(), stderr.String())
			}
			want := fmt.Sprintf("ompd-inspect: %s: detached from process %d\n", unix.SignalName(sig), tt.pid)
			if stderr.String() != want || stdout.String() != "" {
				t.Fatalf("helper stderr %q, stdout %q; want stderr %q", stderr.String(), stdout.String(), want)
			}
			waitRunning(t, tt.pid)
			checkNoPendingSignals(t, tt.pid)
			waitCounterAbove(t, tt.pid, tt.counter, c1)
		})
	}
}

// TestAlive: Alive says a held process lives, and that it ended once it
// is killed while held.
func TestAlive(t *testing.T) {
	tt := startThreads(t)
	p, err := Attach(tt.pid, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Alive(); err != nil {
		t.Fatalf("Alive of a held process: %v", err)
	}
	// Alive's first answer: the stack of the thread memory is read
	// through can be read; an unmapped page cannot.
	sp := p.threads[0].Regs.Rsp
	if !p.mem.readable(sp) {
		t.Fatalf("the stack pointer %#x of thread %d of a held process is not readable", sp, p.threads[0].TID)
	}
	if p.mem.readable(0x1000) {
		t.Fatal("page 0x1000 of the process is readable")
	}
	// The answer when that cannot tell: from the thread's files, then
	// (the thread gone) from every thread's.
	if err := p.aliveInProc(); err != nil {
		t.Fatalf("aliveInProc of a held process: %v", err)
	}
	// Which answers: the stack's read first, the files only when it
	// fails. With the files of a process that is not there, the stack
	// still says the process lives; read through a thread that is not
	// there, the files say it has ended.
	pid := p.pid
	p.pid = 1 << 30
	err = p.Alive()
	p.pid = pid
	if err != nil {
		t.Fatalf("Alive with a readable stack and no /proc files: %v, want nil", err)
	}
	mem := p.mem
	p.mem = newMemReader(tt.pid, 1<<30)
	err = p.Alive()
	p.mem = mem
	if err == nil || !errors.Is(err, ErrGone) {
		t.Fatalf("Alive through a thread that is not there: %v, want ErrGone", err)
	}
	if err := unix.Kill(tt.pid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("process %d: the process ended while it was being read (killed, or it exited); nothing is reported", tt.pid)
	for range pollTries {
		err = p.Alive()
		if err != nil {
			break
		}
		time.Sleep(pollInterval)
	}
	if err == nil || err.Error() != want || !errors.Is(err, ErrGone) {
		t.Fatalf("Alive of a killed process: %v, want %s", err, want)
	}
}

// TestKilledWhileAttaching kills the process right after its main thread is
// seized: Attach says in the line Alive uses that it ended.
func TestKilledWhileAttaching(t *testing.T) {
	tt := startThreads(t)
	_, err := Attach(tt.pid, Options{afterSeize: func(tid int) {
		if tid != tt.pid {
			return
		}
		if err := unix.Kill(tt.pid, unix.SIGKILL); err != nil {
			t.Errorf("kill: %v", err)
		}
		for range pollTries {
			if st := taskStatus(tt.pid, tt.pid); st == nil || st["State"] == "Z (zombie)" {
				return
			}
			time.Sleep(pollInterval)
		}
	}})
	want := fmt.Sprintf("process %d: the process ended while it was being read (killed, or it exited); nothing is reported", tt.pid)
	if err == nil || err.Error() != want || !errors.Is(err, ErrGone) {
		t.Fatalf("Attach: %v, want %s", err, want)
	}
	// Nothing of it is left traced. (Its exit status may have gone to the
	// tracing thread, which runs in the process's parent.)
	for _, tid := range tasksIfAny(tt.pid) {
		if st := taskStatus(tt.pid, tid); st != nil && st["State"] != "Z (zombie)" {
			t.Fatalf("thread %d of the killed process: State %q TracerPid %s", tid, st["State"], st["TracerPid"])
		}
	}
}

// tasksIfAny lists the threads of pid, none when it is gone.
func tasksIfAny(pid int) []int {
	tids, _ := listTasks(pid)
	return tids
}

// execerSource is a program whose thread "execer" executes the program
// again (with the argument "execed") when a byte arrives on its standard
// input, while two other threads sleep. The new image prints
// "execed <pid>" and sleeps.
const execerSource = `#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static char *self;
static pthread_barrier_t started;
static long execer_tid;

static void *sleeper(void *arg) {
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

static void *execer(void *arg) {
	(void)arg;
	execer_tid = syscall(SYS_gettid);
	pthread_barrier_wait(&started);
	char c;
	if (read(0, &c, 1) == 1) {
		char *argv[] = {self, "execed", NULL};
		execv("/proc/self/exe", argv);
		perror("execv");
		_exit(1);
	}
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv) {
	self = argv[0];
	if (argc > 1 && strcmp(argv[1], "execed") == 0) {
		printf("execed %d\n", getpid());
		fflush(stdout);
		for (;;)
			pause();
	}
	pthread_t t;
	pthread_barrier_init(&started, NULL, 2);
	pthread_create(&t, NULL, sleeper, NULL);
	pthread_create(&t, NULL, sleeper, NULL);
	pthread_create(&t, NULL, execer, NULL);
	pthread_barrier_wait(&started);
	printf("execer %ld\nready\n", execer_tid);
	fflush(stdout);
	for (;;)
		pause();
}
`

// othersDead reports whether every thread of pid but keep is a zombie or
// gone.
func othersDead(pid, keep int) bool {
	for _, tid := range tasksIfAny(pid) {
		if st := taskStatus(pid, tid); tid != keep && st != nil && st["State"] != "Z (zombie)" {
			return false
		}
	}
	return true
}

// buildSource compiles C source src into a temporary directory.
func buildSource(t *testing.T, name, src string) string {
	t.Helper()
	dir := t.TempDir()
	c := filepath.Join(dir, name+".c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	if b, err := exec.Command("gcc", "-O1", "-g", "-Wall", "-pthread", "-o", out, c).CombinedOutput(); err != nil {
		t.Fatalf("compiling %s.c: %v\n%s", name, err, b)
	}
	return out
}

// TestExecWhileAttaching makes a process execute a new program while
// Attach holds it half seized, from a thread not yet seized and from one
// seized but not yet stopped. Attach says so in one line, and the new
// image runs on untraced.
func TestExecWhileAttaching(t *testing.T) {
	exe := buildSource(t, "execer", execerSource)
	for _, by := range []string{"unseized", "seized"} {
		t.Run(by, func(t *testing.T) {
			cmd := exec.Command(exe)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			pr := start(t, cmd)
			t.Cleanup(func() { stdin.Close() })
			execer := atoi(t, strings.TrimPrefix(pr.next(t), "execer "))
			if l := pr.next(t); l != "ready" {
				t.Fatalf("execer printed %q", l)
			}
			trigger := pr.pid // seize the main thread, then let the execer exec
			if by == "seized" {
				trigger = execer
			}
			var hookErr error
			_, err = Attach(pr.pid, Options{afterSeize: func(tid int) {
				if tid != trigger || hookErr != nil {
					return
				}
				if _, hookErr = stdin.Write([]byte{'x'}); hookErr != nil {
					return
				}
				for range pollTries {
					if by == "unseized" {
						// The exec is done: the execer's thread id is
						// gone and the process runs the new image.
						cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pr.pid))
						if taskStatus(pr.pid, execer) == nil && strings.Contains(string(cl), "execed") {
							return
						}
					} else if othersDead(pr.pid, execer) {
						// The exec has killed the other threads; it
						// completes once this tracer reaps them, which
						// Attach does next.
						return
					}
					time.Sleep(pollInterval)
				}
				hookErr = fmt.Errorf("process %d did not execute the new image", pr.pid)
			}})
			if hookErr != nil {
				t.Fatal(hookErr)
			}
			want := fmt.Sprintf("process %d: it executed a new program (exec) while being attached; try again", pr.pid)
			if err == nil || err.Error() != want || !errors.Is(err, ErrExec) {
				t.Fatalf("Attach: %v, want %s", err, want)
			}
			if l := pr.next(t); l != fmt.Sprintf("execed %d", pr.pid) {
				t.Fatalf("the new image printed %q", l)
			}
			waitRunning(t, pr.pid)
			checkNoPendingSignals(t, pr.pid)
			if tids := tasks(t, pr.pid); len(tids) != 1 || tids[0] != pr.pid {
				t.Fatalf("threads %v after the exec, want only %d", tids, pr.pid)
			}
		})
	}
}
