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
	end := exitOn(sigs, func(sig syscall.Signal) *InterruptedError {
		return &InterruptedError{PID: p.pid, Signal: sig, Attached: true, Err: p.Close()}
	})
	return func() {
		if own != nil {
			signal.Stop(own)
		}
		end()
	}
}

// ExitOnSignals answers SIGINT, SIGTERM and SIGHUP arriving on sigs once
// the process is detached and until ompd-inspect's output is written: it
// prints the line DetachOnSignals prints and exits with 128+signal (the
// output may be cut). It returns the function that stops it.
func ExitOnSignals(pid int, sigs <-chan os.Signal) (stop func()) {
	return exitOn(sigs, func(sig syscall.Signal) *InterruptedError {
		return &InterruptedError{PID: pid, Signal: sig, Attached: true}
	})
}

// exitOn waits for a signal on sigs until stopped; on one it prints the
// error release returns and exits with its code.
func exitOn(sigs <-chan os.Signal, release func(syscall.Signal) *InterruptedError) (stop func()) {
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case s := <-sigs:
			e := release(toSyscallSignal(s))
			fmt.Fprintf(os.Stderr, "ompd-inspect: %v\n", e)
			os.Exit(e.ExitCode())
		case <-quit:
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			<-finished
		})
	}
}
