package ptrace

import (
	"bytes"
	"errors"
	"fmt"

	"golang.org/x/arch/x86/x86asm"
)

// The x86 instructions a breakpoint is made of: int3 written over a
// near return.
const (
	int3 = 0xcc
	ret  = 0xc3
)

// endbr64 is the CET landing pad that may open a function.
var endbr64 = []byte{0xf3, 0x0f, 0x1e, 0xfa}

// maxSiteScan bounds how many instructions ReturnSite decodes.
const maxSiteScan = 64

// ReturnSite finds where a breakpoint on the function whose code is given
// (read from its start) can stop every call: its first return instruction,
// reached by every call because nothing before it branches. Marker
// functions such as OpenMP's ompd_bp_* and the dynamic linker's
// _dl_debug_state are empty functions; their return is their first or
// nearly first instruction.
//
// Stopping at a return lets a stopped thread go on without the original
// instruction being put back: Tracee performs the return itself (pops the
// return address), so other threads keep running and none of them can pass
// the location unseen while one thread steps over it.
//
// It returns the offset of the return in code.
func ReturnSite(code []byte) (int, error) {
	off := 0
	for range maxSiteScan {
		if off >= len(code) {
			break
		}
		if bytes.HasPrefix(code[off:], endbr64) {
			off += len(endbr64) // not known to the decoder
			continue
		}
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			return 0, fmt.Errorf("undecodable instruction at offset %d: %w", off, err)
		}
		switch inst.Op {
		case x86asm.RET:
			if inst.Args[0] != nil {
				return 0, fmt.Errorf("offset %d: a return that pops arguments (%v) is not supported", off, inst)
			}
			// The breakpoint goes on the return's opcode, after any
			// prefix (repz ret, bnd ret).
			return off + inst.Len - 1, nil
		case x86asm.JMP, x86asm.CALL, x86asm.LCALL, x86asm.LJMP, x86asm.LRET, x86asm.IRET, x86asm.IRETD, x86asm.IRETQ,
			x86asm.SYSCALL, x86asm.SYSENTER, x86asm.INT, x86asm.UD2, x86asm.HLT,
			x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JCXZ, x86asm.JE, x86asm.JECXZ, x86asm.JG,
			x86asm.JGE, x86asm.JL, x86asm.JLE, x86asm.JNE, x86asm.JNO, x86asm.JNP, x86asm.JNS, x86asm.JO,
			x86asm.JP, x86asm.JRCXZ, x86asm.JS, x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE:
			return 0, fmt.Errorf("offset %d: %v comes before the function's first return", off, inst)
		}
		off += inst.Len
	}
	return 0, errors.New("no return instruction among the function's first instructions")
}
