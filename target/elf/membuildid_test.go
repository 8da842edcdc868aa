package elf

import (
	"bytes"
	stdelf "debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
)

// fakeMemory is a process's memory holding some ranges.
type fakeMemory map[uint64][]byte

func (m fakeMemory) read(addr uint64, buf []byte) error {
	for start, b := range m {
		if addr >= start && addr-start <= uint64(len(b)) && uint64(len(buf)) <= uint64(len(b))-(addr-start) {
			copy(buf, b[addr-start:])
			return nil
		}
	}
	return fmt.Errorf("%#x: unmapped", addr)
}

// mapFile places the loadable segments of the ELF file data at bias plus
// their addresses, as the loader does (the header is where the segment
// of file offset 0 lands).
func mapFile(t *testing.T, data []byte, bias uint64) fakeMemory {
	t.Helper()
	f, err := stdelf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	mem := fakeMemory{}
	for _, p := range f.Progs {
		if p.Type != stdelf.PT_LOAD {
			continue
		}
		b := make([]byte, p.Memsz)
		copy(b, data[p.Off:p.Off+p.Filesz])
		mem[bias+p.Vaddr] = b
	}
	return mem
}

// shifted is the ELF file data with every program header's addresses
// moved by delta: a library made to look like an executable linked at a
// fixed address.
func shifted(data []byte, delta uint64) []byte {
	out := bytes.Clone(data)
	le := binary.LittleEndian
	phoff := le.Uint64(out[32:])
	for i := range uint64(le.Uint16(out[56:])) {
		p := out[phoff+i*56:]
		le.PutUint64(p[16:], le.Uint64(p[16:])+delta) // p_vaddr
		le.PutUint64(p[24:], le.Uint64(p[24:])+delta) // p_paddr
	}
	return out
}

// readLibc returns the C library's path and contents, skipping the test
// where it is not found.
func readLibc(t *testing.T) (string, []byte) {
	t.Helper()
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib64/libc.so.6", "/usr/lib64/libc.so.6"} {
		if data, err := os.ReadFile(p); err == nil {
			return p, data
		}
	}
	t.Skip("no x86-64 C library found")
	return "", nil
}

// TestMemoryBuildID reads the build-id of the C library as it would be
// mapped in a process, at two places, and compares it with the one its
// note section holds; then refuses mapped images that do not add up.
func TestMemoryBuildID(t *testing.T) {
	libc, data := readLibc(t)
	want := fixture.ELFBuildID(t, libc)
	f, err := stdelf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if firstLoad(f).Vaddr != 0 || firstLoad(f).Off != 0 {
		t.Fatalf("%s: the first loadable segment is at %#x (offset %#x); the test expects a library linked at 0", libc, firstLoad(f).Vaddr, firstLoad(f).Off)
	}
	for _, c := range []struct {
		name       string
		data       []byte
		bias, base uint64 // base: where the header lands
	}{
		// A shared library, linked at 0: its header at its bias.
		{"library", data, 0x7f0000000000, 0x7f0000000000},
		{"library elsewhere", data, 0x555555554000, 0x555555554000},
		// An executable linked at a fixed address, loaded there: the
		// header lies at that address and the bias is 0.
		{"fixed address", shifted(data, 0x400000), 0, 0x400000},
		// And one loaded away from its link address.
		{"moved", shifted(data, 0x400000), 0x1000000, 0x1400000},
	} {
		mem := mapFile(t, c.data, c.bias)
		got, err := MemoryBuildID(mem.read, c.base)
		if err != nil || got != want {
			t.Fatalf("%s: MemoryBuildID at %#x = %q, %v; want %q", c.name, c.base, got, err, want)
		}
	}
	const base = 0x7f0000000000
	// An object without a build-id note: none, and no error.
	mem := mapFile(t, data, base)
	hdr := mem[base]
	withoutNotes := fakeMemory{0x7f0000000000: append([]byte(nil), hdr[:4096]...)}
	phoff := binary.LittleEndian.Uint64(hdr[32:])
	phnum := binary.LittleEndian.Uint16(hdr[56:])
	for i := range uint64(phnum) {
		p := withoutNotes[0x7f0000000000][phoff+i*56:]
		if stdelf.ProgType(binary.LittleEndian.Uint32(p)) == stdelf.PT_NOTE {
			binary.LittleEndian.PutUint32(p, uint32(stdelf.PT_NULL))
		}
	}
	if got, err := MemoryBuildID(withoutNotes.read, 0x7f0000000000); got != "" || err != nil {
		t.Errorf("without note segments: %q, %v; want none and no error", got, err)
	}
	for name, c := range map[string]struct {
		edit func(h []byte)
		want string
	}{
		"not ELF":             {func(h []byte) { h[0] = 0 }, "no 64-bit little-endian ELF header"},
		"32-bit":              {func(h []byte) { h[stdelf.EI_CLASS] = byte(stdelf.ELFCLASS32) }, "no 64-bit"},
		"huge header count":   {func(h []byte) { binary.LittleEndian.PutUint16(h[56:], 60000) }, "program headers"},
		"small header size":   {func(h []byte) { binary.LittleEndian.PutUint16(h[54:], 8) }, "program headers"},
		"large header size":   {func(h []byte) { binary.LittleEndian.PutUint16(h[54:], 64) }, "program headers"},
		"far headers":         {func(h []byte) { binary.LittleEndian.PutUint64(h[32:], 1<<40) }, "program headers"},
		"first load not at 0": {func(h []byte) { setFirstLoad(h, func(p []byte) { binary.LittleEndian.PutUint64(p[8:], 0x1000) }) }, "not the header"},
		"no load": {func(h []byte) {
			setFirstLoad(h, func(p []byte) { binary.LittleEndian.PutUint32(p, uint32(stdelf.PT_NULL)) })
			dropLoads(h)
		}, "no loadable segment"},
		"huge note":     {func(h []byte) { setNote(h, func(p []byte) { binary.LittleEndian.PutUint64(p[32:], 1<<40) }) }, "note segment"},
		"note unmapped": {func(h []byte) { setNote(h, func(p []byte) { binary.LittleEndian.PutUint64(p[16:], 1<<46) }) }, "reading the note segment"},
	} {
		t.Run(name, func(t *testing.T) {
			mem := mapFile(t, data, base)
			h := append([]byte(nil), mem[0x7f0000000000]...)
			c.edit(h)
			mem[0x7f0000000000] = h
			got, err := MemoryBuildID(mem.read, 0x7f0000000000)
			if err == nil || !strings.Contains(err.Error(), c.want) || got != "" {
				t.Fatalf("MemoryBuildID = %q, %v; want an error saying %q", got, err, c.want)
			}
		})
	}
	// Only the header mapped: its program headers cannot be read.
	headerOnly := fakeMemory{0x7f0000000000: hdr[:64]}
	if _, err := MemoryBuildID(headerOnly.read, 0x7f0000000000); err == nil || !strings.Contains(err.Error(), "reading the program headers") {
		t.Errorf("header alone: %v; want the program headers unreadable", err)
	}
	// Unreadable memory.
	if _, err := MemoryBuildID(func(uint64, []byte) error { return errors.New("gone") }, 0x1000); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("unreadable: %v; want the read's error", err)
	}
}

// firstLoad is f's first loadable segment.
func firstLoad(f *stdelf.File) *stdelf.Prog {
	for _, p := range f.Progs {
		if p.Type == stdelf.PT_LOAD {
			return p
		}
	}
	return &stdelf.Prog{}
}

// editProgs calls edit on each program header of the mapped header h of
// type typ until it returns true.
func editProgs(h []byte, typ stdelf.ProgType, edit func(p []byte) bool) {
	phoff := binary.LittleEndian.Uint64(h[32:])
	phnum := uint64(binary.LittleEndian.Uint16(h[56:]))
	for i := range phnum {
		p := h[phoff+i*56 : phoff+(i+1)*56]
		if stdelf.ProgType(binary.LittleEndian.Uint32(p)) == typ && edit(p) {
			return
		}
	}
}

func setFirstLoad(h []byte, edit func(p []byte)) {
	editProgs(h, stdelf.PT_LOAD, func(p []byte) bool { edit(p); return true })
}

func dropLoads(h []byte) {
	editProgs(h, stdelf.PT_LOAD, func(p []byte) bool { binary.LittleEndian.PutUint32(p, uint32(stdelf.PT_NULL)); return false })
}

func setNote(h []byte, edit func(p []byte)) {
	editProgs(h, stdelf.PT_NOTE, func(p []byte) bool { edit(p); return false })
}
