package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ompd-inspect/ompd-inspect/internal/trace"
)

// EventLine formats one trace event as a line of text (without newline):
// the time, the thread, the event, then what OMPD says of its region or
// task.
func EventLine(ev trace.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%10.6f thread %d", ev.Time, ev.OSTID)
	if ev.GTID != nil {
		fmt.Fprintf(&b, " (gtid %d)", *ev.GTID)
	}
	fmt.Fprintf(&b, " %s", ev.Kind)
	if r := ev.Region; r != nil {
		fmt.Fprintf(&b, " region %s %s at %s team %d", r.ID, orDash(r.Function), orDash(r.Location), r.TeamSize)
		if r.Requested != nil {
			fmt.Fprintf(&b, " (nthreads-var %d)", *r.Requested)
		}
		fmt.Fprintf(&b, " level %d", r.Level)
		if r.Serialized {
			b.WriteString(" serialized")
		}
		if r.Parent != "" {
			fmt.Fprintf(&b, " in %s", r.Parent)
		}
		if len(r.Threads) > 0 {
			fmt.Fprintf(&b, " gtids %s", tids(r.Threads))
		}
	}
	if k := ev.Task; k != nil {
		fmt.Fprintf(&b, " task %s %s at %s %s", k.ID, orDash(k.Function), orDash(k.Location), strings.Join(k.Flags, ","))
		if k.Parent != "" {
			fmt.Fprintf(&b, " parent %s", k.Parent)
		}
	}
	if ev.Duration != nil {
		fmt.Fprintf(&b, " after %s", Seconds(*ev.Duration))
	}
	for _, w := range ev.Warnings {
		fmt.Fprintf(&b, " [%s]", w)
	}
	return b.String()
}

// Seconds formats a duration in seconds with a unit that suits it.
func Seconds(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.3fs", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.3fms", s*1e3)
	default:
		return fmt.Sprintf("%.1fµs", s*1e6)
	}
}

// TraceSummary prints the table --summary shows when the program ends:
// one row per construct location.
func TraceSummary(w io.Writer, sum *trace.Summary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CONSTRUCT\tLOCATION\tFUNCTION\tCOUNT\tTEAM TOTAL\tTEAM MEAN\tTHREADS\tTIME TOTAL\tTIME MEAN")
	for _, r := range sum.Rows {
		team, mean := "-", "-"
		if r.Class == trace.ClassParallel {
			team, mean = fmt.Sprint(r.TeamTotal), fmt.Sprintf("%.2f", r.TeamMean)
		}
		tt, tm := "-", "-"
		if r.Ended > 0 {
			tt, tm = Seconds(r.TimeTotal), Seconds(r.TimeMean)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\n", r.Class, orDash(r.Location), orDash(r.Function), r.Count, team, mean, r.Threads, tt, tm)
	}
	tw.Flush()
	var kinds []string
	for _, k := range trace.Kinds {
		if n := sum.Events[k]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
		}
	}
	if len(kinds) == 0 {
		kinds = []string{"none"}
	}
	fmt.Fprintf(w, "events: %s; threads: %d\n", strings.Join(kinds, ", "), sum.Threads)
	if sum.Ignored > 0 {
		fmt.Fprintf(w, "ignored: %d passes of ompd_bp_task_end that end no task (the runtime passes it after a barrier's task loop too)\n", sum.Ignored)
	}
}
