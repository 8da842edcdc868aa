package recovery

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/ompd-inspect/ompd-inspect/ompd/llvm"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// globalSizes are the sizes of recovered globals that the layout does not
// give (ompd_sizeof____kmp_X gives the others).
var globalSizes = map[string]uint64{
	"ompd_dll_locations": 8, "ompd_state": 8, "ompd_env_block": 8, "ompd_env_block_size": 8,
	"__kmp_threads": 8, "__kmp_threads_capacity": 4, "__kmp_openmp_version": 4,
	"__kmp_i_lock_table": 16, // the part ompd-inspect reads: the rows and the count in use
}

// FileSymbols returns what k recovered from im as symbols for a separate
// debug file (elf.Image.WriteSymbolFile): the functions with the sizes
// their call frame information gives, the layout variables (8 bytes), the
// globals with the sizes the layout records for them, and the runtime's
// thread-local gtid from its own dynamic symbols.
func (k *Knowledge) FileSymbols(im *elf.Image) []elf.FileSymbol {
	var out []elf.FileSymbol
	for name, addr := range k.Symbols {
		s := elf.FileSymbol{Name: name, Value: addr}
		switch {
		case isFunction(name):
			s.Func = true
			if fde := im.FDEForPC(addr); fde != nil && fde.Begin() == addr {
				s.Size = fde.End() - fde.Begin()
			}
		case k.isLayout(name):
			s.Size = 8
		default:
			if n, ok := globalSizes[name]; ok {
				s.Size = n
			} else if n, ok := k.Layout["ompd_sizeof__"+name]; ok {
				s.Size = n
			}
		}
		out = append(out, s)
	}
	if g, ok := im.Symbol("__kmp_gtid"); ok && g.TLS {
		out = append(out, elf.FileSymbol{Name: "__kmp_gtid", Value: g.Value, Size: g.Size, TLS: true})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// isFunction reports whether the recovered symbol name is a function:
// ompd_init, the OMPD breakpoint functions and the traced functions.
func isFunction(name string) bool {
	return name == "ompd_init" || name == "ompd_dll_locations_valid" || strings.HasPrefix(name, "ompd_bp_") || slices.Contains(tracedFunctions, name)
}

func (k *Knowledge) isLayout(name string) bool {
	_, ok := k.Layout[name]
	return ok
}

// WriteDebugFile recovers what OMPD needs from the stripped runtime im and
// writes it as a separate debug file named by im's build-id under dir
// (dir/.build-id/xx/rest.debug, the layout gdb's debug-file-directory and
// debuginfod servers use). It returns the file's path and the recovery's
// warnings. The file is written under a temporary name and renamed, so a
// reader never sees half of it.
func WriteDebugFile(im *elf.Image, dir string) (path string, warnings []string, err error) {
	if llvm.HasLayoutSymbols(func(name string) bool { _, ok := im.Symbol(name); return ok }) {
		return "", nil, fmt.Errorf("%s has its OMPD symbols already (in itself or a debug file): there is nothing to recover", im.Path)
	}
	k, err := Recover(im)
	if err != nil {
		return "", nil, err
	}
	id := im.BuildID()
	if len(id) < 3 {
		return "", nil, fmt.Errorf("%s has no build-id: a debug file could not be found for it by build-id", im.Path)
	}
	path = filepath.Join(dir, ".build-id", id[:2], id[2:]+".debug")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", nil, fmt.Errorf("creating the debug file's directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".ompd-inspect-*.tmp")
	if err != nil {
		return "", nil, fmt.Errorf("creating the debug file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := im.WriteSymbolFile(tmp, k.FileSymbols(im)); err != nil {
		tmp.Close()
		return "", nil, fmt.Errorf("writing the debug file of %s: %w", im.Path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", nil, err
	}
	if err := tmp.Close(); err != nil {
		return "", nil, fmt.Errorf("writing the debug file of %s: %w", im.Path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", nil, fmt.Errorf("writing the debug file of %s: %w", im.Path, err)
	}
	return path, k.Warnings, nil
}
