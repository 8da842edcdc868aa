package ptrace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// tracer runs every ptrace request on one OS thread. Linux ties a tracee to
// the thread that attached it, so all requests (and the waits for tracee
// stops) must come from that thread: a goroutine locked to it serves a
// channel of closures.
type tracer struct {
	reqs chan func()
	done chan struct{} // closed when the serving goroutine has returned
	tid  int           // kernel id of the tracing thread
}

// startTracer starts the serving goroutine and returns once it runs on its
// own locked OS thread.
func startTracer() *tracer {
	t := &tracer{reqs: make(chan func()), done: make(chan struct{})}
	started := make(chan int)
	go t.run(started)
	t.tid = <-started
	return t
}

func (t *tracer) run(started chan<- int) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// The process's main thread cannot exit, so a goroutine that ends
		// locked to it leaves it wedged instead of terminating it; tracees
		// not yet detached would stay traced. Hold the main thread until a
		// second goroutine has locked another thread, then give it back.
		locked := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(locked)
			t.serve(started)
		}()
		<-locked
		runtime.UnlockOSThread()
		return
	}
	t.serve(started)
}

// serve executes requests until the channel is closed, then returns still
// locked, so that the Go runtime terminates the thread. The kernel then
// detaches whatever this thread still traces (tracees that never stopped
// cannot be detached with PTRACE_DETACH); with PTRACE_SEIZE that leaves them
// running and sends them nothing.
func (t *tracer) serve(started chan<- int) {
	started <- unix.Gettid()
	for f := range t.reqs {
		f()
	}
	close(t.done)
}

// do runs f on the tracing thread and returns when it is done.
func (t *tracer) do(f func()) {
	finished := make(chan struct{})
	t.reqs <- func() {
		defer close(finished)
		f()
	}
	<-finished
}

// tracerExitTries bounds how long stop waits for the tracing thread to
// disappear: 20000 polls of 250µs, at least five seconds.
const (
	tracerExitTries    = 20000
	tracerExitInterval = 250 * time.Microsecond
)

// stop ends the serving goroutine and waits until its OS thread is gone,
// which guarantees that the kernel has detached every tracee it still had.
func (t *tracer) stop() error {
	close(t.reqs)
	<-t.done
	path := fmt.Sprintf("/proc/self/task/%d", t.tid)
	for range tracerExitTries {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		sleepThread(tracerExitInterval) // time.Sleep rounds it up to a millisecond or more
	}
	return fmt.Errorf("tracing thread %d did not exit", t.tid)
}

// ptraceSeize attaches to tid without stopping it, with the given options.
func ptraceSeize(tid int, options int) error {
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(tid), 0, uintptr(options), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// ptraceDetach detaches from the stopped tracee tid, delivering sig (0 for
// none) as it resumes.
func ptraceDetach(tid int, sig int) error {
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(tid), 0, uintptr(sig), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
