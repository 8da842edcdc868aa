package elf

import (
	"debug/elf"
	"fmt"
)

// MaxSectionBytes is the largest section SectionData reads.
const MaxSectionBytes = 1 << 28

// MaxRelocations is the largest number of dynamic relocations read.
const MaxRelocations = 1 << 22

// Section is the contents of one section at its link-time address.
type Section struct {
	Name string
	// Addr is the link-time address of Data[0]; Writable and Exec say
	// what the section's flags allow.
	Addr           uint64
	Data           []byte
	Writable, Exec bool
}

// Contains reports whether the link-time address a lies in the section.
func (s *Section) Contains(a uint64) bool { return a >= s.Addr && a-s.Addr < uint64(len(s.Data)) }

// SectionData reads the section called name. A section that is absent,
// has no bytes in the file (SHT_NOBITS), or is larger than
// MaxSectionBytes gives an error that says so.
func (im *Image) SectionData(name string) (*Section, error) {
	s := im.ef.Section(name)
	if s == nil {
		return nil, fmt.Errorf("%s has no %s section", im.Path, name)
	}
	if s.Type == elf.SHT_NOBITS {
		return nil, fmt.Errorf("%s: section %s has no contents in the file", im.Path, name)
	}
	if s.Size > MaxSectionBytes {
		return nil, fmt.Errorf("%s: section %s is %d bytes, more than %d (limit MaxSectionBytes)", im.Path, name, s.Size, MaxSectionBytes)
	}
	data, err := im.readRange(s.Offset, s.Size)
	if err != nil {
		return nil, fmt.Errorf("section %s: %w", name, err)
	}
	return &Section{Name: name, Addr: s.Addr, Data: data, Writable: s.Flags&elf.SHF_WRITE != 0, Exec: s.Flags&elf.SHF_EXECINSTR != 0}, nil
}

// SectionAt returns the name of the allocated section that holds the
// link-time address a, and whether it is writable; ok is false when no
// section holds it.
func (im *Image) SectionAt(a uint64) (name string, writable, ok bool) {
	for _, s := range im.ef.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && a >= s.Addr && a-s.Addr < s.Size {
			return s.Name, s.Flags&elf.SHF_WRITE != 0, true
		}
	}
	return "", false, false
}

// ExecutableAt reports whether the link-time address a lies in a section
// of code (SHF_EXECINSTR) that is loaded.
func (im *Image) ExecutableAt(a uint64) bool {
	for _, s := range im.ef.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && s.Flags&elf.SHF_EXECINSTR != 0 && a >= s.Addr && a-s.Addr < s.Size {
			return true
		}
	}
	return false
}

// Reloc is one dynamic relocation (Elf64_Rela).
type Reloc struct {
	// Offset is the link-time address the relocation writes.
	Offset uint64
	Type   elf.R_X86_64
	// Sym is the index of the symbol in .dynsym (0 for none).
	Sym    uint32
	Addend int64
}

// DynamicRelocations reads the x86-64 relocations with addends of the
// SHT_RELA sections that the dynamic linker applies (.rela.dyn; not the
// PLT's).
func (im *Image) DynamicRelocations() ([]Reloc, error) {
	if im.ef.Machine != elf.EM_X86_64 || im.ef.Class != elf.ELFCLASS64 {
		return nil, fmt.Errorf("%s: dynamic relocations are read only for x86-64", im.Path)
	}
	var out []Reloc
	for _, s := range im.ef.Sections {
		if s.Type != elf.SHT_RELA || s.Flags&elf.SHF_ALLOC == 0 || s.Name == ".rela.plt" {
			continue
		}
		if s.Size%24 != 0 {
			return nil, fmt.Errorf("%s: section %s is %d bytes, not a whole number of relocations", im.Path, s.Name, s.Size)
		}
		if uint64(len(out))+s.Size/24 > MaxRelocations {
			return nil, fmt.Errorf("%s: more than %d dynamic relocations (limit MaxRelocations)", im.Path, MaxRelocations)
		}
		data, err := im.readRange(s.Offset, s.Size)
		if err != nil {
			return nil, fmt.Errorf("section %s: %w", s.Name, err)
		}
		bo := im.ef.ByteOrder
		for i := 0; i+24 <= len(data); i += 24 {
			info := bo.Uint64(data[i+8:])
			out = append(out, Reloc{
				Offset: bo.Uint64(data[i:]),
				Type:   elf.R_X86_64(info & 0xffffffff),
				Sym:    uint32(info >> 32),
				Addend: int64(bo.Uint64(data[i+16:])),
			})
		}
	}
	return out, nil
}

// HasSymtab reports whether the file itself has a symbol table (.symtab):
// a stripped file has only .dynsym, and Symbol then also reads the
// .symtab of its separate debug file.
func (im *Image) HasSymtab() bool { return im.ef.SectionByType(elf.SHT_SYMTAB) != nil }
