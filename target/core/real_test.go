package core

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/target"
)

const wantGreeting = "greeting from .rodata, variant 1\x00"

// checkCore asserts what every core of testdata/threads.c must show.
func checkCore(t *testing.T, c *Core, info *progInfo, exe string) {
	t.Helper()
	if c.PID() != info.pid {
		t.Errorf("PID = %d, want %d", c.PID(), info.pid)
	}
	threads := c.Threads()
	var tids []int
	for _, th := range threads {
		tids = append(tids, th.TID)
		self, ok := info.self[th.TID]
		if !ok {
			t.Errorf("thread %d is not one the program reported", th.TID)
			continue
		}
		if th.ThreadPointer() == 0 || th.ThreadPointer() != self {
			t.Errorf("thread %d: fs_base %#x, want pthread_self %#x", th.TID, th.ThreadPointer(), self)
		}
	}
	if len(threads) != 4 || len(tids) != len(info.self) {
		t.Fatalf("threads %v, want the 4 reported: %v", tids, info.self)
	}
	if threads[0].TID != info.mainTID {
		t.Errorf("first thread %d, want the main thread %d", threads[0].TID, info.mainTID)
	}

	mods := c.Modules()
	if len(mods) == 0 || mods[0].Name != exe || mods[0].File != exe || mods[0].Image == nil {
		t.Fatalf("first module %+v, want the executable %s", mods[0], exe)
	}
	var libc *target.Module
	for _, m := range mods {
		if strings.Contains(filepath.Base(m.Name), "libc.so") {
			libc = m
		}
	}
	if libc == nil || libc.Image == nil {
		t.Errorf("libc not among the modules or not opened: %+v", libc)
	}

	// The symbol resolves to the address the program printed, and the
	// value written at run time comes from the core.
	sym, err := target.LookupSymbol(c, "answer_global", nil)
	if err != nil || sym.Addr != info.global || sym.Module != mods[0] {
		t.Errorf("LookupSymbol(answer_global) = %+v, %v; want address %#x in the executable", sym, err, info.global)
	}
	if v, err := target.ReadUint64(c, info.global); err != nil || v != info.value {
		t.Errorf("answer_global = %#x, %v; want %#x", v, err, info.value)
	}
	// .rodata is not in the core: it is read from the executable.
	buf := make([]byte, len(wantGreeting))
	if err := c.ReadMemory(info.greeting, buf); err != nil || string(buf) != wantGreeting {
		t.Errorf("greeting = %q, %v; want %q", buf, err, wantGreeting)
	}

	// Each worker is inside its park function: its pc is there, or a
	// return address into it is on its stack.
	exeMod := mods[0]
	parks := map[int]string{1: "park_one", 2: "park_two", 3: "park_three"}
	for _, th := range threads {
		n, ok := info.worker[th.TID]
		if !ok {
			continue
		}
		if !inFunction(t, c, exeMod, th, parks[n]) {
			t.Errorf("thread %d (worker %d): no sign of %s at pc %#x or on the stack", th.TID, n, parks[n], th.Regs.Rip)
		}
	}

	if err := c.ReadMemory(0x10, make([]byte, 8)); !errors.Is(err, target.ErrUnmapped) {
		t.Errorf("reading address 0x10: %v, want ErrUnmapped", err)
	}
	if len(c.Mismatches()) != 0 {
		t.Errorf("Mismatches = %+v", c.Mismatches())
	}
}

// inFunction reports whether thread th is executing function fn of
// module m: its pc is in fn, or one of the first 512 words of its stack
// is an address inside fn.
func inFunction(t *testing.T, c *Core, m *target.Module, th target.Thread, fn string) bool {
	t.Helper()
	is := func(addr uint64) bool {
		if !m.Contains(addr) {
			return false
		}
		name, ok := m.Image.FuncAt(addr - m.Bias)
		return ok && name == fn
	}
	if is(th.Regs.Rip) {
		return true
	}
	stack := make([]byte, 512*8)
	if err := c.ReadMemory(th.Regs.Rsp, stack); err != nil {
		t.Errorf("reading the stack of thread %d at %#x: %v", th.TID, th.Regs.Rsp, err)
		return false
	}
	for i := 0; i < len(stack); i += 8 {
		if is(binary.LittleEndian.Uint64(stack[i:])) {
			return true
		}
	}
	return false
}

func TestKernelCore(t *testing.T) {
	dir := t.TempDir()
	exe := buildProg(t, dir, "prog", 1)
	corePath, info := kernelCore(t, exe, "")

	t.Run("Open", func(t *testing.T) {
		c := mustOpenCore(t, corePath, Options{})
		checkCore(t, c, info, exe)
		if w := c.Warnings(); len(w) != 0 {
			t.Errorf("Warnings = %q, want none", w)
		}
		if c.CrashTID() != info.mainTID {
			t.Errorf("CrashTID = %d, want the main thread %d, which called abort", c.CrashTID(), info.mainTID)
		}
		for _, th := range c.Threads() {
			if th.Signal != 6 {
				t.Errorf("thread %d: signal %d, want SIGABRT (6)", th.TID, th.Signal)
			}
		}
		// The greeting really came from the file: the core lacks it.
		if err := c.readCore(info.greeting, make([]byte, 8)); !errors.Is(err, target.ErrUnmapped) {
			t.Errorf("greeting in the core itself: %v, want ErrUnmapped", err)
		}
		// One read across the dumped first page of the executable and
		// the text page after it, which only the file has.
		exeMod := c.Modules()[0]
		got := make([]byte, 0x1000+64)
		if err := c.ReadMemory(exeMod.Start, got); err != nil {
			t.Fatal(err)
		}
		want := fileImage(t, exe, exeMod.Start-exeMod.Bias, len(got))
		if !bytes.Equal(got, want) {
			t.Errorf("bytes at %#x differ from the file's image", exeMod.Start)
		}
	})

	t.Run("MovedExecutable", func(t *testing.T) {
		moved := filepath.Join(dir, "moved")
		if err := os.Mkdir(moved, 0o755); err != nil {
			t.Fatal(err)
		}
		newPath := filepath.Join(moved, "prog")
		if err := os.Rename(exe, newPath); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(newPath, exe)

		c := mustOpenCore(t, corePath, Options{})
		m := c.Modules()[0]
		if m.Name != exe || m.Image != nil || m.File != "" {
			t.Errorf("module of the missing executable: %+v", m)
		}
		want := fmt.Sprintf("prog: file not found (tried %s); its code and read-only data are unavailable", exe)
		if w := c.Warnings(); len(w) != 1 || w[0] != want {
			t.Errorf("Warnings = %q, want [%q]", w, want)
		}
		if err := c.ReadMemory(info.greeting, make([]byte, 8)); !errors.Is(err, target.ErrUnmapped) {
			t.Errorf("greeting without the executable: %v, want ErrUnmapped", err)
		}
		if v, err := target.ReadUint64(c, info.global); err != nil || v != info.value {
			t.Errorf("answer_global = %#x, %v; want %#x from the core", v, err, info.value)
		}

		for _, opts := range []Options{{Exe: newPath}, {SearchPath: []string{dir, moved}}} {
			c := mustOpenCore(t, corePath, opts)
			m := c.Modules()[0]
			if m.Name != exe || m.File != newPath || m.Image == nil {
				t.Errorf("%+v: executable module %+v, want file %s", opts, m, newPath)
			}
			if w := c.Warnings(); len(w) != 0 {
				t.Errorf("%+v: Warnings = %q, want none (the core's build-id matched)", opts, w)
			}
			buf := make([]byte, len(wantGreeting))
			if err := c.ReadMemory(info.greeting, buf); err != nil || string(buf) != wantGreeting {
				t.Errorf("%+v: greeting = %q, %v", opts, buf, err)
			}
		}
	})

	t.Run("Sysroot", func(t *testing.T) {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(exe)), 0o755); err != nil {
			t.Fatal(err)
		}
		copyFile(t, exe, filepath.Join(root, exe), -1)
		c := mustOpenCore(t, corePath, Options{Sysroot: root})
		m := c.Modules()[0]
		if m.File != filepath.Join(root, exe) || m.Image == nil {
			t.Errorf("executable module %+v, want file under %s", m, root)
		}
		// libc is not in the sysroot.
		var found bool
		for _, w := range c.Warnings() {
			if strings.HasPrefix(w, "libc.so.6: file not found (tried "+root+"/") {
				found = true
			}
		}
		if !found {
			t.Errorf("Warnings = %q, want libc.so.6 not found under %s", c.Warnings(), root)
		}
	})

	t.Run("BuildIDMismatch", func(t *testing.T) {
		origID := buildID(t, exe)
		saved := filepath.Join(dir, "prog.orig")
		if err := os.Rename(exe, saved); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(saved, exe)
		other := buildProg(t, dir, "prog", 2) // same path, other build-id
		otherID := buildID(t, other)
		if otherID == origID {
			t.Fatal("rebuilding with -DVARIANT=2 kept the build-id")
		}
		c := mustOpenCore(t, corePath, Options{})
		m := c.Modules()[0]
		if m.Image != nil || m.File != "" {
			t.Errorf("mismatched executable was used: %+v", m)
		}
		mm := c.Mismatches()
		if len(mm) != 1 || mm[0].Module != m || mm[0].File != exe || mm[0].CoreBuildID != origID || mm[0].FileBuildID != otherID {
			t.Errorf("Mismatches = %+v, want the executable with core %s, file %s", mm, origID, otherID)
		}
		want := fmt.Sprintf("prog: build-id in core %s differs from %s (%s); not used", origID, exe, otherID)
		if w := c.Warnings(); len(w) != 1 || w[0] != want {
			t.Errorf("Warnings = %q, want [%q]", w, want)
		}
		if err := c.ReadMemory(info.greeting, make([]byte, 8)); !errors.Is(err, target.ErrUnmapped) {
			t.Errorf("greeting from a mismatched file: %v, want ErrUnmapped", err)
		}
		// With the right file on the search path, it is found there.
		c2 := mustOpenCore(t, corePath, Options{SearchPath: []string{filepath.Join(dir, "nonexistent"), dir}})
		if m := c2.Modules()[0]; m.Image != nil {
			t.Errorf("search path file has another base name, yet used: %+v", m)
		}
		alt := filepath.Join(dir, "alt")
		if err := os.Mkdir(alt, 0o755); err != nil {
			t.Fatal(err)
		}
		copyFile(t, saved, filepath.Join(alt, "prog"), -1)
		c3 := mustOpenCore(t, corePath, Options{SearchPath: []string{alt}})
		if m := c3.Modules()[0]; m.Image == nil || m.File != filepath.Join(alt, "prog") || len(c3.Mismatches()) != 0 {
			t.Errorf("matching file on the search path not used: %+v, mismatches %+v", m, c3.Mismatches())
		}
	})

	t.Run("Truncated", func(t *testing.T) {
		st, err := os.Stat(corePath)
		if err != nil {
			t.Fatal(err)
		}
		cut := st.Size() * 6 / 10
		short := filepath.Join(t.TempDir(), "core.short")
		copyFile(t, corePath, short, cut)

		// The segments as the full core describes them.
		ef, err := elf.Open(corePath)
		if err != nil {
			t.Fatal(err)
		}
		defer ef.Close()
		var want []string
		var beyond *elf.Prog
		for _, p := range ef.Progs {
			if p.Type != elf.PT_LOAD || p.Filesz == 0 || p.Off+p.Filesz <= uint64(cut) {
				continue
			}
			present := uint64(0)
			if p.Off < uint64(cut) {
				present = uint64(cut) - p.Off
			} else if beyond == nil {
				beyond = p
			}
			want = append(want, fmt.Sprintf("core is truncated: %d of %d bytes of segment at %#x present", present, p.Filesz, p.Vaddr))
		}
		if len(want) > maxTruncWarnings {
			want = append(want[:maxTruncWarnings], fmt.Sprintf("core is truncated: %d more segments are incomplete", len(want)-maxTruncWarnings))
		}
		if beyond == nil {
			t.Fatal("no segment lies wholly past the cut")
		}

		c := mustOpenCore(t, short, Options{})
		if got := c.Warnings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("Warnings =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if len(c.Threads()) != 4 {
			t.Errorf("%d threads, want 4 (the notes are at the start)", len(c.Threads()))
		}
		err = c.ReadMemory(beyond.Vaddr, make([]byte, 16))
		if !errors.Is(err, target.ErrUnmapped) || !strings.Contains(err.Error(), "core is truncated") {
			t.Errorf("reading %#x past the cut: %v, want ErrUnmapped (core is truncated)", beyond.Vaddr, err)
		}
		// What lies before the cut still reads.
		if v, err := target.ReadUint64(c, info.global); err != nil || v != info.value {
			t.Errorf("answer_global = %#x, %v; want %#x", v, err, info.value)
		}
	})

	t.Run("Hostile", func(t *testing.T) {
		// Corrupt bytes of the headers and notes of a copy, one at a
		// time, and open it: errors are fine, panics are not.
		bad := filepath.Join(t.TempDir(), "core.bad")
		copyFile(t, corePath, bad, -1)
		f, err := os.OpenFile(bad, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ef, err := elf.Open(corePath)
		if err != nil {
			t.Fatal(err)
		}
		notesEnd := int64(0x1000)
		for _, p := range ef.Progs {
			if p.Type == elf.PT_NOTE {
				notesEnd = int64(p.Off + p.Filesz)
			}
		}
		ef.Close()
		orig := make([]byte, notesEnd)
		if _, err := f.ReadAt(orig, 0); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 600; i++ {
			off := int64(i * 131 % int(notesEnd))
			if i < 200 {
				off = int64(i) * 7 % (64 + 56*int64(len(ef.Progs)))
			}
			val := []byte{0xff, 0x00, 0x7f, orig[off] ^ 0x80}[i%4]
			f.WriteAt([]byte{val}, off)
			if c, err := Open(bad, Options{}); err == nil {
				for _, th := range c.Threads() {
					c.ReadMemory(th.Regs.Rsp, make([]byte, 64))
				}
				c.ReadMemory(info.global, make([]byte, 8))
				c.ReadMemory(info.greeting, make([]byte, 8))
				c.Close()
			}
			f.WriteAt(orig[off:off+1], off)
		}
	})
}

// TestKernelCoreWithoutHeaders asks the kernel not to dump the first page
// of ELF mappings: the core then holds no build-ids, and a substituted
// executable cannot be verified.
func TestKernelCoreWithoutHeaders(t *testing.T) {
	dir := t.TempDir()
	exe := buildProg(t, dir, "prog", 1)
	corePath, info := kernelCore(t, exe, "0x23")

	c := mustOpenCore(t, corePath, Options{})
	checkCore(t, c, info, exe)
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("Warnings = %q, want none", w)
	}

	moved := filepath.Join(dir, "moved")
	if err := os.Rename(exe, moved); err != nil {
		t.Fatal(err)
	}
	c2 := mustOpenCore(t, corePath, Options{Exe: moved})
	want := fmt.Sprintf("prog: the core has no build-id for %s; using %s unverified", exe, moved)
	if w := c2.Warnings(); len(w) != 1 || w[0] != want {
		t.Errorf("Warnings = %q, want [%q]", w, want)
	}
	buf := make([]byte, len(wantGreeting))
	if err := c2.ReadMemory(info.greeting, buf); err != nil || string(buf) != wantGreeting {
		t.Errorf("greeting = %q, %v", buf, err)
	}
}

func TestGcore(t *testing.T) {
	dir := t.TempDir()
	exe := buildProg(t, dir, "prog", 1)
	corePath, info := gcoreOf(t, exe)
	c := mustOpenCore(t, corePath, Options{})
	checkCore(t, c, info, exe)
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("Warnings = %q, want none", w)
	}
	var tids []int
	for _, th := range c.Threads() {
		tids = append(tids, th.TID)
	}
	sort.Ints(tids)
	var want []int
	for tid := range info.self {
		want = append(want, tid)
	}
	sort.Ints(want)
	if fmt.Sprint(tids) != fmt.Sprint(want) {
		t.Errorf("TIDs %v, want %v", tids, want)
	}
}

func TestNotACore(t *testing.T) {
	dir := t.TempDir()
	exe := buildProg(t, dir, "prog", 1)
	if _, err := Open(exe, Options{}); err == nil || err.Error() != exe+": not a core file (ELF type ET_DYN)" {
		t.Errorf("Open(executable) = %v", err)
	}
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("not a core\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(text, Options{}); err == nil || err.Error() != text+": not an ELF file" {
		t.Errorf("Open(text) = %v", err)
	}
	if _, err := Open(filepath.Join(dir, "missing"), Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open(missing) = %v, want ErrNotExist", err)
	}
}

// fileImage returns n bytes of the memory image of an ELF file at
// link-time address vaddr, computed from its program headers with
// debug/elf: file bytes of PT_LOAD segments, zeros past their file size.
func fileImage(t *testing.T, path string, vaddr uint64, n int) []byte {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, n)
	for i := range out {
		a := vaddr + uint64(i)
		found := false
		for _, p := range f.Progs {
			if p.Type != elf.PT_LOAD || a < p.Vaddr || a >= p.Vaddr+p.Memsz {
				continue
			}
			found = true
			if a-p.Vaddr < p.Filesz {
				out[i] = raw[p.Off+a-p.Vaddr]
			}
		}
		if !found {
			// Between segments the mapping shows the file page.
			out[i] = raw[a] // PIE linked at 0: offset == address here
		}
	}
	return out
}
