package main

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/core"
	"github.com/ompd-inspect/ompd-inspect/target/unwind"
)

// panickyTarget is a target without modules whose Threads panics when
// told to (the unwinding calls it), and whose memory is unreadable.
type panickyTarget struct{ panicThreads bool }

func (p *panickyTarget) PID() int { return 42 }
func (p *panickyTarget) Threads() []target.Thread {
	if p.panicThreads {
		panic("threads exploded")
	}
	return []target.Thread{{TID: 42}}
}
func (p *panickyTarget) ReadMemory(uint64, []byte) error { return target.ErrUnmapped }
func (p *panickyTarget) Modules() []*target.Module       { return nil }
func (p *panickyTarget) Warnings() []string              { return nil }
func (p *panickyTarget) Close() error                    { return nil }

// TestUnwindWhileBuilding checks unwindWhileBuilding's results, and that
// a panic on either side is raised on the caller (one while unwinding
// after the build has run; the build's when both panic).
func TestUnwindWhileBuilding(t *testing.T) {
	rep := &inspect.Report{}
	errBuild := errors.New("build failed")
	var stacksOK, unknownOK bool
	var frames int
	walks, got, err := unwindWhileBuilding(&panickyTarget{}, func(opts inspect.Options) (*inspect.Report, error) {
		// The build is given the walks: thread 42's (its registers'
		// frame; its memory is unreadable), none of thread 7.
		var fs []unwind.Frame
		fs, stacksOK = opts.Stacks(&target.Thread{TID: 42})
		frames = len(fs)
		_, unknownOK = opts.Stacks(&target.Thread{TID: 7})
		return rep, errBuild
	})
	if got != rep || !errors.Is(err, errBuild) || walks == nil || walks.Runtime() != "" {
		t.Fatalf("got report %p (want %p), error %v, walks %v", got, rep, err, walks)
	}
	if !stacksOK || frames != 1 || unknownOK {
		t.Fatalf("Options.Stacks: thread 42 %v with %d frames, thread 7 %v; want true with 1, false", stacksOK, frames, unknownOK)
	}

	raised := func(f func()) (p any) {
		defer func() { p = recover() }()
		f()
		return nil
	}
	built := false
	p := raised(func() {
		unwindWhileBuilding(&panickyTarget{panicThreads: true}, func(inspect.Options) (*inspect.Report, error) {
			built = true
			return rep, nil
		})
	})
	if p != "threads exploded" || !built {
		t.Fatalf("a panic while unwinding: raised %v (built %v); want it raised after the build", p, built)
	}
	p = raised(func() {
		unwindWhileBuilding(&panickyTarget{}, func(inspect.Options) (*inspect.Report, error) {
			panic("build exploded")
		})
	})
	if p != "build exploded" {
		t.Fatalf("a panic while building: raised %v", p)
	}
	// Both panic: the build's is the one raised.
	p = raised(func() {
		unwindWhileBuilding(&panickyTarget{panicThreads: true}, func(inspect.Options) (*inspect.Report, error) {
			panic("build exploded")
		})
	})
	if p != "build exploded" {
		t.Fatalf("a panic while building and one while unwinding: raised %v", p)
	}
}

// TestBuildReadsTheWalks: on a runtime that records no states (the
// corpus's gcore of the barrier fixture on stock libomp 19), the report
// asks the unwinding's walks (Options.Stacks) for an OpenMP thread's call
// into the runtime (the one not in the barrier), and says what it says
// without them.
func TestBuildReadsTheWalks(t *testing.T) {
	dir, path := corpusCore(t, "barrier-19-gcore.core.xz")
	lib := fixture.StockLibomp(19)
	c, err := core.Open(path, core.Options{Exe: filepath.Join(dir, "barrier-stock"), SearchPath: []string{filepath.Dir(lib)}})
	if err != nil {
		t.Fatalf("%v (run scripts/setup.sh)", err)
	}
	defer c.Close()
	src := inspect.Source{Kind: "core", Core: path}
	asked := map[int]int{}
	_, rep, err := unwindWhileBuilding(c, func(opts inspect.Options) (*inspect.Report, error) {
		walks := opts.Stacks
		opts.Stacks = func(th *target.Thread) ([]unwind.Frame, bool) {
			asked[th.TID]++
			return walks(th)
		}
		return inspect.Build(c, src, opts)
	})
	if err != nil {
		t.Fatal(err)
	}
	alone, err := inspect.Build(c, src, inspect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	openmp := map[int]bool{}
	for _, th := range rep.Threads {
		if th.OpenMP {
			openmp[th.OSTID] = true
		}
	}
	if len(openmp) != 4 || len(asked) == 0 {
		t.Fatalf("%d OpenMP threads, walks asked for %v; want the fixture's 4, and some walk asked for", len(openmp), asked)
	}
	for tid := range asked {
		if !openmp[tid] {
			t.Errorf("the walk of thread %d, not an OpenMP thread, was asked for", tid)
		}
	}
	got, _ := json.Marshal(rep.Threads)
	want, _ := json.Marshal(alone.Threads)
	if string(got) != string(want) {
		t.Errorf("threads with the walks:\n%s\nwithout:\n%s", got, want)
	}
}
