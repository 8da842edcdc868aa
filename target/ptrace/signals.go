package ptrace

import (
	"fmt"
	"os"
	"os/signal"
	"sync"

	"golang.org/x/sys/unix"
)

// DetachOnSignals makes SIGINT, SIGTERM and SIGHUP detach from the process
// (Close) and then exit ompd-inspect with status 128+signal number, after a
// one-line note on standard error ("ompd-inspect: SIGINT: detached from
// process N", the text of an InterruptedError). It returns a function that
// stops the handling; calling it more than once is harmless.
//
// When the process was attached with Options.Interrupt, the signals are
// taken from that channel (which the caller keeps registered with
// signal.Notify and stops itself): a signal that arrived after Attach
// last looked at the channel is handled at once. Otherwise DetachOnSignals
// registers its own channel, and a signal that arrives before it is
// called ends ompd-inspect by its default action.
//
// It complements, and does not replace, `defer p.Close()` with recovery of
// panics: those cover failures inside ompd-inspect, this covers the user
// interrupting it. A SIGKILL needs nothing: the kernel detaches the
// process, which keeps running, because Attach uses PTRACE_SEIZE.
func (p *Process) DetachOnSignals() (stop func()) {
	sigs := p.interrupt
	var own chan os.Signal
	if sigs == nil {
		own = make(chan os.Signal, 1)
		signal.Notify(own, unix.SIGINT, unix.SIGTERM, unix.SIGHUP)
		sigs = own
	}
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case s := <-sigs:
			e := &InterruptedError{PID: p.pid, Signal: toSyscallSignal(s), Attached: true, Err: p.Close()}
			fmt.Fprintf(os.Stderr, "ompd-inspect: %v\n", e)
			os.Exit(e.ExitCode())
		case <-quit:
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			if own != nil {
				signal.Stop(own)
			}
			close(quit)
			<-finished
		})
	}
}
