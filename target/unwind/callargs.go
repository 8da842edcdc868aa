package unwind

import (
	"encoding/binary"

	"github.com/go-delve/delve/pkg/dwarf/regnum"
	"golang.org/x/arch/x86/x86asm"

	"github.com/ompd-inspect/ompd-inspect/internal/x86reg"
	"github.com/ompd-inspect/ompd-inspect/target"
)

// NumArgRegs is the number of integer arguments the System V x86-64 ABI
// passes in registers: rdi, rsi, rdx, rcx, r8, r9.
const NumArgRegs = 6

// maxCallerCode bounds how much of a caller's code CallArgs decodes (from
// its function's start to the call).
const maxCallerCode = 64 << 10

// maxArgDepth bounds how many register-to-register moves CallArgs follows
// back from one argument.
const maxArgDepth = 8

// Args are the integer arguments a call passed in registers, as far as
// the caller's code shows them.
type Args struct {
	// Value holds the arguments in System V order (rdi, rsi, rdx, rcx,
	// r8, r9).
	Value [NumArgRegs]uint64
	// Known says which of them were recovered.
	Known [NumArgRegs]bool
}

// argRegs are the argument registers in order, as x86asm names them.
var argRegs = [NumArgRegs]x86asm.Reg{x86asm.RDI, x86asm.RSI, x86asm.RDX, x86asm.RCX, x86asm.R8, x86asm.R9}

// CallArgs recovers the integer arguments that the call before frame f's
// return address passed in registers. f must be a caller frame (not the
// innermost one, nor one interrupted by a signal) whose module maps its
// code.
//
// The argument registers are dead by the time the callee runs, so they
// are rebuilt from the caller's code: it is decoded from the start of its
// function (its call frame information's range, else its symbol) to the
// call, and each argument register is followed back through the
// straight-line code before the call to the instruction that set it: an
// immediate, a lea (its address computed from registers known at the
// call: rip, rsp, and the callee-saved registers the unwinder recovered),
// a load from such an address (memory is read now: the caller is
// suspended in the call, so its own stack slots still hold what it
// loaded) or a move from another register followed the same way. An
// argument is not known when a branch could enter the code between that
// instruction and the call, when a call or an instruction this does not
// model may have changed a register it depends on, or when the function
// has an indirect jump (whose targets are not known). The result is what
// the code proves, not a guess; callers should still check that a value
// makes sense for what they look up with it.
func CallArgs(t target.Target, f *Frame) Args {
	if f.Module == nil || f.Module.Image == nil || f.PC < f.Module.Bias {
		return Args{}
	}
	start, end, ok := funcBounds(f)
	if !ok {
		return Args{}
	}
	return callArgsFrom(t, f, start, end)
}

// callArgsFrom is CallArgs for a caller whose function spans [start,
// end) (end 0 when not known).
func callArgsFrom(t target.Target, f *Frame, start, end uint64) Args {
	var out Args
	w, ok := callWindow(t, f, start, end)
	if !ok {
		return out
	}
	for i, r := range argRegs {
		if v, ok := w.valueAt(r, len(w.insts)-1, 0); ok {
			out.Value[i], out.Known[i] = v, true
		}
	}
	return out
}

// decoded is one instruction of the caller's code.
type decoded struct {
	addr uint64
	inst x86asm.Inst
}

// window is the straight-line code that ends with the call: insts[0] is
// the first instruction no branch can enter after (the function's start or
// a branch target), the last is the call.
type window struct {
	t     target.Target
	f     *Frame
	insts []decoded
}

// callWindow decodes f's function up to its call and keeps the
// straight-line code before the call.
func callWindow(t target.Target, f *Frame, start, end uint64) (*window, bool) {
	if f.ExactPC() {
		return nil, false
	}
	ret := f.PC
	if start >= ret || ret-start > maxCallerCode {
		return nil, false
	}
	code := make([]byte, ret-start)
	if err := t.ReadMemory(start, code); err != nil {
		return nil, false
	}
	var insts []decoded
	targets := map[uint64]bool{}
	for off := 0; off < len(code); {
		in, err := x86asm.Decode(code[off:], 64)
		if err != nil || in.Len == 0 {
			return nil, false
		}
		addr := start + uint64(off)
		next := addr + uint64(in.Len)
		insts = append(insts, decoded{addr, in})
		if isJump(in.Op) {
			if rel, direct := in.Args[0].(x86asm.Rel); direct {
				targets[next+uint64(int64(rel))] = true
			} else if !jumpTableTargets(t, insts, start, end, targets) {
				return nil, false // an indirect jump whose targets are unknown
			}
		}
		off += in.Len
	}
	if len(insts) == 0 || insts[len(insts)-1].inst.Op != x86asm.CALL {
		return nil, false
	}
	// Keep the code from the last branch target before the call: code
	// before it may not have run on the way to the call.
	first := 0
	for i := len(insts) - 1; i > 0; i-- {
		if targets[insts[i].addr] {
			first = i
			break
		}
	}
	return &window{t: t, f: f, insts: insts[first:]}, true
}

// funcBounds is the span of the function of f's return address; end is
// 0 when not known.
func funcBounds(f *Frame) (start, end uint64, ok bool) {
	pc := f.LookupPC() - f.Module.Bias
	if fde := f.Module.Image.FDEForPC(pc); fde != nil && fde.Begin() <= pc && pc < fde.End() {
		return fde.Begin() + f.Module.Bias, fde.End() + f.Module.Bias, true
	}
	if s, ok := f.Module.Image.SymbolAt(pc); ok && s.Value <= pc {
		if s.Size != 0 {
			end = s.Value + s.Size + f.Module.Bias
		}
		return s.Value + f.Module.Bias, end, true
	}
	return 0, 0, false
}

// maxTableEntries bounds how many entries of a jump table are read.
const maxTableEntries = 1024

// jumpTableTargets adds to targets the destinations of the indirect jump
// that ends insts, when it is the switch dispatch gcc and clang emit for
// position-independent code: lea TABLE(%rip),%rB; movslq (%rB,%rI,4),%rJ;
// add %rB,%rJ; jmp *%rJ, whose table holds 32-bit offsets from its own
// start. The number of cases is not known here, so entries are read until
// one leads outside the function [start, end): every real entry is read,
// and an entry read past the table's end adds a target that is not one,
// which only makes CallArgs answer less. It reports false when the jump
// is no such dispatch (or the function's end is not known).
func jumpTableTargets(t target.Target, insts []decoded, start, end uint64, targets map[uint64]bool) bool {
	if end <= start {
		return false
	}
	n := len(insts)
	jmp := insts[n-1].inst
	r, ok := jmp.Args[0].(x86asm.Reg)
	if !ok || n < 4 {
		return false
	}
	add, load, lea := insts[n-2].inst, insts[n-3].inst, insts[n-4].inst
	if add.Op != x86asm.ADD || add.Args[0] != r || load.Op != x86asm.MOVSXD || load.Args[0] != r || lea.Op != x86asm.LEA {
		return false
	}
	base, ok := lea.Args[0].(x86asm.Reg)
	m, isMem := load.Args[1].(x86asm.Mem)
	tm, isTable := lea.Args[1].(x86asm.Mem)
	if !ok || !isMem || !isTable || add.Args[1] != base || m.Base != base || m.Scale != 4 || m.Disp != 0 || tm.Base != x86asm.RIP {
		return false
	}
	table := insts[n-4].addr + uint64(lea.Len) + uint64(tm.Disp)
	var b [4]byte
	for i := 0; i < maxTableEntries; i++ {
		if t.ReadMemory(table+uint64(4*i), b[:]) != nil {
			break // the table ends where memory does
		}
		dst := table + uint64(int64(int32(binary.LittleEndian.Uint32(b[:]))))
		if dst < start || dst >= end {
			break
		}
		targets[dst] = true
	}
	return true
}

func isJump(op x86asm.Op) bool {
	switch op {
	case x86asm.JMP, x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JCXZ, x86asm.JE,
		x86asm.JECXZ, x86asm.JG, x86asm.JGE, x86asm.JL, x86asm.JLE, x86asm.JNE, x86asm.JNO,
		x86asm.JNP, x86asm.JNS, x86asm.JO, x86asm.JP, x86asm.JRCXZ, x86asm.JS,
		x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE:
		return true
	}
	return false
}

// valueAt is the value register r (a 64-bit register) held just before
// insts[i] ran.
func (w *window) valueAt(r x86asm.Reg, i, depth int) (uint64, bool) {
	if depth > maxArgDepth {
		return 0, false
	}
	if r == x86asm.RIP {
		return w.insts[i].addr, true
	}
	if r == x86asm.RSP {
		return w.rspAt(i)
	}
	for j := i - 1; j >= 0; j-- {
		if writes(w.insts[j].inst, r) {
			return w.eval(j, r, depth)
		}
	}
	// Not set in the window: its value is the one at the call, when
	// nothing from i to the call changes it and the unwinder knows it.
	for j := i; j < len(w.insts)-1; j++ {
		if writes(w.insts[j].inst, r) {
			return 0, false
		}
	}
	n, ok := dwarfReg[r]
	if !ok || !calleeSaved(r) {
		return 0, false
	}
	return w.f.Reg(n)
}

// rspAt is rsp just before insts[i] ran: the frame's SP (rsp at the call)
// undone by the stack adjustments from i to the call.
func (w *window) rspAt(i int) (uint64, bool) {
	v := w.f.SP
	if v == 0 {
		return 0, false
	}
	for j := len(w.insts) - 2; j >= i; j-- {
		in := w.insts[j].inst
		if !writes(in, x86asm.RSP) {
			continue
		}
		switch in.Op {
		case x86asm.PUSH:
			v += 8
		case x86asm.POP:
			v -= 8
		case x86asm.SUB, x86asm.ADD:
			if in.Args[0] != x86asm.RSP {
				return 0, false
			}
			imm, ok := in.Args[1].(x86asm.Imm)
			if !ok {
				return 0, false
			}
			if in.Op == x86asm.SUB {
				v += uint64(int64(imm))
			} else {
				v -= uint64(int64(imm))
			}
		case x86asm.CALL:
			// The callee returned: rsp is as before the call.
		default:
			return 0, false
		}
	}
	return v, true
}

// eval is the value insts[j] wrote to r.
func (w *window) eval(j int, r x86asm.Reg, depth int) (uint64, bool) {
	in := w.insts[j].inst
	dst, ok := in.Args[0].(x86asm.Reg)
	if !ok {
		return 0, false
	}
	wide := dst == r
	if !wide && !(dst >= x86asm.EAX && dst <= x86asm.R15L && family(dst) == r) {
		return 0, false // a partial write (8 or 16 bits) or an implicit one
	}
	switch in.Op {
	case x86asm.MOV:
		switch src := in.Args[1].(type) {
		case x86asm.Imm:
			if wide {
				return uint64(int64(src)), true
			}
			return uint64(uint32(src)), true
		case x86asm.Reg:
			s := family(src)
			if s == 0 {
				return 0, false
			}
			v, ok := w.valueAt(s, j, depth+1)
			if !wide {
				v = uint64(uint32(v))
			}
			return v, ok
		case x86asm.Mem:
			addr, ok := w.addrOf(j, src, depth)
			if !ok {
				return 0, false
			}
			var b [8]byte
			size := 8
			if !wide {
				size = 4
			}
			if w.t.ReadMemory(addr, b[:size]) != nil {
				return 0, false
			}
			return binary.LittleEndian.Uint64(b[:]), true
		}
	case x86asm.LEA:
		m, ok := in.Args[1].(x86asm.Mem)
		if !ok {
			return 0, false
		}
		v, ok := w.addrOf(j, m, depth)
		if !wide {
			v = uint64(uint32(v))
		}
		return v, ok
	case x86asm.XOR:
		if src, ok := in.Args[1].(x86asm.Reg); ok && src == dst {
			return 0, true
		}
	}
	return 0, false
}

// addrOf is the address memory operand m of insts[j] names.
func (w *window) addrOf(j int, m x86asm.Mem, depth int) (uint64, bool) {
	if m.Segment != 0 {
		return 0, false
	}
	v := uint64(m.Disp)
	if m.Base == x86asm.RIP {
		v += w.insts[j].addr + uint64(w.insts[j].inst.Len)
	} else if m.Base != 0 {
		b, ok := w.valueAt(m.Base, j, depth+1)
		if !ok {
			return 0, false
		}
		v += b
	}
	if m.Index != 0 {
		x, ok := w.valueAt(m.Index, j, depth+1)
		if !ok {
			return 0, false
		}
		v += x * uint64(m.Scale)
	}
	return v, true
}

// writes reports whether in may change register r (a 64-bit register):
// as its destination, through a sub-register, or implicitly.
func writes(in x86asm.Inst, r x86asm.Reg) bool {
	switch in.Op {
	case x86asm.CALL:
		return !calleeSaved(r)
	case x86asm.PUSH:
		return r == x86asm.RSP
	case x86asm.POP:
		return r == x86asm.RSP || family(in.Args[0]) == r
	case x86asm.LEAVE, x86asm.ENTER:
		return r == x86asm.RSP || r == x86asm.RBP
	case x86asm.CMP, x86asm.TEST, x86asm.BT, x86asm.NOP, x86asm.UCOMISS, x86asm.UCOMISD,
		x86asm.COMISS, x86asm.COMISD:
		return false
	case x86asm.MUL, x86asm.IMUL, x86asm.DIV, x86asm.IDIV, x86asm.CQO, x86asm.CDQ, x86asm.CWD,
		x86asm.CDQE, x86asm.CWDE, x86asm.CBW, x86asm.RDTSC, x86asm.RDTSCP, x86asm.CPUID,
		x86asm.SYSCALL, x86asm.CMPXCHG, x86asm.CMPXCHG8B, x86asm.CMPXCHG16B, x86asm.XCHG, x86asm.XADD,
		x86asm.MOVSB, x86asm.MOVSW, x86asm.MOVSD, x86asm.MOVSQ, x86asm.STOSB, x86asm.STOSW,
		x86asm.STOSD, x86asm.STOSQ, x86asm.LODSB, x86asm.LODSW, x86asm.LODSD, x86asm.LODSQ,
		x86asm.SCASB, x86asm.SCASW, x86asm.SCASD, x86asm.SCASQ, x86asm.CMPSB, x86asm.CMPSW,
		x86asm.CMPSD, x86asm.CMPSQ:
		// Implicit operands: any register they name, and rax, rbx,
		// rcx, rdx, rsi, rdi, r11 that some of them change unnamed.
		switch r {
		case x86asm.RAX, x86asm.RBX, x86asm.RCX, x86asm.RDX, x86asm.RSI, x86asm.RDI, x86asm.R11:
			return true
		}
		for _, a := range in.Args {
			if a != nil && family(a) == r {
				return true
			}
		}
		return false
	}
	return in.Args[0] != nil && family(in.Args[0]) == r
}

// family is the 64-bit register whose part a is, 0 when a is no general
// purpose register.
func family(a x86asm.Arg) x86asm.Reg {
	r, ok := a.(x86asm.Reg)
	if !ok {
		return 0
	}
	if f := x86reg.Family(r); x86reg.GeneralPurpose(f) {
		return f
	}
	return 0
}

// calleeSaved reports whether the System V ABI makes a callee preserve r.
func calleeSaved(r x86asm.Reg) bool {
	switch r {
	case x86asm.RBX, x86asm.RBP, x86asm.R12, x86asm.R13, x86asm.R14, x86asm.R15, x86asm.RSP:
		return true
	}
	return false
}

// dwarfReg maps the callee-saved registers to their DWARF numbers.
var dwarfReg = map[x86asm.Reg]int{
	x86asm.RBX: regnum.AMD64_Rbx, x86asm.RBP: regnum.AMD64_Rbp, x86asm.R12: regnum.AMD64_R12,
	x86asm.R13: regnum.AMD64_R13, x86asm.R14: regnum.AMD64_R14, x86asm.R15: regnum.AMD64_R15,
}
