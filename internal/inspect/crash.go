package inspect

import (
	"golang.org/x/sys/unix"

	"github.com/ompd-inspect/ompd-inspect/target"
)

// coreSignals are the signals whose default action writes a core.
var coreSignals = map[unix.Signal]bool{
	unix.SIGQUIT: true, unix.SIGILL: true, unix.SIGTRAP: true, unix.SIGABRT: true,
	unix.SIGBUS: true, unix.SIGFPE: true, unix.SIGSEGV: true, unix.SIGSYS: true,
	unix.SIGXCPU: true, unix.SIGXFSZ: true,
}

// crashOf returns the crash a core records: Linux writes the thread that
// took the fatal signal first (core.Core.CrashTID), with the signal in its
// status (pr_cursig).
// A core without such a signal in its first thread (gcore's snapshot of a
// live process) records no crash.
func crashOf(t target.Target, src Source) *Crash {
	if src.Kind != "core" {
		return nil
	}
	ct, ok := t.(interface{ CrashTID() int })
	if !ok {
		return nil
	}
	tid := ct.CrashTID()
	for _, th := range t.Threads() {
		if th.TID != tid {
			continue
		}
		sig := unix.Signal(th.Signal)
		if !coreSignals[sig] {
			return nil
		}
		return &Crash{OSTID: tid, Signal: unix.SignalName(sig), Number: int(sig)}
	}
	return nil
}
