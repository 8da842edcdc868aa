package main

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/ptrace"
)

// TestRuntimeThreadPointers: in a rehearsal (a process that runs), the
// runtime's own table gives its threads' thread pointers, the initial
// thread's first. The oracle is the threads' fs_base once the process is
// stopped (the kernel's, not the runtime's). On the OMPD build and on
// stock libomp 19 (layout recovered from the code); GNU libgomp keeps no
// such table and gives none.
func TestRuntimeThreadPointers(t *testing.T) {
	gomp := &gompCases[slices.IndexFunc(gompCases, func(c gompCase) bool { return c.name == "teams" })]
	for _, c := range []struct {
		name string
		fx   string
		opts func(t *testing.T) fixture.StartOptions
		want int
	}{
		{"ompd", "wide", func(*testing.T) fixture.StartOptions {
			return fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled", "FX_WIDE=6"}}
		}, 4},
		{"stock19", "wide", func(*testing.T) fixture.StartOptions {
			return fixture.StartOptions{Env: []string{"FX_WIDE=3"}, Stripped: true, Runtime: fixture.StockLibomp(19)}
		}, 3},
		{"gomp", "teams", func(t *testing.T) fixture.StartOptions {
			return fixture.StartOptions{Exe: gompBuild(t, gomp), Env: gomp.env}
		}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			fp := fixture.Start(t, c.fx, c.opts(t))
			var ptrs []uint64
			var shown []target.Thread
			// As the command does, the modules are prepared (the stripped
			// runtime's knowledge recovered) before the rehearsal, which
			// may take all the time it needs.
			p, err := ptrace.Attach(fp.PID, ptrace.Options{Prepare: inspect.PrepareImage, RehearsalBudget: time.Minute, Rehearse: func(r *ptrace.Running) {
				ptrs = inspect.RuntimeThreadPointers(r, 4)
				r.SetThreadPointers(ptrs)
				shown = r.Threads()
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			ths := p.Threads()
			if err := p.Detach(); err != nil {
				t.Fatal(err)
			}
			if len(ptrs) != c.want {
				t.Fatalf("%d thread pointers %#x, want %d", len(ptrs), ptrs, c.want)
			}
			fsBase := make(map[uint64]int)
			stopped := make(map[int]uint64)
			for _, th := range ths {
				fsBase[th.Regs.FSBase] = th.TID
				stopped[th.TID] = th.Regs.FSBase
			}
			// The main thread has the runtime's first pointer, its own
			// (none on libgomp); a thread blocked in the kernel, whose
			// stack pointer the rehearsal knew, its own from the top of
			// its stack; a thread that ran, one of the runtime's or none.
			for i, th := range shown {
				switch want := stopped[th.TID]; {
				case i == 0 && c.want == 0:
					if th.ThreadPointer() != 0 {
						t.Errorf("main thread %d: thread pointer %#x on libgomp, want none", th.TID, th.ThreadPointer())
					}
				case i == 0 || th.Regs.Rsp != 0:
					if th.ThreadPointer() != want {
						t.Errorf("rehearsal thread %d (rsp %#x): thread pointer %#x, want %#x", th.TID, th.Regs.Rsp, th.ThreadPointer(), want)
					}
				case th.ThreadPointer() != 0 && !slices.Contains(ptrs, th.ThreadPointer()):
					t.Errorf("running thread %d: thread pointer %#x, neither none nor the runtime's %#x", th.TID, th.ThreadPointer(), ptrs)
				}
			}
			for i, ptr := range ptrs {
				if _, ok := fsBase[ptr]; !ok {
					t.Errorf("pointer %d (%#x) is no thread's fs_base", i, ptr)
				}
				if slices.Index(ptrs, ptr) != i {
					t.Errorf("pointer %#x given twice: %#x", ptr, ptrs)
				}
			}
			if main := ths[0]; c.want > 0 && (main.TID != fp.PID || ptrs[0] != main.Regs.FSBase) {
				t.Errorf("first pointer %#x; the main thread's (%d) fs_base is %#x", ptrs[0], main.TID, main.Regs.FSBase)
			}
		})
	}
}

// TestRehearsalOnlyForFewThreads: Attach rehearses a process of 64
// threads, not one of 65 (the threads the fixture was told to make are
// the oracle: all of them are stopped).
func TestRehearsalOnlyForFewThreads(t *testing.T) {
	for _, c := range []struct {
		threads  int
		rehearse bool
	}{{64, true}, {65, false}} {
		t.Run(strconv.Itoa(c.threads), func(t *testing.T) {
			fp := fixture.Start(t, "wide", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled", "FX_WIDE=" + strconv.Itoa(c.threads)}})
			called := false
			p, err := ptrace.Attach(fp.PID, ptrace.Options{Rehearse: func(*ptrace.Running) { called = true }})
			if err != nil {
				t.Fatal(err)
			}
			n := len(p.Threads())
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if n != c.threads || called != c.rehearse {
				t.Fatalf("%d threads stopped, rehearsed %v; want %d, %v", n, called, c.threads, c.rehearse)
			}
		})
	}
}

// TestCommandRehearsal: the command rehearses the read with the native
// backend (and with both), not with the dll one; the rehearsal reads the
// report the stopped process then gives (the oracle: the read once
// stopped): its OpenMP threads' gtids, the main thread's the same, one
// team of four at the program's parallel line; and the stacks, for a
// view that shows them.
func TestCommandRehearsal(t *testing.T) {
	for backend, want := range map[string]bool{"native": true, "both": true, "dll": false} {
		if got := attachOptions("summary", viewFlags{backend: backend}, nil).Rehearse != nil; got != want {
			t.Errorf("--backend %s: rehearsed %v, want %v", backend, got, want)
		}
	}
	fp := fixture.Start(t, "wide", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled", "FX_WIDE=4"}})
	vf := viewFlags{backend: "native", json: true}
	opts := attachOptions("all", vf, nil)
	opts.RehearsalBudget = time.Minute
	var rehearsed []readReport
	opts.Rehearse = func(r *ptrace.Running) { rehearsed = rehearse(r, "all", vf) }
	p, err := ptrace.Attach(fp.PID, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	stopped, err := readReports(p, inspect.Source{Kind: "process"}, "all", vf)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	if len(rehearsed) != 1 || len(stopped) != 1 {
		t.Fatalf("%d reports read in the rehearsal, %d once stopped; want 1", len(rehearsed), len(stopped))
	}
	gtids := func(rep *inspect.Report) (all []int, main int) {
		main = -1
		for _, th := range rep.Threads {
			if !th.OpenMP || th.GTID == nil {
				continue
			}
			all = append(all, *th.GTID)
			if th.OSTID == fp.PID {
				main = *th.GTID
			}
		}
		slices.Sort(all)
		return all, main
	}
	rep := rehearsed[0].rep
	got, gotMain := gtids(rep)
	want, wantMain := gtids(stopped[0].rep)
	if len(want) != 4 || fmt.Sprint(got) != fmt.Sprint(want) || gotMain != wantMain {
		t.Errorf("gtids in the rehearsal %v (main thread %d), once stopped %v (%d); want the same four", got, gotMain, want, wantMain)
	}
	loc := fmt.Sprintf("wide.c:%d", fixture.SourceLine(t, "wide.c", "parallel"))
	if len(rep.Regions) != 1 || rep.Regions[0].TeamSize != 4 || rep.Regions[0].Location != loc {
		t.Errorf("regions in the rehearsal %+v, want one team of 4 at %s", rep.Regions, loc)
	}
	if walks := rehearsed[0].walks; walks == nil || walks.Runtime() != rep.Runtime.Library {
		t.Errorf("the rehearsal's stacks: %v, want walks for runtime %s", walks, rep.Runtime.Library)
	}
}
