// Package waits says why each thread of a report waits and what that
// proves. It completes threads[].blocked_on (the runtime's objects when
// its family gives them, else the thread's state, else what its stack
// shows), adds where each thread asked (its innermost user frame) and whom
// it waits for (a lock's holder, a barrier's members that have not
// arrived, the threads running a taskwait's children), builds the wait
// graph and draws from it the diagnosis: deadlocks, barriers that cannot
// complete, lock holders that are blocked themselves. It reads only an
// inspect.Report, after internal/stacks has run.
//
// A conclusion needs proof: an edge is a wait the evidence shows (a
// holder the runtime records, a team member that has not reached the
// barrier), and a running thread has no edge, so a cycle of edges is a
// deadlock. Waits whose holder is not recorded are listed as such, never
// guessed.
package waits

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// byState maps a thread's OpenMP state to what it waits for.
var byState = map[string]ompd.WaitKind{
	"wait_lock":                       ompd.WaitLock,
	"wait_mutex":                      ompd.WaitLock,
	"wait_critical":                   ompd.WaitCritical,
	"wait_atomic":                     ompd.WaitAtomic,
	"wait_ordered":                    ompd.WaitOrdered,
	"wait_barrier":                    ompd.WaitBarrier,
	"wait_barrier_implicit":           ompd.WaitBarrier,
	"wait_barrier_implicit_parallel":  ompd.WaitBarrier,
	"wait_barrier_implicit_workshare": ompd.WaitBarrier,
	"wait_barrier_explicit":           ompd.WaitBarrier,
	"wait_taskwait":                   ompd.WaitTaskwait,
	"wait_taskgroup":                  ompd.WaitTaskgroup,
	"idle":                            ompd.WaitIdle,
}

// byActivity maps what a stack shows to what the thread waits for.
var byActivity = map[string]ompd.WaitKind{
	string(ompd.ActivityLock):            ompd.WaitLock,
	string(ompd.ActivityCritical):        ompd.WaitCritical,
	string(ompd.ActivityOrdered):         ompd.WaitOrdered,
	string(ompd.ActivityTaskwait):        ompd.WaitTaskwait,
	string(ompd.ActivityTaskgroup):       ompd.WaitTaskgroup,
	string(ompd.ActivityBarrierExplicit): ompd.WaitBarrier,
	string(ompd.ActivityBarrierImplicit): ompd.WaitBarrier,
	string(ompd.ActivityIdle):            ompd.WaitIdle,
}

// holds reports whether a wait kind has a holder (a thread that must let
// go for the waiter to go on).
func holds(what string) bool {
	switch ompd.WaitKind(what) {
	case ompd.WaitLock, ompd.WaitNestLock, ompd.WaitCritical, ompd.WaitAtomic:
		return true
	}
	return false
}

// analysis holds one Analyze call's indexes.
type analysis struct {
	rep      *inspect.Report
	threads  map[int]*inspect.Thread
	regions  map[string]*inspect.Region
	activity map[int]string

	// notArrived are the members of each barrier's region that have not
	// arrived at it, by the barrier's object: the same for every waiter
	// (a waiter has arrived), found once.
	notArrived map[string][]inspect.WaitTarget
	// children and members are the explicit tasks by parent and by
	// taskgroup, indexed once for the waiters at a taskwait or at the
	// end of a taskgroup.
	children, members map[string][]*inspect.Task
}

// Analyze completes rep's blocked_on, wait graph and diagnosis.
func Analyze(rep *inspect.Report) {
	a := &analysis{rep: rep, threads: map[int]*inspect.Thread{}, regions: map[string]*inspect.Region{}, activity: map[int]string{}}
	for i := range rep.Threads {
		a.threads[rep.Threads[i].OSTID] = &rep.Threads[i]
	}
	for i := range rep.Regions {
		a.regions[rep.Regions[i].ID] = &rep.Regions[i]
	}
	for _, bt := range rep.Backtraces {
		a.activity[bt.OSTID] = bt.Activity
	}
	for i := range rep.Threads {
		a.derive(&rep.Threads[i])
	}
	a.notArrived = map[string][]inspect.WaitTarget{}
	a.children, a.members = map[string][]*inspect.Task{}, map[string][]*inspect.Task{}
	for i := range rep.Tasks {
		k := &rep.Tasks[i]
		if k.Kind != "explicit" {
			continue
		}
		if k.Parent != nil {
			a.children[*k.Parent] = append(a.children[*k.Parent], k)
		}
		if k.Taskgroup != nil {
			a.members[*k.Taskgroup] = append(a.members[*k.Taskgroup], k)
		}
	}
	for i := range rep.Threads {
		a.targets(&rep.Threads[i])
	}
	rep.WaitGraph = a.graph()
	rep.Diagnosis = a.diagnose()
}

// derive fills t.BlockedOn when the runtime gave none: from its state
// (with the OMPT wait id as the object), else from its stack.
func (a *analysis) derive(t *inspect.Thread) {
	if !t.OpenMP {
		return
	}
	if t.BlockedOn == nil {
		var what ompd.WaitKind
		source := ""
		if t.State != nil {
			what, source = byState[*t.State], "state"
		}
		if what == "" {
			if w, ok := byActivity[a.activity[t.OSTID]]; ok {
				what, source = w, "stack"
			}
		}
		if what == "" {
			return
		}
		bo := &inspect.BlockedOn{What: string(what), Source: source}
		if a.rep.Runtime.StateSource == "runtime" && t.WaitID != nil && *t.WaitID != 0 && holds(string(what)) {
			// OMPT's wait id of a lock or critical section is its
			// address.
			bo.Object, bo.Source = fmt.Sprintf("%#x", *t.WaitID), "runtime"
		}
		if holds(string(what)) {
			switch {
			case a.rep.Runtime.Backend == "dll":
				bo.HolderUnknown = "no OMPD call gives a lock's holder (the dll backend)"
			case source == "stack" && a.rep.Runtime.Family == "gnu":
				bo.HolderUnknown = "only the thread's stack shows the wait (it is not asleep on the lock's futex): the lock object is not known"
			case source == "stack":
				bo.HolderUnknown = "only the thread's stack shows the wait, not the lock object (without state tracking, OMP_DEBUG=enabled, libomp records no wait id)"
			default:
				bo.HolderUnknown = "the runtime gives no holder for it"
			}
		}
		t.BlockedOn = bo
	}
	bo := t.BlockedOn
	if bo.WaitingFor == nil {
		bo.WaitingFor = []inspect.WaitTarget{}
	}
	if bo.Location == "" {
		bo.Location = location(t)
	}
	switch ompd.WaitKind(bo.What) {
	case ompd.WaitBarrier:
		if bo.Object == "" && t.Region != nil {
			bo.Object = *t.Region
		}
	case ompd.WaitTaskwait:
		if bo.Object == "" && t.Task != nil {
			bo.Object = *t.Task
		}
	}
}

// location is a thread's innermost user frame, "file:line".
func location(t *inspect.Thread) string {
	if f := t.UserFrame; f != nil && f.File != "" {
		return fmt.Sprintf("%s:%d", filepath.Base(f.File), f.Line)
	}
	return ""
}

// doing says what a thread does, for the threads others wait for.
func doing(t *inspect.Thread) string {
	if bo := t.BlockedOn; bo != nil && bo.What != string(ompd.WaitIdle) {
		switch ompd.WaitKind(bo.What) {
		case ompd.WaitBarrier:
			return "waits at a barrier" // of its region, named by t's region
		case ompd.WaitTaskwait:
			return "waits for its child tasks"
		}
		return "waits for " + describe(bo)
	}
	if t.State != nil {
		return *t.State
	}
	return "running"
}

// describe names what bo waits for: "lock 0x…", "critical section
// NAME (0x…)", "barrier of region 0x…".
func describe(bo *inspect.BlockedOn) string {
	s := strings.ReplaceAll(bo.What, "_", " ")
	switch ompd.WaitKind(bo.What) {
	case ompd.WaitCritical:
		s = "critical section"
		if bo.Name != "" {
			s += " " + bo.Name
		}
	case ompd.WaitBarrier:
		s = "the barrier of region"
	case ompd.WaitTaskwait:
		s = "the children of task"
	}
	if bo.Object != "" {
		s += " " + bo.Object
	}
	return s
}

func (a *analysis) target(tid int) inspect.WaitTarget {
	wt := inspect.WaitTarget{OSTID: tid, Doing: "running"}
	if t := a.threads[tid]; t != nil {
		wt.Location, wt.Doing = location(t), doing(t)
	}
	return wt
}

// targets fills whom t waits for.
func (a *analysis) targets(t *inspect.Thread) {
	bo := t.BlockedOn
	if bo == nil {
		return
	}
	switch {
	case bo.Holder != nil:
		bo.WaitingFor = append(bo.WaitingFor, a.target(*bo.Holder))
	case bo.What == string(ompd.WaitBarrier):
		for _, wt := range a.barrierTargets(bo) {
			if wt.OSTID != t.OSTID { // never itself, whatever the report says
				bo.WaitingFor = append(bo.WaitingFor, wt)
			}
		}
	case bo.What == string(ompd.WaitTaskwait), bo.What == string(ompd.WaitTaskgroup):
		// A taskwait waits for its task's children, the end of a
		// taskgroup for its member tasks (when tasks name theirs).
		tasks := a.children[bo.Object]
		if bo.What == string(ompd.WaitTaskgroup) {
			tasks = a.members[bo.Object]
		}
		for _, k := range tasks {
			switch {
			case k.Status == "running" && k.Thread != nil && *k.Thread != t.OSTID:
				bo.WaitingFor = append(bo.WaitingFor, a.target(*k.Thread))
			case k.Status == "queued" || k.Status == "blocked":
				bo.QueuedChildren++
			}
		}
	}
}

// barrierTargets are the members of the region of barrier bo that have
// not arrived at it.
func (a *analysis) barrierTargets(bo *inspect.BlockedOn) []inspect.WaitTarget {
	if out, ok := a.notArrived[bo.Object]; ok {
		return out
	}
	var out []inspect.WaitTarget
	if reg := a.regions[bo.Object]; reg != nil && !reg.Serialized {
		for _, m := range reg.Threads {
			o := a.threads[m]
			if o == nil {
				continue
			}
			if ob := o.BlockedOn; ob != nil && ob.What == bo.What && ob.Object == bo.Object {
				continue // arrived
			}
			out = append(out, a.target(m))
		}
	}
	a.notArrived[bo.Object] = out
	return out
}

// graph is every waiter's edges, by waiter and target.
func (a *analysis) graph() []inspect.WaitEdge {
	var out []inspect.WaitEdge
	for _, t := range a.rep.Threads {
		bo := t.BlockedOn
		if bo == nil || bo.What == string(ompd.WaitIdle) {
			continue
		}
		for _, w := range bo.WaitingFor {
			out = append(out, inspect.WaitEdge{From: t.OSTID, To: w.OSTID, What: bo.What, Object: bo.Object})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].From != out[j].From {
			return out[i].From < out[j].From
		}
		return out[i].To < out[j].To
	})
	if out == nil {
		out = []inspect.WaitEdge{}
	}
	return out
}

// diagnose draws the conclusions the graph proves, most severe first.
func (a *analysis) diagnose() []inspect.Diagnosis {
	out := []inspect.Diagnosis{}
	inCycle := map[int]bool{}
	for _, cyc := range cycles(a.rep.WaitGraph) {
		for _, tid := range cyc {
			inCycle[tid] = true
		}
		out = append(out, a.deadlock(cyc))
	}
	out = append(out, a.blockedBarriers(inCycle)...)
	out = append(out, a.blockedHolders(inCycle)...)
	if d, ok := a.unknownHolders(); ok {
		out = append(out, d)
	}
	return out
}

// cycles returns the graph's strongly connected components that hold a
// cycle (two threads or more, or a thread waiting for itself), each
// ordered along its edges from its lowest thread id.
func cycles(edges []inspect.WaitEdge) [][]int {
	succ := map[int][]int{}
	var nodes []int
	seenNode := map[int]bool{}
	for _, e := range edges {
		succ[e.From] = append(succ[e.From], e.To)
		for _, n := range []int{e.From, e.To} {
			if !seenNode[n] {
				seenNode[n] = true
				nodes = append(nodes, n)
			}
		}
	}
	sort.Ints(nodes)
	// Tarjan's algorithm, iterative over a small graph: recursion depth
	// is bounded by the number of threads.
	index, low := map[int]int{}, map[int]int{}
	onStack := map[int]bool{}
	var stack []int
	var sccs [][]int
	next := 0
	var visit func(v int)
	visit = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range succ[v] {
			if _, ok := index[w]; !ok {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var scc []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				scc = append(scc, w)
				if w == v {
					break
				}
			}
			if len(scc) > 1 || slices.Contains(succ[v], v) {
				sccs = append(sccs, orderCycle(scc, succ))
			}
		}
	}
	for _, v := range nodes {
		if _, ok := index[v]; !ok {
			visit(v)
		}
	}
	sort.Slice(sccs, func(i, j int) bool { return sccs[i][0] < sccs[j][0] })
	return sccs
}

// orderCycle orders a component from its lowest thread along edges that
// stay inside it, each thread once.
func orderCycle(scc []int, succ map[int][]int) []int {
	in := map[int]bool{}
	for _, v := range scc {
		in[v] = true
	}
	start := slices.Min(scc)
	order := []int{start}
	seen := map[int]bool{start: true}
	for cur := start; len(order) < len(scc); {
		moved := false
		for _, w := range succ[cur] {
			if in[w] && !seen[w] {
				order, seen[w], cur, moved = append(order, w), true, w, true
				break
			}
		}
		if !moved {
			break
		}
	}
	for _, v := range scc { // a component that is no simple cycle
		if !seen[v] {
			order = append(order, v)
		}
	}
	return order
}

// step says why thread tid waits, for a diagnosis sentence.
func (a *analysis) step(tid int) string {
	t := a.threads[tid]
	if t == nil || t.BlockedOn == nil {
		return fmt.Sprintf("%d runs", tid)
	}
	bo := t.BlockedOn
	s := fmt.Sprintf("%d waits for %s", tid, describe(bo))
	if bo.Location != "" {
		s += " (" + bo.Location + ")"
	}
	if bo.Holder != nil {
		s += fmt.Sprintf(", held by %d", *bo.Holder)
	}
	return s
}

func (a *analysis) deadlock(cyc []int) inspect.Diagnosis {
	d := inspect.Diagnosis{Kind: "deadlock", Threads: slices.Sorted(slices.Values(cyc)), Objects: []string{}}
	var steps []string
	for _, tid := range cyc {
		if bo := a.threads[tid].BlockedOn; bo != nil && bo.Object != "" && !slices.Contains(d.Objects, bo.Object) {
			d.Objects = append(d.Objects, bo.Object)
		}
		steps = append(steps, a.step(tid))
	}
	d.Text = fmt.Sprintf("threads %s are deadlocked: %s", joinInts(d.Threads), strings.Join(steps, "; "))
	return d
}

// blockedBarriers: barriers a member cannot reach because it waits for
// something else.
func (a *analysis) blockedBarriers(inCycle map[int]bool) []inspect.Diagnosis {
	var out []inspect.Diagnosis
	done := map[string]bool{}
	for _, t := range a.rep.Threads {
		bo := t.BlockedOn
		if bo == nil || bo.What != string(ompd.WaitBarrier) || done[bo.Object] {
			continue
		}
		var stuck []int
		var steps []string
		for _, w := range bo.WaitingFor {
			o := a.threads[w.OSTID]
			if o == nil || o.BlockedOn == nil || o.BlockedOn.What == string(ompd.WaitIdle) {
				continue
			}
			stuck = append(stuck, w.OSTID)
			steps = append(steps, a.step(w.OSTID))
		}
		if len(stuck) == 0 {
			continue
		}
		done[bo.Object] = true
		where := ""
		if r := a.regions[bo.Object]; r != nil && r.Location != "" {
			where = " (" + filepath.Base(r.Location) + ")"
		}
		slices.Sort(stuck)
		d := inspect.Diagnosis{Kind: "barrier_blocked", Threads: stuck, Objects: []string{bo.Object},
			Text: fmt.Sprintf("the barrier of region %s%s cannot complete: %s", bo.Object, where, strings.Join(steps, "; "))}
		out = append(out, d)
	}
	return out
}

// blockedHolders: locks and critical sections held by a thread that waits
// itself (at a barrier: lock_held_at_barrier), outside deadlocks.
func (a *analysis) blockedHolders(inCycle map[int]bool) []inspect.Diagnosis {
	var atBarrier, others []inspect.Diagnosis
	done := map[string]bool{}
	for _, t := range a.rep.Threads {
		bo := t.BlockedOn
		if bo == nil || bo.Holder == nil || inCycle[t.OSTID] {
			continue
		}
		h := a.threads[*bo.Holder]
		if h == nil || h.BlockedOn == nil || h.BlockedOn.What == string(ompd.WaitIdle) || done[bo.Object] {
			continue
		}
		done[bo.Object] = true
		var waiters []int
		for _, o := range a.rep.Threads {
			if ob := o.BlockedOn; ob != nil && ob.Object == bo.Object && ob.What == bo.What {
				waiters = append(waiters, o.OSTID)
			}
		}
		slices.Sort(waiters)
		d := inspect.Diagnosis{Threads: append([]int{*bo.Holder}, waiters...), Objects: []string{bo.Object},
			Text: fmt.Sprintf("%s is held by %d, which is blocked: %s; waiting for it: %s", describe(bo), *bo.Holder, a.step(*bo.Holder), joinInts(waiters))}
		if h.BlockedOn.What == string(ompd.WaitBarrier) {
			d.Kind = "lock_held_at_barrier"
			atBarrier = append(atBarrier, d)
		} else {
			d.Kind = "holder_blocked"
			others = append(others, d)
		}
	}
	return append(atBarrier, others...)
}

// unknownHolders lists the waits whose holder the runtime does not
// record.
func (a *analysis) unknownHolders() (inspect.Diagnosis, bool) {
	d := inspect.Diagnosis{Kind: "holder_unknown", Threads: []int{}, Objects: []string{}}
	var steps []string
	why := ""
	for _, t := range a.rep.Threads {
		bo := t.BlockedOn
		if bo == nil || bo.Holder != nil || !holds(bo.What) {
			continue
		}
		d.Threads = append(d.Threads, t.OSTID)
		if bo.Object != "" && !slices.Contains(d.Objects, bo.Object) {
			d.Objects = append(d.Objects, bo.Object)
		}
		steps = append(steps, a.step(t.OSTID))
		switch {
		case why == "":
			why = bo.HolderUnknown
		case why != bo.HolderUnknown:
			why = "see each thread's blocked_on.holder_unknown"
		}
	}
	if len(steps) == 0 {
		return d, false
	}
	slices.Sort(d.Threads)
	d.Text = strings.Join(steps, "; ") + "; the holders are not known"
	if why != "" {
		d.Text += " (" + why + ")"
	}
	return d, true
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
