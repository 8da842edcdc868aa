package recovery

import (
	"sort"
	"strings"

	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// globalSizes are the sizes of recovered globals that the layout does not
// give (ompd_sizeof____kmp_X gives the others).
var globalSizes = map[string]uint64{
	"ompd_dll_locations": 8, "ompd_state": 8, "ompd_env_block": 8, "ompd_env_block_size": 8,
	"__kmp_threads": 8, "__kmp_threads_capacity": 4, "__kmp_openmp_version": 4,
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
		case name == "ompd_init" || name == "ompd_dll_locations_valid" || strings.HasPrefix(name, "ompd_bp_"):
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

func (k *Knowledge) isLayout(name string) bool {
	_, ok := k.Layout[name]
	return ok
}
