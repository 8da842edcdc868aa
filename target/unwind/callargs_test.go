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
		// tail is the function's code after the call (none: the call
		// is its last instruction); untrusted: the frames inside were
		// not all unwound by call frame information.
		tail      func(callAt uint64) []byte
		untrusted bool
	}{
		{"gcc -O0: lea -0x14(%rbp),%rax; mov %rax,%rdi",
			[]byte{0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x20, 0x48, 0x8d, 0x45, 0xec, 0x48, 0x89, 0xc7},
			[]want{{0, rbp - 0x14, true}, {1, 0, false}}, nil, false},
		{"a pointer loaded from a local: mov -0x8(%rbp),%rdi",
			[]byte{0x48, 0x8b, 0x7d, 0xf8},
			[]want{{0, local, true}}, nil, false},
		{"rip-relative lea into rdx, movabs into rsi, mov $5,%ecx",
			[]byte{0x48, 0x8d, 0x15, 0x00, 0x01, 0x00, 0x00, 0x48, 0xbe, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0xb9, 0x05, 0x00, 0x00, 0x00},
			[]want{{2, code + 7 + 0x100, true}, {1, 0x1122334455667788, true}, {3, 5, true}, {0, 0, false}}, nil, false},
		{"rsp-relative lea before a push: lea 0x8(%rsp),%rsi; push %rbx; xor %edx,%edx",
			[]byte{0x48, 0x8d, 0x74, 0x24, 0x08, 0x53, 0x31, 0xd2},
			[]want{{1, sp + 8 + 8, true}, {2, 0, true}}, nil, false},
		{"a call in between clobbers rdi: lea -0x14(%rbp),%rdi; call; (the call)",
			call(code+4, []byte{0x48, 0x8d, 0x7d, 0xec}),
			[]want{{0, 0, false}}, nil, false},
		{"a branch target between the lea and the call: lea; jne .+2; nop; nop",
			[]byte{0x48, 0x8d, 0x7d, 0xec, 0x75, 0x01, 0x90, 0x90},
			[]want{{0, 0, false}}, nil, false},
		{"rbx copied to rdi is rbx at the call, which the unwinder knows: mov %rbx,%rdi",
			[]byte{0x48, 0x89, 0xdf},
			[]want{{0, 0x4242, true}}, nil, false},
		{"rbx changed after it was copied: mov %rbx,%rdi; inc %rbx",
			[]byte{0x48, 0x89, 0xdf, 0x48, 0xff, 0xc3},
			[]want{{0, 0, false}}, nil, false},
		{"an 8-bit write leaves rdi unknown: mov $1,%dil",
			[]byte{0x40, 0xb7, 0x01},
			[]want{{0, 0, false}}, nil, false},
		{"an indirect jump in the function: jmp *%rax; lea -0x14(%rbp),%rdi",
			[]byte{0xff, 0xe0, 0x48, 0x8d, 0x7d, 0xec},
			[]want{{0, 0, false}}, nil, false},
		{"code after the call jumps back to it (cross-jumping): lea -0x14(%rbp),%rdi; call; ...; lea -0x18(%rbp),%rdi; jmp call",
			[]byte{0x48, 0x8d, 0x7d, 0xec},
			[]want{{0, 0, false}}, func(callAt uint64) []byte {
				b := []byte{0xc3, 0x48, 0x8d, 0x7d, 0xe8, 0xe9} // ret; lea; jmp rel32
				return append(b, rel32(callAt+uint64(len(b))+4+5, callAt)...)
			}, false},
		{"a jump after the call that lands elsewhere: lea -0x14(%rbp),%rdi; call; jmp to the function's start",
			[]byte{0x48, 0x8d, 0x7d, 0xec},
			[]want{{0, rbp - 0x14, true}}, func(callAt uint64) []byte {
				return append([]byte{0xe9}, rel32(callAt+5+5, code)...)
			}, false},
		{"rbx copied to rdi, but a frame inside was unwound by frame pointer: mov %rbx,%rdi",
			[]byte{0x48, 0x89, 0xdf},
			[]want{{0, 0, false}}, nil, true},
		{"xgetbv changes rdx: mov $5,%edx; xgetbv",
			[]byte{0xba, 0x05, 0x00, 0x00, 0x00, 0x0f, 0x01, 0xd0},
			[]want{{2, 0, false}}, nil, false},
		{"pushfq moves rsp: lea 0x8(%rsp),%rsi; pushfq",
			[]byte{0x48, 0x8d, 0x74, 0x24, 0x08, 0x9c},
			[]want{{1, 0, false}}, nil, false},
		{"an instruction not modelled changes what it names: mov $5,%esi; mov $7,%ecx; andn %ecx,%ecx,%esi",
			[]byte{0xbe, 0x05, 0x00, 0x00, 0x00, 0xb9, 0x07, 0x00, 0x00, 0x00, 0xc4, 0xe2, 0x70, 0xf2, 0xf1},
			[]want{{1, 0, false}, {3, 0, false}}, nil, false},
		{"a jump into the middle of an instruction: jmp .+1 into the mov; mov $0x90909090,%edi",
			[]byte{0xeb, 0x01, 0xbf, 0x90, 0x90, 0x90, 0x90},
			[]want{{0, 0, false}}, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeTarget{stack: make([]byte, stackBytes)}
			f.put(slot, local)
			body := call(code, c.body)
			ret := code + uint64(len(body))
			if c.tail != nil {
				body = append(body, c.tail(ret-5)...)
			}
			f.code(code, body...)
			fr := &Frame{PC: ret, SP: sp, How: MethodCFI}
			fr.regs.set(regnum.AMD64_Rbp, rbp)
			fr.regs.set(regnum.AMD64_Rbx, 0x4242)
			fr.regs.set(regnum.AMD64_Rdi, 0x9999) // the callee's: not the argument
			got := callArgsFrom(f, fr, code, code+uint64(len(body)), !c.untrusted)
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
		if got := callArgsFrom(f, fr, code, code+uint64(len(body)), true); got.Known != [NumArgRegs]bool{} {
			t.Errorf("known %v, want none", got.Known)
		}
	})
	t.Run("the function's end is not known", func(t *testing.T) {
		f := &fakeTarget{stack: make([]byte, stackBytes)}
		body := call(code, []byte{0x48, 0x8d, 0x7d, 0xec})
		f.code(code, body...)
		fr := &Frame{PC: code + uint64(len(body)), SP: sp, How: MethodCFI}
		fr.regs.set(regnum.AMD64_Rbp, rbp)
		if got := callArgsFrom(f, fr, code, 0, true); got.Known != [NumArgRegs]bool{} {
			t.Errorf("known %v, want none", got.Known)
		}
	})
	t.Run("code that does not end with a call", func(t *testing.T) {
		f := &fakeTarget{stack: make([]byte, stackBytes)}
		body := []byte{0x48, 0x8d, 0x7d, 0xec, 0x90, 0x90, 0x90, 0x90, 0x90}
		f.code(code, body...)
		fr := &Frame{PC: code + uint64(len(body)), SP: sp, How: MethodCFI}
		fr.regs.set(regnum.AMD64_Rbp, rbp)
		if got := callArgsFrom(f, fr, code, code+uint64(len(body)), true); got.Known != [NumArgRegs]bool{} {
			t.Errorf("known %v, want none", got.Known)
		}
	})
}

// TestCallArgsJumpTable: a switch dispatched through a table of offsets
// (as gcc and clang emit it for position-independent code, after a bounds
// check): a case that starts with the lea that sets the argument keeps it
// known; a table entry that leads between the lea and the call makes it
// unknown; an entry that leads outside the function (a .cold part) is not
// followed; without the bounds check the table's size is not known.
func TestCallArgsJumpTable(t *testing.T) {
	const (
		code  = stackBase + 0x1000
		table = stackBase + 0x2000
		sp    = stackBase + 0x8000
		rbp   = stackBase + 0x8020
	)
	build := func(guard bool) (body []byte, caseAt, callAt, ret, end uint64) {
		// cmp $2,%eax; ja default; lea table(%rip),%rcx;
		// movslq (%rcx,%rax,4),%rax; add %rcx,%rax; jmp *%rax;
		// case: lea -0x14(%rbp),%rdi; call; default: ret.
		if guard {
			body = []byte{0x83, 0xf8, 0x02, 0x77, 0x00} // ja's displacement is set below
		} else {
			body = []byte{0x83, 0xf8, 0x02, 0x90, 0x90}
		}
		at := code + uint64(len(body))
		body = append(body, append([]byte{0x48, 0x8d, 0x0d}, rel32(at+7, table)...)...)
		body = append(body, 0x48, 0x63, 0x04, 0x81, 0x48, 0x01, 0xc8, 0xff, 0xe0)
		caseAt = code + uint64(len(body))
		body = append(body, 0x48, 0x8d, 0x7d, 0xec)
		callAt = code + uint64(len(body))
		body = append(body, append([]byte{0xe8}, rel32(callAt+5, 0x1000)...)...)
		ret = code + uint64(len(body))
		body = append(body, 0xc3) // default
		if guard {
			body[4] = byte(ret - (code + 5))
		}
		return body, caseAt, callAt, ret, code + uint64(len(body))
	}
	for _, c := range []struct {
		name    string
		guard   bool
		entries func(caseAt, callAt uint64) []uint64
		known   bool
	}{
		{"every case starts at the lea", true, func(a, _ uint64) []uint64 { return []uint64{a, a, a} }, true},
		{"a case enters at the call", true, func(a, c uint64) []uint64 { return []uint64{a, c, a} }, false},
		{"a case in a .cold part", true, func(a, _ uint64) []uint64 { return []uint64{a, 0x10, a} }, true},
		{"no bounds check", false, func(a, _ uint64) []uint64 { return []uint64{a, a, a} }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			body, caseAt, callAt, ret, end := build(c.guard)
			f := &fakeTarget{stack: make([]byte, stackBytes)}
			f.code(code, body...)
			for i, e := range c.entries(caseAt, callAt) {
				binary.LittleEndian.PutUint32(f.stack[table-stackBase+uint64(4*i):], uint32(int32(int64(e)-int64(table))))
			}
			fr := &Frame{PC: ret, SP: sp, How: MethodCFI}
			fr.regs.set(regnum.AMD64_Rbp, rbp)
			got := callArgsFrom(f, fr, code, end, true)
			if got.Known[0] != c.known || (c.known && got.Value[0] != rbp-0x14) {
				t.Errorf("rdi = %#x known %v, want %#x known %v", got.Value[0], got.Known[0], uint64(rbp-0x14), c.known)
			}
		})
	}
}
