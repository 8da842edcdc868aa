package elf

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// tailcallSources returns the absolute paths of testdata/tailcall.c and
// testdata/tailcall2.c.
func tailcallSources(t *testing.T) (string, string) {
	return testdataPath(t, "tailcall.c"), testdataPath(t, "tailcall2.c")
}

// lineMarker returns the line of the file at path that carries
// "LINE:name".
func lineMarker(t *testing.T, path, name string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, "/* LINE:"+name+" */") {
			return i + 1
		}
	}
	t.Fatalf("no LINE:%s marker in %s", name, path)
	return 0
}

// buildTailcall compiles testdata/tailcall.c and tailcall2.c with cc at
// -O2 -g and flags into dir/name.
func buildTailcall(t *testing.T, cc, dir, name string, flags ...string) string {
	t.Helper()
	if _, err := exec.LookPath(cc); err != nil {
		t.Fatalf("%s not installed (run scripts/setup.sh): %v", cc, err)
	}
	a, b := tailcallSources(t)
	out := filepath.Join(dir, name)
	args := append([]string{"-O2", "-g", "-o", out, a, b}, flags...)
	if cc == "clang-19" {
		args = append(args, "-Wno-unknown-attributes") // noclone is gcc's
	}
	if o, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, o)
	}
	return out
}

// objdumpInsn is one instruction of objdump -d's listing.
type objdumpInsn struct {
	addr uint64
	size uint64
	text string
}

var (
	objdumpFunc = regexp.MustCompile(`^[0-9a-f]+ <([^>]+)>:$`)
	objdumpLine = regexp.MustCompile(`^\s+([0-9a-f]+):\t((?:[0-9a-f]{2} )+)\s*\t(.*)$`)
)

// disassemble returns the instructions of every function of the program
// at path, as objdump -d lists them (the oracle for the addresses the
// tests expect).
func disassemble(t *testing.T, path string) map[string][]objdumpInsn {
	t.Helper()
	out, err := exec.Command("objdump", "-d", "--insn-width=16", path).Output()
	if err != nil {
		t.Fatalf("objdump -d %s: %v", path, err)
	}
	funcs := map[string][]objdumpInsn{}
	cur := ""
	for _, l := range strings.Split(string(out), "\n") {
		if m := objdumpFunc.FindStringSubmatch(l); m != nil {
			cur = m[1]
			continue
		}
		m := objdumpLine.FindStringSubmatch(l)
		if m == nil || cur == "" {
			continue
		}
		a, err := strconv.ParseUint(m[1], 16, 64)
		if err != nil {
			t.Fatalf("objdump line %q: %v", l, err)
		}
		size := uint64(len(strings.Fields(m[2])))
		funcs[cur] = append(funcs[cur], objdumpInsn{addr: a, size: size, text: strings.Join(strings.Fields(m[3]), " ")})
	}
	return funcs
}

// after returns the address right after the one instruction of function
// fn that is op (call or jmp) to function to.
func after(t *testing.T, funcs map[string][]objdumpInsn, fn, op, to string) uint64 {
	t.Helper()
	re := regexp.MustCompile(`^` + op + ` [0-9a-f]+ <` + regexp.QuoteMeta(to) + `>$`)
	insns := funcs[fn]
	found := -1
	for i, in := range insns {
		if re.MatchString(in.text) {
			if found >= 0 {
				t.Fatalf("%s has two %s %s instructions", fn, op, to)
			}
			found = i
		}
	}
	if found < 0 {
		t.Fatalf("%s has no %s %s instruction: %v", fn, op, to, insns)
	}
	return insns[found].addr + insns[found].size
}

// TestTailCalls checks the tail call frames of testdata/tailcall.c's
// program built by gcc (DWARF 5: DW_TAG_call_site, DW_AT_call_tail_call;
// DWARF 4: DW_TAG_GNU_call_site, DW_AT_GNU_tail_call), against the
// addresses objdump shows: main's call of top returns where leaf runs,
// through mid and top, which jumped; the chain is unique even though amb
// has two jumps; a chain through amb_a or amb_b to leaf2 is ambiguous; a
// direct call has none.
func TestTailCalls(t *testing.T) {
	for _, b := range []struct {
		name  string
		flags []string
	}{
		{"gcc", nil},
		{"gcc-dwarf4", []string{"-gdwarf-4"}},
		{"gcc-nopie", []string{"-fno-pie", "-no-pie"}},
	} {
		t.Run(b.name, func(t *testing.T) {
			path := buildTailcall(t, "gcc", t.TempDir(), "prog", b.flags...)
			im := openInline(t, path)
			funcs := disassemble(t, path)
			src, src2 := tailcallSources(t)
			sym := func(name string) uint64 {
				s, ok := im.Symbol(name)
				if !ok {
					t.Fatalf("no symbol %s", name)
				}
				return s.Value
			}
			mid := TailCallFrame{PC: after(t, funcs, "mid", "jmp", "leaf"), Function: "mid", File: src, Line: lineMarker(t, src, "mid_tail")}
			top := TailCallFrame{PC: after(t, funcs, "top", "jmp", "mid"), Function: "top", File: src2, Line: lineMarker(t, src2, "top_tail")}
			amb := TailCallFrame{PC: after(t, funcs, "amb", "jmp", "amb_a"), Function: "amb", File: src, Line: lineMarker(t, src, "amb_a_tail")}
			callTop := after(t, funcs, "main", "call", "top")
			callAmb := after(t, funcs, "main", "call", "amb")
			callLeaf := after(t, funcs, "main", "call", "leaf")
			cases := []struct {
				name        string
				ret, callee uint64
				want        []TailCallFrame
			}{
				{"main calls top, top jumps to mid, mid to leaf", callTop, sym("leaf_mark"), []TailCallFrame{mid, top}},
				{"main calls top, top jumps to mid", callTop, sym("mid"), []TailCallFrame{top}},
				{"main calls amb, amb jumps to amb_a", callAmb, sym("amb_a"), []TailCallFrame{amb}},
				{"amb_a and amb_b both jump to leaf2", callAmb, sym("leaf2_mark"), nil},
				{"main calls leaf", callLeaf, sym("leaf_mark"), nil},
				{"main calls amb", callAmb, sym("amb"), nil},
				{"not a return address", callTop - 1, sym("leaf_mark"), nil},
				{"main does not call into leaf2 through top", callTop, sym("leaf2_mark"), nil},
			}
			for _, c := range cases {
				got := im.TailCalls(c.ret, c.callee)
				if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", c.want) {
					t.Errorf("%s: TailCalls(%#x, %#x) =\n\t%+v\nwant\n\t%+v", c.name, c.ret, c.callee, got, c.want)
				}
			}
			if _, err := im.DebugInfo(); err != nil {
				t.Errorf("DebugInfo: %v", err)
			}
			// Every jump of the program is a tail call site with a
			// resolved target: main's call of top names top's
			// declaration (top is in tailcall2.c), which is resolved
			// to top's definition.
			idx := im.wholeIndex()
			if len(idx.tails) != 6 {
				t.Errorf("%d tail call sites, want 6 (mid, amb_a, amb_b, amb twice, top): %+v", len(idx.tails), idx.tails)
			}
			for _, s := range idx.tails {
				if s.status != targetResolved || !s.hasRet {
					t.Errorf("tail call site %+v: not resolved", s)
				}
			}
			if s, ok := idx.callAt(callTop); !ok || s.status != targetResolved || s.target != sym("top") {
				t.Errorf("main's call site of top: %+v, %v; want target %#x", s, ok, sym("top"))
			}
		})
	}
}

// TestTailCallsClang: clang describes a tail call by the address of its
// jump (DW_AT_call_pc), not the address after it, so no tail call frame
// can be given its pc: none is returned (gdb shows none either).
func TestTailCallsClang(t *testing.T) {
	path := buildTailcall(t, "clang-19", t.TempDir(), "prog")
	im := openInline(t, path)
	funcs := disassemble(t, path)
	leaf, ok := im.Symbol("leaf_mark")
	if !ok {
		t.Fatal("no symbol leaf_mark")
	}
	callTop := after(t, funcs, "main", "call", "top")
	if got := im.TailCalls(callTop, leaf.Value); got != nil {
		t.Errorf("TailCalls(%#x, leaf_mark) = %+v, want none", callTop, got)
	}
	idx := im.wholeIndex()
	if len(idx.tails) == 0 {
		t.Fatal("clang's DWARF has no tail call sites: the test checks nothing")
	}
	for _, s := range idx.tails {
		if s.hasRet || s.status != targetResolved {
			t.Errorf("tail call site %+v: want a resolved target and no return pc", s)
		}
	}
}

// TestTailChain checks the search for the one chain of tail calls on
// made-up call graphs: functions are numbered, a site is from->to.
func TestTailChain(t *testing.T) {
	type edge struct {
		from, to uint64
		status   uint8
	}
	e := func(from, to uint64) edge { return edge{from, to, targetResolved} }
	var long, longer []edge
	for i := uint64(1); i <= MaxTailCallChain; i++ {
		long = append(long, e(i, i+1))
	}
	for i := uint64(1); i <= MaxTailCallChain+1; i++ {
		longer = append(longer, e(i, i+1))
	}
	var wide []edge
	for i := uint64(100); i < 100+maxTailSearchFuncs; i++ {
		wide = append(wide, e(1, i))
	}
	wide = append(wide, e(100, 2))
	cases := []struct {
		name     string
		sites    []edge
		from, to uint64
		want     string // the chain as from>to ..., "" for none
	}{
		{"one chain", []edge{e(1, 2), e(2, 3)}, 1, 3, "1>2 2>3"},
		{"other jumps lead elsewhere", []edge{e(1, 2), e(1, 5), e(5, 6), e(2, 3)}, 1, 3, "1>2 2>3"},
		{"two jumps to the same function", []edge{e(1, 2), e(1, 2), e(2, 3)}, 1, 3, ""},
		{"two ways", []edge{e(1, 2), e(1, 4), e(2, 3), e(4, 3)}, 1, 3, ""},
		{"a cycle on the way", []edge{e(1, 2), e(2, 1), e(2, 3)}, 1, 3, ""},
		{"a cycle through the callee", []edge{e(1, 3), e(3, 4), e(4, 3)}, 1, 3, ""},
		{"a cycle that does not lead to the callee", []edge{e(1, 3), e(1, 7), e(7, 8), e(8, 7)}, 1, 3, "1>3"},
		{"a jump that could go anywhere", []edge{e(1, 2), e(2, 3), {1, 0, targetUnknown}}, 1, 3, ""},
		{"a jump into another image", []edge{e(1, 2), e(2, 3), {1, 0, targetOutside}}, 1, 3, "1>2 2>3"},
		{"no way", []edge{e(1, 2), e(3, 4)}, 1, 4, ""},
		{"no jumps", nil, 1, 2, ""},
		{"MaxTailCallChain jumps", long, 1, MaxTailCallChain + 1, strings.TrimSpace(chainString(MaxTailCallChain))},
		{"more jumps than MaxTailCallChain", longer, 1, MaxTailCallChain + 2, ""},
		{"too many functions to search", wide, 1, 2, ""},
	}
	for _, c := range cases {
		idx := &dwarfIndex{}
		for i, s := range c.sites {
			idx.tails = append(idx.tails, callSite{from: s.from, target: s.to, status: s.status, ret: uint64(1000 + i), hasRet: true, tail: true})
		}
		sortTails(idx.tails)
		var got []string
		for _, s := range tailChain(idx.tailsFrom, c.from, c.to) {
			got = append(got, fmt.Sprintf("%d>%d", s.from, s.target))
		}
		if g := strings.Join(got, " "); g != c.want {
			t.Errorf("%s: chain %q, want %q", c.name, g, c.want)
		}
	}
}

// chainString is "1>2 2>3 ... n>n+1".
func chainString(n int) string {
	var s strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&s, "%d>%d ", i, i+1)
	}
	return s.String()
}

// TestCallAt: the call site returning to an address; several that
// disagree on the target, or too many, are no answer.
func TestCallAt(t *testing.T) {
	site := func(ret, target uint64) callSite {
		return callSite{ret: ret, target: target, status: targetResolved, hasRet: true}
	}
	idx := &dwarfIndex{sites: []callSite{site(10, 1), site(20, 2), site(20, 2), site(30, 3), site(30, 4)}}
	for i := 0; i <= maxSameReturnPC; i++ {
		idx.sites = append(idx.sites, site(40, 5))
	}
	for _, c := range []struct {
		ret    uint64
		target uint64
		ok     bool
	}{
		{10, 1, true},
		{20, 2, true}, // the same site twice
		{30, 0, false},
		{40, 0, false},
		{11, 0, false},
		{5, 0, false},
		{50, 0, false},
	} {
		s, ok := idx.callAt(c.ret)
		if ok != c.ok || (ok && s.target != c.target) {
			t.Errorf("callAt(%d) = %+v, %v; want target %d, %v", c.ret, s, ok, c.target, c.ok)
		}
	}
}

// TestCallSitesBounded: an image with more call sites than the limit
// gets an error naming it and no tail call frames; the rest of its index
// stays.
func TestCallSitesBounded(t *testing.T) {
	path := buildTailcall(t, "gcc", t.TempDir(), "prog")
	funcs := disassemble(t, path)
	defer func(n int) { maxCallSites = n }(maxCallSites)
	maxCallSites = 3
	im := openInline(t, path)
	leaf, ok := im.Symbol("leaf_mark")
	if !ok {
		t.Fatal("no symbol leaf_mark")
	}
	if got := im.TailCalls(after(t, funcs, "main", "call", "top"), leaf.Value); got != nil {
		t.Errorf("TailCalls = %+v, want none", got)
	}
	_, err := im.DebugInfo()
	if err == nil || !strings.Contains(err.Error(), "more than 3 call sites (limit MaxCallSites)") {
		t.Errorf("DebugInfo: %v; want the call site limit", err)
	}
	if fn, ok := im.FuncAt(leaf.Value); !ok || fn != "leaf" {
		t.Errorf("FuncAt(leaf_mark) = %q, %v; want leaf", fn, ok)
	}
}
