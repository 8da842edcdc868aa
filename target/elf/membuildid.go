package elf

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
)

// Bounds of what MemoryBuildID reads: an ELF object has about a dozen
// program headers, right after its header, and a few hundred bytes of
// notes; a build-id is 20 bytes (SHA-1), seldom up to 32.
const (
	maxMemPhdrs      = 256
	maxMemPhdrOffset = 1 << 16
	maxMemNoteBytes  = 1 << 16
	maxBuildIDBytes  = 64
)

// MemoryBuildID returns the GNU build-id of the ELF object (64-bit,
// little-endian) mapped at base in a process's memory, read through read:
// from its header, the note segments its program headers name, placed by
// the bias its first loadable segment (which maps the header) gives.
// It returns "" and no error when the object has no build-id. Every byte
// read is the target's: sizes and counts are bounded, and an object that
// does not add up is an error.
func MemoryBuildID(read func(addr uint64, buf []byte) error, base uint64) (string, error) {
	var hdr [64]byte
	if err := read(base, hdr[:]); err != nil {
		return "", fmt.Errorf("reading the ELF header at %#x: %w", base, err)
	}
	if string(hdr[:4]) != elf.ELFMAG || elf.Class(hdr[elf.EI_CLASS]) != elf.ELFCLASS64 || elf.Data(hdr[elf.EI_DATA]) != elf.ELFDATA2LSB {
		return "", fmt.Errorf("no 64-bit little-endian ELF header at %#x", base)
	}
	le := binary.LittleEndian
	phoff, phentsize, phnum := le.Uint64(hdr[32:]), uint64(le.Uint16(hdr[54:])), uint64(le.Uint16(hdr[56:]))
	const phdrSize = 56 // an Elf64_Phdr
	if phentsize != phdrSize || phnum == 0 || phnum > maxMemPhdrs || phoff > maxMemPhdrOffset {
		return "", fmt.Errorf("ELF header at %#x: %d program headers of %d bytes at offset %#x", base, phnum, phentsize, phoff)
	}
	phdrs := make([]byte, phentsize*phnum)
	if err := read(base+phoff, phdrs); err != nil {
		return "", fmt.Errorf("reading the program headers at %#x: %w", base+phoff, err)
	}
	type seg struct {
		typ                       uint32
		off, vaddr, filesz, align uint64
	}
	segs := make([]seg, phnum)
	for i := range segs {
		p := phdrs[uint64(i)*phentsize:]
		segs[i] = seg{typ: le.Uint32(p), off: le.Uint64(p[8:]), vaddr: le.Uint64(p[16:]), filesz: le.Uint64(p[32:]), align: le.Uint64(p[48:])}
	}
	// The first loadable segment maps the file from offset 0, the
	// header with it: base is its address, rounded down to a page.
	bias, found := uint64(0), false
	for _, s := range segs {
		if elf.ProgType(s.typ) == elf.PT_LOAD {
			if s.off != 0 {
				return "", fmt.Errorf("ELF object at %#x: its first loadable segment maps offset %#x, not the header", base, s.off)
			}
			bias, found = base-(s.vaddr&^0xfff), true
			break
		}
	}
	if !found {
		return "", fmt.Errorf("ELF object at %#x has no loadable segment", base)
	}
	var errs []error
	budget := uint64(maxMemNoteBytes) // for all the note segments together
	for _, s := range segs {
		if elf.ProgType(s.typ) != elf.PT_NOTE || s.filesz == 0 {
			continue
		}
		if s.filesz > budget {
			errs = append(errs, fmt.Errorf("note segment at %#x: %d bytes, more than the %d left to read", bias+s.vaddr, s.filesz, budget))
			continue
		}
		budget -= s.filesz
		data := make([]byte, s.filesz)
		if err := read(bias+s.vaddr, data); err != nil {
			errs = append(errs, fmt.Errorf("reading the note segment at %#x: %w", bias+s.vaddr, err))
			continue
		}
		notes, _ := ParseNotes(data, le, s.align)
		if id := BuildIDFromNotes(notes); id != "" {
			if len(id) > 2*maxBuildIDBytes {
				return "", fmt.Errorf("note segment at %#x: a build-id of %d bytes", bias+s.vaddr, len(id)/2)
			}
			return id, nil
		}
	}
	return "", errors.Join(errs...)
}
