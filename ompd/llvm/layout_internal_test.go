package llvm

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// symbolTable serves 64-bit symbols from a map, counting lookups.
type symbolTable struct {
	vals  map[string]uint64
	addrs map[string]uint64
	asked map[string]int
}

func (s *symbolTable) SymbolAddr(name, _ string) (ompd.Address, error) {
	s.asked[name]++
	a, ok := s.addrs[name]
	if !ok {
		return 0, fmt.Errorf("no symbol %s", name)
	}
	return a, nil
}

func (s *symbolTable) ReadMemory(addr ompd.Address, buf []byte) error {
	for name, a := range s.addrs {
		if a == addr {
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], s.vals[name])
			copy(buf, b[:])
			return nil
		}
	}
	return fmt.Errorf("nothing at %#x", addr)
}

func (s *symbolTable) ReadString(ompd.Address, int) (string, error) { return "", nil }
func (s *symbolTable) Sizes() (ompd.TypeSizes, error)               { return ompd.TypeSizes{Pointer: 8}, nil }
func (s *symbolTable) ThreadContext(ompd.ThreadIDKind, uint64) (ompd.ThreadContext, error) {
	return nil, nil
}

// TestLayoutRecent: with more keys than the recent tables have slots,
// looked up in random order, by the strings first used and by copies of
// them, every offset, size and mask is its own symbol's value, and each
// symbol is looked up once.
func TestLayoutRecent(t *testing.T) {
	tab := &symbolTable{vals: map[string]uint64{}, addrs: map[string]uint64{}, asked: map[string]int{}}
	type field struct{ typ, name string }
	var fields []field
	for i := range 3 * recentSlots {
		f := field{fmt.Sprintf("type%d", i%7), fmt.Sprintf("field%d", i)}
		fields = append(fields, f)
		for j, prefix := range []string{"ompd_access__", "ompd_sizeof__", "ompd_bitfield__"} {
			name := prefix + f.typ + "__" + f.name
			tab.addrs[name] = uint64(0x1000 + 8*(3*i+j))
			tab.vals[name] = uint64(1000*i + j)
		}
	}
	l := newLayout(tab, "libomp.so")
	rng := rand.New(rand.NewPCG(5, 8))
	for range 20000 {
		i := rng.IntN(len(fields))
		f := fields[i]
		if rng.IntN(2) == 0 {
			f = field{strings.Clone(f.typ), strings.Clone(f.name)}
		}
		off, size, err := l.offsetSize(f.typ, f.name)
		if err != nil || off != uint64(1000*i) || size != uint64(1000*i+1) {
			t.Fatalf("%s.%s: offset %d, size %d, %v; want %d, %d", f.typ, f.name, off, size, err, 1000*i, 1000*i+1)
		}
		if m, err := l.mask(f.typ, f.name); err != nil || m != uint64(1000*i+2) {
			t.Fatalf("%s.%s: mask %d, %v; want %d", f.typ, f.name, m, err, 1000*i+2)
		}
		if o, err := l.offset(f.typ, f.name); err != nil || o != off {
			t.Fatalf("%s.%s: offset %d, %v; offsetSize said %d", f.typ, f.name, o, err, off)
		}
	}
	for name, n := range tab.asked {
		if n != 1 {
			t.Fatalf("%s looked up %d times", name, n)
		}
	}

	// A few keys, by the same strings: after the first lookup of each,
	// the recent slots answer (all but those whose slots collide).
	few := fields[:recentSlots/16]
	for _, f := range few {
		if _, _, err := l.offsetSize(f.typ, f.name); err != nil {
			t.Fatal(err)
		}
	}
	l.mu.Lock()
	before := l.slow
	l.mu.Unlock()
	for range 10 {
		for _, f := range few {
			if _, _, err := l.offsetSize(f.typ, f.name); err != nil {
				t.Fatal(err)
			}
		}
	}
	l.mu.Lock()
	missed := l.slow - before
	l.mu.Unlock()
	if missed > 10*len(few)/4 {
		t.Fatalf("%d of %d lookups missed the recent slots", missed, 10*len(few))
	}
}
