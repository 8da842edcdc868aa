// Package dll hosts a runtime's own OMPD library (for LLVM's runtime,
// libompd.so) as a second implementation of ompd-inspect's OMPD
// operations (ompd/backend). The library is loaded with dlopen, once per
// process and path, initialized once with a callback table that
// ompd-inspect serves from its own targets, and then gives each target an
// address space handle of its own.
//
// The package needs cgo. Built without it, Open reports that the backend
// is not built in, and the native backend does all the work.
package dll

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// ErrNotBuiltIn is returned by Open in a build without cgo.
var ErrNotBuiltIn = errors.New("the dll backend is not built in (ompd-inspect was built with CGO_ENABLED=0); the native backend (--backend native) works without it")

// Callbacks is what the library asks of the debugger: the callbacks of the
// native implementation, plus symbol lookup in a thread's context, which
// resolves a thread-local variable to that thread's instance.
type Callbacks interface {
	ompd.Callbacks
	// ThreadSymbolAddr returns the address of symbol name as thread ctx
	// sees it (ctx from ThreadContext).
	ThreadSymbolAddr(ctx ompd.ThreadContext, name, fileHint string) (ompd.Address, error)
}

// Candidates returns the paths to try, in order, for the OMPD library named
// by the runtime's ompd_dll_locations. The standard leaves relative names
// to the tool: ompd-inspect tries each name next to the runtime library
// (runtimeFile, the runtime's file on disk) and then as the dynamic linker
// finds it (LD_LIBRARY_PATH, the ld.so cache, the default directories).
// Absolute names are used as they are.
func Candidates(locations []string, runtimeFile string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, l := range locations {
		if l == "" {
			continue
		}
		if filepath.IsAbs(l) {
			add(l)
			continue
		}
		if runtimeFile != "" {
			p := filepath.Join(filepath.Dir(runtimeFile), l)
			if _, err := os.Stat(p); err == nil {
				add(p)
			}
		}
		add(l)
	}
	return out
}
