package unwind

import (
	"fmt"

	"github.com/go-delve/delve/pkg/dwarf/regnum"

	"github.com/ompd-inspect/ompd-inspect/target"
)

// maxFPFrame bounds the distance between a frame's rsp and its rbp for the
// frame pointer to be believed.
const maxFPFrame = 64 << 20

// Instruction bytes of a standard prologue.
var (
	endbr64 = []byte{0xf3, 0x0f, 0x1e, 0xfa}
	pushRBP = byte(0x55)
)

const (
	opRet    = 0xc3
	opRepRet = 0xf3 // f3 c3: rep ret
)

// fpCaller finds the caller of f without call frame information: from the
// saved frame pointer chain, or, for an exact pc at a function's entry,
// right after its push %rbp, or at a return instruction, from rsp.
func (u *Unwinder) fpCaller(f *Frame) (Frame, Stop, bool) {
	sp := f.SP
	if f.ExactPC() {
		switch u.pushed(f) {
		case 0: // the return address is at rsp
			return u.fpFrom(f, sp, 0, false)
		case 1: // rbp pushed: rsp -> saved rbp, return address
			return u.fpFrom(f, sp+8, sp, true)
		}
	}
	bp, ok := f.regs.get(regnum.AMD64_Rbp)
	switch {
	case !ok:
		return Frame{}, Stop{Reason: ReasonNoUnwindInfo, Detail: fmt.Sprintf("no CFI for pc %#x%s and rbp is unknown", f.LookupPC(), f.where())}, false
	case bp%8 != 0 || bp < sp || bp-sp > maxFPFrame:
		return Frame{}, Stop{Reason: ReasonNoUnwindInfo, Detail: fmt.Sprintf("no CFI for pc %#x%s and rbp %#x is not a frame pointer (rsp %#x)", f.LookupPC(), f.where(), bp, sp)}, false
	}
	return u.fpFrom(f, bp+8, bp, true)
}

// fpFrom builds the caller of f whose return address is at raAddr and,
// when haveBP, whose rbp was saved at bpAddr. The caller's rsp (and f's
// CFA) is raAddr+8.
func (u *Unwinder) fpFrom(f *Frame, raAddr, bpAddr uint64, haveBP bool) (Frame, Stop, bool) {
	ra, err := target.ReadUint64(u.t, raAddr)
	if err != nil {
		return Frame{}, Stop{Reason: ReasonUnreadable, Addr: raAddr, Detail: fmt.Sprintf("reading the return address at %#x (frame pointer)", raAddr), Err: err}, false
	}
	caller := Frame{How: MethodFramePointer, regs: f.regs}
	if haveBP {
		bp, err := target.ReadUint64(u.t, bpAddr)
		if err != nil {
			return Frame{}, Stop{Reason: ReasonUnreadable, Addr: bpAddr, Detail: fmt.Sprintf("reading the saved rbp at %#x", bpAddr), Err: err}, false
		}
		caller.regs.set(regnum.AMD64_Rbp, bp)
	}
	f.CFA = raAddr + 8
	caller.regs.set(regnum.AMD64_Rsp, raAddr+8)
	caller.regs.set(regnum.AMD64_Rip, ra)
	return caller, Stop{}, true
}

// pushed returns how many words f's function has pushed when its exact pc
// is in the prologue or at a return: 0 at the entry (after an endbr64) or
// at a ret, 1 right after push %rbp, and -1 otherwise (unknown, or the
// frame pointer is set up).
func (u *Unwinder) pushed(f *Frame) int {
	var b [2]byte
	if u.t.ReadMemory(f.PC, b[:]) == nil && (b[0] == opRet || (b[0] == opRepRet && b[1] == opRet)) {
		return 0
	}
	m := f.Module
	if m == nil || m.Image == nil || f.PC < m.Bias {
		return -1
	}
	sym, ok := m.Image.SymbolAt(f.PC - m.Bias)
	if !ok {
		return -1
	}
	start := sym.Value + m.Bias
	if f.PC < start || f.PC-start > 16 {
		return -1
	}
	var code [16]byte
	if u.t.ReadMemory(start, code[:]) != nil {
		return -1
	}
	off := uint64(0)
	if string(code[:4]) == string(endbr64) {
		off = 4
	}
	switch {
	case f.PC <= start+off:
		return 0
	case code[off] == pushRBP && f.PC == start+off+1:
		return 1
	}
	return -1
}

// where names f's module for messages.
func (f *Frame) where() string {
	if f.Module == nil {
		return ""
	}
	return " in " + f.Module.Name
}
