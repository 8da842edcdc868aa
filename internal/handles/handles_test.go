package handles

import (
	"errors"
	"reflect"
	"slices"
	"testing"
)

type fake struct {
	addr     uint64
	name     string
	released *[]string
	fail     bool
}

func (f *fake) Compare(o *fake) int {
	switch {
	case f.addr < o.addr:
		return -1
	case f.addr > o.addr:
		return 1
	}
	return 0
}

func (f *fake) Release() error {
	*f.released = append(*f.released, f.name)
	if f.fail {
		return errors.New("backend refused")
	}
	return nil
}

func TestInternKeepsFirstAndReleasesDuplicates(t *testing.T) {
	var released []string
	var tab Table[*fake]
	a := &fake{addr: 0x1000, name: "a", released: &released}
	b := &fake{addr: 0x2000, name: "b", released: &released}
	a2 := &fake{addr: 0x1000, name: "a2", released: &released}

	if i, first := tab.Intern(a); i != 0 || !first {
		t.Fatalf("Intern(a) = %d, %v; want 0, true", i, first)
	}
	if i, first := tab.Intern(b); i != 1 || !first {
		t.Fatalf("Intern(b) = %d, %v; want 1, true", i, first)
	}
	if i, first := tab.Intern(a2); i != 0 || first {
		t.Fatalf("Intern(a2) = %d, %v; want 0, false", i, first)
	}
	if len(released) != 1 || released[0] != "a2" {
		t.Fatalf("released after interning a duplicate: %v; want [a2]", released)
	}
	if tab.Len() != 2 || tab.At(0) != a || tab.At(1) != b {
		t.Fatalf("table holds %d handles, At(0)=%s At(1)=%s; want a, b", tab.Len(), tab.At(0).name, tab.At(1).name)
	}
	if i, ok := tab.Find(&fake{addr: 0x2000}); !ok || i != 1 {
		t.Fatalf("Find(0x2000) = %d, %v; want 1, true", i, ok)
	}
	if _, ok := tab.Find(&fake{addr: 0x3000}); ok {
		t.Fatal("Find(0x3000) found a handle that was never interned")
	}
	// Objects interned out of address order are found.
	c := &fake{addr: 0x1800, name: "c", released: &released}
	if i, first := tab.Intern(c); i != 2 || !first {
		t.Fatalf("Intern(c) = %d, %v; want 2, true", i, first)
	}
	for _, want := range []struct {
		addr uint64
		i    int
	}{{0x1000, 0}, {0x1800, 2}, {0x2000, 1}} {
		if i, ok := tab.Find(&fake{addr: want.addr}); !ok || i != want.i {
			t.Fatalf("Find(%#x) = %d, %v; want %d", want.addr, i, ok, want.i)
		}
	}
	if err := tab.Release(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a2", "a", "b", "c"}; !slices.Equal(released, want) {
		t.Fatalf("released %v; want %v", released, want)
	}
	if tab.Len() != 0 {
		t.Fatalf("Len after Release = %d", tab.Len())
	}
}

func TestReleaseReportsBackendErrors(t *testing.T) {
	var released []string
	var tab Table[*fake]
	tab.Intern(&fake{addr: 1, name: "x", released: &released})
	tab.Intern(&fake{addr: 1, name: "dup", released: &released, fail: true})
	err := tab.Release()
	if err == nil || err.Error() != "releasing a handle: backend refused" {
		t.Fatalf("Release() = %v; want the duplicate's error", err)
	}
}

type plain uint64

func (p plain) Compare(o plain) int { return int(p) - int(o) }

func TestHandlesWithoutRelease(t *testing.T) {
	var tab Table[plain]
	tab.Intern(plain(7))
	if _, first := tab.Intern(plain(7)); first {
		t.Fatal("second handle of object 7 interned as new")
	}
	if err := tab.Release(); err != nil {
		t.Fatal(err)
	}
}

// unordered compares like LLVM's library: a difference of addresses cut
// to 32 bits, whose sign says nothing and which is 0 for addresses 4 GiB
// apart only by accident of truncation. Only 0 between equal addresses
// may be relied on, and the table relies on nothing else.
type unordered uint64

func (u unordered) Compare(o unordered) int {
	if u == o {
		return 0
	}
	return int(int32(uint32(u) - uint32(o) | 1)) // never 0, any sign
}

func TestInternNeedsOnlyEquality(t *testing.T) {
	var tab Table[unordered]
	addrs := []unordered{0x7f0000001000, 0x55000000a000, 0x7f0000000800, 0x560000000010, 0x55000000b000}
	for i, a := range addrs {
		if got, first := tab.Intern(a); got != i || !first {
			t.Fatalf("Intern(%#x) = %d, %v; want %d, true", uint64(a), got, first, i)
		}
	}
	for i, a := range addrs {
		if got, first := tab.Intern(a); got != i || first {
			t.Fatalf("second Intern(%#x) = %d, %v; want %d, false", uint64(a), got, first, i)
		}
	}
}

func TestReleaseOneAndKeptErrors(t *testing.T) {
	var released []string
	var tab Table[*fake]
	tab.Intern(&fake{addr: 1, name: "kept", released: &released, fail: true})
	tab.ReleaseOne(&fake{addr: 2, name: "loose", released: &released, fail: true})
	if tab.Len() != 1 {
		t.Fatalf("ReleaseOne interned its handle: Len %d", tab.Len())
	}
	err := tab.Release()
	if want := "releasing a handle: backend refused\nreleasing a handle: backend refused"; err == nil || err.Error() != want {
		t.Fatalf("Release() = %v; want both errors", err)
	}
	if want := []string{"loose", "kept"}; !slices.Equal(released, want) {
		t.Fatalf("released %v; want %v", released, want)
	}
	if err := tab.Release(); err != nil {
		t.Fatalf("second Release() = %v; errors are reported once", err)
	}
}

// keyed names its object by a key, and counts the comparisons made.
type keyed struct {
	addr, lwt uint64
	compares  *int
}

func (k *keyed) Compare(o *keyed) int {
	*k.compares++
	if k.addr == o.addr && k.lwt == o.lwt {
		return 0
	}
	return 1
}

func (k *keyed) HandleKey() [2]uint64 { return [2]uint64{k.addr, k.lwt} }

// Keyed handles are looked up by key: a thousand of them interned twice
// are compared with none.
func TestKeyedHandles(t *testing.T) {
	compares := 0
	var tab Table[*keyed]
	for i := range 1000 {
		if got, first := tab.Intern(&keyed{addr: uint64(i) * 64, compares: &compares}); got != i || !first {
			t.Fatalf("Intern(%#x) = %d, %v; want %d, true", i*64, got, first, i)
		}
	}
	for i := range 1000 {
		if got, first := tab.Intern(&keyed{addr: uint64(i) * 64, compares: &compares}); got != i || first {
			t.Fatalf("second Intern(%#x) = %d, %v; want %d, false", i*64, got, first, i)
		}
		if got, ok := tab.Find(&keyed{addr: uint64(i) * 64, lwt: 8, compares: &compares}); ok {
			t.Fatalf("Find(%#x with another lwt) = %d: found an object never interned", i*64, got)
		}
	}
	if compares != 0 {
		t.Errorf("%d comparisons, want none", compares)
	}
	if err := tab.Release(); err != nil {
		t.Fatal(err)
	}
	if i, ok := tab.Find(&keyed{addr: 64, compares: &compares}); ok || tab.Len() != 0 {
		t.Errorf("after Release: Find(0x40) = %d, %v and Len %d; want nothing", i, ok, tab.Len())
	}
}

// mixed is a handle type some of whose handles have keys and some not.
type mixed interface{ Compare(mixed) int }

type keyedMixed uint64

func (k keyedMixed) Compare(o mixed) int  { return cmpMixed(uint64(k), o) }
func (k keyedMixed) HandleKey() [2]uint64 { return [2]uint64{uint64(k), 0} }

type plainMixed uint64

func (p plainMixed) Compare(o mixed) int { return cmpMixed(uint64(p), o) }

func cmpMixed(a uint64, o mixed) int {
	var b uint64
	switch o := o.(type) {
	case keyedMixed:
		b = uint64(o)
	case plainMixed:
		b = uint64(o)
	}
	if a == b {
		return 0
	}
	return 1
}

// Once a handle without a key is kept, every lookup compares: a keyed
// handle still finds the object an unkeyed one named, and the reverse.
func TestMixedHandles(t *testing.T) {
	var tab Table[mixed]
	tab.Intern(keyedMixed(0x10))
	tab.Intern(keyedMixed(0x20))
	if i, first := tab.Intern(plainMixed(0x30)); i != 2 || !first {
		t.Fatalf("Intern(plain 0x30) = %d, %v; want 2, true", i, first)
	}
	for _, c := range []struct {
		h mixed
		i int
	}{{plainMixed(0x10), 0}, {keyedMixed(0x20), 1}, {keyedMixed(0x30), 2}, {plainMixed(0x30), 2}} {
		if i, ok := tab.Find(c.h); !ok || i != c.i {
			t.Errorf("Find(%T %#x) = %d, %v; want %d", c.h, c.h, i, ok, c.i)
		}
	}
	if i, ok := tab.Find(keyedMixed(0x40)); ok {
		t.Errorf("Find(keyed 0x40) = %d: found an object never interned", i)
	}
}

// badKey keys its object by addr alone, where Compare also looks at lwt.
type badKey struct{ addr, lwt uint64 }

func (b badKey) HandleKey() [2]uint64 { return [2]uint64{b.addr, 0} }

// KeyMismatches names exactly the pairs whose keys and Compare disagree.
func TestKeyMismatches(t *testing.T) {
	hs := []badKey{{0x10, 0}, {0x10, 8}, {0x20, 0}}
	cmp := func(a, b badKey) int {
		if a == b {
			return 0
		}
		return 1
	}
	if got, want := KeyMismatches(hs, cmp), [][2]int{{0, 1}, {1, 0}}; !reflect.DeepEqual(got, want) {
		t.Errorf("KeyMismatches = %v, want %v", got, want)
	}
	good := []*keyed{{addr: 0x10, compares: new(int)}, {addr: 0x10, lwt: 8, compares: new(int)}, {addr: 0x10, compares: new(int)}}
	if got := KeyMismatches(good, (*keyed).Compare); len(got) != 0 {
		t.Errorf("KeyMismatches of keys that agree = %v, want none", got)
	}
}
