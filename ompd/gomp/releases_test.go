package gomp

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/core"
	"github.com/ompd-inspect/ompd-inspect/target/ptrace"
)

// releaseNodes are the highest GOMP_ version nodes of the extracted
// libgomp releases (libgomp.map of each).
var releaseNodes = map[int]string{10: "GOMP_5.0", 14: "GOMP_5.1.2", 16: "GOMP_6.0.1"}

// stockLibgomp returns the extracted libgomp of GCC release major. A
// missing one fails the test in CI (setup extracts it) and skips it
// elsewhere.
func stockLibgomp(t *testing.T, major int) string {
	t.Helper()
	lib := fixture.StockLibgomp(major)
	if _, err := os.Stat(lib); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("libgomp of GCC %d not extracted: %v", major, err)
		}
		t.Skipf("libgomp of GCC %d not extracted (run scripts/setup.sh): %v", major, err)
	}
	return lib
}

// releaseEnv is teamsEnv for a program on the libgomp of release major:
// GCC 10 nests parallel regions only with OMP_NESTED (its nest-var;
// OMP_MAX_ACTIVE_LEVELS alone enables nesting from GCC 11 on).
func releaseEnv(major int) []string {
	env := slices.Clone(teamsEnv)
	if major < 11 {
		env = append(env, "OMP_NESTED=true")
	}
	return env
}

// liveAndGcore runs check on p live under ptrace, then on a gcore core of
// the same state.
func liveAndGcore(t *testing.T, p *fixture.Process, check func(*testing.T, target.Target)) {
	t.Run("live", func(t *testing.T) {
		proc, err := ptrace.Attach(p.PID, ptrace.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer proc.Close()
		check(t, proc)
	})
	t.Run("gcore", func(t *testing.T) {
		c, err := core.Open(p.Gcore(t), core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		check(t, c)
	})
}

// TestTeamsReleases: teams.c (gcc-12) on Debian's libgomp of other GCC
// releases (scripts/setup.sh extracts them), live and from a gcore core:
// each is identified by its build-id, gives no warning, has the same
// offsets confirmed by code, and reads as the program recorded itself.
func TestTeamsReleases(t *testing.T) {
	exe := build(t, "teams", "gcc-12", "teams.c")
	for _, major := range fixture.StockLibgompVersions() {
		t.Run("gcc"+strconv.Itoa(major), func(t *testing.T) {
			lib := stockLibgomp(t, major)
			env := append(releaseEnv(major), fixture.LibgompEnv(t, lib)...)
			p := fixture.Start(t, "teams", fixture.StartOptions{Exe: exe, Env: env})
			want := Release{Major: major, Node: releaseNodes[major], ByBuildID: true}
			liveAndGcore(t, p, func(t *testing.T, tg target.Target) {
				checkTargetRelease(t, tg, p.Ready, want)
			})
		})
	}
}

// unknownCopy writes a copy of lib named libgomp.so.1 into a new directory
// with its build-id changed and, if node is not "", its version node node
// renamed to renamed (of the same length): a build nobody listed, of a
// release the nodes may not tell.
func unknownCopy(t *testing.T, lib, node, renamed string) string {
	t.Helper()
	data, err := os.ReadFile(lib)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	id := f.Section(".note.gnu.build-id")
	if id == nil || id.Size < 16+4 {
		t.Fatalf("%s has no build-id note", lib)
	}
	// Note header (12 bytes), "GNU\0", then the id: change its first byte.
	data[id.Offset+16] ^= 0xff
	if node != "" {
		dynstr := f.Section(".dynstr")
		if dynstr == nil || len(node) != len(renamed) {
			t.Fatalf("cannot rename %s to %s in %s", node, renamed, lib)
		}
		strs := data[dynstr.Offset : dynstr.Offset+dynstr.Size]
		i := bytes.Index(strs, []byte("\x00"+node+"\x00"))
		if i < 0 {
			t.Fatalf("%s: no version node %s", lib, node)
		}
		copy(strs[i+1:], renamed)
	}
	out := filepath.Join(t.TempDir(), "libgomp.so.1")
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTeamsUnknownBuild: teams.c on the newest extracted libgomp with its
// build-id changed. Its version nodes still give its release: read as
// fully as the listed build, without warnings. With its newest node
// renamed too (GOMP_7.0.1, a later release's), the release is unknown: a
// warning says so and only the offsets the code confirms are used, the
// same values as the release's table.
func TestTeamsUnknownBuild(t *testing.T) {
	versions := fixture.StockLibgompVersions()
	major := versions[len(versions)-1]
	lib := stockLibgomp(t, major)
	exe := build(t, "teams", "gcc-12", "teams.c")

	t.Run("by node", func(t *testing.T) {
		env := append(releaseEnv(major), fixture.LibgompEnv(t, unknownCopy(t, lib, "", ""))...)
		p := fixture.Start(t, "teams", fixture.StartOptions{Exe: exe, Env: env})
		want := Release{Major: major, Node: releaseNodes[major]}
		liveAndGcore(t, p, func(t *testing.T, tg target.Target) {
			checkTargetRelease(t, tg, p.Ready, want)
		})
	})

	t.Run("unknown", func(t *testing.T) {
		node := releaseNodes[major]
		renamed := "GOMP_7" + node[len("GOMP_6"):]
		env := append(releaseEnv(major), fixture.LibgompEnv(t, unknownCopy(t, lib, node, renamed))...)
		p := fixture.Start(t, "teams", fixture.StartOptions{Exe: exe, Env: env})
		table, err := LayoutFor(major)
		if err != nil {
			t.Fatal(err)
		}
		liveAndGcore(t, p, func(t *testing.T, tg target.Target) {
			checkUnknown(t, tg, p.Ready, renamed, table)
		})
	})
}

// checkUnknown checks what an unknown release gives: the warning, the
// offsets confirmed by code (those of table), and the threads' team state
// and ICVs read with them.
func checkUnknown(t *testing.T, tg target.Target, ready fixture.Ready, node string, table *Layout) {
	t.Helper()
	cb, err := newTestCallbacks(tg)
	if err != nil {
		t.Fatal(err)
	}
	as, err := NewAddressSpace(cb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Release{Node: node}); as.Release != want {
		t.Errorf("release %+v, want %+v", as.Release, want)
	}
	if len(as.Warnings) != 1 || !strings.Contains(as.Warnings[0], "unknown libgomp release") {
		t.Errorf("warnings %q, want one saying the release is unknown", as.Warnings)
	}
	// The layout holds the offsets the code confirmed and their fields'
	// sizes (those of their C types: the newest table's), nothing else.
	sized := 0
	for _, k := range as.Confirmed {
		want, inTable := table.Get("sizeof " + k)
		got, ok := as.Layout.Get("sizeof " + k)
		if ok != inTable || got != want {
			t.Errorf("sizeof %s: %d (%v), the table of GCC %d: %d (%v)", k, got, ok, table.Release, want, inTable)
		}
		if ok {
			sized++
		}
	}
	if as.Layout.Release != 0 || as.Layout.Keys() != len(as.Confirmed)+sized {
		t.Errorf("layout of release %d with %d keys, want only the %d confirmed by code and %d sizes", as.Layout.Release, as.Layout.Keys(), len(as.Confirmed), sized)
	}
	for _, k := range []string{"gomp_thread.ts", "gomp_thread.task", "gomp_task.icv", "gomp_team.prev_ts",
		"gomp_team.barrier", "gomp_team_state.team_id", "gomp_task_icv.bind_var", "gomp_task.final_task"} {
		if !contains(as.Confirmed, k) {
			t.Errorf("%s not confirmed by code (confirmed: %v)", k, as.Confirmed)
		}
	}
	for _, k := range as.Confirmed {
		got, _ := as.Layout.Get(k)
		if want, ok := table.Get(k); !ok || got != want {
			t.Errorf("%s: code gives %d, the table of GCC %d %d", k, got, table.Release, want)
		}
	}
	if as.GlobalICV == 0 || as.CancelVar == 0 || as.MaxTaskPriorityVar == 0 {
		t.Errorf("globals not found: icv %#x cancel %#x prio %#x", as.GlobalICV, as.CancelVar, as.MaxTaskPriorityVar)
	}
	tps := map[int]uint64{}
	for _, th := range tg.Threads() {
		tps[th.TID] = th.ThreadPointer()
	}
	ts, _ := as.Layout.Get("gomp_thread.ts")
	checked := 0
	for key, val := range ready {
		tid, err := strconv.Atoi(strings.TrimPrefix(key, "t"))
		if !strings.HasPrefix(key, "t") || err != nil {
			continue
		}
		want := parseRecord(t, val)
		tp, ok := tps[tid]
		if !ok {
			t.Errorf("no thread %d", tid)
			continue
		}
		addr := as.ThreadAddr(tp)
		_, id, level, active, err := as.state(addr + uint64(ts))
		if err != nil || id != want.num || level != want.level || active != want.active {
			t.Errorf("thread %d: num %d level %d active %d (%v), want num %d level %d active %d",
				tid, id, level, active, err, want.num, want.level, want.active)
		}
		task, err := as.field(addr, "gomp_thread.task")
		if err != nil {
			t.Errorf("thread %d: %v", tid, err)
			continue
		}
		ic, err := as.ICVsOf(&Thread{TP: tp, Addr: addr, Task: task})
		if err != nil {
			t.Errorf("thread %d: %v", tid, err)
			continue
		}
		got := record{nthreads: int(ic.NThreads), sched: int(ic.RunSched), chunk: int(ic.Chunk), dyn: b2i(ic.Dyn),
			tlimit: int(ic.ThreadLimitValue()), maxact: ic.MaxActiveLevels, bind: int(ic.Bind),
			device: int(ic.DefaultDevice), cancel: ic.Cancel, maxprio: ic.MaxTaskPriority, final: want.final}
		if !equalRecord(got, want) {
			t.Errorf("thread %d: ICVs\n got %+v\nwant %+v", tid, got, want)
		}
		checked++
	}
	if checked == 0 {
		t.Error("no thread's record checked")
	}
}
