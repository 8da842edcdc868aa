package elf

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/target/sectioncache"
)

// TestFrameCache: FramesAt's and TailCalls' answers are kept in the
// section cache when the image closes, and a later image of the same file
// gives the same answers from there without opening its DWARF. The tail
// calls asked are TestTailCalls' (checked there against objdump).
func TestFrameCache(t *testing.T) {
	dir := t.TempDir()
	path := buildTailcall(t, "gcc", dir, "prog")
	c, err := sectioncache.Open(filepath.Join(dir, "cache"), 0)
	if err != nil {
		t.Fatal(err)
	}
	funcs := disassemble(t, path)
	src, src2 := tailcallSources(t)
	callTop := after(t, funcs, "main", "call", "top")
	wantTails := []TailCallFrame{
		{PC: after(t, funcs, "mid", "jmp", "leaf"), Function: "mid", File: src, Line: lineMarker(t, src, "mid_tail")},
		{PC: after(t, funcs, "top", "jmp", "mid"), Function: "top", File: src2, Line: lineMarker(t, src2, "top_tail")},
	}
	answers := func(im *Image) string {
		leaf := mustSym(t, im, "leaf_mark")
		tails := im.TailCalls(callTop, leaf.Value)
		if fmt.Sprintf("%+v", tails) != fmt.Sprintf("%+v", wantTails) {
			t.Fatalf("TailCalls = %+v, want %+v", tails, wantTails)
		}
		out := fmt.Sprintf("tails %+v; not a return address %+v", tails, im.TailCalls(callTop-1, leaf.Value))
		for _, name := range []string{"main", "leaf_mark", "mid", "top"} {
			s := mustSym(t, im, name)
			out += fmt.Sprintf("; %s %+v", name, im.FramesAt(s.Value))
		}
		out += fmt.Sprintf("; call of top %+v; nowhere %+v", im.FramesAt(callTop-1), im.FramesAt(1))
		return out
	}

	first := &countingCache{c: c}
	im1 := openWith(t, path, OpenOptions{Sections: first})
	if im1.FramesCached() {
		t.Error("FramesCached before any run stored answers")
	}
	want := answers(im1)
	if err := im1.Close(); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(first.puts, framesSection) {
		t.Fatalf("first run stored %v, want %s", first.puts, framesSection)
	}

	second := &countingCache{c: c}
	im2 := openWith(t, path, OpenOptions{Sections: second})
	// Before any lookup: the answers come from the cache, not from this
	// run.
	if !im2.FramesCached() {
		t.Error("second run: FramesCached false before any lookup")
	}
	got := answers(im2)
	if got != want {
		t.Errorf("second run:\n%s\nfirst run:\n%s", got, want)
	}
	if !im2.FramesCached() || !slices.Contains(second.hits, framesSection) {
		t.Errorf("second run: FramesCached %v, read %v; want the answers read", im2.FramesCached(), second.hits)
	}
	if im2.dw != nil {
		t.Error("second run opened the DWARF")
	}
	second.puts = nil
	if err := im2.Close(); err != nil || len(second.puts) != 0 {
		t.Errorf("second Close: %v, stored %v; want nothing new", err, second.puts)
	}

	// Symbols added at run time (a stripped runtime's recovered ones)
	// make answers depend on more than the files: no cache then.
	third := &countingCache{c: c}
	im3 := openWith(t, path, OpenOptions{Sections: third})
	im3.AddSymbols([]Sym{{Name: "recovered_fn", Value: 0x10, Size: 1, Func: true}})
	leaf := mustSym(t, im3, "leaf_mark")
	if sf := im3.FramesAt(leaf.Value); len(sf) == 0 || im3.dw == nil || slices.Contains(third.hits, framesSection) {
		t.Errorf("after AddSymbols: FramesAt %+v, DWARF opened %v, cache read %v; want the DWARF's answer, not the cache's", sf, im3.dw != nil, third.hits)
	}
	if err := im3.Close(); err != nil || slices.Contains(third.puts, framesSection) {
		t.Errorf("Close after AddSymbols: %v, stored %v; want no answers stored", err, third.puts)
	}
}

// TestDecodeAnswers: answers round-trip; answers for another DWARF file,
// cut short or with bytes left over are refused.
func TestDecodeAnswers(t *testing.T) {
	src := fileIdentity{0x10301, 42, 4096, 1, 2}
	frames := map[uint64][]SourceFrame{
		0x1000: {{Function: "inl", File: "/a.c", Line: 3, Inlined: true}, {Function: "f", File: "/a.c", Line: 9}},
		0x2000: nil,
	}
	tails := map[[2]uint64][]TailCallFrame{{0x10, 0x20}: {{PC: 0x11, Function: "mid", File: "/b.c", Line: 7}}, {0x30, 0x40}: nil}
	b := encodeAnswers(src, frames, tails)
	gf, gt, ok := decodeAnswers(b, src)
	if !ok || !maps.EqualFunc(gf, frames, slices.Equal) || !maps.EqualFunc(gt, tails, slices.Equal) {
		t.Fatalf("round trip: %v %v %v", gf, gt, ok)
	}
	other := src
	other[4]++
	if _, _, ok := decodeAnswers(b, other); ok {
		t.Error("answers for a DWARF file changed since: decoded")
	}
	for i := range len(b) {
		if _, _, ok := decodeAnswers(b[:i], src); ok {
			t.Errorf("cut at %d of %d bytes: decoded", i, len(b))
		}
	}
	if _, _, ok := decodeAnswers(append(slices.Clone(b), 0), src); ok {
		t.Error("bytes left over: decoded")
	}
}

// TestFrameCacheFull: when more answers would be kept than the bound,
// those the run did not use are dropped.
func TestFrameCacheFull(t *testing.T) {
	old := maxCachedAnswers
	maxCachedAnswers = 3
	t.Cleanup(func() { maxCachedAnswers = old })
	dir := t.TempDir()
	path := buildTailcall(t, "gcc", dir, "prog")
	c, err := sectioncache.Open(filepath.Join(dir, "cache"), 0)
	if err != nil {
		t.Fatal(err)
	}
	run := func(names ...string) *Image {
		im := openWith(t, path, OpenOptions{Sections: c})
		for _, n := range names {
			im.FramesAt(mustSym(t, im, n).Value)
		}
		return im
	}
	if err := run("main", "leaf_mark", "mid").Close(); err != nil {
		t.Fatal(err)
	}
	if err := run("main", "top", "amb").Close(); err != nil {
		t.Fatal(err)
	}
	im := run()
	for name, want := range map[string]bool{"main": true, "top": true, "amb": true, "leaf_mark": false, "mid": false} {
		if got := im.FramesCachedAt(mustSym(t, im, name).Value); got != want {
			t.Errorf("%s cached: %v, want %v (the second run's answers kept, the first run's others dropped)", name, got, want)
		}
	}
}
