package inspect

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ompd-inspect/ompd-inspect/target"
)

// ErrNotOpenMP is returned when the target has no LLVM OpenMP runtime.
var ErrNotOpenMP = errors.New("not an OpenMP program")

// FindRuntime returns the module that holds LLVM's OpenMP runtime: the one
// that defines __kmpc_fork_call (LLVM's runtime also defines the GOMP_*
// entry points of its libgomp compatibility layer). GNU libgomp and a
// target without any OpenMP runtime give errors that say so.
func FindRuntime(t target.Target) (*target.Module, error) {
	var gomp *target.Module
	for _, m := range t.Modules() {
		if m.Image == nil {
			continue
		}
		if _, ok := m.Image.Symbol("__kmpc_fork_call"); ok {
			return m, nil
		}
		if _, ok := m.Image.Symbol("GOMP_parallel"); ok && gomp == nil {
			gomp = m
		}
	}
	// A runtime module that could not be opened (missing file, other
	// build-id) must not be reported as "not OpenMP".
	for _, m := range t.Modules() {
		base := filepath.Base(m.Name)
		if m.Image == nil && (strings.HasPrefix(base, "libomp") || strings.HasPrefix(base, "libiomp5")) {
			return nil, fmt.Errorf("the OpenMP runtime %s is mapped, but its file could not be used (see warnings)", m.Name)
		}
	}
	if gomp != nil {
		return nil, fmt.Errorf("%w with LLVM's runtime: it uses GNU libgomp (%s), which has no OMPD support; build with clang -fopenmp (libomp)", ErrNotOpenMP, gomp.Name)
	}
	return nil, fmt.Errorf("%w: no OpenMP runtime (libomp, libiomp5) is loaded", ErrNotOpenMP)
}

// HasOMPDSymbols reports whether the runtime module keeps the OMPD layout
// symbols.
func HasOMPDSymbols(m *target.Module) bool {
	if m.Image == nil {
		return false
	}
	_, ok := m.Image.Symbol("ompd_sizeof__kmp_info_t")
	return ok
}
