package gomp

import (
	"cmp"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/ompd/backend"
)

// BackendName is the name of libgomp's backend in reports.
const BackendName = "native"

// Backend returns as behind the neutral backend interface the report is
// built from. libgomp records less than LLVM's runtime, and its answers
// say so:
//   - no global thread ids, no OMPT states (StateTracking is false; the
//     states InferredState gives come from the futex a thread sleeps on),
//     no task frames, no scheduling task, no untied flag;
//   - a region's outlined function and its construct's location are not
//     stored: Function and Location fail with ompd.ErrNoLocation, and the
//     caller finds the function on the member threads' stacks.
//
// Teams met through thread handles are remembered: QueuedTasks walks
// their task queues.
func Backend(as *AddressSpace) backend.AddressSpace {
	return &gas{as: as, teams: map[uint64]bool{}, read: map[uint64]teamRead{}}
}

type gas struct {
	as *AddressSpace

	mu    sync.Mutex
	teams map[uint64]bool
	// read holds each team read, once per address space (one stop):
	// every region and task handle of a team shares it.
	read map[uint64]teamRead
}

var _ backend.ICVBatch = (*gas)(nil)

type teamRead struct {
	tm  *Team
	err error
}

// team reads the team at addr once.
func (g *gas) team(addr uint64) (*Team, error) {
	g.mu.Lock()
	r, ok := g.read[addr]
	g.mu.Unlock()
	if !ok {
		r.tm, r.err = g.as.Team(addr)
		g.mu.Lock()
		g.read[addr] = r
		g.mu.Unlock()
	}
	return r.tm, r.err
}

// Unavailable lists the report fields libgomp has no record of.
var Unavailable = []string{
	"threads[].gtid", "threads[].wait_id",
	"tasks[].exit_frame", "tasks[].enter_frame", "tasks[].scheduling",
	"tasks[].construct_function", "tasks[status=blocked]",
	"regions[].construct_function",
}

func (g *gas) Backend() string     { return BackendName }
func (g *gas) StateTracking() bool { return false }
func (g *gas) Release() error      { return nil }
func (g *gas) CheckThreads() error { return nil }
func (g *gas) Unavailable() []string {
	return append(append([]string{}, Unavailable...), icvUnavailable()...)
}

// openMPVersions is the _OPENMP value each GCC release's libgomp
// prints for OMP_DISPLAY_ENV (its env.c): libgomp keeps none in memory.
var openMPVersions = map[int]int{10: 201511, 11: 201511, 12: 201511, 13: 201511, 14: 201511, 16: 202111}

// OMPVersion is the _OPENMP value of libgomp's release, when known.
func (g *gas) OMPVersion() (int, error) {
	if v, ok := openMPVersions[g.as.Release.Major]; ok {
		return v, nil
	}
	return 0, fmt.Errorf("the OpenMP version of an unknown libgomp release: %w", backend.ErrUnsupported)
}

// OMPVersionString names the runtime: GNU libgomp, its GCC release and
// version node.
func (g *gas) OMPVersionString() (string, error) {
	r := g.as.Release
	switch {
	case r.Major != 0:
		return fmt.Sprintf("GNU libgomp of GCC %d (%s)", r.Major, r.Node), nil
	case r.Node != "":
		return fmt.Sprintf("GNU libgomp, unknown release (%s)", r.Node), nil
	}
	return "GNU libgomp, unknown release", nil
}

func icvUnavailable() []string {
	out := make([]string, 0, len(UnavailableICVs))
	for _, n := range UnavailableICVs {
		out = append(out, "icvs["+n+"]")
	}
	return out
}

func (g *gas) remember(team uint64) {
	if team == 0 {
		return
	}
	g.mu.Lock()
	g.teams[team] = true
	g.mu.Unlock()
}

// ThreadHandle returns the thread whose thread pointer is id. A thread
// with no libgomp state at all (no team, task or pool) is not an OpenMP
// thread: ompd.ErrUnavailable.
func (g *gas) ThreadHandle(kind ompd.ThreadIDKind, id uint64) (backend.Thread, error) {
	if kind != ompd.ThreadIDPthread {
		return nil, fmt.Errorf("thread id kind %d: %w", kind, ompd.ErrBadInput)
	}
	t, err := g.as.Thread(id)
	if err != nil {
		return nil, err
	}
	if t.Team == 0 && t.Task == 0 && t.Pool == 0 && !t.Idle {
		return nil, ompd.ErrUnavailable
	}
	g.remember(t.Team)
	return &gthread{g: g, t: t}, nil
}

// icvTable lists the ICVs with the names and scopes ompd/llvm uses, for
// the ones libgomp holds.
var icvTable = []ompd.ICV{
	{Name: "dyn-var", Scope: ompd.ScopeThread},
	{Name: "run-sched-var", Scope: ompd.ScopeTask, String: true},
	{Name: "cancel-var", Scope: ompd.ScopeAddressSpace},
	{Name: "max-task-priority-var", Scope: ompd.ScopeAddressSpace},
	{Name: "nthreads-var", Scope: ompd.ScopeThread},
	{Name: "default-device-var", Scope: ompd.ScopeThread},
	{Name: "levels-var", Scope: ompd.ScopeParallel},
	{Name: "active-levels-var", Scope: ompd.ScopeParallel},
	{Name: "thread-limit-var", Scope: ompd.ScopeTask},
	{Name: "max-active-levels-var", Scope: ompd.ScopeTask},
	{Name: "bind-var", Scope: ompd.ScopeTask},
	{Name: "thread-num-var", Scope: ompd.ScopeThread},
	{Name: "final-task-var", Scope: ompd.ScopeTask},
	{Name: "implicit-task-var", Scope: ompd.ScopeTask},
	{Name: "team-size-var", Scope: ompd.ScopeParallel},
}

func (g *gas) ICVs() ([]ompd.ICV, error) {
	out := make([]ompd.ICV, 0, len(icvTable))
	for i, icv := range icvTable {
		if (icv.Name == "cancel-var" && g.as.CancelVar == 0) || (icv.Name == "max-task-priority-var" && g.as.MaxTaskPriorityVar == 0) {
			continue
		}
		icv.ID = ompd.ICVID(i + 1)
		out = append(out, icv)
	}
	return out, nil
}

// ICV reads one ICV of a handle of this backend (the address space, a
// thread, a parallel region or a task).
func (g *gas) ICV(handle any, icv ompd.ICV) (ompd.Value, error) {
	r := icvReader{g: g, handle: handle}
	return r.value(icv)
}

// ICVValues reads icvs from handle (backend.ICVBatch): the handle's ICV
// block is read once for all of them.
func (g *gas) ICVValues(handle any, icvs []ompd.ICV, vals []ompd.Value, errs []error) {
	r := icvReader{g: g, handle: handle}
	for i, icv := range icvs {
		vals[i], errs[i] = r.value(icv)
	}
}

// icvReader reads the ICVs of one handle, its ICV block once.
type icvReader struct {
	g      *gas
	handle any

	read bool
	ic   *ICVs // the block's ICVs
	err  error
}

// handleScope is the scope of the ICVs a handle of this backend answers
// (OMPD's ompd_get_icv_from_scope asks each ICV of a handle of its own
// scope), false for no handle of this backend.
func handleScope(handle any) (ompd.Scope, bool) {
	switch handle.(type) {
	case *gas:
		return ompd.ScopeAddressSpace, true
	case *gthread:
		return ompd.ScopeThread, true
	case *gparallel:
		return ompd.ScopeParallel, true
	case *gtask:
		return ompd.ScopeTask, true
	}
	return 0, false
}

// tableICV returns icvTable's entry for icv: by its ID, as ICVs numbers
// them (a name given with it must agree), or, for an ICV without an ID,
// by its name; false for an ICV this backend does not know. The entry,
// not the caller's copy, says the ICV's scope.
func tableICV(icv ompd.ICV) (ompd.ICV, bool) {
	if icv.ID != 0 {
		i := int(icv.ID) - 1
		if i < 0 || i >= len(icvTable) || (icv.Name != "" && icv.Name != icvTable[i].Name) {
			return ompd.ICV{}, false
		}
		known := icvTable[i]
		known.ID = icv.ID
		return known, true
	}
	for _, known := range icvTable {
		if known.Name == icv.Name {
			return known, true
		}
	}
	return ompd.ICV{}, false
}

// value reads icv (ICV). An ICV asked of a handle of another scope is bad
// input, as OMPD has it: the address space's block, say, holds no
// thread's ICVs, and its zero would read as a value.
func (r *icvReader) value(asked ompd.ICV) (ompd.Value, error) {
	scope, ok := handleScope(r.handle)
	if !ok {
		return ompd.Value{}, fmt.Errorf("ICV %s: %T is no handle of libgomp's backend", asked.Name, r.handle)
	}
	icv, ok := tableICV(asked)
	if !ok {
		return ompd.Value{}, fmt.Errorf("ICV %q (id %d): no such ICV in libgomp's backend: %w", asked.Name, asked.ID, ompd.ErrBadInput)
	}
	if scope != icv.Scope {
		return ompd.Value{}, fmt.Errorf("ICV %s has %s scope, asked of a handle of %s scope: %w", icv.Name, icv.Scope, scope, ompd.ErrBadInput)
	}
	switch h := r.handle.(type) {
	case *gthread:
		if icv.Name == "thread-num-var" {
			return ompd.Value{Num: int64(h.t.TeamID)}, nil
		}
	case *gparallel:
		tm, terr := h.team()
		if terr != nil {
			return ompd.Value{}, terr
		}
		switch icv.Name {
		case "levels-var":
			return ompd.Value{Num: int64(tm.Level)}, nil
		case "active-levels-var":
			return ompd.Value{Num: int64(tm.ActiveLevel)}, nil
		case "team-size-var":
			return ompd.Value{Num: int64(tm.NThreads)}, nil
		}
		return ompd.Value{}, fmt.Errorf("ICV %s of a parallel region: %w", icv.Name, ompd.ErrUnavailable)
	case *gtask:
		k, kerr := h.read()
		if kerr != nil {
			return ompd.Value{}, kerr
		}
		switch icv.Name {
		case "final-task-var":
			return boolValue(k.Final), nil
		case "implicit-task-var":
			return boolValue(k.Kind == TaskImplicit), nil
		}
	}
	if !r.read {
		r.read = true
		r.ic, r.err = r.block()
	}
	if r.err != nil {
		return ompd.Value{}, r.err
	}
	v, ok := r.ic.Value(icv.Name)
	if !ok {
		return ompd.Value{}, fmt.Errorf("ICV %s: %w", icv.Name, ompd.ErrUnavailable)
	}
	return v, nil
}

// block reads the ICVs the handle's block holds: the address space's
// globals of their own, a thread's task's ICVs, or a task's.
func (r *icvReader) block() (*ICVs, error) {
	var ic *ICVs
	var err error
	switch h := r.handle.(type) {
	case *gas:
		ic = &ICVs{Cancel: -1, MaxTaskPriority: -1}
		err = r.g.as.globalICVs(ic)
	case *gthread:
		ic, err = r.g.as.ICVsOf(h.t)
	case *gtask:
		ic, err = r.g.as.ICVsOf(&Thread{Task: h.addr})
	}
	return ic, err
}

func boolValue(b bool) ompd.Value {
	if b {
		return ompd.Value{Num: 1}
	}
	return ompd.Value{Num: 0}
}

// DisplayControlVars gives the lines of OMP_DISPLAY_ENV that libgomp
// prints from what this package reads, with libgomp's own spelling of
// the values (its env.c; GCC 13 on prefix them with "[host]", left out
// here): the global ICVs (gomp_global_icv), the cancellation and task
// priority globals. OMP_NUM_THREADS and OMP_PROC_BIND are left out: they
// are lists (OMP_NUM_THREADS=4,2) whose elements after the first are in
// globals no exported function shows, so a value given here could be
// wrong; their first elements are the ICVs nthreads-var and bind-var.
func (g *gas) DisplayControlVars() ([]string, error) {
	if g.as.GlobalICV == 0 {
		return nil, errors.New("libgomp: gomp_global_icv was not found")
	}
	ic, err := g.as.ICVsOf(&Thread{})
	if err != nil {
		return nil, err
	}
	yes := func(b bool) string {
		if b {
			return "TRUE"
		}
		return "FALSE"
	}
	var out []string
	if v, err := g.OMPVersion(); err == nil {
		out = append(out, fmt.Sprintf("_OPENMP='%d'", v))
	}
	out = append(out,
		fmt.Sprintf("OMP_DYNAMIC='%s'", yes(ic.Dyn)),
		fmt.Sprintf("OMP_NESTED='%s'", yes(ic.MaxActiveLevels > 1)),
		fmt.Sprintf("OMP_SCHEDULE='%s'", displaySchedule(ic.RunSched, ic.Chunk)),
		fmt.Sprintf("OMP_THREAD_LIMIT='%d'", ic.ThreadLimit),
		fmt.Sprintf("OMP_MAX_ACTIVE_LEVELS='%d'", ic.MaxActiveLevels),
	)
	if ic.Cancel >= 0 {
		out = append(out, fmt.Sprintf("OMP_CANCELLATION='%s'", yes(ic.Cancel != 0)))
	}
	out = append(out, fmt.Sprintf("OMP_DEFAULT_DEVICE='%d'", ic.DefaultDevice))
	if ic.MaxTaskPriority >= 0 {
		out = append(out, fmt.Sprintf("OMP_MAX_TASK_PRIORITY='%d'", ic.MaxTaskPriority))
	}
	return out, nil
}

// displaySchedule spells run-sched-var as libgomp's OMP_DISPLAY_ENV does:
// a MONOTONIC: modifier (none for monotonic static, NONMONOTONIC: for a
// plain static), the kind in capitals, and the chunk size when it is not
// the kind's default (0 for static, 1 for the others).
func displaySchedule(sched, chunk int32) string {
	s := ""
	mono := sched&schedMonotonic != 0
	kind := sched &^ schedMonotonic
	switch {
	case mono && kind != schedStatic:
		s = "MONOTONIC:"
	case !mono && kind == schedStatic:
		s = "NONMONOTONIC:"
	}
	def := int32(1)
	switch kind {
	case 0:
		s += "RUNTIME"
	case schedStatic:
		s += "STATIC"
		def = 0
	case schedDynamic:
		s += "DYNAMIC"
	case schedGuided:
		s += "GUIDED"
	case schedAuto:
		return s + "AUTO"
	default:
		return s + fmt.Sprintf("unknown (%d)", kind)
	}
	if chunk != def {
		s += fmt.Sprintf(",%d", chunk)
	}
	return s
}

// QueuedTasks returns the tasks waiting in the queues of the teams met
// through thread handles, in address order of their teams.
func (g *gas) QueuedTasks() ([]backend.Task, error) {
	g.mu.Lock()
	teams := make([]uint64, 0, len(g.teams))
	for t := range g.teams {
		teams = append(teams, t)
	}
	g.mu.Unlock()
	sort.Slice(teams, func(i, j int) bool { return teams[i] < teams[j] })
	var out []backend.Task
	var errs []error
	for _, team := range teams {
		q, err := g.as.TeamQueue(team)
		for _, k := range q {
			out = append(out, &gtask{g: g, addr: k, team: team})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("team %#x: %w", team, err))
		}
	}
	return out, errors.Join(errs...)
}

func (g *gas) BlockedTasks([]backend.Task) ([]backend.BlockedTask, error) {
	return nil, fmt.Errorf("libgomp's task dependences: %w", backend.ErrUnsupported)
}

type gthread struct {
	g *gas
	t *Thread
}

func (h *gthread) Label() string  { return ompd.Hex(h.t.Addr) }
func (h *gthread) Release() error { return nil }
func (h *gthread) Compare(o backend.Thread) int {
	return cmp.Compare(h.t.Addr, o.(*gthread).t.Addr)
}

// GTID: libgomp has no global thread ids.
func (h *gthread) GTID() (int, error) {
	return 0, fmt.Errorf("libgomp has no global thread id: %w", backend.ErrUnsupported)
}

func (h *gthread) ID(kind ompd.ThreadIDKind) (uint64, error) {
	if kind != ompd.ThreadIDPthread {
		return 0, fmt.Errorf("thread id kind %d: %w", kind, ompd.ErrUnsupported)
	}
	return h.t.TP, nil
}

// ThreadNum is the thread's number in its team; an idle pool worker is in
// none (ompd.ErrUnavailable).
func (h *gthread) ThreadNum() (int, error) {
	if h.t.Idle {
		return 0, ompd.ErrUnavailable
	}
	return h.t.TeamID, nil
}

// State: libgomp records none (see InferredState).
func (h *gthread) State() (ompd.State, uint64, error) {
	return 0, 0, fmt.Errorf("libgomp records no thread states: %w", backend.ErrUnsupported)
}

// InferredState is the thread's state as its registers and team state
// show it: asleep on its team's barrier, idle in the pool, asleep on
// another futex (a lock, a critical section, a taskwait: the stack tells
// which: overhead until then), or working. wait is the futex address, 0
// when the thread is not in a futex wait.
func (h *gthread) InferredState() (st ompd.State, wait uint64) {
	w, err := h.g.as.WaitOf(h.t.TP)
	switch {
	case err == nil && w.Kind == WaitBarrier:
		return ompd.StateWaitBarrier, w.Futex
	case err == nil && w.Kind == WaitDock, h.t.Idle:
		return ompd.StateIdle, w.Futex
	case err == nil && w.Kind == WaitOther:
		return ompd.StateOverhead, w.Futex
	case h.t.Team != 0:
		return ompd.StateWorkParallel, 0
	}
	return ompd.StateWorkSerial, 0
}

// BlockedOn says what the thread waits for (AddressSpace.BlockedOn): nil
// when it does not wait in a futex, or its futex is not one libgomp's
// records explain (the caller's stack tells then).
func (h *gthread) BlockedOn() (*ompd.Wait, error) { return h.g.as.BlockedOn(h.t) }

var _ ompd.Waiter = (*gthread)(nil)

// IdleReason says why the thread is an idle pool worker, "" when it is
// not one.
func (h *gthread) IdleReason() string { return h.t.IdleReason }

func (h *gthread) CurrentParallel() (backend.Parallel, error) {
	return &gparallel{g: h.g, addr: h.t.Team}, nil
}

// CurrentTask is the thread's task. A thread that has none yet (the
// initial thread of a program or of a pthread before libgomp needed one)
// runs its initial task, whose ICVs are gomp_global_icv's.
func (h *gthread) CurrentTask() (backend.Task, error) {
	if h.t.Idle {
		// An idle pool worker's task pointer is its implicit task in
		// the team that has ended: no task.
		return nil, fmt.Errorf("thread %#x has no current task: %w", h.t.TP, ompd.ErrUnavailable)
	}
	if h.t.Task == 0 {
		return &gtask{g: h.g, initialOf: h.t.TP}, nil
	}
	return &gtask{g: h.g, addr: h.t.Task, team: h.t.Team}, nil
}

// gparallel is a team; addr 0 is the initial (level 0) region.
type gparallel struct {
	g    *gas
	addr uint64

	once sync.Once
	tm   *Team
	err  error
}

func (p *gparallel) team() (*Team, error) {
	p.once.Do(func() {
		if p.addr == 0 {
			p.tm = &Team{NThreads: 1}
			return
		}
		p.tm, p.err = p.g.team(p.addr)
		if p.err != nil && p.tm != nil && p.tm.NThreads > 0 {
			// The team's own fields were read; a member was not: keep
			// the team, the member's error shows in ThreadIn.
			p.err = nil
		}
	})
	return p.tm, p.err
}

func (p *gparallel) Label() string  { return ompd.Hex(p.addr) }
func (p *gparallel) Release() error { return nil }
func (p *gparallel) Compare(o backend.Parallel) int {
	return cmp.Compare(p.addr, o.(*gparallel).addr)
}

// HandleKey is what Compare compares (internal/handles.Keyed).
func (p *gparallel) HandleKey() [2]uint64 { return [2]uint64{p.addr, 0} }

func (p *gparallel) Enclosing() (backend.Parallel, error) {
	if p.addr == 0 {
		return nil, ompd.ErrUnavailable
	}
	tm, err := p.team()
	if err != nil {
		return nil, err
	}
	p.g.remember(tm.Parent)
	return &gparallel{g: p.g, addr: tm.Parent}, nil
}

func (p *gparallel) Level() (int, error) {
	tm, err := p.team()
	if err != nil {
		return 0, err
	}
	return tm.Level, nil
}

func (p *gparallel) ActiveLevel() (int, error) {
	tm, err := p.team()
	if err != nil {
		return 0, err
	}
	return tm.ActiveLevel, nil
}

func (p *gparallel) TeamSize() (int, error) {
	tm, err := p.team()
	if err != nil {
		return 0, err
	}
	return tm.NThreads, nil
}

// Serialized: a team of one thread (libgomp gives an inactive region a
// team of its own, of one thread).
func (p *gparallel) Serialized() (bool, error) {
	tm, err := p.team()
	if err != nil {
		return false, err
	}
	return tm.NThreads == 1, nil
}

func (p *gparallel) ThreadIn(n int) (backend.Thread, error) {
	tm, err := p.team()
	if err != nil {
		return nil, err
	}
	var addr uint64
	if n >= 0 && n < len(tm.Members) {
		addr = tm.Members[n]
	} else if addr, err = p.g.as.memberAt(p.addr, n); err != nil {
		return nil, err
	}
	if addr == 0 {
		return nil, fmt.Errorf("thread %d of team %#x: %w", n, p.addr, ompd.ErrUnavailable)
	}
	t, err := p.g.as.Thread(p.g.as.ThreadPointer(addr))
	if err != nil {
		return nil, err
	}
	return &gthread{g: p.g, t: t}, nil
}

func (p *gparallel) TaskIn(n int) (backend.Task, error) {
	if p.addr == 0 {
		return nil, ompd.ErrUnavailable
	}
	a, err := p.g.as.ImplicitTask(p.addr, n)
	if err != nil {
		return nil, err
	}
	return &gtask{g: p.g, addr: a, team: p.addr}, nil
}

// Function: libgomp does not store a region's outlined function.
func (p *gparallel) Function() (ompd.Address, error) {
	return 0, fmt.Errorf("libgomp does not store a region's outlined function: %w", ompd.ErrNoLocation)
}

// Location: libgomp records no construct locations.
func (p *gparallel) Location() (ompd.Location, error) {
	return ompd.Location{}, ompd.ErrNoLocation
}

// gtask is a task; team is the team it belongs to, 0 when not known.
// A task at address 0 is the initial task of the thread whose thread
// pointer is initialOf: libgomp allocates none for it.
type gtask struct {
	g         *gas
	addr      uint64
	team      uint64
	initialOf uint64

	once sync.Once
	k    *Task
	err  error
}

func (k *gtask) read() (*Task, error) {
	k.once.Do(func() {
		if k.addr == 0 {
			k.k = &Task{Kind: TaskImplicit, KindName: kindNames[TaskImplicit], Priority: -1}
			return
		}
		k.k, k.err = k.g.as.Task(k.addr)
	})
	return k.k, k.err
}

// Label is the task's address, or for an initial task "initial@" and its
// thread's thread pointer.
func (k *gtask) Label() string {
	if k.addr == 0 {
		return fmt.Sprintf("initial@%#x", k.initialOf)
	}
	return ompd.Hex(k.addr)
}
func (k *gtask) Release() error { return nil }
func (k *gtask) Compare(o backend.Task) int {
	ok := o.(*gtask)
	if c := cmp.Compare(k.addr, ok.addr); c != 0 {
		return c
	}
	return cmp.Compare(k.initialOf, ok.initialOf)
}

// HandleKey is what Compare compares (internal/handles.Keyed).
func (k *gtask) HandleKey() [2]uint64 { return [2]uint64{k.addr, k.initialOf} }

// Taskgroup implements ompd.TaskgroupMember: the task's taskgroup
// (gomp_task.taskgroup: the one it was created in, inherited by the tasks
// it creates outside a taskgroup of their own). An initial task belongs
// to none.
func (k *gtask) Taskgroup() (ompd.Address, error) {
	if k.addr == 0 {
		return 0, nil
	}
	return k.g.as.field(k.addr, "gomp_task.taskgroup")
}

func (k *gtask) Generating() (backend.Task, error) {
	t, err := k.read()
	if err != nil {
		return nil, err
	}
	if k.addr == 0 {
		return nil, ompd.ErrUnavailable
	}
	// An explicit task's parent runs in the same team; an implicit
	// task's is the encountering thread's task, in the enclosing team.
	team := k.team
	var tm *Team
	if t.Kind == TaskImplicit && team != 0 {
		team = 0
		if tm, err = k.g.team(k.team); err == nil || (tm != nil && tm.NThreads > 0) {
			team = tm.Parent
		} else {
			tm = nil
		}
	}
	if t.Parent == 0 {
		// A level-1 region's implicit tasks whose encountering thread
		// had no task yet: its initial task.
		if tm != nil && tm.Level == 1 && len(tm.Members) > 0 && tm.Members[0] != 0 {
			return &gtask{g: k.g, initialOf: k.g.as.ThreadPointer(tm.Members[0])}, nil
		}
		return nil, ompd.ErrUnavailable
	}
	return &gtask{g: k.g, addr: t.Parent, team: team}, nil
}

// Scheduling: libgomp does not record which task a task interrupted.
func (k *gtask) Scheduling() (backend.Task, error) { return nil, ompd.ErrUnavailable }

func (k *gtask) Parallel() (backend.Parallel, error) {
	if k.team == 0 || k.addr == 0 {
		return nil, ompd.ErrUnavailable
	}
	return &gparallel{g: k.g, addr: k.team}, nil
}

// Flags: libgomp records the kind (implicit, undeferred, ...) and
// final_task; untied tasks run as tied ones and are not told apart.
func (k *gtask) Flags() (ompd.Flags, backend.FlagSet, error) {
	t, err := k.read()
	if err != nil {
		return ompd.Flags{}, 0, err
	}
	f := ompd.Flags{
		Explicit: t.Kind != TaskImplicit,
		Final:    t.Final,
		Serial:   t.Kind == TaskUndeferred,
	}
	return f, backend.FlagExplicit | backend.FlagFinal | backend.FlagUndeferred, nil
}

func (k *gtask) Function() (ompd.Address, error) {
	t, err := k.read()
	if err != nil {
		return 0, err
	}
	if t.Fn == 0 {
		return 0, ompd.ErrUnavailable
	}
	return t.Fn, nil
}

func (k *gtask) Frame() (ompd.Address, ompd.Address, error) {
	return 0, 0, fmt.Errorf("libgomp records no task frames: %w", backend.ErrUnsupported)
}

func (k *gtask) Location() (ompd.Location, error) { return ompd.Location{}, ompd.ErrNoLocation }
