package unwind

import (
	"encoding/binary"
	"testing"

	"github.com/go-delve/delve/pkg/dwarf/regnum"
)

func TestCallArgs(t *testing.T) {
	const (
		code  = stackBase + 0x1000
		sp    = stackBase + 0x8000 // rsp at the call
		rbp   = stackBase + 0x8020 // the caller's frame pointer: sp+0x20, as its prologue sets it
		slot  = rbp - 8            // a local holding a pointer
		local = uint64(0x5555_0000_1230)
	)
	type want struct {
		arg   int
		value uint64 // 0 with known false
		known bool
	}
	call := func(at uint64, b []byte) []byte {
		// call rel32 to somewhere; its target does not matter.
		return append(b, append([]byte{0xe8}, rel32(at+uint64(len(b))+5, 0x1000)...)...)
	}
	cases := []struct {
		name string
		body []byte // the function's code before the call
		want []want
	}{
		{"gcc -O0: lea -0x14(%rbp),%rax; mov %rax,%rdi",
			[]byte{0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x20, 0x48, 0x8d, 0x45, 0xec, 0x48, 0x89, 0xc7},
			[]want{{0, rbp - 0x14, true}, {1, 0, false}}},
		{"a pointer loaded from a local: mov -0x8(%rbp),%rdi",
			[]byte{0x48, 0x8b, 0x7d, 0xf8},
			[]want{{0, local, true}}},
		{"rip-relative lea into rdx, movabs into rsi, mov $5,%ecx",
			[]byte{0x48, 0x8d, 0x15, 0x00, 0x01, 0x00, 0x00, 0x48, 0xbe, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0xb9, 0x05, 0x00, 0x00, 0x00},
			[]want{{2, code + 7 + 0x100, true}, {1, 0x1122334455667788, true}, {3, 5, true}, {0, 0, false}}},
		{"rsp-relative lea before a push: lea 0x8(%rsp),%rsi; push %rbx; xor %edx,%edx",
			[]byte{0x48, 0x8d, 0x74, 0x24, 0x08, 0x53, 0x31, 0xd2},
			[]want{{1, sp + 8 + 8, true}, {2, 0, true}}},
		{"a call in between clobbers rdi: lea -0x14(%rbp),%rdi; call; (the call)",
			call(code+4, []byte{0x48, 0x8d, 0x7d, 0xec}),
			[]want{{0, 0, false}}},
		{"a branch target between the lea and the call: lea; jne .+2; nop; nop",
			[]byte{0x48, 0x8d, 0x7d, 0xec, 0x75, 0x01, 0x90, 0x90},
			[]want{{0, 0, false}}},
		{"rbx copied to rdi is rbx at the call, which the unwinder knows: mov %rbx,%rdi",
			[]byte{0x48, 0x89, 0xdf},
			[]want{{0, 0x4242, true}}},
		{"rbx changed after it was copied: mov %rbx,%rdi; inc %rbx",
			[]byte{0x48, 0x89, 0xdf, 0x48, 0xff, 0xc3},
			[]want{{0, 0, false}}},
		{"an 8-bit write leaves rdi unknown: mov $1,%dil",
			[]byte{0x40, 0xb7, 0x01},
			[]want{{0, 0, false}}},
		{"an indirect jump in the function: jmp *%rax; lea -0x14(%rbp),%rdi",
			[]byte{0xff, 0xe0, 0x48, 0x8d, 0x7d, 0xec},
			[]want{{0, 0, false}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeTarget{stack: make([]byte, stackBytes)}
			f.put(slot, local)
			body := call(code, c.body)
			f.code(code, body...)
			fr := &Frame{PC: code + uint64(len(body)), SP: sp, How: MethodCFI}
			fr.regs.set(regnum.AMD64_Rbp, rbp)
			fr.regs.set(regnum.AMD64_Rbx, 0x4242)
			fr.regs.set(regnum.AMD64_Rdi, 0x9999) // the callee's: not the argument
			got := callArgsFrom(f, fr, code, 0)
			for _, w := range c.want {
				if got.Known[w.arg] != w.known || got.Value[w.arg] != w.value {
					t.Errorf("argument %d = %#x known %v, want %#x known %v", w.arg, got.Value[w.arg], got.Known[w.arg], w.value, w.known)
				}
			}
		})
	}

	t.Run("an innermost frame has no call", func(t *testing.T) {
		f := &fakeTarget{stack: make([]byte, stackBytes)}
		body := call(code, []byte{0x48, 0x8d, 0x7d, 0xec})
		f.code(code, body...)
		fr := &Frame{PC: code + uint64(len(body)), SP: sp, How: MethodRegisters}
		fr.regs.set(regnum.AMD64_Rbp, rbp)
		if got := callArgsFrom(f, fr, code, 0); got.Known != [NumArgRegs]bool{} {
			t.Errorf("known %v, want none", got.Known)
		}
	})
	t.Run("code that does not end with a call", func(t *testing.T) {
		f := &fakeTarget{stack: make([]byte, stackBytes)}
		body := []byte{0x48, 0x8d, 0x7d, 0xec, 0x90, 0x90, 0x90, 0x90, 0x90}
		f.code(code, body...)
		fr := &Frame{PC: code + uint64(len(body)), SP: sp, How: MethodCFI}
		fr.regs.set(regnum.AMD64_Rbp, rbp)
		if got := callArgsFrom(f, fr, code, 0); got.Known != [NumArgRegs]bool{} {
			t.Errorf("known %v, want none", got.Known)
		}
	})
}

// TestCallArgsJumpTable: a switch dispatched through a table of offsets
// (as gcc and clang emit it for position-independent code): a case that
// starts with the lea that sets the argument keeps it known; a table entry
// that leads between the lea and the call makes it unknown.
func TestCallArgsJumpTable(t *testing.T) {
	const (
		code  = stackBase + 0x1000
		table = stackBase + 0x2000
		sp    = stackBase + 0x8000
		rbp   = stackBase + 0x8020
	)
	// lea table(%rip),%rcx; movslq (%rcx,%rax,4),%rax; add %rcx,%rax;
	// jmp *%rax; case: lea -0x14(%rbp),%rdi; call.
	body := append([]byte{0x48, 0x8d, 0x0d}, rel32(code+7, table)...)
	body = append(body, 0x48, 0x63, 0x04, 0x81, 0x48, 0x01, 0xc8, 0xff, 0xe0)
	caseAt := code + uint64(len(body))
	body = append(body, 0x48, 0x8d, 0x7d, 0xec)
	callAt := code + uint64(len(body))
	body = append(body, append([]byte{0xe8}, rel32(callAt+5, 0x1000)...)...)
	ret := code + uint64(len(body))
	end := ret + 16
	for _, c := range []struct {
		name    string
		entries []uint64 // the cases' addresses; an entry past them leads outside
		known   bool
	}{
		{"every case starts at the lea", []uint64{caseAt, caseAt, ret}, true},
		{"a case enters at the call", []uint64{caseAt, callAt, ret}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeTarget{stack: make([]byte, stackBytes)}
			f.code(code, body...)
			for i, e := range c.entries {
				binary.LittleEndian.PutUint32(f.stack[table-stackBase+uint64(4*i):], uint32(int32(int64(e)-int64(table))))
			}
			// Past the table: an offset that leads 1 GiB away.
			binary.LittleEndian.PutUint32(f.stack[table-stackBase+uint64(4*len(c.entries)):], 0x4000_0000)
			fr := &Frame{PC: ret, SP: sp, How: MethodCFI}
			fr.regs.set(regnum.AMD64_Rbp, rbp)
			got := callArgsFrom(f, fr, code, end)
			if got.Known[0] != c.known || (c.known && got.Value[0] != rbp-0x14) {
				t.Errorf("rdi = %#x known %v, want %#x known %v", got.Value[0], got.Known[0], uint64(rbp-0x14), c.known)
			}
			if got := callArgsFrom(f, fr, code, 0); got.Known[0] {
				t.Errorf("with the function's end unknown: rdi known %#x, want unknown", got.Value[0])
			}
		})
	}
}
