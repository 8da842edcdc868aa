package recovery

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"golang.org/x/arch/x86/x86asm"
)

// tracedFunctions are runtime functions without exported symbols that
// backtraces need by name (what a thread waiting in them does). Debian's
// builds keep the runtime's debug trace strings ("NAME: T#%d ..."), and
// each such function is found as the one function whose code uses its own
// trace strings and no other function's.
var tracedFunctions = []string{"__kmp_join_barrier", "__kmp_fork_barrier", "__kmp_join_call", "__kmp_launch_thread"}

// tracePrefix matches the start of a runtime trace string. Compiled when
// first needed: only a recovery does, and at every start it cost a run
// 0.4 ms.
var tracePrefix = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(__kmpc?_[A-Za-z0-9_]+): `) })

// functions names the traced functions; one that cannot be told is left
// out with a warning.
func (r *recoverer) functions() {
	for _, name := range tracedFunctions {
		start, err := r.tracedFunction(name)
		if err != nil {
			r.warn("%s is not recovered: %v", name, err)
			continue
		}
		r.set(name, start, "the one function that uses the trace strings \""+name+": ...\"")
	}
}

// traceStrings returns the addresses of the strings in .rodata that start
// with prefix.
func (r *recoverer) traceStrings(prefix string) []uint64 {
	var out []uint64
	data := r.rodata.Data
	pat := append([]byte{0}, prefix...)
	for i := 0; ; {
		j := bytes.Index(data[i:], pat)
		if j < 0 {
			return out
		}
		out = append(out, r.rodata.Addr+uint64(i+j+1))
		i += j + 1
	}
}

// tracedFunction finds the function that uses the trace strings of name.
func (r *recoverer) tracedFunction(name string) (uint64, error) {
	strs := r.traceStrings(name + ": ")
	if len(strs) == 0 {
		return 0, fmt.Errorf("no trace strings \"%s: ...\" in .rodata (a build without them)", name)
	}
	refs := r.refsToAny(strs)
	var starts []uint64
	for _, at := range refs {
		fde := r.im.FDEForPC(at)
		if fde == nil {
			return 0, fmt.Errorf("a use of its trace strings at %#x is in no function", at)
		}
		if !slices.Contains(starts, fde.Begin()) {
			starts = append(starts, fde.Begin())
		}
	}
	switch len(starts) {
	case 0:
		return 0, fmt.Errorf("no code uses its trace strings")
	case 1:
	default:
		return 0, fmt.Errorf("%d functions use its trace strings (it is inlined)", len(starts))
	}
	f, err := r.funcAt(starts[0])
	if err != nil {
		return 0, err
	}
	// Another function's trace strings in the same code mean that
	// function was inlined here, or this one into it: no name then.
	for _, x := range f.refs {
		if x.kind != refAddr || !r.rodata.Contains(x.target) {
			continue
		}
		s := r.rodata.Data[x.target-r.rodata.Addr:]
		if n := bytes.IndexByte(s, 0); n >= 0 {
			s = s[:n]
		}
		if m := tracePrefix().FindSubmatch(s); m != nil && !sameTraceName(string(m[1]), name) {
			return 0, fmt.Errorf("the function at %#x that uses them also uses the trace strings of %s", f.start, m[1])
		}
	}
	return f.start, nil
}

// refsToAny returns the instructions in .text whose rip-relative operand
// is one of addrs, in one pass over the code.
func (r *recoverer) refsToAny(addrs []uint64) []uint64 {
	want := map[uint64]bool{}
	for _, a := range addrs {
		want[a] = true
	}
	data := r.text.Data
	var out []uint64
	for i := 2; i+4 <= len(data); i++ {
		next := r.text.Addr + uint64(i) + 4
		target := uint64(int64(next) + int64(int32(binary.LittleEndian.Uint32(data[i:]))))
		if !want[target] {
			continue
		}
		for k := 2; k <= 7 && k <= i; k++ {
			in, err := x86asm.Decode(data[i-k:], 64)
			if err == nil && in.Len == k+4 && hasRIPMem(in, int64(next), target) {
				out = append(out, r.text.Addr+uint64(i-k))
				break
			}
		}
	}
	return out
}

// sameTraceName reports whether a trace string's prefix names the
// function name: the name itself, or the name and a number (the runtime
// numbers some of a function's traces: "__kmp_join_call1: ...").
func sameTraceName(prefix, name string) bool {
	rest, ok := strings.CutPrefix(prefix, name)
	return ok && strings.Trim(rest, "0123456789") == ""
}
