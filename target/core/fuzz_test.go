package core

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ompd-inspect/ompd-inspect/internal/fuzzlimit"
	"github.com/ompd-inspect/ompd-inspect/target"
)

// Fuzzing the core reader.
//
//	TMPDIR=/dev/shm go test -run '^$' -fuzz FuzzCore -fuzztime 10m -fuzzminimizetime 300x ./target/core/
//
// (See FuzzImage in target/elf for the tmpfs and -fuzzminimizetime.)
//
// An input is a core file. It is opened with the executable rebuilt from
// testdata/threads.c (fuzzProgFlags: the build is reproducible, so the
// build-id of the checked-in seeds matches on the machine that made them)
// and a sysroot holding copies of the host's files that the checked-in
// seeds map (fuzzSysrootFiles), so that the modules of the seeds are
// found and checked, and their pages not in the core are read from the
// files. (Copies, not links: a link in the sysroot is followed inside
// it.)
//
// The seeds are synthetic cores built by synthCore (with truncated and
// corrupted copies) and, in testdata/fuzz/FuzzCore, trimmed kernel and
// gcore cores of testdata/threads.c written by TestWriteFuzzSeeds, and
// every crasher found so far.

// fuzzProgFlags build testdata/threads.c for the fuzz target and its
// seeds.
var fuzzProgFlags = []string{"-g", "-O0", "-pthread", "-DVARIANT=1"}

// fuzzSysrootFiles are the libraries the checked-in kernel and gcore
// seeds map (written on Debian 12, x86-64), copied into the fuzz
// sysroot when the host has them.
var fuzzSysrootFiles = []string{
	"/usr/lib/x86_64-linux-gnu/libc.so.6",
	"/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
}

func FuzzCore(f *testing.F) {
	for _, s := range coreSeeds() {
		f.Add(s)
	}
	opts := fuzzOptions(f)
	path := filepath.Join(f.TempDir(), "core")
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzlimit.Exec(t, func() { exerciseCore(t, path, data, opts) })
	})
}

// fuzzOptions builds the executable of the seeds and the sysroot the
// fuzzed cores are opened with. Without gcc the executable is left out
// (the cores' executables are then not found).
func fuzzOptions(tb testing.TB) Options {
	tb.Helper()
	dir := tb.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		tb.Fatal(err)
	}
	for _, f := range fuzzSysrootFiles {
		if _, err := os.Stat(f); err != nil {
			tb.Logf("%s is not in the fuzz sysroot: %v", f, err)
			continue
		}
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(f)), 0o755); err != nil {
			tb.Fatal(err)
		}
		copyFile(tb, f, filepath.Join(root, f), -1)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		tb.Fatal(err)
	}
	opts := Options{Sysroot: root, SearchPath: []string{empty}}
	if exe, err := buildFuzzProg(dir); err == nil {
		opts.Exe = exe
	} else {
		tb.Logf("the fuzzed cores have no executable: %v", err)
	}
	return opts
}

// buildFuzzProg compiles testdata/threads.c with fuzzProgFlags into
// dir/threads.
func buildFuzzProg(dir string) (string, error) {
	src, err := filepath.Abs("testdata/threads.c")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "threads")
	args := append(slices.Clone(fuzzProgFlags), "-o", out, src)
	if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("gcc %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out, nil
}

// exerciseCore opens data as a core and reads its threads, modules and
// memory at addresses taken from it. Errors are fine; panics, unbounded
// loops or allocations and broken invariants are not.
func exerciseCore(t *testing.T, path string, data []byte, opts Options) {
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Open(path, opts)
	if err != nil {
		return
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}()
	c.CrashTID()
	c.Warnings()

	buf := make([]byte, 8192)
	read := func(addr uint64, n int) {
		if err := c.ReadMemory(addr, buf[:n]); err != nil && !errors.Is(err, target.ErrUnmapped) {
			t.Errorf("ReadMemory(%#x, %d): %v, which does not wrap target.ErrUnmapped", addr, n, err)
		}
	}

	threads := c.Threads()
	if len(threads) > MaxThreads {
		t.Errorf("%d threads, more than MaxThreads", len(threads))
	}
	for i, th := range threads {
		if th.TID == c.PID() && i > 0 && threads[0].TID != c.PID() {
			t.Errorf("the main thread %d is thread %d, not the first", th.TID, i)
		}
		if i < 8 {
			read(th.Regs.Rsp, 64)
			read(th.Regs.Rip, 16)
			read(th.Regs.Rbp, 16)
			read(th.Regs.FSBase, 8)
		}
	}
	mods := c.Modules()
	for i, m := range mods {
		if m == nil {
			t.Fatalf("module %d is nil", i)
		}
		if i >= 16 {
			continue
		}
		read(m.Start, 64)
		read(m.End-8, 16)
		read(m.Start+(m.End-m.Start)/2, 32)
		if m.Image != nil {
			if m.File == "" {
				t.Errorf("module %s has an image but no file", m.Name)
			}
			if l := m.Image.Loads(); len(l) > 0 {
				read(l[0].Vaddr+m.Bias, 32)
			}
		}
	}
	for _, mm := range c.Mismatches() {
		if mm.Module == nil || mm.Module.Image != nil {
			t.Errorf("mismatch %+v: its module must have no image", mm)
		}
	}
	if len(c.segs) > MaxProgramHeaders {
		t.Errorf("%d segments, more than MaxProgramHeaders", len(c.segs))
	}
	for i, s := range c.segs {
		if i >= 32 {
			break
		}
		read(s.vaddr, 16)
		read(s.vaddr+s.avail-4, 16) // across the end of the data present
		read(s.vaddr+s.memsz-4, 16) // across the end of the segment
		c.readCore(s.vaddr+s.dumped-4, buf[:16])
	}
	if len(c.segs) > 0 {
		// One read over many segments and holes.
		read(c.segs[0].vaddr, len(buf))
	}
	if len(c.maps) > MaxMappings {
		t.Errorf("%d NT_FILE mappings, more than MaxMappings", len(c.maps))
	}
	for i, m := range c.maps {
		if i >= 16 {
			break
		}
		read(m.start, 16)
		read(m.end-4, 8)
	}
	for _, k := range []uint64{atENTRY, atPHDR} {
		if a, ok := c.auxv[k]; ok {
			read(a, 16)
		}
	}
	if n := len(data); n >= 8 {
		read(binary.LittleEndian.Uint64(data[n-8:]), 64)
	}
	read(^uint64(0)-7, 16)
}

// coreSeeds returns synthetic cores: the standard one with and without
// PN_XNUM, cut at several places, with NT_FILE notes that are malformed,
// and without notes or segments.
func coreSeeds() [][]byte {
	var seeds [][]byte
	std := standardSynth()
	orig := std.bytes()
	seeds = append(seeds, orig)
	x := standardSynth()
	x.xnum = true
	seeds = append(seeds, x.bytes())
	notesOff := binary.LittleEndian.Uint64(orig[64+8:])
	notesEnd := notesOff + binary.LittleEndian.Uint64(orig[64+32:])
	for _, n := range []uint64{63, 64 + 56, notesOff + 100, notesEnd - 50, notesEnd + 0x1800} {
		if n < uint64(len(orig)) {
			seeds = append(seeds, slices.Clone(orig[:n]))
		}
	}
	// Segments whose data lies beyond the end of the file.
	beyond := slices.Clone(orig)
	binary.LittleEndian.PutUint64(beyond[64+56+8:], uint64(len(orig))+0x10000)
	seeds = append(seeds, beyond)
	// NT_FILE: more entries than names, a zero page size.
	if i := strings.Index(string(orig), "CORE\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x10"); i >= 0 {
		for _, v := range [][2]uint64{{5, 4096}, {4, 0}, {MaxMappings + 1, 4096}} {
			d := slices.Clone(orig)
			binary.LittleEndian.PutUint64(d[i+8:], v[0])
			binary.LittleEndian.PutUint64(d[i+16:], v[1])
			seeds = append(seeds, d)
		}
	}
	// No notes; notes only; one thread and overlapping segments.
	seeds = append(seeds, synthCore{loads: std.loads}.bytes(), synthCore{pid: 7, threads: std.threads[:1], files: std.files}.bytes())
	ov := standardSynth()
	ov.loads = append(ov.loads, synthLoad{vaddr: 0x10800, memsz: 0x1000, data: fill('D', 0x800), flags: elf.PF_R})
	seeds = append(seeds, ov.bytes())
	return seeds
}

// TestWriteFuzzSeeds writes the checked-in seeds of FuzzCore: a kernel
// core and a gcore core of testdata/threads.c, trimmed by trimCore. It
// runs only when $OMPD_INSPECT_WRITE_FUZZ_SEEDS is set, as root (the
// kernel core needs core_pattern set), with gcc and gdb installed.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("OMPD_INSPECT_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set OMPD_INSPECT_WRITE_FUZZ_SEEDS=1 to write testdata/fuzz/FuzzCore/*")
	}
	exe, err := buildFuzzProg(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	kernel, kinfo := kernelCore(t, exe, "")
	gcore, ginfo := gcoreOf(t, exe)
	for _, c := range []struct {
		name, path string
		info       *progInfo
	}{
		{"kernel-threads", kernel, kinfo},
		{"gcore-threads", gcore, ginfo},
	} {
		data, err := os.ReadFile(c.path)
		if err != nil {
			t.Fatal(err)
		}
		trimmed, err := trimCore(data, 1024, 256)
		if err != nil {
			t.Fatalf("trimming %s: %v", c.path, err)
		}
		out := filepath.Join("testdata", "fuzz", "FuzzCore", c.name)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		enc := "go test fuzz v1\n[]byte(" + strconv.Quote(string(trimmed)) + ")\n"
		if err := os.WriteFile(out, []byte(enc), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes trimmed to %d, written to %s (%d bytes)", c.path, len(data), len(trimmed), out, len(enc))
	}
}

// trimCore makes a small core of a large one: the ELF header, the program
// headers and the notes are kept; of each PT_LOAD segment only the first
// keep bytes when it starts with an ELF header (for its program headers
// and build-id note), else the first 64, and the stack bytes around each
// thread's stack pointer, as extra segments. The
// last segment keeps its size but its data lies beyond the end of the
// file. Section headers are dropped.
func trimCore(data []byte, keep, stack uint64) ([]byte, error) {
	le := binary.LittleEndian
	if len(data) < 64 {
		return nil, errors.New("no ELF header")
	}
	phoff, phnum := le.Uint64(data[32:]), uint64(le.Uint16(data[56:]))
	if phnum == 0xffff || phoff+phnum*56 > uint64(len(data)) {
		return nil, fmt.Errorf("%d program headers at %#x: not handled", phnum, phoff)
	}
	type phdr struct {
		typ                           uint32
		flags                         uint32
		off, vaddr, filesz, memsz, al uint64
	}
	var in []phdr
	for i := uint64(0); i < phnum; i++ {
		b := data[phoff+i*56:]
		in = append(in, phdr{le.Uint32(b), le.Uint32(b[4:]), le.Uint64(b[8:]), le.Uint64(b[16:]), le.Uint64(b[32:]), le.Uint64(b[40:]), le.Uint64(b[48:])})
	}
	// The stack pointers, from the NT_PRSTATUS notes.
	var rsps []uint64
	for _, p := range in {
		if p.typ != uint32(elf.PT_NOTE) || p.off+p.filesz > uint64(len(data)) {
			continue
		}
		for off := p.off; off+12 <= p.off+p.filesz; {
			namesz, descsz, typ := uint64(le.Uint32(data[off:])), uint64(le.Uint32(data[off+4:])), le.Uint32(data[off+8:])
			desc := off + 12 + alignUp4(namesz)
			if typ == ntPRSTATUS && descsz >= prstatusSize && desc+descsz <= uint64(len(data)) {
				rsps = append(rsps, le.Uint64(data[desc+prstatusReg+19*8:]))
			}
			off = desc + alignUp4(descsz)
		}
	}
	var out []phdr
	var payload [][]byte
	for _, p := range in {
		if p.off+p.filesz > uint64(len(data)) {
			return nil, fmt.Errorf("segment at %#x lies beyond the end of the file", p.vaddr)
		}
		switch {
		case p.typ == uint32(elf.PT_NOTE):
			out = append(out, p)
			payload = append(payload, data[p.off:p.off+p.filesz])
		case p.typ == uint32(elf.PT_LOAD):
			q := p
			q.filesz = min(p.filesz, keep)
			if q.filesz < 4 || string(data[p.off:p.off+4]) != elf.ELFMAG {
				q.filesz = min(q.filesz, 64) // not the start of an ELF file
			}
			out = append(out, q)
			payload = append(payload, data[p.off:p.off+q.filesz])
			for _, sp := range rsps {
				if sp < p.vaddr || sp-p.vaddr >= p.filesz {
					continue
				}
				lo := max(p.vaddr+q.filesz, (sp&^(stack-1))-stack)
				hi := min(p.vaddr+p.filesz, (sp&^(stack-1))+2*stack)
				if lo >= hi {
					continue
				}
				out = append(out, phdr{p.typ, p.flags, 0, lo, hi - lo, hi - lo, 1})
				payload = append(payload, data[p.off+(lo-p.vaddr):p.off+(hi-p.vaddr)])
			}
		default:
			out = append(out, p)
			payload = append(payload, nil)
		}
	}
	hdr := slices.Clone(data[:64])
	le.PutUint64(hdr[32:], 64)
	le.PutUint64(hdr[40:], 0) // e_shoff
	le.PutUint16(hdr[60:], 0) // e_shnum
	le.PutUint16(hdr[62:], 0) // e_shstrndx
	le.PutUint16(hdr[56:], uint16(len(out)))
	res := hdr
	off := uint64(64 + 56*len(out))
	lastLoad := -1
	for i := range out {
		if out[i].typ == uint32(elf.PT_LOAD) {
			lastLoad = i
		}
	}
	for i := range out {
		out[i].off = off
		if i == lastLoad && len(payload[i]) > 0 {
			// Present up to its first byte only: the rest is beyond
			// the end of the file.
			payload[i] = payload[i][:1]
		}
		off += uint64(len(payload[i]))
	}
	for _, p := range out {
		res = le.AppendUint32(res, p.typ)
		res = le.AppendUint32(res, p.flags)
		for _, v := range []uint64{p.off, p.vaddr, 0, p.filesz, p.memsz, p.al} {
			res = le.AppendUint64(res, v)
		}
	}
	for _, b := range payload {
		res = append(res, b...)
	}
	return res, nil
}

// Regression tests for the bugs the fuzz target and its review found.

// TestOpenNTFileFIFO: a file the NT_FILE note names that is not a regular
// file (here a FIFO, whose opening blocks until a writer comes; a device
// such as /dev/nvidia0 in the core of a GPU program) is not opened.
func TestOpenNTFileFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	s := standardSynth()
	s.files = append(s.files, synthFile{0x60000, 0x61000, 0, fifo})
	s.loads = append(s.loads, synthLoad{vaddr: 0x60000, memsz: 0x1000, flags: elf.PF_R | elf.PF_X})
	p := writeSynth(t, s)
	done := make(chan struct{})
	var c *Core
	var err error
	go func() {
		defer close(done)
		c, err = Open(p, Options{})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
			f.Close()
		}
		<-done
		t.Fatal("Open blocked opening the FIFO the NT_FILE note names")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, m := range c.Modules() {
		if m.Name == fifo && m.Image != nil {
			t.Errorf("the FIFO is a module with an image")
		}
	}
}

// ntFileNote returns the offset of the NT_FILE note's header in a
// synthetic core.
func ntFileNote(t *testing.T, data []byte) int {
	t.Helper()
	i := strings.Index(string(data), "CORE\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x10")
	if i < 12 {
		t.Fatal("NT_FILE note not found")
	}
	return i - 12
}

// TestNoteSizeBeyondSegment: a note whose descriptor size reaches past
// the end of its segment is reported as truncated without a buffer of
// that size being allocated.
func TestNoteSizeBeyondSegment(t *testing.T) {
	data := standardSynth().bytes()
	note := ntFileNote(t, data)
	binary.LittleEndian.PutUint32(data[note+4:], 200<<20) // descsz, below MaxFileNoteBytes
	p := filepath.Join(t.TempDir(), "core")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	before := fuzzlimit.HeapAllocs()
	c := mustOpenCore(t, p, Options{})
	if got := fuzzlimit.HeapAllocs() - before; got > 16<<20 {
		t.Errorf("Open allocated %d bytes for a %d-byte core", got, len(data))
	}
	notesOff := binary.LittleEndian.Uint64(data[64+8:])
	want := fmt.Sprintf("core is truncated: notes end inside the note at segment offset %#x", uint64(note)-notesOff)
	if !slices.Contains(c.Warnings(), want) {
		t.Errorf("Warnings = %q, want %q", c.Warnings(), want)
	}
}

// TestOverlappingNoteSegments: PT_NOTE segments that cover the same bytes
// are read only up to the size of the file in all, however many there
// are.
func TestOverlappingNoteSegments(t *testing.T) {
	orig := standardSynth().bytes()
	le := binary.LittleEndian
	phnum := int(le.Uint16(orig[56:]))
	// 20000 more program headers, appended after the data, each the
	// note segment again.
	const extra = 20000
	data := slices.Clone(orig)
	phoff := uint64(len(data))
	data = append(data, orig[64:64+56*phnum]...)
	for range extra {
		data = append(data, orig[64:64+56]...)
	}
	le.PutUint64(data[32:], phoff)
	le.PutUint16(data[56:], uint16(phnum+extra))
	p := filepath.Join(t.TempDir(), "core")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	before := fuzzlimit.HeapAllocs()
	c := mustOpenCore(t, p, Options{})
	if got := fuzzlimit.HeapAllocs() - before; got > 64<<20 {
		t.Errorf("Open allocated %d bytes for a %d-byte core", got, len(data))
	}
	// The notes are read once: the three threads, once each.
	if n := len(c.Threads()); n != 3 {
		t.Errorf("%d threads, want the 3 of the notes read once", n)
	}
	noteOff := le.Uint64(orig[64+8:])
	want := fmt.Sprintf("reading notes of %s: the PT_NOTE segment at offset %#x overlaps one already read; it is ignored, as is every other such segment", p, noteOff)
	if !slices.Contains(c.Warnings(), want) {
		t.Errorf("Warnings = %q, want %q", c.Warnings()[:min(len(c.Warnings()), 5)], want)
	}
}
