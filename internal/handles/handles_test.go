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

func (f *fake) Addr() uint64 { return f.addr }

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
	if i, ok := tab.Lookup(0x2000); !ok || i != 1 {
		t.Fatalf("Lookup(0x2000) = %d, %v; want 1, true", i, ok)
	}
	if _, ok := tab.Lookup(0x3000); ok {
		t.Fatal("Lookup(0x3000) found a handle that was never interned")
	}
	if err := tab.Release(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a2", "a", "b"}; len(released) != 3 || released[1] != "a" || released[2] != "b" {
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
	if err == nil || err.Error() != "releasing handle of 0x1: backend refused" {
		t.Fatalf("Release() = %v; want the duplicate's error", err)
	}
}

type plain uint64

func (p plain) Addr() uint64 { return uint64(p) }

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
