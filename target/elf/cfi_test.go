package elf

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// noCFIFlags make gcc put call frame information in .debug_frame (with
// -g) instead of .eh_frame.
var noCFIFlags = []string{"-fno-asynchronous-unwind-tables", "-fno-unwind-tables"}

// checkFDEs asserts that each of the program's functions is covered by one
// entry spanning exactly its symbol, and that the entries are sorted.
func checkFDEs(t *testing.T, im *Image) {
	t.Helper()
	fdes, err := im.FrameEntries()
	if err != nil {
		t.Fatalf("FrameEntries: %v", err)
	}
	for i := 1; i < len(fdes); i++ {
		if fdes[i-1].Begin() > fdes[i].Begin() {
			t.Fatalf("entries not sorted: %#x before %#x", fdes[i-1].Begin(), fdes[i].Begin())
		}
	}
	for _, name := range []string{"main", "add_one", "helper"} {
		s := mustSym(t, im, name)
		for _, pc := range []uint64{s.Value, s.Value + s.Size/2, s.Value + s.Size - 1} {
			fde := im.FDEForPC(pc)
			if fde == nil {
				t.Errorf("%s: no entry for %s at %#x (%d entries)", im.Path, name, pc, len(fdes))
				continue
			}
			if fde.Begin() != s.Value || fde.End() != s.Value+s.Size {
				t.Errorf("%s: entry for %s at %#x covers %#x-%#x, want %#x-%#x", im.Path, name, pc, fde.Begin(), fde.End(), s.Value, s.Value+s.Size)
			}
		}
	}
	if fde := im.FDEForPC(0); fde != nil {
		t.Errorf("%s: an entry covers address 0: %#x-%#x", im.Path, fde.Begin(), fde.End())
	}
}

// hasSection reports whether the file at path has a section name with
// contents.
func hasSection(t *testing.T, path, name string) bool {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := f.Section(name)
	return s != nil && s.Type != elf.SHT_NOBITS && s.Size > 0
}

// TestFrameEntriesEHFrame reads .eh_frame, which gcc emits by default, of a
// PIE and a shared object.
func TestFrameEntriesEHFrame(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{
		compile(t, "gcc", dir, "pie"),
		compile(t, "gcc", dir, "lib.so", "-shared", "-fPIC"),
	} {
		if hasSection(t, p, ".debug_frame") {
			t.Fatalf("%s has .debug_frame; the test wants .eh_frame alone", p)
		}
		checkFDEs(t, mustOpen(t, p))
	}
}

// TestFrameEntriesDebugFrame reads .debug_frame, in the file itself and in
// its separate debug file, and finds nothing once the debug file is gone.
func TestFrameEntriesDebugFrame(t *testing.T) {
	dir := t.TempDir()
	full := compile(t, "gcc", dir, "prog", noCFIFlags...)
	if !hasSection(t, full, ".debug_frame") {
		t.Fatalf("%s has no .debug_frame", full)
	}
	checkFDEs(t, mustOpen(t, full))

	stripped, debug := splitDebug(t, dir, full)
	im := mustOpen(t, stripped)
	checkFDEs(t, im)
	if im.DebugFile() != debug {
		t.Errorf("DebugFile() = %q, want %q", im.DebugFile(), debug)
	}

	if err := os.Remove(debug); err != nil {
		t.Fatal(err)
	}
	alone := mustOpen(t, stripped)
	fdes, err := alone.FrameEntries()
	if err != nil {
		t.Fatalf("FrameEntries without the debug file: %v", err)
	}
	if fde := FindFDE(fdes, mustSym(t, im, "add_one").Value); fde != nil {
		t.Errorf("without the debug file, an entry covers add_one: %#x-%#x", fde.Begin(), fde.End())
	}
}

// TestFrameEntriesOnce checks that the entries are parsed once and shared.
func TestFrameEntriesOnce(t *testing.T) {
	im := mustOpen(t, compile(t, "gcc", t.TempDir(), "prog"))
	a, errA := im.FrameEntries()
	b, errB := im.FrameEntries()
	if errA != nil || errB != nil || len(a) == 0 || &a[0] != &b[0] {
		t.Errorf("FrameEntries twice: %d entries (%v), %d entries (%v), want the same slice", len(a), errA, len(b), errB)
	}
	if FindFDE(nil, 0x1000) != nil {
		t.Error("FindFDE(nil) found an entry")
	}
}

// sectionHeaderOffset returns the file offset of the section header of
// the section name, and the section's own offset and size.
func sectionHeaderOffset(t *testing.T, path, name string) (hdr, off, size uint64) {
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
	shoff := binary.LittleEndian.Uint64(raw[0x28:])
	shentsize := uint64(binary.LittleEndian.Uint16(raw[0x3a:]))
	for i, s := range f.Sections {
		if s.Name == name {
			return shoff + uint64(i)*shentsize, s.Offset, s.Size
		}
	}
	t.Fatalf("%s has no %s", path, name)
	return 0, 0, 0
}

// TestFrameEntriesHostile parses corrupted call frame information: errors
// are fine, panics are not, and a section beyond the size limit is refused.
func TestFrameEntriesHostile(t *testing.T) {
	dir := t.TempDir()
	path := compile(t, "gcc", dir, "prog")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	hdr, off, size := sectionHeaderOffset(t, path, ".eh_frame")
	bad := filepath.Join(dir, "bad")
	exercise := func(data []byte) error {
		t.Helper()
		if err := os.WriteFile(bad, data, 0o644); err != nil {
			t.Fatal(err)
		}
		im, err := open(bad, nil)
		if err != nil {
			return err
		}
		defer im.Close()
		fdes, err := im.FrameEntries()
		for _, f := range fdes {
			if f.End() <= f.Begin() {
				t.Errorf("kept an empty entry %#x-%#x", f.Begin(), f.End())
			}
			im.FDEForPC(f.Begin())
		}
		return err
	}

	// Oversized: the section header claims more than the limit.
	data := bytes.Clone(orig)
	binary.LittleEndian.PutUint64(data[hdr+0x20:], MaxFrameSectionBytes+1)
	if err := exercise(data); err == nil || !strings.Contains(err.Error(), "limit MaxFrameSectionBytes") {
		t.Errorf("oversized .eh_frame: %v, want the MaxFrameSectionBytes limit", err)
	}

	// Garbage and truncated entries inside the section.
	failed := 0
	for _, fill := range []byte{0x00, 0xff, 0x41} {
		data := bytes.Clone(orig)
		for i := off; i < off+size; i++ {
			data[i] = fill
		}
		if exercise(data) != nil {
			failed++
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 500 {
		data := bytes.Clone(orig)
		for range 1 + i%8 {
			data[off+rng.Uint64N(size)] = byte(rng.Uint32())
		}
		if exercise(data) != nil {
			failed++
		}
	}
	// Most corruptions go unnoticed (they change an address or a rule),
	// but some must be reported rather than crash.
	if failed == 0 {
		t.Error("no corruption of .eh_frame was reported as an error")
	}
	t.Logf("%d of 503 corrupted files gave an error", failed)
}
