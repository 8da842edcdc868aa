package unwind

import (
	"encoding/binary"

	"github.com/ompd-inspect/ompd-inspect/target"
)

// maxPLTHops bounds how many jump stubs CallTarget follows.
const maxPLTHops = 2

// CallTarget returns the function that the call instruction just before
// the return address ret called: a direct call (call rel32) or a call
// through a GOT slot (call *disp(%rip), -fno-plt), followed through PLT
// stubs (jmp *disp(%rip), with endbr64 and bnd prefixes) to the address
// the dynamic linker bound. It tells the entry point a frame called when
// that function has no frame of its own on the stack (it tail-jumped on).
// ok is false when the bytes before ret are no such call or memory cannot
// be read. The answer is what memory holds now: a stub not yet bound
// (lazy binding) gives the stub's own address.
func CallTarget(t target.Target, ret uint64) (callee uint64, ok bool) {
	if ret < 6 {
		return 0, false
	}
	var b [6]byte
	if err := target.ReadCode(t, ret-6, b[:]); err != nil {
		return 0, false
	}
	switch {
	case b[1] == 0xe8: // call rel32
		callee = ret + uint64(int64(int32(binary.LittleEndian.Uint32(b[2:]))))
	case b[0] == 0xff && b[1] == 0x15: // call *disp32(%rip)
		slot := ret + uint64(int64(int32(binary.LittleEndian.Uint32(b[2:]))))
		if callee, ok = readU64(t, slot); !ok {
			return 0, false
		}
	default:
		return 0, false
	}
	for hop := 0; hop < maxPLTHops; hop++ {
		next, isStub := stubTarget(t, callee)
		if !isStub {
			break
		}
		callee = next
	}
	return callee, true
}

// stubTarget decodes a jump stub at addr (endbr64? bnd? jmp *disp(%rip))
// and returns the address its GOT slot holds.
func stubTarget(t target.Target, addr uint64) (uint64, bool) {
	var b [11]byte
	if err := target.ReadCode(t, addr, b[:]); err != nil {
		return 0, false
	}
	i := 0
	if b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa { // endbr64
		i = 4
	}
	if b[i] == 0xf2 { // bnd
		i++
	}
	if i+6 > len(b) || b[i] != 0xff || b[i+1] != 0x25 {
		return 0, false
	}
	next := addr + uint64(i+6)
	slot := next + uint64(int64(int32(binary.LittleEndian.Uint32(b[i+2:]))))
	return readU64(t, slot)
}

func readU64(t target.Target, addr uint64) (uint64, bool) {
	var b [8]byte
	if err := t.ReadMemory(addr, b[:]); err != nil {
		return 0, false
	}
	return binary.LittleEndian.Uint64(b[:]), true
}
