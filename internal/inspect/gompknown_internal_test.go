package inspect

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
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
// image and code gave with its image (gompKnown), and the next Build's
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
	known := gompKnowledgeOf(rt)
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
