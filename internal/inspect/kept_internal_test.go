package inspect

import (
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/ompd/gomp"
	"github.com/ompd-inspect/ompd-inspect/ompd/llvm"
	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/ptrace"
)

// endsAfter is a target whose reads say they have ended (target.Ender)
// once n reads have been made (at once for 0), as a rehearsal's time runs
// out while it reads; the reads themselves go on.
type endsAfter struct {
	target.Target
	n int
}

func (e *endsAfter) ReadMemory(addr uint64, buf []byte) error {
	e.n--
	return e.Target.ReadMemory(addr, buf)
}

func (e *endsAfter) Ended() bool { return e.n <= 0 }

// readCounter counts the reads of a target by what name gives their
// addresses ("": not counted).
type readCounter struct {
	target.Target
	name func(addr uint64) string
	n    map[string]int
}

func (r *readCounter) ReadMemory(addr uint64, buf []byte) error {
	if name := r.name(addr); name != "" {
		r.n[name]++
	}
	return r.Target.ReadMemory(addr, buf)
}

// attachRuntime stops process pid (released at the test's end) and finds
// its OpenMP runtime.
func attachRuntime(t *testing.T, pid int) (*ptrace.Process, *target.Module) {
	t.Helper()
	p, err := ptrace.Attach(pid, ptrace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	rt, err := FindRuntime(p)
	if err != nil {
		t.Fatal(err)
	}
	if rt.Image == nil {
		t.Fatalf("runtime %s has no image to keep anything with", rt.Name)
	}
	return p, rt
}

// keepsNothingEnded builds the report of p through a target whose reads
// have ended, then through one whose reads end after n (as a rehearsal's
// time runs out while it reads), and checks after each that kept says
// nothing was kept.
func keepsNothingEnded(t *testing.T, p *ptrace.Process, n int, kept func() bool) {
	t.Helper()
	for what, tg := range map[string]target.Target{"ended": &endsAfter{Target: p}, "ended while it read": &endsAfter{Target: p, n: n}} {
		if _, err := Build(tg, Source{Kind: "process"}, Options{}); err != nil {
			t.Fatal(err)
		}
		if kept() {
			t.Fatalf("a build over a target whose reads %s kept what it learned of the runtime", what)
		}
	}
}

// TestGompLearnedKept: Build of a process on libgomp keeps what libgomp's
// image and code gave with its image (kept), and the next Build reads
// libgomp less than half as often; a build whose reads ended, before or
// while it read, keeps nothing.
func TestGompLearnedKept(t *testing.T) {
	if _, err := exec.LookPath("gcc-12"); err != nil {
		t.Fatalf("gcc-12 is not installed (run scripts/setup.sh): %v", err)
	}
	exe := filepath.Join(t.TempDir(), "wide")
	src := filepath.Join(fixture.TestdataDir(t), "wide.c")
	if out, err := exec.Command("gcc-12", "-g", "-O1", "-fopenmp", "-o", exe, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc-12: %v\n%s", err, out)
	}
	fp := fixture.Start(t, "wide", fixture.StartOptions{Exe: exe, Env: []string{"FX_WIDE=4", "OMP_WAIT_POLICY=passive"}})
	p, rt := attachRuntime(t, fp.PID)
	known := keptWith[gomp.Learned](rt)
	keepsNothingEnded(t, p, 3, func() bool { return known.get() != nil })
	// The first build reads libgomp's image and code and keeps what
	// they gave; the next reads of libgomp only its GOT slot and the
	// globals the report shows.
	inLibgomp := func(addr uint64) string {
		if rt.Contains(addr) {
			return "libgomp"
		}
		return ""
	}
	first := &readCounter{Target: p, name: inLibgomp, n: map[string]int{}}
	rep, err := Build(first, Source{Kind: "process"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := known.get()
	if k == nil {
		t.Fatal("the build kept nothing of libgomp")
	}
	if rep.Runtime.Family != "gnu" || len(rep.Threads) != 4 {
		t.Fatalf("report of family %q with %d threads, want gnu with 4", rep.Runtime.Family, len(rep.Threads))
	}
	if k.Release().Major != 12 {
		t.Errorf("kept what was learned of GCC %d's libgomp, want 12", k.Release().Major)
	}
	next := &readCounter{Target: p, name: inLibgomp, n: map[string]int{}}
	if _, err := Build(next, Source{Kind: "process"}, Options{}); err != nil {
		t.Fatal(err)
	}
	if next.n["libgomp"] >= first.n["libgomp"]/2 {
		t.Errorf("the build with what was learned of libgomp read it %d times, the one without %d", next.n["libgomp"], first.n["libgomp"])
	}
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
}

// TestLLVMLearnedKept: Build of a process on LLVM's runtime keeps the
// layout it read with the runtime's image, unless the target's reads
// ended, before or while it read; the next Build reads none of the layout
// symbols the first read and reports the same threads, regions, tasks and
// ICVs.
func TestLLVMLearnedKept(t *testing.T) {
	fp := fixture.Start(t, "wide", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled", "FX_WIDE=4"}})
	p, rt := attachRuntime(t, fp.PID)
	known := keptWith[llvm.Learned](rt)
	// Ended once the layout was read, before the report was.
	keepsNothingEnded(t, p, 200, func() bool { return known.get() != nil })
	// Three layout symbols every report reads: the build with the layout
	// kept reads none of them.
	at := map[uint64]string{}
	for _, name := range []string{"ompd_sizeof__kmp_info_t", "ompd_access__kmp_base_info_t__th_current_task", "ompd_access__kmp_taskdata_t__td_flags"} {
		sym, err := target.LookupSymbol(p, name, rt)
		if err != nil {
			t.Fatal(err)
		}
		at[sym.Addr] = name
	}
	atName := func(addr uint64) string { return at[addr] }
	firstReads := &readCounter{Target: p, name: atName, n: map[string]int{}}
	first, err := Build(firstReads, Source{Kind: "process"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if known.get() == nil {
		t.Fatal("the build kept no layout")
	}
	nextReads := &readCounter{Target: p, name: atName, n: map[string]int{}}
	next, err := Build(nextReads, Source{Kind: "process"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(firstReads.n) != len(at) || len(nextReads.n) != 0 {
		t.Errorf("layout symbols read by the build without the layout kept: %v; with it: %v; want all three, then none", firstReads.n, nextReads.n)
	}
	if len(first.Threads) != 4 || len(first.ICVs) == 0 {
		t.Fatalf("first report: %d threads, %d ICVs; want 4 and some", len(first.Threads), len(first.ICVs))
	}
	for what, pair := range map[string][2]any{
		"threads": {first.Threads, next.Threads}, "regions": {first.Regions, next.Regions},
		"tasks": {first.Tasks, next.Tasks}, "ICVs": {first.ICVs, next.ICVs},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s with the kept layout differ:\n%+v\nwant\n%+v", what, pair[1], pair[0])
		}
	}
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
}
