package gomp

import (
	"bytes"
	"debug/elf"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/target"
)

// testCallbacks serves ompd.Callbacks (and RegisterReader) from a
// target.Target, as internal/inspect would: symbols from libgomp first.
type testCallbacks struct {
	t    target.Target
	gomp *target.Module
	tps  map[uint64]*target.Thread

	symOnce sync.Once
	syms    []modSym // every module's symbols at run-time addresses
}

// modSym is a symbol of a module's file, at its run-time address.
type modSym struct {
	name       string
	addr, size uint64
}

func newTestCallbacks(t target.Target) (*testCallbacks, error) {
	c := &testCallbacks{t: t, tps: map[uint64]*target.Thread{}}
	for _, m := range t.Modules() {
		if strings.HasPrefix(filepath.Base(m.File), "libgomp") || strings.HasPrefix(filepath.Base(m.Name), "libgomp") {
			c.gomp = m
		}
	}
	if c.gomp == nil {
		return nil, fmt.Errorf("no libgomp module")
	}
	th := t.Threads()
	for i := range th {
		c.tps[th[i].ThreadPointer()] = &th[i]
	}
	return c, nil
}

func (c *testCallbacks) SymbolAddr(name, hint string) (ompd.Address, error) {
	s, err := target.LookupSymbol(c.t, name, c.gomp)
	if err != nil {
		return 0, err
	}
	return s.Addr, nil
}

func (c *testCallbacks) ReadMemory(addr ompd.Address, buf []byte) error {
	return c.t.ReadMemory(addr, buf)
}

func (c *testCallbacks) ReadString(addr ompd.Address, max int) (string, error) {
	var out []byte
	for len(out) < max {
		b := make([]byte, 1)
		if err := c.t.ReadMemory(addr+uint64(len(out)), b); err != nil {
			return "", err
		}
		if i := bytes.IndexByte(b, 0); i >= 0 {
			return string(out), nil
		}
		out = append(out, b...)
	}
	return "", fmt.Errorf("no NUL within %d bytes", max)
}

func (c *testCallbacks) Sizes() (ompd.TypeSizes, error) {
	return ompd.TypeSizes{Char: 1, Short: 2, Int: 4, Long: 8, LongLong: 8, Pointer: 8}, nil
}

func (c *testCallbacks) ThreadContext(kind ompd.ThreadIDKind, id uint64) (ompd.ThreadContext, error) {
	if kind != ompd.ThreadIDPthread {
		return nil, fmt.Errorf("kind %d", kind)
	}
	if th, ok := c.tps[id]; ok {
		return th, nil
	}
	return nil, fmt.Errorf("no thread %#x", id)
}

func (c *testCallbacks) ThreadRegisters(ctx ompd.ThreadContext) (Registers, error) {
	th, ok := ctx.(*target.Thread)
	if !ok {
		return Registers{}, fmt.Errorf("context %T", ctx)
	}
	r := th.Regs
	return Registers{Rip: r.Rip, Rax: r.Rax, OrigRax: r.OrigRax, Rdi: r.Rdi, FSBase: r.FSBase, Rsp: r.Rsp}, nil
}

// ThreadPointers implements ThreadLister.
func (c *testCallbacks) ThreadPointers() []uint64 {
	var out []uint64
	for _, th := range c.t.Threads() {
		out = append(out, th.ThreadPointer())
	}
	return out
}

// SymbolAt implements SymbolNamer from the modules' files (.symtab and
// .dynsym; versions are not part of debug/elf's names).
func (c *testCallbacks) SymbolAt(addr uint64) (string, bool) {
	c.symOnce.Do(func() {
		for _, m := range c.t.Modules() {
			if m.File == "" {
				continue
			}
			f, err := elf.Open(m.File)
			if err != nil {
				continue
			}
			s1, _ := f.Symbols()
			s2, _ := f.DynamicSymbols()
			for _, s := range append(s1, s2...) {
				typ := elf.ST_TYPE(s.Info)
				if s.Section == elf.SHN_UNDEF || s.Name == "" || (typ != elf.STT_FUNC && typ != elf.STT_OBJECT) {
					continue
				}
				c.syms = append(c.syms, modSym{name: s.Name, addr: s.Value + m.Bias, size: s.Size})
			}
			f.Close()
		}
	})
	for _, s := range c.syms {
		if addr == s.addr || (addr > s.addr && addr-s.addr < s.size) {
			return s.name, true
		}
	}
	return "", false
}
