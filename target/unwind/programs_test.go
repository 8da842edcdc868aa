package unwind

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/target"
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

// codeReads is a target that records the addresses of the reads of its
// memory.
type codeReads struct {
	target.Target
	addrs []uint64
}

func (c *codeReads) ReadMemory(addr uint64, buf []byte) error {
	c.addrs = append(c.addrs, addr)
	return c.Target.ReadMemory(addr, buf)
}

// inFileCode reports whether addr lies in a module's read-only code
// segment, and so can be read from the module's file.
func inFileCode(mods []*target.Module, addr uint64) bool {
	for _, m := range mods {
		if !m.Contains(addr) || m.Image == nil || addr < m.Bias {
			continue
		}
		for _, l := range m.Image.Loads() {
			if l.Flags&elf.PF_X != 0 && l.Flags&elf.PF_W == 0 && addr-m.Bias >= l.Vaddr && addr-m.Bias < l.Vaddr+l.Filesz {
				return true
			}
		}
	}
	return false
}

// TestCodeFromFiles unwinds testdata/sigframe.c's main thread, whose walk
// crosses glibc's sigreturn trampoline, and reads the call before each of
// its return addresses (CallTarget): the code both read lies in the
// modules' read-only code segments and must come from their files, not
// from the process (a read of a stopped process's memory costs several
// times a read of a file). The trampoline must still be found, by its
// bytes in libc's file, and the calls' targets be what gdb names.
func TestCodeFromFiles(t *testing.T) {
	exe := buildC(t, "sigframe", "-O0", "-g")
	p := fixture.Start(t, "sigframe", fixture.StartOptions{Exe: exe})
	mainTID := p.Ready.Int(t, "main")
	jobStop(t, p)
	pt, err := ptrace.Attach(p.PID, ptrace.Options{})
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	defer pt.Close()
	rec := &codeReads{Target: pt}
	var th target.Thread
	for _, x := range pt.Threads() {
		if x.TID == mainTID {
			th = x
		}
	}
	frames, stop := New(rec).Unwind(th)
	s := newOurStack(t, frames, stop)
	wantRun(t, "live", s, []string{"in_handler", "handler", sigtrampName, "interrupted", "main"},
		[]Method{MethodCFI, MethodCFI, MethodCFI, MethodSignal, MethodCFI})
	// Each call the program made (handler's to in_handler, in_handler's
	// to nanosleep through its PLT stub, main's to interrupted, _start's
	// through libc's GOT slot) leads to the function the frame inside it
	// runs.
	mods := pt.Modules()
	checked := 0
	for j := 1; j < len(frames); j++ {
		f, inner := frames[j], frames[j-1]
		if f.Module == nil || f.Module.Name != exe || f.ExactPC() || inner.Module == nil || inner.Module.Image == nil {
			continue
		}
		fn, ok := inner.Module.Image.SymbolAt(inner.PC - inner.Module.Bias)
		if !ok {
			t.Fatalf("no function at %s's pc %#x", s.names[j-1], inner.PC)
		}
		got, ok := CallTarget(rec, f.PC)
		if want := fn.Value + inner.Module.Bias; !ok || got != want {
			t.Errorf("CallTarget(%s's return address %#x) = %#x, %v; want %#x (%s)", s.names[j], f.PC, got, ok, want, s.names[j-1])
		}
		checked++
	}
	if checked != 4 {
		t.Errorf("%d calls of the program checked, want 4 (handler, in_handler, main, _start):\n%s", checked, s)
	}
	for _, a := range rec.addrs {
		if inFileCode(mods, a) {
			t.Errorf("read %#x of the process's memory: code its module's file holds", a)
		}
	}
}

// maxVDSOSteps bounds the instructions TestVDSO single-steps its program
// to reach the vDSO (one turn of its loop takes a few dozen).
const maxVDSOSteps = 100000

// TestVDSO stops testdata/vdso.c with its thread inside the vDSO
// (clock_gettime), which is mapped without a file and so is no module:
// the walk must read the vDSO's ELF image and CFI from memory, and match
// gdb. The thread is single-stepped into the vDSO, so the test never
// depends on where a stop happens to land.
func TestVDSO(t *testing.T) {
	exe := buildC(t, "vdso", "-O0", "-g")
	p := fixture.Start(t, "vdso", fixture.StartOptions{Exe: exe})
	jobStop(t, p)
	stepIntoVDSO(t, p.PID)
	stacks := liveVsGDB(t, p)
	s := stacks[p.PID]
	if s.frames[0].Module != nil || s.frames[0].mem == nil {
		t.Fatalf("innermost frame is not in the vDSO read from memory:\n%s", s)
	}
	wantRun(t, "vdso", s, []string{"poll_clock", "main"}, []Method{MethodCFI, MethodCFI})
}

// stepIntoVDSO single-steps the job-stopped, single-threaded process pid
// until its pc is inside the vDSO, and leaves it stopped there (detached
// with SIGSTOP: a group stop, as jobStop left it).
func stepIntoVDSO(t *testing.T, pid int) {
	t.Helper()
	lo, hi := vdsoRange(t, pid)
	errc := make(chan error, 1)
	go func() {
		// Every ptrace request must come from the tracing thread; the
		// locked thread ends with the goroutine.
		runtime.LockOSThread()
		errc <- func() error {
			if err := unix.PtraceAttach(pid); err != nil {
				return fmt.Errorf("PTRACE_ATTACH: %w", err)
			}
			var ws unix.WaitStatus
			if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil || !ws.Stopped() {
				return fmt.Errorf("waiting for the attach stop: %v (status %v)", err, ws)
			}
			var regs unix.PtraceRegs
			for step := 0; ; step++ {
				if err := unix.PtraceGetRegs(pid, &regs); err != nil {
					return fmt.Errorf("PTRACE_GETREGS: %w", err)
				}
				if regs.Rip >= lo && regs.Rip < hi {
					break
				}
				if step == maxVDSOSteps {
					return fmt.Errorf("not in the vDSO [%#x, %#x) after %d instructions (pc %#x)", lo, hi, step, regs.Rip)
				}
				if err := unix.PtraceSingleStep(pid); err != nil {
					return fmt.Errorf("PTRACE_SINGLESTEP: %w", err)
				}
				if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil || !ws.Stopped() {
					return fmt.Errorf("waiting for a step: %v (status %v)", err, ws)
				}
			}
			if _, _, e := unix.RawSyscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(pid), 0, uintptr(unix.SIGSTOP), 0, 0); e != 0 {
				return fmt.Errorf("PTRACE_DETACH: %w", e)
			}
			return nil
		}()
	}()
	if err := <-errc; err != nil {
		t.Fatalf("stepping process %d into the vDSO: %v", pid, err)
	}
	// The detach's SIGSTOP: wait until the thread is in its group stop.
	for range stopPollTries {
		if st, err := taskState(pid, pid); err == nil && st == 'T' {
			return
		}
		time.Sleep(stopPollInterval)
	}
	t.Fatalf("process %d did not stop in the vDSO", pid)
}

// vdsoRange returns the address range of the process's [vdso] mapping.
func vdsoRange(t *testing.T, pid int) (lo, hi uint64) {
	t.Helper()
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(maps), "\n") {
		if !strings.HasSuffix(line, "[vdso]") {
			continue
		}
		r, _, _ := strings.Cut(line, " ")
		a, b, _ := strings.Cut(r, "-")
		lo, _ = strconv.ParseUint(a, 16, 64)
		hi, _ = strconv.ParseUint(b, 16, 64)
		return lo, hi
	}
	t.Fatalf("process %d has no [vdso] mapping", pid)
	return 0, 0
}
