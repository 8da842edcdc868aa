package elf

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-delve/delve/pkg/dwarf/frame"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/fuzzlimit"
)

// Fuzzing the ELF reader.
//
//	TMPDIR=/dev/shm go test -run '^$' -fuzz FuzzImage -fuzztime 10m -fuzzminimizetime 300x ./target/elf/
//
// (Every input is written to a file: a tmpfs makes that several times
// faster. The fuzzer minimizes every new interesting input for
// -fuzzminimizetime, 60s by default, which on a small machine takes most
// of the time while coverage still grows; a short time limit instead of a
// count makes the coordinator kill and restart the worker, which builds
// the seeds again, whenever minimizing takes longer.)
//
// An input is one ELF file, or an ELF file and its separate debug file
// joined as splitMagic, the first file's length (4 bytes, little endian),
// the first file, the second file. The second file is installed as the
// build-id debug file (ROOT/.build-id/xx/rest.debug) of the first, so that
// the lookups that go through a separate debug file are exercised too.
//
// The seeds are built by the test (gcc builds of testdata/symbols.c,
// testdata/inline.c and testdata/tailcall.c, with various debug formats,
// a split debug file, a shared object, truncated and corrupted copies)
// plus the fixture programs
// of testdata/bin when the fixtures can be built; testdata/fuzz/FuzzImage
// holds the checked-in ones, among them every crasher found so far.

// splitMagic starts an input that holds an ELF file and its debug file.
const splitMagic = "ELF+DBG\x00"

// maxFuzzAddrs bounds the addresses looked up per input.
const maxFuzzAddrs = 48

func FuzzImage(f *testing.F) {
	for _, s := range elfSeeds(f) {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzlimit.Exec(t, func() { exerciseImage(t, dir, data) })
	})
}

// splitInput returns the image and the debug file of an input (debug is
// nil when there is none).
func splitInput(data []byte) (main, debug []byte) {
	if len(data) < len(splitMagic)+4 || string(data[:len(splitMagic)]) != splitMagic {
		return data, nil
	}
	rest := data[len(splitMagic)+4:]
	n := uint64(binary.LittleEndian.Uint32(data[len(splitMagic):]))
	if n > uint64(len(rest)) {
		return rest, nil
	}
	return rest[:n], rest[n:]
}

// joinInput is the inverse of splitInput.
func joinInput(main, debug []byte) []byte {
	out := []byte(splitMagic)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(main)))
	out = append(out, main...)
	return append(out, debug...)
}

// exerciseImage opens data as an ELF file in dir and calls every lookup
// on addresses and names taken from it. Errors are fine; panics,
// unbounded loops or allocations and broken invariants are not.
func exerciseImage(t *testing.T, dir string, data []byte) {
	mainData, debugData := splitInput(data)
	path := filepath.Join(dir, "image")
	root := filepath.Join(dir, "root")
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, mainData, 0o644); err != nil {
		t.Fatal(err)
	}
	im, err := open(path, []string{root})
	if err != nil {
		return
	}
	defer im.Close()
	if id := im.BuildID(); debugData != nil && len(id) > 2 && len(id) < 200 {
		// The separate debug file is looked for lazily, on the first
		// lookup that needs it: install it now.
		p := filepath.Join(root, ".build-id", id[:2], id[2:]+".debug")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, debugData, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	im.Type()
	im.Machine()
	im.DebugLink()
	im.TLS()
	loads := im.Loads()
	if len(loads) > MaxLoads {
		t.Errorf("%d PT_LOAD segments, more than MaxLoads", len(loads))
	}

	// Addresses: the entry point, the segments' edges, the symbols',
	// functions', lines' and frame entries' starts, and two taken from
	// the input's last bytes.
	var addrs []uint64
	add := func(a ...uint64) {
		for _, x := range a {
			if len(addrs) < maxFuzzAddrs && !slices.Contains(addrs, x) {
				addrs = append(addrs, x)
			}
		}
	}
	add(im.ef.Entry)
	if n := len(mainData); n >= 16 {
		add(binary.LittleEndian.Uint64(mainData[n-8:]), binary.LittleEndian.Uint64(mainData[n-16:]))
	}
	buf := make([]byte, 256)
	for i, l := range loads {
		if i >= 8 {
			break
		}
		add(l.Vaddr, l.Vaddr+l.Memsz/2, l.Vaddr+l.Memsz-1)
		im.BiasFor(0x7f0000000000+l.Offset&^(pageSize-1), l.Offset)
		im.BiasFor(0x7f0000000000, l.Offset+1)
		checkRead(t, im, l.Vaddr, buf[:64])
		// Across the end of the file data into the zero fill.
		checkRead(t, im, l.Vaddr+l.Filesz-8, buf[:32])
		checkRead(t, im, l.Vaddr+l.Memsz-4, buf[:16])
	}
	checkRead(t, im, ^uint64(0)-7, buf[:16])

	im.LoadSymbols()
	names := []string{"main", "_start"}
	if im.symbols() != nil {
		for _, e := range im.symbols().names[:min(len(im.symbols().names), 4)] {
			names = append(names, e.Name)
		}
		for i, s := range im.symbols().syms {
			if i >= 4 {
				break
			}
			add(s.Value)
		}
	}
	for _, n := range names {
		if s, ok := im.Symbol(n); ok {
			add(s.Value, s.Value+s.Size)
			checkRead(t, im, s.Value, buf[:16])
		}
	}

	im.DebugInfo()
	im.DebugFile()
	var units []*dwarfIndex
	if dd := im.dw; dd != nil {
		if len(dd.spans) > 0 {
			add(dd.spans[0].lo, dd.spans[len(dd.spans)/2].lo, dd.spans[len(dd.spans)-1].hi-1)
		}
		for _, u := range dd.units {
			if u.idx != nil {
				units = append(units, u.idx)
			}
		}
	}
	for _, idx := range units {
		for _, spans := range [][]span{idx.spans, idx.inlSpans} {
			if len(spans) > 0 {
				add(spans[0].lo, spans[len(spans)/2].lo, spans[len(spans)-1].hi-1)
			}
		}
		if n := len(idx.rows); n > 0 {
			add(idx.rows[0].addr, idx.rows[n/2].addr, idx.rows[n-1].addr)
		}
		// Return pcs of calls and the functions tail calls reach, for
		// TailCalls.
		if n := len(idx.sites); n > 0 {
			add(idx.sites[0].ret, idx.sites[n/2].ret, idx.sites[n-1].ret)
		}
		if n := len(idx.tails); n > 0 {
			add(idx.tails[0].target, idx.tails[n-1].target)
		}
	}

	fdes, _ := im.FrameEntries()
	if len(fdes) > MaxFDEs {
		t.Errorf("%d frame description entries, more than MaxFDEs", len(fdes))
	}
	if n := len(fdes); n > 0 {
		add(fdes[0].Begin(), fdes[n/2].Begin()+1, fdes[n-1].End()-1)
	}

	for _, a := range addrs {
		im.SymbolAt(a)
		im.FuncDecl(a)
		name, fok := im.FuncAt(a)
		file, line, lok := im.LineAt(a)
		frames := im.FramesAt(a)
		switch {
		case len(frames) == 0:
			if fok || lok {
				t.Errorf("FramesAt(%#x) is empty, but FuncAt = %q, %v and LineAt = %s:%d, %v", a, name, fok, file, line, lok)
			}
		default:
			last := frames[len(frames)-1]
			if last.Function != name || last.Inlined {
				t.Errorf("FramesAt(%#x) ends with %+v, want the concrete function %q", a, last, name)
			}
			if frames[0].File != file || frames[0].Line != line {
				t.Errorf("FramesAt(%#x) starts at %s:%d, LineAt says %s:%d", a, frames[0].File, frames[0].Line, file, line)
			}
			for _, fr := range frames[:len(frames)-1] {
				if !fr.Inlined {
					t.Errorf("FramesAt(%#x): frame %+v before the last is not inlined", a, fr)
				}
			}
		}
		for i, callee := range addrs {
			if i >= maxFuzzTailPairs {
				break
			}
			checkTailCalls(t, im, a, callee)
		}
		if fde := im.FDEForPC(a); fde != nil {
			if !fde.Cover(a) {
				t.Errorf("FDEForPC(%#x) = %#x-%#x, which does not cover it", a, fde.Begin(), fde.End())
			}
			establishFrame(fde, a)
		}
	}

	exerciseTypes(im)
}

// maxFuzzTailPairs bounds the callees TailCalls is asked about for each
// address.
const maxFuzzTailPairs = 8

// checkTailCalls asks TailCalls about a call returning to ret in the
// function at callee and checks the frames it returns.
func checkTailCalls(t *testing.T, im *Image, ret, callee uint64) {
	t.Helper()
	frames := im.TailCalls(ret, callee)
	if len(frames) > MaxTailCallChain {
		t.Errorf("TailCalls(%#x, %#x) returns %d frames, more than MaxTailCallChain", ret, callee, len(frames))
	}
	for _, f := range frames {
		if f.PC == 0 {
			t.Errorf("TailCalls(%#x, %#x): frame %+v at pc 0", ret, callee, f)
		}
	}
}

// checkRead reads buf at vaddr and checks what ReadVaddr returns.
func checkRead(t *testing.T, im *Image, vaddr uint64, buf []byte) {
	t.Helper()
	n, err := im.ReadVaddr(vaddr, buf)
	if n < 0 || n > len(buf) || (err == nil && n != len(buf)) {
		t.Errorf("ReadVaddr(%#x, %d bytes) = %d, %v", vaddr, len(buf), n, err)
	}
}

// establishFrame runs the entry's CFI program up to pc, as target/unwind
// does (which turns the interpreter's panics into errors).
func establishFrame(fde *frame.FrameDescriptionEntry, pc uint64) {
	defer func() { recover() }()
	fde.EstablishFrame(pc)
}

// exerciseTypes indexes the image's types and reads the first few, their
// sizes and fields, as the OMPD layer reads the runtime's.
func exerciseTypes(im *Image) {
	ti, err := NewTypeIndex(im)
	if err != nil {
		return
	}
	ti.Size("no such type") // reads every unit
	var names []string
	for n := range ti.names {
		names = append(names, n)
	}
	slices.Sort(names)
	names = append(names[:min(len(names), 6)], "kmp_base_info_t", "no such type")
	for _, n := range names {
		ti.Size(n)
		ti.Field(n, "no such field")
		t, err := ti.typ(n)
		if err != nil {
			continue
		}
		if st, ok := t.(*dwarf.StructType); ok && len(st.Field) > 0 {
			ti.Field(n, st.Field[0].Name)
			ti.Field(n, st.Field[len(st.Field)-1].Name)
		}
	}
}

// elfSeeds returns the seed inputs: builds of the test programs in
// several debug formats, a split debug file, a shared object, the
// fixture programs, and truncated and corrupted copies.
func elfSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	var seeds [][]byte
	dir := tb.TempDir()
	if _, err := exec.LookPath("gcc"); err == nil {
		symbols, inline := testdataPath(tb, "symbols.c"), testdataPath(tb, "inline.c")
		tailcall, tailcall2 := testdataPath(tb, "tailcall.c"), testdataPath(tb, "tailcall2.c")
		// build compiles a seed; one that this gcc cannot build (for
		// an option it lacks) is left out.
		build := func(name, src string, flags ...string) []byte {
			out := filepath.Join(dir, name)
			args := append([]string{"-o", out, src}, flags...)
			if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
				tb.Logf("no seed %s: gcc %s: %v\n%s", name, strings.Join(args, " "), err, b)
				return nil
			}
			data, err := os.ReadFile(out)
			if err != nil {
				tb.Fatal(err)
			}
			return data
		}
		prog := build("prog", symbols, "-g", "-O0")
		if prog == nil {
			tb.Fatal("gcc cannot build testdata/symbols.c")
		}
		seeds = append(seeds,
			prog,
			build("inline", inline, "-g", "-O2"),
			build("inline-dwarf4", inline, "-gdwarf-4", "-O2", "-fno-pie", "-no-pie"),
			build("tailcall", tailcall, "-g", "-O2", tailcall2),
			build("tailcall-dwarf4", tailcall, "-gdwarf-4", "-O2", tailcall2),
			build("inline-gz", inline, "-g", "-O2", "-gz"),
			build("inline-zdebug", inline, "-g", "-O2", "-gz=zlib-gnu"),
			build("debug-frame", symbols, "-g", "-O1", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables"),
			build("shared.so", symbols, "-g", "-O2", "-shared", "-fPIC"),
			build("nodebug", symbols, "-O2", "-s"),
		)
		// A stripped program and its separate debug file.
		stripped := filepath.Join(dir, "prog-stripped")
		debug := filepath.Join(dir, "prog.debug")
		cmds := [][]string{
			{"cp", filepath.Join(dir, "prog"), stripped},
			{"objcopy", "--only-keep-debug", stripped, debug},
			{"strip", "--strip-all", stripped},
		}
		ok := true
		for _, c := range cmds {
			if b, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
				tb.Logf("no split debug file seed: %s: %v\n%s", strings.Join(c, " "), err, b)
				ok = false
				break
			}
		}
		if ok {
			m, err1 := os.ReadFile(stripped)
			d, err2 := os.ReadFile(debug)
			if err1 == nil && err2 == nil {
				seeds = append(seeds, joinInput(m, d))
			}
		}
		seeds = append(seeds, mangled(tb, prog)...)
		// Subprograms sharing one range list (DW_AT_ranges).
		if data, err := os.ReadFile(buildSharedRanges(tb, dir, 8, 8)); err == nil {
			seeds = append(seeds, data)
		}
	} else {
		tb.Logf("gcc not installed: no compiled seeds")
	}
	// The fixture programs (clang, DWARF 5), when the OMPD-enabled
	// runtime they link against is set up.
	if _, err := os.Stat(filepath.Join(fixture.OMPDLibDir(), "libomp.so")); err == nil {
		bin := fixture.Build(tb)
		for _, name := range []string{"plain", "nested", "tasks", "stripped/nested"} {
			if data, err := os.ReadFile(filepath.Join(bin, name)); err == nil {
				seeds = append(seeds, data)
			}
		}
	} else {
		tb.Logf("the fixture programs are not seeds: %v", err)
	}
	// A bare ELF header, no segments nor sections.
	seeds = slices.DeleteFunc(seeds, func(s []byte) bool { return s == nil })
	hdr := make([]byte, 64)
	copy(hdr, elf.ELFMAG)
	hdr[elf.EI_CLASS], hdr[elf.EI_DATA], hdr[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), 1
	binary.LittleEndian.PutUint16(hdr[16:], uint16(elf.ET_EXEC))
	binary.LittleEndian.PutUint16(hdr[18:], uint16(elf.EM_X86_64))
	binary.LittleEndian.PutUint32(hdr[20:], 1)
	binary.LittleEndian.PutUint16(hdr[52:], 64)
	seeds = append(seeds, hdr)
	return seeds
}

// mangled returns truncated and corrupted copies of an ELF file: cut
// inside its headers, its middle and its section header table; the
// headers of its DWARF, symbol and CFI sections overwritten.
func mangled(tb testing.TB, orig []byte) [][]byte {
	tb.Helper()
	ef, err := elf.NewFile(bytes.NewReader(orig))
	if err != nil {
		tb.Fatalf("parsing a seed: %v", err)
	}
	var out [][]byte
	for _, n := range []int{63, 64 + 56*len(ef.Progs) - 1, len(orig) / 2, len(orig) - 1} {
		if n > 0 && n < len(orig) {
			out = append(out, bytes.Clone(orig[:n]))
		}
	}
	le := binary.LittleEndian
	patch := func(off uint64, b []byte) {
		if off+uint64(len(b)) <= uint64(len(orig)) {
			d := bytes.Clone(orig)
			copy(d[off:], b)
			out = append(out, d)
		}
	}
	ones := bytes.Repeat([]byte{0xff}, 16)
	for _, name := range []string{".debug_info", ".debug_line", ".debug_abbrev", ".debug_rnglists", ".eh_frame", ".symtab", ".note.gnu.build-id", ".gnu_debuglink"} {
		s := ef.Section(name)
		if s == nil || s.Type == elf.SHT_NOBITS {
			continue
		}
		patch(s.Offset, ones[:4])   // a length or count
		patch(s.Offset+4, ones[:8]) // a version, an offset
	}
	shoff := le.Uint64(orig[40:])
	patch(40, le.AppendUint64(nil, uint64(len(orig))-8)) // section headers past the end
	patch(60, []byte{0xff, 0xff})                        // e_shnum
	patch(56, []byte{0xff, 0xff})                        // e_phnum: PN_XNUM
	if s := ef.Section(".symtab"); s != nil && shoff != 0 {
		// The symbol table's size: 2^40 bytes.
		for i, sec := range ef.Sections {
			if sec == s {
				patch(shoff+uint64(i)*64+32, le.AppendUint64(nil, 1<<40))
			}
		}
	}
	return out
}

// Regression tests for the bugs the fuzz target and its review found.

// unblockFIFO opens a FIFO for writing and closes it, which releases a
// reader blocked opening it.
func unblockFIFO(path string) {
	if f, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
		f.Close()
	}
}

// within runs fn and fails the test if it does not return within a few
// seconds; unblock, if not nil, is then called to release it (else it is
// left running).
func within(t *testing.T, what string, fn func(), unblock func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		if unblock != nil {
			unblock()
			<-done
		}
		t.Fatalf("%s did not return", what)
	}
}

// TestOpenFIFO: Open refuses a FIFO without opening it (which would block
// until a writer comes).
func TestOpenFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	var err error
	within(t, "Open(FIFO)", func() { _, err = Open(fifo) }, func() { unblockFIFO(fifo) })
	if want := "opening ELF file " + fifo + ": not a regular file"; err == nil || err.Error() != want {
		t.Errorf("Open(FIFO) = %v, want %s", err, want)
	}
}

// TestDebugLinkFIFO: a FIFO where the debug-link points is skipped, not
// opened to compute its CRC-32.
func TestDebugLinkFIFO(t *testing.T) {
	for _, tool := range []string{"gcc", "objcopy", "strip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	dir := t.TempDir()
	src := source(t)
	prog, debug := filepath.Join(dir, "prog"), filepath.Join(dir, "prog.debug")
	for _, c := range [][]string{
		{"gcc", "-g", "-O0", "-Wl,--build-id=none", "-o", prog, src},
		{"objcopy", "--only-keep-debug", prog, debug},
		{"strip", "--strip-all", prog},
		{"objcopy", "--add-gnu-debuglink=" + debug, prog},
	} {
		if b, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, b)
		}
	}
	if err := os.Remove(debug); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(debug, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	im, err := open(prog, []string{filepath.Join(dir, "no-root")})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	if name, _, ok := im.DebugLink(); !ok || name != "prog.debug" {
		t.Fatalf("DebugLink = %q, %v, want prog.debug", name, ok)
	}
	var derr error
	within(t, "DebugInfo with a FIFO as debug file", func() { _, derr = im.DebugInfo() }, func() { unblockFIFO(debug) })
	if want := debug + ": not a regular file"; derr == nil || !strings.Contains(derr.Error(), want) {
		t.Errorf("DebugInfo: %v, want it to say %q", derr, want)
	}
}

// sharedRangesSource is the assembly of a program whose DWARF has n
// subprograms that all use one range list of m ranges inside main.
func sharedRangesSource(n, m int) string {
	var b strings.Builder
	b.WriteString("\t.text\n\t.globl main\nmain:\n\tret\n")
	fmt.Fprintf(&b, "\t.fill %d,1,0x90\n", 2*m)
	// Abbreviations: 1, a compile unit with children (name, low_pc);
	// 2, a subprogram (name, ranges).
	b.WriteString("\t.section .debug_abbrev,\"\",@progbits\n")
	b.WriteString("\t.uleb128 1\n\t.uleb128 0x11\n\t.byte 1\n\t.uleb128 0x03\n\t.uleb128 0x08\n\t.uleb128 0x11\n\t.uleb128 0x01\n\t.byte 0,0\n")
	b.WriteString("\t.uleb128 2\n\t.uleb128 0x2e\n\t.byte 0\n\t.uleb128 0x03\n\t.uleb128 0x08\n\t.uleb128 0x55\n\t.uleb128 0x17\n\t.byte 0,0\n\t.byte 0\n")
	// One DWARF 4 unit, base address 0.
	b.WriteString("\t.section .debug_info,\"\",@progbits\n\t.long .Lend-.Lstart\n.Lstart:\n\t.value 4\n\t.long 0\n\t.byte 8\n")
	b.WriteString("\t.uleb128 1\n\t.string \"shared.c\"\n\t.quad 0\n")
	for i := range n {
		fmt.Fprintf(&b, "\t.uleb128 2\n\t.string \"f%d\"\n\t.long 0\n", i)
	}
	b.WriteString("\t.byte 0\n.Lend:\n")
	b.WriteString("\t.section .debug_ranges,\"\",@progbits\n")
	for i := range m {
		fmt.Fprintf(&b, "\t.quad main+%d, main+%d\n", 2*i, 2*i+1)
	}
	b.WriteString("\t.quad 0, 0\n\t.section .note.GNU-stack,\"\",@progbits\n")
	return b.String()
}

// buildSharedRanges assembles sharedRangesSource(n, m) into dir and
// returns the program's path.
func buildSharedRanges(tb testing.TB, dir string, n, m int) string {
	tb.Helper()
	src := filepath.Join(dir, fmt.Sprintf("shared-%d-%d.s", n, m))
	if err := os.WriteFile(src, []byte(sharedRangesSource(n, m)), 0o644); err != nil {
		tb.Fatal(err)
	}
	out := strings.TrimSuffix(src, ".s")
	if b, err := exec.Command("gcc", "-no-pie", "-o", out, src).CombinedOutput(); err != nil {
		tb.Fatalf("gcc %s: %v\n%s", src, err, b)
	}
	return out
}

// TestSubprogramRangesBounded: subprograms that share one range list
// make the ranges indexed grow as their product, which a 100 KB file can
// make billions; MaxSubprogramRanges ends the walk.
func TestSubprogramRangesBounded(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	prog := buildSharedRanges(t, t.TempDir(), 40, 50) // 2000 ranges
	old := maxSubprogramRanges
	maxSubprogramRanges = 1000
	defer func() { maxSubprogramRanges = old }()
	im, err := open(prog, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	_, derr := im.DebugInfo()
	if want := "more than 1000 ranges of subprograms (limit MaxSubprogramRanges)"; derr == nil || !strings.Contains(derr.Error(), want) {
		t.Errorf("DebugInfo: %v, want it to say %q", derr, want)
	}
	if n := len(im.wholeIndex().funcs); n != 20 {
		t.Errorf("%d subprograms indexed, want the 20 before the limit", n)
	}
	main, ok := im.Symbol("main")
	if !ok {
		t.Fatal("no symbol main")
	}
	if name, ok := im.FuncAt(main.Value + 2); !ok || !strings.HasPrefix(name, "f") {
		t.Errorf("FuncAt(main+2) = %q, %v, want one of the subprograms indexed", name, ok)
	}
}

// TestDWARFStuckReader: a LEB128 number cut off by the end of a unit (here
// the last byte of .debug_info, 0x00, made 0x80) makes debug/dwarf's
// Reader.Next return null entries forever (golang/go#79586). The index of
// lines and functions looped forever; the type index read MaxTypeEntries
// entries, 2.4 GB (the FuzzImage crasher 608ddbddad707570). Both stop
// after as many entries as .debug_info has bytes.
func TestDWARFStuckReader(t *testing.T) {
	src := source(t)
	prog := compile(t, "gcc", t.TempDir(), "prog")
	data, s := sectionOf(t, prog, ".debug_info")
	if data[s.Offset+s.Size-1] != 0 {
		t.Fatalf("%s: .debug_info does not end with a null entry", prog)
	}
	data[s.Offset+s.Size-1] = 0x80
	if err := os.WriteFile(prog, data, 0o755); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("more entries than the %d bytes of .debug_info", s.Size)

	im, err := open(prog, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	var derr error
	within(t, "DebugInfo", func() { _, derr = im.DebugInfo() }, nil)
	if derr == nil || !strings.Contains(derr.Error(), want) {
		t.Errorf("DebugInfo: %v, want it to say %q", derr, want)
	}
	// What was read before the stuck entry is indexed.
	main := mustSym(t, im, "main")
	if file, line, ok := im.LineAt(main.Value); !ok || file != src || line == 0 {
		t.Errorf("LineAt(main) = %s:%d, %v, want a line of %s", file, line, ok, src)
	}

	before := fuzzlimit.HeapAllocs()
	ti, terr := NewTypeIndex(im)
	if terr != nil {
		t.Fatalf("NewTypeIndex: %v", terr)
	}
	if _, terr := ti.Size("no_such_type"); terr == nil || !strings.Contains(terr.Error(), want) {
		t.Errorf("Size of a type not met before the stuck entry: %v, want it to say %q", terr, want)
	}
	if got := fuzzlimit.HeapAllocs() - before; got > 16<<20 {
		t.Errorf("the type lookup allocated %d bytes", got)
	}
}

// TestLineHeaderCounts: the directory and file name counts of a DWARF 5
// line table header size slices and loops in debug/dwarf's LineReader
// before anything checks them: a 25 KB file allocated 129 MB (the
// FuzzImage crasher 172a8cdc7d028e3f), a count of 2^32 takes 64 GB.
// Here the directory count becomes 2^24-1 and its format empty, so that
// the entries take no bytes: the table is refused, the rest indexed.
func TestLineHeaderCounts(t *testing.T) {
	dir := t.TempDir()
	prog := compile(t, "gcc", dir, "prog", "-gdwarf-5")
	data, s := sectionOf(t, prog, ".debug_line")
	line := data[s.Offset : s.Offset+s.Size]
	le := binary.LittleEndian
	if le.Uint32(line) == 0xffffffff || le.Uint16(line[4:]) != 5 {
		t.Fatalf("the first line table is not 32-bit DWARF 5")
	}
	// unit_length, version, address_size, segment_selector_size,
	// header_length, five one-byte fields, opcode_base and the
	// standard opcode lengths, then directory_entry_format_count.
	opcodeBase := int(line[4+2+1+1+4+5])
	formatCount := 4 + 2 + 1 + 1 + 4 + 5 + 1 + opcodeBase - 1
	copy(line[formatCount:], []byte{0, 0xff, 0xff, 0xff, 0x07})

	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, data, 0o755); err != nil {
		t.Fatal(err)
	}
	im, err := open(bad, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	before := fuzzlimit.HeapAllocs()
	_, derr := im.DebugInfo()
	if got := fuzzlimit.HeapAllocs() - before; got > 16<<20 {
		t.Errorf("DebugInfo allocated %d bytes", got)
	}
	want := "line table at offset 0x0 of .debug_line: 16777215 directories, more than the"
	if derr == nil || !strings.Contains(derr.Error(), want) {
		t.Errorf("DebugInfo: %v, want it to say %q", derr, want)
	}
	main := mustSym(t, im, "main")
	if name, ok := im.FuncAt(main.Value); !ok || name != "main" {
		t.Errorf("FuncAt(main) = %q, %v", name, ok)
	}
	if file, line, ok := im.LineAt(main.Value); ok {
		t.Errorf("LineAt(main) = %s:%d from a refused line table", file, line)
	}
}

// typeGraphSource is the assembly of a program whose DWARF has the types
// TestTypeGraphBounded reads: ok_t (a typedef of int), self_t (a typedef
// of itself), pair_a and pair_b (a typedef and a const of each other),
// long_t (a chain of chain typedefs ending in int) and deep_t (a typedef
// of a chain of deep pointers to int).
func typeGraphSource(chain, deep int) string {
	var b strings.Builder
	b.WriteString("\t.text\n\t.globl main\nmain:\n\tret\n")
	// Abbreviations: 1 compile unit; 2 typedef (name, type); 3 pointer
	// (byte_size, type); 4 base type (name, byte_size, encoding); 5
	// const (type).
	b.WriteString("\t.section .debug_abbrev,\"\",@progbits\n")
	b.WriteString("\t.uleb128 1\n\t.uleb128 0x11\n\t.byte 1\n\t.uleb128 0x03\n\t.uleb128 0x08\n\t.byte 0,0\n")
	b.WriteString("\t.uleb128 2\n\t.uleb128 0x16\n\t.byte 0\n\t.uleb128 0x03\n\t.uleb128 0x08\n\t.uleb128 0x49\n\t.uleb128 0x13\n\t.byte 0,0\n")
	b.WriteString("\t.uleb128 3\n\t.uleb128 0x0f\n\t.byte 0\n\t.uleb128 0x0b\n\t.uleb128 0x0b\n\t.uleb128 0x49\n\t.uleb128 0x13\n\t.byte 0,0\n")
	b.WriteString("\t.uleb128 4\n\t.uleb128 0x24\n\t.byte 0\n\t.uleb128 0x03\n\t.uleb128 0x08\n\t.uleb128 0x0b\n\t.uleb128 0x0b\n\t.uleb128 0x3e\n\t.uleb128 0x0b\n\t.byte 0,0\n")
	b.WriteString("\t.uleb128 5\n\t.uleb128 0x26\n\t.byte 0\n\t.uleb128 0x49\n\t.uleb128 0x13\n\t.byte 0,0\n\t.byte 0\n")
	b.WriteString("\t.section .debug_info,\"\",@progbits\n.Lcu:\n\t.long .Lend-.Lstart\n.Lstart:\n\t.value 4\n\t.long 0\n\t.byte 8\n")
	b.WriteString("\t.uleb128 1\n\t.string \"types.c\"\n")
	ref := func(label string) string { return "\t.long " + label + "-.Lcu\n" }
	b.WriteString(".Lint:\n\t.uleb128 4\n\t.string \"int\"\n\t.byte 4\n\t.byte 5\n")
	b.WriteString("\t.uleb128 2\n\t.string \"ok_t\"\n" + ref(".Lint"))
	b.WriteString(".Lself:\n\t.uleb128 2\n\t.string \"self_t\"\n" + ref(".Lself"))
	b.WriteString(".Lpa:\n\t.uleb128 2\n\t.string \"pair_a\"\n" + ref(".Lpb"))
	b.WriteString(".Lpb:\n\t.uleb128 5\n" + ref(".Lpa"))
	b.WriteString("\t.uleb128 2\n\t.string \"long_t\"\n" + ref(".Lc0"))
	for i := range chain {
		next := fmt.Sprintf(".Lc%d", i+1)
		if i == chain-1 {
			next = ".Lint"
		}
		fmt.Fprintf(&b, ".Lc%d:\n\t.uleb128 2\n\t.string \"c%d\"\n%s", i, i, ref(next))
	}
	b.WriteString("\t.uleb128 2\n\t.string \"deep_t\"\n" + ref(".Lp0"))
	for i := range deep {
		next := fmt.Sprintf(".Lp%d", i+1)
		if i == deep-1 {
			next = ".Lint"
		}
		fmt.Fprintf(&b, ".Lp%d:\n\t.uleb128 3\n\t.byte 8\n%s", i, ref(next))
	}
	b.WriteString("\t.byte 0\n.Lend:\n\t.section .note.GNU-stack,\"\",@progbits\n")
	return b.String()
}

// TestTypeGraphBounded: debug/dwarf's Data.Type overflows the goroutine
// stack, a fatal error that kills the process, on a typedef of itself
// (the FuzzImage crasher 4b4003bbeae1a257) or any cycle of typedefs,
// qualifiers and arrays, and on a long enough path of references; the
// type index refuses such types before reading them.
func TestTypeGraphBounded(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "types.s")
	if err := os.WriteFile(src, []byte(typeGraphSource(maxTypeChain+10, maxTypeGraph+10)), 0o644); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(dir, "types")
	if b, err := exec.Command("gcc", "-no-pie", "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	im, err := open(prog, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	ti, err := NewTypeIndex(im)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := ti.Size("ok_t"); err != nil || n != 4 {
		t.Errorf("Size(ok_t) = %d, %v, want 4", n, err)
	}
	for _, c := range []struct{ name, want string }{
		{"self_t", "reaches a cycle of typedefs, qualifiers or arrays"},
		{"pair_a", "reaches a cycle of typedefs, qualifiers or arrays"},
		{"long_t", fmt.Sprintf("reaches a chain of more than %d typedefs, qualifiers or arrays (limit maxTypeChain)", maxTypeChain)},
		{"deep_t", fmt.Sprintf("reaches more than %d types (limit maxTypeGraph)", maxTypeGraph)},
	} {
		if _, err := ti.Size(c.name); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Size(%s): %v, want it to say %q", c.name, err, c.want)
		}
	}
}
