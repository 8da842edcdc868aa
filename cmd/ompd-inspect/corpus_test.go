package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/ompd/llvm/recovery"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// corpusEntry is one core of testdata/cores (manifest.json, written by
// scripts/make-core-corpus.sh).
type corpusEntry struct {
	Name, Kind, Exe, Runtime, RuntimeBuildID string
	Release                                  int // 0: the OMPD build
	Ready                                    fixture.Ready
}

// TestCoreCorpus reads the committed cores of testdata/cores (the barrier
// fixture on the OMPD build and on each of Debian's libomp, a kernel core
// and a gcore each) with the committed executables and the runtimes of
// the set-up, without starting any program, and checks what each program
// reported of itself when the core was made.
func TestCoreCorpus(t *testing.T) {
	dir := filepath.Join(fixture.RepoRoot(t), "testdata", "cores")
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var entries []corpusEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2*(1+len(fixture.StockVersions)) {
		t.Fatalf("%d cores in the corpus; want a kernel core and a gcore for the OMPD build and each of %v", len(entries), fixture.StockVersions)
	}
	line := fixture.SourceLine(t, "barrier.c", "barrier")
	for _, e := range entries {
		t.Run(e.Name, func(t *testing.T) {
			rt := filepath.Join(fixture.OMPDLibDir(), "libomp.so")
			if e.Release != 0 {
				rt = fixture.StockLibomp(e.Release)
			}
			im, err := elf.Open(rt)
			if err != nil {
				t.Fatalf("%v (run scripts/setup.sh)", err)
			}
			id := im.BuildID()
			im.Close()
			if id != e.RuntimeBuildID {
				t.Fatalf("%s has build-id %s, the corpus was made with %s: regenerate it (scripts/make-core-corpus.sh)", rt, id, e.RuntimeBuildID)
			}
			core := filepath.Join(t.TempDir(), "core")
			out, err := os.Create(core)
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("xz", "-dc", filepath.Join(dir, e.Name))
			cmd.Stdout = out
			if err := cmd.Run(); err != nil {
				t.Fatalf("xz -dc %s: %v", e.Name, err)
			}
			out.Close()
			args := []string{"core", core, "--exe", filepath.Join(dir, e.Exe), "--search-path", filepath.Dir(rt)}
			r := reportOf(t, append(args, "summary")...)
			want := inspect.SourceRecovered
			if e.Release == 0 {
				want = inspect.SourceSymbols
			}
			if r.Runtime.SymbolsSource != want || !r.Runtime.StateTracking || r.Target.Kind != "core" {
				t.Errorf("runtime %+v; want symbols from %s, state tracking on", r.Runtime, want)
			}
			ready := e.Ready
			members := []int{ready.Int(t, "t0"), ready.Int(t, "t1"), ready.Int(t, "t2"), ready.Int(t, "t3")}
			th0 := threadOf(t, r, members[0])
			if th0.Region == nil {
				t.Fatalf("thread %d is in no region", members[0])
			}
			reg := regionByID(t, r, *th0.Region)
			if len(r.Regions) != 1 || reg.TeamSize != 4 || reg.Level != 1 || !slices.Equal(reg.Threads, members) {
				t.Errorf("regions %+v; want one team of 4: %v", r.Regions, members)
			}
			waiting := "wait_barrier_explicit"
			if e.Release != 0 && e.Release < 17 {
				waiting = "wait_barrier" // docs/compatibility.md
			}
			for i, tid := range members {
				want := waiting
				if i == ready.Int(t, "stuck_num") {
					want = "work_parallel"
				}
				if th := threadOf(t, r, tid); str(th.State) != want || th.ThreadNum == nil || *th.ThreadNum != i || !th.OpenMP {
					t.Errorf("thread %d (num %d): state %s, num %v; want %s", tid, i, str(th.State), th.ThreadNum, want)
				}
			}
			bt := reportOf(t, append(args, "bt")...)
			matched := 0
			for _, b := range bt.Backtraces {
				if !slices.Contains(members, b.OSTID) || b.OSTID == ready.Int(t, "stuck") {
					continue
				}
				var user []string
				for _, f := range b.Frames {
					if f.Kind == inspect.KindUser {
						user = append(user, fmt.Sprintf("%s:%d", f.Function, f.Line))
					}
				}
				if b.Activity != "barrier (explicit or end of worksharing)" || len(user) == 0 || user[0] != "team_body:"+strconv.Itoa(line) {
					t.Errorf("thread %d: activity %q, user frames %q; want the barrier at team_body:%d", b.OSTID, b.Activity, user, line)
				}
				matched++
			}
			if matched != 3 {
				t.Errorf("%d backtraces of the 3 threads in the barrier", matched)
			}
		})
	}
}

// TestLayoutMemoryDiffers: a core whose runtime's layout block differs
// from the values in the runtime's code (here one value rewritten in the
// core) is reported without OpenMP state, with one warning that names the
// value; the threads and their stacks are still there.
func TestLayoutMemoryDiffers(t *testing.T) {
	dir := filepath.Join(fixture.RepoRoot(t), "testdata", "cores")
	lib := fixture.StockLibomp(19)
	k, _ := recoverStock(t, lib)
	// The block as ompd_init wrote it: the values in address order.
	type slot struct {
		name string
		addr uint64
	}
	var slots []slot
	for n := range k.Layout {
		slots = append(slots, slot{n, k.Symbols[n]})
	}
	slices.SortFunc(slots, func(a, b slot) int { return int(a.addr) - int(b.addr) })
	block := make([]byte, 8*len(slots))
	for i, s := range slots {
		binary.LittleEndian.PutUint64(block[8*i:], k.Layout[s.name])
	}
	out, err := exec.Command("xz", "-dc", filepath.Join(dir, "barrier-19-kernel.core.xz")).Output()
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(out, block)
	if at < 0 || bytes.Index(out[at+1:], block) >= 0 {
		t.Fatalf("the layout block is in the core %d times; want once", bytes.Count(out, block))
	}
	// Rewrite th_team's offset (the second slot).
	binary.LittleEndian.PutUint64(out[at+8:], 0x48)
	core := filepath.Join(t.TempDir(), "core")
	if err := os.WriteFile(core, out, 0o644); err != nil {
		t.Fatal(err)
	}
	r := reportOf(t, "core", core, "bt", "--exe", filepath.Join(dir, "barrier-stock"), "--search-path", filepath.Dir(lib))
	want := "no OpenMP state: the OMPD layout in the memory of " + lib + " differs from the values in its code (" +
		slots[1].name + " is 0x48 in memory, 0x40 in ompd_init's code): its layout is not used; the threads and their stacks are shown without it"
	if !slices.Contains(r.Warnings, want) || len(r.Backtraces) != 4 {
		t.Errorf("warnings %q, %d backtraces; want %q and the 4 threads' stacks", r.Warnings, len(r.Backtraces), want)
	}
	for _, b := range r.Backtraces {
		if b.OpenMP {
			t.Errorf("thread %d is called an OpenMP thread without OpenMP state", b.OSTID)
		}
	}
}

// recoverStock recovers what OMPD needs from the stripped runtime lib; the
// image stays open until the test ends.
func recoverStock(t *testing.T, lib string) (*recovery.Knowledge, *elf.Image) {
	t.Helper()
	im, err := elf.Open(lib)
	if err != nil {
		t.Fatalf("%v (run scripts/setup.sh)", err)
	}
	t.Cleanup(func() { im.Close() })
	k, err := recovery.Recover(im)
	if err != nil {
		t.Fatal(err)
	}
	return k, im
}
