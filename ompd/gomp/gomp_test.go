package gomp

import (
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/target"
)

// teamsEnv are the ICVs the environment sets for teams.c.
var teamsEnv = []string{
	"OMP_WAIT_POLICY=passive", "OMP_MAX_ACTIVE_LEVELS=3", "OMP_SCHEDULE=dynamic,2",
	"OMP_THREAD_LIMIT=12", "OMP_MAX_TASK_PRIORITY=5", "OMP_CANCELLATION=true",
	"OMP_NUM_THREADS=4", "OMP_PROC_BIND=false",
}

// build compiles a fixture of testdata/gomp with gcc-12 (or gfortran-12).
func build(t *testing.T, out string, compiler string, srcs ...string) string {
	t.Helper()
	if _, err := exec.LookPath(compiler); err != nil {
		t.Fatalf("%s not installed (run scripts/setup.sh): %v", compiler, err)
	}
	dir := filepath.Join(fixture.RepoRoot(t), "testdata", "gomp")
	exe := filepath.Join(t.TempDir(), out)
	args := []string{"-g", "-O1", "-fopenmp", "-o", exe}
	for _, s := range srcs {
		args = append(args, filepath.Join(dir, s))
	}
	cmd := exec.Command(compiler, args...)
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", compiler, args, err, o)
	}
	return exe
}

// record is what a thread said about itself (testdata/gomp/record.h).
type record struct {
	num, level, active                          int
	sizes, anc                                  []int
	nthreads, sched, chunk, dyn, tlimit, maxact int
	bind, device, cancel, maxprio, final        int
}

func parseRecord(t *testing.T, s string) record {
	t.Helper()
	f := strings.Split(s, ",")
	if len(f) != 16 {
		t.Fatalf("record %q has %d fields", s, len(f))
	}
	n := func(i int) int {
		v, err := strconv.Atoi(f[i])
		if err != nil {
			t.Fatalf("record %q field %d: %v", s, i, err)
		}
		return v
	}
	list := func(i int) []int {
		if f[i] == "-" {
			return nil
		}
		var out []int
		for _, x := range strings.Split(f[i], "/") {
			v, err := strconv.Atoi(x)
			if err != nil {
				t.Fatalf("record %q field %d: %v", s, i, err)
			}
			out = append(out, v)
		}
		return out
	}
	return record{num: n(0), level: n(1), active: n(2), sizes: list(3), anc: list(4),
		nthreads: n(5), sched: n(6), chunk: n(7), dyn: n(8), tlimit: n(9), maxact: n(10),
		bind: n(11), device: n(12), cancel: n(13), maxprio: n(14), final: n(15)}
}

// checkTarget compares what the package reads from tg with the program's
// own record (READY), for a program on Debian 12's libgomp.
func checkTarget(t *testing.T, tg target.Target, ready fixture.Ready) {
	t.Helper()
	checkTargetRelease(t, tg, ready, Release{Major: 12, Node: "GOMP_5.1", ByBuildID: true})
}

// checkTargetRelease is checkTarget for a program on the libgomp of
// release want.
func checkTargetRelease(t *testing.T, tg target.Target, ready fixture.Ready, want Release) {
	t.Helper()
	cb, err := newTestCallbacks(tg)
	if err != nil {
		t.Fatal(err)
	}
	as, err := NewAddressSpace(cb, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkKnowledge(t, cb, as)
	if as.Release != want {
		t.Errorf("release %+v, want %+v", as.Release, want)
	}
	if len(as.Warnings) != 0 {
		t.Errorf("warnings: %q", as.Warnings)
	}
	for _, k := range []string{"gomp_thread.ts", "gomp_thread.task", "gomp_task.icv", "gomp_team.prev_ts",
		"gomp_team.barrier", "gomp_team_state.team_id", "gomp_task_icv.bind_var", "gomp_task.final_task"} {
		if !contains(as.Confirmed, k) {
			t.Errorf("%s not confirmed by code (confirmed: %v)", k, as.Confirmed)
		}
	}
	if as.GlobalICV == 0 || as.CancelVar == 0 || as.MaxTaskPriorityVar == 0 {
		t.Errorf("globals not found: icv %#x cancel %#x prio %#x", as.GlobalICV, as.CancelVar, as.MaxTaskPriorityVar)
	}

	idle := map[int]bool{}
	if ready["idle"] != "" {
		for _, s := range strings.Split(ready["idle"], ",") {
			v, _ := strconv.Atoi(s)
			idle[v] = true
		}
	}
	records := 0
	for k := range ready {
		if _, err := strconv.Atoi(strings.TrimPrefix(k, "t")); err == nil && strings.HasPrefix(k, "t") {
			records++
		}
	}
	byTID := map[int]*Thread{}
	for _, th := range tg.Threads() {
		g, err := as.Thread(th.ThreadPointer())
		if err != nil {
			t.Fatalf("thread %d: %v", th.TID, err)
		}
		byTID[th.TID] = g
	}
	if len(byTID) != len(idle)+records {
		t.Errorf("%d threads, want %d", len(byTID), len(idle)+records)
	}
	for tid := range idle {
		g := byTID[tid]
		if g == nil || !g.Idle || g.Team != 0 || g.StaleTeam == 0 {
			t.Errorf("thread %d: %+v, want an idle pool worker", tid, g)
		}
	}
	var b1Implicit uint64 // implicit task of thread 0 of team B1
	var b1Team uint64
	var xRunner *Thread
	for key, val := range ready {
		if !strings.HasPrefix(key, "t") || key == "idle" {
			continue
		}
		tid, err := strconv.Atoi(key[1:])
		if err != nil {
			continue
		}
		want := parseRecord(t, val)
		g := byTID[tid]
		if g == nil {
			t.Errorf("no thread %d", tid)
			continue
		}
		if g.Idle || g.TeamID != want.num || g.Level != want.level || g.ActiveLevel != want.active {
			t.Errorf("thread %d: idle %v (%s) num %d level %d active %d, want num %d level %d active %d",
				tid, g.Idle, g.IdleReason, g.TeamID, g.Level, g.ActiveLevel, want.num, want.level, want.active)
		}
		if want.level > 0 {
			teams, err := as.Ancestors(g.Team)
			if err != nil || len(teams) != want.level {
				t.Fatalf("thread %d: %d teams (%v), want %d", tid, len(teams), err, want.level)
			}
			if teams[0].Members[g.TeamID] != g.Addr {
				t.Errorf("thread %d: not member %d of its team", tid, g.TeamID)
			}
			for l := 1; l <= want.level; l++ {
				tm := teams[want.level-l]
				if tm.NThreads != want.sizes[l-1] || tm.Level != l {
					t.Errorf("thread %d: team at level %d: size %d level %d, want size %d", tid, l, tm.NThreads, tm.Level, want.sizes[l-1])
				}
				anc := g.TeamID
				if l < want.level {
					anc = teams[want.level-l-1].ParentThreadNum
				}
				if anc != want.anc[l-1] {
					t.Errorf("thread %d: ancestor at level %d is %d, want %d", tid, l, anc, want.anc[l-1])
				}
			}
		} else if g.Team != 0 {
			t.Errorf("thread %d: team %#x at level 0", tid, g.Team)
		}
		ic, err := as.ICVsOf(g)
		if err != nil {
			t.Fatalf("thread %d: %v", tid, err)
		}
		got := record{num: want.num, level: want.level, active: want.active, sizes: want.sizes, anc: want.anc,
			nthreads: int(ic.NThreads), sched: int(ic.RunSched), chunk: int(ic.Chunk), dyn: b2i(ic.Dyn),
			tlimit: int(ic.ThreadLimitValue()), maxact: ic.MaxActiveLevels, bind: int(ic.Bind),
			device: int(ic.DefaultDevice), cancel: ic.Cancel, maxprio: ic.MaxTaskPriority}
		if as.MaxActiveLevelsVar != 0 {
			// One global for every thread (GCC 10): the value it holds
			// at READY is the last one set. teams.c sets it once, to
			// 2, before the thread that sets it records itself; a
			// thread that recorded earlier recorded the environment's.
			want.maxact = 2
		}
		if g.Task != 0 {
			task, err := as.Task(g.Task)
			if err != nil {
				t.Fatalf("thread %d: %v", tid, err)
			}
			got.final = b2i(task.Final)
			if task.Kind == TaskTied {
				xRunner = g
				b1Implicit = task.Parent
			}
		}
		if !equalRecord(got, want) {
			t.Errorf("thread %d: ICVs\n got %+v\nwant %+v", tid, got, want)
		}
		if ready["queued"] != "" && want.level == 2 && want.anc[0] == 1 && want.num == 0 {
			b1Team = g.Team
		}
		if ready["queued"] != "" && want.level == 2 && want.anc[0] == 0 && want.num == 2 {
			if w, err := as.WaitOf(g.TP); err != nil || w.Kind != WaitBarrier {
				t.Errorf("thread %d (in the explicit barrier): wait %+v %v", tid, w, err)
			}
		}
	}
	if ready["queued"] == "" {
		return
	}
	// Tasks: X runs (tied, on thread 1 of B1), Y and a final Z queued in B1's
	// team queue, children of B1.0's implicit task.
	if xRunner == nil || b1Team == 0 {
		t.Fatalf("no thread runs task X (%v) or no team B1 (%#x)", xRunner, b1Team)
	}
	if xRunner.Team != b1Team || xRunner.TeamID != 1 {
		t.Errorf("task X runs on thread %d of team %#x, want 1 of %#x", xRunner.TeamID, xRunner.Team, b1Team)
	}
	if impl, _ := as.ImplicitTask(b1Team, 0); impl != b1Implicit {
		t.Errorf("task X's parent %#x, want thread 0's implicit task %#x", b1Implicit, impl)
	}
	queued, err := as.TeamQueue(b1Team)
	if err != nil {
		t.Fatal(err)
	}
	nq, _ := strconv.Atoi(ready["queued"])
	if len(queued) != nq {
		t.Fatalf("%d tasks queued in team B1, want %d", len(queued), nq)
	}
	finals := 0
	for _, q := range queued {
		task, err := as.Task(q)
		if err != nil {
			t.Fatal(err)
		}
		if task.Kind != TaskWaiting || task.Parent != b1Implicit || task.Fn == 0 {
			t.Errorf("queued task %+v: want waiting, parent %#x, with fn", task, b1Implicit)
		}
		finals += b2i(task.Final)
	}
	if finals != 1 {
		t.Errorf("%d final tasks queued, want 1", finals)
	}
	children, err := as.ChildrenQueue(b1Implicit)
	if err != nil || len(children) != nq+1 {
		t.Errorf("children of B1.0's implicit task: %d (%v), want %d", len(children), err, nq+1)
	}
}

func equalRecord(a, b record) bool {
	return a.nthreads == b.nthreads && a.sched == b.sched && a.chunk == b.chunk && a.dyn == b.dyn &&
		a.tlimit == b.tlimit && a.maxact == b.maxact && a.bind == b.bind && a.device == b.device &&
		a.cancel == b.cancel && a.maxprio == b.maxprio && a.final == b.final
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// TestTeamsLiveAndGcore: teams.c (gcc-12) live under ptrace, then from a
// gcore core of the same state.
func TestTeamsLiveAndGcore(t *testing.T) {
	exe := build(t, "teams", "gcc-12", "teams.c")
	p := fixture.Start(t, "teams", fixture.StartOptions{Exe: exe, Env: teamsEnv})
	liveAndGcore(t, p, func(t *testing.T, tg target.Target) { checkTarget(t, tg, p.Ready) })
}

// TestFortranLiveAndGcore: fteams.f90 (gfortran-12), two levels of teams,
// live and from a gcore core.
func TestFortranLiveAndGcore(t *testing.T) {
	exe := build(t, "fteams", "gfortran-12", "fteams.f90", "frecord.c")
	p := fixture.Start(t, "fteams", fixture.StartOptions{Exe: exe, Env: []string{
		"OMP_WAIT_POLICY=passive", "OMP_MAX_ACTIVE_LEVELS=2", "OMP_NUM_THREADS=2"}})
	liveAndGcore(t, p, func(t *testing.T, tg target.Target) { checkTarget(t, tg, p.Ready) })
}

// TestLayoutSeal checks that a sealed layout answers field as the table
// does: a field with its size (1 byte, 4 bytes), one the table gives no
// size for (8), and a field that is not there.
func TestLayoutSeal(t *testing.T) {
	l, err := parseLayout("gomp_task_icv dyn_var 36 1\ngomp_task_icv nthreads_var 0 8\ngomp_team_state team_id 16 4\ngomp_task - 200\nenum GOMP_TASK_TIED 1\n")
	if err != nil {
		t.Fatal(err)
	}
	l.vals["gomp_thread.ts"] = 24 // as runChecks adds an offset the code revealed
	want := map[string]fieldAt{
		"gomp_task_icv.dyn_var": {36, 1}, "gomp_task_icv.nthreads_var": {0, 8},
		"gomp_team_state.team_id": {16, 4}, "gomp_thread.ts": {24, 8},
	}
	for _, sealed := range []bool{false, true} {
		if sealed {
			l.seal()
			if len(l.fields) != len(want) {
				t.Errorf("sealed layout indexes %d fields, want %d: %v", len(l.fields), len(want), l.fields)
			}
		}
		for key, w := range want {
			off, size, err := l.field(key)
			if err != nil || (fieldAt{off, size}) != w {
				t.Errorf("sealed %v: field(%s) = %d, %d, %v; want %d, %d", sealed, key, off, size, err, w.off, w.size)
			}
		}
		if _, _, err := l.field("gomp_task.kind"); err == nil || !strings.Contains(err.Error(), "gomp_task.kind is not known") {
			t.Errorf("sealed %v: field of a missing key: %v", sealed, err)
		}
	}
	// Sealed, the index answers: what the table held when sealed.
	delete(l.vals, "gomp_team_state.team_id")
	delete(l.vals, "sizeof gomp_team_state.team_id")
	if off, size, err := l.field("gomp_team_state.team_id"); err != nil || off != 16 || size != 4 {
		t.Errorf("sealed field(gomp_team_state.team_id) = %d, %d, %v; want 16, 4 from the index", off, size, err)
	}
}

// TestICVsValue checks the names ICVs.Value answers and the globals it
// holds only when read (-1 when not).
func TestICVsValue(t *testing.T) {
	ic := &ICVs{NThreads: 4, Dyn: true, RunSched: 2, Chunk: 3, ThreadLimit: 0xffffffff, MaxActiveLevels: 5,
		Bind: 3, DefaultDevice: 1, Cancel: 1, MaxTaskPriority: -1}
	for name, want := range map[string]ompd.Value{
		"nthreads-var": {Num: 4}, "dyn-var": {Num: 1}, "run-sched-var": {Str: "dynamic,3", IsString: true},
		"thread-limit-var": {Num: 0x7fffffff}, "max-active-levels-var": {Num: 5}, "bind-var": {Num: 3},
		"default-device-var": {Num: 1}, "cancel-var": {Num: 1},
	} {
		if got, ok := ic.Value(name); !ok || got != want {
			t.Errorf("Value(%s) = %+v, %v; want %+v", name, got, ok, want)
		}
	}
	for _, name := range []string{"max-task-priority-var", "levels-var", "stacksize-var"} {
		if got, ok := ic.Value(name); ok {
			t.Errorf("Value(%s) = %+v, want none", name, got)
		}
	}
	// The globals' defaults, 0, are values.
	ic.Cancel, ic.MaxTaskPriority = 0, 0
	for _, name := range []string{"cancel-var", "max-task-priority-var"} {
		if got, ok := ic.Value(name); !ok || got != (ompd.Value{Num: 0}) {
			t.Errorf("Value(%s) of 0 = %+v, %v; want 0", name, got, ok)
		}
	}
}

// readCounter counts the reads it passes on.
type readCounter struct {
	ompd.Callbacks
	reads []ompd.Address
}

func (c *readCounter) ReadMemory(addr ompd.Address, buf []byte) error {
	c.reads = append(c.reads, addr)
	return c.Callbacks.ReadMemory(addr, buf)
}

// checkKnowledge checks that NewAddressSpace given as's knowledge gives
// the same address space reading only the TLS offset's GOT slot, and
// that knowledge of libgomp at another address is not used.
func checkKnowledge(t *testing.T, cb ompd.Callbacks, as *AddressSpace) {
	t.Helper()
	k := as.Learned()
	rc := &readCounter{Callbacks: cb}
	again, err := NewAddressSpace(rc, k)
	if err != nil {
		t.Fatal(err)
	}
	if len(rc.reads) != 1 || rc.reads[0] != as.tlsSlot {
		t.Errorf("with its knowledge, NewAddressSpace read %#x, want only the GOT slot %#x", rc.reads, as.tlsSlot)
	}
	bare := func(a *AddressSpace) AddressSpace {
		c := *a
		c.cb, c.m, c.given = nil, nil, false
		return c
	}
	if again.Learned() != nil {
		t.Error("an address space made from what was learned has something to pass on")
	}
	if got, want := bare(again), bare(as); !reflect.DeepEqual(got, want) {
		t.Errorf("with its knowledge:\n%+v\nwant\n%+v", got, want)
	}
	if again.TLSOffset != as.TLSOffset || again.TLSOffset == 0 {
		t.Errorf("TLS offset %d with its knowledge, %d without", again.TLSOffset, as.TLSOffset)
	}
	moved := as.Learned()
	moved.as.threadNum += 0x1000
	rc.reads = nil
	if _, err := NewAddressSpace(rc, moved); err != nil {
		t.Fatal(err)
	}
	if len(rc.reads) < 20 {
		t.Errorf("with knowledge of libgomp at another address, NewAddressSpace read %d times: it used it", len(rc.reads))
	}
}
