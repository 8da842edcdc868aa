package inspect

import (
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// PrepareImage finds a stripped runtime's release type layouts before the
// stop: Build's lookup then finds them with the image, computing nothing.
func TestPrepareImageFindsTypeLayouts(t *testing.T) {
	im, err := elf.Open(fixture.StockLibomp(19))
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	PrepareImage(im)
	r := recovered(im)
	if r.k == nil {
		t.Fatalf("no knowledge recovered from Debian's libomp 19: %v", r.err)
	}
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
