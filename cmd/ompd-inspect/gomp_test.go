package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

// These tests run ompd-inspect's command line on programs built with GCC
// (gcc-12, gcc-11, gfortran-12), which run on GNU libgomp, live and from
// cores written by gcore and by the kernel. The oracle is what every
// thread of a program said about itself through the OpenMP API before it
// parked (testdata/gomp/record.h: thread number, level, team sizes and
// ancestor thread numbers at every level, the ICVs), what libgomp itself
// printed for OMP_DISPLAY_ENV, and the programs' sources (the lines of
// their constructs and calls).

// gompLine finds a source line of a fixture in testdata/gomp.
type gompLine func(t *testing.T) int

// gompMarker is the line holding the comment /* LINE:name */ in file.
func gompMarker(file, name string) gompLine {
	return func(t *testing.T) int { return fixture.SourceLine(t, filepath.Join("gomp", file), name) }
}

// gompText is, for the fixtures that carry no LINE markers (teams.c,
// fteams.f90, record.h, frecord.c are shared with ompd/gomp's tests), the
// line run[at] of the only run of consecutive lines of file whose texts,
// without surrounding blanks, are run.
func gompText(file string, at int, run ...string) gompLine {
	return func(t *testing.T) int {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(fixture.TestdataDir(t), "gomp", file))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		found := 0
		for i := 0; i+len(run) <= len(lines); i++ {
			match := true
			for j, want := range run {
				if strings.TrimSpace(lines[i+j]) != want {
					match = false
					break
				}
			}
			if match {
				if found != 0 {
					t.Fatalf("gomp/%s: %q at lines %d and %d", file, run, found, i+at+1)
				}
				found = i + at + 1
			}
		}
		if found == 0 {
			t.Fatalf("gomp/%s: no lines %q", file, run)
		}
		return found
	}
}

// gompConstruct is what ompd-inspect must say of the regions at one
// level: GCC's outlined function (GCC names them FUNCTION._omp_fn.N,
// numbered in source order) and the line of the parallel construct.
type gompConstruct struct {
	function string
	line     gompLine
}

// gompCase is one fixture program: how to build and run it and what is
// particular to it (check).
type gompCase struct {
	name     string
	compiler string
	srcs     []string // in testdata/gomp
	env      []string
	file     string // the source file of the constructs
	// regions are the constructs of the regions alive at READY, by level.
	regions map[int]gompConstruct
	// state is the state of the thread that recorded rec, by its role.
	state func(rec gompRecord) string
	// check asserts what is particular to the program.
	check func(t *testing.T, s *gompState)
	// flags are extra compiler flags.
	flags []string
	// ciOnly: the compiler may be missing outside CI (scripts/setup.sh
	// installs it; CI=true fails without it).
	ciOnly bool
}

// gompState is one look at a fixture's state.
type gompState struct {
	c       *gompCase
	src     source
	target  []string // the ompd-inspect arguments that reach it
	ready   fixture.Ready
	records map[int]gompRecord // by os_tid
	r       *inspect.Report
}

// teamsEnv is the environment of teams.c (the ICVs it expects, as in
// ompd/gomp's tests).
var gompTeamsEnv = []string{
	"OMP_WAIT_POLICY=passive", "OMP_MAX_ACTIVE_LEVELS=3", "OMP_SCHEDULE=dynamic,2",
	"OMP_THREAD_LIMIT=12", "OMP_MAX_TASK_PRIORITY=5", "OMP_CANCELLATION=true",
	"OMP_NUM_THREADS=4", "OMP_PROC_BIND=false",
}

// gompTeams is teams.c (nested teams on a pthread of their own, idle
// pool workers, ICVs set by the environment and by the API at two
// levels, an explicit task running and two queued) built by compiler.
func gompTeams(name, compiler string, ciOnly bool) gompCase {
	l := func(at int, run ...string) gompLine { return gompText("teams.c", at, run...) }
	return gompCase{
		name: name, compiler: compiler, srcs: []string{"teams.c"}, env: gompTeamsEnv, file: "teams.c", ciOnly: ciOnly,
		regions: map[int]gompConstruct{
			1: {"region_b._omp_fn.0", l(0, "#pragma omp parallel num_threads(2)")},
			2: {"region_b._omp_fn.1", l(0, "#pragma omp parallel")},
		},
		state: func(rec gompRecord) string {
			switch {
			case rec.level == 0:
				return "work_serial" // the main thread, in serial code
			case rec.role(0, 2):
				return "wait_barrier_explicit" // asleep on team B0's barrier
			}
			return "work_parallel" // parked in user code
		},
		check: checkGompTeams,
	}
}

// gompCases are the fixture programs.
var gompCases = []gompCase{
	gompTeams("teams", "gcc-12", false),
	gompTeams("teams-gcc11", "gcc-11", true),
	{
		name: "waits", compiler: "gcc-12", srcs: []string{"waits.c"}, file: "waits.c",
		env: []string{"OMP_WAIT_POLICY=passive", "OMP_SCHEDULE=guided,3", "OMP_THREAD_LIMIT=8",
			"OMP_DYNAMIC=false", "OMP_PROC_BIND=true", "OMP_DEFAULT_DEVICE=0", "OMP_NUM_THREADS=5,2"},
		regions: map[int]gompConstruct{1: {"main._omp_fn.0", gompMarker("waits.c", "parallel")}},
		state: func(rec gompRecord) string {
			return [...]string{"work_parallel", "wait_lock", "wait_critical"}[rec.num]
		},
		check: checkGompWaits,
	},
	{
		name: "crash", compiler: "gcc-12", srcs: []string{"crash.c"}, file: "crash.c",
		env: []string{"OMP_WAIT_POLICY=passive", "OMP_MAX_ACTIVE_LEVELS=2", "OMP_SCHEDULE=static"},
		regions: map[int]gompConstruct{
			1: {"run_outer._omp_fn.0", gompMarker("crash.c", "outer")},
			2: {"start_inner._omp_fn.0", gompMarker("crash.c", "inner")},
		},
		state: func(rec gompRecord) string {
			if rec.role(0, 1) {
				return "work_parallel" // the crasher, in user code
			}
			return "wait_barrier_explicit"
		},
		check: checkGompCrash,
	},
	{
		// fteams.f90 with fcore.c (frecord.c that passes the program's
		// arguments on, for kernel cores). gfortran's default
		// backtrace on: libgfortran's SIGABRT handler maps the
		// program's file again (to print a backtrace) before the
		// kernel dumps the core, and that mapping must not become part
		// of the executable's module.
		name: "fteams", compiler: "gfortran-12", srcs: []string{"fteams.f90", "fcore.c"}, file: "fteams.f90",
		env: []string{"OMP_WAIT_POLICY=passive", "OMP_MAX_ACTIVE_LEVELS=2", "OMP_NUM_THREADS=2"},
		regions: map[int]gompConstruct{
			1: {"MAIN__._omp_fn.0", gompText("fteams.f90", 0, "!$omp parallel num_threads(2)")},
			2: {"MAIN__._omp_fn.1", gompText("fteams.f90", 0, "!$omp parallel")},
		},
		state: func(gompRecord) string { return "work_parallel" },
		check: checkGompFortran,
	},
}

// The tests below run one fixture program each (runGompCase): live,
// from a gcore core of the same process and from a kernel core of another
// run, the report agrees exactly with what each thread recorded through
// the OpenMP API (thread numbers, levels, team sizes and ancestor thread
// numbers up the region chain, the ICVs at thread, task, region and
// address-space scope), names libgomp's family and inferred states, gives
// each thread the state its role implies, each region its outlined
// function and construct line, the idle pool workers as idle, and the
// control variables libgomp printed for OMP_DISPLAY_ENV; then what is
// particular to the program.

// TestGompTeams: teams.c (gcc-12): nested teams, idle workers, ICVs set
// at two levels, task X running and Y, Z queued, the backtrace of X's
// runner.
func TestGompTeams(t *testing.T) { runGompCase(t, "teams") }

// TestGompTeamsGCC11: teams.c built by gcc-11 (same checks).
func TestGompTeamsGCC11(t *testing.T) { runGompCase(t, "teams-gcc11") }

// TestGompLockAndCritical: waits.c: a thread blocked in omp_set_lock and
// one waiting for an unnamed critical section.
func TestGompLockAndCritical(t *testing.T) { runGompCase(t, "waits") }

// TestGompCrashInTask: crash.c: a NULL store in an explicit task of a
// level-2 region (the kernel core is of that crash).
func TestGompCrashInTask(t *testing.T) { runGompCase(t, "crash") }

// TestGompFortran: fteams.f90 (gfortran-12): two levels of teams.
func TestGompFortran(t *testing.T) { runGompCase(t, "fteams") }

// runGompCase builds the case's program, starts it (with
// OMP_DISPLAY_ENV=true, for the control variables) and checks it live,
// from a gcore core of that process and from a kernel core of a run in
// abort mode.
func runGompCase(t *testing.T, name string) {
	i := slices.IndexFunc(gompCases, func(c gompCase) bool { return c.name == name })
	if i < 0 {
		t.Fatalf("no case %s", name)
	}
	c := &gompCases[i]
	exe := gompBuild(t, c)
	env := append(slices.Clone(c.env), "OMP_DISPLAY_ENV=true")
	p := fixture.Start(t, c.name, fixture.StartOptions{Exe: exe, Env: env})
	displayed := gompDisplayedEnv(t, p)
	for _, src := range allSources {
		t.Run(strings.ReplaceAll(string(src), " ", "_"), func(t *testing.T) {
			s := &gompState{c: c, src: src}
			switch src {
			case live:
				s.target, s.ready = []string{"attach", strconv.Itoa(p.PID)}, p.Ready
			case gcore:
				s.target, s.ready = []string{"core", p.Gcore(t)}, p.Ready
			case kernel:
				path, ready := fixture.KernelCore(t, c.name, fixture.StartOptions{Exe: exe, Env: c.env})
				s.target, s.ready = []string{"core", path}, ready
			}
			s.r = reportOf(t, s.target...)
			if src != kernel {
				assertRunning(t, p)
			}
			s.records = gompRecords(t, s.ready)
			checkGompCommon(t, s, displayed)
			c.check(t, s)
		})
	}
}

// gompBuild compiles the case's sources with its compiler (-g -O1
// -fopenmp) and returns the program's path. A missing gcc-11 skips the
// case outside CI.
func gompBuild(t *testing.T, c *gompCase) string {
	t.Helper()
	if _, err := exec.LookPath(c.compiler); err != nil {
		if c.ciOnly && os.Getenv("CI") == "" {
			t.Skipf("%s is not installed (scripts/setup.sh installs it): %v", c.compiler, err)
		}
		t.Fatalf("%s is not installed (run scripts/setup.sh): %v", c.compiler, err)
	}
	dir := filepath.Join(fixture.TestdataDir(t), "gomp")
	exe := filepath.Join(t.TempDir(), c.name)
	args := append([]string{"-g", "-O1", "-fopenmp", "-Wall", "-o", exe}, c.flags...)
	for _, s := range c.srcs {
		args = append(args, filepath.Join(dir, s))
	}
	if out, err := exec.Command(c.compiler, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", c.compiler, strings.Join(args, " "), err, out)
	}
	return exe
}

// gompDisplayedEnv returns what libgomp printed for OMP_DISPLAY_ENV=true
// at start-up (NAME -> value, quotes removed). libgomp writes it before
// main runs, so it is all in the pipe by READY; this waits only for the
// test's reader of stderr to have caught up.
func gompDisplayedEnv(t *testing.T, p *fixture.Process) map[string]string {
	t.Helper()
	const end = "OPENMP DISPLAY ENVIRONMENT END"
	deadline := time.Now().Add(fixture.ReadyTimeout)
	for !strings.Contains(p.Stderr(), end) {
		if time.Now().After(deadline) {
			t.Fatalf("libgomp printed no OMP_DISPLAY_ENV block: %q", p.Stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(p.Stderr()))
	for sc.Scan() {
		name, value, ok := strings.Cut(strings.TrimSpace(sc.Text()), " = ")
		if ok {
			out[name] = strings.Trim(value, "'")
		}
	}
	return out
}

// gompRecord is what a thread said about itself (testdata/gomp/record.h).
type gompRecord struct {
	tid                                         int
	num, level, active                          int
	sizes, anc                                  []int // by level, 1 first
	nthreads, sched, chunk, dyn, tlimit, maxact int
	bind, device, cancel, maxprio, final        int
}

// role reports whether the thread is thread num of a level-2 team whose
// encountering thread is thread anc1 of the level-1 team.
func (rec gompRecord) role(anc1, num int) bool {
	return rec.level == 2 && rec.anc[0] == anc1 && rec.num == num
}

// schedule is run-sched-var as ompd-inspect writes it: an optional
// "monotonic:" modifier (bit 31 of omp_sched_t), the kind and ",chunk".
func (rec gompRecord) schedule() string {
	s := ""
	if uint32(rec.sched)&0x80000000 != 0 {
		s = "monotonic:"
	}
	kinds := map[uint32]string{1: "static", 2: "dynamic", 3: "guided", 4: "auto"}
	return s + kinds[uint32(rec.sched)&^0x80000000] + "," + strconv.Itoa(rec.chunk)
}

// gompRecords parses the t<TID> records of a READY line.
func gompRecords(t *testing.T, ready fixture.Ready) map[int]gompRecord {
	t.Helper()
	out := map[int]gompRecord{}
	for k, v := range ready {
		tid, err := strconv.Atoi(strings.TrimPrefix(k, "t"))
		if !strings.HasPrefix(k, "t") || err != nil {
			continue
		}
		f := strings.Split(v, ",")
		if len(f) != 16 {
			t.Fatalf("record %s=%q has %d fields", k, v, len(f))
		}
		n := func(s string) int {
			x, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("record %s=%q: %v", k, v, err)
			}
			return x
		}
		list := func(s string) []int {
			if s == "-" {
				return nil
			}
			var l []int
			for _, x := range strings.Split(s, "/") {
				l = append(l, n(x))
			}
			return l
		}
		out[tid] = gompRecord{tid: tid, num: n(f[0]), level: n(f[1]), active: n(f[2]), sizes: list(f[3]), anc: list(f[4]),
			nthreads: n(f[5]), sched: n(f[6]), chunk: n(f[7]), dyn: n(f[8]), tlimit: n(f[9]), maxact: n(f[10]),
			bind: n(f[11]), device: n(f[12]), cancel: n(f[13]), maxprio: n(f[14]), final: n(f[15])}
	}
	if len(out) == 0 {
		t.Fatalf("READY has no records: %v", ready)
	}
	return out
}

// recordOf returns the tid of the only recorded thread for which match
// is true.
func (s *gompState) recordOf(t *testing.T, what string, match func(gompRecord) bool) int {
	t.Helper()
	tid := 0
	for _, rec := range s.records {
		if match(rec) {
			if tid != 0 {
				t.Fatalf("two records are %s: %d and %d", what, tid, rec.tid)
			}
			tid = rec.tid
		}
	}
	if tid == 0 {
		t.Fatalf("no record is %s", what)
	}
	return tid
}

// loc is the file:line ompd-inspect must give for line of the case's
// file.
func (s *gompState) loc(t *testing.T, line gompLine) string {
	return s.c.file + ":" + strconv.Itoa(line(t))
}

// checkGompCommon asserts what every fixture shares: the runtime, each
// recorded thread against its record, the regions' constructs, the idle
// workers and the control variables.
func checkGompCommon(t *testing.T, s *gompState, displayed map[string]string) {
	t.Helper()
	r := s.r
	if r.Runtime.Family != "gnu" || r.Runtime.StateSource != "inferred" || r.Runtime.Backend != "native" {
		t.Errorf("runtime: family %q, state_source %q, backend %q; want gnu, inferred, native",
			r.Runtime.Family, r.Runtime.StateSource, r.Runtime.Backend)
	}
	if !strings.HasPrefix(filepath.Base(r.Runtime.Library), "libgomp.so") {
		t.Errorf("runtime library %s", r.Runtime.Library)
	}
	if len(r.Warnings) != 0 {
		t.Errorf("warnings: %q", r.Warnings)
	}
	var idle []int
	if s.ready["idle"] != "" {
		idle = s.ready.Ints(t, "idle")
	}
	if len(r.Threads) != len(s.records)+len(idle) {
		t.Errorf("%d threads; want %d recorded and %d idle", len(r.Threads), len(s.records), len(idle))
	}
	for _, tid := range idle {
		th := threadOf(t, r, tid)
		if !th.OpenMP || th.Idle == nil || th.Region != nil || th.Task != nil || th.ThreadNum != nil || str(th.State) != "idle" || th.Futex == nil {
			t.Errorf("idle worker %d: openmp %v, idle %s, region %s, task %s, thread_num %v, state %s, futex %s; want an idle OpenMP thread asleep on a futex, with no region, task or thread number",
				tid, th.OpenMP, str(th.Idle), str(th.Region), str(th.Task), th.ThreadNum, str(th.State), str(th.Futex))
		}
	}
	seen := map[string]bool{} // the regions on the records' chains
	for _, rec := range s.records {
		checkGompThread(t, s, rec, seen)
	}
	if len(r.Regions) != len(seen) {
		t.Errorf("%d regions; want the %d on the recorded threads' chains", len(r.Regions), len(seen))
	}
	for _, reg := range r.Regions {
		want, ok := s.c.regions[reg.Level]
		if !ok {
			t.Errorf("region %s at level %d", reg.ID, reg.Level)
			continue
		}
		if reg.Function != want.function || !sameLoc(reg.Location, s.loc(t, want.line)) || reg.Serialized {
			t.Errorf("region %s (level %d): %s at %s, serialized %v; want %s at %s",
				reg.ID, reg.Level, reg.Function, reg.Location, reg.Serialized, want.function, s.loc(t, want.line))
		}
	}
	checkGompControlVars(t, r, displayed)
}

// checkGompThread compares thread rec.tid of the report with its record:
// thread number, level, the team sizes and ancestor thread numbers along
// its region chain (the ancestor at each level is the thread 0 of the
// region below it), its current task, its state and its ICVs. It adds
// the regions of the chain to seen.
func checkGompThread(t *testing.T, s *gompState, rec gompRecord, seen map[string]bool) {
	t.Helper()
	r, tid := s.r, rec.tid
	th := threadOf(t, r, tid)
	if !th.OpenMP || th.Idle != nil || th.ThreadNum == nil || *th.ThreadNum != rec.num {
		t.Errorf("thread %d: openmp %v, idle %s, thread_num %v; want an OpenMP thread, number %d", tid, th.OpenMP, str(th.Idle), th.ThreadNum, rec.num)
	}
	if want := s.c.state(rec); str(th.State) != want {
		t.Errorf("thread %d (number %d, level %d): state %s; want %s", tid, rec.num, rec.level, str(th.State), want)
	}
	// The region chain, innermost first.
	var sizes, anc []int
	member := tid
	id := th.Region
	for l := rec.level; l >= 1; l-- {
		if id == nil {
			t.Errorf("thread %d: no region at level %d", tid, l)
			return
		}
		reg := regionByID(t, r, *id)
		seen[reg.ID] = true
		if reg.Level != l || reg.ActiveLevel > rec.active || len(reg.Threads) != reg.TeamSize {
			t.Errorf("thread %d: region %s at level %d: level %d, active level %d, team of %d, threads %v", tid, reg.ID, l, reg.Level, reg.ActiveLevel, reg.TeamSize, reg.Threads)
		}
		if l == rec.level && reg.ActiveLevel != rec.active {
			t.Errorf("thread %d: region %s: active level %d; want %d", tid, reg.ID, reg.ActiveLevel, rec.active)
		}
		sizes = append([]int{reg.TeamSize}, sizes...)
		anc = append([]int{slices.Index(reg.Threads, member)}, anc...)
		if len(reg.Threads) > 0 {
			member = reg.Threads[0]
		}
		id = reg.Parent
	}
	if id != nil {
		t.Errorf("thread %d: a region above level 1: %s", tid, *id)
	}
	if !slices.Equal(sizes, rec.sizes) || !slices.Equal(anc, rec.anc) {
		t.Errorf("thread %d: team sizes %v, ancestor thread numbers %v by level; want %v and %v", tid, sizes, anc, rec.sizes, rec.anc)
	}

	// ICVs, at the scope ompd-inspect gives each (LLVM's names and scopes).
	type want struct {
		name  string
		owner any
		value any
	}
	num := func(n int) any { return float64(n) }
	wants := []want{
		{"nthreads-var", tid, num(rec.nthreads)},
		{"dyn-var", tid, num(rec.dyn)},
		{"default-device-var", tid, num(rec.device)},
		{"thread-num-var", tid, num(rec.num)},
		{"cancel-var", nil, num(rec.cancel)},
		{"max-task-priority-var", nil, num(rec.maxprio)},
	}
	if th.Region != nil {
		wants = append(wants,
			want{"levels-var", *th.Region, num(rec.level)},
			want{"active-levels-var", *th.Region, num(rec.active)},
			want{"team-size-var", *th.Region, num(rec.sizes[rec.level-1])})
	}
	if th.Task != nil {
		wants = append(wants,
			want{"run-sched-var", *th.Task, rec.schedule()},
			want{"thread-limit-var", *th.Task, num(rec.tlimit)},
			want{"max-active-levels-var", *th.Task, num(rec.maxact)},
			want{"bind-var", *th.Task, num(rec.bind)},
			want{"final-task-var", *th.Task, num(rec.final)})
		checkGompCurrentTask(t, s, rec, th)
	} else {
		t.Errorf("thread %d at level %d has no task", tid, rec.level)
	}
	for _, w := range wants {
		if got := icv(t, r, w.name, w.owner); got != w.value {
			t.Errorf("thread %d: %s of %v is %v; want %v", tid, w.name, w.owner, got, w.value)
		}
	}
}

// checkGompCurrentTask checks the current task of a recorded thread in a
// region: an implicit task of its region, running on it, with the
// region's function and location, whose parent (from level 2) is an
// implicit task of the parent region; explicit tasks are the cases'
// concern.
func checkGompCurrentTask(t *testing.T, s *gompState, rec gompRecord, th inspect.Thread) {
	t.Helper()
	task := taskByID(t, s.r, *th.Task)
	if len(th.TaskStack) == 0 || th.TaskStack[0] != task.ID {
		t.Errorf("thread %d: task stack %v does not begin with its task %s", rec.tid, th.TaskStack, task.ID)
	}
	if task.Status != "running" || task.Thread == nil || *task.Thread != rec.tid || str(task.Region) != str(th.Region) {
		t.Errorf("thread %d: task %s: %s on %v in region %s; want running on it in %s", rec.tid, task.ID, task.Status, task.Thread, str(task.Region), str(th.Region))
	}
	if task.Kind != "implicit" {
		return
	}
	if th.Region == nil {
		// The initial thread outside any region: libgomp allocated no
		// task for it (its ICVs are gomp_global_icv's), and the report
		// gives it its initial task.
		if !strings.HasPrefix(task.ID, "initial@") || task.Parent != nil || task.Region != nil || len(task.Flags) != 0 {
			t.Errorf("thread %d outside any region: task %s, parent %s, region %s, flags %v; want its initial task", rec.tid, task.ID, str(task.Parent), str(task.Region), task.Flags)
		}
		return
	}
	reg := regionByID(t, s.r, *th.Region)
	if task.Function != reg.Function || task.Location != reg.Location || len(task.Flags) != 0 {
		t.Errorf("thread %d: implicit task %s: %s at %s, flags %v; want its region's %s at %s, no flags", rec.tid, task.ID, task.Function, task.Location, task.Flags, reg.Function, reg.Location)
	}
	if th.Function != reg.Function || th.Location != reg.Location {
		t.Errorf("thread %d: function %s at %s; want its region's %s at %s", rec.tid, th.Function, th.Location, reg.Function, reg.Location)
	}
	parent := taskByID(t, s.r, str(task.Parent))
	switch {
	case reg.Level >= 2:
		if parent.Kind != "implicit" || str(parent.Region) != str(reg.Parent) {
			t.Errorf("thread %d: implicit task %s's parent %s is %s in region %s; want an implicit task of region %s", rec.tid, task.ID, parent.ID, parent.Kind, str(parent.Region), str(reg.Parent))
		}
	case !strings.HasPrefix(parent.ID, "initial@") || parent.Region != nil || parent.Parent != nil:
		// Level 1: the encountering thread had no task of its own yet.
		t.Errorf("thread %d: level-1 implicit task %s's parent %s in region %s (parent %s); want an initial task", rec.tid, task.ID, parent.ID, str(parent.Region), str(parent.Parent))
	}
}

// checkGompControlVars compares the env view with what libgomp printed
// for OMP_DISPLAY_ENV: every variable ompd-inspect gives (at least the
// ICVs libgomp keeps in gomp_global_icv and its globals) has libgomp's
// value exactly.
func checkGompControlVars(t *testing.T, r *inspect.Report, displayed map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, v := range r.ControlVars {
		got[v.Name] = v.Value
	}
	for _, name := range []string{"_OPENMP", "OMP_DYNAMIC", "OMP_NESTED", "OMP_SCHEDULE", "OMP_THREAD_LIMIT",
		"OMP_MAX_ACTIVE_LEVELS", "OMP_DEFAULT_DEVICE", "OMP_CANCELLATION", "OMP_MAX_TASK_PRIORITY"} {
		if _, ok := got[name]; !ok {
			t.Errorf("control var %s missing: %v", name, got)
		}
	}
	for name, v := range got {
		want, ok := displayed[name]
		switch {
		case !ok:
			t.Errorf("control var %s=%s: libgomp displays no such variable", name, v)
		case v == want:
		default:
			t.Errorf("control var %s=%s; libgomp displays %s", name, v, want)
		}
	}
}

// gompSignature renders the default bt view of one thread: user frames
// as "function file:line" (" inlined" when inlined), markers and hops by
// their text. System frames are left out; a runtime frame is an error.
func gompSignature(t *testing.T, bt inspect.Backtrace) []string {
	t.Helper()
	var out []string
	for _, f := range bt.Frames {
		switch f.Kind {
		case inspect.KindUser:
			s := fmt.Sprintf("%s %s:%d", f.Function, filepath.Base(f.File), f.Line)
			if f.Inlined {
				s += " inlined"
			}
			out = append(out, s)
		case inspect.KindRegionMarker, inspect.KindTaskMarker, inspect.KindHop:
			out = append(out, f.Text)
		case inspect.KindRuntime:
			t.Errorf("thread %d: runtime frame %s in the default view", bt.OSTID, f.Function)
		}
	}
	return out
}

// checkGompBT compares the default bt of thread tid with want.
func checkGompBT(t *testing.T, s *gompState, tid int, want []string) {
	t.Helper()
	got := gompSignature(t, btOfThread(t, runBT(t, s.target), tid))
	if !slices.Equal(got, want) {
		t.Errorf("bt of thread %d:\n got %s\nwant %s", tid, strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

// frame, parallel, task and hop write the entries of a signature.
func frame(fn, file string, line int) string { return fmt.Sprintf("%s %s:%d", fn, file, line) }
func parallel(pragma, file string, line, team, num int) string {
	return fmt.Sprintf("%s at %s:%d — team of %d, thread %d", pragma, file, line, team, num)
}
func hop(tid int) string {
	return fmt.Sprintf("continued on thread 0 (%d), which encountered the region", tid)
}

// recParkLine is the line of record.h's rec_park where parked threads
// sleep.
var recParkLine = gompText("record.h", 1, "for (;;)", "nanosleep(&fx_nap, NULL);")

// checkGompTeams: teams.c's tasks and the backtrace of the thread that
// runs task X (thread 1 of team B1) from team B1's barrier.
func checkGompTeams(t *testing.T, s *gompState) {
	l := func(at int, run ...string) int { return gompText("teams.c", at, run...)(t) }
	r := s.r
	b0, b1 := s.recordOf(t, "B.0", func(g gompRecord) bool { return g.role(0, 0) }), s.recordOf(t, "B.1", func(g gompRecord) bool { return g.role(1, 0) })
	xRunner := s.recordOf(t, "B1.1", func(g gompRecord) bool { return g.role(1, 1) })
	b02 := s.recordOf(t, "B0.2", func(g gompRecord) bool { return g.role(0, 2) })
	if th := threadOf(t, r, b02); th.Futex == nil {
		t.Errorf("thread %d (in team B0's barrier): no futex", b02)
	}

	// Task X runs on B1.1, which took it in the barrier: its implicit
	// task is suspended under X.
	runner := threadOf(t, r, xRunner)
	x := taskByID(t, r, str(runner.Task))
	b1Task := str(threadOf(t, r, b1).Task)
	b1Region := str(runner.Region)
	if x.Kind != "explicit" || x.Function != "region_b._omp_fn.2" || !sameLoc(x.Location, s.loc(t, gompText("teams.c", 0, "#pragma omp task", "park_task();"))) ||
		str(x.Parent) != b1Task || str(x.Region) != b1Region || len(x.Flags) != 0 {
		t.Errorf("task X: %+v; want explicit region_b._omp_fn.2 at teams.c:%d, parent %s (B1.0's task), region %s, no flags",
			x, l(0, "#pragma omp task", "park_task();"), b1Task, b1Region)
	}
	if runner.Function != x.Function || runner.Location != x.Location {
		t.Errorf("thread %d: function %s at %s; want task X's", xRunner, runner.Function, runner.Location)
	}
	if len(runner.TaskStack) != 2 {
		t.Fatalf("thread %d: task stack %v; want task X and its implicit task", xRunner, runner.TaskStack)
	}
	impl := taskByID(t, r, runner.TaskStack[1])
	if impl.Kind != "implicit" || impl.Status != "suspended" || impl.Thread != nil || str(impl.Region) != b1Region || impl.Function != "region_b._omp_fn.1" {
		t.Errorf("thread %d's implicit task: %+v; want suspended, in region %s", xRunner, impl, b1Region)
	}

	// Y and a final Z are queued, children of B1.0's implicit task.
	type queued struct {
		function, location string
		flags              []string
	}
	var got []queued
	for _, k := range r.Tasks {
		if k.Status == "queued" {
			if k.Kind != "explicit" || k.Thread != nil || str(k.Parent) != b1Task || str(k.Region) != b1Region {
				t.Errorf("queued task %+v: want explicit, on no thread, parent %s, region %s", k, b1Task, b1Region)
			}
			got = append(got, queued{k.Function, filepath.Base(k.Location), k.Flags})
		}
	}
	slices.SortFunc(got, func(a, b queued) int { return strings.Compare(a.function, b.function) })
	want := []queued{
		{"region_b._omp_fn.3", fmt.Sprintf("teams.c:%d", l(0, "#pragma omp task", "noop_task(1);")), []string{}},
		{"region_b._omp_fn.4", fmt.Sprintf("teams.c:%d", l(0, "#pragma omp task final(1)")), []string{"final"}},
	}
	if n := s.ready.Int(t, "queued"); len(got) != n || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("queued tasks %v; want %d: %v", got, n, want)
	}

	// X's runner: the task, both regions, the hops to the threads that
	// encountered them, up to region_b (it runs on a pthread of its own).
	checkGompBT(t, s, xRunner, []string{
		frame("rec_park", "record.h", recParkLine(t)),
		frame("park_task", "teams.c", l(2, "atomic_store(&x_started, 1);", "rec_me();", "rec_park();")) + " inlined",
		frame("region_b._omp_fn.2", "teams.c", l(0, "park_task();")),
		fmt.Sprintf("#pragma omp task at teams.c:%d — task %s, parent %s", l(0, "#pragma omp task", "park_task();"), x.ID, b1Task),
		frame("region_b._omp_fn.1", "teams.c", l(1, "} else {", "#pragma omp barrier")),
		parallel("#pragma omp parallel", "teams.c", l(0, "#pragma omp parallel"), 2, 1),
		hop(b1),
		frame("region_b._omp_fn.0", "teams.c", l(0, "#pragma omp parallel")),
		parallel("#pragma omp parallel", "teams.c", l(0, "#pragma omp parallel num_threads(2)"), 2, 1),
		hop(b0),
		// GCC gives the call that forks a team no line of its own: it is
		// at the line before the construct (gdb shows the same).
		frame("region_b", "teams.c", l(0, "(void)arg;")),
	})
}

// checkGompWaits: waits.c's lock and critical section waiters sleep on
// the lock's futex and on another one, in the functions that wait.
func checkGompWaits(t *testing.T, s *gompState) {
	lock := s.ready["lock"]
	for num, w := range []struct{ function, marker string }{{"", ""}, {"wait_lock", "wait_lock"}, {"wait_critical", "wait_critical"}} {
		tid := s.recordOf(t, fmt.Sprintf("thread %d", num), func(g gompRecord) bool { return g.num == num })
		th := threadOf(t, s.r, tid)
		var line int
		if num == 0 {
			// Parked in rec_park, or aborted in rec_announce (both inlined
			// into hold).
			w.function, line = "rec_park", recParkLine(t)
			if s.src == kernel {
				w.function, line = "rec_announce", gompText("record.h", 0, "FX_MAYBE_ABORT();")(t)
			}
		} else {
			line = gompMarker("waits.c", w.marker)(t)
		}
		if th.UserFrame == nil || th.UserFrame.Function != w.function || th.UserFrame.Line != line {
			t.Errorf("thread %d (number %d): innermost user frame %+v; want %s at line %d", tid, num, th.UserFrame, w.function, line)
		}
		switch num {
		case 0:
			if th.Futex != nil {
				t.Errorf("holder %d: futex %s; want none", tid, *th.Futex)
			}
		case 1:
			if str(th.Futex) != lock {
				t.Errorf("lock waiter %d: futex %s; want the lock %s", tid, str(th.Futex), lock)
			}
		case 2:
			if th.Futex == nil || *th.Futex == lock {
				t.Errorf("critical waiter %d: futex %s; want one that is not the lock %s", tid, str(th.Futex), lock)
			}
		}
	}
}

// checkGompCrash: the crasher runs the explicit task in the level-2
// region; its backtrace shows the task and both regions up to main. In
// the kernel core it died in the SIGSEGV handler called at the NULL
// store.
func checkGompCrash(t *testing.T, s *gompState) {
	l := func(m string) int { return gompMarker("crash.c", m)(t) }
	r := s.r
	crasher, initial := s.ready.Int(t, "crasher"), s.ready.Int(t, "initial")
	if rec := s.records[crasher]; !rec.role(0, 1) {
		t.Fatalf("crasher %d recorded %+v; want thread 1 of the inner team", crasher, rec)
	}
	th := threadOf(t, r, crasher)
	task := taskByID(t, r, str(th.Task))
	inner := regionByID(t, r, str(th.Region))
	innerTask := str(threadOf(t, r, initial).Task) // thread 0's implicit task of the inner region
	if task.Kind != "explicit" || task.Status != "running" || task.Function != "produce._omp_fn.0" || !sameLoc(task.Location, s.loc(t, gompMarker("crash.c", "task"))) ||
		str(task.Region) != inner.ID || len(task.Flags) != 0 {
		t.Errorf("crasher's task %+v; want explicit produce._omp_fn.0 running at crash.c:%d in region %s", task, l("task"), inner.ID)
	}
	if len(th.TaskStack) != 2 || th.TaskStack[0] != task.ID || str(task.Parent) != th.TaskStack[1] {
		t.Errorf("crasher's task stack %v; want its task %s and the task's parent %s", th.TaskStack, task.ID, str(task.Parent))
	} else if p := taskByID(t, r, th.TaskStack[1]); p.Kind != "implicit" || p.Status != "suspended" || str(p.Region) != inner.ID || p.ID == innerTask {
		t.Errorf("the task's parent %+v; want the crasher's suspended implicit task of region %s", p, inner.ID)
	}

	var top []string
	if s.src == kernel {
		// abort() in the handler, the signal frame (system), the store.
		top = []string{frame("on_segv", "crash.c", l("handler_abort")), frame("explode", "crash.c", l("fault"))}
	} else {
		top = []string{frame("rec_park", "record.h", recParkLine(t)) + " inlined", frame("explode", "crash.c", l("park"))}
	}
	checkGompBT(t, s, crasher, append(top,
		frame("produce._omp_fn.0", "crash.c", l("call_explode")),
		fmt.Sprintf("#pragma omp task at crash.c:%d — task %s, parent %s", l("task"), task.ID, str(task.Parent)),
		frame("produce", "crash.c", l("taskwait")),
		frame("start_inner._omp_fn.0", "crash.c", l("call_produce")),
		parallel("#pragma omp parallel", "crash.c", l("inner"), 2, 1),
		hop(initial),
		frame("start_inner", "crash.c", l("fork_inner")),
		frame("run_outer._omp_fn.0", "crash.c", l("call_inner")),
		parallel("#pragma omp parallel", "crash.c", l("outer"), 2, 0),
		frame("run_outer", "crash.c", l("fork_outer")),
		frame("main", "crash.c", l("call_outer")),
	))
}

// checkGompFortran: the backtrace of thread 1 of the team of 3 (created
// by thread 1 of the level-1 team) hops twice, up to the main program.
func checkGompFortran(t *testing.T, s *gompState) {
	l := func(at int, run ...string) int { return gompText("fteams.f90", at, run...)(t) }
	worker := s.recordOf(t, "thread 1 of the team of 3", func(g gompRecord) bool { return g.role(1, 1) })
	inner0 := s.recordOf(t, "thread 0 of the team of 3", func(g gompRecord) bool { return g.role(1, 0) })
	initial := s.recordOf(t, "the initial thread", func(g gompRecord) bool { return g.role(0, 0) })
	checkGompBT(t, s, worker, []string{
		frame("rec_park", "record.h", recParkLine(t)) + " inlined",
		frame("frec_park", "frecord.c", gompText("frecord.c", 1, "rec_me();", "rec_park();")(t)),
		frame("MAIN__._omp_fn.1", "fteams.f90", l(0, "call frec_park()")),
		parallel("!$omp parallel", "fteams.f90", l(0, "!$omp parallel"), 3, 1),
		hop(inner0),
		// GCC's line table puts each call that forks a team on an
		// earlier statement (gdb shows the same lines).
		frame("MAIN__._omp_fn.0", "fteams.f90", l(0, "if (omp_get_thread_num() == 1) then")),
		parallel("!$omp parallel", "fteams.f90", l(0, "!$omp parallel num_threads(2)"), 2, 1),
		hop(initial),
		// The main program (MAIN__, named fteams in DWARF) is inlined
		// into main.
		frame("fteams", "fteams.f90", l(0, "call finit()")) + " inlined",
		frame("main", "fteams.f90", l(0, "use omp_lib")),
	})
}
