package gomp

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// Bounds of the walks over the target's structures.
const (
	// MaxThreads bounds a team's size and the members read.
	MaxThreads = 4096
	// MaxNesting bounds walks up the chain of teams (prev_ts) and of
	// tasks (parent).
	MaxNesting = 64
	// MaxQueued bounds the tasks read from one queue.
	MaxQueued = 4096
)

// Thread is one thread's libgomp state (its gomp_tls_data).
type Thread struct {
	// TP is the thread pointer (fs_base, the pthread_t); Addr the address
	// of its struct gomp_thread.
	TP, Addr uint64
	// Team is the team it is a member of, 0 when none (a thread outside
	// any region, or an idle pool worker); TeamID is its thread number in
	// that team, Level and ActiveLevel the nesting levels.
	Team                       uint64
	TeamID, Level, ActiveLevel int
	// Task is its current task (0: none yet; gomp_global_icv applies).
	Task uint64
	// Pool is its thread pool (struct gomp_thread_pool), 0 when none.
	Pool uint64
	// Idle is true for a pool worker between regions; IdleReason says how
	// it was told, StaleTeam is the team state it kept (not a region).
	Idle       bool
	IdleReason string
	StaleTeam  uint64
}

// ThreadAddr returns the address of the struct gomp_thread of the thread
// whose thread pointer is tp.
func (as *AddressSpace) ThreadAddr(tp uint64) uint64 { return uint64(int64(tp) + as.TLSOffset) }

// ThreadPointer returns the thread pointer of the thread whose struct
// gomp_thread is at addr.
func (as *AddressSpace) ThreadPointer(addr uint64) uint64 { return uint64(int64(addr) - as.TLSOffset) }

// field reads an unsigned field of size 1, 4 or 8 (the table's size) at
// base + the field's offset.
func (as *AddressSpace) field(base uint64, key string) (uint64, error) {
	off, size, err := as.Layout.field(key)
	if err != nil {
		return 0, err
	}
	var v uint64
	switch size {
	case 1:
		var b uint8
		b, err = as.m.u8(base + off)
		v = uint64(b)
	case 4:
		var w uint32
		w, err = as.m.u32(base + off)
		v = uint64(w)
	default:
		v, err = as.m.u64(base + off)
	}
	if err != nil {
		return 0, fmt.Errorf("%s at %#x: %w", key, base+off, err)
	}
	return v, nil
}

// state reads a struct gomp_team_state at addr.
func (as *AddressSpace) state(addr uint64) (team uint64, id, level, active int, err error) {
	if team, err = as.field(addr, "gomp_team_state.team"); err != nil {
		return
	}
	var v uint64
	if v, err = as.field(addr, "gomp_team_state.team_id"); err != nil {
		return
	}
	id = int(int32(v))
	if v, err = as.field(addr, "gomp_team_state.level"); err != nil {
		return
	}
	level = int(int32(v))
	if v, err = as.field(addr, "gomp_team_state.active_level"); err != nil {
		return
	}
	active = int(int32(v))
	return
}

// Thread reads the libgomp state of the thread whose thread pointer is tp.
// A thread that never entered libgomp has a zero state (no team, level
// 0). Idle pool workers are told apart from team members: their team is
// the pool's last team (ended), they are not their team's member at their
// number, or (with RegisterReader) they wait on the pool's dock.
func (as *AddressSpace) Thread(tp uint64) (*Thread, error) {
	t := &Thread{TP: tp, Addr: as.ThreadAddr(tp)}
	ts, err := as.Layout.off("gomp_thread.ts")
	if err != nil {
		return nil, err
	}
	if t.Team, t.TeamID, t.Level, t.ActiveLevel, err = as.state(t.Addr + ts); err != nil {
		return nil, fmt.Errorf("thread %#x: team state: %w", tp, err)
	}
	if t.Task, err = as.field(t.Addr, "gomp_thread.task"); err != nil {
		return nil, fmt.Errorf("thread %#x: %w", tp, err)
	}
	// An unknown release whose code shows no thread_pool: no pool, and
	// idle workers are told by their team only.
	if as.Layout.Has("gomp_thread.thread_pool") {
		if t.Pool, err = as.field(t.Addr, "gomp_thread.thread_pool"); err != nil {
			return nil, fmt.Errorf("thread %#x: %w", tp, err)
		}
	}
	if t.Team != 0 {
		if reason := as.idleReason(t); reason != "" {
			t.Idle, t.IdleReason, t.StaleTeam = true, reason, t.Team
			t.Team, t.TeamID, t.Level, t.ActiveLevel = 0, 0, 0, 0
		}
	}
	return t, nil
}

// idleReason says why a thread with a team state is an idle pool worker,
// "" when it is a member of its team.
func (as *AddressSpace) idleReason(t *Thread) string {
	if t.Pool != 0 {
		if last, err := as.field(t.Pool, "gomp_thread_pool.last_team"); err == nil && last == t.Team {
			return "its team is the pool's last team, which has ended"
		}
		if w, err := as.WaitOf(t.TP); err == nil && w.Kind == WaitDock {
			return "waits on the pool's dock"
		}
	}
	// Thread 0 is the encountering thread, which leaves no stale state:
	// at the region's end it restores its saved one.
	if t.TeamID == 0 {
		if _, err := as.field(t.Team, "gomp_team.nthreads"); err != nil {
			return fmt.Sprintf("its team at %#x cannot be read: %v", t.Team, err)
		}
		return ""
	}
	member, err := as.memberAt(t.Team, t.TeamID)
	if err != nil {
		return fmt.Sprintf("its team at %#x does not list it as thread %d: %v", t.Team, t.TeamID, err)
	}
	if member != t.Addr {
		return fmt.Sprintf("not member %d of its team at %#x", t.TeamID, t.Team)
	}
	return ""
}

// memberAt returns the struct gomp_thread of thread number i of team:
// team->ordered_release[i] is &thread->release for i > 0. Thread 0 (whose
// entry is the team's own master_release) is the encountering thread:
// member ParentThreadNum of the parent team, or at level 1 the first
// thread of the pool (pool->threads[0]).
func (as *AddressSpace) memberAt(team uint64, i int) (uint64, error) {
	return as.memberAtDepth(team, i, 0)
}

func (as *AddressSpace) memberAtDepth(team uint64, i, depth int) (uint64, error) {
	if depth > MaxNesting {
		return 0, fmt.Errorf("gomp_team.prev_ts: more than %d nested teams", MaxNesting)
	}
	if i == 0 {
		return as.master(team, depth)
	}
	n, err := as.field(team, "gomp_team.nthreads")
	if err != nil {
		return 0, err
	}
	if n == 0 || n > MaxThreads {
		return 0, fmt.Errorf("team at %#x: %d threads (torn or corrupted)", team, n)
	}
	if i < 0 || uint64(i) >= n {
		return 0, fmt.Errorf("team at %#x has %d threads, no thread %d", team, n, i)
	}
	rel, err := as.field(team, "gomp_team.ordered_release")
	if err != nil {
		return 0, err
	}
	relOff, err := as.Layout.off("gomp_thread.release")
	if err != nil {
		return 0, err
	}
	p, err := as.m.u64(rel + uint64(i)*8)
	if err != nil {
		return 0, fmt.Errorf("team at %#x: ordered_release[%d]: %w", team, i, err)
	}
	if p < relOff {
		return 0, fmt.Errorf("team at %#x: ordered_release[%d] is %#x", team, i, p)
	}
	return p - relOff, nil
}

// master returns thread 0 of team.
func (as *AddressSpace) master(team uint64, depth int) (uint64, error) {
	prev, err := as.Layout.off("gomp_team.prev_ts")
	if err != nil {
		return 0, err
	}
	parent, num, _, _, err := as.state(team + prev)
	if err != nil {
		return 0, fmt.Errorf("team at %#x: prev_ts: %w", team, err)
	}
	if parent == team {
		return 0, fmt.Errorf("gomp_team.prev_ts: cycle at team %#x", team)
	}
	if parent != 0 {
		return as.memberAtDepth(parent, num, depth+1)
	}
	m1, err := as.memberAtDepth(team, 1, depth+1)
	if err != nil {
		return 0, fmt.Errorf("thread 0 of team %#x: %w", team, err)
	}
	pool, err := as.field(m1, "gomp_thread.thread_pool")
	if err != nil {
		return 0, err
	}
	threads, err := as.field(pool, "gomp_thread_pool.threads")
	if err != nil {
		return 0, err
	}
	m0, err := as.m.u64(threads)
	if err != nil {
		return 0, fmt.Errorf("thread 0 of team %#x: pool threads[0]: %w", team, err)
	}
	return m0, nil
}

// Team is one team (a parallel region's team of threads).
type Team struct {
	Addr uint64
	// NThreads is the team's size.
	NThreads int
	// Level and ActiveLevel are the region's nesting levels.
	Level, ActiveLevel int
	// Parent is the enclosing team (0 at level 1); ParentThreadNum the
	// encountering thread's number in it.
	Parent          uint64
	ParentThreadNum int
	// Members are the struct gomp_thread addresses of threads 0 ..
	// NThreads-1 (ThreadPointer gives their thread pointers); Members[0]
	// is 0 when thread 0 of a one-thread level-1 team (not recorded by
	// libgomp).
	Members []uint64
}

// Team reads the team at addr: size, levels and parent from prev_ts (the
// encountering thread's saved team state), members from ordered_release.
func (as *AddressSpace) Team(addr uint64) (*Team, error) {
	if addr == 0 {
		return nil, fmt.Errorf("team at address 0")
	}
	n, err := as.field(addr, "gomp_team.nthreads")
	if err != nil {
		return nil, err
	}
	if n == 0 || n > MaxThreads {
		return nil, fmt.Errorf("team at %#x: %d threads (torn or corrupted; at most %d read)", addr, n, MaxThreads)
	}
	tm := &Team{Addr: addr, NThreads: int(n)}
	prev, err := as.Layout.off("gomp_team.prev_ts")
	if err != nil {
		return nil, err
	}
	var plevel, pactive int
	if tm.Parent, tm.ParentThreadNum, plevel, pactive, err = as.state(addr + prev); err != nil {
		return nil, fmt.Errorf("team at %#x: prev_ts: %w", addr, err)
	}
	tm.Level = plevel + 1
	tm.ActiveLevel = pactive
	if n > 1 {
		tm.ActiveLevel++
	}
	for i := 0; i < int(n); i++ {
		m, err := as.memberAt(addr, i)
		if err != nil && i == 0 && n == 1 && tm.Parent == 0 {
			m, err = 0, nil
		}
		if err != nil {
			return tm, fmt.Errorf("team at %#x: member %d: %w", addr, i, err)
		}
		tm.Members = append(tm.Members, m)
	}
	return tm, nil
}

// Ancestors returns the chain of teams from team up to level 1 (team
// first), bounded by MaxNesting; a cycle or a level that does not go down
// by one is an error naming the structure.
func (as *AddressSpace) Ancestors(team uint64) ([]*Team, error) {
	var out []*Team
	seen := map[uint64]bool{}
	for team != 0 {
		if seen[team] {
			return out, fmt.Errorf("gomp_team.prev_ts: cycle at team %#x", team)
		}
		if len(out) >= MaxNesting {
			return out, fmt.Errorf("gomp_team.prev_ts: more than %d nested teams", MaxNesting)
		}
		seen[team] = true
		t, err := as.Team(team)
		if err != nil {
			return out, err
		}
		if len(out) > 0 && t.Level != out[len(out)-1].Level-1 {
			return out, fmt.Errorf("gomp_team.prev_ts: team %#x has level %d under a team of level %d", team, t.Level, out[len(out)-1].Level)
		}
		out = append(out, t)
		team = t.Parent
	}
	return out, nil
}

// Task kinds (enum gomp_task_kind; the same values in every table).
const (
	TaskImplicit     = 0
	TaskUndeferred   = 1
	TaskWaiting      = 2
	TaskTied         = 3
	TaskAsyncRunning = 4
	TaskDetached     = 5
)

// Task is one task (struct gomp_task).
type Task struct {
	Addr, Parent uint64
	// Fn and FnData are an explicit task's entry and argument (0 for
	// implicit tasks: libgomp does not store the outlined function).
	Fn, FnData uint64
	// Kind is the enum gomp_task_kind value; KindName names it.
	Kind     int
	KindName string
	// Final is final_task; InTiedTask in_tied_task.
	Final, InTiedTask bool
	// Priority is the task's priority, -1 when the layout lacks it.
	Priority int
}

var kindNames = map[int]string{
	TaskImplicit: "implicit", TaskUndeferred: "undeferred", TaskWaiting: "waiting",
	TaskTied: "tied", TaskAsyncRunning: "async-running", TaskDetached: "detached",
}

// Task reads the task at addr.
func (as *AddressSpace) Task(addr uint64) (*Task, error) {
	if addr == 0 {
		return nil, fmt.Errorf("task at address 0")
	}
	t := &Task{Addr: addr, Priority: -1}
	var err error
	read := func(key string) uint64 {
		if err != nil {
			return 0
		}
		var v uint64
		v, err = as.field(addr, key)
		return v
	}
	t.Parent = read("gomp_task.parent")
	t.Fn = read("gomp_task.fn")
	t.FnData = read("gomp_task.fn_data")
	t.Kind = int(int32(read("gomp_task.kind")))
	t.Final = read("gomp_task.final_task") != 0
	t.InTiedTask = read("gomp_task.in_tied_task") != 0
	if err != nil {
		return nil, fmt.Errorf("task at %#x: %w", addr, err)
	}
	if p, perr := as.field(addr, "gomp_task.priority"); perr == nil {
		t.Priority = int(int32(p))
	}
	t.KindName = kindNames[t.Kind]
	if t.KindName == "" {
		return t, fmt.Errorf("task at %#x: kind %d is not a task kind (torn or corrupted)", addr, t.Kind)
	}
	return t, nil
}

// TaskChain returns task and its generating tasks up to the implicit one
// (or the root), bounded by MaxNesting.
func (as *AddressSpace) TaskChain(task uint64) ([]*Task, error) {
	var out []*Task
	seen := map[uint64]bool{}
	for task != 0 {
		if seen[task] {
			return out, fmt.Errorf("gomp_task.parent: cycle at task %#x", task)
		}
		if len(out) >= MaxNesting {
			return out, fmt.Errorf("gomp_task.parent: more than %d tasks", MaxNesting)
		}
		seen[task] = true
		t, err := as.Task(task)
		if err != nil {
			return out, err
		}
		out = append(out, t)
		task = t.Parent
	}
	return out, nil
}

// ImplicitTask returns the address of thread number i's implicit task of
// team.
func (as *AddressSpace) ImplicitTask(team uint64, i int) (uint64, error) {
	off, err := as.Layout.off("gomp_team.implicit_task")
	if err != nil {
		return 0, err
	}
	size, ok := as.Layout.Get("sizeof gomp_team.implicit_task")
	if !ok {
		return 0, fmt.Errorf("libgomp layout: sizeof gomp_task is not known")
	}
	return team + off + uint64(i)*uint64(size), nil
}

// Queue types (enum priority_queue_type).
const (
	pqTeam     = 0
	pqChildren = 1
)

// TeamQueue returns the tasks queued in team->task_queue.
func (as *AddressSpace) TeamQueue(team uint64) ([]uint64, error) {
	off, err := as.Layout.off("gomp_team.task_queue")
	if err != nil {
		return nil, err
	}
	return as.queue(team+off, pqTeam, "gomp_team.task_queue")
}

// ChildrenQueue returns the tasks in task->children_queue (its children not
// yet finished: waiting, or running tied ones).
func (as *AddressSpace) ChildrenQueue(task uint64) ([]uint64, error) {
	off, err := as.Layout.off("gomp_task.children_queue")
	if err != nil {
		return nil, err
	}
	return as.queue(task+off, pqChildren, "gomp_task.children_queue")
}

// queue walks a struct priority_queue: the list of priority-0 tasks, or,
// when its splay tree is in use (task priorities), every list of the tree.
// Walks are bounded by MaxQueued; a list that does not come back to its
// head is an error naming the queue.
func (as *AddressSpace) queue(q uint64, typ int, what string) ([]uint64, error) {
	rootOff, err1 := as.Layout.off("priority_queue.t.root")
	listOff, err2 := as.Layout.off("priority_queue.l")
	tasksOff, err3 := as.Layout.off("priority_list.tasks")
	pnode, err4 := as.Layout.off("gomp_task.pnode")
	nodeSize, ok := as.Layout.Get("sizeof priority_node")
	for _, e := range []error{err1, err2, err3, err4} {
		if e != nil {
			return nil, e
		}
	}
	if !ok {
		return nil, fmt.Errorf("libgomp layout: sizeof priority_node is not known")
	}
	toTask := uint64(pnode) + uint64(typ)*uint64(nodeSize)
	root, err := as.m.u64(q + rootOff)
	if err != nil {
		return nil, fmt.Errorf("%s at %#x: %w", what, q, err)
	}
	var out []uint64
	if root == 0 {
		return as.list(q+listOff+tasksOff, toTask, what, out)
	}
	// The splay tree of priority lists: key (a priority_list) at 0.
	left, errl := as.Layout.off("prio_splay_tree_node_s.left")
	right, errr := as.Layout.off("prio_splay_tree_node_s.right")
	if errl != nil || errr != nil {
		return nil, fmt.Errorf("%s: priority tree layout not known", what)
	}
	stack := []uint64{root}
	seen := map[uint64]bool{}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == 0 {
			continue
		}
		if seen[n] || len(seen) >= MaxQueued {
			return out, fmt.Errorf("%s: the priority tree has a cycle or more than %d nodes", what, MaxQueued)
		}
		seen[n] = true
		if out, err = as.list(n+tasksOff, toTask, what, out); err != nil {
			return out, err
		}
		l, err1 := as.m.u64(n + left)
		r, err2 := as.m.u64(n + right)
		if err1 != nil || err2 != nil {
			return out, fmt.Errorf("%s: priority tree node %#x cannot be read", what, n)
		}
		stack = append(stack, r, l)
	}
	return out, nil
}

// list appends the tasks of a circular priority list whose head pointer
// is at headp. A queue's lists together hold at most MaxQueued tasks (out
// counts them); a node met twice ends the walk with an error (the list
// does not come back to its head).
func (as *AddressSpace) list(headp, toTask uint64, what string, out []uint64) ([]uint64, error) {
	head, err := as.m.u64(headp)
	if err != nil {
		return out, fmt.Errorf("%s: list head at %#x: %w", what, headp, err)
	}
	seen := map[uint64]bool{}
	for n := head; n != 0; {
		if len(out) >= MaxQueued {
			return out, fmt.Errorf("%s: more than %d tasks", what, MaxQueued)
		}
		if seen[n] {
			return out, fmt.Errorf("%s: a cycle at node %#x that misses the head", what, n)
		}
		seen[n] = true
		if n < toTask {
			return out, fmt.Errorf("%s: node %#x is not a task's", what, n)
		}
		next, err := as.m.u64(n) // priority_node.next at 0
		if err != nil {
			return out, fmt.Errorf("%s: node %#x: %w", what, n, err)
		}
		out = append(out, n-toTask)
		if next == head {
			break
		}
		n = next
	}
	return out, nil
}

// ICVs are the internal control variables that apply to a thread: its
// current task's (struct gomp_task_icv), or gomp_global_icv when it has no
// task, plus libgomp's global ones.
type ICVs struct {
	// Source is the address of the gomp_task_icv read; FromGlobal is
	// true when it is gomp_global_icv.
	Source     uint64
	FromGlobal bool

	NThreads        uint64
	RunSched        int32 // enum gomp_schedule_type, bit 31 = monotonic
	Chunk           int32
	DefaultDevice   int32
	ThreadLimit     uint32
	Dyn             bool
	MaxActiveLevels int
	Bind            int8
	// Cancel and MaxTaskPriority are -1 when their globals are unknown.
	Cancel, MaxTaskPriority int
}

// Schedule kinds of libgomp (enum gomp_schedule_type).
const (
	schedStatic    = 1
	schedDynamic   = 2
	schedGuided    = 3
	schedAuto      = 4
	schedMonotonic = -0x80000000
)

// ICVsOf reads the ICVs of thread t.
func (as *AddressSpace) ICVsOf(t *Thread) (*ICVs, error) {
	ic := &ICVs{Cancel: -1, MaxTaskPriority: -1}
	if t.Task != 0 {
		off, err := as.Layout.off("gomp_task.icv")
		if err != nil {
			return nil, err
		}
		ic.Source = t.Task + off
	} else {
		if as.GlobalICV == 0 {
			return nil, fmt.Errorf("thread %#x has no task and gomp_global_icv is not known", t.TP)
		}
		ic.Source, ic.FromGlobal = as.GlobalICV, true
	}
	var err error
	// Each field named whole: a name built for each read was a tenth of
	// the ICVs' CPU.
	read := func(key string) uint64 {
		if err != nil {
			return 0
		}
		var v uint64
		v, err = as.field(ic.Source, key)
		return v
	}
	ic.NThreads = read("gomp_task_icv.nthreads_var")
	ic.RunSched = int32(read("gomp_task_icv.run_sched_var"))
	ic.Chunk = int32(read("gomp_task_icv.run_sched_chunk_size"))
	ic.DefaultDevice = int32(read("gomp_task_icv.default_device_var"))
	ic.ThreadLimit = uint32(read("gomp_task_icv.thread_limit_var"))
	ic.Dyn = read("gomp_task_icv.dyn_var") != 0
	if _, inTask := as.Layout.Get("gomp_task_icv.max_active_levels_var"); !inTask && as.MaxActiveLevelsVar != 0 {
		// A global of type unsigned long (GCC 10).
		if err == nil {
			var v uint64
			if v, err = as.m.u64(as.MaxActiveLevelsVar); err == nil {
				ic.MaxActiveLevels = int(min(v, 0x7fffffff))
			} else {
				err = fmt.Errorf("gomp_max_active_levels_var at %#x: %w", as.MaxActiveLevelsVar, err)
			}
		}
	} else {
		ic.MaxActiveLevels = int(read("gomp_task_icv.max_active_levels_var"))
	}
	ic.Bind = int8(read("gomp_task_icv.bind_var"))
	if err != nil {
		return nil, fmt.Errorf("ICVs at %#x: %w", ic.Source, err)
	}
	as.globalICVs(ic) // unreadable globals stay -1 here
	return ic, nil
}

// globalICVs reads the ICVs libgomp keeps in globals of their own
// (cancel-var, max-task-priority-var) into ic; a global not found stays
// -1, and the first read error is returned.
func (as *AddressSpace) globalICVs(ic *ICVs) error {
	var errs []error
	if as.CancelVar != 0 {
		if v, err := as.m.u8(as.CancelVar); err == nil {
			ic.Cancel = int(v)
		} else {
			errs = append(errs, fmt.Errorf("gomp_cancel_var: %w", err))
		}
	}
	if as.MaxTaskPriorityVar != 0 {
		if v, err := as.m.u32(as.MaxTaskPriorityVar); err == nil {
			ic.MaxTaskPriority = int(int32(v))
		} else {
			errs = append(errs, fmt.Errorf("gomp_max_task_priority_var: %w", err))
		}
	}
	return errors.Join(errs...)
}

// ScheduleString formats run-sched-var as the LLVM side does: an optional
// "monotonic:" modifier, the kind and ",chunk".
func (ic *ICVs) ScheduleString() string {
	s := ""
	if ic.RunSched&schedMonotonic != 0 {
		s = "monotonic:"
	}
	switch ic.RunSched &^ schedMonotonic {
	case schedStatic:
		s += "static"
	case schedDynamic:
		s += "dynamic"
	case schedGuided:
		s += "guided"
	case schedAuto:
		s += "auto"
	default:
		return ""
	}
	return s + "," + strconv.Itoa(int(ic.Chunk))
}

// ThreadLimitValue is thread-limit-var as omp_get_thread_limit answers it
// (libgomp stores UINT_MAX for no limit; the API says INT_MAX).
func (ic *ICVs) ThreadLimitValue() int64 {
	if ic.ThreadLimit > 0x7fffffff {
		return 0x7fffffff
	}
	return int64(ic.ThreadLimit)
}

// Value returns the ICV name (under the names ompd/llvm uses) and
// whether ic holds it.
func (ic *ICVs) Value(name string) (ompd.Value, bool) {
	num := func(v int64) (ompd.Value, bool) { return ompd.Value{Num: v}, true }
	switch name {
	case "nthreads-var":
		return num(int64(ic.NThreads))
	case "dyn-var":
		return boolValue(ic.Dyn), true
	case "run-sched-var":
		return ompd.Value{Str: ic.ScheduleString(), IsString: true}, true
	case "thread-limit-var":
		return num(ic.ThreadLimitValue())
	case "max-active-levels-var":
		return num(int64(ic.MaxActiveLevels))
	case "bind-var":
		return num(int64(ic.Bind))
	case "default-device-var":
		return num(int64(ic.DefaultDevice))
	case "cancel-var":
		if ic.Cancel >= 0 {
			return num(int64(ic.Cancel))
		}
	case "max-task-priority-var":
		if ic.MaxTaskPriority >= 0 {
			return num(int64(ic.MaxTaskPriority))
		}
	}
	return ompd.Value{}, false
}

// UnavailableICVs are the ICVs of the LLVM side that libgomp has no place
// for, or keeps where this package does not read (runtime.unavailable).
var UnavailableICVs = []string{
	"stacksize-var", "debug-var", "display-affinity-var", "affinity-format-var",
	"tool-var", "tool-libraries-var", "tool-verbose-init-var",
	"num-procs-var", "ompd-num-procs-var",
}
