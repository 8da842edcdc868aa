package elf

import (
	stdelf "debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
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

// mapFile places path's loadable segments in a fakeMemory as the loader
// would, the first (which maps the header) at base.
func mapFile(t *testing.T, path string, base uint64) fakeMemory {
	t.Helper()
	f, err := stdelf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem := fakeMemory{}
	var bias uint64
	first := true
	for _, p := range f.Progs {
		if p.Type != stdelf.PT_LOAD {
			continue
		}
		if first {
			bias, first = base-p.Vaddr&^0xfff, false
		}
		b := make([]byte, p.Memsz)
		if _, err := p.ReadAt(b[:p.Filesz], 0); err != nil {
			t.Fatal(err)
		}
		mem[bias+p.Vaddr] = b
	}
	return mem
}

// sectionBuildID is the oracle: the build-id from the file's
// .note.gnu.build-id section, which MemoryBuildID does not read.
func sectionBuildID(t *testing.T, path string) string {
	t.Helper()
	f, err := stdelf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := f.Section(".note.gnu.build-id")
	if s == nil {
		t.Fatalf("%s has no .note.gnu.build-id", path)
	}
	data, err := s.Data()
	if err != nil {
		t.Fatal(err)
	}
	namesz, descsz := binary.LittleEndian.Uint32(data), binary.LittleEndian.Uint32(data[4:])
	off := 12 + (namesz+3)&^3
	return hex.EncodeToString(data[off : off+descsz])
}

// TestMemoryBuildID reads the build-id of the C library as it would be
// mapped in a process, at two places, and compares it with the one its
// note section holds; then refuses mapped images that do not add up.
func TestMemoryBuildID(t *testing.T) {
	const libc = "/lib/x86_64-linux-gnu/libc.so.6"
	want := sectionBuildID(t, libc)
	for _, base := range []uint64{0x7f0000000000, 0x555555554000} {
		mem := mapFile(t, libc, base)
		got, err := MemoryBuildID(mem.read, base)
		if err != nil || got != want {
			t.Fatalf("at %#x: MemoryBuildID = %q, %v; want %q", base, got, err, want)
		}
	}
	// An object without a build-id note: none, and no error.
	mem := mapFile(t, libc, 0x7f0000000000)
	hdr := mem[0x7f0000000000]
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
			mem := mapFile(t, libc, 0x7f0000000000)
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
