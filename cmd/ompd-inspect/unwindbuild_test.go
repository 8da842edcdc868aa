package main

import (
	"errors"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/target"
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
// after the build has run).
func TestUnwindWhileBuilding(t *testing.T) {
	rep := &inspect.Report{}
	errBuild := errors.New("build failed")
	walks, got, err := unwindWhileBuilding(&panickyTarget{}, func() (*inspect.Report, error) { return rep, errBuild })
	if got != rep || !errors.Is(err, errBuild) || walks == nil || walks.Runtime() != "" {
		t.Fatalf("got report %p (want %p), error %v, walks %v", got, rep, err, walks)
	}

	raised := func(f func()) (p any) {
		defer func() { p = recover() }()
		f()
		return nil
	}
	built := false
	p := raised(func() {
		unwindWhileBuilding(&panickyTarget{panicThreads: true}, func() (*inspect.Report, error) {
			built = true
			return rep, nil
		})
	})
	if p != "threads exploded" || !built {
		t.Fatalf("a panic while unwinding: raised %v (built %v); want it raised after the build", p, built)
	}
	p = raised(func() {
		unwindWhileBuilding(&panickyTarget{}, func() (*inspect.Report, error) {
			panic("build exploded")
		})
	})
	if p != "build exploded" {
		t.Fatalf("a panic while building: raised %v", p)
	}
}
