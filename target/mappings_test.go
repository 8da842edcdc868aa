package target

import (
	"slices"
	"testing"
)

// TestGroupFileMappings groups a library mapped in four pieces (one of
// them again at offset 0, as a library reading its own file maps it), an
// executable around it and a file mapped once, and checks each group's
// span, members and the mapping its bias comes from.
func TestGroupFileMappings(t *testing.T) {
	maps := []FileMapping{
		{Name: "/bin/prog", Start: 0x400000, End: 0x401000, Offset: 0},
		{Name: "/lib/libx.so", Start: 0x7f0000001000, End: 0x7f0000003000, Offset: 0x1000},
		{Name: "/bin/prog", Start: 0x401000, End: 0x402000, Offset: 0x1000},
		{Name: "/lib/libx.so", Start: 0x7f0000000000, End: 0x7f0000001000, Offset: 0},
		{Name: "/lib/libx.so", Start: 0x7f0000003000, End: 0x7f0000004000, Offset: 0x3000},
		{Name: "/data/table", Start: 0x7f0000100000, End: 0x7f0000200000, Offset: 0x2000},
		{Name: "/lib/libx.so", Start: 0x7eff00000000, End: 0x7eff00001000, Offset: 0},
	}
	got := GroupFileMappings(maps)
	want := []FileGroup{
		{Name: "/bin/prog", Start: 0x400000, End: 0x402000, First: 0, Members: []int{0, 2}},
		// Two mappings at offset 0: the lower one.
		{Name: "/lib/libx.so", Start: 0x7eff00000000, End: 0x7f0000004000, First: 6, Members: []int{1, 3, 4, 6}},
		{Name: "/data/table", Start: 0x7f0000100000, End: 0x7f0000200000, First: 5, Members: []int{5}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d groups, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.Name || g.Start != w.Start || g.End != w.End || g.First != w.First || !slices.Equal(g.Members, w.Members) {
			t.Errorf("group %d: %+v, want %+v", i, *g, w)
		}
	}
}
