package main

import (
	"errors"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/target"
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
