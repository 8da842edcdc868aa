package main

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

// roles names each thread of a report by the READY keys that list it
// (outer[1], holder, ...), so that two processes of one fixture can be
// compared: on the same program state the same roles hold the same
// threads.
func roles(r *inspect.Report, ready fixture.Ready) map[int]string {
	tids := map[int]bool{}
	for _, th := range r.Threads {
		tids[th.OSTID] = true
	}
	for _, bt := range r.Backtraces {
		tids[bt.OSTID] = true
	}
	names := map[int][]string{}
	for k, v := range ready {
		if k == "pid" || k == "announcer" {
			// The process, and whichever thread printed READY: no role.
			continue
		}
		parts := strings.Split(v, ",")
		var ids []int
		for _, p := range parts {
			n, err := strconv.Atoi(p)
			if err != nil || !tids[n] {
				ids = nil
				break
			}
			ids = append(ids, n)
		}
		for i, id := range ids {
			role := k
			if len(ids) > 1 {
				role = fmt.Sprintf("%s[%d]", k, i)
			}
			names[id] = append(names[id], role)
		}
	}
	// One role each: every key index names one thread, so any of its
	// roles names it uniquely; the first in order keeps names stable.
	out := map[int]string{}
	for id, rs := range names {
		sort.Strings(rs)
		out[id] = rs[0]
	}
	return out
}

// canonical turns a report into sorted lines that do not depend on the
// process: thread ids become their roles (threads no READY key names,
// "thread#N" in the order of their gtids), regions and tasks are named by
// what identifies them (level, function, threads; kind, function, thread,
// status), addresses are left out. The runtime section keeps only what
// does not name the runtime's file.
func canonical(r *inspect.Report, ready fixture.Ready) []string {
	name := roles(r, ready)
	var unnamed []inspect.Thread
	for _, th := range r.Threads {
		if _, ok := name[th.OSTID]; !ok {
			unnamed = append(unnamed, th)
		}
	}
	sort.SliceStable(unnamed, func(i, j int) bool {
		gi, gj := -1, -1
		if unnamed[i].GTID != nil {
			gi = *unnamed[i].GTID
		}
		if unnamed[j].GTID != nil {
			gj = *unnamed[j].GTID
		}
		return gi < gj
	})
	for i, th := range unnamed {
		name[th.OSTID] = fmt.Sprintf("thread#%d", i)
	}
	tid := func(p *int) string {
		if p == nil {
			return "-"
		}
		return name[*p]
	}
	regions := map[string]string{}
	for _, reg := range r.Regions {
		// Named by its members (sorted: which one is thread 0 can be the
		// scheduler's choice).
		var members []string
		for _, id := range reg.Threads {
			members = append(members, name[id])
		}
		sort.Strings(members)
		regions[reg.ID] = fmt.Sprintf("L%d %s of %s", reg.Level, reg.Function, strings.Join(members, ","))
	}
	rid := func(p *string) string {
		if p == nil {
			return "-"
		}
		if n, ok := regions[*p]; ok {
			return n
		}
		return "?"
	}
	tasks := map[string]string{}
	for _, k := range r.Tasks {
		tasks[k.ID] = fmt.Sprintf("%s %s on %s (%s) in %s", k.Kind, k.Function, tid(k.Thread), k.Status, rid(k.Region))
		if k.Thread == nil && k.Kind == "implicit" {
			// A suspended implicit task: its region and its thread number
			// name it.
			tasks[k.ID] = fmt.Sprintf("%s %s (%s) in %s", k.Kind, k.Function, k.Status, rid(k.Region))
		}
	}
	kid := func(p *string) string {
		if p == nil {
			return "-"
		}
		if n, ok := tasks[*p]; ok {
			return n
		}
		return "?"
	}
	str := func(p *string) string {
		if p == nil {
			return "-"
		}
		return *p
	}
	var lines []string
	rt := r.Runtime
	lines = append(lines, fmt.Sprintf("runtime openmp %d tracking %v needs %v backend %s", rt.OpenMPVersion, rt.StateTracking, rt.NeedsStateTracking, rt.Backend))
	// A report without OpenMP state (both sides degraded alike) must not
	// pass for an equal one: its warnings are part of the comparison.
	for _, w := range r.Warnings {
		lines = append(lines, "warning "+w)
	}
	for _, th := range r.Threads {
		uf := "-"
		if th.UserFrame != nil {
			uf = fmt.Sprintf("%s %s:%d", th.UserFrame.Function, th.UserFrame.File, th.UserFrame.Line)
		}
		num := "-"
		if th.ThreadNum != nil {
			num = strconv.Itoa(*th.ThreadNum)
		}
		var stack []string
		for _, k := range th.TaskStack {
			stack = append(stack, kid(&k))
		}
		// Which team member runs which task can be the scheduler's
		// choice: a number the fixture reports for the role is checked
		// against its READY line instead.
		if want, ok := ready[tid(&th.OSTID)+"_num"]; ok && want == num {
			num = "as-ready"
		}
		lines = append(lines, fmt.Sprintf("thread %s openmp=%v num=%s state=%s region={%s} task={%s} stack=%q function=%s location=%s user=%s",
			tid(&th.OSTID), th.OpenMP, num, str(th.State), rid(th.Region), kid(th.Task), stack, th.Function, th.Location, uf))
	}
	for _, reg := range r.Regions {
		var ts []string
		for _, id := range reg.Threads {
			ts = append(ts, name[id])
		}
		sort.Strings(ts) // in thread-number order, which can be the scheduler's
		lines = append(lines, fmt.Sprintf("region {%s} parent={%s} active=%d team=%d threads=%v serialized=%v location=%s construct=%s",
			regions[reg.ID], rid(reg.Parent), reg.ActiveLevel, reg.TeamSize, ts, reg.Serialized, reg.Location, reg.ConstructFunction))
	}
	for _, k := range r.Tasks {
		var waits []string
		for _, w := range k.WaitsFor {
			waits = append(waits, kid(&w))
		}
		pend := "-"
		if k.PendingDependences != nil {
			pend = strconv.Itoa(*k.PendingDependences)
		}
		lines = append(lines, fmt.Sprintf("task {%s} parent={%s} location=%s construct=%s flags=%v waits=%q pending=%s frames=%v",
			tasks[k.ID], kid(k.Parent), k.Location, k.ConstructFunction, k.Flags, waits, pend, k.ExitFrame != nil))
	}
	for _, v := range r.ICVs {
		owner := "-"
		switch o := v.Owner.(type) {
		case float64:
			owner = name[int(o)]
		case int:
			owner = name[o]
		case string:
			if n, ok := regions[o]; ok {
				owner = n
			} else if n, ok := tasks[o]; ok {
				owner = n
			} else {
				owner = "?"
			}
		}
		val := fmt.Sprint(v.Value)
		if f, ok := v.Value.(float64); ok {
			val = strconv.FormatFloat(f, 'f', -1, 64)
		}
		if v.Name == "thread-num-var" || v.Name == "ompd-thread-num-var" {
			if want, ok := ready[owner+"_num"]; ok && want == val {
				val = "as-ready"
			}
		}
		lines = append(lines, fmt.Sprintf("icv %s {%s} %s=%s", v.Scope, owner, v.Name, val))
	}
	for _, c := range r.ControlVars {
		lines = append(lines, fmt.Sprintf("control %s=%s", c.Name, c.Value))
	}
	sort.Strings(lines)
	return lines
}

// canonicalBT turns a bt report (backtraces only; the runtime's and the
// system's frames folded, workers continued on their encountering
// threads) into lines without process-dependent values: threads by role,
// addresses left out, a thread number the fixture reports for the role
// checked against its READY line.
func canonicalBT(r *inspect.Report, ready fixture.Ready) []string {
	name := roles(r, ready)
	tid := func(id int) string {
		if n, ok := name[id]; ok {
			return n
		}
		return "unnamed"
	}
	addr := regexp.MustCompile(`0x[0-9a-f]+`)
	num := regexp.MustCompile(`, thread (\d+)$`)
	var lines []string
	for _, bt := range r.Backtraces {
		var fs []string
		for _, f := range bt.Frames {
			text := addr.ReplaceAllString(f.Text, "0x?")
			for id, n := range name {
				text = strings.ReplaceAll(text, "("+strconv.Itoa(id)+")", "("+n+")")
			}
			if m := num.FindStringSubmatch(text); m != nil && ready[tid(f.Thread)+"_num"] == m[1] {
				text = num.ReplaceAllString(text, ", thread as-ready")
			}
			fs = append(fs, fmt.Sprintf("%s@%s %s %s:%d %s inlined=%v", f.Kind, tid(f.Thread), f.Function, f.File, f.Line, text, f.Inlined))
		}
		lines = append(lines, fmt.Sprintf("bt %s activity=%q complete=%v frames=%q", tid(bt.OSTID), bt.Activity, bt.Complete, fs))
	}
	sort.Strings(lines)
	return lines
}

// diffLines returns the lines only in a and only in b (as multisets).
func diffLines(a, b []string) (onlyA, onlyB []string) {
	count := map[string]int{}
	for _, l := range a {
		count[l]++
	}
	for _, l := range b {
		count[l]--
	}
	for _, l := range a {
		if count[l] > 0 {
			onlyA = append(onlyA, l)
			count[l]--
		}
	}
	for l, n := range count {
		for ; n < 0; n++ {
			onlyB = append(onlyB, l)
		}
	}
	slices.Sort(onlyB)
	return onlyA, onlyB
}

// stockFixtures are the fixtures whose reports are compared across
// runtimes: programs whose final state does not depend on scheduling
// (icvs.c sets dyn-var, so its team size depends on the load: TestICVsStock
// compares it with the program's own answers instead).
var stockFixtures = []string{"nested", "barrier", "lock", "demo", "tasks"}

// settingsOf returns the settings a runtime prints itself at start-up
// (KMP_SETTINGS=1: "   NAME=VALUE" lines on stderr), by name, read once
// per runtime: the evidence for the control variables in which releases
// really differ. lib "" is the OMPD build.
func settingsOf(t *testing.T, cache map[string]map[string]string, lib string) map[string]string {
	t.Helper()
	if s, ok := cache[lib]; ok {
		return s
	}
	opts := fixture.StartOptions{Env: []string{"KMP_SETTINGS=1"}}
	if lib != "" {
		opts.Stripped, opts.Runtime = true, lib
	}
	p := fixture.Start(t, "barrier", opts)
	set := map[string]string{}
	for _, line := range strings.Split(p.Stderr(), "\n") {
		if name, val, ok := strings.Cut(strings.TrimSpace(line), "="); ok && strings.HasPrefix(line, "   ") {
			set[name] = val
		}
	}
	p.Kill(t)
	if len(set) < 20 {
		t.Fatalf("the runtime %q printed %d settings with KMP_SETTINGS=1:\n%s", lib, len(set), p.Stderr())
	}
	cache[lib] = set
	return set
}

// evidenced reports whether a control-variable line of runtime a's report
// that runtime b's report lacks is a real difference of the two: a prints
// that setting with that value itself, or b has no such setting at all.
func evidenced(line string, a, b map[string]string) bool {
	name, val, ok := strings.Cut(strings.TrimPrefix(line, "control "), "=")
	if !ok || !strings.HasPrefix(line, "control ") {
		return false
	}
	_, bHas := b[name]
	return a[name] == val || !bHas
}

// oldStates maps the OMPT states LLVM's runtime reports since release 17
// to the ones releases 13 to 16 report in the same places: their sources
// never use ompt_state_wait_barrier_explicit or
// ompt_state_wait_barrier_implicit_parallel (kmp_barrier.cpp waits in
// ompt_state_wait_barrier and ompt_state_wait_barrier_implicit).
var oldStates = strings.NewReplacer(" state=wait_barrier_explicit ", " state=wait_barrier ", " state=wait_barrier_implicit_parallel ", " state=wait_barrier_implicit ")

// TestStockMatrix: a fixture's report on each of Debian's stripped
// runtimes equals its report on the OMPD build, line by line after the
// process-dependent names are made canonical (threads, regions, tasks,
// ICVs at every scope, states), live and from both kinds of core, with
// and without state tracking. The runtime's control variables differ
// where releases have other settings: each such line must be one the
// runtime itself prints (KMP_SETTINGS=1).
func TestStockMatrix(t *testing.T) {
	fixture.Build(t)
	// The OMPD build's report is the reference: it must have OpenMP
	// state (checked in every subtest through its regions).
	settings := map[string]map[string]string{}
	for _, name := range stockFixtures {
		for _, env := range [][]string{nil, {"OMP_DEBUG=enabled"}} {
			for _, src := range allSources {
				label := fmt.Sprintf("%s/%s/debug=%v", name, src, env != nil)
				t.Run(label, func(t *testing.T) {
					args, ready := targetArgsWith(t, name, src, fixture.StartOptions{Env: env})
					ref := reportOf(t, append(args, "summary")...)
					if ref.Runtime.Version == "" || len(ref.Regions) == 0 {
						t.Fatalf("the OMPD build's report has no OpenMP state: %q", ref.Warnings)
					}
					want := append(canonical(ref, ready), canonicalBT(reportOf(t, append(args, "bt")...), ready)...)
					for _, v := range fixture.StockVersions {
						lib := fixture.StockLibomp(v)
						args, ready := targetArgsWith(t, name, src, fixture.StartOptions{Env: env, Stripped: true, Runtime: lib})
						got := append(canonical(reportOf(t, append(args, "summary")...), ready), canonicalBT(reportOf(t, append(args, "bt")...), ready)...)
						ref := want
						if v < 17 {
							ref = make([]string, len(want))
							for i, l := range want {
								ref[i] = oldStates.Replace(l)
							}
						}
						onlyStock, onlyOMPD := diffLines(got, ref)
						var bad []string
						for _, l := range onlyStock {
							if !evidenced(l, settingsOf(t, settings, lib), settingsOf(t, settings, "")) {
								bad = append(bad, "only on "+strconv.Itoa(v)+": "+l)
							}
						}
						for _, l := range onlyOMPD {
							if !evidenced(l, settingsOf(t, settings, ""), settingsOf(t, settings, lib)) {
								bad = append(bad, "only on the OMPD build: "+l)
							}
						}
						if len(bad) > 0 {
							t.Errorf("libomp %d differs from the OMPD build:\n  %s", v, strings.Join(bad, "\n  "))
						}
					}
				})
			}
		}
	}
}
