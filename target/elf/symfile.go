package elf

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"sort"
)

// FileSymbol is a symbol to write into a symbol file.
type FileSymbol struct {
	Name string
	// Value is the link-time address; for a TLS symbol, the offset in
	// the module's TLS block.
	Value, Size uint64
	Func, TLS   bool
}

// WriteSymbolFile writes to w a separate debug file for im that names
// syms: an ELF file of im's type and machine with im's build-id note, the
// section headers of im's allocated sections (without contents, as
// objcopy --only-keep-debug leaves them), a symbol table of syms (local
// symbols, each in the section that holds its address), and an
// empty .debug_abbrev section (debuginfod serves a file as debug
// information only when it has a .debug_* section). Debuggers that look
// for a debug file by build-id then know the symbols.
func (im *Image) WriteSymbolFile(w io.Writer, syms []FileSymbol) error {
	if im.ef.Class != elf.ELFCLASS64 || im.ef.Data != elf.ELFDATA2LSB {
		return fmt.Errorf("%s: symbol files are written for little-endian 64-bit ELF only", im.Path)
	}
	bo := binary.LittleEndian
	type outSec struct {
		hdr  elf.Section64
		name string
		data []byte // nil for SHT_NOBITS
	}
	secs := []outSec{{}} // the null section
	var note []byte
	noteIdx := 0
	for _, s := range im.ef.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 || s.Type == elf.SHT_NULL {
			continue
		}
		o := outSec{name: s.Name, hdr: elf.Section64{
			Type: uint32(elf.SHT_NOBITS), Flags: uint64(s.Flags), Addr: s.Addr, Size: s.Size,
			Addralign: s.Addralign, Entsize: s.Entsize,
		}}
		if s.Type == elf.SHT_NOTE && s.Name == ".note.gnu.build-id" && s.Size <= MaxNoteBytes {
			data, err := im.readRange(s.Offset, s.Size)
			if err != nil {
				return fmt.Errorf("reading %s's build-id note: %w", im.Path, err)
			}
			o.hdr.Type, o.data, note, noteIdx = uint32(elf.SHT_NOTE), data, data, len(secs)
		}
		secs = append(secs, o)
	}
	if note == nil {
		return fmt.Errorf("%s has no .note.gnu.build-id section: a debug file could not be found for it by build-id", im.Path)
	}
	if len(secs)+4 >= int(elf.SHN_LORESERVE) {
		return fmt.Errorf("%s has %d allocated sections, more than a symbol file can index", im.Path, len(secs)-1)
	}
	// Sections by address, to place each symbol.
	sectionOf := func(sym FileSymbol) (uint16, bool) {
		for i, s := range secs {
			if i == 0 || s.hdr.Flags&uint64(elf.SHF_TLS) != 0 != sym.TLS {
				continue
			}
			if sym.TLS {
				// A TLS symbol's value is an offset in the TLS block:
				// place it in the first TLS section.
				return uint16(i), true
			}
			if sym.Value >= s.hdr.Addr && sym.Value-s.hdr.Addr < max(s.hdr.Size, 1) {
				return uint16(i), true
			}
		}
		return 0, false
	}
	sorted := append([]FileSymbol(nil), syms...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var strtab bytes.Buffer
	strtab.WriteByte(0)
	symtab := make([]byte, 24) // the null symbol
	for _, s := range sorted {
		shndx, ok := sectionOf(s)
		if !ok {
			return fmt.Errorf("symbol %s at %#x is in no allocated section of %s", s.Name, s.Value, im.Path)
		}
		typ := elf.STT_OBJECT
		switch {
		case s.TLS:
			typ = elf.STT_TLS
		case s.Func:
			typ = elf.STT_FUNC
		}
		var e [24]byte
		bo.PutUint32(e[0:], uint32(strtab.Len()))
		e[4] = byte(elf.ST_INFO(elf.STB_LOCAL, typ))
		bo.PutUint16(e[6:], shndx)
		bo.PutUint64(e[8:], s.Value)
		bo.PutUint64(e[16:], s.Size)
		symtab = append(symtab, e[:]...)
		strtab.WriteString(s.Name)
		strtab.WriteByte(0)
	}
	symIdx := len(secs)
	secs = append(secs,
		outSec{name: ".symtab", data: symtab, hdr: elf.Section64{Type: uint32(elf.SHT_SYMTAB), Link: uint32(symIdx + 1), Info: uint32(len(sorted) + 1), Addralign: 8, Entsize: 24}},
		outSec{name: ".strtab", data: strtab.Bytes(), hdr: elf.Section64{Type: uint32(elf.SHT_STRTAB), Addralign: 1}},
		outSec{name: ".debug_abbrev", data: []byte{0}, hdr: elf.Section64{Type: uint32(elf.SHT_PROGBITS), Addralign: 1}},
	)
	shstrIdx := len(secs)
	secs = append(secs, outSec{name: ".shstrtab", hdr: elf.Section64{Type: uint32(elf.SHT_STRTAB), Addralign: 1}})
	var shstr bytes.Buffer
	shstr.WriteByte(0)
	for i := 1; i < len(secs); i++ {
		secs[i].hdr.Name = uint32(shstr.Len())
		shstr.WriteString(secs[i].name)
		shstr.WriteByte(0)
	}
	secs[shstrIdx].data = shstr.Bytes()

	// File layout: ELF header, one PT_NOTE program header, the sections'
	// contents, the section headers.
	const ehSize, phSize, shSize = 64, 56, 64
	off := uint64(ehSize + phSize)
	for i := range secs {
		if secs[i].data == nil {
			continue
		}
		// The file's own alignments are not trusted: notes are 4-aligned,
		// the tables 8, strings 1.
		a := uint64(1)
		switch elf.SectionType(secs[i].hdr.Type) {
		case elf.SHT_NOTE:
			a = 4
		case elf.SHT_SYMTAB:
			a = 8
		}
		secs[i].hdr.Addralign = a
		off = (off + a - 1) / a * a
		secs[i].hdr.Off, secs[i].hdr.Size = off, uint64(len(secs[i].data))
		off += uint64(len(secs[i].data))
	}
	shoff := (off + 7) / 8 * 8
	var buf bytes.Buffer
	eh := elf.Header64{
		Type: uint16(im.ef.Type), Machine: uint16(im.ef.Machine), Version: uint32(elf.EV_CURRENT),
		Entry: im.ef.Entry, Phoff: ehSize, Shoff: shoff, Ehsize: ehSize, Phentsize: phSize, Phnum: 1,
		Shentsize: shSize, Shnum: uint16(len(secs)), Shstrndx: uint16(shstrIdx),
	}
	copy(eh.Ident[:], elf.ELFMAG)
	eh.Ident[elf.EI_CLASS], eh.Ident[elf.EI_DATA], eh.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	eh.Ident[elf.EI_OSABI] = byte(im.ef.OSABI)
	binary.Write(&buf, bo, eh)
	ns := secs[noteIdx].hdr
	binary.Write(&buf, bo, elf.Prog64{Type: uint32(elf.PT_NOTE), Flags: uint32(elf.PF_R), Off: ns.Off, Vaddr: ns.Addr, Paddr: ns.Addr, Filesz: ns.Size, Memsz: ns.Size, Align: 4})
	for _, s := range secs {
		if s.data == nil {
			continue
		}
		buf.Write(make([]byte, int(s.hdr.Off)-buf.Len()))
		buf.Write(s.data)
	}
	buf.Write(make([]byte, int(shoff)-buf.Len()))
	for _, s := range secs {
		binary.Write(&buf, bo, s.hdr)
	}
	_, err := w.Write(buf.Bytes())
	return err
}
