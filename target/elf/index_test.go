package elf

import (
	"debug/dwarf"
	"path/filepath"
	"slices"
	"sort"
	"testing"
)

// wholeIndex indexes every unit of im and returns one index holding what
// all of them hold, for tests that look at the index itself: rows, funcs,
// call sites and tail call sites (the ids inside refer to each unit's own
// tables, which tests do not follow). nil when im has no DWARF.
func (im *Image) wholeIndex() *dwarfIndex {
	im.DebugInfo()
	dd := im.openDWARF()
	if dd == nil {
		return nil
	}
	out := &dwarfIndex{}
	for _, u := range dd.units {
		idx := u.idx
		if idx == nil {
			continue
		}
		out.rows = append(out.rows, idx.rows...)
		out.funcs = append(out.funcs, idx.funcs...)
		out.sites = append(out.sites, idx.sites...)
		out.tails = append(out.tails, idx.tails...)
		out.callsIncomplete = out.callsIncomplete || idx.callsIncomplete
	}
	sort.SliceStable(out.rows, func(i, j int) bool { return out.rows[i].addr < out.rows[j].addr })
	sort.SliceStable(out.sites, func(i, j int) bool { return out.sites[i].ret < out.sites[j].ret })
	return out
}

// TestLookupIndexesOneUnit: a lookup indexes only the compile unit that
// covers its address (testdata/tailcall.c and tailcall2.c are two), and
// gives the answer the whole index gives; DebugInfo indexes the rest.
func TestLookupIndexesOneUnit(t *testing.T) {
	path := buildTailcall(t, "gcc", t.TempDir(), "prog")
	im := openInline(t, path)
	top, ok := im.Symbol("top")
	if !ok {
		t.Fatal("no symbol top")
	}
	indexed := func() []string {
		var names []string
		for _, u := range im.openDWARF().units {
			if u.done.Load() {
				name, _ := u.entry.Val(dwarf.AttrName).(string)
				names = append(names, filepath.Base(name))
			}
		}
		return names
	}
	if got := indexed(); len(got) != 0 {
		t.Fatalf("units indexed before any lookup: %v", got)
	}
	fn, fok := im.FuncAt(top.Value)
	file, line, lok := im.LineAt(top.Value)
	if got := indexed(); !slices.Equal(got, []string{"tailcall2.c"}) {
		t.Errorf("units indexed after FuncAt and LineAt of top: %v; want tailcall2.c only", got)
	}
	if _, err := im.DebugInfo(); err != nil {
		t.Fatal(err)
	}
	if n := len(indexed()); n < 2 || n != len(im.openDWARF().units) {
		t.Errorf("DebugInfo indexed %d of %d units", n, len(im.openDWARF().units))
	}
	if fn != "top" || !fok || filepath.Base(file) != "tailcall2.c" || line == 0 || !lok {
		t.Errorf("top: FuncAt %q %v, LineAt %s:%d %v; want top in tailcall2.c", fn, fok, file, line, lok)
	}
	whole := im.wholeIndex()
	i := sort.Search(len(whole.rows), func(i int) bool { return whole.rows[i].addr > top.Value }) - 1
	if i < 0 || int(whole.rows[i].line) != line {
		t.Errorf("the whole index's line at top is not %d", line)
	}
}
