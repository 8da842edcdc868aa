package elf

import (
	"debug/dwarf"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/target/sectioncache"
)

// TestTypeNamesCache: ScanAll keeps a DWARF's type names in the section
// cache, and Close the layouts of the types asked about; the type index
// of the same file in a later run reads both from there, opening no DWARF
// to give the same answers, errors included; it opens the DWARF for a
// type whose layout is not kept.
func TestTypeNamesCache(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.c")
	b := filepath.Join(dir, "b.c")
	if err := os.WriteFile(a, []byte("struct alpha { int x; long y; };\nstruct alpha ga;\ntypedef int myint;\nmyint gi;\nstruct delta { short p; int q; };\nstruct delta gd;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte("typedef struct beta { char c; double d; short s; } beta_t;\nbeta_t gb;\nint main(void) { return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(dir, "prog")
	run(t, "gcc", "-g", "-O0", "-o", prog, a, b)
	c, err := sectioncache.Open(filepath.Join(dir, "cache"), 0)
	if err != nil {
		t.Fatal(err)
	}
	type layout struct{ off, size uint64 }
	var errs []string
	layouts := func(ti *TypeIndex) map[string]layout {
		out := map[string]layout{}
		for _, f := range [][2]string{{"alpha", "x"}, {"alpha", "y"}, {"beta_t", "c"}, {"beta_t", "d"}, {"beta", "s"}} {
			off, size, err := ti.Field(f[0], f[1])
			if err != nil {
				t.Fatalf("%s.%s: %v", f[0], f[1], err)
			}
			out[f[0]+"."+f[1]] = layout{off, size}
		}
		size, err := ti.Size("beta_t")
		if err != nil {
			t.Fatal(err)
		}
		out["sizeof beta_t"] = layout{0, size}
		for _, f := range [][2]string{{"myint", "x"}, {"alpha", "z"}, {"gamma", "x"}} {
			_, _, err := ti.Field(f[0], f[1])
			if err == nil {
				t.Fatalf("%s.%s: no error", f[0], f[1])
			}
			errs = append(errs, err.Error())
		}
		return out
	}
	want := map[string]layout{"alpha.x": {0, 4}, "alpha.y": {8, 8}, "beta_t.c": {0, 1}, "beta_t.d": {8, 8}, "beta.s": {16, 2}, "sizeof beta_t": {0, 24}}

	// types opens prog with the cache seen through cc and its type index.
	types := func(cc *countingCache) (*Image, *TypeIndex) {
		im := openWith(t, prog, OpenOptions{Sections: cc})
		ti, err := im.Types()
		if err != nil {
			t.Fatal(err)
		}
		return im, ti
	}
	first := &countingCache{c: c}
	im1, ti1 := types(first)
	if again, _ := im1.Types(); again != ti1 {
		t.Fatal("Types made a second index for the same image")
	}
	ti1.ScanAll()
	if !slices.Contains(first.puts, typeNamesSection) {
		t.Fatalf("first run stored %v, want %s", first.puts, typeNamesSection)
	}
	if got := layouts(ti1); !maps.Equal(got, want) {
		t.Fatalf("first run: %v, want %v", got, want)
	}

	firstErrs := errs
	errs = nil
	if err := im1.Close(); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(first.puts, typeLayoutsSection) {
		t.Fatalf("Close stored %v, want %s", first.puts, typeLayoutsSection)
	}

	second := &countingCache{c: c}
	im2, ti2 := types(second)
	if !slices.Contains(second.hits, typeNamesSection) || !slices.Contains(second.hits, typeLayoutsSection) {
		t.Fatalf("second run read %v from the cache, want %s and %s", second.hits, typeNamesSection, typeLayoutsSection)
	}
	if got := layouts(ti2); !maps.Equal(got, want) {
		t.Fatalf("second run: %v, want %v", got, want)
	}
	if !slices.Equal(errs, firstErrs) {
		t.Errorf("second run's errors %q, first run's %q", errs, firstErrs)
	}
	if len(ti2.cache) != 0 {
		t.Errorf("second run parsed %d types; want none (their layouts are kept)", len(ti2.cache))
	}
	ti2.ScanAll()
	if ti2.entries != 0 || slices.Contains(second.puts, typeNamesSection) {
		t.Errorf("second run read %d entries to find the names and stored %v; want none read, nothing stored", ti2.entries, second.puts)
	}
	if !maps.Equal(ti1.names, ti2.names) {
		t.Errorf("names read from the cache differ from those scanned")
	}
	if ti2.dd != nil || im2.dw != nil {
		t.Errorf("second run opened the DWARF; want it left closed (every answer is kept)")
	}
	second.puts = nil
	// A type the first run was not asked about: its layout is read from
	// the DWARF, which is opened now, and kept at Close.
	if off, size, err := ti2.Field("delta", "q"); err != nil || off != 4 || size != 4 {
		t.Errorf("delta.q = %d, %d, %v; want 4, 4", off, size, err)
	}
	if ti2.dd == nil {
		t.Errorf("a type without a kept layout was answered without opening the DWARF")
	}
	if err := im2.Close(); err != nil || !slices.Equal(second.puts, []string{typeLayoutsSection}) {
		t.Errorf("second Close: %v, stored %v; want the layouts stored again", err, second.puts)
	}

	// Names kept but no layouts (a run that asked for none): ScanAll,
	// run before a target is stopped, opens the DWARF the lookups will
	// read.
	c2, err := sectioncache.Open(filepath.Join(dir, "cache2"), 0)
	if err != nil {
		t.Fatal(err)
	}
	for run := range 2 {
		im := openWith(t, prog, OpenOptions{Sections: c2})
		ti, err := im.Types()
		if err != nil {
			t.Fatal(err)
		}
		ti.ScanAll()
		if ti.dd == nil {
			t.Errorf("run %d: ScanAll left the DWARF closed, with no layouts kept", run)
		}
		if err := im.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDecodeTypeLayouts: layouts round-trip, and damaged ones are
// refused.
func TestDecodeTypeLayouts(t *testing.T) {
	lays := map[string]*typeLayout{
		"kmp_base_info_t": {size: 1024, isStruct: true, fields: map[string]fieldLayout{"th_info": {0, 64}, "flex": {64, -1}}},
		"kmp_int32":       {size: 4},
		"opaque":          {size: -1, isStruct: true, fields: map[string]fieldLayout{}},
	}
	b := encodeTypeLayouts(lays)
	got, ok := decodeTypeLayouts(b)
	if !ok || len(got) != len(lays) {
		t.Fatalf("round trip: %v %v", got, ok)
	}
	for n, l := range lays {
		g := got[n]
		if g == nil || g.size != l.size || g.isStruct != l.isStruct || !maps.Equal(g.fields, l.fields) {
			t.Errorf("%s: %+v, want %+v", n, g, l)
		}
	}
	for i := range len(b) {
		if _, ok := decodeTypeLayouts(b[:i]); ok {
			t.Errorf("cut at %d of %d bytes: decoded", i, len(b))
		}
	}
	if _, ok := decodeTypeLayouts(append(slices.Clone(b), 0)); ok {
		t.Error("bytes left over: decoded")
	}
}

// TestDecodeTypeNames: a name table round-trips, and one that is cut,
// has bytes left over or names an offset past .debug_info is refused.
func TestDecodeTypeNames(t *testing.T) {
	names := map[string]dwarf.Offset{"kmp_base_info_t": 0x1234, "ident_t": 0x0b, "": 0x20}
	b := encodeTypeNames(names)
	if got, ok := decodeTypeNames(b, 0x1235); !ok || !maps.Equal(got, names) {
		t.Fatalf("round trip: %v %v", got, ok)
	}
	for what, bad := range map[string][]byte{
		"cut":             b[:len(b)-1],
		"bytes left over": append(slices.Clone(b), 0),
		"empty":           nil,
		"huge count":      {0xff, 0xff, 0xff, 0x7f},
	} {
		if got, ok := decodeTypeNames(bad, 0x1235); ok {
			t.Errorf("%s: decoded %v", what, got)
		}
	}
	if got, ok := decodeTypeNames(b, 0x1234); ok {
		t.Errorf("an offset at the end of .debug_info: decoded %v", got)
	}
}
