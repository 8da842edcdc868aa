// Package elf reads the ELF images ompd-inspect needs: symbols from .symtab
// and .dynsym, the build-id, the load bias, the PT_TLS segment, the
// debug-link, and (from DWARF) functions and source lines.
package elf

// PLACEHOLDER: the real implementation replaces this file.

// Image is an opened ELF file.
type Image struct{ Path string }

// Sym is an ELF symbol at its link-time value.
type Sym struct {
	Name        string
	Value, Size uint64
	TLS, Func   bool
}

// Symbol finds a defined symbol by name.
func (im *Image) Symbol(name string) (Sym, bool) { return Sym{}, false }
