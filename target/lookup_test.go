package target_test

import (
	"testing"

	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// noModules is a target that fails the test when its module list is
// asked for (a live process copies it at each call).
type noModules struct{ t *testing.T }

func (n noModules) PID() int                                 { return 1 }
func (n noModules) Threads() []target.Thread                 { return nil }
func (n noModules) ReadMemory(addr uint64, buf []byte) error { return target.ErrUnmapped }
func (n noModules) Warnings() []string                       { return nil }
func (n noModules) Close() error                             { return nil }
func (n noModules) Modules() []*target.Module {
	n.t.Error("LookupSymbol in one module asked for the target's module list")
	return nil
}

// LookupSymbol in one module reads only that module's symbols: the
// address is the symbol's value plus the module's bias, and a name the
// module lacks is not found.
func TestLookupSymbolInModule(t *testing.T) {
	const libc = "/usr/lib/x86_64-linux-gnu/libc.so.6" // Debian's, as everywhere ompd-inspect runs
	im, err := elf.Open(libc)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	sym, ok := im.Symbol("malloc")
	if !ok || sym.Value == 0 {
		t.Fatalf("%s has no malloc", libc)
	}
	m := &target.Module{Name: libc, Image: im, Bias: 0x7f0000000000}
	s, err := target.LookupSymbol(noModules{t}, "malloc", m)
	if err != nil || s.Addr != sym.Value+m.Bias || s.Module != m || s.TLS {
		t.Errorf("LookupSymbol(malloc) = %+v, %v; want %#x in the module", s, err, sym.Value+m.Bias)
	}
	if _, err := target.LookupSymbol(noModules{t}, "no_such_symbol_here", m); err == nil ||
		err.Error() != "symbol no_such_symbol_here: not found in any loaded module" {
		t.Errorf("LookupSymbol(no_such_symbol_here) error %v", err)
	}
}
