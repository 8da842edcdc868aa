// Package render prints an inspect.Report for people: the summary and the
// threads, regions, tasks, icvs and env views. JSON output needs no code
// here: the report's own field tags are the schema.
package render

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

func header(w io.Writer, r *inspect.Report) {
	t := r.Target
	what := fmt.Sprintf("process %d", t.PID)
	if t.Kind == "core" {
		what = fmt.Sprintf("core %s (process %d)", t.Core, t.PID)
	}
	fmt.Fprintf(w, "%s  %s\n", what, t.Executable)
	if c := t.Crash; c != nil {
		fmt.Fprintf(w, "crash     thread %d took %s\n", c.OSTID, c.Signal)
	}
	rt := r.Runtime
	switch {
	case rt.Library == "":
		fmt.Fprintf(w, "runtime   none: no OpenMP state (see warnings)\n")
		return
	case rt.Version == "":
		fmt.Fprintf(w, "runtime   %s  (its OpenMP state cannot be read: see warnings)\n", rt.Library)
		return
	}
	tracking := "on"
	switch {
	case rt.StateSource == "inferred":
		tracking = "none in this runtime: states are inferred from each thread's stack and futex"
	case !rt.StateTracking:
		tracking = "off (start with OMP_DEBUG=enabled for states, wait ids and task frames)"
	}
	fmt.Fprintf(w, "runtime   %s  (%s)\n", rt.Library, rt.Version)
	switch rt.SymbolsSource {
	case inspect.SourceRecovered:
		fmt.Fprintf(w, "symbols   recovered from the runtime's code%s\n", release(rt))
	case inspect.SourceDebugFile:
		fmt.Fprintf(w, "symbols   %s%s\n", rt.DebugFile, release(rt))
	}
	if l := rt.OMPDLibrary; l != nil {
		fmt.Fprintf(w, "ompd      %s  (%s)\n", l.Path, orDash(l.Version))
	}
	fmt.Fprintf(w, "tracking  %s\n", tracking)
}

// release names the runtime's known build, after two spaces, in
// parentheses.
func release(rt inspect.Runtime) string {
	if rt.Release == "" {
		return ""
	}
	return "  (" + rt.Release + ")"
}

func countOpenMP(r *inspect.Report) int {
	n := 0
	for _, t := range r.Threads {
		if t.OpenMP {
			n++
		}
	}
	return n
}

// count is n, or "?" when the backend cannot find the objects field
// names (it is in runtime.unavailable).
func count(r *inspect.Report, n int, field string) string {
	if slices.Contains(r.Runtime.Unavailable, field) {
		return "?"
	}
	return fmt.Sprint(n)
}

// warnings ends every view: the report's warnings, and what the dll
// backend's OMPD library printed.
func warnings(w io.Writer, r *inspect.Report) {
	if len(r.Warnings) > 0 {
		fmt.Fprintf(w, "\nwarnings:\n")
		for _, s := range r.Warnings {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	if l := r.Runtime.OMPDLibrary; l != nil && len(l.Messages) > 0 {
		fmt.Fprintf(w, "\nprinted by %s:\n", l.Path)
		for _, s := range l.Messages {
			fmt.Fprintf(w, "  %s\n", strings.TrimRight(s, "\n"))
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func stateOf(t inspect.Thread) string {
	switch {
	case !t.OpenMP:
		return "(not an OpenMP thread)"
	case t.State == nil:
		return "(state not tracked)"
	}
	return *t.State
}

func tids(ts []int) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = fmt.Sprint(t)
	}
	return strings.Join(s, " ")
}

// Summary prints what a person diagnosing a hang reads first: the
// runtime, counts, threads grouped by state and location, and the region
// tree.
func Summary(w io.Writer, r *inspect.Report) {
	header(w, r)
	verdict(w, r)
	queued, blocked := 0, 0
	for _, t := range r.Tasks {
		switch t.Status {
		case "queued":
			queued++
		case "blocked":
			blocked++
		}
	}
	fmt.Fprintf(w, "counts    %d threads (%d OpenMP), %d parallel regions, %d tasks (%s queued, %s blocked on dependences)\n",
		len(r.Threads), countOpenMP(r), len(r.Regions), len(r.Tasks),
		count(r, queued, "tasks[status=queued]"), count(r, blocked, "tasks[status=blocked]"))

	type group struct {
		state, where string
		tids         []int
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, t := range r.Threads {
		where := "-"
		switch {
		case t.UserFrame != nil:
			where = t.UserFrame.Function
			if t.UserFrame.File != "" {
				where += fmt.Sprintf(" at %s:%d", filepath.Base(t.UserFrame.File), t.UserFrame.Line)
			}
		case t.Location != "" || t.Function != "":
			// No stack: where its current task comes from (the dll
			// backend gives no location).
			where = "task"
			if t.Location != "" {
				where += " at " + t.Location
			}
			if t.Function != "" {
				where += " " + t.Function
			}
		}
		key := stateOf(t) + "\x00" + where
		g := byKey[key]
		if g == nil {
			g = &group{state: stateOf(t), where: where}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.tids = append(g.tids, t.OSTID)
	}
	sort.SliceStable(groups, func(i, j int) bool { return len(groups[i].tids) > len(groups[j].tids) })
	fmt.Fprintf(w, "\nthreads by state and innermost user frame:\n")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, g := range groups {
		fmt.Fprintf(tw, "  %d\t%s\t%s\ttids %s\n", len(g.tids), g.state, g.where, tids(g.tids))
	}
	tw.Flush()
	waiting(w, r)
	fmt.Fprintf(w, "\nparallel regions:\n")
	regionTree(w, r)
	warnings(w, r)
}

// waits counts the threads that wait for something other than work.
func waits(r *inspect.Report) int {
	n := 0
	for _, t := range r.Threads {
		if t.BlockedOn != nil && t.BlockedOn.What != "idle" {
			n++
		}
	}
	return n
}

// verdict is the summary's first word on why threads wait: the most
// severe diagnosis, or that threads wait without anything proven. Nothing
// when no thread waits.
func verdict(w io.Writer, r *inspect.Report) {
	n := waits(r)
	switch {
	case len(r.Diagnosis) > 0 && r.Diagnosis[0].Kind != "holder_unknown":
		d := r.Diagnosis[0]
		label := map[string]string{"deadlock": "DEADLOCK", "barrier_blocked": "BLOCKED BARRIER",
			"lock_held_at_barrier": "LOCK HELD AT A BARRIER", "holder_blocked": "BLOCKED HOLDER"}[d.Kind]
		fmt.Fprintf(w, "verdict   %s: %s\n", label, d.Text)
		if more := len(r.Diagnosis) - 1; more > 0 {
			fmt.Fprintf(w, "          (and %d more findings below)\n", more)
		}
	case n > 0:
		fmt.Fprintf(w, "verdict   %d thread%s wait%s; no deadlock is proven\n", n, plural(n), map[bool]string{true: "s", false: ""}[n == 1])
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// waiting lists the diagnosis and what each waiting thread waits for.
func waiting(w io.Writer, r *inspect.Report) {
	if len(r.Diagnosis) > 0 {
		fmt.Fprintf(w, "\ndiagnosis:\n")
		for _, d := range r.Diagnosis {
			fmt.Fprintf(w, "  %s: %s\n", d.Kind, d.Text)
		}
	}
	if waits(r) == 0 {
		return
	}
	fmt.Fprintf(w, "\nwhy threads wait:\n")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, t := range r.Threads {
		bo := t.BlockedOn
		if bo == nil || bo.What == "idle" {
			continue
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", t.OSTID, WaitText(bo), orDash(bo.Location), waitsFor(bo))
	}
	tw.Flush()
}

// WaitText names what a thread waits for: "lock 0x…", "critical NAME
// 0x…", "barrier 0x…".
func WaitText(bo *inspect.BlockedOn) string {
	s := strings.ReplaceAll(bo.What, "_", " ")
	if bo.Name != "" {
		s += " " + bo.Name
	}
	if bo.Object != "" {
		s += " " + bo.Object
	}
	return s
}

// waitsFor says whom a waiting thread waits for.
func waitsFor(bo *inspect.BlockedOn) string {
	switch {
	case bo.Holder != nil:
		return fmt.Sprintf("held by %d", *bo.Holder)
	case bo.HolderUnknown != "":
		return "holder unknown: " + bo.HolderUnknown
	case len(bo.WaitingFor) > 0:
		var ids []int
		for _, t := range bo.WaitingFor {
			ids = append(ids, t.OSTID)
		}
		s := "for " + tids(ids)
		if bo.QueuedChildren > 0 {
			s += fmt.Sprintf(" and %d queued", bo.QueuedChildren)
		}
		return s
	case bo.QueuedChildren > 0:
		return fmt.Sprintf("for %d queued", bo.QueuedChildren)
	}
	return "-"
}

func regionTree(w io.Writer, r *inspect.Report) {
	if len(r.Regions) == 0 {
		fmt.Fprintf(w, "  (no thread is in a parallel region)\n")
		return
	}
	children := map[string][]inspect.Region{}
	var roots []inspect.Region
	ids := map[string]bool{}
	for _, reg := range r.Regions {
		ids[reg.ID] = true
	}
	for _, reg := range r.Regions {
		if reg.Parent == nil || !ids[*reg.Parent] {
			roots = append(roots, reg)
		} else {
			children[*reg.Parent] = append(children[*reg.Parent], reg)
		}
	}
	var walk func(reg inspect.Region, indent string)
	walk = func(reg inspect.Region, indent string) {
		kind := fmt.Sprintf("team of %d", reg.TeamSize)
		if reg.Serialized {
			kind = "serialized"
		}
		fmt.Fprintf(w, "%s- level %d  %s  %s  %s  [%s]  threads %s\n", indent, reg.Level, kind,
			orDash(reg.Location), orDash(reg.Function), reg.ID, tids(reg.Threads))
		for _, c := range children[reg.ID] {
			walk(c, indent+"    ")
		}
	}
	for _, reg := range roots {
		walk(reg, "  ")
	}
}

// Threads prints one line per OS thread.
func Threads(w io.Writer, r *inspect.Report) {
	header(w, r)
	fmt.Fprintln(w)
	threadsBody(w, r)
	warnings(w, r)
}

func threadsBody(w io.Writer, r *inspect.Report) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "OS TID\tGTID\tNUM\tSTATE\tWAIT ID\tREGION\tTASK\tLOCATION\tFUNCTION\n")
	for _, t := range r.Threads {
		gtid, num, wait := "-", "-", "-"
		switch {
		case t.GTID != nil:
			gtid = fmt.Sprint(*t.GTID)
		case t.OpenMP:
			gtid = "?" // an OpenMP thread of a backend that gives no gtids
		}
		if t.ThreadNum != nil {
			num = fmt.Sprint(*t.ThreadNum)
		}
		switch {
		case t.WaitID != nil:
			wait = fmt.Sprintf("%#x", *t.WaitID)
		case t.Futex != nil:
			wait = "futex " + *t.Futex
		}
		if t.Idle != nil {
			num = "idle"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.OSTID, gtid, num, stateOf(t), wait,
			deref(t.Region), deref(t.Task), orDash(t.Location), orDash(t.Function))
	}
	tw.Flush()
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

// Regions prints the region tree.
func Regions(w io.Writer, r *inspect.Report) {
	header(w, r)
	fmt.Fprintln(w)
	regionsBody(w, r)
	warnings(w, r)
}

func regionsBody(w io.Writer, r *inspect.Report) {
	regionTree(w, r)
}

// Tasks prints the tasks: running, their ancestry, and queued ones.
func Tasks(w io.Writer, r *inspect.Report) {
	header(w, r)
	fmt.Fprintln(w)
	tasksBody(w, r)
	warnings(w, r)
}

func tasksBody(w io.Writer, r *inspect.Report) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "TASK\tKIND\tSTATUS\tTHREAD\tPARENT\tREGION\tFLAGS\tLOCATION\tFUNCTION\n")
	for _, t := range r.Tasks {
		thread := "-"
		if t.Thread != nil {
			thread = fmt.Sprint(*t.Thread)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Kind, t.Status, thread,
			deref(t.Parent), deref(t.Region), orDash(strings.Join(t.Flags, ",")), orDash(t.Location), orDash(t.Function))
	}
	tw.Flush()
	first := true
	for _, t := range r.Tasks {
		if t.Status != "blocked" {
			continue
		}
		if first {
			fmt.Fprintf(w, "\nblocked on dependences:\n")
			first = false
		}
		pending := "?"
		if t.PendingDependences != nil {
			pending = fmt.Sprint(*t.PendingDependences)
		}
		fmt.Fprintf(w, "  %s (%s) waits for %s; %s unfinished predecessor(s)\n", t.ID, orDash(t.Location), orDash(strings.Join(t.WaitsFor, ", ")), pending)
	}
}

// ICVs prints the ICVs; when tid is not 0, only those of that thread (its
// thread-scope ICVs, its current region's and current task's) and the
// address space's.
func ICVs(w io.Writer, r *inspect.Report, icvs []inspect.ICV) {
	header(w, r)
	fmt.Fprintln(w)
	icvsBody(w, r, icvs)
	warnings(w, r)
}

func icvsBody(w io.Writer, r *inspect.Report, icvs []inspect.ICV) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ICV\tSCOPE\tOWNER\tVALUE\n")
	for _, v := range icvs {
		owner := "-"
		if v.Owner != nil {
			owner = fmt.Sprint(v.Owner)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\n", v.Name, v.Scope, owner, v.Value)
	}
	tw.Flush()
}

// Env prints the runtime's display control variables.
func Env(w io.Writer, r *inspect.Report) {
	header(w, r)
	fmt.Fprintln(w)
	envBody(w, r)
	warnings(w, r)
}

func envBody(w io.Writer, r *inspect.Report) {
	if len(r.ControlVars) == 0 {
		fmt.Fprintf(w, "  (the runtime recorded no control variables)\n")
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, v := range r.ControlVars {
		fmt.Fprintf(tw, "%s\t%s\n", v.Name, v.Value)
	}
	tw.Flush()
}

// All prints every view of the report in one: the summary, then the
// threads, regions, tasks, ICVs, control variables and backtraces (bts,
// already filtered), each under its title; the warnings once, at the end.
func All(w io.Writer, r *inspect.Report, bts []inspect.Backtrace) {
	quiet := *r
	quiet.Warnings, quiet.Runtime.OMPDLibrary = nil, nil
	Summary(w, &quiet)
	section := func(title string) { fmt.Fprintf(w, "\n== %s ==\n\n", title) }
	section("threads")
	threadsBody(w, r)
	section("regions")
	regionTree(w, r)
	section("tasks")
	tasksBody(w, r)
	section("icvs")
	icvsBody(w, r, r.ICVs)
	section("env")
	envBody(w, r)
	section("backtraces")
	for i, bt := range bts {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "thread %d%s\n", bt.OSTID, threadLabel(r, bt))
		backtraceBody(w, bt)
	}
	warnings(w, r)
}
