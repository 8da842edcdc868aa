package ptrace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ompd-inspect/ompd-inspect/target"
)

// threadState is what the tracing thread knows of one traced thread.
type threadState struct {
	tid     int
	stopped bool // it reported a stop and stays in it until detach
	// signal is a signal the thread was about to receive when it stopped
	// (a signal-delivery-stop); Close delivers it again on detach.
	signal    int
	groupStop bool // it stopped in a job-control group stop
	foreign   bool // a new process (not a thread) traced through TRACECLONE
	polls     int  // polls that found it not yet stopped
	regs      target.Registers
}

// Attach stops every thread of process pid and returns it ready for
// inspection. Threads created while attaching are traced too; threads that
// exit meanwhile are dropped with a warning. On failure nothing stays
// attached.
//
// A process that ends while it is attached gives an error wrapping ErrGone
// (the same line as Alive's); one that executes a new program gives an
// error wrapping ErrExec; a signal on opts.Interrupt gives an
// *InterruptedError.
//
// The caller must `defer p.Close()` (and recover panics) so that the
// process is always released.
//
// Attach runs ptrace requests on a new locked OS thread that exits on
// Detach (or Close). A child the caller started with a parent-death signal
// (SysProcAttr.Pdeathsig) gets that signal if it was forked by the thread
// that becomes the tracing thread: start such children from a thread that
// never exits.
func Attach(pid int, opts Options) (*Process, error) {
	if opts.StopTries <= 0 {
		opts.StopTries = DefaultStopTries
	}
	if opts.StopInterval <= 0 {
		opts.StopInterval = DefaultStopInterval
	}
	if sig, ok := pendingSignal(opts.Interrupt); ok {
		return nil, &InterruptedError{PID: pid, Signal: sig}
	}
	st, err := precheck(pid)
	if err != nil {
		return nil, err
	}
	p := &Process{
		memView:    memView{pid: pid, endErr: errClosed},
		wasStopped: st.stateLetter() == 'T',
		interrupt:  opts.Interrupt,
		imageOpts:  opts.Images,
		tstate:     make(map[int]*threadState),
		seizes:     newSeizeWatch(),
		gone:       make(map[int]bool),
	}
	// What identifies the program the process runs now; compared once
	// every thread has stopped, it shows an exec that raced the attach.
	p.image, p.imageErr = execIdentity(pid)
	// The cache's memory is readied, and the modules' files opened and
	// prepared, while it still runs.
	p.cache = target.NewMemCache(p)
	// The memory cache's pages come first: in a fresh process, from
	// memory the heap never used, which the runtime need not clear (it
	// would clear memory the readied heap gave back, 3 ms for a thousand
	// threads' 20 MiB) and only the kernel populates. Then the heap is
	// readied, alone: the preparation's allocations and the caller's read
	// then lie in memory the kernel has backed instead of costing a
	// fault a page, before the stop and during it. Populating can take
	// tens of milliseconds when the host backs the memory again: a signal
	// that came meanwhile ends Attach after each step.
	p.reserveCache(opts.CachePagesPerThread, st.Threads)
	if sig, ok := pendingSignal(opts.Interrupt); ok {
		return nil, &InterruptedError{PID: pid, Signal: sig}
	}
	if n := readyHeapSize(st.Threads, opts.HeapPerThread); n > 0 {
		target.ReadyHeap(n)
		if sig, ok := pendingSignal(opts.Interrupt); ok {
			return nil, &InterruptedError{PID: pid, Signal: sig}
		}
	}
	// What is read before the stop is read through a live thread: a main
	// thread that has exited (pthread_exit) has no memory or mappings.
	earlyTID := pid
	if st.stateLetter() == 'Z' {
		if tid := firstLiveThread(pid); tid > 0 {
			earlyTID = tid
		}
	}
	early := p.openEarly(earlyTID, opts.Prepare)
	if sig, ok := p.waitPrepared(); ok {
		return nil, &InterruptedError{PID: pid, Signal: sig}
	}
	var rehearsed []uint64 // the pages the rehearsal read
	if opts.Rehearse != nil && st.Threads <= rehearsalMaxThreads {
		var sig syscall.Signal
		var interrupted bool
		if rehearsed, sig, interrupted = p.rehearse(opts.Rehearse, opts.RehearsalBudget, early); interrupted {
			return nil, &InterruptedError{PID: pid, Signal: sig}
		}
	}
	p.tr = startTracer()
	stopReaper := reapTracedZombies(pid, p.tr.tid, p.seizes.stuck)
	p.tr.do(func() {
		err = p.attachAll(opts)
		if err == nil && p.execed() {
			err = p.execError()
		}
		if err == nil {
			err = p.readRegisters()
		}
		if err != nil {
			p.abort()
		}
	})
	stopReaper()
	if err != nil {
		var ie *InterruptedError
		interrupted := errors.As(err, &ie)
		if !interrupted && !errors.Is(err, ErrExec) && p.execed() {
			// Whatever went wrong, the process now runs another program:
			// that is what happened.
			err = p.execError()
		}
		if serr := p.tr.stop(); serr != nil {
			if interrupted {
				ie.Err = serr
			} else {
				err = errors.Join(err, fmt.Errorf("process %d: detaching: %w", pid, serr))
			}
		}
		p.releaseEarly()
		return nil, err
	}
	for _, st := range p.tstate {
		if st.groupStop {
			p.wasStopped = true
		}
	}

	// Per-process files are read through a live thread: a main thread that
	// has exited (pthread_exit) no longer has memory or mappings.
	live := p.threads[0].TID
	p.mem = newMemReader(pid, live)
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", live))
	if err != nil {
		p.warnf("process %d: cannot read the executable's path: %v", pid, err)
		exe = ""
	}
	_, mods, warns, err := loadModules(pid, live, exe, &earlyFiles{fileOps: realFiles{opts.Images}, early: p.early})
	p.warnings = append(p.warnings, warns...)
	if err != nil {
		if cerr := p.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	for _, m := range mods {
		if m.img != nil {
			p.images = append(p.images, m.img)
		}
		p.modules = append(p.modules, m.targetModule(m.img))
	}
	if len(rehearsed) > 0 {
		// What the rehearsal read is what the caller reads first: a
		// thousand pages to a call now instead of a call a page.
		p.cache.Prefetch(rehearsed)
	}
	return p, nil
}

// DefaultRehearsalBudget bounds a rehearsal (Options.RehearsalBudget):
// past it, the view's reads fail, and what is left of the rehearsal ends
// at once. A rehearsal of a few threads takes a millisecond or two once
// the modules are prepared.
const DefaultRehearsalBudget = 200 * time.Millisecond

// rehearse calls f, on a goroutine of its own, with a view of the process
// as it runs (Running) over what openEarly listed, for at most budget
// (DefaultRehearsalBudget when not positive), and returns the pages f
// read, for Attach to read again once the process is stopped. A signal on
// the interrupt channel ends it at once: it returns the signal and true,
// and the images opened early are released once f has returned.
func (p *Process) rehearse(f func(*Running), budget time.Duration, early earlyListing) ([]uint64, syscall.Signal, bool) {
	if budget <= 0 {
		budget = DefaultRehearsalBudget
	}
	r := newRunning(p.pid, early)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Like Prepare's: the same work, done again once the process
		// is stopped, fails there with one line.
		defer func() { _ = recover() }()
		f(r)
	}()
	timer := time.NewTimer(budget)
	defer timer.Stop()
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		case <-timer.C:
			// Every read fails now: what is left ends at once.
			r.cancel()
		case s := <-p.interrupt: // a nil channel never delivers
			r.cancel()
			go func() {
				<-done
				_ = r.mem.close()
				p.releaseEarly()
			}()
			return nil, toSyscallSignal(s), true
		}
	}
	_ = r.mem.close()
	return r.pages(), 0, false
}

// reaperInterval is how often reapTracedZombies looks whether the
// tracing thread is stuck.
const reaperInterval = 20 * time.Millisecond

// seizeWatch shows whether the tracing thread is stuck in a PTRACE_SEIZE.
type seizeWatch struct {
	in   atomic.Bool  // the tracing thread is in a PTRACE_SEIZE
	done atomic.Int64 // PTRACE_SEIZE requests that returned
	last int64        // done at stuck's previous call (stuck's own)
}

func newSeizeWatch() *seizeWatch { return &seizeWatch{last: -1} }

// stuck reports whether the tracing thread is in a PTRACE_SEIZE and none
// returned since stuck's previous call: a seize that began just before
// counts too (a harmless extra look), one stuck for a whole interval
// always does. Only one goroutine calls it.
func (w *seizeWatch) stuck() bool {
	n := w.done.Load()
	s := w.in.Load() && n == w.last
	w.last = n
	return s
}

// reapTracedZombies reaps, until stopped, the threads of process pid that
// died while traced by the tracing thread tracerTID. It breaks a deadlock
// of exec with attaching: a thread that executes a program waits, holding
// the lock PTRACE_SEIZE needs, until the other threads are reaped; a
// traced thread is reaped by its tracer, and the tracing thread is then
// blocked in PTRACE_SEIZE. Any thread of ompd-inspect may reap it, so this
// goroutine does; the tracing thread then finds it gone (ECHILD) and drops
// it. The threads are looked at only when stuck says the tracing thread
// is in a PTRACE_SEIZE and none returned during the interval: reading
// the status of a thousand threads every interval slowed every attach.
func reapTracedZombies(pid, tracerTID int, stuck func() bool) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(reaperInterval)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			if !stuck() {
				continue
			}
			tids, err := listTasks(pid)
			if err != nil {
				continue
			}
			for _, tid := range tids {
				st, err := readStatus(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
				if err == nil && st.stateLetter() == 'Z' && st.TracerPid == tracerTID {
					var ws unix.WaitStatus
					_, _ = unix.Wait4(tid, &ws, unix.WNOHANG|unix.WALL, nil)
				}
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// precheck rejects what cannot be attached before any ptrace request, with
// the clearest message, and returns the process's status (its state says
// whether job control stopped it; its thread count how much cache to
// ready).
func precheck(pid int) (procStatus, error) {
	if pid <= 0 {
		return procStatus{}, fmt.Errorf("process %d: not a valid process id", pid)
	}
	self := os.Getpid()
	if pid == self {
		return procStatus{}, fmt.Errorf("process %d: cannot attach to ompd-inspect's own process", pid)
	}
	st, err := readStatus(fmt.Sprintf("/proc/%d/status", pid))
	if errors.Is(err, fs.ErrNotExist) {
		return procStatus{}, fmt.Errorf("process %d: %w", pid, unix.ESRCH)
	}
	if err != nil {
		return procStatus{}, fmt.Errorf("process %d: %w", pid, err)
	}
	if st.Tgid == self {
		return procStatus{}, fmt.Errorf("process %d: cannot attach to a thread of ompd-inspect's own process", pid)
	}
	if st.Tgid != pid {
		return procStatus{}, fmt.Errorf("process %d: is a thread of process %d; attach to %d instead", pid, st.Tgid, st.Tgid)
	}
	if kt, err := isKernelThread(pid); err == nil && kt {
		return procStatus{}, fmt.Errorf("process %d: is a kernel thread (%s) and has no user memory to inspect", pid, st.Name)
	}
	switch st.stateLetter() {
	case 'X':
		return procStatus{}, fmt.Errorf("process %d: %w", pid, unix.ESRCH)
	case 'Z':
		// A zombie main thread with live threads is a process that called
		// pthread_exit in main: still worth inspecting.
		if tids, err := listTasks(pid); err != nil || len(tids) <= 1 {
			// Or the main thread of a process that another thread is
			// executing a new program in: the executing thread takes its
			// place, and the status read before that showed the old one.
			again, aerr := readStatus(fmt.Sprintf("/proc/%d/status", pid))
			switch {
			case errors.Is(aerr, fs.ErrNotExist):
				return procStatus{}, fmt.Errorf("process %d: %w", pid, unix.ESRCH)
			case aerr != nil || again.stateLetter() == 'Z' || again.Tgid != pid:
				return procStatus{}, fmt.Errorf("process %d: is a zombie (it has exited and its parent has not reaped it); there is nothing to inspect", pid)
			}
			st = again
		}
	}
	if st.TracerPid != 0 {
		tpid, name := tracerOf(st.TracerPid)
		return procStatus{}, &AlreadyTracedError{PID: pid, TracerPID: tpid, TracerName: name}
	}
	return st, nil
}

// warnf records a warning.
func (p *Process) warnf(format string, args ...any) {
	p.warnings = append(p.warnings, fmt.Sprintf(format, args...))
}

// drop forgets a thread that exited while attaching.
func (p *Process) drop(tid int, format string) {
	delete(p.tstate, tid)
	p.gone[tid] = true
	p.warnf(format, tid)
}

const (
	warnExitedWhileAttaching = "thread %d exited while attaching; it is not listed"
	warnHasExited            = "thread %d has exited; it is not listed"
)

// goneError is the error of a process that ended while it was attached:
// the same line as Alive's.
func (p *Process) goneError() error {
	return fmt.Errorf("process %d: %w while it was being read (killed, or it exited); nothing is reported", p.pid, ErrGone)
}

// execError is the error of a process that executed a new program while
// it was being attached.
func (p *Process) execError() error {
	return fmt.Errorf("process %d: %w; try again", p.pid, ErrExec)
}

// checkInterrupt returns an *InterruptedError when a signal has arrived
// on Options.Interrupt.
func (p *Process) checkInterrupt() error {
	if sig, ok := pendingSignal(p.interrupt); ok {
		return &InterruptedError{PID: p.pid, Signal: sig, Attached: p.seized > 0}
	}
	return nil
}

// execIdentity returns what identifies the program image process pid runs:
// its auxiliary vector and the 16 random bytes the kernel put on the new
// stack for it (AT_RANDOM). Both change with every exec; the random bytes
// also when address space randomization is off.
func execIdentity(pid int) ([]byte, error) {
	auxv, err := os.ReadFile(fmt.Sprintf("/proc/%d/auxv", pid))
	if err != nil {
		return nil, err
	}
	m := newMemReader(pid, pid)
	defer m.close()
	id, err := identityOf(auxv, m.ReadPages)
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", pid, err)
	}
	return id, nil
}

// identityOf joins an auxiliary vector and the random bytes its AT_RANDOM
// entry points to, read with read. Random bytes it cannot read are an
// error, not a shorter identity: a process that is being killed may still
// show its auxiliary vector when its memory is gone, and a shorter
// identity would pass for another program.
func identityOf(auxv []byte, read func(addr uint64, buf []byte) (int, error)) ([]byte, error) {
	if len(auxv) == 0 {
		return nil, errors.New("empty auxiliary vector")
	}
	id := append([]byte(nil), auxv...)
	for i := 0; i+16 <= len(auxv); i += 16 {
		if binary.LittleEndian.Uint64(auxv[i:]) != atRandom {
			continue
		}
		addr := binary.LittleEndian.Uint64(auxv[i+8:])
		random := make([]byte, 16)
		n, err := read(addr, random)
		if err == nil && n < len(random) {
			err = fmt.Errorf("read %d of %d bytes", n, len(random))
		}
		if err != nil {
			return nil, fmt.Errorf("reading the AT_RANDOM bytes at %#x: %w", addr, err)
		}
		return append(id, random...), nil
	}
	return id, nil
}

// reserveCache readies the memory cache for perThread pages per thread of
// the process (target.MemCache.Reserve), by the thread count its status
// gave before the attach. Threads that come later are read into memory
// readied as they are.
func (p *Process) reserveCache(perThread, threads int) {
	if perThread > 0 && threads > 0 {
		p.cache.Reserve(min(threads*perThread, maxReservedPages))
	}
}

// maxReservedPages bounds the pages reserveCache readies (64 MiB); reads
// beyond them get memory as they come.
const maxReservedPages = 16384

// maxReadyHeap bounds the heap Attach readies for the caller (32 MiB);
// the memory cache's pages are apart, bounded by maxReservedPages.
const maxReadyHeap = 32 << 20

// minReadyHeap is the least heap Attach readies (8 MiB): the
// preparation allocates about 0.5 MiB on a warm cache, a few threads'
// read about as much, and 4 MiB readied left the read 0.1 ms slower than
// 8 (medians of 30).
const minReadyHeap = 8 << 20

// readyHeapSize is how much heap Attach readies for a process of threads
// threads when the caller allocates perThread bytes a thread while it is
// stopped: at most maxReadyHeap, at least minReadyHeap; none when
// perThread is not positive.
//
// It is readied before the preparation, not beside it as it was: the
// heap the read then allocates from lies in the readied pages, where
// beside the preparation some of it did not, and cost a fault a page
// (15 to 20 µs on a virtual machine) while the process was held. Readied
// first, at 4 threads the time held went from 2.75-3.55 to 2.25-2.85 ms
// and the read from 1.4-1.65 to 1.05-1.4 ms (medians of 30, side by
// side; docs/benchmarks.md). The memory cache's pages were readied in
// it until the ninth round; they are reserved apart now, before it.
func readyHeapSize(threads, perThread int) int {
	if perThread <= 0 || threads < 0 {
		return 0
	}
	heap := maxReadyHeap
	if threads < maxReadyHeap/perThread {
		heap = threads * perThread
	}
	return max(heap, minReadyHeap)
}

// atRandom is the auxiliary vector's AT_RANDOM tag.
const atRandom = 25

// execed reports whether the process now runs another program image than
// when Attach began. A process caught in the middle of an exec has no
// auxiliary vector yet: one that has one now has executed a new program.
// (One whose main thread has exited has none before or after.)
func (p *Process) execed() bool {
	id, err := execIdentity(p.pid)
	return err == nil && (p.imageErr != nil || !bytes.Equal(id, p.image))
}

// vanished explains why no thread is left to attach, though precheck found
// the process: it executed a new program (the kernel kills the other
// threads and gives the executing one the process id), or it ended.
func (p *Process) vanished() error {
	if p.execed() {
		return p.execError()
	}
	return p.goneError()
}

// attachAll seizes and interrupts every thread, re-reading the task list
// until a read made while all known threads are stopped shows no new one.
// It runs on the tracing thread.
func (p *Process) attachAll(opts Options) error {
	for round := 0; ; round++ {
		if err := p.checkInterrupt(); err != nil {
			return err
		}
		if round == maxAttachRounds {
			return fmt.Errorf("process %d: new threads kept appearing after %d rounds of attaching", p.pid, round)
		}
		if round > 0 && p.allStopped() && p.holdsEveryThread() {
			return nil
		}
		p.listings++
		tids, err := listTasks(p.pid)
		if errors.Is(err, fs.ErrNotExist) {
			return p.vanished()
		}
		if err != nil {
			return fmt.Errorf("process %d: listing threads: %w", p.pid, err)
		}
		added := 0
		for _, tid := range tids {
			if p.tstate[tid] != nil || p.gone[tid] {
				continue
			}
			ok, err := p.seize(tid, opts)
			if err != nil {
				return err
			}
			if ok {
				added++
			}
			if err := p.checkInterrupt(); err != nil {
				return err
			}
		}
		if len(p.tstate) == 0 {
			return p.vanished()
		}
		if added == 0 && p.allStopped() {
			return nil
		}
		if err := p.waitStopped(opts); err != nil {
			return err
		}
	}
}

// holdsEveryThread reports whether the process has as many threads as
// Attach holds stopped (foreign processes aside): then no thread is
// missing, since those held cannot exit meanwhile, and the task list need
// not be read again (1024 threads: 3 to 5 ms of the stop). A count that
// differs, or cannot be read, says nothing: the list is read.
func (p *Process) holdsEveryThread() bool {
	st, err := readStatus(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil || st.Threads <= 0 {
		return false
	}
	held := 0
	for _, ts := range p.tstate {
		if !ts.foreign {
			held++
		}
	}
	return st.Threads == held
}

// seizeOptions are the ptrace options of the threads Attach seizes: new
// threads are traced too, and an exec stops the thread that executes.
const seizeOptions = unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_TRACEEXEC

// seize attaches to one thread and asks it to stop. It reports whether the
// thread is now traced; a thread that has exited is dropped.
func (p *Process) seize(tid int, opts Options) (bool, error) {
	for attempt := 0; ; attempt++ {
		seized, again, err := p.seizeOnce(tid, opts)
		if !again || attempt == epermRetries {
			return seized, err
		}
	}
}

// epermRetries is how many times seize tries again after a refusal
// (EPERM) that nothing in /proc explains. Another thread's exec makes one:
// the kernel refuses the old group leader, exiting, and then gives its
// id to the executing thread, which /proc shows running and untraced by
// the time the refusal is looked into. Seizing again attaches to that
// thread (and Attach then sees the exec); a refusal that stands, as for
// another user's process, is refused again at once.
const epermRetries = 2

// seizeOnce is one attempt of seize; again reports an unexplained EPERM,
// err then being the refusal to report if it stands.
func (p *Process) seizeOnce(tid int, opts Options) (seized, again bool, err error) {
	p.seizes.in.Store(true)
	if opts.refuseSeize != nil {
		err = opts.refuseSeize(tid)
	}
	if err == nil {
		err = ptraceSeize(tid, seizeOptions)
	}
	p.seizes.done.Add(1)
	p.seizes.in.Store(false)
	switch {
	case err == nil:
		p.seized++
		p.tstate[tid] = &threadState{tid: tid}
		if opts.afterSeize != nil {
			opts.afterSeize(tid)
		}
		if p.stopBegan.IsZero() {
			// The first stop: PTRACE_SEIZE alone stops nothing. An
			// Attach that returns a process has interrupted a thread:
			// those TRACECLONE attaches follow a seized one.
			p.stopBegan = time.Now()
		}
		if err := unix.PtraceInterrupt(tid); err != nil && !errors.Is(err, unix.ESRCH) {
			return true, false, fmt.Errorf("process %d: interrupting thread %d: %w", p.pid, tid, err)
		}
		// On ESRCH the thread is exiting: its exit is reported by wait.
		return true, false, nil
	case errors.Is(err, unix.ESRCH):
		p.drop(tid, warnExitedWhileAttaching)
		return false, false, nil
	case errors.Is(err, unix.EPERM):
		st, serr := readStatus(fmt.Sprintf("/proc/%d/task/%d/status", p.pid, tid))
		if errors.Is(serr, fs.ErrNotExist) {
			p.drop(tid, warnExitedWhileAttaching)
			return false, false, nil
		}
		if serr == nil {
			switch {
			case st.stateLetter() == 'Z' || st.stateLetter() == 'X':
				p.drop(tid, warnHasExited)
				return false, false, nil
			case st.TracerPid == p.tr.tid:
				// Created by a thread already seized: PTRACE_O_TRACECLONE
				// attached it, and it starts with a PTRACE_EVENT_STOP.
				p.tstate[tid] = &threadState{tid: tid}
				return true, false, nil
			case st.TracerPid != 0:
				tpid, name := tracerOf(st.TracerPid)
				return false, false, &AlreadyTracedError{PID: p.pid, TracerPID: tpid, TracerName: name}
			case taskExiting(p.pid, tid):
				// Killed, exiting, or killed by another thread's exec:
				// the kernel refuses to attach to an exiting thread.
				p.drop(tid, warnExitedWhileAttaching)
				return false, false, nil
			}
		}
		return false, true, fmt.Errorf("process %d: attaching refused: %w; %s", p.pid, err, permissionHint())
	default:
		return false, false, fmt.Errorf("process %d: attaching to thread %d: %w", p.pid, tid, err)
	}
}

// allStopped reports whether every traced thread has stopped.
func (p *Process) allStopped() bool {
	for _, st := range p.tstate {
		if !st.stopped {
			return false
		}
	}
	return true
}

// sortedTIDs returns the traced TIDs, the main thread first, then
// ascending.
func (p *Process) sortedTIDs() []int { return mainFirst(p.pid, p.tstate) }

// pfExiting is the kernel's PF_EXITING task flag (field 9 of
// /proc/PID/task/TID/stat): the thread is on its way out.
const pfExiting = 0x4

// taskExiting reports whether thread tid of process pid is exiting.
func taskExiting(pid, tid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
	if err != nil {
		return false
	}
	// The fields start after the command name's last ')'; flags is the
	// seventh of them (field 9).
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return false
	}
	f := bytes.Fields(data[i+1:])
	if len(f) < 7 {
		return false
	}
	flags, err := strconv.ParseUint(string(f[6]), 10, 64)
	return err == nil && flags&pfExiting != 0
}

// statusEvery is how many polls without a stop pass before waitStopped
// looks at the thread in /proc, and again after as many more.
const statusEvery = 20

// recheck looks at a traced thread that has not reported its stop after
// statusEvery polls. A thread whose exit will not be reported soon (gone
// from /proc, a zombie: a main thread's exit is reported only after every
// other thread's) is dropped, and so is one no longer traced by this
// tracer (the main thread after another thread's exec, which the
// comparison of program images then reports). A thread still traced is
// interrupted again: seizing it may have raced an exec that changed its
// thread id. It reports whether the thread was dropped, and runs on the
// tracing thread.
func (p *Process) recheck(tid int) bool {
	st, err := readStatus(fmt.Sprintf("/proc/%d/task/%d/status", p.pid, tid))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.drop(tid, warnExitedWhileAttaching)
		return true
	case err != nil:
		return false
	case st.stateLetter() == 'Z' || st.stateLetter() == 'X':
		p.drop(tid, warnHasExited)
		return true
	case st.TracerPid != p.tr.tid:
		p.drop(tid, warnExitedWhileAttaching)
		return true
	case st.stateLetter() == 'D' && p.reapStopped():
		// It may be executing a program: it then waits, uninterruptibly,
		// until the other threads are reaped, and a thread that died
		// after it stopped is reaped by nobody else. Once they are, it
		// stops at its exec.
		return true
	}
	_ = unix.PtraceInterrupt(tid) // best effort; ESRCH: its exit is on its way
	return false
}

// reapStopped reaps the threads that stopped and then died (killed by
// another thread's exec, which waits for them), and reports whether
// there were any. waitStopped waits only for threads not yet stopped.
func (p *Process) reapStopped() bool {
	reaped := false
	for _, tid := range p.sortedTIDs() {
		st := p.tstate[tid]
		if st == nil || !st.stopped {
			continue
		}
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(tid, &ws, unix.WNOHANG|unix.WALL, nil)
		switch {
		case errors.Is(err, unix.ECHILD):
			p.drop(tid, warnExitedWhileAttaching)
			reaped = true
		case err == nil && wpid == tid && (ws.Exited() || ws.Signaled()):
			_ = p.handleWait(st, ws) // drops it
			reaped = true
		}
	}
	return reaped
}

// waitStopped polls every traced thread that has not stopped yet until all
// have, each at most opts.StopTries times. A round in which no thread
// stopped is followed by a pause of firstStopPause, doubling up to
// opts.StopInterval: most threads stop within tens of microseconds.
func (p *Process) waitStopped(opts Options) error {
	first := min(firstStopPause, opts.StopInterval)
	pause := first
	for !p.allStopped() {
		if err := p.checkInterrupt(); err != nil {
			return err
		}
		progress := false
		for _, tid := range p.sortedTIDs() {
			st := p.tstate[tid]
			if st == nil || st.stopped {
				continue
			}
			var ws unix.WaitStatus
			wpid, err := unix.Wait4(tid, &ws, unix.WNOHANG|unix.WALL, nil)
			switch {
			case errors.Is(err, unix.EINTR):
				continue
			case errors.Is(err, unix.ECHILD):
				// No longer ours to wait for: it has gone.
				p.drop(tid, warnExitedWhileAttaching)
				progress = true
				continue
			case err != nil:
				return fmt.Errorf("process %d: waiting for thread %d to stop: %w", p.pid, tid, err)
			case wpid == 0:
				st.polls++
				if (st.polls%statusEvery == 0 || st.polls >= opts.StopTries) && p.recheck(tid) {
					progress = true
					continue
				}
				if st.polls >= opts.StopTries {
					return p.notStoppingError(tid, st.polls)
				}
				continue
			}
			progress = true
			if err := p.handleWait(st, ws); err != nil {
				return err
			}
		}
		if !progress {
			if opts.onPause != nil {
				opts.onPause(pause)
			}
			sleepThread(pause)
			pause = min(pause*2, opts.StopInterval)
		} else {
			pause = first
		}
	}
	return nil
}

// firstStopPause is waitStopped's first pause.
const firstStopPause = 25 * time.Microsecond

// sleepThread blocks the calling OS thread for d, again for what is left
// when a signal interrupts it (the Go runtime's own signals, SIGCHLD from
// the tracees). On the tracing thread, which is locked to its goroutine,
// time.Sleep took 1.3 to 1.9 ms for 500 µs: the goroutine is woken by
// the runtime's timers, at millisecond resolution, then handed back to
// the locked thread.
func sleepThread(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for {
		var left unix.Timespec
		if err := unix.Nanosleep(&ts, &left); !errors.Is(err, unix.EINTR) {
			return // done, or d was not a valid time (nothing to wait)
		}
		ts = left
	}
}

// notStoppingError names a thread that did not stop, with its state.
func (p *Process) notStoppingError(tid, tries int) error {
	state := "unknown"
	if st, err := readStatus(fmt.Sprintf("/proc/%d/task/%d/status", p.pid, tid)); err == nil {
		state = st.State
	}
	return fmt.Errorf("process %d: thread %d did not stop after %d tries (state %s); detached from the process", p.pid, tid, tries, state)
}

// isStopSignal reports whether sig is a job-control stop signal.
func isStopSignal(sig syscall.Signal) bool {
	switch sig {
	case unix.SIGSTOP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
		return true
	}
	return false
}

// handleWait interprets a wait status of a traced thread.
func (p *Process) handleWait(st *threadState, ws unix.WaitStatus) error {
	tid := st.tid
	if ws.Exited() || ws.Signaled() {
		if st.foreign {
			delete(p.tstate, tid)
			return nil
		}
		p.drop(tid, warnExitedWhileAttaching)
		return nil
	}
	if !ws.Stopped() {
		return nil
	}
	sig := ws.StopSignal()
	switch event := int(ws>>16) & 0xff; event {
	case unix.PTRACE_EVENT_CLONE:
		// The thread created a task, which TRACECLONE attached. The clone
		// stop answered the interrupt: interrupt again and let the thread
		// finish its system call, so that it stops on its way back out.
		msg, err := unix.PtraceGetEventMsg(tid)
		if err == nil {
			p.adopt(int(msg), tid)
		} else if !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("process %d: reading the clone event of thread %d: %w", p.pid, tid, err)
		}
		if err := unix.PtraceInterrupt(tid); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("process %d: interrupting thread %d: %w", p.pid, tid, err)
		}
		if err := unix.PtraceCont(tid, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("process %d: resuming thread %d after its clone: %w", p.pid, tid, err)
		}
		return nil
	case unix.PTRACE_EVENT_EXEC:
		// A thread executed a new program: the kernel has killed the
		// other threads and given it the process id. The thread stays
		// stopped until abort detaches it.
		st.stopped = true
		if !st.foreign {
			return p.execError()
		}
	case unix.PTRACE_EVENT_STOP:
		// The interrupt, the first stop of a thread TRACECLONE attached, or
		// a group stop (the signal is then the stop signal).
		st.stopped = true
		st.groupStop = isStopSignal(sig)
	case 0:
		// A signal-delivery-stop: the thread was about to receive sig.
		// Keep it stopped; Close delivers sig again.
		st.stopped = true
		st.signal = int(sig)
	default:
		// An event we did not ask for; the thread is stopped all the same.
		st.stopped = true
	}
	if st.foreign {
		// Not a thread of the process: let it go at once.
		if err := ptraceDetach(tid, st.signal); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("process %d: detaching from process %d: %w", p.pid, tid, err)
		}
		delete(p.tstate, tid)
	}
	return nil
}

// adopt records a task that TRACECLONE attached when thread parent created
// it. A new process (a clone without CLONE_THREAD) is detached as soon as
// it stops.
func (p *Process) adopt(tid, parent int) {
	if p.tstate[tid] != nil {
		return
	}
	delete(p.gone, tid)
	st := &threadState{tid: tid}
	if s, err := readStatus(fmt.Sprintf("/proc/%d/status", tid)); err == nil && s.Tgid != p.pid {
		st.foreign = true
		p.warnf("process %d, created by thread %d while attaching, was left alone", tid, parent)
	}
	p.tstate[tid] = st
}

// readRegisters fetches every thread's registers and builds the thread
// list. It runs on the tracing thread.
func (p *Process) readRegisters() error {
	for _, tid := range p.sortedTIDs() {
		regs, err := getRegs(tid)
		if err != nil {
			if errors.Is(err, unix.ESRCH) {
				// Killed while stopped: it is no longer in a ptrace stop.
				p.drop(tid, warnExitedWhileAttaching)
				continue
			}
			return fmt.Errorf("process %d: reading the registers of thread %d: %w", p.pid, tid, err)
		}
		st := p.tstate[tid]
		st.regs = regs
		p.threads = append(p.threads, target.Thread{TID: tid, Regs: st.regs})
	}
	if len(p.threads) == 0 {
		return p.vanished()
	}
	return nil
}

// abort releases whatever a failed attach holds: stopped threads are
// detached here (with their pending signal); threads that never stopped
// cannot be, and are released by the kernel when the tracing thread exits.
// It runs on the tracing thread.
func (p *Process) abort() {
	for _, tid := range p.sortedTIDs() {
		if st := p.tstate[tid]; st.stopped {
			_ = ptraceDetach(tid, st.signal) // best effort; thread exit finishes the job
		}
	}
}

// detachAll detaches every thread, delivering again the signals threads
// stopped with. It runs on the tracing thread.
func (p *Process) detachAll() []error {
	var errs []error
	for _, tid := range p.sortedTIDs() {
		st := p.tstate[tid]
		if !st.stopped {
			continue
		}
		if err := ptraceDetach(tid, st.signal); err != nil && !errors.Is(err, unix.ESRCH) {
			// ESRCH: killed meanwhile, or no longer stopped; the tracing
			// thread's exit releases it.
			errs = append(errs, fmt.Errorf("process %d: detaching from thread %d: %w", p.pid, tid, err))
		}
	}
	return errs
}
