package unwind

import (
	"encoding/binary"
	"slices"

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
// code. calleeSaved says whether f's callee-saved registers (rbx, rbp,
// r12 to r15) are known: every frame inside f was unwound by call frame
// information, which restores them (a frame-pointer step copies the
// callee's).
//
// The argument registers are dead by the time the callee runs, so they
// are rebuilt from the caller's code. Its whole function is decoded (the
// range of its call frame information, else of its symbol; .cold parts
// that gcc splits off are not), and each argument register is followed
// back through the straight-line code before the call to the instruction
// that set it: an immediate, a lea (its address computed from registers
// known at the call: rip, rsp, and the callee-saved registers), a load
// from such an address (memory is read now: the caller is suspended in
// the call, so its own stack slots still hold what it loaded) or a move
// from another register followed the same way. The straight-line code
// starts after the last point before the call that control can come from
// elsewhere: the target of any jump of the function, before or after the
// call (direct jumps, and the cases of a switch's jump table, whose size
// its bounds check gives), or the instruction after an unconditional jump
// or return. An argument is not known when the function has an indirect
// jump that is no such switch, a jump into the middle of an instruction,
// or code that does not decode; when a call or an instruction this does
// not model may have changed a register it depends on (an instruction
// that is not modelled is taken to change every register it names); or
// when its end is not known. The result is what the code proves, not a
// guess; callers should still check that a value makes sense for what
// they look up with it.
func CallArgs(t target.Target, f *Frame, calleeSaved bool) Args {
	if f.Module == nil || f.Module.Image == nil || f.PC < f.Module.Bias {
		return Args{}
	}
	start, end, ok := funcBounds(f)
	if !ok {
		return Args{}
	}
	return callArgsFrom(t, f, start, end, calleeSaved)
}

// callArgsFrom is CallArgs for a caller whose function spans [start,
// end).
func callArgsFrom(t target.Target, f *Frame, start, end uint64, calleeSaved bool) Args {
	var out Args
	w, ok := callWindow(t, f, start, end)
	if !ok {
		return out
	}
	w.calleeSaved = calleeSaved
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
	t           target.Target
	f           *Frame
	insts       []decoded
	calleeSaved bool // f's callee-saved registers are known
}

// callWindow decodes f's function [start, end) and keeps the
// straight-line code before the call that returns to f.PC.
func callWindow(t target.Target, f *Frame, start, end uint64) (*window, bool) {
	ret := f.PC
	if f.ExactPC() || end == 0 || start >= ret || ret > end || end-start > maxCallerCode {
		return nil, false
	}
	code := make([]byte, end-start)
	if err := t.ReadMemory(start, code); err != nil {
		return nil, false
	}
	var insts []decoded
	at := map[uint64]int{} // instruction index by address
	targets := map[uint64]bool{}
	for off := 0; off < len(code); {
		in, err := x86asm.Decode(code[off:], 64)
		if err != nil || in.Len == 0 {
			return nil, false
		}
		addr := start + uint64(off)
		next := addr + uint64(in.Len)
		at[addr] = len(insts)
		insts = append(insts, decoded{addr, in})
		switch {
		case isJump(in.Op):
			if rel, direct := in.Args[0].(x86asm.Rel); direct {
				targets[next+uint64(int64(rel))] = true
			} else if !jumpTableTargets(t, insts, targets) {
				return nil, false // an indirect jump whose targets are unknown
			}
		}
		if endsFlow(in.Op) {
			targets[next] = true // reached only by a jump, if at all
		}
		off += in.Len
	}
	n, ok := at[ret]
	if !ok {
		if ret != end {
			return nil, false
		}
		n = len(insts)
	}
	if n == 0 || insts[n-1].inst.Op != x86asm.CALL || insts[n-1].addr+uint64(insts[n-1].inst.Len) != ret {
		return nil, false
	}
	for a := range targets {
		if _, ok := at[a]; !ok && a >= start && a < end {
			return nil, false // a jump into the middle of an instruction
		}
	}
	// Keep the code from the last branch target before the call: code
	// before it may not have run on the way to the call.
	first := 0
	for i := n - 1; i > 0; i-- {
		if targets[insts[i].addr] {
			first = i
			break
		}
	}
	return &window{t: t, f: f, insts: insts[first:n]}, true
}

// endsFlow reports whether op never falls through to the next
// instruction.
func endsFlow(op x86asm.Op) bool {
	switch op {
	case x86asm.JMP, x86asm.RET, x86asm.UD2, x86asm.HLT, x86asm.LJMP, x86asm.LRET, x86asm.IRET, x86asm.IRETD, x86asm.IRETQ:
		return true
	}
	return false
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
const maxTableEntries = 4096

// jumpTableTargets adds to targets the destinations of the indirect jump
// that ends insts, when it is the switch dispatch gcc and clang emit for
// position-independent code: a bounds check (cmp $N,%idx or sub $N,%idx,
// then ja to the default case), then lea TABLE(%rip),%rB; movslq
// (%rB,%rI,4),%rJ; add %rB,%rJ; jmp *%rJ, whose N+1 entries are 32-bit
// offsets from the table's start. Entries that lead outside the function
// go to a part of it placed elsewhere (.cold) and are not followed. It
// reports false when the jump is no such dispatch.
func jumpTableTargets(t target.Target, insts []decoded, targets map[uint64]bool) bool {
	n := len(insts)
	if n < 4 {
		return false
	}
	jmp := insts[n-1].inst
	r, ok := jmp.Args[0].(x86asm.Reg)
	if !ok {
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
	// The bounds check: the last ja before the dispatch, right after a
	// cmp or sub of an immediate.
	count := -1
	for k := n - 5; k >= 1 && k >= n-12; k-- {
		if insts[k].inst.Op != x86asm.JA {
			continue
		}
		chk := insts[k-1].inst
		if imm, ok := chk.Args[1].(x86asm.Imm); ok && (chk.Op == x86asm.CMP || chk.Op == x86asm.SUB) && imm >= 0 && imm < maxTableEntries {
			count = int(imm) + 1
		}
		break
	}
	if count < 0 {
		return false
	}
	table := insts[n-4].addr + uint64(lea.Len) + uint64(tm.Disp)
	b := make([]byte, 4*count)
	if t.ReadMemory(table, b) != nil {
		return false
	}
	for i := 0; i < count; i++ {
		targets[table+uint64(int64(int32(binary.LittleEndian.Uint32(b[4*i:]))))] = true
	}
	return true
}

func isJump(op x86asm.Op) bool {
	switch op {
	case x86asm.JMP, x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JCXZ, x86asm.JE,
		x86asm.JECXZ, x86asm.JG, x86asm.JGE, x86asm.JL, x86asm.JLE, x86asm.JNE, x86asm.JNO,
		x86asm.JNP, x86asm.JNS, x86asm.JO, x86asm.JP, x86asm.JRCXZ, x86asm.JS,
		x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE, x86asm.XBEGIN:
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
	n, ok := dwarfReg[r] // the callee-saved registers
	if !ok || !w.calleeSaved {
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
			if in.DataSize == 16 {
				return 0, false // push of 16 bits (x86asm says 32 for the 64-bit default)
			}
			v += 8
		case x86asm.POP:
			if in.DataSize == 16 {
				return 0, false
			}
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

// destOnly are instructions whose only effect on the general registers
// is on their first operand (the others are read).
var destOnly = map[x86asm.Op]bool{
	x86asm.MOV: true, x86asm.MOVZX: true, x86asm.MOVSX: true, x86asm.MOVSXD: true, x86asm.LEA: true,
	x86asm.ADD: true, x86asm.SUB: true, x86asm.AND: true, x86asm.OR: true, x86asm.XOR: true,
	x86asm.ADC: true, x86asm.SBB: true, x86asm.INC: true, x86asm.DEC: true, x86asm.NEG: true, x86asm.NOT: true,
	x86asm.SHL: true, x86asm.SHR: true, x86asm.SAR: true, x86asm.ROL: true, x86asm.ROR: true,
	x86asm.RCL: true, x86asm.RCR: true, x86asm.SHLD: true, x86asm.SHRD: true,
	x86asm.BTS: true, x86asm.BTR: true, x86asm.BTC: true, x86asm.BSF: true, x86asm.BSR: true,
	x86asm.POPCNT: true, x86asm.LZCNT: true, x86asm.TZCNT: true, x86asm.BSWAP: true,
	x86asm.CMOVA: true, x86asm.CMOVAE: true, x86asm.CMOVB: true, x86asm.CMOVBE: true, x86asm.CMOVE: true,
	x86asm.CMOVG: true, x86asm.CMOVGE: true, x86asm.CMOVL: true, x86asm.CMOVLE: true, x86asm.CMOVNE: true,
	x86asm.CMOVNO: true, x86asm.CMOVNP: true, x86asm.CMOVNS: true, x86asm.CMOVO: true, x86asm.CMOVP: true, x86asm.CMOVS: true,
	x86asm.SETA: true, x86asm.SETAE: true, x86asm.SETB: true, x86asm.SETBE: true, x86asm.SETE: true,
	x86asm.SETG: true, x86asm.SETGE: true, x86asm.SETL: true, x86asm.SETLE: true, x86asm.SETNE: true,
	x86asm.SETNO: true, x86asm.SETNP: true, x86asm.SETNS: true, x86asm.SETO: true, x86asm.SETP: true, x86asm.SETS: true,
	x86asm.MOVD: true, x86asm.MOVQ: true, x86asm.CVTTSD2SI: true, x86asm.CVTTSS2SI: true, x86asm.CVTSD2SI: true, x86asm.CVTSS2SI: true,
	x86asm.PEXTRB: true, x86asm.PEXTRW: true, x86asm.PEXTRD: true, x86asm.PEXTRQ: true, x86asm.PMOVMSKB: true,
	x86asm.MOVMSKPD: true, x86asm.MOVMSKPS: true, x86asm.RDRAND: true,
}

// readOnly are instructions that change no general register.
var readOnly = map[x86asm.Op]bool{
	x86asm.CMP: true, x86asm.TEST: true, x86asm.BT: true, x86asm.NOP: true,
	x86asm.UCOMISS: true, x86asm.UCOMISD: true, x86asm.COMISS: true, x86asm.COMISD: true,
	x86asm.PAUSE: true, x86asm.PREFETCHT0: true, x86asm.PREFETCHT1: true, x86asm.PREFETCHT2: true,
	x86asm.PREFETCHNTA: true, x86asm.LFENCE: true, x86asm.MFENCE: true, x86asm.SFENCE: true,
	x86asm.CLFLUSH: true, x86asm.SAHF: true, x86asm.CLC: true, x86asm.STC: true, x86asm.CLD: true, x86asm.STD: true, x86asm.CMC: true,
}

// implicit are the general registers instructions change without naming
// them (besides those they name).
var implicit = map[x86asm.Op][]x86asm.Reg{
	x86asm.MUL: {x86asm.RAX, x86asm.RDX}, x86asm.DIV: {x86asm.RAX, x86asm.RDX}, x86asm.IDIV: {x86asm.RAX, x86asm.RDX},
	x86asm.CWD: {x86asm.RDX}, x86asm.CDQ: {x86asm.RDX}, x86asm.CQO: {x86asm.RDX},
	x86asm.CBW: {x86asm.RAX}, x86asm.CWDE: {x86asm.RAX}, x86asm.CDQE: {x86asm.RAX}, x86asm.LAHF: {x86asm.RAX}, x86asm.XLATB: {x86asm.RAX},
	x86asm.CPUID: {x86asm.RAX, x86asm.RBX, x86asm.RCX, x86asm.RDX},
	x86asm.RDTSC: {x86asm.RAX, x86asm.RDX}, x86asm.RDTSCP: {x86asm.RAX, x86asm.RDX, x86asm.RCX},
	x86asm.RDPMC: {x86asm.RAX, x86asm.RDX}, x86asm.XGETBV: {x86asm.RAX, x86asm.RDX},
	x86asm.SYSCALL: {x86asm.RAX, x86asm.RCX, x86asm.R11}, x86asm.SYSENTER: {x86asm.RAX, x86asm.RCX, x86asm.R11},
	x86asm.CMPXCHG: {x86asm.RAX}, x86asm.CMPXCHG8B: {x86asm.RAX, x86asm.RDX}, x86asm.CMPXCHG16B: {x86asm.RAX, x86asm.RDX},
	x86asm.LOOP: {x86asm.RCX}, x86asm.LOOPE: {x86asm.RCX}, x86asm.LOOPNE: {x86asm.RCX}, x86asm.XBEGIN: {x86asm.RAX},
	x86asm.PUSH: {x86asm.RSP}, x86asm.PUSHF: {x86asm.RSP}, x86asm.PUSHFQ: {x86asm.RSP}, x86asm.PUSHFD: {x86asm.RSP},
	x86asm.POP: {x86asm.RSP}, x86asm.POPF: {x86asm.RSP}, x86asm.POPFQ: {x86asm.RSP}, x86asm.POPFD: {x86asm.RSP},
	x86asm.LEAVE: {x86asm.RSP, x86asm.RBP}, x86asm.ENTER: {x86asm.RSP, x86asm.RBP},
	x86asm.MOVSB: {x86asm.RDI, x86asm.RSI, x86asm.RCX}, x86asm.MOVSW: {x86asm.RDI, x86asm.RSI, x86asm.RCX},
	x86asm.MOVSD: {x86asm.RDI, x86asm.RSI, x86asm.RCX}, x86asm.MOVSQ: {x86asm.RDI, x86asm.RSI, x86asm.RCX},
	x86asm.CMPSB: {x86asm.RDI, x86asm.RSI, x86asm.RCX}, x86asm.CMPSW: {x86asm.RDI, x86asm.RSI, x86asm.RCX},
	x86asm.CMPSD: {x86asm.RDI, x86asm.RSI, x86asm.RCX}, x86asm.CMPSQ: {x86asm.RDI, x86asm.RSI, x86asm.RCX},
	x86asm.STOSB: {x86asm.RDI, x86asm.RCX}, x86asm.STOSW: {x86asm.RDI, x86asm.RCX},
	x86asm.STOSD: {x86asm.RDI, x86asm.RCX}, x86asm.STOSQ: {x86asm.RDI, x86asm.RCX},
	x86asm.SCASB: {x86asm.RDI, x86asm.RCX}, x86asm.SCASW: {x86asm.RDI, x86asm.RCX},
	x86asm.SCASD: {x86asm.RDI, x86asm.RCX}, x86asm.SCASQ: {x86asm.RDI, x86asm.RCX},
	x86asm.LODSB: {x86asm.RAX, x86asm.RSI, x86asm.RCX}, x86asm.LODSW: {x86asm.RAX, x86asm.RSI, x86asm.RCX},
	x86asm.LODSD: {x86asm.RAX, x86asm.RSI, x86asm.RCX}, x86asm.LODSQ: {x86asm.RAX, x86asm.RSI, x86asm.RCX},
	x86asm.INSB: {x86asm.RDI, x86asm.RCX}, x86asm.INSW: {x86asm.RDI, x86asm.RCX}, x86asm.INSD: {x86asm.RDI, x86asm.RCX},
	x86asm.OUTSB: {x86asm.RSI, x86asm.RCX}, x86asm.OUTSW: {x86asm.RSI, x86asm.RCX}, x86asm.OUTSD: {x86asm.RSI, x86asm.RCX},
	x86asm.IN: {x86asm.RAX},
}

// writes reports whether in may change register r (a 64-bit register):
// as its destination, through a sub-register, or implicitly. An
// instruction that is not modelled changes every register it names.
func writes(in x86asm.Inst, r x86asm.Reg) bool {
	switch {
	case in.Op == x86asm.CALL:
		return !calleeSaved(r)
	case in.Op == x86asm.INT || in.Op == x86asm.INTO:
		return true // a system call or a trap: anything
	case readOnly[in.Op], isJump(in.Op) && implicit[in.Op] == nil:
		return false
	case slices.Contains(implicit[in.Op], r):
		return true
	case destOnly[in.Op], in.Op == x86asm.IMUL && in.Args[1] != nil, in.Op == x86asm.POP:
		return in.Args[0] != nil && family(in.Args[0]) == r
	case in.Op == x86asm.IMUL && in.Args[1] == nil:
		return r == x86asm.RAX || r == x86asm.RDX
	}
	for _, a := range in.Args {
		if a != nil && family(a) == r {
			return true
		}
	}
	return false
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
