package elf

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
)

const (
	testBuildID  = "0123456789abcdef0123456789abcdef01234567"
	debianLibomp = "/usr/lib/llvm-19/lib/libomp.so.5"
)

// ompdLibomp returns the path of the OMPD-enabled libomp that
// scripts/setup.sh builds in the cache ($OMPD_INSPECT_CACHE).
func ompdLibomp() string { return filepath.Join(fixture.OMPDLibDir(), "libomp.so") }

// testdataPath returns the absolute path of testdata/name.
func testdataPath(tb testing.TB, name string) string {
	tb.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// source returns the absolute path of testdata/symbols.c.
func source(t *testing.T) string { return testdataPath(t, "symbols.c") }

// sectionOf reads the file at path and returns its bytes and its section
// name, failing the test when there is none with contents.
func sectionOf(t *testing.T, path, name string) ([]byte, *elf.Section) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	s := ef.Section(name)
	if s == nil || s.Type == elf.SHT_NOBITS {
		t.Fatalf("%s has no %s", path, name)
	}
	return data, s
}

// markerLine returns the line of the source that carries "LINE:name".
func markerLine(t *testing.T, name string) int {
	t.Helper()
	data, err := os.ReadFile(source(t))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, "/* LINE:"+name+" */") {
			return i + 1
		}
	}
	t.Fatalf("no LINE:%s marker in %s", name, source(t))
	return 0
}

// run runs a command and fails the test with its output if it fails.
func run(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// splitDebug writes full's debug information to dir/prog.debug and a copy
// of full stripped of it (and of .symtab) to dir/stripped, linked to the
// debug file by its .gnu_debuglink.
func splitDebug(t *testing.T, dir, full string) (stripped, debug string) {
	t.Helper()
	debug = filepath.Join(dir, "prog.debug")
	run(t, "objcopy", "--only-keep-debug", full, debug)
	stripped = filepath.Join(dir, "stripped")
	run(t, "objcopy", "--strip-all", "--add-gnu-debuglink="+debug, full, stripped)
	return stripped, debug
}

// compile builds testdata/symbols.c with the compiler cc (scripts/setup.sh
// installs the compilers) into dir/name.
func compile(t *testing.T, cc, dir, name string, flags ...string) string {
	t.Helper()
	if _, err := exec.LookPath(cc); err != nil {
		t.Fatalf("%s not installed (run scripts/setup.sh): %v", cc, err)
	}
	out := filepath.Join(dir, name)
	args := append([]string{"-g", "-O0", "-o", out, source(t)}, flags...)
	run(t, cc, args...)
	return out
}

func mustOpen(t *testing.T, path string) *Image {
	t.Helper()
	im, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	return im
}

func mustSym(t *testing.T, im *Image, name string) Sym {
	t.Helper()
	s, ok := im.Symbol(name)
	if !ok {
		t.Fatalf("%s: symbol %s not found (LoadSymbols: %v)", im.Path, name, im.LoadSymbols())
	}
	return s
}

func readAt(t *testing.T, im *Image, vaddr uint64, n int) []byte {
	t.Helper()
	buf := make([]byte, n)
	got, err := im.ReadVaddr(vaddr, buf)
	if err != nil || got != n {
		t.Fatalf("ReadVaddr(%#x, %d) = %d, %v", vaddr, n, got, err)
	}
	return buf
}

// checkProgram asserts the symbols, data, TLS and lines of a build of
// symbols.c.
func checkProgram(t *testing.T, im *Image) {
	src := source(t)

	g := mustSym(t, im, "global_counter")
	if g.Size != 4 || g.TLS || g.Func {
		t.Errorf("global_counter = %+v, want size 4, not TLS, not Func", g)
	}
	if v := binary.LittleEndian.Uint32(readAt(t, im, g.Value, 4)); v != 42 {
		t.Errorf("global_counter holds %d, want 42", v)
	}
	l := mustSym(t, im, "local_counter")
	if v := binary.LittleEndian.Uint32(readAt(t, im, l.Value, 4)); v != 7 || l.Size != 4 {
		t.Errorf("local_counter = %+v holding %d, want size 4 holding 7", l, v)
	}
	m := mustSym(t, im, "message")
	if got := string(readAt(t, im, m.Value, int(m.Size))); got != "rodata message\x00" {
		t.Errorf("message holds %q", got)
	}
	z := mustSym(t, im, "zeroed")
	if got := readAt(t, im, z.Value, 64); !bytes.Equal(got, make([]byte, 64)) || z.Size != 64 {
		t.Errorf("zeroed (%+v) holds %x, want 64 zero bytes", z, got)
	}

	tls, ok := im.TLS()
	if !ok {
		t.Fatal("no PT_TLS")
	}
	if tls.Align != 8 {
		t.Errorf("TLS align %d, want 8", tls.Align)
	}
	t1 := mustSym(t, im, "tls_first")
	t2 := mustSym(t, im, "tls_second")
	if !t1.TLS || !t2.TLS || t1.Size != 4 || t2.Size != 8 {
		t.Errorf("tls_first %+v, tls_second %+v: want TLS symbols of sizes 4 and 8", t1, t2)
	}
	if t1.Value+t1.Size > tls.Filesz || t2.Value+t2.Size > tls.Filesz {
		t.Errorf("TLS symbols %+v %+v outside the %d-byte TLS image", t1, t2, tls.Filesz)
	}
	if v := binary.LittleEndian.Uint32(readAt(t, im, tls.Vaddr+t1.Value, 4)); v != 5 {
		t.Errorf("tls_first initial value %d, want 5", v)
	}
	if v := binary.LittleEndian.Uint64(readAt(t, im, tls.Vaddr+t2.Value, 8)); v != 0x1234 {
		t.Errorf("tls_second initial value %#x, want 0x1234", v)
	}

	add := mustSym(t, im, "add_one")
	helper := mustSym(t, im, "helper")
	if !add.Func || add.Size == 0 || !helper.Func || helper.Size == 0 {
		t.Fatalf("add_one %+v, helper %+v: want sized functions", add, helper)
	}
	for _, a := range []uint64{add.Value, add.Value + add.Size/2, add.Value + add.Size - 1} {
		if s, ok := im.SymbolAt(a); !ok || s.Name != "add_one" {
			t.Errorf("SymbolAt(%#x) = %+v, %v; want add_one", a, s, ok)
		}
	}
	// Code reads from the file as the segments map it; writable data,
	// and a range that runs past the code segment's file part, do not.
	code := make([]byte, add.Size)
	if err := im.ReadCode(add.Value, code); err != nil || !bytes.Equal(code, readAt(t, im, add.Value, int(add.Size))) {
		t.Errorf("ReadCode(add_one) = %x, %v; want the %d bytes ReadVaddr reads", code, err, add.Size)
	}
	if err := im.ReadCode(g.Value, make([]byte, 4)); !errors.Is(err, ErrNotLoaded) {
		t.Errorf("ReadCode(global_counter), writable data: %v, want ErrNotLoaded", err)
	}
	for _, l := range im.Loads() {
		if l.Flags&elf.PF_X != 0 {
			if err := im.ReadCode(l.Vaddr+l.Filesz-2, make([]byte, 4)); !errors.Is(err, ErrNotLoaded) {
				t.Errorf("ReadCode across the end of the code segment %+v: %v, want ErrNotLoaded", l, err)
			}
		}
	}
	if s, ok := im.SymbolAt(helper.Value); !ok || s != helper {
		t.Errorf("SymbolAt(helper) = %+v, %v; want %+v", s, ok, helper)
	}
	if s, ok := im.SymbolAt(g.Value); ok {
		t.Errorf("SymbolAt(global_counter) = %+v, want no function", s)
	}

	if f, line, ok := im.LineAt(add.Value); !ok || f != src || line != markerLine(t, "add_one") {
		t.Errorf("LineAt(add_one) = %s:%d %v, want %s:%d", f, line, ok, src, markerLine(t, "add_one"))
	}
	if f, line, ok := im.LineAt(helper.Value); !ok || f != src || line != markerLine(t, "helper_brace") {
		t.Errorf("LineAt(helper) = %s:%d %v, want %s:%d", f, line, ok, src, markerLine(t, "helper_brace"))
	}
	// Some address inside helper belongs to its only statement.
	body := markerLine(t, "helper_body")
	found := false
	for a := helper.Value; a < helper.Value+helper.Size; a++ {
		if _, line, ok := im.LineAt(a); ok && line == body {
			found = true
			break
		}
	}
	if !found {
		t.Errorf("no address of helper maps to line %d", body)
	}
	if name, ok := im.FuncAt(helper.Value + 1); !ok || name != "helper" {
		t.Errorf("FuncAt(helper+1) = %q, %v", name, ok)
	}
	if f, line, ok := im.FuncDecl(add.Value + 1); !ok || f != src || line != markerLine(t, "add_one") {
		t.Errorf("FuncDecl(add_one+1) = %s:%d %v, want %s:%d", f, line, ok, src, markerLine(t, "add_one"))
	}
	if f, line, ok := im.FuncDecl(helper.Value); !ok || f != src || line != markerLine(t, "helper") {
		t.Errorf("FuncDecl(helper) = %s:%d %v, want %s:%d", f, line, ok, src, markerLine(t, "helper"))
	}
	if _, _, ok := im.LineAt(g.Value); ok {
		t.Errorf("LineAt(global_counter) found a line")
	}
	if _, ok := im.FuncAt(g.Value); ok {
		t.Errorf("FuncAt(global_counter) found a function")
	}
}

// checkBias maps each segment's first page at bias plus its link-time
// page and checks BiasFor gives bias back, for the pages that belong to
// one segment only.
func checkBias(t *testing.T, im *Image, bias uint64) {
	t.Helper()
	loads := im.Loads()
	if bias0, ok := im.BiasFor(bias+(loads[0].Vaddr&^0xfff), 0); loads[0].Offset != 0 || !ok || bias0 != bias {
		t.Errorf("BiasFor(first segment %+v) = %#x, %v; want %#x", loads[0], bias0, ok, bias)
	}
	for i, l := range loads {
		page := l.Offset &^ 0xfff
		shared := false
		for j, o := range loads {
			if j != i && page >= o.Offset&^0xfff && page < o.Offset+o.Filesz {
				shared = true
			}
		}
		got, ok := im.BiasFor(bias+(l.Vaddr&^0xfff), page)
		if !ok {
			t.Errorf("BiasFor(segment %+v) failed", l)
		} else if !shared && got != bias {
			t.Errorf("BiasFor(segment %+v) = %#x, want %#x", l, got, bias)
		}
	}
}

func TestPIE(t *testing.T) {
	dir := t.TempDir()
	path := compile(t, "gcc", dir, "pie", "-Wl,--build-id=0x"+testBuildID)
	im := mustOpen(t, path)
	if im.Type() != elf.ET_DYN || im.Machine() != elf.EM_X86_64 {
		t.Errorf("type %v machine %v, want ET_DYN EM_X86_64", im.Type(), im.Machine())
	}
	if id := im.BuildID(); id != testBuildID {
		t.Errorf("BuildID = %q, want %q", id, testBuildID)
	}
	if _, _, ok := im.DebugLink(); ok {
		t.Error("DebugLink found in an unstripped file")
	}
	if f, err := im.DebugInfo(); f != path || err != nil {
		t.Errorf("DebugInfo = %q, %v; want %q, nil", f, err, path)
	}
	if f := im.DebugFile(); f != "" {
		t.Errorf("DebugFile = %q, want none", f)
	}
	checkProgram(t, im)

	// A PIE linked at 0: mapping a segment's first page at base+that
	// page gives bias base.
	const base = 0x555555554000
	loads := im.Loads()
	if len(loads) < 2 {
		t.Fatalf("Loads = %+v", loads)
	}
	checkBias(t, im, base)
	if _, ok := im.BiasFor(base, 1<<40); ok {
		t.Error("BiasFor an offset past every segment succeeded")
	}
	// Past every segment's memory image.
	last := loads[len(loads)-1]
	_, err := im.ReadVaddr(last.Vaddr+last.Memsz+0x10000, make([]byte, 4))
	if !errors.Is(err, ErrNotLoaded) {
		t.Errorf("ReadVaddr past the end: %v, want ErrNotLoaded", err)
	}
}

func TestNonPIE(t *testing.T) {
	dir := t.TempDir()
	path := compile(t, "gcc", dir, "nopie", "-no-pie", "-fno-pie")
	im := mustOpen(t, path)
	if im.Type() != elf.ET_EXEC {
		t.Errorf("type %v, want ET_EXEC", im.Type())
	}
	if len(im.BuildID()) != 40 {
		t.Errorf("BuildID = %q, want 20 bytes of hex (Debian links with --build-id)", im.BuildID())
	}
	checkBias(t, im, 0)
	checkProgram(t, im)
}

func TestSharedObject(t *testing.T) {
	dir := t.TempDir()
	path := compile(t, "gcc", dir, "libsym.so", "-shared", "-fPIC")
	im := mustOpen(t, path)
	if im.Type() != elf.ET_DYN {
		t.Errorf("type %v, want ET_DYN", im.Type())
	}
	checkBias(t, im, 0x7f0000200000)
	checkProgram(t, im)
}

// ReadCode reads code across a page boundary as ReadVaddr does, keeps
// the pages it read, and serves a second read from them.
func TestReadCodePages(t *testing.T) {
	im := mustOpen(t, "/usr/lib/x86_64-linux-gnu/libc.so.6")
	var code Load
	for _, l := range im.Loads() {
		if l.Flags&elf.PF_X != 0 && l.Flags&elf.PF_W == 0 {
			code = l
		}
	}
	if code.Filesz < 3*codePageSize {
		t.Fatalf("libc has no code segment of three pages: %+v", im.Loads())
	}
	at := (code.Vaddr+codePageSize)&^(codePageSize-1) + codePageSize - 16 // 16 bytes before a page's end
	want := readAt(t, im, at, 32)
	for i := 0; i < 2; i++ {
		got := make([]byte, 32)
		if err := im.ReadCode(at, got); err != nil || !bytes.Equal(got, want) {
			t.Errorf("read %d: ReadCode(%#x) = %x, %v; want %x", i, at, got, err, want)
		}
		if n := len(im.code.pages); n != 2 {
			t.Errorf("read %d: %d pages kept, want the 2 the read spans", i, n)
		}
	}
	// A kept page is what is read: the file is not read again.
	for k, p := range im.code.pages {
		if k.page == at&^(codePageSize-1) {
			p[at-k.page] ^= 0xff
		}
	}
	got := make([]byte, 32)
	if err := im.ReadCode(at, got); err != nil || got[0] != want[0]^0xff {
		t.Errorf("ReadCode after its page was changed = %x, %v; want the kept page's byte %#x", got, err, want[0]^0xff)
	}
}

func TestClang(t *testing.T) {
	dir := t.TempDir()
	path := compile(t, "clang-19", dir, "clang")
	checkProgram(t, mustOpen(t, path))
}

// TestDebugLink strips a binary (dropping .symtab and DWARF), links it to
// a separate debug file and checks lookups go through the debug file.
func TestDebugLink(t *testing.T) {
	dir := t.TempDir()
	full := compile(t, "gcc", dir, "prog", "-shared", "-fPIC")
	stripped, debug := splitDebug(t, dir, full)

	data, err := os.ReadFile(debug)
	if err != nil {
		t.Fatal(err)
	}
	im := mustOpen(t, stripped)
	name, crc, ok := im.DebugLink()
	if !ok || name != "prog.debug" || crc != crc32.ChecksumIEEE(data) {
		t.Fatalf("DebugLink = %q, %08x, %v; want prog.debug, %08x", name, crc, ok, crc32.ChecksumIEEE(data))
	}
	if f, err := im.DebugInfo(); f != debug || err != nil {
		t.Fatalf("DebugInfo = %q, %v; want %s", f, err, debug)
	}
	if f := im.DebugFile(); f != debug {
		t.Errorf("DebugFile = %q, want %s", f, debug)
	}
	checkProgram(t, im)

	// In a .debug subdirectory.
	sub := filepath.Join(dir, ".debug")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(debug, filepath.Join(sub, "prog.debug")); err != nil {
		t.Fatal(err)
	}
	im2 := mustOpen(t, stripped)
	if f, err := im2.DebugInfo(); f != filepath.Join(sub, "prog.debug") || err != nil {
		t.Fatalf("DebugInfo = %q, %v; want the .debug copy", f, err)
	}
	checkProgram(t, im2)

	// A debug file whose CRC differs is not used.
	if err := os.WriteFile(filepath.Join(sub, "prog.debug"), append(data, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	im3 := mustOpen(t, stripped)
	if f, err := im3.DebugInfo(); f != "" || err == nil || !strings.Contains(err.Error(), "CRC-32") {
		t.Errorf("DebugInfo with a bad CRC = %q, %v; want a CRC error", f, err)
	}
	if _, _, ok := im3.LineAt(0x1000); ok {
		t.Error("LineAt succeeded without DWARF")
	}
	if _, ok := im3.Symbol("local_counter"); ok {
		t.Error("local symbol found without .symtab")
	}
	if s, ok := im3.Symbol("add_one"); !ok || !s.Func {
		t.Errorf("dynamic symbol add_one = %+v, %v", s, ok)
	}
}

// TestBuildIDDir finds the debug file under ROOT/.build-id/xx/rest.debug
// and refuses one that carries another build-id.
func TestBuildIDDir(t *testing.T) {
	dir := t.TempDir()
	full := compile(t, "gcc", dir, "prog", "-Wl,--build-id=0x"+testBuildID)
	other := compile(t, "gcc", dir, "other", "-DVARIANT=2", "-Wl,--build-id=0x"+strings.Repeat("ab", 20))
	stripped := filepath.Join(dir, "stripped")
	run(t, "objcopy", "--strip-all", full, stripped)
	root := filepath.Join(dir, "debugroot")
	idDir := filepath.Join(root, ".build-id", testBuildID[:2])
	if err := os.MkdirAll(idDir, 0o755); err != nil {
		t.Fatal(err)
	}
	debug := filepath.Join(idDir, testBuildID[2:]+".debug")
	run(t, "objcopy", "--only-keep-debug", full, debug)

	im, err := open(stripped, []string{root})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	if f, err := im.DebugInfo(); f != debug || err != nil {
		t.Fatalf("DebugInfo = %q, %v; want %s", f, err, debug)
	}
	checkProgram(t, im)

	run(t, "objcopy", "--only-keep-debug", other, debug)
	im2, err := open(stripped, []string{root})
	if err != nil {
		t.Fatal(err)
	}
	defer im2.Close()
	if f, err := im2.DebugInfo(); f != "" || err == nil || !strings.Contains(err.Error(), "has build-id") {
		t.Errorf("DebugInfo with a foreign debug file = %q, %v; want a build-id error", f, err)
	}
}

func TestDebianLibomp(t *testing.T) {
	// scripts/setup.sh installs Debian's libomp (libomp-19-dev).
	if _, err := os.Stat(debianLibomp); err != nil {
		t.Fatalf("Debian's libomp is not installed (%v): run scripts/setup.sh", err)
	}
	im := mustOpen(t, debianLibomp)
	if im.ef.SectionByType(elf.SHT_SYMTAB) != nil {
		t.Fatalf("%s has a symbol table: Debian's is stripped", debianLibomp)
	}
	s := mustSym(t, im, "omp_get_num_threads")
	if !s.Func || s.Size == 0 || s.TLS {
		t.Errorf("omp_get_num_threads = %+v", s)
	}
	if at, ok := im.SymbolAt(s.Value + s.Size - 1); !ok || at.Value != s.Value {
		t.Errorf("SymbolAt(end of omp_get_num_threads) = %+v, %v", at, ok)
	}
	if _, ok := im.Symbol("ompd_sizeof__kmp_info_t"); ok {
		t.Error("local OMPD symbol found in a stripped library")
	}
	id := im.BuildID()
	name, _, ok := im.DebugLink()
	// Debian names the debug file after the build-id.
	if len(id) != 40 || !ok || name != id[2:]+".debug" {
		t.Errorf("BuildID %q, DebugLink %q %v: want the link named after the build-id", id, name, ok)
	}
	if _, ok := im.TLS(); !ok {
		t.Error("no PT_TLS in libomp")
	}
}

func TestOMPDLibomp(t *testing.T) {
	if _, err := os.Stat(ompdLibomp()); err != nil {
		t.Fatalf("no OMPD-enabled libomp (%v): run scripts/setup.sh", err)
	}
	im := mustOpen(t, ompdLibomp())

	// The OMPD layout variables live in .bss (ompd_init fills them at run
	// time): they read as zero from the file, past the segment's file
	// size.
	for _, name := range []string{"ompd_sizeof__kmp_info_t", "ompd_access__kmp_base_info_t__th_team"} {
		s := mustSym(t, im, name)
		if s.Size != 8 || s.Func || s.TLS {
			t.Errorf("%s = %+v, want an 8-byte data symbol", name, s)
		}
		l, ok := im.loadAt(s.Value)
		if !ok || l.Flags&elf.PF_W == 0 || s.Value-l.Vaddr < l.Filesz {
			t.Errorf("%s at %#x: want it in the zero-filled part of a writable segment (%+v)", name, s.Value, l)
		}
		if v := readAt(t, im, s.Value, 8); !bytes.Equal(v, make([]byte, 8)) {
			t.Errorf("%s reads %x from the file, want zeros", name, v)
		}
	}
	// The values agree with a plain debug/elf reading of .symtab.
	ef, err := elf.Open(ompdLibomp())
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	raw, err := ef.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, r := range raw {
		switch r.Name {
		case "ompd_sizeof__kmp_info_t", "ompd_access__kmp_base_info_t__th_team", "__kmp_gtid", "__kmp_get_global_thread_id":
			if s := mustSym(t, im, r.Name); s.Value != r.Value || s.Size != r.Size {
				t.Errorf("%s = %+v, .symtab says value %#x size %d", r.Name, s, r.Value, r.Size)
			}
			checked++
		}
	}
	if checked != 4 {
		t.Errorf("found %d of the 4 symbols with debug/elf", checked)
	}

	gtid := mustSym(t, im, "__kmp_gtid")
	tls, ok := im.TLS()
	if !gtid.TLS || gtid.Size != 4 || !ok || gtid.Value+gtid.Size > tls.Memsz {
		t.Errorf("__kmp_gtid = %+v, TLS %+v %v", gtid, tls, ok)
	}

	fn := mustSym(t, im, "__kmp_get_global_thread_id")
	if at, ok := im.SymbolAt(fn.Value + 10); !ok || at.Name != fn.Name {
		t.Errorf("SymbolAt(__kmp_get_global_thread_id+10) = %+v, %v", at, ok)
	}
	if name, ok := im.FuncAt(fn.Value + 10); !ok || name != fn.Name {
		t.Errorf("FuncAt = %q, %v", name, ok)
	}
	file, line, ok := im.LineAt(fn.Value)
	if !ok || !strings.HasSuffix(file, "/openmp/runtime/src/kmp_runtime.cpp") {
		t.Fatalf("LineAt(__kmp_get_global_thread_id) = %s:%d %v", file, line, ok)
	}
	dfile, dline, ok := im.FuncDecl(fn.Value + 10)
	if !ok || dfile != file {
		t.Errorf("FuncDecl = %s:%d %v, want in %s", dfile, dline, ok, file)
	}
	src, err := os.ReadFile(file)
	if err != nil {
		// scripts/setup.sh builds the runtime from sources it keeps.
		t.Fatalf("the libomp source its DWARF names: %v", err)
	}
	lines := strings.Split(string(src), "\n")
	if dline < 1 || dline > len(lines) || !strings.Contains(lines[dline-1], "__kmp_get_global_thread_id(") {
		t.Errorf("FuncDecl line %d of %s does not declare __kmp_get_global_thread_id", dline, file)
	}
	if line < dline || line > dline+2 {
		t.Errorf("LineAt(entry) = %d, want the declaration line %d or just after", line, dline)
	}
}

// TestHostile opens truncated and corrupted copies of a binary and calls
// every method: errors are fine, panics are not.
func TestHostile(t *testing.T) {
	dir := t.TempDir()
	path := compile(t, "gcc", dir, "prog")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad")
	exercise := func(data []byte) {
		if err := os.WriteFile(bad, data, 0o644); err != nil {
			t.Fatal(err)
		}
		im, err := open(bad, nil)
		if err != nil {
			return
		}
		defer im.Close()
		im.LoadSymbols()
		for _, n := range []string{"add_one", "global_counter", "tls_first", "main"} {
			s, _ := im.Symbol(n)
			im.SymbolAt(s.Value)
			im.LineAt(s.Value)
			im.FuncAt(s.Value)
			im.FuncDecl(s.Value)
			im.ReadVaddr(s.Value, make([]byte, 64))
		}
		im.DebugInfo()
		im.BuildID()
		im.TLS()
		for _, l := range im.Loads() {
			im.BiasFor(0x400000, l.Offset)
			im.ReadVaddr(l.Vaddr, make([]byte, 256))
			im.ReadCode(l.Vaddr, make([]byte, 256))
			im.ReadCode(l.Vaddr+l.Filesz/2, make([]byte, 16))
		}
	}
	for _, n := range []int{0, 3, 4, 16, 63, 64, 100, 0x200, len(orig) / 4, len(orig) / 2, len(orig) - 1} {
		exercise(orig[:n])
	}
	if err := os.WriteFile(bad, []byte("hello, world\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(bad); err == nil || !strings.Contains(err.Error(), "not a valid ELF file") {
		t.Errorf("Open(text file) = %v, want not a valid ELF file", err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 400; i++ {
		data := bytes.Clone(orig)
		for j := 0; j < 1+i%4; j++ {
			var off int
			switch j % 3 {
			case 0: // ELF, program and section headers
				off = rng.IntN(0x400)
			case 1: // anywhere in the file
				off = rng.IntN(len(data))
			default: // the section header table at the end
				off = len(data) - 1 - rng.IntN(min(len(data), 64*40))
			}
			data[off] = byte(rng.Uint32())
		}
		exercise(data)
	}
}

// segmentsELF writes an x86-64 ELF file of program headers only, for
// the PT_LOAD segments given (vaddr, offset, filesz, memsz, flags), 0x3000
// bytes of 0xaa after them, and returns its path.
func segmentsELF(t *testing.T, loads [][5]uint64) string {
	t.Helper()
	const ehdr, phdr = 64, 56
	b := make([]byte, ehdr+phdr*len(loads))
	le := binary.LittleEndian
	copy(b, "\x7fELF\x02\x01\x01")
	le.PutUint16(b[16:], uint16(elf.ET_DYN))
	le.PutUint16(b[18:], uint16(elf.EM_X86_64))
	le.PutUint32(b[20:], 1)
	le.PutUint64(b[32:], ehdr)
	le.PutUint16(b[52:], ehdr)
	le.PutUint16(b[54:], phdr)
	le.PutUint16(b[56:], uint16(len(loads)))
	le.PutUint16(b[58:], 64)
	for i, l := range loads {
		p := b[ehdr+phdr*i:]
		le.PutUint32(p[0:], uint32(elf.PT_LOAD))
		le.PutUint32(p[4:], uint32(l[4]))
		le.PutUint64(p[8:], l[1])
		le.PutUint64(p[16:], l[0])
		le.PutUint64(p[24:], l[0])
		le.PutUint64(p[32:], l[2])
		le.PutUint64(p[40:], l[3])
		le.PutUint64(p[48:], 0x1000)
	}
	b = append(b, bytes.Repeat([]byte{0xaa}, 0x3000)...)
	path := filepath.Join(t.TempDir(), "segments.so")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// ReadCode refuses code whose segment's file part lies beyond the file,
// whose addresses wrap, or that another segment overlaps: an error, never
// a huge allocation or another segment's bytes.
func TestReadCodeHostileSegments(t *testing.T) {
	const rx, rw = uint64(elf.PF_R | elf.PF_X), uint64(elf.PF_R | elf.PF_W)
	wrap := ^uint64(0) - 0xffff
	for _, c := range []struct {
		name  string
		loads [][5]uint64
		at    uint64
	}{
		{"addresses that wrap", [][5]uint64{{wrap, 0, 1 << 50, 1 << 50, rx}}, wrap + 0x10},
		{"a file part past the file's end", [][5]uint64{{0x1000, 0x1000, 1 << 40, 1 << 40, rx}}, 0x1010},
		{"a writable segment overlapping", [][5]uint64{{0x1000, 0x1000, 0x2000, 0x2000, rx}, {0x1800, 0x2000, 0x100, 0x100, rw}}, 0x17f8},
	} {
		im := mustOpen(t, segmentsELF(t, c.loads))
		if err := im.ReadCode(c.at, make([]byte, 16)); !errors.Is(err, ErrNotLoaded) {
			t.Errorf("%s: ReadCode(%#x) = %v, want ErrNotLoaded", c.name, c.at, err)
		}
	}
	im := mustOpen(t, segmentsELF(t, [][5]uint64{{0x1000, 0x1000, 0x2000, 0x2000, rx}}))
	got := make([]byte, 16)
	if err := im.ReadCode(0x1ff8, got); err != nil || !bytes.Equal(got, bytes.Repeat([]byte{0xaa}, 16)) {
		t.Errorf("ReadCode of a well-formed segment across a page = %x, %v", got, err)
	}
}

func TestParseNotes(t *testing.T) {
	le := binary.LittleEndian
	var b []byte
	note := func(name string, typ uint32, desc []byte, align int) {
		b = le.AppendUint32(b, uint32(len(name)+1))
		b = le.AppendUint32(b, uint32(len(desc)))
		b = le.AppendUint32(b, typ)
		b = append(b, name...)
		b = append(b, 0)
		for len(b)%align != 0 {
			b = append(b, 0)
		}
		b = append(b, desc...)
		for len(b)%align != 0 {
			b = append(b, 0)
		}
	}
	note("GNU", 5, []byte{1, 2, 3, 4, 5, 6, 7, 8}, 4)
	note("GNU", 3, []byte{0xde, 0xad, 0xbe, 0xef, 0x01}, 4)
	notes, err := ParseNotes(b, le, 4)
	if err != nil || len(notes) != 2 || notes[0].Name != "GNU" || notes[0].Type != 5 {
		t.Fatalf("ParseNotes = %+v, %v", notes, err)
	}
	if id := BuildIDFromNotes(notes); id != "deadbeef01" {
		t.Errorf("BuildIDFromNotes = %q, want deadbeef01", id)
	}
	// A descriptor that overruns the area.
	le.PutUint32(b[4:], 1000)
	if _, err := ParseNotes(b, le, 4); err == nil || !strings.Contains(err.Error(), "descriptor size 1000 overruns") {
		t.Errorf("ParseNotes(overrun) error = %v", err)
	}
	le.PutUint32(b[0:], 0xffffffff)
	if _, err := ParseNotes(b, le, 4); err == nil || !strings.Contains(err.Error(), "name size 4294967295 overruns") {
		t.Errorf("ParseNotes(huge name) error = %v", err)
	}
}

func TestFlatten(t *testing.T) {
	got := flatten([]interval{
		{lo: 100, hi: 200, id: 0},
		{lo: 110, hi: 120, id: 1},
		{lo: 130, hi: 140, id: 2},
		{lo: 300, hi: 400, id: 3},
		{lo: 350, hi: 450, id: 4}, // overlaps 3 without nesting
		{lo: 500, hi: 500, id: 5}, // empty
	})
	want := []span{
		{100, 110, 0}, {110, 120, 1}, {120, 130, 0}, {130, 140, 2}, {140, 200, 0},
		{300, 350, 3}, {350, 450, 4},
	}
	if len(got) != len(want) {
		t.Fatalf("flatten = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("flatten = %v, want %v", got, want)
		}
	}
	for _, c := range []struct {
		addr uint64
		id   int
		ok   bool
	}{{99, 0, false}, {100, 0, true}, {115, 1, true}, {125, 0, true}, {199, 0, true}, {200, 0, false}, {449, 4, true}, {450, 0, false}} {
		id, ok := findSpan(got, c.addr)
		if ok != c.ok || (ok && id != c.id) {
			t.Errorf("findSpan(%d) = %d, %v; want %d, %v", c.addr, id, ok, c.id, c.ok)
		}
	}
}
