package x86reg

import (
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

func TestFamily(t *testing.T) {
	for r, want := range map[x86asm.Reg]x86asm.Reg{
		x86asm.RDI: x86asm.RDI, x86asm.EDI: x86asm.RDI, x86asm.DI: x86asm.RDI, x86asm.DIB: x86asm.RDI,
		x86asm.AL: x86asm.RAX, x86asm.AH: x86asm.RAX, x86asm.BH: x86asm.RBX, x86asm.BL: x86asm.RBX,
		x86asm.CL: x86asm.RCX, x86asm.DH: x86asm.RDX, x86asm.SPB: x86asm.RSP, x86asm.BPB: x86asm.RBP,
		x86asm.SIB: x86asm.RSI, x86asm.R8B: x86asm.R8, x86asm.R15B: x86asm.R15, x86asm.R9W: x86asm.R9,
		x86asm.R12L: x86asm.R12, x86asm.EBP: x86asm.RBP, x86asm.RIP: x86asm.RIP, x86asm.X0: x86asm.X0,
	} {
		if got := Family(r); got != want {
			t.Errorf("Family(%v) = %v, want %v", r, got, want)
		}
	}
	if GeneralPurpose(x86asm.RIP) || GeneralPurpose(x86asm.EAX) || !GeneralPurpose(x86asm.R15) {
		t.Error("GeneralPurpose: RIP and EAX are not, R15 is")
	}
}
