package inspect

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/ompd/llvm/recovery"
	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// preparedStock19 opens Debian's libomp 19 (closed at the test's end),
// prepares it as Attach does before a stop, and returns it with what was
// recovered from its code.
func preparedStock19(t *testing.T) (*elf.Image, recoveryResult) {
	t.Helper()
	im, err := elf.Open(fixture.StockLibomp(19))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	PrepareImage(im)
	r := recovered(im)
	if r.k == nil {
		t.Fatalf("no knowledge recovered from Debian's libomp 19: %v", r.err)
	}
	return im, r
}

// PrepareImage finds a stripped runtime's release type layouts before the
// stop: Build's lookup then finds them with the image, computing nothing.
func TestPrepareImageFindsTypeLayouts(t *testing.T) {
	im, r := preparedStock19(t)
	got := im.Derived(typeLayoutsKey{}, func() any {
		t.Error("the type layouts were not found before the stop")
		return typeLayoutsResult{}
	}).(typeLayoutsResult)
	if got.err != nil || got.t == nil || got.t.Version != 19 {
		t.Fatalf("prepared type layouts: %+v; want libomp 19's table", got)
	}
	if off, size, err := got.t.FieldLayout("kmp_base_info_t", "th_team"); err != nil || off != 64 || size != 8 {
		t.Errorf("kmp_base_info_t.th_team at %d, %d bytes (%v); want 64, 8 (the release table)", off, size, err)
	}
	if tt, err := recoveredTypes(im, r.k); tt != got.t || err != nil {
		t.Errorf("recoveredTypes = %p, %v; want the prepared table %p", tt, err, got.t)
	}
}

// blockMemory is a target whose memory is one block at base.
type blockMemory struct {
	base  uint64
	block []byte
}

func (b blockMemory) PID() int                  { return 1 }
func (b blockMemory) Threads() []target.Thread  { return nil }
func (b blockMemory) Modules() []*target.Module { return nil }
func (b blockMemory) Warnings() []string        { return nil }
func (b blockMemory) Close() error              { return nil }

func (b blockMemory) ReadMemory(addr uint64, buf []byte) error {
	if addr < b.base || addr-b.base+uint64(len(buf)) > uint64(len(b.block)) {
		return target.ErrUnmapped
	}
	copy(buf, b.block[addr-b.base:])
	return nil
}

// PrepareImage orders a stripped runtime's layout block before the stop
// (layoutBlockOf); CheckMemory then compares the block in memory with
// what ompd_init's code writes: all zero is an uninitialized runtime, a
// different value names the variable, the same values pass.
func TestCheckMemoryPrepared(t *testing.T) {
	im, r := preparedStock19(t)
	lb := im.Derived(layoutBlockKey{}, func() any {
		t.Error("the layout block was not ordered before the stop")
		return &layoutBlock{}
	}).(*layoutBlock)
	if lb.err != nil || len(lb.names) != len(r.k.Layout) || lb.offs[len(lb.offs)-1] != 8*uint64(len(lb.names)-1) {
		t.Fatalf("layout block of %d names, last at %#x, %v; want the %d recovered variables in one block", len(lb.names), lb.offs[len(lb.offs)-1], lb.err, len(r.k.Layout))
	}
	const bias = 0x7f0000000000
	rt := &target.Module{Name: "libomp.so.5", Image: im, Bias: bias}
	k := &Knowledge{Recovered: r.k}
	mem := blockMemory{base: lb.first + bias, block: make([]byte, 8*len(lb.names))}
	for n, want := range r.k.Layout {
		binary.LittleEndian.PutUint64(mem.block[r.k.Symbols[n]-lb.first:], want)
	}
	if err := k.CheckMemory(mem, rt); err != nil {
		t.Errorf("the block ompd_init writes: %v", err)
	}
	name := lb.names[len(lb.names)/2]
	binary.LittleEndian.PutUint64(mem.block[r.k.Symbols[name]-lb.first:], r.k.Layout[name]+1)
	if err := k.CheckMemory(mem, rt); err == nil || !strings.Contains(err.Error(), name+" is ") {
		t.Errorf("a changed %s: %v", name, err)
	}
	clear(mem.block)
	if err := k.CheckMemory(mem, rt); err == nil || !strings.Contains(err.Error(), "has not initialized its OMPD layout yet") {
		t.Errorf("an all-zero block: %v", err)
	}
}

// Layout variables that do not lie one after the other (a gap of 8
// bytes) are no block: CheckMemory says so, and why, reading nothing.
func TestCheckMemoryNotOneBlock(t *testing.T) {
	im, err := elf.Open("/usr/lib/x86_64-linux-gnu/libc.so.6") // any image: the knowledge is made here
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	rec := &recovery.Knowledge{
		Symbols: map[string]uint64{"ompd_sizeof__a": 0x1000, "ompd_sizeof__b": 0x1010},
		Layout:  map[string]uint64{"ompd_sizeof__a": 1, "ompd_sizeof__b": 2},
	}
	k := &Knowledge{Recovered: rec}
	err = k.CheckMemory(blockMemory{}, &target.Module{Name: "libomp.so.5", Image: im})
	if err == nil || !strings.Contains(err.Error(), "is not one block: ompd_sizeof__b lies 0x10 bytes past the first variable") {
		t.Errorf("CheckMemory of a block with a gap: %v", err)
	}
}
