package main

// attach --retry: a running runtime may be caught in the middle of a
// change (a team being built, a task being queued). --retry takes
// snapshots (attach, build the report, detach) until two in a row agree on
// the OpenMP structure, and prints the last one.

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/target/ptrace"
)

const (
	// defaultRetries is N for --retry without a value.
	defaultRetries = 5
	// maxRetries bounds N: at most maxRetries+1 snapshots are taken.
	maxRetries = 20
	// retryPause is how long the target runs between two snapshots.
	retryPause = 20 * time.Millisecond
)

// retryHelp is the --retry flag's help.
var retryHelp = fmt.Sprintf("take snapshots (attach, read, detach) until two in a row agree on the OpenMP structure, "+
	"retrying at most N times after the first (--retry alone: %d; at most %d), %v apart; print the last one, and on standard error "+
	"how many were taken and whether the last two agree. Two snapshots agree when they list the same threads, the same parallel "+
	"regions (nesting, level, team size, serialized, location, function, member threads in order), every thread in the same "+
	"region with the same gtid and thread number, and the same warnings (stack-unwinding ones aside); region and task ids "+
	"(runtime addresses), thread states and tasks are not compared. Give N with '=': --retry=N",
	defaultRetries, maxRetries, retryPause)

// checkRetry refuses a bad --retry before the target is touched. With
// NoOptDefVal set, "--retry 3" leaves 3 as an argument, where a view goes,
// and n at its default.
func checkRetry(set bool, n int, args []string, trace bool) error {
	if !set {
		return nil
	}
	if trace {
		return errors.New("--retry does not go with --trace")
	}
	if len(args) > 1 && n == defaultRetries {
		if _, err := strconv.Atoi(args[1]); err == nil {
			return fmt.Errorf("%s is not a view; a number of retries goes after '=' (--retry=%s)", args[1], args[1])
		}
	}
	if n < 1 || n > maxRetries {
		return fmt.Errorf("--retry=%d: the number of retries goes from 1 to %d", n, maxRetries)
	}
	return nil
}

// inspectRetrying is attach --retry=retries: snapshots by inspectProcess,
// retryPause apart, until two in a row agree. It returns the last
// snapshot and the line that says how many were taken and whether the
// last two agree. A signal on sigs between two snapshots ends it with a
// *ptrace.InterruptedError.
func inspectRetrying(pid int, view string, vf viewFlags, retries int, sigs <-chan os.Signal) ([]*inspect.Report, string, error) {
	res, err := retrySnapshots(retries,
		func() ([]*inspect.Report, error) { return inspectProcess(pid, view, vf, sigs) },
		func() error { return pauseUnlessSignalled(pid, sigs) })
	if err != nil {
		return nil, "", err
	}
	return res.last, res.note(), nil
}

// pauseUnlessSignalled waits retryPause, or returns the interrupt that a
// signal on sigs makes of it (the target is detached meanwhile).
func pauseUnlessSignalled(pid int, sigs <-chan os.Signal) error {
	t := time.NewTimer(retryPause)
	defer t.Stop()
	select {
	case s := <-sigs:
		sig, _ := s.(syscall.Signal)
		return &ptrace.InterruptedError{PID: pid, Signal: sig, Attached: true}
	case <-t.C:
		return nil
	}
}

// retryResult is the outcome of retrySnapshots.
type retryResult struct {
	last   []*inspect.Report // the last snapshot
	taken  int               // how many snapshots were taken
	agreed bool              // the last two agree
	diff   string            // when they do not: how the last differs from the one before
}

// note is the line printed on standard error after the report.
func (r retryResult) note() string {
	if r.agreed {
		return fmt.Sprintf("ompd-inspect: --retry: %d snapshots taken; the last two agree", r.taken)
	}
	return fmt.Sprintf("ompd-inspect: warning: --retry: %d snapshots taken and no two in a row agree; the last one is shown (%s)", r.taken, r.diff)
}

// snapshotTaken, when set (by tests), sees every snapshot retrySnapshots
// takes.
var snapshotTaken func(reps []*inspect.Report)

// retrySnapshots takes a snapshot, then after each pause another, until
// the last two agree or retries more have been taken. An error of take
// or pause ends it.
func retrySnapshots(retries int, take func() ([]*inspect.Report, error), pause func() error) (retryResult, error) {
	var r retryResult
	var prev []*inspect.Report
	for {
		reps, err := take()
		if err != nil {
			return retryResult{}, err
		}
		r.taken++
		r.last = reps
		if snapshotTaken != nil {
			snapshotTaken(reps)
		}
		if prev != nil {
			r.diff = snapshotDiff(prev, reps)
			if r.diff == "" {
				r.agreed = true
				return r, nil
			}
		}
		if r.taken > retries {
			return r, nil
		}
		prev = reps
		if err := pause(); err != nil {
			return retryResult{}, err
		}
	}
}

// snapshotDiff compares two snapshots (one report per backend) and
// returns "" when they agree, else the first difference found.
func snapshotDiff(a, b []*inspect.Report) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d reports, then %d", len(a), len(b))
	}
	for i := range a {
		if d := reportDiff(a[i], b[i]); d != "" {
			if len(a) > 1 {
				return b[i].Runtime.Backend + " backend: " + d
			}
			return d
		}
	}
	return ""
}

// reportDiff compares the OpenMP structure of two reports (structure)
// and returns "" when they agree, else one fact that only one of them
// states: "only the last has ..." or "only the one before has ...".
func reportDiff(a, b *inspect.Report) string {
	sa, sb := structure(a), structure(b)
	i, j := 0, 0
	for i < len(sa) || j < len(sb) {
		switch {
		case j == len(sb) || (i < len(sa) && sa[i] < sb[j]):
			return "only the one before has " + sa[i]
		case i == len(sa) || sb[j] < sa[i]:
			return "only the last has " + sb[j]
		}
		i++
		j++
	}
	return ""
}

// structure lists, sorted, the facts two snapshots must share to agree:
// every thread with its gtid (with a backend that gives none, whether it
// is an OpenMP thread) and its place (innermost region and thread
// number), every region described with the regions it is nested in, and
// the warnings but those about unwinding stacks. Region ids are runtime
// addresses, which the runtime reuses for other teams, so regions are
// described by what they are, not by id.
func structure(r *inspect.Report) []string {
	byID := make(map[string]*inspect.Region, len(r.Regions))
	for i := range r.Regions {
		byID[r.Regions[i].ID] = &r.Regions[i]
	}
	var out []string
	for i := range r.Regions {
		out = append(out, "region "+regionPath(&r.Regions[i], byID))
	}
	for _, th := range r.Threads {
		s := fmt.Sprintf("thread %d: ", th.OSTID)
		switch {
		case th.GTID != nil:
			s += fmt.Sprintf("gtid %d", *th.GTID)
		case th.OpenMP:
			s += "an OpenMP thread" // of a backend that gives no gtids
		default:
			s += "not an OpenMP thread"
		}
		switch reg := regionOf(th.Region, byID); {
		case th.Region == nil:
			s += ", in no region"
		case reg == nil:
			s += ", in region " + *th.Region + " (not listed)"
		default:
			num := "?"
			if th.ThreadNum != nil {
				num = strconv.Itoa(*th.ThreadNum)
			}
			s += ", number " + num + " in region " + regionPath(reg, byID)
		}
		out = append(out, s)
	}
	for _, w := range r.Warnings {
		if !strings.HasPrefix(w, "unwinding: ") {
			out = append(out, fmt.Sprintf("warning %q", w))
		}
	}
	sort.Strings(out)
	return out
}

// regionOf returns the region with id, nil when there is none.
func regionOf(id *string, byID map[string]*inspect.Region) *inspect.Region {
	if id == nil {
		return nil
	}
	return byID[*id]
}

// regionPath describes a region and, after " in ", the regions it is
// nested in, innermost first: "(level 2, team of 2, busy.c:85,
// parallel_sum.omp_outlined, threads 11 13) in (level 1, ...)". The walk
// up stops after as many steps as there are regions (a cycle).
func regionPath(reg *inspect.Region, byID map[string]*inspect.Region) string {
	var parts []string
	for range len(byID) {
		if reg == nil {
			break
		}
		parts = append(parts, regionDesc(reg))
		reg = regionOf(reg.Parent, byID)
	}
	return strings.Join(parts, " in ")
}

// regionDesc describes one region without its id.
func regionDesc(reg *inspect.Region) string {
	var b strings.Builder
	fmt.Fprintf(&b, "(level %d, team of %d", reg.Level, reg.TeamSize)
	if reg.Serialized {
		b.WriteString(", serialized")
	}
	for _, s := range []string{reg.Location, reg.Function} {
		if s == "" {
			s = "-"
		}
		b.WriteString(", " + s)
	}
	b.WriteString(", threads")
	for _, tid := range reg.Threads {
		fmt.Fprintf(&b, " %d", tid)
	}
	b.WriteString(")")
	return b.String()
}
