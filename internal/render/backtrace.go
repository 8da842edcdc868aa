package render

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

// BacktraceGroup is a set of threads whose backtraces look the same.
type BacktraceGroup struct {
	Threads   []int             `json:"threads"`
	Backtrace inspect.Backtrace `json:"backtrace"`
}

// Backtraces prints backtraces (already filtered for the view) one thread
// after the other.
func Backtraces(w io.Writer, r *inspect.Report, bts []inspect.Backtrace) {
	header(w, r)
	for _, bt := range bts {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "thread %d%s\n", bt.OSTID, threadLabel(r, bt))
		backtraceBody(w, bt)
	}
	warnings(w, r)
}

// BacktraceGroups prints each group's backtrace once, with its threads.
func BacktraceGroups(w io.Writer, r *inspect.Report, groups []BacktraceGroup) {
	header(w, r)
	for _, g := range groups {
		fmt.Fprintln(w)
		ids := make([]string, len(g.Threads))
		for i, t := range g.Threads {
			ids[i] = fmt.Sprint(t)
		}
		noun := "threads"
		if len(g.Threads) == 1 {
			noun = "thread"
		}
		fmt.Fprintf(w, "%d %s: %s\n", len(g.Threads), noun, strings.Join(ids, ", "))
		fmt.Fprintf(w, "  doing: %s\n", g.Backtrace.Activity)
		backtraceBody(w, g.Backtrace)
	}
	warnings(w, r)
}

// threadLabel is what follows "thread TID" in a backtrace's header: who
// the thread is to the runtime (its gtid and its number in its team when
// known), then what it is doing.
func threadLabel(r *inspect.Report, bt inspect.Backtrace) string {
	var parts []string
	switch {
	case !bt.OpenMP:
		parts = append(parts, "not an OpenMP thread")
	case bt.GTID != nil:
		parts = append(parts, fmt.Sprintf("gtid %d", *bt.GTID))
	default:
		parts = append(parts, "OpenMP thread")
	}
	for _, t := range r.Threads {
		switch {
		case t.OSTID != bt.OSTID:
		case t.Idle != nil:
			parts = append(parts, "idle in the thread pool")
		case t.ThreadNum != nil:
			parts = append(parts, fmt.Sprintf("thread %d of its team", *t.ThreadNum))
		}
	}
	if c := r.Target.Crash; c != nil && c.OSTID == bt.OSTID {
		parts = append(parts, "took "+c.Signal)
	}
	label := " (" + strings.Join(parts, ", ") + ")"
	doing := bt.Activity
	if bt.State != nil {
		doing += "; OpenMP state " + *bt.State
	}
	for _, t := range r.Threads {
		if bo := t.BlockedOn; t.OSTID == bt.OSTID && bo != nil && bo.What != "idle" {
			doing += "; waits for " + WaitText(bo)
			if bo.Holder != nil {
				doing += fmt.Sprintf(" held by %d", *bo.Holder)
			}
		}
	}
	return label + "  " + doing
}

func backtraceBody(w io.Writer, bt inspect.Backtrace) {
	n := 0
	for _, f := range bt.Frames {
		switch f.Kind {
		case inspect.KindRegionMarker, inspect.KindTaskMarker:
			fmt.Fprintf(w, "  ── %s\n", f.Text)
		case inspect.KindHop:
			fmt.Fprintf(w, "  ══ %s\n", f.Text)
		default:
			fn := orDash(f.Function)
			if f.UserFunction != "" && f.UserFunction != f.Function {
				fn = fmt.Sprintf("%s [in %s]", fn, f.UserFunction)
			}
			where := ""
			if f.File != "" {
				where = fmt.Sprintf(" at %s:%d", filepath.Base(f.File), f.Line)
			}
			kind := ""
			if f.Kind != inspect.KindUser {
				kind = "  (" + f.Kind + ")"
			}
			inl := ""
			switch {
			case f.Inlined:
				inl = " [inlined]"
			case f.TailCall:
				inl = " [tail call]"
			}
			fmt.Fprintf(w, "  #%-2d %s %s%s%s%s\n", n, deref(f.PC), fn, inl, where, kind)
			n++
		}
	}
	if !bt.Complete {
		fmt.Fprintf(w, "  (unwinding stopped: %s)\n", bt.Stop)
	}
}
