package gomp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fuzzlimit"
	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/ompd/backend"
)

// fakeMem is a target's memory made of separate regions: a read that is
// not inside one region fails with errUnmapped. It serves ompd.Callbacks
// (no symbols, no threads).
type fakeMem struct {
	regions []fakeRegion
	next    uint64
}

type fakeRegion struct {
	base uint64
	b    []byte
}

var errUnmapped = errors.New("unmapped")

// alloc maps a new zeroed region of size bytes and returns its address;
// regions are 16-aligned and a page apart, so a read past one faults.
func (f *fakeMem) alloc(size int64) uint64 {
	if f.next == 0 {
		f.next = 0x7f0000100000
	}
	a := f.next
	f.regions = append(f.regions, fakeRegion{base: a, b: make([]byte, size)})
	f.next += (uint64(size) + 0x1fff) &^ 0xfff
	return a
}

func (f *fakeMem) find(addr uint64, n int) []byte {
	for _, r := range f.regions {
		if addr >= r.base && addr-r.base <= uint64(len(r.b)) && uint64(n) <= uint64(len(r.b))-(addr-r.base) {
			return r.b[addr-r.base : addr-r.base+uint64(n)]
		}
	}
	return nil
}

func (f *fakeMem) put(addr uint64, v uint64, size int) {
	b := f.find(addr, size)
	if b == nil {
		panic(fmt.Sprintf("fakeMem: no region at %#x", addr))
	}
	switch size {
	case 1:
		b[0] = byte(v)
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	default:
		binary.LittleEndian.PutUint64(b, v)
	}
}

func (f *fakeMem) SymbolAddr(name, hint string) (ompd.Address, error) {
	return 0, fmt.Errorf("symbol %s: none in the fake", name)
}

func (f *fakeMem) ReadMemory(addr ompd.Address, buf []byte) error {
	b := f.find(addr, len(buf))
	if b == nil {
		return fmt.Errorf("%d bytes at %#x: %w", len(buf), addr, errUnmapped)
	}
	copy(buf, b)
	return nil
}

func (f *fakeMem) ReadString(addr ompd.Address, max int) (string, error) {
	for n := 0; n < max; n++ {
		b := f.find(addr+uint64(n), 1)
		if b == nil {
			return "", fmt.Errorf("string at %#x: %w", addr, errUnmapped)
		}
		if b[0] == 0 {
			return string(f.find(addr, n)), nil
		}
	}
	return "", fmt.Errorf("no NUL within %d bytes", max)
}

func (f *fakeMem) Sizes() (ompd.TypeSizes, error) {
	return ompd.TypeSizes{Char: 1, Short: 2, Int: 4, Long: 8, LongLong: 8, Pointer: 8}, nil
}

func (f *fakeMem) ThreadContext(kind ompd.ThreadIDKind, id uint64) (ompd.ThreadContext, error) {
	return nil, fmt.Errorf("no thread %#x in the fake", id)
}

// image is the flat content of the regions, in order (the fuzz input).
func (f *fakeMem) image() []byte {
	var out []byte
	for _, r := range f.regions {
		out = append(out, r.b...)
	}
	return out
}

// load overwrites the regions with data, in order, as far as it goes.
func (f *fakeMem) load(data []byte) {
	for _, r := range f.regions {
		n := copy(r.b, data)
		data = data[n:]
	}
}

// gompTLSOffset is gomp_tls_data's offset from the thread pointer (as
// measured once on Debian 12).
const gompTLSOffset = -144

// fakeState is a hand-laid libgomp state in a fakeMem, with the GCC 12 layout:
//
//	T1, a level-1 team of 2 threads: thr0 (its thread 0, the pool's
//	    threads[0]) and thr1 (its thread 1);
//	T2, a level-2 team of 2 threads forked by thr1: thr1 is its thread 0,
//	    thr2 its thread 1;
//	tasks A, B, C created by thr1's implicit task in T2, queued in T2's
//	    team queue in that order (a list: no priorities);
//	T3, a level-1 team (of another root) whose team queue is a priority
//	    splay tree: node P5 (priority 5, task D) at the root, its left
//	    child P0 (priority 0, tasks E and F).
type fakeState struct {
	t  testing.TB
	f  *fakeMem
	as *AddressSpace
	l  *Layout

	pool, t1, t2, t3       uint64
	thr0, thr1, thr2       uint64 // struct gomp_thread addresses
	tp0, tp1, tp2          uint64 // their thread pointers
	a, b, c, d, e, ff      uint64 // tasks
	p5, p0                 uint64 // splay tree nodes of T3's queue
	rel1, rel2, rel3       uint64 // ordered_release arrays
	t2impl0, t1impl1, impl uint64
}

// off returns a layout value of the GCC 12 table.
func (s *fakeState) off(key string) uint64 {
	v, ok := s.l.Get(key)
	if !ok {
		s.t.Fatalf("GCC 12 layout has no %s", key)
	}
	return uint64(v)
}

// set writes field key (a "TYPE.FIELD" of the table, its size from the
// table) of the structure at base.
func (s *fakeState) set(base uint64, key string, v uint64) {
	s.f.put(base+s.off(key), v, int(s.off("sizeof "+key)))
}

func (s *fakeState) setTeamState(base uint64, team uint64, id, level, active int) {
	s.set(base, "gomp_team_state.team", team)
	s.set(base, "gomp_team_state.team_id", uint64(id))
	s.set(base, "gomp_team_state.level", uint64(level))
	s.set(base, "gomp_team_state.active_level", uint64(active))
}

func (s *fakeState) newThread() (addr, tp uint64) {
	addr = s.f.alloc(int64(s.off("sizeof gomp_thread")))
	return addr, uint64(int64(addr) - gompTLSOffset)
}

// newTeam maps a team of n threads (with its n implicit tasks) and its
// ordered_release array, whose entry i > 0 is &member[i]->release.
func (s *fakeState) newTeam(n int, members ...uint64) (team, rel uint64) {
	team = s.f.alloc(int64(s.off("gomp_team.implicit_task") + uint64(n)*s.off("sizeof gomp_team.implicit_task")))
	s.set(team, "gomp_team.nthreads", uint64(n))
	rel = s.f.alloc(int64(8 * n))
	s.set(team, "gomp_team.ordered_release", rel)
	s.f.put(rel, team+s.off("gomp_team.barrier"), 8) // thread 0's: any address
	for i, m := range members {
		s.f.put(rel+uint64(i+1)*8, m+s.off("gomp_thread.release"), 8)
	}
	return team, rel
}

func (s *fakeState) implicit(team uint64, i int) uint64 {
	return team + s.off("gomp_team.implicit_task") + uint64(i)*s.off("sizeof gomp_team.implicit_task")
}

func (s *fakeState) newTask(parent uint64, kind int, prio int) uint64 {
	k := s.f.alloc(int64(s.off("sizeof gomp_task")))
	s.set(k, "gomp_task.parent", parent)
	s.set(k, "gomp_task.kind", uint64(kind))
	s.set(k, "gomp_task.fn", 0x401000)
	s.set(k, "gomp_task.fn_data", 0x402000)
	s.set(k, "gomp_task.priority", uint64(prio))
	return k
}

// node returns the address of task k's priority_node of queue type typ.
func (s *fakeState) node(k uint64, typ int) uint64 {
	return k + s.off("gomp_task.pnode") + uint64(typ)*s.off("sizeof priority_node")
}

// link makes the circular list of tasks ks (queue type typ): next and prev
// of their priority nodes; it returns the head node.
func (s *fakeState) link(typ int, ks ...uint64) uint64 {
	for i, k := range ks {
		n := s.node(k, typ)
		s.set(n, "priority_node.next", s.node(ks[(i+1)%len(ks)], typ))
		s.set(n, "priority_node.prev", s.node(ks[(i+len(ks)-1)%len(ks)], typ))
	}
	return s.node(ks[0], typ)
}

func newState(t testing.TB) *fakeState {
	t.Helper()
	l, err := LayoutFor(12)
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeState{t: t, f: &fakeMem{}, l: l}
	s.as = &AddressSpace{cb: s.f, m: &mem{s.f}, Layout: l, TLSOffset: gompTLSOffset,
		Release: Release{Major: 12, Node: "GOMP_5.1"}}
	ts := s.off("gomp_thread.ts")

	s.thr0, s.tp0 = s.newThread()
	s.thr1, s.tp1 = s.newThread()
	s.thr2, s.tp2 = s.newThread()
	s.pool = s.f.alloc(int64(s.off("sizeof gomp_thread_pool")))
	threads := s.f.alloc(16)
	s.f.put(threads, s.thr0, 8)
	s.f.put(threads+8, s.thr1, 8)
	s.set(s.pool, "gomp_thread_pool.threads", threads)
	s.set(s.pool, "gomp_thread_pool.threads_used", 2)

	s.t1, s.rel1 = s.newTeam(2, s.thr1)
	s.t2, s.rel2 = s.newTeam(2, s.thr2)
	s.setTeamState(s.t2+s.off("gomp_team.prev_ts"), s.t1, 1, 1, 1)

	s.t1impl1 = s.implicit(s.t1, 1)
	s.t2impl0 = s.implicit(s.t2, 0)
	s.set(s.implicit(s.t1, 0), "gomp_task.kind", TaskImplicit)
	s.set(s.t1impl1, "gomp_task.kind", TaskImplicit)
	s.set(s.t2impl0, "gomp_task.kind", TaskImplicit)
	s.set(s.t2impl0, "gomp_task.parent", s.t1impl1)
	s.set(s.implicit(s.t2, 1), "gomp_task.kind", TaskImplicit)
	s.set(s.implicit(s.t2, 1), "gomp_task.parent", s.t1impl1)

	s.setTeamState(s.thr0+ts, s.t1, 0, 1, 1)
	s.set(s.thr0, "gomp_thread.task", s.implicit(s.t1, 0))
	s.set(s.thr0, "gomp_thread.thread_pool", s.pool)
	s.setTeamState(s.thr1+ts, s.t2, 0, 2, 2)
	s.set(s.thr1, "gomp_thread.task", s.t2impl0)
	s.set(s.thr1, "gomp_thread.thread_pool", s.pool)
	s.setTeamState(s.thr2+ts, s.t2, 1, 2, 2)
	s.set(s.thr2, "gomp_thread.task", s.implicit(s.t2, 1))

	s.a = s.newTask(s.t2impl0, TaskWaiting, 0)
	s.b = s.newTask(s.t2impl0, TaskWaiting, 0)
	s.c = s.newTask(s.t2impl0, TaskWaiting, 0)
	q := s.t2 + s.off("gomp_team.task_queue")
	s.f.put(q+s.off("priority_queue.l")+s.off("priority_list.tasks"), s.link(pqTeam, s.a, s.b, s.c), 8)
	cq := s.t2impl0 + s.off("gomp_task.children_queue")
	s.f.put(cq+s.off("priority_queue.l")+s.off("priority_list.tasks"), s.link(pqChildren, s.c, s.b, s.a), 8)

	// T3: one thread (thread 0 of a one-thread level-1 team is not
	// recorded), a priority tree.
	s.t3, s.rel3 = s.newTeam(1)
	s.impl = s.implicit(s.t3, 0)
	s.d = s.newTask(s.impl, TaskWaiting, 5)
	s.e = s.newTask(s.impl, TaskWaiting, 0)
	s.ff = s.newTask(s.impl, TaskWaiting, 0)
	size := int64(s.off("sizeof prio_splay_tree_node_s"))
	s.p5, s.p0 = s.f.alloc(size), s.f.alloc(size)
	key := s.off("prio_splay_tree_node_s.key")
	s.f.put(s.p5+key+s.off("priority_list.priority"), 5, 4)
	s.f.put(s.p5+key+s.off("priority_list.tasks"), s.link(pqTeam, s.d), 8)
	s.f.put(s.p0+key+s.off("priority_list.tasks"), s.link(pqTeam, s.e, s.ff), 8)
	s.set(s.p5, "prio_splay_tree_node_s.left", s.p0)
	s.f.put(s.t3+s.off("gomp_team.task_queue")+s.off("priority_queue.t.root"), s.p5, 8)
	return s
}

// wantErr fails unless err's text is want.
func wantErr(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %q", what, want)
	} else if err.Error() != want {
		t.Errorf("%s: error\n %q\nwant\n %q", what, err.Error(), want)
	}
}

// TestFakeStateReads: the hand-laid state reads back as laid out, so
// that the bad-input tests below change one thing of a correct state.
func TestFakeStateReads(t *testing.T) {
	s := newState(t)
	as := s.as
	for _, c := range []struct {
		tp, addr, team uint64
		id, level      int
	}{{s.tp0, s.thr0, s.t1, 0, 1}, {s.tp1, s.thr1, s.t2, 0, 2}, {s.tp2, s.thr2, s.t2, 1, 2}} {
		th, err := as.Thread(c.tp)
		if err != nil {
			t.Fatal(err)
		}
		if th.Addr != c.addr || th.Idle || th.Team != c.team || th.TeamID != c.id || th.Level != c.level {
			t.Errorf("thread %#x: %+v, want team %#x num %d level %d", c.tp, th, c.team, c.id, c.level)
		}
	}
	teams, err := as.Ancestors(s.t2)
	if err != nil || len(teams) != 2 {
		t.Fatalf("Ancestors(T2): %d teams, %v", len(teams), err)
	}
	if !slices.Equal(teams[0].Members, []uint64{s.thr1, s.thr2}) || !slices.Equal(teams[1].Members, []uint64{s.thr0, s.thr1}) ||
		teams[0].Level != 2 || teams[1].Level != 1 || teams[0].ParentThreadNum != 1 {
		t.Errorf("teams %+v %+v", teams[0], teams[1])
	}
	q, err := as.TeamQueue(s.t2)
	if err != nil || !slices.Equal(q, []uint64{s.a, s.b, s.c}) {
		t.Errorf("TeamQueue(T2) = %#x, %v, want %#x", q, err, []uint64{s.a, s.b, s.c})
	}
	cq, err := as.ChildrenQueue(s.t2impl0)
	if err != nil || !slices.Equal(cq, []uint64{s.c, s.b, s.a}) {
		t.Errorf("ChildrenQueue = %#x, %v", cq, err)
	}
	chain, err := as.TaskChain(s.a)
	if err != nil || len(chain) != 3 || chain[1].Addr != s.t2impl0 || chain[2].Addr != s.t1impl1 || chain[0].KindName != "waiting" {
		t.Errorf("TaskChain(A) = %+v, %v", chain, err)
	}
	tq, err := as.TeamQueue(s.t3)
	if err != nil || !slices.Equal(tq, []uint64{s.d, s.e, s.ff}) {
		t.Errorf("TeamQueue(T3) = %#x, %v, want %#x", tq, err, []uint64{s.d, s.e, s.ff})
	}
	if k, err := as.Task(s.d); err != nil || k.Priority != 5 {
		t.Errorf("task D: %+v %v", k, err)
	}
	if tm, err := as.Team(s.t3); err != nil || tm.NThreads != 1 || tm.Members[0] != 0 {
		t.Errorf("Team(T3) = %+v, %v", tm, err)
	}
}

// TestPrevTSCycle: a team whose prev_ts leads back to a team already met.
func TestPrevTSCycle(t *testing.T) {
	s := newState(t)
	// T1's saved state says T2 (thread 1), level 0: T1 and T2 each other's parents.
	s.setTeamState(s.t1+s.off("gomp_team.prev_ts"), s.t2, 1, 0, 0)
	teams, err := s.as.Ancestors(s.t2)
	wantErr(t, "Ancestors(T2)", err, fmt.Sprintf("gomp_team.prev_ts: cycle at team %#x", s.t2))
	if len(teams) != 2 || teams[0].Addr != s.t2 || teams[1].Addr != s.t1 {
		t.Errorf("Ancestors(T2) kept %d teams, want T2 and T1", len(teams))
	}

	// A team that is its own parent: its thread 0 (found through
	// prev_ts) is never reached: a cycle.
	s = newState(t)
	s.setTeamState(s.t1+s.off("gomp_team.prev_ts"), s.t1, 0, 0, 0)
	teams, err = s.as.Ancestors(s.t1)
	wantErr(t, "Ancestors(T1 under T1)", err, fmt.Sprintf("team at %#x: member 0: gomp_team.prev_ts: cycle at team %#x", s.t1, s.t1))
	if len(teams) != 0 {
		t.Errorf("Ancestors kept %d teams", len(teams))
	}
	// Level going up instead of down.
	s = newState(t)
	s.setTeamState(s.t1+s.off("gomp_team.prev_ts"), s.t2, 1, 5, 5)
	_, err = s.as.Ancestors(s.t2)
	wantErr(t, "Ancestors(T2 under level 6)", err, fmt.Sprintf("gomp_team.prev_ts: team %#x has level 6 under a team of level 2", s.t1))
}

// TestPrevTSTooDeep: a chain of teams deeper than MaxNesting.
func TestPrevTSTooDeep(t *testing.T) {
	s := newState(t)
	parent := uint64(0)
	var team uint64
	for level := 1; level <= MaxNesting+6; level++ {
		team, _ = s.newTeam(2, s.thr2)
		if parent != 0 {
			s.setTeamState(team+s.off("gomp_team.prev_ts"), parent, 1, level-1, level-1)
		}
		parent = team
	}
	// The level-1 team's thread 0 is pool->threads[0] of its thread 1's pool.
	s.set(s.thr2, "gomp_thread.thread_pool", s.pool)
	teams, err := s.as.Ancestors(team)
	wantErr(t, "Ancestors", err, fmt.Sprintf("gomp_team.prev_ts: more than %d nested teams", MaxNesting))
	if len(teams) != MaxNesting || teams[0].Addr != team || teams[0].Level != MaxNesting+6 {
		t.Errorf("Ancestors kept %d teams, want the %d innermost", len(teams), MaxNesting)
	}
}

// TestTeamSizeCorrupted: nthreads 0 (torn: a team being set up) and above
// MaxThreads.
func TestTeamSizeCorrupted(t *testing.T) {
	for _, n := range []uint64{0, MaxThreads + 1, 0xffffffff} {
		s := newState(t)
		s.set(s.t2, "gomp_team.nthreads", n)
		_, err := s.as.Team(s.t2)
		wantErr(t, fmt.Sprintf("Team with nthreads %d", n), err,
			fmt.Sprintf("team at %#x: %d threads (torn or corrupted; at most %d read)", s.t2, n, MaxThreads))
		teams, err := s.as.Ancestors(s.t2)
		if err == nil || len(teams) != 0 {
			t.Errorf("Ancestors: %d teams, %v", len(teams), err)
		}
		// Thread 1 of the team is looked up through it: not a member.
		th, err := s.as.Thread(s.tp2)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("its team at %#x does not list it as thread 1: team at %#x: %d threads (torn or corrupted)", s.t2, s.t2, n)
		if !th.Idle || th.IdleReason != want || th.StaleTeam != s.t2 || th.Team != 0 {
			t.Errorf("thread 1 of a team of %d threads: %+v, want idle: %q", n, th, want)
		}
		// Through the backend: thread 0's team is only checked readable;
		// its parallel region's size is the error.
		g := Backend(s.as)
		h, err := g.ThreadHandle(ompd.ThreadIDPthread, s.tp1)
		if err != nil {
			t.Fatal(err)
		}
		p, err := h.CurrentParallel()
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.TeamSize()
		wantErr(t, "Parallel.TeamSize", err, fmt.Sprintf("team at %#x: %d threads (torn or corrupted; at most %d read)", s.t2, n, MaxThreads))
		if _, err := p.Level(); err == nil {
			t.Errorf("Parallel.Level of a corrupted team: no error")
		}
		if _, err := p.ThreadIn(1); err == nil {
			t.Errorf("Parallel.ThreadIn(1) of a corrupted team: no error")
		}
	}
}

// TestTaskParentCycle: tasks whose parents lead back to a task met.
func TestTaskParentCycle(t *testing.T) {
	s := newState(t)
	s.set(s.t2impl0, "gomp_task.parent", s.a)
	chain, err := s.as.TaskChain(s.a)
	wantErr(t, "TaskChain(A)", err, fmt.Sprintf("gomp_task.parent: cycle at task %#x", s.a))
	if len(chain) != 2 || chain[0].Addr != s.a || chain[1].Addr != s.t2impl0 {
		t.Errorf("TaskChain kept %d tasks, want A and its parent", len(chain))
	}
	s.set(s.a, "gomp_task.parent", s.a)
	chain, err = s.as.TaskChain(s.a)
	wantErr(t, "TaskChain(A under A)", err, fmt.Sprintf("gomp_task.parent: cycle at task %#x", s.a))
	if len(chain) != 1 {
		t.Errorf("TaskChain kept %d tasks, want 1", len(chain))
	}

	// Deeper than MaxNesting.
	parent := uint64(0)
	for i := 0; i < MaxNesting+3; i++ {
		parent = s.newTask(parent, TaskWaiting, 0)
	}
	chain, err = s.as.TaskChain(parent)
	wantErr(t, "TaskChain(deep)", err, fmt.Sprintf("gomp_task.parent: more than %d tasks", MaxNesting))
	if len(chain) != MaxNesting {
		t.Errorf("TaskChain kept %d tasks, want %d", len(chain), MaxNesting)
	}
}

// TestTaskTornKind: a task whose kind is no enum gomp_task_kind value.
func TestTaskTornKind(t *testing.T) {
	s := newState(t)
	s.set(s.t2impl0, "gomp_task.kind", 0x2a)
	k, err := s.as.Task(s.t2impl0)
	wantErr(t, "Task", err, fmt.Sprintf("task at %#x: kind 42 is not a task kind (torn or corrupted)", s.t2impl0))
	if k == nil || k.Parent != s.t1impl1 || k.KindName != "" {
		t.Errorf("Task = %+v, want its fields read", k)
	}
	chain, err := s.as.TaskChain(s.a)
	wantErr(t, "TaskChain", err, fmt.Sprintf("task at %#x: kind 42 is not a task kind (torn or corrupted)", s.t2impl0))
	if len(chain) != 1 || chain[0].Addr != s.a {
		t.Errorf("TaskChain kept %d tasks, want A", len(chain))
	}
	// Through the backend: the thread's current task.
	g := Backend(s.as)
	h, err := g.ThreadHandle(ompd.ThreadIDPthread, s.tp1)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := h.CurrentTask()
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = k2.Flags()
	wantErr(t, "Task.Flags", err, fmt.Sprintf("task at %#x: kind 42 is not a task kind (torn or corrupted)", s.t2impl0))
}

// TestQueueCycleMissingHead: a team queue whose list cycles without coming
// back to its head (C's next is B).
func TestQueueCycleMissingHead(t *testing.T) {
	s := newState(t)
	s.set(s.node(s.c, pqTeam), "priority_node.next", s.node(s.b, pqTeam))
	want := fmt.Sprintf("gomp_team.task_queue: a cycle at node %#x that misses the head", s.node(s.b, pqTeam))
	q, err := s.as.TeamQueue(s.t2)
	wantErr(t, "TeamQueue", err, want)
	if !slices.Equal(q, []uint64{s.a, s.b, s.c}) {
		t.Errorf("TeamQueue kept %#x, want A, B, C", q)
	}
	// A node that is no task's (a small pointer), and one that cannot be read.
	s = newState(t)
	s.set(s.node(s.b, pqTeam), "priority_node.next", 0x10)
	q, err = s.as.TeamQueue(s.t2)
	wantErr(t, "TeamQueue (node 0x10)", err, "gomp_team.task_queue: node 0x10 is not a task's")
	if !slices.Equal(q, []uint64{s.a, s.b}) {
		t.Errorf("TeamQueue kept %#x, want A, B", q)
	}
	s.set(s.node(s.b, pqTeam), "priority_node.next", 0xdead0000)
	q, err = s.as.TeamQueue(s.t2)
	wantErr(t, "TeamQueue (node 0xdead0000)", err, "gomp_team.task_queue: node 0xdead0000: 8 bytes at 0xdead0000: unmapped")
	if !slices.Equal(q, []uint64{s.a, s.b}) {
		t.Errorf("TeamQueue kept %#x, want A, B (not the unreadable node's)", q)
	}
	// The children queue names itself.
	s = newState(t)
	s.set(s.node(s.a, pqChildren), "priority_node.next", s.node(s.b, pqChildren))
	_, err = s.as.ChildrenQueue(s.t2impl0)
	wantErr(t, "ChildrenQueue", err, fmt.Sprintf("gomp_task.children_queue: a cycle at node %#x that misses the head", s.node(s.b, pqChildren)))
}

// TestPriorityTreeCycle: a splay tree whose node's child is an ancestor.
func TestPriorityTreeCycle(t *testing.T) {
	s := newState(t)
	s.set(s.p0, "prio_splay_tree_node_s.right", s.p5)
	q, err := s.as.TeamQueue(s.t3)
	wantErr(t, "TeamQueue", err, fmt.Sprintf("gomp_team.task_queue: the priority tree has a cycle or more than %d nodes", MaxQueued))
	if !slices.Equal(q, []uint64{s.d, s.e, s.ff}) {
		t.Errorf("TeamQueue kept %#x, want D, E, F", q)
	}
	// A child that cannot be read: its list head is the first read.
	s = newState(t)
	s.set(s.p0, "prio_splay_tree_node_s.left", 0xdead0000)
	q, err = s.as.TeamQueue(s.t3)
	wantErr(t, "TeamQueue (child 0xdead0000)", err, "gomp_team.task_queue: list head at 0xdead0008: 8 bytes at 0xdead0008: unmapped")
	if !slices.Equal(q, []uint64{s.d, s.e, s.ff}) {
		t.Errorf("TeamQueue kept %#x, want D, E, F", q)
	}
}

// TestUnreadableTeam: a thread whose team pointer points nowhere.
func TestUnreadableTeam(t *testing.T) {
	const bad = 0xdead0000
	s := newState(t)
	s.set(s.thr2+s.off("gomp_thread.ts"), "gomp_team_state.team", bad)
	_, err := s.as.Team(bad)
	wantErr(t, "Team", err, "gomp_team.nthreads at 0xdead0000: 4 bytes at 0xdead0000: unmapped")
	_, err = s.as.Ancestors(bad)
	wantErr(t, "Ancestors", err, "gomp_team.nthreads at 0xdead0000: 4 bytes at 0xdead0000: unmapped")
	_, err = s.as.TeamQueue(bad)
	wantErr(t, "TeamQueue", err, fmt.Sprintf("gomp_team.task_queue at %#x: 8 bytes at %#x: unmapped", bad+s.off("gomp_team.task_queue"), bad+s.off("gomp_team.task_queue")))

	// Thread 1 of it is classified idle, and says why.
	th, err := s.as.Thread(s.tp2)
	if err != nil {
		t.Fatal(err)
	}
	want := "its team at 0xdead0000 does not list it as thread 1: gomp_team.nthreads at 0xdead0000: 4 bytes at 0xdead0000: unmapped"
	if !th.Idle || th.IdleReason != want || th.StaleTeam != bad || th.Team != 0 || th.Level != 0 {
		t.Errorf("Thread = %+v, want idle: %q", th, want)
	}
	// So is thread 0 of it (only the team's size is read).
	s.set(s.thr1+s.off("gomp_thread.ts"), "gomp_team_state.team", bad)
	th, err = s.as.Thread(s.tp1)
	if err != nil {
		t.Fatal(err)
	}
	want = "its team at 0xdead0000 cannot be read: gomp_team.nthreads at 0xdead0000: 4 bytes at 0xdead0000: unmapped"
	if !th.Idle || th.IdleReason != want {
		t.Errorf("Thread 0 = %+v, want idle: %q", th, want)
	}
	// A garbage (unmapped) thread pointer: the error names the field.
	_, err = s.as.Thread(0x1000)
	tsAddr := uint64(0x1000+gompTLSOffset) + s.off("gomp_thread.ts")
	wantErr(t, "Thread(0x1000)", err, fmt.Sprintf("thread 0x1000: team state: gomp_team_state.team at %#x: 8 bytes at %#x: unmapped", tsAddr, tsAddr))
}

// TestTornThreadHandle: a thread caught between two stores (gomp_team_start
// stores a reused pool thread's team state field by field: team, then
// team_id): its number is not the team's member at it. Through the
// backend it is an idle thread that says why.
func TestTornThreadHandle(t *testing.T) {
	s := newState(t)
	g := Backend(s.as)
	ts := s.thr2 + s.off("gomp_thread.ts")

	// What internal/inspect asks of a thread of a backend without states.
	type inferrer interface {
		InferredState() (ompd.State, uint64)
		IdleReason() string
	}
	reason := func(h backend.Thread) string {
		i, ok := h.(inferrer)
		if !ok {
			t.Fatalf("%T has no IdleReason", h)
		}
		return i.IdleReason()
	}

	// The new team's pointer, the old number (5: no such thread).
	s.set(ts, "gomp_team_state.team_id", 5)
	h, err := g.ThreadHandle(ompd.ThreadIDPthread, s.tp2)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("its team at %#x does not list it as thread 5: team at %#x has 2 threads, no thread 5", s.t2, s.t2)
	if reason(h) != want {
		t.Errorf("IdleReason %q, want %q", reason(h), want)
	}
	if st, _ := h.(inferrer).InferredState(); st != ompd.StateIdle {
		t.Errorf("InferredState %v, want idle", st)
	}
	if _, err := h.CurrentTask(); !errors.Is(err, ompd.ErrUnavailable) {
		t.Errorf("CurrentTask: %v, want unavailable", err)
	}
	if p, err := h.CurrentParallel(); err != nil || p.Label() != "0x0" {
		t.Errorf("CurrentParallel: %v %v, want the initial region", p, err)
	}

	// Number 1 of a team whose thread 1 is another thread.
	s.set(ts, "gomp_team_state.team_id", 1)
	s.f.put(s.rel2+8, s.thr0+s.off("gomp_thread.release"), 8)
	h, err = g.ThreadHandle(ompd.ThreadIDPthread, s.tp2)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("not member 1 of its team at %#x", s.t2); reason(h) != want {
		t.Errorf("IdleReason %q, want %q", reason(h), want)
	}

	// A thread whose state cannot be read at all.
	_, err = g.ThreadHandle(ompd.ThreadIDPthread, 0x1000)
	if err == nil || !strings.Contains(err.Error(), "thread 0x1000: team state: gomp_team_state.team at") {
		t.Errorf("ThreadHandle(0x1000): %v", err)
	}
}

// TestQueuedTasksCyclicQueue: QueuedTasks gives the tasks read from a
// cyclic queue and an error naming the team and the queue; the other
// teams' queues are read in full.
func TestQueuedTasksCyclicQueue(t *testing.T) {
	s := newState(t)
	s.set(s.node(s.c, pqTeam), "priority_node.next", s.node(s.b, pqTeam))
	// T3 is met through a thread whose team it is.
	thr3, tp3 := s.newThread()
	s.setTeamState(thr3+s.off("gomp_thread.ts"), s.t3, 0, 1, 0)
	s.set(thr3, "gomp_thread.task", s.impl)
	g := Backend(s.as)
	for _, tp := range []uint64{s.tp2, tp3} {
		if _, err := g.ThreadHandle(ompd.ThreadIDPthread, tp); err != nil {
			t.Fatal(err)
		}
	}
	ks, err := g.QueuedTasks()
	wantErr(t, "QueuedTasks", err, fmt.Sprintf("team %#x: gomp_team.task_queue: a cycle at node %#x that misses the head", s.t2, s.node(s.b, pqTeam)))
	var labels []string
	for _, k := range ks {
		labels = append(labels, k.Label())
	}
	// T2 comes first (address order): A, B, C first; T3's D, E, F last.
	wantFirst := []string{fmt.Sprintf("%#x", s.a), fmt.Sprintf("%#x", s.b), fmt.Sprintf("%#x", s.c)}
	wantLast := []string{fmt.Sprintf("%#x", s.d), fmt.Sprintf("%#x", s.e), fmt.Sprintf("%#x", s.ff)}
	if len(labels) != 6 || !slices.Equal(labels[:3], wantFirst) || !slices.Equal(labels[3:], wantLast) {
		t.Errorf("QueuedTasks: %d tasks, want %v first and %v last", len(labels), wantFirst, wantLast)
	}
	for _, k := range ks[len(ks)-3:] {
		if fn, err := k.Function(); err != nil || fn != 0x401000 {
			t.Errorf("task %s: fn %#x %v", k.Label(), fn, err)
		}
	}
}

// exerciseState runs every walk of the package and the backend over s,
// checking bounds; it must return (bounded walks) and not panic.
func exerciseState(t *testing.T, s *fakeState) {
	as := s.as
	tps := []uint64{s.tp0, s.tp1, s.tp2}
	teams := []uint64{s.t1, s.t2, s.t3}
	tasks := []uint64{s.a, s.b, s.c, s.d, s.e, s.ff, s.t2impl0, s.t1impl1}
	for _, tp := range tps {
		if th, err := as.Thread(tp); err == nil {
			as.ICVsOf(th)
			if th.Team != 0 {
				teams = append(teams, th.Team)
			}
			if th.Task != 0 {
				tasks = append(tasks, th.Task)
			}
		}
	}
	for _, team := range teams {
		if tm, err := as.Team(team); tm != nil && len(tm.Members) > MaxThreads {
			t.Errorf("Team %#x: %d members (%v)", team, len(tm.Members), err)
		}
		if anc, _ := as.Ancestors(team); len(anc) > MaxNesting {
			t.Errorf("Ancestors %#x: %d teams", team, len(anc))
		}
		as.TeamQueue(team)
		for i := 0; i < 3; i++ {
			as.memberAt(team, i)
			as.ImplicitTask(team, i)
		}
	}
	for _, k := range tasks {
		if chain, _ := as.TaskChain(k); len(chain) > MaxNesting {
			t.Errorf("TaskChain %#x: %d tasks", k, len(chain))
		}
		as.ChildrenQueue(k)
		as.ICVsOf(&Thread{Task: k})
	}
	exerciseBackend(Backend(as), tps)
}

// exerciseBackend calls what a report calls, through the backend: each
// handle's ICVs of its scope, and once every ICV of the address space
// (most of them bad input there).
func exerciseBackend(g backend.AddressSpace, tps []uint64) {
	icvs, _ := g.ICVs()
	vals, errs := make([]ompd.Value, len(icvs)), make([]error, len(icvs))
	backend.ReadICVs(g, g, icvs, vals, errs)
	scoped := map[ompd.Scope][]ompd.ICV{}
	for _, icv := range icvs {
		scoped[icv.Scope] = append(scoped[icv.Scope], icv)
	}
	readScope := func(h any, scope ompd.Scope) {
		backend.ReadICVs(g, h, scoped[scope], vals[:len(scoped[scope])], errs[:len(scoped[scope])])
	}
	readScope(g, ompd.ScopeAddressSpace)
	g.DisplayControlVars()
	for _, tp := range tps {
		h, err := g.ThreadHandle(ompd.ThreadIDPthread, tp)
		if err != nil {
			continue
		}
		if inf, ok := h.(interface{ InferredState() (ompd.State, uint64) }); ok {
			inf.InferredState()
		}
		h.ThreadNum()
		for _, icv := range []string{"nthreads-var", "thread-num-var"} {
			g.ICV(h, ompd.ICV{Name: icv})
		}
		readScope(h, ompd.ScopeThread)
		if k, err := h.CurrentTask(); err == nil {
			for i := 0; k != nil && i <= MaxNesting+1; i++ {
				k.Flags()
				k.Function()
				k.Parallel()
				g.ICV(k, ompd.ICV{Name: "final-task-var"})
				readScope(k, ompd.ScopeTask)
				k, _ = k.Generating()
			}
		}
		p, err := h.CurrentParallel()
		for i := 0; err == nil && p != nil && i <= MaxNesting+1; i++ {
			n, _ := p.TeamSize()
			p.Level()
			p.Serialized()
			g.ICV(p, ompd.ICV{Name: "team-size-var"})
			readScope(p, ompd.ScopeParallel)
			for j := 0; j < n && j < 4; j++ {
				p.ThreadIn(j)
				p.TaskIn(j)
			}
			p, err = p.Enclosing()
		}
	}
	g.QueuedTasks()
}

// stateCases are the seeds of FuzzGompWalks: the hand-laid state and the
// bad inputs above.
func stateCases(t testing.TB) [][]byte {
	var out [][]byte
	for _, mod := range []func(s *fakeState){
		func(s *fakeState) {},
		func(s *fakeState) { s.setTeamState(s.t1+s.off("gomp_team.prev_ts"), s.t2, 1, 0, 0) },
		func(s *fakeState) { s.setTeamState(s.t1+s.off("gomp_team.prev_ts"), s.t1, 0, 0, 0) },
		func(s *fakeState) { s.set(s.t2, "gomp_team.nthreads", 0) },
		func(s *fakeState) { s.set(s.t2, "gomp_team.nthreads", MaxThreads) },
		func(s *fakeState) { s.set(s.t2impl0, "gomp_task.parent", s.a) },
		func(s *fakeState) { s.set(s.t2impl0, "gomp_task.kind", 42) },
		func(s *fakeState) { s.set(s.node(s.c, pqTeam), "priority_node.next", s.node(s.b, pqTeam)) },
		func(s *fakeState) { s.set(s.p0, "prio_splay_tree_node_s.right", s.p5) },
		func(s *fakeState) { s.set(s.thr2+s.off("gomp_thread.ts"), "gomp_team_state.team", 0xdead0000) },
		func(s *fakeState) { s.set(s.thr2+s.off("gomp_thread.ts"), "gomp_team_state.team_id", 5) },
	} {
		s := newState(t)
		mod(s)
		out = append(out, s.f.image())
	}
	return out
}

// TestBadInputsTerminate: every walk over each bad input returns.
func TestBadInputsTerminate(t *testing.T) {
	for i, img := range stateCases(t) {
		s := newState(t)
		s.f.load(img)
		t.Run(fmt.Sprint(i), func(t *testing.T) { exerciseState(t, s) })
	}
}

// FuzzGompWalks: the hand-laid state with its bytes replaced by the input
// (the regions in order): no walk panics or runs unbounded.
func FuzzGompWalks(f *testing.F) {
	for _, img := range stateCases(f) {
		f.Add(img)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := newState(t)
		s.f.load(data)
		fuzzlimit.Exec(t, func() { exerciseState(t, s) })
	})
}

// TestUnknownRelease: a libgomp with a version node newer than every known
// one and an unknown build-id is of an unknown release (Major 0), whatever
// known nodes it also defines; a known build-id fixes the release.
func TestUnknownRelease(t *testing.T) {
	known, err := knownNodes()
	if err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for n := range known {
		nodes = append(nodes, n)
	}
	// Newer than every known node: a later major, and a later minor of
	// the highest known one.
	newer := highestNode(nodes, "GOMP_") + ".9"
	for _, n := range []string{"GOMP_7.0", newer} {
		if _, ok := known[n]; ok {
			t.Fatalf("%s is a known node", n)
		}
	}
	all := append([]string{"OMP_1.0", "GOMP_1.0", "GOMP_4.0", "GOMP_7.0", "GOMP_PLUGIN_9.0", "OACC_2.6"}, nodes...)
	r, err := identify(&Image{Nodes: all, BuildID: "00112233445566778899aabbccddeeff00112233"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Major != 0 || r.Node != "GOMP_7.0" || r.ByBuildID {
		t.Errorf("release %+v, want unknown (Major 0) at node GOMP_7.0", r)
	}
	r, _ = identify(&Image{Nodes: []string{"GOMP_7.0"}})
	if r.Major != 0 || r.Node != "GOMP_7.0" {
		t.Errorf("release %+v, want unknown at node GOMP_7.0", r)
	}
	r, _ = identify(&Image{Nodes: append([]string{newer}, nodes...)})
	if r.Major != 0 || r.Node != newer {
		t.Errorf("release %+v, want unknown at node %s", r, newer)
	}
	// Known nodes only (PLUGIN nodes left out): the release of the highest.
	r, _ = identify(&Image{Nodes: []string{"GOMP_5.0.1", "GOMP_5.1", "GOMP_PLUGIN_9.0"}, BuildID: "0011"})
	if r.Major != 12 || r.Node != "GOMP_5.1" || r.ByBuildID {
		t.Errorf("release %+v, want 12 by node GOMP_5.1", r)
	}
	// A known build-id fixes the release whatever the nodes say.
	r, _ = identify(&Image{Nodes: all, BuildID: "3856f0954e1931eebc020ca4a4e6bef40f4f7765"})
	if r.Major != 12 || !r.ByBuildID || r.Node != "GOMP_7.0" {
		t.Errorf("release %+v, want 12 by build-id", r)
	}
}

// TestApplyChecks: apply keeps a key a check confirms, derives the one key
// a check lacks, drops a contradicted key with a warning (and does not
// derive it again), and for an unknown release drops every key no check
// confirmed; for a known release those stay.
func TestApplyChecks(t *testing.T) {
	l12, err := LayoutFor(12)
	if err != nil {
		t.Fatal(err)
	}
	get := func(k string) int64 {
		v, ok := l12.Get(k)
		if !ok {
			t.Fatalf("no %s", k)
		}
		return v
	}
	const (
		ts     = "gomp_thread.ts"
		level  = "gomp_team_state.level"
		active = "gomp_team_state.active_level"
		id     = "gomp_team_state.team_id"
		nthr   = "gomp_team.nthreads"
	)
	checks := []check{
		{fn: "omp_get_level", keys: []string{ts, level}, found: get(ts) + get(level)},
		{fn: "omp_get_active_level", keys: []string{ts, active}, found: get(ts) + get(active)},
		{fn: "omp_get_ancestor_thread_num", keys: []string{id}, found: 99},
		{fn: "omp_get_thread_num", keys: []string{ts, id}, found: get(ts) + get(id)},
	}
	for _, release := range []int{0, 12} {
		t.Run(fmt.Sprint("release ", release), func(t *testing.T) {
			l := &Layout{Release: release, vals: map[string]int64{
				ts: get(ts), level: get(level), id: get(id), nthr: get(nthr),
			}}
			as := &AddressSpace{Layout: l}
			as.apply(slices.Clone(checks))
			want := map[string]int64{ts: get(ts), level: get(level), active: get(active)}
			if release != 0 {
				want[nthr] = get(nthr) // not checked: kept from the table
			}
			if got := offsets(l); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("layout %v, want %v", got, want)
			}
			wantConfirmed := []string{active, level, ts}
			sort.Strings(wantConfirmed)
			if !slices.Equal(as.Confirmed, wantConfirmed) {
				t.Errorf("confirmed %v, want %v", as.Confirmed, wantConfirmed)
			}
			wantWarn := []string{fmt.Sprintf("libgomp: omp_get_ancestor_thread_num uses 99 for %s, the layout says %d: dropped", id, get(id))}
			if !slices.Equal(as.Warnings, wantWarn) {
				t.Errorf("warnings %q, want %q", as.Warnings, wantWarn)
			}
		})
	}
}

// TestApplyConfirmedThenContradicted: a key one check confirmed and a later
// one contradicts is dropped and not confirmed; the other key of the first
// check stays confirmed.
func TestApplyConfirmedThenContradicted(t *testing.T) {
	l := &Layout{vals: map[string]int64{"gomp_thread.ts": 16, "gomp_team_state.level": 28}}
	as := &AddressSpace{Layout: l}
	as.apply([]check{
		{fn: "omp_get_level", keys: []string{"gomp_thread.ts", "gomp_team_state.level"}, found: 44},
		{fn: "omp_get_num_threads", keys: []string{"gomp_thread.ts"}, found: 24},
	})
	if got := offsets(l); !slices.Equal(as.Confirmed, []string{"gomp_team_state.level"}) || fmt.Sprint(got) != "map[gomp_team_state.level:28]" {
		t.Errorf("confirmed %v, layout %v: want gomp_team_state.level only", as.Confirmed, got)
	}
	want := []string{"libgomp: omp_get_num_threads uses 24 for gomp_thread.ts, the layout says 16: dropped"}
	if !slices.Equal(as.Warnings, want) {
		t.Errorf("warnings %q, want %q", as.Warnings, want)
	}
}

// offsets returns the field offsets of l (its "sizeof" keys left out),
// failing the test if l has the size of a field it has no offset of.
func offsets(l *Layout) map[string]int64 {
	out := map[string]int64{}
	for k, v := range l.vals {
		if !strings.HasPrefix(k, "sizeof ") {
			out[k] = v
		}
	}
	for k := range l.vals {
		if f, ok := strings.CutPrefix(k, "sizeof "); ok && strings.Contains(f, ".") {
			if _, ok := out[f]; !ok {
				out["size without offset: "+f] = 0
			}
		}
	}
	return out
}

// TestBackendICVs reads the ICVs of two threads, their tasks and the
// address space through the backend, one at a time and in a batch of
// their scope, with the layout as the table gives it and sealed: the
// values laid in the tasks' ICV blocks (each thread's its own, so that
// nothing read for one handle serves another) and in the globals.
func TestBackendICVs(t *testing.T) {
	for _, sealed := range []bool{false, true} {
		t.Run(fmt.Sprintf("sealed=%v", sealed), func(t *testing.T) {
			s := newState(t)
			if sealed {
				s.l.seal()
			}
			type icvBlock struct{ nthreads, sched, chunk, device, limit, dyn, levels, bind uint64 }
			lay := func(task uint64, b icvBlock) {
				icv := task + s.off("gomp_task.icv")
				for key, v := range map[string]uint64{
					"nthreads_var": b.nthreads, "run_sched_var": b.sched, "run_sched_chunk_size": b.chunk,
					"default_device_var": b.device, "thread_limit_var": b.limit, "dyn_var": b.dyn,
					"max_active_levels_var": b.levels, "bind_var": b.bind,
				} {
					s.set(icv, "gomp_task_icv."+key, v)
				}
			}
			lay(s.t2impl0, icvBlock{nthreads: 3, sched: 2, chunk: 4, device: 1, limit: 7, dyn: 1, levels: 5, bind: 2})
			lay(s.implicit(s.t2, 1), icvBlock{nthreads: 6, sched: 3, chunk: 1, device: 0, limit: 0xffffffff, dyn: 0, levels: 1, bind: 4})
			s.as.CancelVar, s.as.MaxTaskPriorityVar = s.f.alloc(8), s.f.alloc(8)
			s.f.put(s.as.CancelVar, 0, 1)
			s.f.put(s.as.MaxTaskPriorityVar, 9, 4)
			num := func(v int64) ompd.Value { return ompd.Value{Num: v} }
			g := Backend(s.as)
			all, err := g.ICVs()
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, h any, want map[string]ompd.Value) {
				t.Helper()
				var icvs []ompd.ICV
				for _, icv := range all {
					if _, ok := want[icv.Name]; ok {
						icvs = append(icvs, icv)
					}
				}
				if len(icvs) != len(want) {
					t.Fatalf("%s: the backend lists %d of the %d ICVs wanted", what, len(icvs), len(want))
				}
				vals, errs := make([]ompd.Value, len(icvs)), make([]error, len(icvs))
				backend.ReadICVs(g, h, icvs, vals, errs)
				for i, icv := range icvs {
					one, oneErr := g.ICV(h, icv)
					if errs[i] != nil || oneErr != nil || vals[i] != want[icv.Name] || one != want[icv.Name] {
						t.Errorf("%s %s: batch %+v, %v; one %+v, %v; want %+v", what, icv.Name, vals[i], errs[i], one, oneErr, want[icv.Name])
					}
				}
			}
			for _, c := range []struct {
				tp         uint64
				thread     map[string]ompd.Value
				task       map[string]ompd.Value
				threadName string
			}{
				{s.tp1, map[string]ompd.Value{"nthreads-var": num(3), "dyn-var": num(1), "default-device-var": num(1), "thread-num-var": num(0)},
					map[string]ompd.Value{"run-sched-var": {Str: "dynamic,4", IsString: true}, "thread-limit-var": num(7),
						"max-active-levels-var": num(5), "bind-var": num(2), "implicit-task-var": num(1), "final-task-var": num(0)},
					"thread 1"},
				{s.tp2, map[string]ompd.Value{"nthreads-var": num(6), "dyn-var": num(0), "default-device-var": num(0), "thread-num-var": num(1)},
					map[string]ompd.Value{"run-sched-var": {Str: "guided,1", IsString: true}, "thread-limit-var": num(0x7fffffff),
						"max-active-levels-var": num(1), "bind-var": num(4), "implicit-task-var": num(1), "final-task-var": num(0)},
					"thread 2"},
			} {
				h, err := g.ThreadHandle(ompd.ThreadIDPthread, c.tp)
				if err != nil {
					t.Fatal(err)
				}
				check(c.threadName, h, c.thread)
				k, err := h.CurrentTask()
				if err != nil {
					t.Fatal(err)
				}
				check(c.threadName+"'s task", k, c.task)
			}
			check("the address space", g, map[string]ompd.Value{"cancel-var": num(0), "max-task-priority-var": num(9)})

			// An ICV of another scope than the handle's is bad input,
			// one at a time and in a batch: the address space's block
			// holds no thread's ICVs, a thread's no task's.
			h, err := g.ThreadHandle(ompd.ThreadIDPthread, s.tp1)
			if err != nil {
				t.Fatal(err)
			}
			k, err := h.CurrentTask()
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]ompd.ICV{}
			for _, icv := range all {
				byName[icv.Name] = icv
			}
			par, err := h.CurrentParallel()
			if err != nil {
				t.Fatal(err)
			}
			// The scope is the backend's, not the caller's: an ICV
			// given with another scope (or with none, by name) is judged
			// by its own.
			misScoped := byName["dyn-var"]
			misScoped.Scope = ompd.ScopeAddressSpace
			// Asked by name alone, or by ID alone, an ICV of the
			// handle's scope is answered.
			for _, icv := range []ompd.ICV{{Name: "dyn-var"}, {ID: byName["dyn-var"].ID}} {
				if v, err := g.ICV(h, icv); err != nil || v != num(1) {
					t.Errorf("thread 1's dyn-var asked as %+v: %+v, %v; want 1", icv, v, err)
				}
			}
			// Each handle with an ICV of its own scope, which a batch
			// still answers after a refused one.
			right := map[any]ompd.ICV{g: byName["max-task-priority-var"], h: byName["dyn-var"],
				k: byName["final-task-var"], par: byName["team-size-var"]}
			for _, c := range []struct {
				what string
				h    any
				icv  ompd.ICV
			}{
				{"the address space", g, byName["dyn-var"]},
				{"the address space", g, byName["run-sched-var"]},
				{"the address space", g, misScoped},
				{"the address space", g, ompd.ICV{Name: "nthreads-var"}},
				{"thread 1", h, byName["run-sched-var"]},
				{"thread 1", h, byName["cancel-var"]},
				{"thread 1's task", k, byName["nthreads-var"]},
				{"thread 1's region", par, byName["thread-num-var"]},
				{"thread 1's region", par, byName["run-sched-var"]},
				{"thread 1", h, ompd.ICV{Name: "no-such-var"}},
				{"thread 1", h, ompd.ICV{ID: byName["nthreads-var"].ID, Name: "dyn-var"}},
				{"thread 1", h, ompd.ICV{ID: ompd.ICVID(len(icvTable) + 1), Name: "dyn-var"}},
			} {
				right := right[c.h]
				vals, errs := make([]ompd.Value, 2), make([]error, 2)
				backend.ReadICVs(g, c.h, []ompd.ICV{c.icv, right}, vals, errs)
				_, oneErr := g.ICV(c.h, c.icv)
				if !errors.Is(errs[0], ompd.ErrBadInput) || !errors.Is(oneErr, ompd.ErrBadInput) {
					t.Errorf("%s %s (%s scope): batch %+v, %v; one %v; want bad input", c.what, c.icv.Name, c.icv.Scope, vals[0], errs[0], oneErr)
				}
				if errs[1] != nil {
					t.Errorf("%s: %s after %s in a batch: %v", c.what, right.Name, c.icv.Name, errs[1])
				}
			}
		})
	}
}
