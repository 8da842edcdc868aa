package unwind

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-delve/delve/pkg/dwarf/regnum"

	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// Addresses of the synthetic target: libcfi.so (testdata/cfi.S) loaded
// at libBias, and one stack region.
const (
	libBias    = 0x7f0000000000
	libSize    = 0x5000
	stackBase  = 0x7ffd00000000
	stackBytes = 0x10000
)

// fakeTarget is a target whose memory is a stack region and, inside its
// modules, the modules' files.
type fakeTarget struct {
	mods  []*target.Module
	stack []byte
}

func (f *fakeTarget) PID() int                  { return 1 }
func (f *fakeTarget) Threads() []target.Thread  { return nil }
func (f *fakeTarget) Modules() []*target.Module { return f.mods }
func (f *fakeTarget) Warnings() []string        { return nil }
func (f *fakeTarget) Close() error              { return nil }

func (f *fakeTarget) ReadMemory(addr uint64, buf []byte) error {
	n := uint64(len(buf))
	for _, m := range f.mods {
		if m.Contains(addr) && m.Image != nil {
			if _, err := m.Image.ReadVaddr(addr-m.Bias, buf); err != nil {
				return fmt.Errorf("%#x: %w", addr, target.ErrUnmapped)
			}
			return nil
		}
	}
	if addr >= stackBase && addr+n >= addr && addr+n <= stackBase+uint64(len(f.stack)) {
		copy(buf, f.stack[addr-stackBase:])
		return nil
	}
	return fmt.Errorf("reading %d bytes at %#x: %w", n, addr, target.ErrUnmapped)
}

// put stores v at stack address addr.
func (f *fakeTarget) put(addr, v uint64) {
	binary.LittleEndian.PutUint64(f.stack[addr-stackBase:], v)
}

var (
	libOnce sync.Once
	libPath string
	libErr  error
)

// cfiLib builds testdata/cfi.S once per test binary.
func cfiLib(t *testing.T) string {
	t.Helper()
	libOnce.Do(func() {
		dir, err := makeTempDir()
		if err != nil {
			libErr = err
			return
		}
		libPath = filepath.Join(dir, "libcfi.so")
		out, err := exec.Command("gcc", "-shared", "-nostdlib", "-o", libPath, filepath.Join("testdata", "cfi.S")).CombinedOutput()
		if err != nil {
			libErr = fmt.Errorf("assembling cfi.S: %v\n%s", err, out)
		}
	})
	if libErr != nil {
		t.Fatal(libErr)
	}
	return libPath
}

var (
	libImgOnce sync.Once
	libImg     *elf.Image
	libImgErr  error
)

// newFake returns a synthetic target with libcfi.so mapped and an empty
// stack. The image is opened once and shared (it is never closed).
func newFake(t *testing.T) *fakeTarget {
	t.Helper()
	path := cfiLib(t)
	libImgOnce.Do(func() { libImg, libImgErr = elf.Open(path) })
	if libImgErr != nil {
		t.Fatal(libImgErr)
	}
	img := libImg
	mod := &target.Module{Name: "libcfi.so", File: img.Path, Start: libBias, End: libBias + libSize, Bias: libBias, Image: img}
	return &fakeTarget{mods: []*target.Module{mod}, stack: make([]byte, stackBytes)}
}

// sym returns the runtime address of a symbol of libcfi.so.
func (f *fakeTarget) sym(t *testing.T, name string) uint64 {
	t.Helper()
	s, ok := f.mods[0].Image.Symbol(name)
	if !ok {
		t.Fatalf("libcfi.so has no symbol %s", name)
	}
	return s.Value + libBias
}

// frameWant is what a test expects of one frame.
type frameWant struct {
	pc, sp, cfa uint64
	how         Method
	tramp       bool
}

func (w frameWant) String() string {
	return fmt.Sprintf("{pc %#x sp %#x cfa %#x %v trampoline %v}", w.pc, w.sp, w.cfa, w.how, w.tramp)
}

func checkFrames(t *testing.T, frames []Frame, want []frameWant) {
	t.Helper()
	var got []frameWant
	for _, f := range frames {
		got = append(got, frameWant{f.PC, f.SP, f.CFA, f.How, f.Trampoline})
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("frames\n got %v\nwant %v", got, want)
	}
}

func checkStop(t *testing.T, stop Stop, reason Reason, addr uint64, text string) {
	t.Helper()
	if stop.Reason != reason || stop.Addr != addr || stop.String() != text {
		t.Errorf("stop %v addr %#x %q,\nwant %v addr %#x %q", stop.Reason, stop.Addr, stop.String(), reason, addr, text)
	}
}

func wantReg(t *testing.T, f *Frame, n int, want uint64, known bool) {
	t.Helper()
	v, ok := f.Reg(n)
	if ok != known || (known && v != want) {
		t.Errorf("frame pc %#x: register %d = %#x, %v; want %#x, %v", f.PC, n, v, ok, want, known)
	}
}

// TestCFIRules places a frame where every kind of rule holds (see
// fn_expr in testdata/cfi.S) and checks each recovered register.
func TestCFIRules(t *testing.T) {
	f := newFake(t)
	sp := uint64(stackBase + 0x1000)
	outer := f.sym(t, "fn_outer_ret")
	f.put(sp+8, outer) // rip at CFA-8, CFA = rsp+16
	f.put(sp, 0x1313)  // r13 at CFA-16
	regs := target.Registers{Rip: f.sym(t, "fn_expr_pc"), Rsp: sp, Rbp: 0xbbbb, Rbx: 0xb, R12: 0x1212, R13: 0xd, R14: 0x1414, R15: 0x1515, Rax: 0xa}
	frames, stop := New(f).UnwindRegisters(regs)
	checkFrames(t, frames, []frameWant{
		{regs.Rip, sp, sp + 16, MethodRegisters, false},
		{outer, sp + 16, sp + 24, MethodCFI, false},
	})
	checkStop(t, stop, ReasonOutermost, 0, fmt.Sprintf(
		"outermost frame: the CFI at pc %#x (libcfi.so+%#x) leaves the return address undefined", outer-1, outer-1-libBias))
	if len(frames) != 2 {
		return
	}
	c := &frames[1]
	wantReg(t, c, regnum.AMD64_Rbx, sp+16+32, true) // val_expression
	wantReg(t, c, regnum.AMD64_Rbp, 0x1212, true)   // register r12
	wantReg(t, c, regnum.AMD64_R13, 0x1313, true)   // offset
	// delve reports DW_CFA_restore of a register without a CIE rule as
	// "undefined", which DW_CFA_undefined also gives; restore is by far
	// the more common (glibc and libomp use it, never undefined for
	// anything but the return address), so the register keeps its value.
	wantReg(t, c, regnum.AMD64_R14, 0x1414, true) // undefined
	wantReg(t, c, regnum.AMD64_R15, 0x1515, true) // same value
	wantReg(t, c, regnum.AMD64_R12, 0x1212, true) // no rule
	wantReg(t, c, regnum.AMD64_Rax, 0xa, true)    // no rule
	wantReg(t, c, regnum.AMD64_Rsp, sp+16, true)  // the CFA
	wantReg(t, c, regnum.AMD64_Rip, outer, true)
	if c.BP != 0x1212 || c.SP != sp+16 {
		t.Errorf("caller SP %#x BP %#x", c.SP, c.BP)
	}
	if frames[0].ExactPC() != true || c.ExactPC() || c.LookupPC() != outer-1 {
		t.Errorf("ExactPC %v %v, LookupPC %#x", frames[0].ExactPC(), c.ExactPC(), c.LookupPC())
	}
	if name, ok := c.Function(); !ok || name != "fn_outer" {
		t.Errorf("caller function %q, %v; want fn_outer", name, ok)
	}
}

// TestCFIRestore checks DW_CFA_restore of a register the CIE has no rule
// for: the caller's rbp is the callee's (delve reports "undefined").
func TestCFIRestore(t *testing.T) {
	f := newFake(t)
	sp := uint64(stackBase + 0x1000)
	f.put(sp, f.sym(t, "fn_outer_ret"))
	frames, stop := New(f).UnwindRegisters(target.Registers{Rip: f.sym(t, "fn_restore_pc"), Rsp: sp, Rbp: 0xbeef})
	if len(frames) != 2 || stop.Reason != ReasonOutermost {
		t.Fatalf("%d frames, stop %s", len(frames), stop)
	}
	wantReg(t, &frames[1], regnum.AMD64_Rbp, 0xbeef, true)
}

// TestTailCallIntoSyscall walks the stack of a thread asleep in a syscall
// in a function reached by a tail call (fn_waitcommon in testdata/cfi.S,
// the shape of glibc's futex wait under pthread_cond_wait): the innermost
// frame's rules are those at its exact pc, right after the syscall (with
// rax holding -ERESTARTSYS, as the kernel leaves it for a thread stopped
// there); the next frame is the return address of the call into the
// jumping function, looked up at pc-1 although it is the first byte of the
// next function. The jump pushed nothing, so no frame has the address after
// it (fn_waitstub_end), which gdb shows as a tail call frame it rebuilds
// from DWARF call-site information.
func TestTailCallIntoSyscall(t *testing.T) {
	f := newFake(t)
	sp := uint64(stackBase + 0x1000)
	cfa := sp + 64
	ret, outer := f.sym(t, "fn_waiter_ret"), f.sym(t, "fn_outer_ret")
	f.put(cfa-8, ret)
	f.put(cfa-16, 0xb0b0) // the caller's rbp
	f.put(cfa-24, 0xb1b1) // the caller's rbx
	f.put(cfa+8, outer)   // fn_waiter: CFA = rsp + 16
	pc := f.sym(t, "fn_waitcommon_pc")
	const eRestartSys = 512
	frames, stop := New(f).UnwindRegisters(target.Registers{Rip: pc, Rsp: sp, Rbp: 0x1, Rbx: 0x2, Rax: ^uint64(eRestartSys - 1)})
	checkFrames(t, frames, []frameWant{
		{pc, sp, cfa, MethodRegisters, false},
		{ret, cfa, cfa + 16, MethodCFI, false},
		{outer, cfa + 16, cfa + 24, MethodCFI, false},
	})
	checkStop(t, stop, ReasonOutermost, 0, fmt.Sprintf(
		"outermost frame: the CFI at pc %#x (libcfi.so+%#x) leaves the return address undefined", outer-1, outer-1-libBias))
	if len(frames) != 3 {
		return
	}
	wantReg(t, &frames[1], regnum.AMD64_Rbp, 0xb0b0, true)
	wantReg(t, &frames[1], regnum.AMD64_Rbx, 0xb1b1, true)
	for i, want := range []string{"fn_waitcommon", "fn_waiter", "fn_outer"} {
		if name, ok := frames[i].Function(); !ok || name != want {
			t.Errorf("frame %d: function %q, %v; want %s", i, name, ok, want)
		}
	}
}

// TestCFIStops checks walks that end on bad rules.
func TestCFIStops(t *testing.T) {
	t.Run("no progress", func(t *testing.T) {
		f := newFake(t)
		sp := uint64(stackBase + 0x1000)
		f.put(sp-8, f.sym(t, "fn_outer_ret"))
		pc := f.sym(t, "fn_noprogress_pc")
		frames, stop := New(f).UnwindRegisters(target.Registers{Rip: pc, Rsp: sp})
		checkFrames(t, frames, []frameWant{{pc, sp, sp, MethodRegisters, false}})
		checkStop(t, stop, ReasonNoProgress, sp, fmt.Sprintf(
			"stack did not grow toward the caller: caller rsp %#x is not above rsp %#x (corrupt stack or a loop)", sp, sp))
	})
	t.Run("unknown opcode", func(t *testing.T) {
		f := newFake(t)
		pc := f.sym(t, "fn_badcfi_pc")
		_, stop := New(f).UnwindRegisters(target.Registers{Rip: pc, Rsp: stackBase + 0x1000})
		checkStop(t, stop, ReasonBadCFI, 0, fmt.Sprintf(
			"bad call frame information: pc %#x (libcfi.so+%#x): encountered an unexpected DWARF CFA opcode: 0x2d", pc, pc-libBias))
	})
	t.Run("unknown CFA register", func(t *testing.T) {
		// fn_expr saved r13 at CFA-16, which is unreadable: r13 is
		// unknown in its caller, whose CFA is based on r13.
		f := newFake(t)
		sp := uint64(stackBase - 8)
		ret := f.sym(t, "fn_cfa_r13_ret")
		f.put(sp+8, ret)
		frames, stop := New(f).UnwindRegisters(target.Registers{Rip: f.sym(t, "fn_expr_pc"), Rsp: sp, R13: 0x1313})
		if len(frames) != 2 {
			t.Fatalf("%d frames, stop %s", len(frames), stop)
		}
		wantReg(t, &frames[1], regnum.AMD64_R13, 0, false)
		checkStop(t, stop, ReasonBadCFI, 0, fmt.Sprintf(
			"bad call frame information: pc %#x (libcfi.so+%#x): the CFA is based on register 13, which is unknown", ret-1, ret-1-libBias))
	})
	t.Run("unreadable return address", func(t *testing.T) {
		f := newFake(t)
		sp := uint64(stackBase + stackBytes - 8) // rip at sp+8: past the stack
		_, stop := New(f).UnwindRegisters(target.Registers{Rip: f.sym(t, "fn_expr_pc"), Rsp: sp})
		checkStop(t, stop, ReasonUnreadable, sp+8, fmt.Sprintf(
			"memory unreadable: reading %s at %#x: reading 8 bytes at %#x: address not mapped",
			fmt.Sprintf("pc %#x (libcfi.so+%#x): the return address", f.sym(t, "fn_expr_pc"), f.sym(t, "fn_expr_pc")-libBias), sp+8, sp+8))
	})
}

// TestFramePointer checks the frame-pointer fallback in a function without
// CFI: at its entry, right after push %rbp, in its body, at its ret, and
// after an endbr64.
func TestFramePointer(t *testing.T) {
	sp := uint64(stackBase + 0x1000)
	bp := uint64(stackBase + 0x1100)
	for _, c := range []struct {
		name           string
		pc             string
		raAt, savedBP  uint64 // 0: none
		callerSP, wbp  uint64
		bpKnownCallers bool
	}{
		{"entry", "fn_fp", sp, 0, sp + 8, bp, true},
		{"pushed", "fn_fp_pushed", sp + 8, sp, sp + 16, 0x5a5a, true},
		{"body", "fn_fp_body", bp + 8, bp, bp + 16, 0x5a5a, true},
		{"ret", "fn_fp_ret", sp, 0, sp + 8, bp, true},
		{"endbr64", "fn_ibt_pc", sp, 0, sp + 8, bp, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t)
			outer := f.sym(t, "fn_outer_ret")
			f.put(c.raAt, outer)
			if c.savedBP != 0 {
				f.put(c.savedBP, 0x5a5a)
			}
			pc := f.sym(t, c.pc)
			frames, stop := New(f).UnwindRegisters(target.Registers{Rip: pc, Rsp: sp, Rbp: bp})
			checkFrames(t, frames, []frameWant{
				{pc, sp, c.callerSP, MethodRegisters, false},
				{outer, c.callerSP, c.callerSP + 8, MethodFramePointer, false},
			})
			if stop.Reason != ReasonOutermost {
				t.Errorf("stop %s", stop)
			}
			if len(frames) == 2 {
				wantReg(t, &frames[1], regnum.AMD64_Rbp, c.wbp, true)
			}
		})
	}
}

// TestFramePointerStops checks walks that end in the frame-pointer
// fallback.
func TestFramePointerStops(t *testing.T) {
	sp := uint64(stackBase + 0x1000)
	t.Run("rbp below rsp", func(t *testing.T) {
		f := newFake(t)
		pc := f.sym(t, "fn_fp_body")
		_, stop := New(f).UnwindRegisters(target.Registers{Rip: pc, Rsp: sp, Rbp: sp - 16})
		checkStop(t, stop, ReasonNoUnwindInfo, 0, fmt.Sprintf(
			"no unwind information: no CFI for pc %#x in libcfi.so and rbp %#x is not a frame pointer (rsp %#x)", pc, sp-16, sp))
	})
	t.Run("rbp loop", func(t *testing.T) {
		// [rbp] = rbp: the caller's rbp is below its rsp.
		f := newFake(t)
		bp := sp + 0x40
		ret := f.sym(t, "fn_fp_after_call")
		f.put(bp, bp)
		f.put(bp+8, ret)
		frames, stop := New(f).UnwindRegisters(target.Registers{Rip: f.sym(t, "fn_fp_body"), Rsp: sp, Rbp: bp})
		if len(frames) != 2 {
			t.Fatalf("%d frames", len(frames))
		}
		checkStop(t, stop, ReasonNoUnwindInfo, 0, fmt.Sprintf(
			"no unwind information: no CFI for pc %#x in libcfi.so and rbp %#x is not a frame pointer (rsp %#x)", ret-1, bp, bp+16))
	})
	t.Run("unreadable", func(t *testing.T) {
		f := newFake(t)
		bp := uint64(stackBase + stackBytes + 0x100)
		_, stop := New(f).UnwindRegisters(target.Registers{Rip: f.sym(t, "fn_fp_body"), Rsp: sp, Rbp: bp})
		checkStop(t, stop, ReasonUnreadable, bp+8, fmt.Sprintf(
			"memory unreadable: reading the return address at %#x (frame pointer): reading 8 bytes at %#x: address not mapped", bp+8, bp+8))
	})
	t.Run("pc zero", func(t *testing.T) {
		f := newFake(t)
		frames, stop := New(f).UnwindRegisters(target.Registers{Rip: f.sym(t, "fn_fp"), Rsp: sp})
		if len(frames) != 1 {
			t.Errorf("%d frames", len(frames))
		}
		checkStop(t, stop, ReasonPCZero, 0, "pc 0: the return address is 0")
	})
	t.Run("no module", func(t *testing.T) {
		f := newFake(t)
		frames, stop := New(f).UnwindRegisters(target.Registers{Rip: 0x1234, Rsp: sp})
		if len(frames) != 1 || frames[0].Module != nil {
			t.Errorf("%d frames", len(frames))
		}
		checkStop(t, stop, ReasonNoModule, 0x1234, "pc not in any module: pc 0x1234")
	})
	t.Run("innermost pc 0", func(t *testing.T) {
		f := newFake(t)
		_, stop := New(f).UnwindRegisters(target.Registers{Rsp: sp})
		checkStop(t, stop, ReasonPCZero, 0, "pc 0")
	})
	t.Run("limit", func(t *testing.T) {
		// A chain of 100 frame-pointer frames, walked with a limit
		// of 5.
		f := newFake(t)
		ret := f.sym(t, "fn_fp_after_call")
		bp := sp + 0x10
		for i := 0; i < 100; i++ {
			f.put(bp, bp+0x20)
			f.put(bp+8, ret)
			bp += 0x20
		}
		u := New(f)
		u.MaxFrames = 5
		frames, stop := u.UnwindRegisters(target.Registers{Rip: f.sym(t, "fn_fp_body"), Rsp: sp, Rbp: sp + 0x10})
		if len(frames) != 5 {
			t.Errorf("%d frames, want 5", len(frames))
		}
		checkStop(t, stop, ReasonLimit, 0, "frame limit reached: 5 frames (limit MaxFrames)")
	})
}

// gregs are the interrupted registers the signal frame tests save, in
// ucontext order R8 ... R15, RDI, RSI, RBP, RBX, RDX, RAX, RCX, RSP, RIP
// (RSP and RIP are set by the test).
var gregs = []uint64{0x8, 0x9, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0xd1, 0x51, 0xb9, 0xb8, 0xd8, 0xa8, 0xc8}

// TestSignalTrampoline returns from a frame into a sigreturn trampoline
// and checks that the interrupted frame gets the registers saved in the
// ucontext_t at the trampoline's rsp, its exact pc, and that it may be on
// another stack (below the handler's).
func TestSignalTrampoline(t *testing.T) {
	f := newFake(t)
	sp := uint64(stackBase + 0x8000)
	intrSP := uint64(stackBase + 0x100) // below: an alternate stack above it
	tramp := f.sym(t, "fake_restore_rt")
	intrPC := f.sym(t, "fn_outer") // exact: looked up as is, outermost
	f.put(sp, tramp)               // fn_fp_ret returns into the trampoline
	uc := sp + 8
	for i, v := range gregs {
		f.put(uc+40+uint64(i)*8, v)
	}
	f.put(uc+40+15*8, intrSP)
	f.put(uc+40+16*8, intrPC)
	pc := f.sym(t, "fn_fp_ret")
	frames, stop := New(f).UnwindRegisters(target.Registers{Rip: pc, Rsp: sp})
	checkFrames(t, frames, []frameWant{
		{pc, sp, sp + 8, MethodRegisters, false},
		{tramp, sp + 8, intrSP, MethodFramePointer, true},
		{intrPC, intrSP, intrSP + 8, MethodSignal, false},
	})
	if stop.Reason != ReasonOutermost {
		t.Errorf("stop %s", stop)
	}
	if len(frames) != 3 {
		return
	}
	if name, ok := frames[1].Function(); !ok || name != "fake_restore_rt" || !frames[1].ExactPC() {
		t.Errorf("trampoline frame: function %q %v, exact %v", name, ok, frames[1].ExactPC())
	}
	in := &frames[2]
	if !in.ExactPC() || in.LookupPC() != intrPC {
		t.Errorf("interrupted frame: exact %v lookup %#x", in.ExactPC(), in.LookupPC())
	}
	for i, n := range gregDWARF[:15] {
		wantReg(t, in, int(n), gregs[i], true)
	}
	if in.BP != 0xb9 {
		t.Errorf("interrupted BP %#x", in.BP)
	}

	// A signal frame that says it interrupted the trampoline itself.
	f3 := newFake(t)
	f3.put(sp, tramp)
	f3.put(uc+40+15*8, uc)
	f3.put(uc+40+16*8, tramp)
	frames, stop = New(f3).UnwindRegisters(target.Registers{Rip: pc, Rsp: sp})
	if len(frames) != 2 {
		t.Errorf("self-interrupting signal frame: %d frames", len(frames))
	}
	checkStop(t, stop, ReasonNoProgress, uc, fmt.Sprintf(
		"stack did not grow toward the caller: the signal frame at rsp %#x interrupted itself (corrupt stack)", uc))

	// A ucontext_t cut short by the end of the stack.
	f2 := newFake(t)
	sp2 := uint64(stackBase + stackBytes - 0x40)
	f2.put(sp2, tramp)
	_, stop = New(f2).UnwindRegisters(target.Registers{Rip: pc, Rsp: sp2})
	checkStop(t, stop, ReasonUnreadable, sp2+8+40, fmt.Sprintf(
		"memory unreadable: reading the registers saved in the signal frame at %#x: reading 136 bytes at %#x: address not mapped", sp2+8, sp2+8+40))
}

// TestUnwinderCaches unwinds the same stack twice and checks that the
// second walk computes no new rows.
func TestUnwinderCaches(t *testing.T) {
	f := newFake(t)
	sp := uint64(stackBase + 0x1000)
	f.put(sp+8, f.sym(t, "fn_outer_ret"))
	u := New(f)
	regs := target.Registers{Rip: f.sym(t, "fn_expr_pc"), Rsp: sp}
	a, _ := u.UnwindRegisters(regs)
	rows := len(u.rows)
	b, _ := u.UnwindRegisters(regs)
	if rows != 2 || len(u.rows) != rows || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("rows %d then %d, frames %v then %v", rows, len(u.rows), a, b)
	}
}

// TestConcurrentUnwind walks stacks from several goroutines with one
// Unwinder (run it with -race).
func TestConcurrentUnwind(t *testing.T) {
	f := newFake(t)
	sp := uint64(stackBase + 0x1000)
	f.put(sp+8, f.sym(t, "fn_fp_after_call"))
	bp := sp + 0x40
	f.put(bp, 0)
	f.put(bp+8, f.sym(t, "fn_outer_ret"))
	u := New(f)
	regs := target.Registers{Rip: f.sym(t, "fn_expr_pc"), Rsp: sp, R12: bp}
	want, stop := u.UnwindRegisters(regs)
	if len(want) != 3 || stop.Reason != ReasonOutermost {
		t.Fatalf("%d frames, stop %s", len(want), stop)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Go(func() {
			for range 100 {
				got, _ := New(f).UnwindRegisters(regs)
				got2, _ := u.UnwindRegisters(regs)
				if fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(got2) != fmt.Sprint(want) {
					errs <- fmt.Sprintf("%v / %v, want %v", got, got2, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// FuzzUnwind walks stacks of random contents from random registers in and
// around libcfi.so: the walk must end, within the frame limit, without
// panicking.
func FuzzUnwind(f *testing.F) {
	f.Add([]byte{}, uint64(0), uint64(0x1000), uint64(0x1100))
	f.Add([]byte{0x27, 0x10, 0, 0, 0, 0x7f}, uint64(0x21), uint64(0x1000), uint64(0x1000))
	f.Add([]byte(strings.Repeat("\x45\x10\x00\x00\x00\x7f\x00\x00", 64)), uint64(0x39), uint64(0x1000), uint64(0x1008))
	f.Fuzz(func(t *testing.T, stack []byte, pcOff, spOff, bpOff uint64) {
		ft := newFake(t)
		copy(ft.stack[0x1000:], stack)
		u := New(ft)
		u.MaxFrames = 64
		regs := target.Registers{Rip: libBias + pcOff%0x1100, Rsp: stackBase + spOff%stackBytes, Rbp: stackBase + bpOff%(stackBytes+0x100)}
		frames, stop := u.UnwindRegisters(regs)
		if len(frames) == 0 || len(frames) > 64 || stop.Reason == 0 || stop.String() == "" {
			t.Fatalf("%d frames, stop %v", len(frames), stop)
		}
		for i := range frames {
			frames[i].Function()
		}
	})
}

// makeTempDir returns the directory for files shared by the tests of one
// test binary, made and removed by TestMain.
func makeTempDir() (string, error) {
	if sharedDir == "" {
		return "", errors.New("no shared temporary directory (TestMain did not run)")
	}
	return sharedDir, nil
}
