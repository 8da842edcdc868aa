package unwind

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/go-delve/delve/pkg/dwarf/regnum"

	"github.com/ompd-inspect/ompd-inspect/target"
)

// restoreRT is the code of the x86-64 sigreturn trampoline that glibc and
// musl pass to the kernel as sa_restorer (__restore_rt), the return
// address of every signal handler: mov $15,%rax (rt_sigreturn); syscall.
var restoreRT = []byte{0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05}

// syscallOffset is the offset of the syscall instruction in restoreRT.
const syscallOffset = 7

// The layout of the x86-64 ucontext_t: uc_flags (8 bytes), uc_link (8),
// uc_stack (24), then uc_mcontext, whose gregs come first.
const (
	ucGregsOffset = 40
	// The gregs this package reads: REG_R8 ... REG_RIP.
	numGregs = 17
)

// gregDWARF maps the gregs indices 0..16 (REG_R8 ... REG_R15, REG_RDI,
// REG_RSI, REG_RBP, REG_RBX, REG_RDX, REG_RAX, REG_RCX, REG_RSP, REG_RIP)
// to DWARF register numbers.
var gregDWARF = [numGregs]uint64{
	regnum.AMD64_R8, regnum.AMD64_R9, regnum.AMD64_R10, regnum.AMD64_R11,
	regnum.AMD64_R12, regnum.AMD64_R13, regnum.AMD64_R14, regnum.AMD64_R15,
	regnum.AMD64_Rdi, regnum.AMD64_Rsi, regnum.AMD64_Rbp, regnum.AMD64_Rbx,
	regnum.AMD64_Rdx, regnum.AMD64_Rax, regnum.AMD64_Rcx, regnum.AMD64_Rsp,
	regnum.AMD64_Rip,
}

// isTrampoline reports whether f's pc is in a sigreturn trampoline: at its
// start (a handler's return address), or, for an exact pc, at its syscall
// instruction. The code is recognized by its bytes, which needs no
// symbols and no CFI.
func (u *Unwinder) isTrampoline(f *Frame) bool {
	if is, known := u.trampolineInFile(f); known {
		return is
	}
	key := trampKey{f.PC, f.ExactPC()}
	u.mu.Lock()
	is, ok := u.tramps[key]
	u.mu.Unlock()
	if ok {
		return is
	}
	is = u.readTrampoline(f)
	u.mu.Lock()
	if len(u.tramps) >= maxRows {
		clear(u.tramps)
	}
	u.tramps[key] = is
	u.mu.Unlock()
	return is
}

// trampolineInFile answers isTrampoline, without reading, for a pc in a
// module's read-only code whose file was scanned for trampolines
// (trampolinesOf); known is false for any other pc.
func (u *Unwinder) trampolineInFile(f *Frame) (is, known bool) {
	if !target.CodeFromFiles(u.t) {
		return false, false // a core: its dumped code comes first
	}
	m := u.moduleAt(f.PC)
	if m == nil || m.Image == nil || f.PC < m.Bias {
		return false, false
	}
	pc := f.PC - m.Bias
	s := trampolinesOf(m.Image)
	if !s.covers(pc) {
		return false, false
	}
	return s.has(pc) || f.ExactPC() && pc >= syscallOffset && s.has(pc-syscallOffset), true
}

// trampKey caches isTrampoline: the code at a pc does not change during a
// stop.
type trampKey struct {
	pc    uint64
	exact bool
}

func (u *Unwinder) readTrampoline(f *Frame) bool {
	offs := []uint64{0}
	if f.ExactPC() {
		offs = append(offs, syscallOffset)
	}
	var code [9]byte
	for _, off := range offs {
		if f.PC < off {
			continue
		}
		if err := target.ReadCode(u.t, f.PC-off, code[:]); err != nil {
			continue
		}
		if bytes.Equal(code[:], restoreRT) {
			return true
		}
	}
	return false
}

// signalCaller returns the frame a signal interrupted, given the
// trampoline frame f: at the trampoline rsp points at the ucontext_t the
// kernel saved, whose registers are the interrupted frame's. The
// trampoline's CFA is the interrupted rsp, as glibc's CFI for __restore_rt
// says.
func (u *Unwinder) signalCaller(f *Frame) (Frame, Stop, bool) {
	addr := f.SP + ucGregsOffset
	var buf [numGregs * 8]byte
	if err := u.t.ReadMemory(addr, buf[:]); err != nil {
		return Frame{}, Stop{Reason: ReasonUnreadable, Addr: addr,
			Detail: fmt.Sprintf("reading the registers saved in the signal frame at %#x", f.SP), Err: err}, false
	}
	caller := Frame{How: MethodSignal}
	for i, n := range gregDWARF {
		caller.regs.set(n, binary.LittleEndian.Uint64(buf[i*8:]))
	}
	f.CFA = caller.regs.v[regnum.AMD64_Rsp]
	return caller, Stop{}, true
}
