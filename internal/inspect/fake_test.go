package inspect_test

// A target for the builder's tests: a real core of a fixture program, seen
// through an overlay that rewrites chosen bytes of its memory and adds
// memory of its own in a region the core does not map. The report is then
// built exactly as the CLI builds it, over runtime structures a real
// libomp laid out, with one structure made to trip a bound.

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/core"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

const (
	pageSize = 4096
	// freshBase..freshEnd is the overlay's own memory: no core of a
	// fixture maps it (checked), and the overlay answers every read in
	// it. Pages alloc never gave out are unmapped.
	freshBase = 0x1000_0000_0000
	freshEnd  = 0x1001_0000_0000
	// hole is an address in the overlay's region that alloc never gives
	// out: a pointer into unmapped memory.
	hole = freshEnd - 0x10_0000
)

// overlayPage holds the rewritten bytes of one page and which of them are
// rewritten.
type overlayPage struct {
	data [pageSize]byte
	set  [pageSize]bool
}

// patched is a target.Target whose memory is the base target's with an
// overlay. The base is shared and never closed by it.
type patched struct {
	target.Target
	pages map[uint64]*overlayPage
	next  uint64 // next free address in the overlay's region
}

func newPatched(base target.Target) *patched {
	return &patched{Target: base, pages: map[uint64]*overlayPage{}, next: freshBase}
}

func (p *patched) Close() error { return nil }

func (p *patched) ReadMemory(addr uint64, buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	if addr+uint64(len(buf)) < addr {
		return fmt.Errorf("reading %d bytes at %#x: address wraps: %w", len(buf), addr, target.ErrUnmapped)
	}
	fresh := addr < freshEnd && addr+uint64(len(buf)) > freshBase
	var baseErr error
	if !fresh {
		baseErr = p.Target.ReadMemory(addr, buf)
	}
	for i := range buf {
		a := addr + uint64(i)
		if pg, ok := p.pages[a&^(pageSize-1)]; ok && pg.set[a%pageSize] {
			buf[i] = pg.data[a%pageSize]
			continue
		}
		if fresh {
			return fmt.Errorf("reading %d bytes at %#x: %#x is not mapped: %w", len(buf), addr, a, target.ErrUnmapped)
		}
		if baseErr != nil {
			return baseErr
		}
	}
	return nil
}

// write rewrites memory at addr.
func (p *patched) write(addr uint64, b []byte) {
	for i, v := range b {
		a := addr + uint64(i)
		pg, ok := p.pages[a&^(pageSize-1)]
		if !ok {
			pg = &overlayPage{}
			p.pages[a&^(pageSize-1)] = pg
		}
		pg.data[a%pageSize] = v
		pg.set[a%pageSize] = true
	}
}

// put writes the low size bytes of v at addr.
func (p *patched) put(addr, size, v uint64) {
	p.write(addr, binary.LittleEndian.AppendUint64(nil, v)[:size])
}

// alloc returns n zeroed bytes of the overlay's own memory, 64-aligned.
// Like a real mapping, the rest of their pages reads as zeros.
func (p *patched) alloc(n uint64) uint64 {
	a := (p.next + 63) &^ 63
	p.next = a + max(n, 1)
	if p.next > hole {
		panic("overlay memory exhausted")
	}
	for pg := a &^ (pageSize - 1); pg < p.next; pg += pageSize {
		op, ok := p.pages[pg]
		if !ok {
			op = &overlayPage{}
			p.pages[pg] = op
		}
		for i := range op.set {
			op.set[i] = true // bytes never written are zero
		}
	}
	return a
}

// fill allocates n bytes, all b.
func (p *patched) fill(b byte, n uint64) uint64 {
	a := p.alloc(n)
	buf := make([]byte, n)
	for i := range buf {
		buf[i] = b
	}
	p.write(a, buf)
	return a
}

// snapshot is a core of a fixture program, shared by the cases of one
// test (each reads it through its own overlay), with what the tests need
// to find the runtime's structures in it.
type snapshot struct {
	core  *core.Core
	ready fixture.Ready
	rt    *target.Module
	types *elf.TypeIndex
	base  *inspect.Report // the report of the unchanged core
}

// snapshotOf makes a core of fixture name run with OMP_DEBUG=enabled and
// builds its unchanged report.
func snapshotOf(t *testing.T, name string) *snapshot {
	t.Helper()
	p := fixture.Start(t, name, fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}})
	c, err := core.Open(p.Gcore(t), core.Options{})
	if err != nil {
		t.Fatalf("opening the core of %s: %v", name, err)
	}
	t.Cleanup(func() { c.Close() })
	s := &snapshot{core: c, ready: p.Ready}
	if s.rt, err = inspect.FindRuntime(c); err != nil {
		t.Fatal(err)
	}
	if s.types, err = elf.NewTypeIndex(s.rt.Image); err != nil {
		t.Fatalf("the runtime's DWARF types: %v", err)
	}
	for _, a := range []uint64{freshBase, hole} {
		if err := c.ReadMemory(a, make([]byte, 1)); err == nil {
			t.Fatalf("the core of %s maps %#x, the overlay's own memory", name, a)
		}
	}
	s.base = build(t, c)
	return s
}

// build builds the report of tgt as the CLI does for a core.
func build(t *testing.T, tgt target.Target) *inspect.Report {
	t.Helper()
	r, err := inspect.Build(tgt, inspect.Source{Kind: "core", Core: "test"}, inspect.Options{})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return r
}

// sym returns the address of the runtime's symbol name.
func (s *snapshot) sym(t *testing.T, name string) uint64 {
	t.Helper()
	sy, err := target.LookupSymbol(s.core, name, s.rt)
	if err != nil {
		t.Fatal(err)
	}
	return sy.Addr
}

// u64 reads a 64-bit value of the (unchanged) core.
func (s *snapshot) u64(t *testing.T, addr uint64) uint64 {
	t.Helper()
	v, err := target.ReadUint64(s.core, addr)
	if err != nil {
		t.Fatalf("reading %#x: %v", addr, err)
	}
	return v
}

// layoutValue reads one of the runtime's OMPD layout symbols.
func (s *snapshot) layoutValue(t *testing.T, name string) uint64 {
	t.Helper()
	return s.u64(t, s.sym(t, name))
}

// field returns the offset and size of typ.field from the runtime's OMPD
// layout symbols (ompd_access__T__F, ompd_sizeof__T__F).
func (s *snapshot) field(t *testing.T, typ, field string) (off, size uint64) {
	t.Helper()
	return s.layoutValue(t, "ompd_access__"+typ+"__"+field), s.layoutValue(t, "ompd_sizeof__"+typ+"__"+field)
}

// dwarfField returns the offset and size of typ.field from the runtime's
// DWARF.
func (s *snapshot) dwarfField(t *testing.T, typ, field string) (off, size uint64) {
	t.Helper()
	off, size, err := s.types.Field(typ, field)
	if err != nil {
		t.Fatal(err)
	}
	return off, size
}

func (s *snapshot) dwarfSize(t *testing.T, typ string) uint64 {
	t.Helper()
	n, err := s.types.Size(typ)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// read reads size bytes at addr of the core as an unsigned value.
func (s *snapshot) read(t *testing.T, addr, size uint64) uint64 {
	t.Helper()
	var b [8]byte
	if err := s.core.ReadMemory(addr, b[:size]); err != nil {
		t.Fatalf("reading %#x: %v", addr, err)
	}
	return binary.LittleEndian.Uint64(b[:])
}
