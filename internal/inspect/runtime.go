package inspect

import (
	"errors"
	"fmt"

	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/ompd/gomp"
	"github.com/ompd-inspect/ompd-inspect/ompd/llvm"
	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// ErrNotOpenMP is returned when the target has no OpenMP runtime that
// ompd-inspect knows.
var ErrNotOpenMP = errors.New("not an OpenMP program")

// Families are the runtime families ompd-inspect knows, in the order they
// are tried.
var Families = []ompd.Family{llvm.Family, gomp.Family}

// FamilyOf returns the family whose runtime the module m is, or nil.
func FamilyOf(m *target.Module) ompd.Family {
	if m == nil || m.Image == nil {
		return nil
	}
	has := func(name string) bool { _, ok := m.Image.Symbol(name); return ok }
	for _, f := range Families {
		if f.Recognizes(has) {
			return f
		}
	}
	return nil
}

// FindRuntime returns the module that holds the target's OpenMP runtime:
// the first module a known family recognizes. A target without any OpenMP
// runtime gives an error that says so.
func FindRuntime(t target.Target) (*target.Module, error) {
	for _, m := range t.Modules() {
		if m.Image != nil && FamilyOf(m) != nil {
			return m, nil
		}
	}
	// A runtime module that could not be opened (missing file, other
	// build-id) must not be reported as "not OpenMP".
	for _, m := range t.Modules() {
		for _, f := range Families {
			if m.Image == nil && f.MaybeRuntime(m.Name) {
				return nil, fmt.Errorf("the OpenMP runtime %s is mapped, but its file could not be used (see warnings)", m.Name)
			}
		}
	}
	return nil, fmt.Errorf("%w: no OpenMP runtime (libomp, libiomp5, libgomp) is loaded", ErrNotOpenMP)
}

// HasOMPDSymbols reports whether the runtime module keeps the OMPD layout
// symbols.
func HasOMPDSymbols(m *target.Module) bool {
	if m.Image == nil {
		return false
	}
	return llvm.HasLayoutSymbols(func(name string) bool { _, ok := m.Image.Symbol(name); return ok })
}

// PrepareImage does on the file of one of a target's modules, before the
// target is stopped, the work Build will do on it: its symbols are read
// (the runtime is found by them), an LLVM runtime's DWARF types are
// indexed, and a stripped one's knowledge is recovered from its code,
// with its release's type layouts when it has no DWARF types (0.6 to 1
// ms of a stopped 4-thread read) and its layout block in the order
// CheckMemory reads it. Build reports what cannot be read.
func PrepareImage(im *elf.Image) {
	_ = im.LoadSymbols()
	m := &target.Module{Name: im.Path, Image: im}
	if FamilyOf(m) != llvm.Family {
		return
	}
	ti, terr := im.Types()
	if terr == nil {
		ti.ScanAll()
	}
	if !HasOMPDSymbols(m) {
		if r := recovered(im); r.k != nil {
			layoutBlockOf(im, r.k)
			if terr != nil {
				_, _ = recoveredTypes(im, r.k) // kept with the image: Build reports its error
			}
		}
	}
	// After recovery, which adds symbols: OMPD looks the runtime's
	// symbols up by name hundreds of times while the target is held.
	im.IndexSymbolNames()
}
