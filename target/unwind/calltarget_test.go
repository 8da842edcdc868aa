package unwind

import (
	"encoding/binary"
	"testing"
)

// code writes bytes b at address addr of f's memory.
func (f *fakeTarget) code(addr uint64, b ...byte) {
	copy(f.stack[addr-stackBase:], b)
}

// rel32 is the little-endian displacement from next to to.
func rel32(next, to uint64) []byte {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(int32(int64(to)-int64(next))))
	return b[:]
}

func TestCallTarget(t *testing.T) {
	const (
		fn    = stackBase + 0x9000 // the bound function: no stub
		got   = stackBase + 0x8000 // GOT slots
		stubs = stackBase + 0x7000
		calls = stackBase + 0x1000
	)
	f := &fakeTarget{stack: make([]byte, stackBytes)}
	f.code(fn, 0x55, 0x48, 0x89, 0xe5) // push %rbp; mov %rsp,%rbp
	f.put(got, fn)

	// An IBT PLT stub (endbr64; bnd jmp *got(%rip)), a plain one, and a
	// chain of stubs longer than CallTarget follows.
	ibt := uint64(stubs)
	f.code(ibt, append([]byte{0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25}, rel32(ibt+11, got)...)...)
	plain := uint64(stubs + 0x100)
	f.code(plain, append([]byte{0xff, 0x25}, rel32(plain+6, got)...)...)
	loop := uint64(stubs + 0x200)
	f.put(got+8, loop)
	f.code(loop, append([]byte{0xff, 0x25}, rel32(loop+6, got+8)...)...)

	cases := []struct {
		name   string
		insn   []byte // the instruction that ends at the return address
		want   uint64
		wantOK bool
	}{
		{"call rel32 to the function", nil, fn, true},
		{"call rel32 to an IBT stub", nil, fn, true},
		{"call rel32 to a plain stub", nil, fn, true},
		{"call *got(%rip)", nil, fn, true},
		{"a stub that jumps to itself stops after two hops", nil, loop, true},
		{"no call before the return address", []byte{0x90, 0x90, 0x90, 0x90, 0x90, 0x90}, 0, false},
	}
	targets := []uint64{fn, ibt, plain, 0, loop}
	for i := range cases {
		c := &cases[i]
		at := uint64(calls + 0x40*i)
		if c.insn == nil {
			if i == 3 {
				c.insn = append([]byte{0xff, 0x15}, rel32(at+6, got)...)
			} else {
				c.insn = append([]byte{0x90, 0xe8}, rel32(at+6, targets[i])...)
			}
		}
		f.code(at, c.insn...)
		got, ok := CallTarget(f, at+uint64(len(c.insn)))
		if got != c.want || ok != c.wantOK {
			t.Errorf("%s: CallTarget = %#x, %v; want %#x, %v", c.name, got, ok, c.want, c.wantOK)
		}
	}
	if _, ok := CallTarget(f, 0x10); ok {
		t.Errorf("CallTarget of unmapped memory: ok")
	}
	if _, ok := CallTarget(f, 3); ok {
		t.Errorf("CallTarget below address 6: ok")
	}
}
