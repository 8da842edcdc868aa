// Package x86reg names x86-64 general purpose registers as the code that
// reads machine code needs them: the 64-bit register a narrower one is
// part of.
package x86reg

import "golang.org/x/arch/x86/x86asm"

// Family returns the 64-bit register whose part r is (EAX, AX, AL and AH
// are parts of RAX); any other register (RIP, a vector register) is
// returned unchanged.
func Family(r x86asm.Reg) x86asm.Reg {
	switch {
	case r >= x86asm.RAX && r <= x86asm.R15:
		return r
	case r >= x86asm.EAX && r <= x86asm.R15L:
		return x86asm.RAX + (r - x86asm.EAX)
	case r >= x86asm.AX && r <= x86asm.R15W:
		return x86asm.RAX + (r - x86asm.AX)
	case r >= x86asm.AL && r <= x86asm.BL:
		return x86asm.RAX + (r - x86asm.AL)
	case r >= x86asm.AH && r <= x86asm.BH:
		return x86asm.RAX + (r - x86asm.AH)
	case r >= x86asm.SPB && r <= x86asm.DIB:
		return x86asm.RSP + (r - x86asm.SPB)
	case r >= x86asm.R8B && r <= x86asm.R15B:
		return x86asm.R8 + (r - x86asm.R8B)
	}
	return r
}

// GeneralPurpose reports whether r is one of the sixteen 64-bit general
// purpose registers.
func GeneralPurpose(r x86asm.Reg) bool { return r >= x86asm.RAX && r <= x86asm.R15 }
