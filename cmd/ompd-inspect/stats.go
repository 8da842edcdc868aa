package main

import (
	"fmt"
	"io"
	"time"

	"golang.org/x/sys/unix"
)

// phaseTimes records when each phase of one inspection ended (--stats).
// For a live process, the target is stopped from the first interrupt
// (stopping, inside attach, after the modules' files were opened) to the
// last detach (detached, ptrace.Process.Released: the wait for the
// tracing thread's exit that follows is not counted): attach and detach
// alone are the floor any tool pays; read is what ompd-inspect adds.
type phaseTimes struct {
	start, stopping, attached, built, detached time.Time
	threads                                    int
}

// print writes the figures on one line.
func (pt *phaseTimes) print(w io.Writer, live bool, done time.Time) {
	// To a hundredth of a millisecond: a few threads are held under a
	// millisecond, which a tenth would round by a fifth.
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
	rss := "unknown"
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err == nil {
		rss = fmt.Sprintf("%.1f MiB", float64(ru.Maxrss)/1024) // ru_maxrss is in KiB
	}
	if live {
		fmt.Fprintf(w, "stats: %d threads; stopped %s (attach %s, read %s, detach %s); total %s (before the stop %s, after the release %s); peak RSS %s\n",
			pt.threads, ms(pt.detached.Sub(pt.stopping)), ms(pt.attached.Sub(pt.stopping)), ms(pt.built.Sub(pt.attached)),
			ms(pt.detached.Sub(pt.built)), ms(done.Sub(pt.start)), ms(pt.stopping.Sub(pt.start)), ms(done.Sub(pt.detached)), rss)
		return
	}
	fmt.Fprintf(w, "stats: %d threads; read %s; total %s; peak RSS %s\n",
		pt.threads, ms(pt.built.Sub(pt.start)), ms(done.Sub(pt.start)), rss)
}
