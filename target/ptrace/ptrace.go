// Package ptrace reaches a live Linux x86-64 process: it stops every thread
// with ptrace, reads registers, memory and the loaded ELF modules, and
// detaches leaving the process as it was found.
//
// Attaching uses PTRACE_SEIZE and PTRACE_INTERRUPT rather than
// PTRACE_ATTACH, so no SIGSTOP is ever sent: a running process runs on after
// Close, a process stopped by job control stays stopped, and if ompd-inspect
// dies (even by SIGKILL) the kernel detaches and the process keeps running.
//
// Callers must `defer p.Close()` right after Attach and recover panics in
// the goroutine that holds the Process, so that a failure detaches cleanly;
// a CLI should also catch SIGINT, SIGTERM and SIGHUP before Attach, pass
// them as Options.Interrupt, and call DetachOnSignals once attached.
package ptrace

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ompd-inspect/ompd-inspect/target"

	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// Options tunes Attach. The zero value is ready to use.
type Options struct {
	// Images says where the separate debug files of the process's
	// modules are looked for besides the default places.
	Images elf.OpenOptions
	// StopTries bounds how many times Attach polls a thread for its stop
	// before giving up on the process (a thread in uninterruptible sleep
	// does not stop until it wakes). Zero means DefaultStopTries.
	StopTries int
	// StopInterval is the longest pause between polling rounds in which
	// no thread stopped (the first pauses are shorter). Zero means
	// DefaultStopInterval.
	StopInterval time.Duration
	// Interrupt, when not nil, lets the caller stop an Attach in progress:
	// Attach looks at it before its first request, after every thread it
	// seizes and at every polling round, and when a signal has arrived it
	// releases every thread seized so far and returns an
	// *InterruptedError. A CLI passes the channel it gave signal.Notify
	// for SIGINT, SIGTERM and SIGHUP, so that the user's interrupt is
	// answered from the start of the attach; DetachOnSignals then watches
	// the same channel, so a signal that arrives after Attach's last look
	// is handled there.
	Interrupt <-chan os.Signal

	// Prepare, when not nil, is called for the image of every module
	// Attach opens, before the process is stopped, each in a goroutine of
	// its own: it does the work on the module's files that the caller
	// will need (loading symbols, call frame information, debug
	// information) while the process still runs. Attach waits for every
	// call to return before it stops the process.
	Prepare func(*elf.Image)

	// CachePagesPerThread, when positive, is how many pages of memory
	// cache per thread Attach readies while the process still runs
	// (target.MemCache.Reserve), for the reads the caller will make while
	// it is stopped: a page read into fresh memory costs a page fault.
	CachePagesPerThread int

	// HeapPerThread, when positive, is how many bytes of Go heap per
	// thread the caller allocates while the process is stopped. Attach
	// then readies (target.ReadyHeap) that much heap, at most 32 MiB and
	// at least 8 MiB, after the memory cache's pages and before it opens
	// and prepares the modules' files. When it is not positive no heap
	// is readied.
	HeapPerThread int

	// Rehearse, when not nil, is called once before the process is
	// stopped, after the modules' images are prepared, with a view of the
	// process as it runs (Running): the caller reads there what it will
	// read once the process is stopped, and pays before the stop the
	// first-time costs of reading it (code and indexes first touched,
	// caches filled) instead of while the process is held. What it reads
	// may be torn: what it keeps must be what the process cannot change
	// as it runs, and nothing once its view has ended. Once the process
	// is stopped and its modules listed again, the pages it read are
	// read again into the stop's cache, a thousand to a call. It runs on
	// a goroutine of its own: after RehearsalBudget the view's reads
	// fail, and a signal on Interrupt ends Attach at once. A panic in it
	// is dropped. It is skipped for a process of more than 64 threads.
	Rehearse func(*Running)
	// RehearsalBudget is how long Rehearse may read; zero means
	// DefaultRehearsalBudget.
	RehearsalBudget time.Duration

	// afterSeize, when set (by tests), runs on the tracing thread after a
	// thread has been seized and before it is interrupted.
	afterSeize func(tid int)
	// refuseSeize, when set (by tests), is asked before each
	// PTRACE_SEIZE; an error it returns is taken as the seize's, which is
	// then not made.
	refuseSeize func(tid int) error
	// onPause, when set (by tests), is told each pause Attach makes while
	// it waits for threads to stop.
	onPause func(time.Duration)
}

// Defaults for Options: 6000 polls, all but the first few of a round 500µs
// apart, wait about three seconds for a thread to stop.
const (
	// DefaultStopTries is the StopTries used when Options leaves it zero.
	DefaultStopTries = 6000
	// DefaultStopInterval is the StopInterval used when Options leaves it
	// zero.
	DefaultStopInterval = 500 * time.Microsecond
)

// maxAttachRounds bounds how often Attach re-reads the task list when new
// threads keep appearing.
const maxAttachRounds = 1000

// Process is a live process stopped under ptrace. It implements
// target.Target. Its methods may be called from any goroutine.
type Process struct {
	// memView reads the process's memory, until Detach ends it (its pid
	// is the process's).
	memView
	// imageOpts says where the modules' debug files are looked for.
	imageOpts  elf.OpenOptions
	wasStopped bool
	tr         *tracer
	// interrupt is Options.Interrupt; seized counts the threads Attach
	// seized (some may have been dropped since).
	interrupt <-chan os.Signal
	seized    int
	listings  int // times Attach read the task list
	// image identifies the program the process ran when Attach began
	// (execIdentity), unless imageErr says why it could not be read.
	image    []byte
	imageErr error

	// Owned by the tracing thread until Attach returns, read-only after.
	tstate map[int]*threadState // by TID
	gone   map[int]bool         // TIDs dropped while attaching

	threads  []target.Thread
	modules  []*target.Module
	images   []image // opened images, closed by Close
	warnings []string

	// seizes tells the zombie reaper when the tracing thread is stuck
	// in a PTRACE_SEIZE (reapTracedZombies).
	seizes *seizeWatch

	// stopBegan is when Attach interrupted the first thread; released, when
	// Detach had detached them (Released).
	stopBegan, released time.Time

	// early are the images opened before the process was stopped, by
	// file name, that the modules have not taken (openEarly); prepared
	// counts the Prepare calls still running on them.
	early    map[string]image
	prepared sync.WaitGroup

	detachOnce sync.Once
	detachErr  error
	closeOnce  sync.Once
	closeErr   error
}

// Compile-time checks that Process provides what target needs.
var (
	_ target.Target     = (*Process)(nil)
	_ target.PageReader = (*Process)(nil)
)

// AlreadyTracedError reports that another tracer (a debugger, strace, or
// another ompd-inspect) already traces the process. It unwraps to EPERM.
type AlreadyTracedError struct {
	// PID is the process Attach was asked for.
	PID int
	// TracerPID is the process that owns the tracing thread.
	TracerPID int
	// TracerName is that process's command name, empty when unknown.
	TracerName string
}

// Error returns "process N is already traced by process M (name)".
func (e *AlreadyTracedError) Error() string {
	if e.TracerName == "" {
		return fmt.Sprintf("process %d is already traced by process %d", e.PID, e.TracerPID)
	}
	return fmt.Sprintf("process %d is already traced by process %d (%s)", e.PID, e.TracerPID, e.TracerName)
}

// Unwrap returns the EPERM that PTRACE_SEIZE failed with.
func (e *AlreadyTracedError) Unwrap() error { return unix.EPERM }

// ErrExec is wrapped by the error of an Attach during which the process
// executed a new program: the threads seized before the exec are gone and
// the new image has just started, so nothing consistent can be read.
var ErrExec = errors.New("it executed a new program (exec) while being attached")

// InterruptedError reports that Attach was stopped by a signal that
// arrived on Options.Interrupt (or that a caller interrupted its own work
// on a process it had attached and detached). Nothing stays attached
// unless Err says detaching failed.
type InterruptedError struct {
	// PID is the process Attach was asked for.
	PID int
	// Signal is the signal that arrived.
	Signal syscall.Signal
	// Attached reports whether any thread had been seized (and was
	// released again) when the signal came.
	Attached bool
	// Err is what went wrong while detaching; nil when all went well.
	Err error
}

// Error returns the line a CLI prints after "ompd-inspect: ", the same as
// DetachOnSignals prints: "SIGINT: detached from process N", or
// "SIGINT: interrupted before attaching to process N" when nothing had
// been attached, or "SIGINT: detaching from process N: ..." when
// detaching failed.
func (e *InterruptedError) Error() string {
	name := signalName(e.Signal)
	switch {
	case e.Err != nil:
		return fmt.Sprintf("%s: detaching from process %d: %s", name, e.PID, strings.ReplaceAll(e.Err.Error(), "\n", "; "))
	case !e.Attached:
		return fmt.Sprintf("%s: interrupted before attaching to process %d", name, e.PID)
	}
	return fmt.Sprintf("%s: detached from process %d", name, e.PID)
}

// ExitCode is the exit status a CLI ends with after the interrupt:
// 128 + the signal number, as a shell reports death by that signal.
func (e *InterruptedError) ExitCode() int { return 128 + int(e.Signal) }

// signalName returns "SIGINT" for SIGINT, and the signal's description
// for a signal without a name.
func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return sig.String()
}

// pendingSignal returns the signal waiting on ch, if any, without
// blocking.
func pendingSignal(ch <-chan os.Signal) (syscall.Signal, bool) {
	if ch == nil {
		return 0, false
	}
	select {
	case s := <-ch:
		return toSyscallSignal(s), true
	default:
		return 0, false
	}
}

// toSyscallSignal returns s as a signal number, 0 when it is not one.
func toSyscallSignal(s os.Signal) syscall.Signal {
	if ss, ok := s.(syscall.Signal); ok {
		return ss
	}
	return 0
}

// PID returns the process id.
func (p *Process) PID() int { return p.pid }

// StopBegan returns when Attach interrupted the process's first thread
// (PTRACE_INTERRUPT; seizing a thread stops nothing): the process has
// been held stopped since, until Detach. The modules' files were opened
// before, and the tracing thread had been handed the work.
func (p *Process) StopBegan() time.Time { return p.stopBegan }

// Released returns when Detach had detached the last stopped thread,
// before it waited for the tracing thread to exit (the zero time before
// Detach). From StopBegan to Released the target was held stopped. Read
// it once Detach (or Close) has returned.
func (p *Process) Released() time.Time { return p.released }

// WasStopped reports whether the process was stopped by job control
// (/proc state T) before Attach; Close leaves it stopped then.
func (p *Process) WasStopped() bool { return p.wasStopped }

// Threads lists the stopped threads with their registers, the main thread
// first when it still exists, then by ascending TID.
func (p *Process) Threads() []target.Thread {
	return append([]target.Thread(nil), p.threads...)
}

// Modules lists the ELF files mapped into the process, the executable
// first, then by address. Their Images are closed by Close.
func (p *Process) Modules() []*target.Module {
	return append([]*target.Module(nil), p.modules...)
}

// ModuleAt implements target.ModuleFinder.
func (p *Process) ModuleAt(addr uint64) *target.Module { return target.ModuleIn(p.modules, addr) }

// Warnings lists what Attach noticed and worked around: threads that exited
// while attaching, deleted or unreadable module files.
func (p *Process) Warnings() []string {
	return append([]string(nil), p.warnings...)
}

// errClosed is wrapped by reads after Detach (or Close).
var errClosed = errors.New("detached from the process")

// Detach detaches from every thread and leaves the process as Attach
// found it: running, or still stopped when it was stopped by job control,
// with any signal a thread received while being attached delivered again.
// What was read stays usable: Threads, Modules and the modules' images
// (to name the frames of stacks read while the process was stopped), but
// ReadMemory fails from then on. Close releases the images. Detach is
// idempotent and may be called from any goroutine; later calls return the
// first call's result.
func (p *Process) Detach() error {
	p.detachOnce.Do(func() {
		p.ended.Store(true)
		var errs []error
		p.tr.do(func() {
			errs = p.detachAll()
			p.released = time.Now()
		})
		if err := p.tr.stop(); err != nil {
			errs = append(errs, fmt.Errorf("process %d: detaching: %w", p.pid, err))
		}
		if err := p.mem.close(); err != nil {
			errs = append(errs, err)
		}
		p.cache.Invalidate() // the pages read are garbage now
		p.detachErr = errors.Join(errs...)
	})
	return p.detachErr
}

// Close detaches (Detach) and releases the module images. Close is
// idempotent and may be called from any goroutine; later calls return the
// first call's result, which is Detach's.
func (p *Process) Close() error {
	p.closeOnce.Do(func() {
		p.closeErr = p.Detach()
		p.releaseEarly()
		for _, img := range p.images {
			closeImage(img)
		}
	})
	return p.closeErr
}
