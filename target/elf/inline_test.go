package elf

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// inlineSource returns the absolute path of testdata/inline.c.
func inlineSource(t *testing.T) string { return testdataPath(t, "inline.c") }

// inlineLine returns the line of testdata/inline.c that carries
// "LINE:name".
func inlineLine(t *testing.T, name string) int {
	t.Helper()
	data, err := os.ReadFile(inlineSource(t))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, "/* LINE:"+name+" */") {
			n = i + 1
		}
	}
	if n == 0 {
		t.Fatalf("no LINE:%s marker in testdata/inline.c", name)
	}
	return n
}

// buildInline compiles testdata/inline.c with cc and the optimization
// and debug flags into dir/name (scripts/setup.sh installs the compilers).
func buildInline(t *testing.T, cc, dir, name string, flags ...string) string {
	t.Helper()
	if _, err := exec.LookPath(cc); err != nil {
		t.Fatalf("%s not installed (run scripts/setup.sh): %v", cc, err)
	}
	out := filepath.Join(dir, name)
	args := append([]string{"-O2", "-g", "-o", out, inlineSource(t)}, flags...)
	if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, b)
	}
	return out
}

func openInline(t *testing.T, path string) *Image {
	t.Helper()
	im, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	return im
}

// inlineBuilds are the builds of testdata/inline.c that are checked.
var inlineBuilds = []struct {
	name, cc string
	flags    []string
}{
	{"gcc", "gcc", nil},
	{"gcc-dwarf4", "gcc", []string{"-gdwarf-4"}},
	{"gcc-nopie", "gcc", []string{"-fno-pie", "-no-pie"}},
	// LTO: the code's units refer to the early debug units for the
	// functions' names and declarations (DW_FORM_ref_addr), which a
	// lookup that indexes one unit reads from the other.
	{"gcc-lto", "gcc", []string{"-flto", "-ffat-lto-objects"}},
	{"clang", "clang-19", nil},
	{"clang-dwarf4", "clang-19", []string{"-gdwarf-4"}},
}

// TestFramesAt checks the frames at the asm labels of testdata/inline.c:
// inner inlined into middle inlined into outer, middle inlined into
// outer, and outer alone.
func TestFramesAt(t *testing.T) {
	for _, b := range inlineBuilds {
		t.Run(b.name, func(t *testing.T) {
			im := openInline(t, buildInline(t, b.cc, t.TempDir(), "prog", b.flags...))
			src := inlineSource(t)
			at := func(label string) uint64 {
				s, ok := im.Symbol(label)
				if !ok {
					t.Fatalf("no symbol %s", label)
				}
				return s.Value
			}
			line := func(m string) int { return inlineLine(t, m) }
			cases := []struct {
				label string
				want  []SourceFrame
			}{
				{"inner_mark", []SourceFrame{
					{"inner", src, line("inner_mark"), true},
					{"middle", src, line("middle_call"), true},
					{"outer", src, line("outer_call"), false},
				}},
				{"middle_mark", []SourceFrame{
					{"middle", src, line("middle_mark"), true},
					{"outer", src, line("outer_call"), false},
				}},
				{"outer_mark", []SourceFrame{
					{"outer", src, line("outer_mark"), false},
				}},
			}
			for _, c := range cases {
				addr := at(c.label)
				got := im.FramesAt(addr)
				if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Errorf("FramesAt(%s=%#x) =\n\t%v\nwant\n\t%v", c.label, addr, got, c.want)
				}
				// The ends agree with FuncAt and LineAt, which stay
				// as they were.
				fn, _ := im.FuncAt(addr)
				f, l, _ := im.LineAt(addr)
				if len(got) == 0 || got[len(got)-1].Function != fn || got[0].File != f || got[0].Line != l {
					t.Errorf("FramesAt(%s) = %v; FuncAt %q, LineAt %s:%d", c.label, got, fn, f, l)
				}
				if fn != "outer" {
					t.Errorf("FuncAt(%s) = %q, want outer", c.label, fn)
				}
			}
			if _, err := im.DebugInfo(); err != nil {
				t.Errorf("DebugInfo: %v", err)
			}
			// No function, no line: no frames.
			if g := at("sink"); im.FramesAt(g) != nil {
				t.Errorf("FramesAt(sink) = %v, want nil", im.FramesAt(g))
			}
		})
	}
}

// symbolizers are the tools FramesAt is compared with, each run as
// TOOL ARGS... -e PROG ADDR...; both print, for every address, a line
// 0x... then a function line and a file:line line per frame, innermost
// first.
var symbolizers = []struct {
	name string
	args []string
	// skip names builds the tool reads wrongly.
	skip map[string]string
}{
	{"addr2line", []string{"-a", "-f", "-i"}, map[string]string{
		// binutils 2.40 shows no inlined frame for an inlined
		// subroutine whose DW_AT_ranges is a DW_FORM_rnglistx
		// index, as clang's DWARF 5 has (llvm-symbolizer and
		// llvm-dwarfdump --lookup show them).
		"clang": "addr2line ignores the rnglistx ranges of inlined subroutines",
		// binutils 2.40 names the file of every line of LTO code
		// <artificial> (the LTRANS unit's own name), not the line
		// table's file; llvm-symbolizer gives the file.
		"gcc-lto": "addr2line names the files of LTO code <artificial>",
	}},
	{"llvm-symbolizer-19", []string{"--output-style=GNU", "-a", "-f", "-i"}, nil},
}

// TestFramesAtSymbolizers compares FramesAt with addr2line -f -i and
// llvm-symbolizer -f -i at every line-table row address (and the byte
// after it) of testdata/inline.c's functions. The asm labels and
// several.cold are stripped first: llvm-symbolizer names the outermost
// frame after the symbol table.
func TestFramesAtSymbolizers(t *testing.T) {
	if _, err := exec.LookPath("objcopy"); err != nil {
		t.Fatalf("objcopy not installed (run scripts/setup.sh): %v", err)
	}
	for _, b := range inlineBuilds {
		t.Run(b.name, func(t *testing.T) {
			dir := t.TempDir()
			marked := buildInline(t, b.cc, dir, "marked", b.flags...)
			path := filepath.Join(dir, "prog")
			if out, err := exec.Command("objcopy", "-N", "inner_mark", "-N", "middle_mark", "-N", "outer_mark", "-N", "several.cold", marked, path).CombinedOutput(); err != nil {
				t.Fatalf("objcopy: %v\n%s", err, out)
			}
			im := openInline(t, path)
			idx := im.wholeIndex()
			if idx == nil {
				t.Fatal(im.DebugInfo())
			}
			seen := map[uint64]bool{}
			var addrs []uint64
			for _, r := range idx.rows {
				for _, a := range []uint64{r.addr, r.addr + 1} {
					if fn, ok := im.FuncAt(a); ok && !seen[a] && (fn == "outer" || fn == "several" || fn == "main") {
						seen[a] = true
						addrs = append(addrs, a)
					}
				}
			}
			if len(addrs) < 10 {
				t.Fatalf("only %d addresses in outer, several and main", len(addrs))
			}
			got := map[uint64]string{}
			inlined := 0
			for _, a := range addrs {
				var fs []string
				for _, f := range im.FramesAt(a) {
					fs = append(fs, frameString(f.Function, f.File, f.Line))
				}
				if len(fs) > 1 {
					inlined++
				}
				got[a] = strings.Join(fs, " | ")
			}
			if inlined < 4 {
				t.Errorf("only %d of %d addresses have inlined frames", inlined, len(addrs))
			}
			// gcc moves the cold block of several, with an inlined
			// twice, to several.cold.
			if cold, ok := openInline(t, marked).Symbol("several.cold"); ok {
				n := 0
				for _, a := range addrs {
					if a >= cold.Value && a < cold.Value+cold.Size && strings.HasPrefix(got[a], "twice ") {
						n++
					}
				}
				if n == 0 {
					t.Errorf("no address of several.cold (%+v) is compared with an inlined twice", cold)
				}
			} else if b.cc == "gcc" {
				t.Errorf("gcc made no several.cold")
			}
			compared := 0
			for _, tool := range symbolizers {
				if _, err := exec.LookPath(tool.name); err != nil {
					t.Fatalf("%s not installed (run scripts/setup.sh): %v", tool.name, err)
				}
				if why, ok := tool.skip[b.name]; ok {
					t.Logf("not compared with %s: %s", tool.name, why)
					continue
				}
				args := append(append([]string(nil), tool.args...), "-e", path)
				for _, a := range addrs {
					args = append(args, fmt.Sprintf("%#x", a))
				}
				out, err := exec.Command(tool.name, args...).Output()
				if err != nil {
					t.Fatalf("%s: %v", tool.name, err)
				}
				want := parseSymbolizer(t, string(out))
				for _, a := range addrs {
					if w := strings.Join(want[a], " | "); got[a] != w {
						t.Errorf("at %#x:\n\tFramesAt %s\n\t%s %s", a, got[a], tool.name, w)
					}
				}
				compared++
			}
			if compared == 0 {
				t.Fatal("no symbolizer compared")
			}
			t.Logf("%d addresses, %d with inlined frames", len(addrs), inlined)
		})
	}
}

// frameString formats a frame as the symbolizers print it, with an
// unknown line (0) as ??:0.
func frameString(fn, file string, line int) string {
	if fn == "" {
		fn = "??"
	}
	if file == "" || line == 0 {
		return fn + " ??:0"
	}
	return fmt.Sprintf("%s %s:%d", fn, file, line)
}

var (
	discriminator = regexp.MustCompile(` \(discriminator \d+\)$`)
	position      = regexp.MustCompile(`^(.*):(\d+|\?)$`)
)

// parseSymbolizer reads the output of addr2line -a -f -i (or
// llvm-symbolizer in GNU style): for every address a line 0x..., then
// pairs of function and file:line lines.
func parseSymbolizer(t *testing.T, out string) map[uint64][]string {
	t.Helper()
	res := map[uint64][]string{}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var cur uint64
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "0x") {
			a, err := strconv.ParseUint(l[2:], 16, 64)
			if err != nil {
				t.Fatalf("output line %q: %v", l, err)
			}
			cur = a
			res[cur] = nil
			continue
		}
		if i+1 >= len(lines) {
			t.Fatalf("output ends after function %q", l)
		}
		i++
		m := position.FindStringSubmatch(discriminator.ReplaceAllString(lines[i], ""))
		if m == nil {
			t.Fatalf("output line %q is no file:line", lines[i])
		}
		line, _ := strconv.Atoi(m[2]) // ? is 0
		res[cur] = append(res[cur], frameString(strings.TrimPrefix(l, "??"), strings.TrimPrefix(m[1], "??"), line))
	}
	return res
}

// TestFramesAtNoDWARF: without DWARF the only frame is the symbol's.
func TestFramesAtNoDWARF(t *testing.T) {
	dir := t.TempDir()
	path := buildInline(t, "gcc", dir, "prog", "-g0")
	im := openInline(t, path)
	s, ok := im.Symbol("outer")
	if !ok {
		t.Fatal("no symbol outer")
	}
	got := im.FramesAt(s.Value + 1)
	want := []SourceFrame{{Function: "outer"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("FramesAt(outer+1) = %v, want %v", got, want)
	}
}

// TestSameNameFiles links two units compiled from files of the same
// relative name in different directories: each line keeps its own
// directory.
func TestSameNameFiles(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Fatalf("gcc not installed (run scripts/setup.sh): %v", err)
	}
	dir := t.TempDir()
	for i, body := range []string{
		"int one(int x) { return x + 1; }\n",
		"int one(int);\n\nint main(void) { return one(2); }\n",
	} {
		d := filepath.Join(dir, fmt.Sprint("d", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "x.c"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("gcc", "-g", "-O0", "-c", "-o", "x.o", "x.c")
		cmd.Dir = d
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("gcc -c in %s: %v\n%s", d, err, b)
		}
	}
	prog := filepath.Join(dir, "prog")
	if b, err := exec.Command("gcc", "-o", prog, filepath.Join(dir, "d0/x.o"), filepath.Join(dir, "d1/x.o")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	im := openInline(t, prog)
	for i, fn := range []string{"one", "main"} {
		s, ok := im.Symbol(fn)
		if !ok {
			t.Fatalf("no symbol %s", fn)
		}
		wantFile := filepath.Join(dir, fmt.Sprint("d", i), "x.c")
		wantLine := 1 + 2*i
		if f, l, ok := im.LineAt(s.Value); !ok || f != wantFile || l != wantLine {
			t.Errorf("LineAt(%s) = %s:%d %v, want %s:%d", fn, f, l, ok, wantFile, wantLine)
		}
	}
}

// TestResolveName follows abstract origins through abstract inlined
// subroutines and stops on cycles and long chains.
func TestResolveName(t *testing.T) {
	subs := map[dwarf.Offset]*subInfo{
		1: {name: "leaf"},
		2: {origin: 1, hasOrigin: true},
		3: {origin: 3, hasOrigin: true}, // a cycle
	}
	inl := map[dwarf.Offset]dwarf.Offset{10: 2, 11: 10, 12: 12, 13: 99}
	for i := dwarf.Offset(20); i < 40; i++ {
		inl[i] = i - 1
	}
	inl[20] = 1
	for _, c := range []struct {
		off  dwarf.Offset
		want string
	}{
		{1, "leaf"}, {2, "leaf"}, {10, "leaf"}, {11, "leaf"},
		{3, ""}, {12, ""}, {13, ""}, {99, ""},
		{20 + maxOriginDepth - 1, "leaf"}, {20 + maxOriginDepth, ""},
	} {
		if got := resolveName(subs, inl, c.off); got != c.want {
			t.Errorf("resolveName(%d) = %q, want %q", c.off, got, c.want)
		}
	}
}

// TestInlineChainBounded: a malformed node list neither loops nor
// indexes out of range.
func TestInlineChainBounded(t *testing.T) {
	idx := &dwarfIndex{
		spans:    []span{{lo: 0x100, hi: 0x200, id: 0}},
		inlSpans: []span{{lo: 0x100, hi: 0x110, id: 0}, {lo: 0x110, hi: 0x120, id: 1}, {lo: 0x120, hi: 0x130, id: 7}, {lo: 0x130, hi: 0x140, id: 2}},
		inl: []inlineNode{
			{name: "a", parent: 0}, // its own parent
			{name: "b", parent: 5}, // a parent past the end
			{name: "c", fn: 3, parent: -1},
		},
	}
	for _, c := range []struct {
		addr uint64
		n    int
	}{{0x100, 1}, {0x110, 1}, {0x120, 0}, {0x130, 0}, {0x140, 0}, {0x50, 0}} {
		if got := idx.inlineChain(c.addr); len(got) != c.n {
			t.Errorf("inlineChain(%#x) has %d nodes, want %d", c.addr, len(got), c.n)
		}
	}
}

// TestFramesAtHostile corrupts the DWARF sections of an optimized build
// and looks frames up everywhere: nothing may panic or hang.
func TestFramesAtHostile(t *testing.T) {
	dir := t.TempDir()
	path := buildInline(t, "gcc", dir, "prog")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var regions [][2]int
	for _, s := range ef.Sections {
		if strings.HasPrefix(s.Name, ".debug_") && s.Type != elf.SHT_NOBITS && s.Size > 0 {
			regions = append(regions, [2]int{int(s.Offset), int(s.Size)})
		}
	}
	text := ef.Section(".text")
	ef.Close()
	if len(regions) == 0 || text == nil {
		t.Fatal("no DWARF sections or no .text")
	}
	bad := filepath.Join(dir, "bad")
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 300; i++ {
		data := bytes.Clone(orig)
		for j := 0; j < 1+i%8; j++ {
			r := regions[rng.IntN(len(regions))]
			data[r[0]+rng.IntN(r[1])] = byte(rng.Uint32())
		}
		if err := os.WriteFile(bad, data, 0o644); err != nil {
			t.Fatal(err)
		}
		im, err := open(bad, nil)
		if err != nil {
			continue
		}
		for a := text.Addr; a < text.Addr+text.Size; a += 3 {
			for _, f := range im.FramesAt(a) {
				_ = f
			}
		}
		im.DebugInfo()
		im.Close()
	}
}
