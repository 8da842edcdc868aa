package ptrace

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// DetachOnSignals makes SIGINT, SIGTERM and SIGHUP detach from the process
// (Close) and then exit ompd-inspect with status 128+signal number, after a
// one-line note on standard error. It returns a function that stops the
// handling; calling it more than once is harmless.
//
// It complements, and does not replace, `defer p.Close()` with recovery of
// panics: those cover failures inside ompd-inspect, this covers the user
// interrupting it. A SIGKILL needs nothing: the kernel detaches the
// process, which keeps running, because Attach uses PTRACE_SEIZE.
func (p *Process) DetachOnSignals() (stop func()) {
	sigs := make(chan os.Signal, 1)
	quit := make(chan struct{})
	finished := make(chan struct{})
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP)
	go func() {
		defer close(finished)
		select {
		case s := <-sigs:
			signo := 0
			if ss, ok := s.(syscall.Signal); ok {
				signo = int(ss)
			}
			name := unix.SignalName(syscall.Signal(signo))
			if err := p.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "ompd-inspect: %s: detaching from process %d: %v\n", name, p.pid, err)
			} else {
				fmt.Fprintf(os.Stderr, "ompd-inspect: %s: detached from process %d\n", name, p.pid)
			}
			os.Exit(128 + signo)
		case <-quit:
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(quit)
			<-finished
		})
	}
}
