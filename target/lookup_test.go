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

// codeTarget is noModules that finds its one module (target.ModuleFinder)
// and whose memory reads are counted and read as 0xcc.
type codeTarget struct {
	noModules
	m     *target.Module
	reads int
}

func (c *codeTarget) ModuleAt(addr uint64) *target.Module {
	if c.m.Contains(addr) {
		return c.m
	}
	return nil
}

func (c *codeTarget) ReadMemory(addr uint64, buf []byte) error {
	c.reads++
	for i := range buf {
		buf[i] = 0xcc
	}
	return nil
}

// ReadCode reads a module's code from its file, found through the
// target's ModuleFinder (not its copied module list), and what is not
// read-only code (libc's writable data, an address outside every module)
// from the target's memory.
func TestReadCode(t *testing.T) {
	const libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
	im, err := elf.Open(libc)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	lo, hi, ok := im.LoadSpan(0x7f0000000000)
	if !ok {
		t.Fatalf("%s has no loadable segment", libc)
	}
	tg := &codeTarget{noModules: noModules{t}, m: &target.Module{Name: libc, Image: im, Bias: 0x7f0000000000, Start: lo, End: hi}}
	malloc, ok := im.Symbol("malloc")
	if !ok {
		t.Fatalf("%s has no malloc", libc)
	}
	want := make([]byte, 16)
	if _, err := im.ReadVaddr(malloc.Value, want); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 16)
	if err := target.ReadCode(tg, malloc.Value+tg.m.Bias, got); err != nil || string(got) != string(want) || tg.reads != 0 {
		t.Errorf("ReadCode(malloc) = %x, %v after %d memory reads; want %x from the file", got, err, tg.reads, want)
	}
	environ, ok := im.Symbol("__environ")
	if !ok {
		t.Fatalf("%s has no __environ", libc)
	}
	for _, addr := range []uint64{environ.Value + tg.m.Bias, lo - 0x1000} {
		tg.reads = 0
		if err := target.ReadCode(tg, addr, got[:8]); err != nil || got[0] != 0xcc || tg.reads != 1 {
			t.Errorf("ReadCode(%#x) = %x, %v after %d memory reads; want one read of memory", addr, got[:8], err, tg.reads)
		}
	}
}

// ownCode is codeTarget that reads its code itself (target.CodeReader),
// as 0xee.
type ownCode struct{ *codeTarget }

func (o ownCode) ReadCode(addr uint64, buf []byte) error {
	for i := range buf {
		buf[i] = 0xee
	}
	return nil
}

// A target that reads its code itself (a core) is asked, even for code
// its module's file holds.
func TestReadCodeOwnReader(t *testing.T) {
	im, err := elf.Open("/usr/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	lo, hi, _ := im.LoadSpan(0x7f0000000000)
	tg := ownCode{&codeTarget{noModules: noModules{t}, m: &target.Module{Image: im, Bias: 0x7f0000000000, Start: lo, End: hi}}}
	malloc, _ := im.Symbol("malloc")
	got := make([]byte, 4)
	if err := target.ReadCode(tg, malloc.Value+0x7f0000000000, got); err != nil || got[0] != 0xee || tg.reads != 0 {
		t.Errorf("ReadCode = %x, %v, %d memory reads; want the target's own 0xee", got, err, tg.reads)
	}
}
