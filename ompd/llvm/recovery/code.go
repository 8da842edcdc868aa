package recovery

import (
	"fmt"

	"golang.org/x/arch/x86/x86asm"

	"github.com/ompd-inspect/ompd-inspect/internal/x86reg"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// maxFuncBytes bounds the code of one function that is decoded.
const maxFuncBytes = 64 << 10

// refKind says how an instruction uses a global's address.
type refKind int

const (
	// refAddr: the address is computed (lea X(%rip)) and not (yet)
	// used to reach memory.
	refAddr refKind = iota
	// refLoad, refStore, refCmp: memory at the address (or at a
	// register that holds it) is read, written, or compared; refRMW: read
	// and written (or, and, add ... with a memory destination).
	refLoad
	refStore
	refCmp
	refRMW
)

// ref is one use of a global's address in a function's code.
type ref struct {
	at     uint64  // address of the instruction
	kind   refKind // how it is used
	target uint64  // the global's link-time address
	// disp is the displacement from target at which memory is reached
	// (movq $0,0x10(%rax) after lea X,%rax: disp 0x10).
	disp int64
	size int // bytes of memory reached (MemBytes); 0 for refAddr
	// imm is the immediate a store or compare writes or compares with;
	// hasImm is false when the source is a register.
	imm    int64
	hasImm bool
	// fromReg is the register a store writes, when it stores one.
	fromReg x86asm.Reg
	// via is the register that held target (0 for a rip-relative
	// operand).
	via x86asm.Reg
}

// inst is one decoded instruction.
type inst struct {
	addr uint64
	x86asm.Inst
}

// function is the decoded code of one function.
type function struct {
	start, end uint64
	insts      []inst
	refs       []ref
	calls      []uint64 // direct call targets, in order
}

// decodeRange decodes the code in [start, end) of text. It stops at the
// first byte it cannot decode.
func decodeRange(text *elf.Section, start, end uint64) (*function, error) {
	if !text.Contains(start) || end <= start || end-start > maxFuncBytes || !text.Contains(end-1) {
		return nil, fmt.Errorf("code range %#x-%#x is not inside %s", start, end, text.Name)
	}
	f := &function{start: start, end: end}
	code := text.Data[start-text.Addr : end-text.Addr]
	for off := 0; off < len(code); {
		in, err := x86asm.Decode(code[off:], 64)
		if err != nil || in.Len == 0 {
			break
		}
		f.insts = append(f.insts, inst{addr: start + uint64(off), Inst: in})
		off += in.Len
	}
	f.trace()
	return f, nil
}

// family maps a register to its 64-bit register.
func family(r x86asm.Reg) x86asm.Reg { return x86reg.Family(r) }

// callerSaved are the registers a call may change (System V x86-64).
var callerSaved = []x86asm.Reg{x86asm.RAX, x86asm.RCX, x86asm.RDX, x86asm.RSI, x86asm.RDI, x86asm.R8, x86asm.R9, x86asm.R10, x86asm.R11}

// trace walks the instructions in order, follows which registers hold a
// global's address (set by lea X(%rip); forgotten when the register is
// written otherwise, or by a call for the caller-saved ones), and records
// every use of a global's address as a ref, and every direct call.
func (f *function) trace() {
	held := map[x86asm.Reg]uint64{}
	for _, in := range f.insts {
		next := in.addr + uint64(in.Len)
		switch in.Op {
		case x86asm.CALL:
			if rel, ok := in.Args[0].(x86asm.Rel); ok {
				f.calls = append(f.calls, uint64(int64(next)+int64(rel)))
			}
			for _, r := range callerSaved {
				delete(held, r)
			}
			continue
		case x86asm.LEA:
			dst, _ := in.Args[0].(x86asm.Reg)
			if m, ok := in.Args[1].(x86asm.Mem); ok && m.Base == x86asm.RIP && m.Index == 0 {
				t := uint64(int64(next) + m.Disp)
				f.refs = append(f.refs, ref{at: in.addr, kind: refAddr, target: t})
				held[family(dst)] = t
				continue
			}
			delete(held, family(dst))
			continue
		}
		// A memory operand: rip-relative, or through a register that holds
		// a global's address.
		for i, a := range in.Args {
			m, ok := a.(x86asm.Mem)
			if !ok || m.Index != 0 {
				continue
			}
			r := ref{at: in.addr, size: in.MemBytes}
			switch {
			case m.Base == x86asm.RIP:
				r.target = uint64(int64(next) + m.Disp)
			case held[family(m.Base)] != 0:
				r.target, r.disp, r.via = held[family(m.Base)], m.Disp, family(m.Base)
			default:
				continue
			}
			r.kind = memKind(in.Op, i)
			if r.kind == refStore || r.kind == refCmp || r.kind == refRMW {
				switch src := in.Args[1-i].(type) {
				case x86asm.Imm:
					r.imm, r.hasImm = int64(src), true
				case x86asm.Reg:
					r.fromReg = family(src)
				}
			}
			f.refs = append(f.refs, r)
		}
		// The destination register, if any, no longer holds an address.
		if dst, ok := in.Args[0].(x86asm.Reg); ok && writesFirst(in.Op) {
			delete(held, family(dst))
		}
	}
}

// memKind says how op uses a memory operand at argument index i (Intel
// order: the destination first).
func memKind(op x86asm.Op, i int) refKind {
	switch op {
	case x86asm.CMP, x86asm.TEST:
		return refCmp
	case x86asm.MOV, x86asm.MOVZX, x86asm.MOVSX, x86asm.MOVSXD, x86asm.MOVSD, x86asm.MOVSS, x86asm.MOVQ, x86asm.MOVD, x86asm.MOVUPS, x86asm.MOVAPS:
		if i == 0 {
			return refStore
		}
		return refLoad
	case x86asm.OR, x86asm.AND, x86asm.ADD, x86asm.SUB, x86asm.XOR, x86asm.INC, x86asm.DEC, x86asm.XCHG, x86asm.CMPXCHG, x86asm.XADD:
		if i == 0 {
			return refRMW
		}
		return refLoad
	}
	if i == 0 {
		return refRMW
	}
	return refLoad
}

// writesFirst reports whether op writes its first argument.
func writesFirst(op x86asm.Op) bool {
	switch op {
	case x86asm.CMP, x86asm.TEST, x86asm.PUSH, x86asm.JMP, x86asm.RET:
		return false
	}
	return true
}

// isBareRet reports whether the code at addr is a ret: an empty function,
// as the OMPD breakpoint locations are.
func isBareRet(text *elf.Section, addr uint64) bool {
	if !text.Contains(addr) {
		return false
	}
	b := text.Data[addr-text.Addr]
	return b == 0xc3
}
