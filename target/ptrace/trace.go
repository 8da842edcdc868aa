package ptrace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ompd-inspect/ompd-inspect/target"

	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// traceOptions are the ptrace options of a Tracee's threads: new threads,
// forked and vforked children and exec are reported.
const traceOptions = unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_TRACEFORK |
	unix.PTRACE_O_TRACEVFORK | unix.PTRACE_O_TRACEEXEC

// siKernel is the si_code of the SIGTRAP an int3 raises.
const siKernel = 0x80

// wakeInterval is how long the event loop sleeps at most without news
// from the waiter before it polls again (a safety net).
const wakeInterval = 50 * time.Millisecond

// stopAllWakeups bounds how long StopAll waits for threads to stop: this
// many wake intervals without progress (three seconds).
const stopAllWakeups = 60

// EventKind says what stopped a Tracee.
type EventKind int

// The events Continue reports.
const (
	// EventBreakpoint: thread TID reached the breakpoint at Addr. Only
	// that thread is stopped; the others run on.
	EventBreakpoint EventKind = iota
	// EventExec: the process executed a new program. Its breakpoints are
	// gone with the old program; its only thread is stopped.
	EventExec
	// EventExit: the process ended; ExitCode or Signal says how.
	EventExit
	// EventInterrupted: Interrupt was called.
	EventInterrupted
	// EventWatch: thread TID wrote the memory WatchWrite watched (it
	// stopped right after the write; the watch is gone). Only that thread
	// is stopped.
	EventWatch
)

// Event is what Continue stopped for.
type Event struct {
	Kind EventKind
	TID  int
	Addr uint64
	// ExitCode is the exit status of an EventExit, Signal the signal that
	// killed the process (then ExitCode is 0).
	ExitCode int
	Signal   int
	// Regs are the registers of thread TID at an EventBreakpoint (rip is
	// the breakpoint's address) or EventWatch.
	Regs target.Registers
}

// Tracee is a process that runs under ompd-inspect's control: it runs
// freely and stops at breakpoints, and Continue reports those stops, its
// execs and its exit. New threads are traced as they appear; children it
// forks are released at once (without the breakpoints), children it
// vforks are followed until they exec, because they share its memory.
// Signals the process receives are delivered to it unchanged.
//
// Unlike Process, which is one stopped snapshot, a Tracee stops only the
// thread that hit a breakpoint; StopAll stops the others when a complete
// snapshot is wanted. Its methods may be called from any goroutine, one at
// a time.
type Tracee struct {
	// imageOpts says where the modules' debug files are looked for.
	imageOpts elf.OpenOptions
	pid       int
	memTID    int // a live thread, whose /proc entries give the memory
	launched  bool
	tr        *tracer

	// Owned by the tracing thread.
	threads map[int]*tthread
	others  map[int]*relative // traced processes other than the tracee
	bps     map[uint64]bool   // addresses of the int3s written over a return
	pending []Event           // breakpoint hits seen while stopping every thread
	memw    *os.File
	gone    bool
	exit    Event

	mem   *memReader
	cache *target.MemCache

	modsMu   sync.Mutex
	modules  []*target.Module
	images   []image
	modsOK   bool
	warnings []string

	wake      chan struct{} // the waiter saw a status to collect
	woken     bool          // a wake is not acknowledged yet (tracing thread)
	ack       chan struct{} // the tracing thread collected what there was
	done      chan struct{} // closed when the Tracee is released
	intr      chan struct{}
	intrOnce  sync.Once
	closeOnce sync.Once
	closeErr  error
}

// tthread is what the tracing thread knows of one thread of a Tracee.
type tthread struct {
	tid     int
	stopped bool
	newborn bool // traced by TRACECLONE; its first stop is still to come
	// hit is the breakpoint it stopped at (its rip is hit+1); resuming it
	// performs that breakpoint's return.
	hit       uint64
	signal    int // a signal to deliver when it resumes
	groupStop bool
	watching  bool // a debug register watches a write (WatchWrite)
}

// relative is a child process of the tracee that TRACEFORK or TRACEVFORK
// attached.
type relative struct {
	pid     int
	vfork   bool
	known   bool // the parent's fork event has been seen
	stopped bool
}

// Trace turns a Process that Attach returned into a Tracee: the stopped
// threads are set to report forks, execs and new threads, and Continue
// lets them run. The Process must not be used afterwards. A process that
// was stopped by job control cannot be traced.
func (p *Process) Trace() (*Tracee, error) {
	if p.ended.Load() {
		return nil, fmt.Errorf("process %d: %w", p.pid, errClosed)
	}
	if p.wasStopped {
		return nil, fmt.Errorf("process %d is stopped by job control; continue it (kill -CONT %d) before tracing it", p.pid, p.pid)
	}
	// Memory is reached through a live thread: a main thread that has
	// exited (pthread_exit) no longer has any.
	t := newTracee(p.pid, p.threads[0].TID, p.tr)
	t.imageOpts = p.imageOpts
	var err error
	p.tr.do(func() {
		for tid, st := range p.tstate {
			if !st.stopped {
				continue
			}
			if e := unix.PtraceSetOptions(tid, traceOptions); e != nil && !errors.Is(e, unix.ESRCH) {
				err = fmt.Errorf("process %d: setting the trace options of thread %d: %w", p.pid, tid, e)
				return
			}
			t.threads[tid] = &tthread{tid: tid, stopped: true, signal: st.signal}
		}
	})
	// The Process gives up its tracer and images to the Tracee.
	p.ended.Store(true)
	p.detachOnce.Do(func() {})
	p.closeOnce.Do(func() {})
	p.releaseEarly()
	t.images, t.modules, t.modsOK = p.images, p.modules, true
	t.warnings = append(t.warnings, p.warnings...)
	if p.mem != nil {
		_ = p.mem.close()
	}
	if err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

func newTracee(pid, memTID int, tr *tracer) *Tracee {
	t := &Tracee{
		pid:     pid,
		memTID:  memTID,
		tr:      tr,
		threads: make(map[int]*tthread),
		others:  make(map[int]*relative),
		bps:     make(map[uint64]bool),
		wake:    make(chan struct{}),
		ack:     make(chan struct{}),
		done:    make(chan struct{}),
		intr:    make(chan struct{}),
	}
	t.mem = newMemReader(pid, memTID)
	t.cache = target.NewMemCache(t.mem)
	go t.waiter()
	return t
}

// waiter tells the tracing thread when a traced task has a status to
// collect. It blocks in waitid with WNOWAIT, which leaves the status to be
// collected, so that the tracing thread (the only one that may make
// ptrace requests) need not poll; then it waits until the tracing thread
// has collected. waitid sees the children and tracees of every thread of
// ompd-inspect, which must therefore have no other child or tracee while
// a Tracee runs (the CLI has none).
func (t *Tracee) waiter() {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT|unix.WALL, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		select {
		case t.wake <- struct{}{}:
		case <-t.done:
			return
		}
		select {
		case <-t.ack:
		case <-t.done:
			return
		}
		if err != nil {
			return // nothing left to wait for
		}
	}
}

// PID returns the process id.
func (t *Tracee) PID() int { return t.pid }

// Launched reports whether the Tracee was started by Launch (and is a
// child of ompd-inspect).
func (t *Tracee) Launched() bool { return t.launched }

// Interrupt makes a Continue or StopAll in progress (or the next one)
// return EventInterrupted. It may be called from any goroutine, also
// while another method runs.
func (t *Tracee) Interrupt() {
	t.intrOnce.Do(func() { close(t.intr) })
}

// interrupted reports whether Interrupt was called.
func (t *Tracee) interrupted() bool {
	select {
	case <-t.intr:
		return true
	default:
		return false
	}
}

// ReadMemory reads the process's memory through a cache that is emptied
// whenever the process resumes.
func (t *Tracee) ReadMemory(addr uint64, buf []byte) error {
	if err := t.cache.ReadMemory(addr, buf); err != nil {
		return fmt.Errorf("process %d: %w", t.pid, err)
	}
	return nil
}

// Warnings lists what the Tracee noticed and worked around.
func (t *Tracee) Warnings() []string {
	t.modsMu.Lock()
	defer t.modsMu.Unlock()
	return append([]string(nil), t.warnings...)
}

// Modules lists the ELF files mapped into the process, the executable
// first. The list is read again after ModulesChanged.
func (t *Tracee) Modules() ([]*target.Module, error) {
	t.modsMu.Lock()
	defer t.modsMu.Unlock()
	if t.modsOK {
		return t.modules, nil
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", t.pid))
	if err != nil {
		return nil, fmt.Errorf("process %d: reading the executable's path: %w", t.pid, err)
	}
	_, mods, warns, err := loadModules(t.pid, t.pid, exe, realFiles{t.imageOpts})
	if err != nil {
		return nil, err
	}
	t.warnings = append(t.warnings, warns...)
	// Keep the images of modules that did not change, so that what was
	// parsed from them stays valid for callers holding them.
	old := make(map[string]*target.Module)
	for _, m := range t.modules {
		old[fmt.Sprintf("%s@%x", m.Name, m.Start)] = m
	}
	var out []*target.Module
	for _, m := range mods {
		if o := old[fmt.Sprintf("%s@%x", m.name, m.start)]; o != nil && o.End == m.end {
			if m.img != nil {
				closeImage(m.img)
			}
			out = append(out, o)
			continue
		}
		mod := &target.Module{Name: m.name, File: m.file, Start: m.start, End: m.end, Bias: m.bias}
		if m.img != nil {
			t.images = append(t.images, m.img)
			mod.Image = elfImage(m.img)
		}
		out = append(out, mod)
	}
	t.modules, t.modsOK = out, true
	return out, nil
}

// ModulesChanged makes the next Modules call read the mappings again
// (after the dynamic linker loaded or unloaded a library).
func (t *Tracee) ModulesChanged() {
	t.modsMu.Lock()
	t.modsOK = false
	t.modsMu.Unlock()
}

// SetBreakpoint writes an int3 over the return instruction at addr (see
// ReturnSite). The process may be running.
func (t *Tracee) SetBreakpoint(addr uint64) error {
	var err error
	t.tr.do(func() { err = t.setBreakpoint(addr) })
	return err
}

func (t *Tracee) setBreakpoint(addr uint64) error {
	if t.bps[addr] {
		return nil
	}
	var b [1]byte
	if _, err := t.mem.ReadPages(addr, b[:]); err != nil {
		return fmt.Errorf("process %d: breakpoint at %#x: %w", t.pid, addr, err)
	}
	if b[0] != ret {
		return fmt.Errorf("process %d: breakpoint at %#x: the instruction there is not a return (byte %#02x)", t.pid, addr, b[0])
	}
	if err := t.poke(t.pid, addr, int3); err != nil {
		return fmt.Errorf("process %d: writing the breakpoint at %#x: %w", t.pid, addr, err)
	}
	t.bps[addr] = true
	t.cache.Invalidate()
	return nil
}

// Breakpoints lists the addresses of the breakpoints set, ascending.
func (t *Tracee) Breakpoints() []uint64 {
	var out []uint64
	t.tr.do(func() {
		for a := range t.bps {
			out = append(out, a)
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// poke writes one byte into process pid's memory.
func (t *Tracee) poke(pid int, addr uint64, b byte) error {
	f := t.memw
	if pid != t.pid || f == nil {
		var err error
		tid := pid
		if pid == t.pid {
			tid = t.memTID
		}
		f, err = os.OpenFile(fmt.Sprintf("/proc/%d/mem", tid), os.O_RDWR, 0)
		if err != nil {
			return err
		}
		if pid == t.pid {
			t.memw = f
		} else {
			defer f.Close()
		}
	}
	_, err := f.WriteAt([]byte{b}, int64(addr))
	return err
}

// removeBreakpoints puts the original bytes back in process pid (the
// tracee, or a forked child that inherited its memory).
func (t *Tracee) removeBreakpoints(pid int) error {
	var errs []error
	for addr := range t.bps {
		if err := t.poke(pid, addr, ret); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("process %d: removing the breakpoint at %#x: %w", pid, addr, err))
		}
	}
	return errors.Join(errs...)
}

// Continue resumes every stopped thread and returns the next event. A
// thread stopped at a breakpoint resumes by returning from the function
// the breakpoint is in.
func (t *Tracee) Continue() (Event, error) {
	var ev Event
	var err error
	t.tr.do(func() { ev, err = t.cont() })
	return ev, err
}

func (t *Tracee) cont() (Event, error) {
	if t.gone {
		return t.exit, nil
	}
	t.cache.Invalidate()
	if len(t.pending) > 0 {
		ev := t.pending[0]
		t.pending = t.pending[1:]
		if err := t.resumeAll(ev.TID); err != nil {
			return Event{}, err
		}
		return ev, nil
	}
	if err := t.resumeAll(0); err != nil {
		return Event{}, err
	}
	return t.wait(false)
}

// resumeAll resumes every stopped thread except keep and those with a
// breakpoint hit not yet reported.
func (t *Tracee) resumeAll(keep int) error {
	queued := make(map[int]bool)
	for _, ev := range t.pending {
		queued[ev.TID] = true
	}
	for _, tid := range t.sortedTIDs() {
		th := t.threads[tid]
		if !th.stopped || tid == keep || queued[tid] || th.newborn {
			continue
		}
		if err := t.resume(th); err != nil {
			return err
		}
	}
	return nil
}

// resume lets one stopped thread run: past its breakpoint's return, with
// its pending signal, or listening in its group stop.
func (t *Tracee) resume(th *tthread) error {
	if th.hit != 0 {
		if err := t.stepOverReturn(th); err != nil {
			return err
		}
	}
	var err error
	if th.groupStop {
		_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_LISTEN, uintptr(th.tid), 0, 0, 0, 0)
		if e != 0 {
			err = e
		}
	} else {
		err = unix.PtraceCont(th.tid, th.signal)
	}
	if err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("process %d: resuming thread %d: %w", t.pid, th.tid, err)
	}
	th.stopped, th.signal, th.groupStop = false, 0, false
	return nil
}

// stepOverReturn performs the return instruction the thread stopped on:
// it pops the return address into rip (whether the int3 is still there or
// the original return is back, the effect is the same).
func (t *Tracee) stepOverReturn(th *tthread) error {
	var r unix.PtraceRegs
	if err := unix.PtraceGetRegs(th.tid, &r); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return fmt.Errorf("process %d: reading the registers of thread %d: %w", t.pid, th.tid, err)
	}
	var b [8]byte
	if _, err := t.mem.ReadPages(r.Rsp, b[:]); err != nil {
		return fmt.Errorf("process %d: thread %d at the breakpoint %#x: reading its return address: %w", t.pid, th.tid, th.hit, err)
	}
	r.Rip = binary.LittleEndian.Uint64(b[:])
	r.Rsp += 8
	if err := unix.PtraceSetRegs(th.tid, &r); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("process %d: writing the registers of thread %d: %w", t.pid, th.tid, err)
	}
	th.hit = 0
	return nil
}

// sortedTIDs returns the traced thread ids, the main thread first.
func (t *Tracee) sortedTIDs() []int { return mainFirst(t.pid, t.threads) }

// mainFirst returns the keys of a map by thread id: the main thread (pid)
// first, then ascending.
func mainFirst[V any](pid int, threads map[int]V) []int {
	tids := make([]int, 0, len(threads))
	for tid := range threads {
		tids = append(tids, tid)
	}
	sortMainFirst(pid, tids)
	return tids
}

// sortMainFirst sorts the thread ids tids of process pid in place: the
// main thread first, then by id.
func sortMainFirst(pid int, tids []int) {
	sort.Slice(tids, func(i, j int) bool {
		if (tids[i] == pid) != (tids[j] == pid) {
			return tids[i] == pid
		}
		return tids[i] < tids[j]
	})
}

// wait handles stops until one is an event for the caller. With stopping
// set (StopAll), it returns as soon as every thread is stopped, queueing
// breakpoint hits instead of returning them.
func (t *Tracee) wait(stopping bool) (Event, error) {
	idle := 0
	for {
		if stopping && t.allStopped() {
			return Event{}, nil
		}
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WALL|unix.WNOTHREAD, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ECHILD):
			if t.gone {
				return t.exit, nil
			}
			return Event{}, fmt.Errorf("process %d: no thread is traced any more", t.pid)
		case err != nil:
			return Event{}, fmt.Errorf("process %d: waiting for its threads: %w", t.pid, err)
		case wpid == 0:
			// Everything is collected: the waiter may wait again.
			if t.woken {
				t.ack <- struct{}{}
				t.woken = false
			}
			intr := t.intr
			if stopping {
				intr = nil // StopAll finishes, interrupted or not
			}
			select {
			case <-t.wake:
				idle = 0
				t.woken = true
			case <-intr:
				return Event{Kind: EventInterrupted}, nil
			case <-t.sleep():
				idle++
			}
			if stopping && idle >= stopAllWakeups {
				return Event{}, t.notStopping()
			}
			continue
		}
		idle = 0
		ev, ok, err := t.handle(wpid, ws, stopping)
		if err != nil {
			return Event{}, err
		}
		if ok {
			if ev.Kind == EventExit || !stopping {
				return ev, nil
			}
			t.pending = append(t.pending, ev)
		}
	}
}

// sleep returns a channel that fires after wakeInterval.
func (t *Tracee) sleep() <-chan time.Time { return time.After(wakeInterval) }

func (t *Tracee) allStopped() bool {
	for _, th := range t.threads {
		if !th.stopped {
			return false
		}
	}
	return true
}

func (t *Tracee) notStopping() error {
	for _, tid := range t.sortedTIDs() {
		if th := t.threads[tid]; !th.stopped {
			state := "unknown"
			if st, err := readStatus(fmt.Sprintf("/proc/%d/task/%d/status", t.pid, tid)); err == nil {
				state = st.State
			}
			return fmt.Errorf("process %d: thread %d did not stop (state %s)", t.pid, tid, state)
		}
	}
	return nil
}

// handle interprets one wait status. It returns an event for the caller
// when there is one.
func (t *Tracee) handle(wpid int, ws unix.WaitStatus, stopping bool) (Event, bool, error) {
	if rel := t.others[wpid]; rel != nil {
		return Event{}, false, t.handleRelative(rel, ws)
	}
	th := t.threads[wpid]
	if th == nil {
		if ws.Exited() || ws.Signaled() {
			return Event{}, false, nil
		}
		// A stop of a task whose creation event has not arrived yet: a new
		// thread, or a forked child.
		st, err := readStatus(fmt.Sprintf("/proc/%d/status", wpid))
		if err == nil && st.Tgid != t.pid {
			rel := &relative{pid: wpid}
			t.others[wpid] = rel
			return Event{}, false, t.handleRelative(rel, ws)
		}
		th = &tthread{tid: wpid, newborn: true}
		t.threads[wpid] = th
	}
	if ws.Exited() || ws.Signaled() {
		delete(t.threads, wpid)
		if wpid == t.pid || len(t.threads) == 0 {
			t.gone = true
			t.exit = Event{Kind: EventExit, TID: wpid}
			if ws.Exited() {
				t.exit.ExitCode = ws.ExitStatus()
			} else {
				t.exit.Signal = int(ws.Signal())
			}
			return t.exit, true, nil
		}
		return Event{}, false, nil
	}
	if !ws.Stopped() {
		return Event{}, false, nil
	}
	sig := ws.StopSignal()
	switch event := int(ws>>16) & 0xff; event {
	case unix.PTRACE_EVENT_CLONE:
		if msg, err := unix.PtraceGetEventMsg(wpid); err == nil {
			if t.threads[int(msg)] == nil {
				t.threads[int(msg)] = &tthread{tid: int(msg), newborn: true}
			}
		}
		return Event{}, false, t.after(th, stopping)
	case unix.PTRACE_EVENT_FORK, unix.PTRACE_EVENT_VFORK:
		if msg, err := unix.PtraceGetEventMsg(wpid); err == nil {
			rel := t.others[int(msg)]
			if rel == nil {
				rel = &relative{pid: int(msg)}
				t.others[rel.pid] = rel
			}
			rel.known, rel.vfork = true, event == unix.PTRACE_EVENT_VFORK
			if rel.stopped {
				if err := t.releaseRelative(rel); err != nil {
					return Event{}, false, err
				}
			}
		}
		return Event{}, false, t.after(th, stopping)
	case unix.PTRACE_EVENT_EXEC:
		// The thread that called exec now has the process id; the others
		// are gone, and so are the old program and its breakpoints.
		t.threads = map[int]*tthread{t.pid: {tid: t.pid, stopped: true}}
		t.bps = make(map[uint64]bool)
		t.pending = nil
		if t.memw != nil {
			t.memw.Close()
			t.memw = nil
		}
		t.mem.close()
		t.memTID = t.pid
		t.mem = newMemReader(t.pid, t.pid)
		t.cache = target.NewMemCache(t.mem)
		t.ModulesChanged()
		return Event{Kind: EventExec, TID: t.pid}, true, nil
	case unix.PTRACE_EVENT_STOP:
		switch {
		case th.newborn:
			th.newborn = false
			th.stopped = true
			return Event{}, false, t.after(th, stopping)
		case isStopSignal(sig):
			th.stopped, th.groupStop = true, true
			return Event{}, false, t.after(th, stopping)
		default:
			// An interrupt: StopAll's, or one that took effect late.
			return Event{}, false, t.after(th, stopping)
		}
	case 0:
		th.stopped = true
		code := trapCode(wpid, sig)
		if code == siKernel {
			if addr, regs, ok := t.breakpointHit(wpid); ok {
				th.hit = addr
				regs.Rip = addr
				return Event{Kind: EventBreakpoint, TID: wpid, Addr: addr, Regs: regs}, true, nil
			}
		}
		if code == trapHWBreakpoint && th.watching {
			if v, err := peekUser(wpid, dr6); err == nil && v&1 != 0 {
				th.watching = false
				if err := clearWatch(wpid); err != nil {
					return Event{}, false, fmt.Errorf("process %d: clearing the watch of thread %d: %w", t.pid, wpid, err)
				}
				regs, err := getRegs(wpid)
				if err != nil {
					return Event{}, false, fmt.Errorf("process %d: reading the registers of thread %d: %w", t.pid, wpid, err)
				}
				return Event{Kind: EventWatch, TID: wpid, Regs: regs}, true, nil
			}
		}
		th.signal = int(sig)
		return Event{}, false, t.after(th, stopping)
	default:
		return Event{}, false, t.after(th, stopping)
	}
}

// after resumes a thread that stopped for something the caller does not
// see, unless every thread is being stopped.
func (t *Tracee) after(th *tthread, stopping bool) error {
	th.stopped = true
	if stopping {
		return nil
	}
	return t.resume(th)
}

// trapCode returns the si_code of a SIGTRAP thread tid is about to
// receive, -1 for another signal or when unknown.
func trapCode(tid int, sig syscall.Signal) int32 {
	if sig != unix.SIGTRAP {
		return -1
	}
	info, err := getSiginfo(tid)
	if err != nil {
		return -1
	}
	return info.code
}

// breakpointHit reports whether thread tid, stopped by an int3's SIGTRAP,
// is just past one of the breakpoints, which, and its registers.
func (t *Tracee) breakpointHit(tid int) (uint64, target.Registers, bool) {
	regs, err := getRegs(tid)
	if err != nil || !t.bps[regs.Rip-1] {
		return 0, target.Registers{}, false
	}
	return regs.Rip - 1, regs, true
}

// handleRelative follows a child process of the tracee.
func (t *Tracee) handleRelative(rel *relative, ws unix.WaitStatus) error {
	if ws.Exited() || ws.Signaled() {
		delete(t.others, rel.pid)
		return nil
	}
	if !ws.Stopped() {
		return nil
	}
	event := int(ws>>16) & 0xff
	sig := ws.StopSignal()
	switch {
	case event == unix.PTRACE_EVENT_EXEC:
		// A vforked child that executed a program no longer shares memory.
		delete(t.others, rel.pid)
		return detachQuietly(rel.pid, 0)
	case !rel.stopped && (event == unix.PTRACE_EVENT_STOP || event == 0 && sig == unix.SIGSTOP):
		// Its first stop.
		rel.stopped = true
		if rel.known {
			return t.releaseRelative(rel)
		}
		return nil // held until the parent's fork event says what it is
	case event == 0 && sig == unix.SIGTRAP:
		if addr, _, ok := t.breakpointHit(rel.pid); ok && trapCode(rel.pid, sig) == siKernel {
			// A vforked child passing a breakpoint of the shared memory.
			th := &tthread{tid: rel.pid, hit: addr}
			if err := t.stepOverReturn(th); err != nil {
				return err
			}
			return unix.PtraceCont(rel.pid, 0)
		}
		return unix.PtraceCont(rel.pid, int(sig))
	case event == 0:
		return unix.PtraceCont(rel.pid, int(sig))
	default:
		return unix.PtraceCont(rel.pid, 0)
	}
}

// releaseRelative lets a new child go: a forked child is detached after
// its copy of the breakpoints is removed; a vforked child shares the
// tracee's memory, so it stays traced (its breakpoint hits are stepped
// over silently) until it executes a program or exits.
func (t *Tracee) releaseRelative(rel *relative) error {
	if rel.vfork {
		return unix.PtraceCont(rel.pid, 0)
	}
	err := t.removeBreakpoints(rel.pid)
	delete(t.others, rel.pid)
	return errors.Join(err, detachQuietly(rel.pid, 0))
}

func detachQuietly(pid, sig int) error {
	if err := ptraceDetach(pid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("detaching from process %d: %w", pid, err)
	}
	return nil
}

// StopAll stops every thread of the process and returns a snapshot of it,
// valid until the next Continue. Breakpoint hits that happen meanwhile are
// reported by the following Continue calls.
func (t *Tracee) StopAll() (*Snapshot, error) {
	var s *Snapshot
	var err error
	t.tr.do(func() { s, err = t.stopAll() })
	return s, err
}

func (t *Tracee) stopAll() (*Snapshot, error) {
	if t.gone {
		return nil, fmt.Errorf("process %d has exited", t.pid)
	}
	for _, tid := range t.sortedTIDs() {
		th := t.threads[tid]
		if th.newborn || th.stopped {
			continue // its first stop is coming, or it is in a ptrace stop
		}
		err := unix.PtraceInterrupt(tid)
		switch {
		case errors.Is(err, unix.ESRCH):
			// A main thread that has exited (pthread_exit) waits as a
			// zombie for the others: it runs no code.
			th.stopped = true
		case err != nil:
			return nil, fmt.Errorf("process %d: interrupting thread %d: %w", t.pid, tid, err)
		}
	}
	ev, err := t.wait(true)
	if err != nil {
		return nil, err
	}
	if ev.Kind == EventExit {
		return nil, fmt.Errorf("process %d exited while it was being stopped", t.pid)
	}
	for _, p := range t.pending {
		if p.Kind == EventExec {
			return nil, fmt.Errorf("process %d executed a new program while it was being stopped", t.pid)
		}
	}
	if err := t.settleTraps(); err != nil {
		return nil, err
	}
	s := &Snapshot{t: t}
	for _, tid := range t.sortedTIDs() {
		regs, err := getRegs(tid)
		if errors.Is(err, unix.ESRCH) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("process %d: reading the registers of thread %d: %w", t.pid, tid, err)
		}
		if h := t.threads[tid].hit; h != 0 {
			regs.Rip = h
		}
		s.threads = append(s.threads, target.Thread{TID: tid, Regs: regs})
	}
	t.cache.Invalidate()
	return s, nil
}

// settleTraps finds threads that StopAll's interrupt caught right after
// they executed a breakpoint's int3: the SIGTRAP is still pending, and
// would be delivered (killing the program) on detach. Each is resumed
// into that SIGTRAP's stop, which makes it an ordinary breakpoint hit,
// queued for Continue.
func (t *Tracee) settleTraps() error {
	for _, tid := range t.sortedTIDs() {
		th := t.threads[tid]
		if !th.stopped || th.hit != 0 || th.groupStop {
			continue
		}
		regs, err := getRegs(tid)
		if err != nil || !t.bps[regs.Rip-1] {
			continue
		}
		if err := unix.PtraceCont(tid, 0); err != nil {
			return fmt.Errorf("process %d: resuming thread %d into its breakpoint trap: %w", t.pid, tid, err)
		}
		ws, err := waitPid(tid, unix.WALL|unix.WNOTHREAD)
		if err != nil {
			return fmt.Errorf("process %d: waiting for thread %d's breakpoint trap: %w", t.pid, tid, err)
		}
		ev, ok, err := t.handle(tid, ws, true)
		if err != nil {
			return err
		}
		if ok {
			t.pending = append(t.pending, ev)
		}
	}
	return nil
}

// Detach removes every breakpoint and lets the process run on untraced,
// as if it had never been traced; threads stopped at a breakpoint perform
// its return first. Further calls do nothing.
func (t *Tracee) Detach() error {
	t.closeOnce.Do(func() { t.closeErr = t.release(false) })
	return t.closeErr
}

// Kill kills the process and waits for it to end.
func (t *Tracee) Kill() error {
	t.closeOnce.Do(func() { t.closeErr = t.release(true) })
	return t.closeErr
}

// Close detaches (see Detach); it is what a deferred call should use.
func (t *Tracee) Close() error { return t.Detach() }

func (t *Tracee) release(kill bool) error {
	var errs []error
	t.tr.do(func() {
		if kill && !t.gone {
			if err := unix.Kill(t.pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("process %d: killing it: %w", t.pid, err))
			}
			for !t.gone {
				var ws unix.WaitStatus
				wpid, err := unix.Wait4(-1, &ws, unix.WALL|unix.WNOTHREAD, nil)
				if errors.Is(err, unix.EINTR) {
					continue
				}
				if err != nil {
					break
				}
				if _, _, err := t.handle(wpid, ws, true); err != nil {
					break
				}
			}
		}
		if !t.gone {
			errs = append(errs, t.detachAll()...)
		}
		for pid, rel := range t.others {
			if rel.stopped && !rel.vfork {
				errs = append(errs, t.removeBreakpoints(pid))
			}
			_ = detachQuietly(pid, 0)
		}
		if t.memw != nil {
			t.memw.Close()
		}
	})
	close(t.done)
	if err := t.tr.stop(); err != nil {
		errs = append(errs, fmt.Errorf("process %d: detaching: %w", t.pid, err))
	}
	t.modsMu.Lock()
	for _, img := range t.images {
		closeImage(img)
	}
	t.images = nil
	t.modsMu.Unlock()
	errs = append(errs, t.mem.close())
	return errors.Join(errs...)
}

// detachAll stops every thread, removes the breakpoints and detaches. It
// runs on the tracing thread.
func (t *Tracee) detachAll() []error {
	var errs []error
	if _, err := t.stopAll(); err != nil && !t.gone {
		// Threads that did not stop are released when the tracing thread
		// exits; the breakpoints must go in any case.
		errs = append(errs, err)
	}
	if t.gone {
		return errs
	}
	if err := t.removeBreakpoints(t.pid); err != nil {
		errs = append(errs, err)
	}
	t.pending = nil // their threads perform the return below
	for _, tid := range t.sortedTIDs() {
		th := t.threads[tid]
		if !th.stopped {
			continue
		}
		if th.watching {
			if err := clearWatch(tid); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("process %d: clearing the watch of thread %d: %w", t.pid, tid, err))
			}
			// The watched write may have happened just before the thread
			// was stopped: its debug trap (SIGTRAP) is then pending, and
			// delivered after the detach it would kill the program. Let
			// it arrive while traced, and drop it.
			if err := t.drainWatchTrap(tid); err != nil {
				errs = append(errs, err)
			}
		}
		if th.hit != 0 {
			if err := t.stepOverReturn(th); err != nil {
				errs = append(errs, err)
			}
		}
		if err := ptraceDetach(tid, th.signal); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("process %d: detaching from thread %d: %w", t.pid, tid, err))
		}
	}
	return errs
}

// getRegs reads a stopped thread's registers.
func getRegs(tid int) (target.Registers, error) {
	var r unix.PtraceRegs
	if err := unix.PtraceGetRegs(tid, &r); err != nil {
		return target.Registers{}, err
	}
	return target.Registers{
		R15: r.R15, R14: r.R14, R13: r.R13, R12: r.R12,
		Rbp: r.Rbp, Rbx: r.Rbx, R11: r.R11, R10: r.R10,
		R9: r.R9, R8: r.R8, Rax: r.Rax, Rcx: r.Rcx,
		Rdx: r.Rdx, Rsi: r.Rsi, Rdi: r.Rdi,
		OrigRax: r.Orig_rax, Rip: r.Rip, Cs: r.Cs, Eflags: r.Eflags,
		Rsp: r.Rsp, Ss: r.Ss,
		FSBase: r.Fs_base, GSBase: r.Gs_base,
		Ds: r.Ds, Es: r.Es, Fs: r.Fs, Gs: r.Gs,
	}, nil
}

// siginfo holds the fields of a siginfo_t that the Tracee needs.
type siginfo struct {
	signo, code int32
}

// getSiginfo reads the siginfo of a thread in a signal-delivery-stop.
func getSiginfo(tid int) (siginfo, error) {
	var buf [128]byte
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_GETSIGINFO, uintptr(tid), 0, uintptr(unsafe.Pointer(&buf[0])), 0, 0)
	if e != 0 {
		return siginfo{}, e
	}
	return siginfo{
		signo: int32(binary.LittleEndian.Uint32(buf[0:])),
		code:  int32(binary.LittleEndian.Uint32(buf[8:])),
	}, nil
}

// Snapshot is a Tracee with every thread stopped: a target.Target for a
// complete report. It is valid until the Tracee continues; Close does
// nothing (the Tracee owns the process).
type Snapshot struct {
	t       *Tracee
	threads []target.Thread
}

// PID implements target.Target.
func (s *Snapshot) PID() int { return s.t.pid }

// Threads implements target.Target.
func (s *Snapshot) Threads() []target.Thread { return append([]target.Thread(nil), s.threads...) }

// ReadMemory implements target.Target.
func (s *Snapshot) ReadMemory(addr uint64, buf []byte) error { return s.t.ReadMemory(addr, buf) }

// Modules implements target.Target.
func (s *Snapshot) Modules() []*target.Module {
	mods, _ := s.t.Modules()
	return mods
}

// Warnings implements target.Target.
func (s *Snapshot) Warnings() []string { return s.t.Warnings() }

// Close implements target.Target; the Tracee stays attached.
func (s *Snapshot) Close() error { return nil }

// Debug registers in the kernel's struct user (x86-64).
const (
	debugRegOffset = 848 // offsetof(struct user, u_debugreg)
	dr6            = debugRegOffset + 6*8
	dr7            = debugRegOffset + 7*8
	// dr7Write8 enables DR0 locally (bit 0), for writes (R/W0 = 01, bits
	// 16-17) of 8 bytes (LEN0 = 10, bits 18-19), with exact breakpoints
	// (LE, bit 8).
	dr7Write8 = 1 | 1<<8 | 1<<16 | 2<<18
	// trapHWBreakpoint is the si_code of a debug register's SIGTRAP.
	trapHWBreakpoint = 4
)

// WatchWrite makes the stopped thread tid stop (EventWatch) right after it
// next writes the 8 bytes at addr (8-aligned), with an x86 debug register
// of that thread alone: the other threads are not affected.
func (t *Tracee) WatchWrite(tid int, addr uint64) error {
	if addr%8 != 0 {
		return fmt.Errorf("process %d: cannot watch %#x: not 8-byte aligned", t.pid, addr)
	}
	var err error
	t.tr.do(func() {
		th := t.threads[tid]
		if th == nil || !th.stopped {
			err = fmt.Errorf("process %d: thread %d is not stopped", t.pid, tid)
			return
		}
		if err = pokeUser(tid, debugRegOffset, addr); err == nil {
			err = pokeUser(tid, dr7, dr7Write8)
		}
		if err != nil {
			err = fmt.Errorf("process %d: setting a watch in thread %d: %w", t.pid, tid, err)
			return
		}
		th.watching = true
	})
	return err
}

// Unwatch removes the watch WatchWrite set in the stopped thread tid, if
// any (a watch that has not fired: some virtual machines never deliver
// debug register traps).
func (t *Tracee) Unwatch(tid int) error {
	var err error
	t.tr.do(func() {
		th := t.threads[tid]
		if th == nil || !th.watching {
			return
		}
		if !th.stopped {
			err = fmt.Errorf("process %d: thread %d is not stopped", t.pid, tid)
			return
		}
		if err = pokeUser(tid, dr7, 0); err != nil {
			err = fmt.Errorf("process %d: removing the watch of thread %d: %w", t.pid, tid, err)
			return
		}
		th.watching = false
	})
	return err
}

// drainWatchTrap takes the SIGTRAP pending for the stopped thread tid,
// if there is one, and leaves the thread stopped without it.
func (t *Tracee) drainWatchTrap(tid int) error {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", t.pid, tid))
	if err != nil {
		return nil // the thread is gone
	}
	pending := false
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "SigPnd:"); ok {
			if m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && m&(1<<(unix.SIGTRAP-1)) != 0 {
				pending = true
			}
		}
	}
	if !pending {
		return nil
	}
	if err := unix.PtraceCont(tid, 0); err != nil {
		return fmt.Errorf("process %d: resuming thread %d into its pending trap: %w", t.pid, tid, err)
	}
	ws, err := waitPid(tid, unix.WALL|unix.WNOTHREAD)
	if err != nil {
		return fmt.Errorf("process %d: waiting for thread %d's pending trap: %w", t.pid, tid, err)
	}
	if !ws.Stopped() || ws.StopSignal() != unix.SIGTRAP {
		return fmt.Errorf("process %d: thread %d stopped with %v instead of its pending trap", t.pid, tid, ws)
	}
	return nil
}

// clearWatch disables the thread's debug registers.
func clearWatch(tid int) error {
	if err := pokeUser(tid, dr7, 0); err != nil {
		return err
	}
	return pokeUser(tid, dr6, 0)
}

func pokeUser(tid int, off uintptr, v uint64) error {
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_POKEUSR, uintptr(tid), off, uintptr(v), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

func peekUser(tid int, off uintptr) (uint64, error) {
	var v uint64
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_PEEKUSR, uintptr(tid), off, uintptr(unsafe.Pointer(&v)), 0, 0)
	if e != 0 {
		return 0, e
	}
	return v, nil
}
