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

// endedTarget is a target whose reads say they have ended (target.Ender).
type endedTarget struct{ target.Target }

func (endedTarget) Ended() bool { return true }

// libgompReads counts the reads of a target that fall in one module.
type libgompReads struct {
	target.Target
	mod *target.Module
	n   int
}

func (c *libgompReads) ReadMemory(addr uint64, buf []byte) error {
	if c.mod.Contains(addr) {
		c.n++
	}
	return c.Target.ReadMemory(addr, buf)
}

// TestGompKnowledgeKept: Build of a process on libgomp keeps what libgomp's
// image and code gave with its image (kept), and the next Build's
// address space has the same knowledge; a build whose reads may have been
// cut short (an ended target) keeps nothing.
func TestGompKnowledgeKept(t *testing.T) {
	if _, err := exec.LookPath("gcc-12"); err != nil {
		t.Fatalf("gcc-12 is not installed (run scripts/setup.sh): %v", err)
	}
	exe := filepath.Join(t.TempDir(), "wide")
	src := filepath.Join(fixture.TestdataDir(t), "wide.c")
	if out, err := exec.Command("gcc-12", "-g", "-O1", "-fopenmp", "-o", exe, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc-12: %v\n%s", err, out)
	}
	fp := fixture.Start(t, "wide", fixture.StartOptions{Exe: exe, Env: []string{"FX_WIDE=4", "OMP_WAIT_POLICY=passive"}})
	p, err := ptrace.Attach(fp.PID, ptrace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rt, err := FindRuntime(p)
	if err != nil {
		t.Fatal(err)
	}
	known := keptWith[gomp.Knowledge](rt)
	if known == nil {
		t.Fatalf("no knowledge holder for %s (no image?)", rt.Name)
	}
	if _, err := Build(endedTarget{p}, Source{Kind: "process"}, Options{}); err != nil {
		t.Fatal(err)
	}
	if k := known.get(); k != nil {
		t.Fatal("a build over a target whose reads ended kept libgomp's knowledge")
	}
	// The first build reads libgomp's image and code and keeps what
	// they gave; the next reads of libgomp only its GOT slot and the
	// globals the report shows.
	first := &libgompReads{Target: p, mod: rt}
	rep, err := Build(first, Source{Kind: "process"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := known.get()
	if k == nil {
		t.Fatal("the build kept no knowledge of libgomp")
	}
	if rep.Runtime.Family != "gnu" || len(rep.Threads) != 4 {
		t.Fatalf("report of family %q with %d threads, want gnu with 4", rep.Runtime.Family, len(rep.Threads))
	}
	if k.Release().Major != 12 {
		t.Errorf("kept knowledge of GCC %d's libgomp, want 12", k.Release().Major)
	}
	next := &libgompReads{Target: p, mod: rt}
	if _, err := Build(next, Source{Kind: "process"}, Options{}); err != nil {
		t.Fatal(err)
	}
	if next.n >= first.n/2 {
		t.Errorf("the build with libgomp's knowledge read libgomp %d times, the one without %d", next.n, first.n)
	}
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
}

// TestLLVMKnowledgeKept: Build of a process on LLVM's runtime keeps the
// layout it read with the runtime's image, unless the target's reads
// ended; the next Build, which reads no layout symbol, reports the same
// threads, regions, tasks and ICVs.
func TestLLVMKnowledgeKept(t *testing.T) {
	fp := fixture.Start(t, "wide", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled", "FX_WIDE=4"}})
	p, err := ptrace.Attach(fp.PID, ptrace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rt, err := FindRuntime(p)
	if err != nil {
		t.Fatal(err)
	}
	known := keptWith[llvm.Knowledge](rt)
	if _, err := Build(endedTarget{p}, Source{Kind: "process"}, Options{}); err != nil {
		t.Fatal(err)
	}
	if known.get() != nil {
		t.Fatal("a build over a target whose reads ended kept the layout")
	}
	first, err := Build(p, Source{Kind: "process"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if known.get() == nil {
		t.Fatal("the build kept no layout")
	}
	next, err := Build(p, Source{Kind: "process"}, Options{})
	if err != nil {
		t.Fatal(err)
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
