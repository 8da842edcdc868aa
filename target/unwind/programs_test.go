package unwind

import (
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/target/ptrace"
)

// buildC compiles testdata/NAME.c with gcc and flags into a temporary
// directory and returns the program's path.
func buildC(t *testing.T, name string, flags ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	args := append(append([]string{"-Wall", "-pthread"}, flags...), "-o", out, filepath.Join("testdata", name+".c"))
	cmd := exec.Command("gcc", args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compiling %s.c: %v\n%s", name, err, b)
	}
	return out
}

// noCFIFlags build code without call frame information but with frame
// pointers.
var noCFIFlags = []string{"-O0", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables", "-fno-omit-frame-pointer"}

// TestFramePointerFallback unwinds testdata/nocfi.c, whose own functions
// have no CFI: live, from a gcore core and from a kernel core, each
// compared with gdb; the program's frames must be found through the frame
// pointer, including a thread whose innermost frame has no CFI.
func TestFramePointerFallback(t *testing.T) {
	exe := buildC(t, "nocfi", noCFIFlags...)
	opts := fixture.StartOptions{Exe: exe}
	p := fixture.Start(t, "nocfi", opts)
	mainTID, spinner := p.Ready.Int(t, "main"), p.Ready.Int(t, "spinner")
	fp, cfi := MethodFramePointer, MethodCFI
	check := func(t *testing.T, what string, stacks map[int]ourStack, sleeping bool) {
		t.Helper()
		m := stacks[mainTID]
		// level3 is the caller of libc's nanosleep, found by CFI; its
		// callers are found by its rbp chain, and main's caller (in
		// libc, which has CFI again) by main's.
		first := []string{"level3", "level2", "level1", "main", "__libc_start_call_main"}
		hows := []Method{cfi, fp, fp, fp, fp}
		if !sleeping {
			hows[0] = cfi // the caller of abort
		}
		wantRun(t, what+" main thread", m, first, hows)
		if n := len(m.frames); n == 0 || m.names[n-1] != "_start" {
			t.Errorf("%s: main thread does not end in _start:\n%s", what, m)
		}
		s := stacks[spinner]
		if len(s.frames) == 0 || s.names[0] != "spin" {
			t.Fatalf("%s: spinner thread is not in spin():\n%s", what, s)
		}
		wantRun(t, what+" spinner", s, []string{"spin", "spin_outer", "spinner_main", "start_thread", "clone3"},
			[]Method{MethodRegisters, fp, fp, fp, cfi})
	}
	t.Run("live", func(t *testing.T) { check(t, "live", liveVsGDB(t, p), true) })
	t.Run("gcore", func(t *testing.T) { check(t, "gcore", gcoreVsGDB(t, p, exe), true) })
	t.Run("kernel", func(t *testing.T) {
		stacks, crash := kernelVsGDB(t, "nocfi", opts, exe)
		s := stacks[crash]
		if !slices.Contains(s.names, "abort") {
			t.Errorf("the aborting thread does not show abort:\n%s", s)
		}
		wantRun(t, "kernel core aborting thread", s, []string{"level3", "level2", "level1", "main"}, []Method{cfi, fp, fp, fp})
	})
}

// TestSignalFrame unwinds testdata/sigframe.c, whose main thread sleeps (or
// aborts) in a signal handler running on an alternate signal stack: the
// walk must cross the sigreturn trampoline into the interrupted function,
// with its exact pc, and on to main. Live, gcore and kernel core, each
// compared with gdb.
func TestSignalFrame(t *testing.T) {
	exe := buildC(t, "sigframe", "-O0", "-g")
	opts := fixture.StartOptions{Exe: exe}
	p := fixture.Start(t, "sigframe", opts)
	mainTID := p.Ready.Int(t, "main")
	check := func(t *testing.T, what string, s ourStack) {
		t.Helper()
		wantRun(t, what, s, []string{"in_handler", "handler", sigtrampName, "interrupted", "main"},
			[]Method{MethodCFI, MethodCFI, MethodCFI, MethodSignal, MethodCFI})
		i := slices.Index(s.names, sigtrampName)
		if i < 0 || i+1 >= len(s.frames) {
			return
		}
		tramp, intr := s.frames[i], s.frames[i+1]
		if !tramp.Trampoline || !intr.ExactPC() || intr.LookupPC() != intr.PC {
			t.Errorf("%s: trampoline %+v, interrupted %+v", what, tramp, intr)
		}
		// The handler ran on the alternate stack, the interrupted
		// function on the thread's stack: the trampoline's CFA is the
		// interrupted rsp.
		if tramp.CFA != intr.SP {
			t.Errorf("%s: trampoline CFA %#x, interrupted rsp %#x", what, tramp.CFA, intr.SP)
		}
	}
	t.Run("live", func(t *testing.T) { check(t, "live", liveVsGDB(t, p)[mainTID]) })
	t.Run("gcore", func(t *testing.T) { check(t, "gcore", gcoreVsGDB(t, p, exe)[mainTID]) })
	t.Run("kernel", func(t *testing.T) {
		stacks, crash := kernelVsGDB(t, "sigframe", opts, exe)
		s := stacks[crash]
		if !slices.Contains(s.names, "abort") {
			t.Errorf("the aborting thread does not show abort:\n%s", s)
		}
		check(t, "kernel core", s)
	})
}

// vdsoTries bounds how often TestVDSO stops its program to find it inside
// the vDSO.
const vdsoTries = 200

// TestVDSO stops testdata/vdso.c until its thread is inside the vDSO
// (clock_gettime), which is mapped without a file and so is no module:
// the walk must read the vDSO's ELF image and CFI from memory, and match
// gdb.
func TestVDSO(t *testing.T) {
	exe := buildC(t, "vdso", "-O0", "-g")
	p := fixture.Start(t, "vdso", fixture.StartOptions{Exe: exe})
	for try := 0; try < vdsoTries; try++ {
		// Look while the process is held stopped; when the thread is
		// in the vDSO, keep it stopped for liveVsGDB.
		jobStop(t, p)
		tg, err := ptrace.Attach(p.PID, ptrace.Options{})
		if err != nil {
			t.Fatalf("Attach: %v", err)
		}
		frames, _ := New(tg).Unwind(tg.Threads()[0])
		found := frames[0].Module == nil && frames[0].mem != nil
		if err := tg.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if !found {
			continueProcess(t, p)
			continue
		}
		stacks := liveVsGDB(t, p)
		s := stacks[p.PID]
		if s.frames[0].Module != nil {
			t.Fatalf("innermost frame is in %s, want the vDSO:\n%s", s.frames[0].Module.Name, s)
		}
		wantRun(t, "vdso", s, []string{"poll_clock", "main"}, []Method{MethodCFI, MethodCFI})
		return
	}
	t.Skipf("the thread was never stopped inside the vDSO in %d tries", vdsoTries)
}
