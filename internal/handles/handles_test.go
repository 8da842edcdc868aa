package handles

import (
	"errors"
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
	// Interning out of address order keeps the search sorted.
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
	if want := []string{"a2", "a", "b", "c"}; len(released) != 4 || released[1] != "a" || released[2] != "b" || released[3] != "c" {
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
