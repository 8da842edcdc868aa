package elf

import (
	"debug/dwarf"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/target/sectioncache"
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

// TestPrepareDWARFIndex: a DWARF of at most the size given is indexed
// whole ahead of the lookups, a larger one is only opened.
func TestPrepareDWARFIndex(t *testing.T) {
	path := buildTailcall(t, "gcc", t.TempDir(), "prog")
	indexed := func(im *Image) (n, of int) {
		for _, u := range im.openDWARF().units {
			if u.done.Load() {
				n++
			}
		}
		return n, len(im.openDWARF().units)
	}
	small := openInline(t, path)
	size := small.debugInfoSize()
	small.PrepareDWARFIndex(size)
	if n, of := indexed(small); of < 2 || n != of {
		t.Errorf("PrepareDWARFIndex(%d) of %d bytes of .debug_info: %d of %d units indexed; want all", size, size, n, of)
	}
	large := openInline(t, path)
	large.PrepareDWARFIndex(size - 1)
	if n, of := indexed(large); n != 0 || of < 2 {
		t.Errorf("PrepareDWARFIndex(%d) of %d bytes: %d of %d units indexed; want none", size-1, size, n, of)
	}
}

// countingCache counts a SectionCache's hits and stores.
type countingCache struct {
	c          *sectioncache.Cache
	hits, puts []string
}

func (cc *countingCache) Get(k sectioncache.Key, size uint64) []byte {
	b := cc.c.Get(k, size)
	if b != nil {
		cc.hits = append(cc.hits, k.Section)
	}
	return b
}

func (cc *countingCache) Put(k sectioncache.Key, data []byte) error {
	cc.puts = append(cc.puts, k.Section)
	return cc.c.Put(k, data)
}

// TestSectionCache: the compressed debug sections of a program built with
// -gz are stored in the cache when first inflated, and read from it by
// the next image of the same file, which answers the same.
func TestSectionCache(t *testing.T) {
	dir := t.TempDir()
	prog := compile(t, "gcc", dir, "prog", "-gz=zlib")
	c, err := sectioncache.Open(filepath.Join(dir, "cache"), 0)
	if err != nil {
		t.Fatal(err)
	}
	lookups := func(cc *countingCache) string {
		im, err := OpenWith(prog, OpenOptions{Sections: cc})
		if err != nil {
			t.Fatal(err)
		}
		defer im.Close()
		main := mustSym(t, im, "main")
		fn, _ := im.FuncAt(main.Value)
		file, line, _ := im.LineAt(main.Value)
		if _, err := im.DebugInfo(); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%s %s:%d", fn, file, line)
	}
	first := &countingCache{c: c}
	want := lookups(first)
	slices.Sort(first.puts)
	if !slices.Contains(first.puts, ".debug_info") || !slices.Contains(first.puts, ".debug_abbrev") || len(first.hits) != 0 {
		t.Fatalf("first run: stored %v, read %v; want the compressed sections (.debug_info, .debug_abbrev...) stored", first.puts, first.hits)
	}
	second := &countingCache{c: c}
	if got := lookups(second); got != want || !strings.HasPrefix(got, "main ") {
		t.Errorf("second run: %q, first %q", got, want)
	}
	slices.Sort(second.hits)
	if !slices.Equal(second.hits, first.puts) || len(second.puts) != 0 {
		t.Errorf("second run: read %v, stored %v; want every section read: %v", second.hits, second.puts, first.puts)
	}
}
