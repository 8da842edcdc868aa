package gomp

import (
	"errors"
	"fmt"

	"golang.org/x/arch/x86/x86asm"
)

// maxCodeBytes bounds the code of one exported function that is read: the
// getters checked here are a few instructions long.
const maxCodeBytes = 192

// inst is one decoded instruction at its address in the target.
type inst struct {
	addr uint64
	x86asm.Inst
}

// next is the address after the instruction (rip-relative operands count
// from it).
func (in inst) next() uint64 { return in.addr + uint64(in.Len) }

// decodeAt reads and decodes the code of a function at addr up to its
// first ret or unconditional jump (the end of the getters read here).
func (m *mem) decodeAt(addr uint64) ([]inst, error) {
	buf := make([]byte, maxCodeBytes)
	n := len(buf)
	// The function may end near the end of a mapping: read less then.
	for ; n > 0; n -= 32 {
		if m.read(addr, buf[:n]) == nil {
			break
		}
	}
	if n <= 0 {
		return nil, fmt.Errorf("code at %#x cannot be read", addr)
	}
	code := buf[:n]
	var out []inst
	off := 0
	// endbr64: not known to every x86asm release.
	if len(code) >= 4 && code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa {
		off = 4
	}
	for off < len(code) {
		in, err := x86asm.Decode(code[off:], 64)
		if err != nil || in.Len == 0 {
			break
		}
		out = append(out, inst{addr: addr + uint64(off), Inst: in})
		off += in.Len
		if in.Op == x86asm.RET || in.Op == x86asm.JMP {
			return out, nil
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("code at %#x does not decode", addr)
	}
	return out, errors.New("no ret or jmp within the code read")
}

// memArg returns the instruction's memory operand, if it has one.
func memArg(in inst) (x86asm.Mem, int, bool) {
	for i, a := range in.Args {
		if m, ok := a.(x86asm.Mem); ok {
			return m, i, true
		}
	}
	return x86asm.Mem{}, 0, false
}

// isLoad reports whether in reads memory into a register (mov, movzx,
// movsx with the memory operand as source).
func isLoad(in inst) bool {
	switch in.Op {
	case x86asm.MOV, x86asm.MOVZX, x86asm.MOVSX, x86asm.MOVSXD:
		_, i, ok := memArg(in)
		return ok && i == 1
	}
	return false
}

// gotSlot is the address of the first rip-relative 64-bit load: the GOT
// slot of an initial-exec TLS variable (mov X(%rip),%rax).
func gotSlot(code []inst) (uint64, bool) {
	for _, in := range code {
		if m, _, ok := memArg(in); ok && isLoad(in) && m.Base == x86asm.RIP && in.MemBytes == 8 {
			return uint64(int64(in.next()) + m.Disp), true
		}
	}
	return 0, false
}

// fsDisp is the displacement of the first %fs-relative operand with a base
// register (mov %fs:0x28(%rax),%eax: 0x28 into the TLS variable).
func fsDisp(code []inst) (int64, bool) {
	for _, in := range code {
		if m, _, ok := memArg(in); ok && m.Segment == x86asm.FS && m.Base != 0 {
			return m.Disp, true
		}
	}
	return 0, false
}

// plainLoads are the displacements of the loads through a base register
// (not rip- or %fs-relative), in order.
func plainLoads(code []inst) []int64 {
	var out []int64
	for _, in := range code {
		if m, _, ok := memArg(in); ok && isLoad(in) && m.Segment == 0 && m.Base != x86asm.RIP && m.Base != 0 && m.Index == 0 {
			out = append(out, m.Disp)
		}
	}
	return out
}

// leaBase is the displacement of the first lea from a base register other
// than rip (lea 0x98(%rdx),%rax: the task's icv).
func leaBase(code []inst) (int64, bool) {
	for _, in := range code {
		if m, _, ok := memArg(in); ok && in.Op == x86asm.LEA && m.Base != x86asm.RIP && m.Index == 0 {
			return m.Disp, true
		}
	}
	return 0, false
}

// ripAddr is the address of the first rip-relative lea, or of the first
// rip-relative load when lea is false.
func ripAddr(code []inst, lea bool) (uint64, bool) {
	for _, in := range code {
		m, _, ok := memArg(in)
		if !ok || m.Base != x86asm.RIP {
			continue
		}
		if (lea && in.Op == x86asm.LEA) || (!lea && isLoad(in)) {
			return uint64(int64(in.next()) + m.Disp), true
		}
	}
	return 0, false
}

// addImms are the immediates added to registers (add $imm,%reg; sub
// $-imm,%reg counts as +imm), in order.
func addImms(code []inst) []int64 {
	var out []int64
	for _, in := range code {
		if _, ok := in.Args[0].(x86asm.Reg); !ok {
			continue
		}
		imm, ok := in.Args[1].(x86asm.Imm)
		if !ok {
			continue
		}
		switch in.Op {
		case x86asm.ADD:
			out = append(out, int64(imm))
		case x86asm.SUB:
			out = append(out, -int64(imm))
		}
	}
	return out
}
