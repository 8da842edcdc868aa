package ptrace

import "testing"

func TestReturnSite(t *testing.T) {
	for _, c := range []struct {
		name string
		code []byte
		off  int
		err  string
	}{
		{"bare return (LLVM's ompd_bp_*, glibc's _dl_debug_state)", []byte{0xc3, 0x66, 0x90}, 0, ""},
		{"endbr64 first", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0xc3}, 4, ""},
		{"repz ret: the opcode after the prefix", []byte{0xf3, 0xc3}, 1, ""},
		{"frame set up and torn down (-O0)", []byte{0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3}, 5, ""},
		{"a branch before the return", []byte{0x74, 0x01, 0x90, 0xc3}, 0, "offset 0: JE .+1 comes before the function's first return"},
		{"a call before the return", []byte{0xe8, 0, 0, 0, 0, 0xc3}, 0, "offset 0: CALL .+0 comes before the function's first return"},
		{"a return that pops arguments", []byte{0xc2, 0x08, 0x00}, 0, "offset 0: a return that pops arguments (RET 0x8) is not supported"},
		{"no return", []byte{0x90, 0x90}, 0, "no return instruction among the function's first instructions"},
		{"undecodable", []byte{0x90, 0x0f, 0x04}, 0, "undecodable instruction at offset 1: unrecognized instruction"},
	} {
		off, err := ReturnSite(c.code)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.err || (c.err == "" && off != c.off) {
			t.Errorf("%s: offset %d, error %q; want %d, %q", c.name, off, got, c.off, c.err)
		}
	}
}
