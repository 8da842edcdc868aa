package elf

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ompd-inspect/ompd-inspect/target/sectioncache"
)

// TestSymbolCache: a stripped library's symbol index (its .dynsym and its
// debug file's .symtab) is kept in the section cache, and the image of
// the same file in a later run reads it from there: the same index, the
// same answers. A debug file that changed, or that is gone, makes the
// kept index stale: it is made again from the files as they are.
func TestSymbolCache(t *testing.T) {
	dir := t.TempDir()
	full := compile(t, "gcc", dir, "prog", "-shared", "-fPIC")
	stripped, debug := splitDebug(t, dir, full)
	c, err := sectioncache.Open(filepath.Join(dir, "cache"), 0)
	if err != nil {
		t.Fatal(err)
	}
	open := func() (*Image, *countingCache) {
		cc := &countingCache{c: c}
		im := openWith(t, stripped, OpenOptions{Sections: cc})
		if err := im.LoadSymbols(); err != nil {
			t.Fatal(err)
		}
		return im, cc
	}
	// answers are what the lookups say of the program's symbols: the
	// debug file's locals (helper, local_counter) among them.
	type answer struct {
		sym Sym
		ok  bool
	}
	answers := func(im *Image) map[string]answer {
		out := map[string]answer{}
		for _, n := range []string{"global_counter", "local_counter", "tls_first", "message", "zeroed", "helper", "add_one", "main", "absent"} {
			s, ok := im.Symbol(n)
			out[n] = answer{s, ok}
			if f, ok := im.SymbolAt(s.Value + 1); ok && s.Func {
				out[n+" at +1"] = answer{f, ok}
			}
			if d, ok := im.DataSymbolAt(s.Value + s.Size - 1); ok && !s.Func && !s.TLS {
				out[n+" data at end"] = answer{d, ok}
			}
		}
		return out
	}

	im1, first := open()
	if slices.Contains(first.hits, symbolsSection) || !slices.Contains(first.puts, symbolsSection) {
		t.Fatalf("first run: read %v, stored %v; want the index made and stored", first.hits, first.puts)
	}
	want := answers(im1)
	for _, n := range []string{"helper", "local_counter", "add_one", "zeroed"} {
		if !want[n].ok {
			t.Fatalf("%s not found in the first run; want it from the debug file's .symtab (%v)", n, want)
		}
	}
	if a := want["helper at +1"]; !a.ok || a.sym.Name != "helper" {
		t.Fatalf("SymbolAt(helper+1) = %v; want helper", a)
	}
	if a := want["zeroed data at end"]; !a.ok || a.sym.Name != "zeroed" || a.sym.Size != 64 {
		t.Fatalf("DataSymbolAt(end of zeroed) = %v; want zeroed, 64 bytes", a)
	}

	im2, second := open()
	if !slices.Contains(second.hits, symbolsSection) || len(second.puts) != 0 {
		t.Fatalf("second run: read %v, stored %v; want the index read, nothing stored", second.hits, second.puts)
	}
	if !reflect.DeepEqual(im2.symbols(), im1.symbols()) {
		t.Fatal("the index read from the cache differs from the one made")
	}
	if got := answers(im2); !reflect.DeepEqual(got, want) {
		t.Fatalf("second run: %v, want %v", got, want)
	}

	// The debug file changed (here only its times): the index is made
	// again and stored again.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(debug, later, later); err != nil {
		t.Fatal(err)
	}
	im3, third := open()
	if !slices.Contains(third.puts, symbolsSection) {
		t.Fatalf("debug file changed: stored %v; want the index made again", third.puts)
	}
	if got := answers(im3); !reflect.DeepEqual(got, want) {
		t.Fatalf("debug file changed: %v, want %v", got, want)
	}

	// The debug file is gone: its local symbols are too.
	if err := os.Remove(debug); err != nil {
		t.Fatal(err)
	}
	im4, fourth := open()
	if !slices.Contains(fourth.puts, symbolsSection) {
		t.Fatalf("debug file gone: stored %v; want the index made again", fourth.puts)
	}
	if s, ok := im4.Symbol("helper"); ok {
		t.Errorf("debug file gone: helper = %v; want it not found", s)
	}
	if s, ok := im4.Symbol("add_one"); !ok || s != want["add_one"].sym {
		t.Errorf("debug file gone: add_one = %v, %v; want %v from .dynsym", s, ok, want["add_one"].sym)
	}
}

// TestDecodeSymbols: an index round-trips, and one that is cut, has bytes
// left over, was kept for another debug file, or breaks an order the
// lookups rely on is refused.
func TestDecodeSymbols(t *testing.T) {
	idx := &symIndex{
		names: []symEntry{
			{Sym: Sym{Name: "alpha", Value: 0x1000, Size: 0x20, Func: true}},
			{Sym: Sym{Name: "beta", Value: 0x1020, Func: true}, local: true},
			{Sym: Sym{Name: "gamma", Value: 0x4000, Size: 8}},
			{Sym: Sym{Name: "tls", Value: 0x10, Size: 4, TLS: true}},
		},
		syms:  []Sym{{Name: "alpha", Value: 0x1000, Size: 0x20, Func: true}, {Name: "beta", Value: 0x1020, Func: true}},
		funcs: []span{{lo: 0x1000, hi: 0x1020, id: 0}, {lo: 0x1020, hi: 0x1080, id: 1}},
		objs:  []Sym{{Name: "gamma", Value: 0x4000, Size: 8}},
	}
	src := fileIdentity{1, 2, 3, 4, 5}
	b := encodeSymbols(idx, src, true)
	if got := decodeSymbols(b, src, true); !reflect.DeepEqual(got, idx) {
		t.Fatalf("round trip: %+v, want %+v", got, idx)
	}
	if got := decodeSymbols(encodeSymbols(idx, fileIdentity{}, false), fileIdentity{}, false); !reflect.DeepEqual(got, idx) {
		t.Fatalf("round trip without a debug file: %+v", got)
	}
	for i := range len(b) {
		if got := decodeSymbols(b[:i], src, true); got != nil {
			t.Errorf("cut at %d of %d bytes: decoded", i, len(b))
		}
	}
	if got := decodeSymbols(append(slices.Clone(b), 0), src, true); got != nil {
		t.Errorf("bytes left over: decoded %+v", got)
	}
	// No debug file (flag 0), then a count of names far beyond the bytes,
	// then one within them but beyond the names that follow.
	for _, bad := range [][]byte{{0, 0xff, 0xff, 0xff, 0x7f}, {0, 3, 1, 'a', 1, 0, 0, 0}} {
		if got := decodeSymbols(bad, fileIdentity{}, false); got != nil {
			t.Errorf("%v: decoded %+v", bad, got)
		}
	}
	if got := decodeSymbols(b, fileIdentity{1, 2, 3, 4, 6}, true); got != nil {
		t.Error("another debug file: decoded")
	}
	if got := decodeSymbols(b, fileIdentity{}, false); got != nil {
		t.Error("no debug file now: decoded")
	}
	// A count the bytes allow, but whose items are not there: refused
	// (distinct names take a byte each but one) before room is made; or,
	// with names enough in the blob but no items after it, refused with
	// room made only for what the bytes left could hold.
	huge := binary.AppendUvarint([]byte{0}, 200000)
	huge = append(huge, 0) // an empty blob of names
	huge = append(huge, bytes.Repeat([]byte{0xff}, 200000)...)
	blob := binary.AppendUvarint(binary.AppendUvarint([]byte{0}, 32768), 32767)
	blob = append(blob, bytes.Repeat([]byte{'a'}, 32767)...)
	for _, b := range [][]byte{huge, blob} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if got := decodeSymbols(b, fileIdentity{}, false); got != nil {
			t.Errorf("a count without its items: decoded %+v", got)
		}
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("a count without its items allocated %d bytes; want at most 1 MiB (32768 names would take 1.5 MB)", n)
		}
	}
	// Damage anywhere: never a panic, and what decodes keeps the orders
	// and ranges the lookups rely on.
	rng := rand.New(rand.NewPCG(3, 9))
	for range 5000 {
		d := slices.Clone(b)
		for range 1 + rng.IntN(3) {
			d[rng.IntN(len(d))] = byte(rng.IntN(256))
		}
		got := decodeSymbols(d[:rng.IntN(len(d)+1)], src, true)
		if got == nil {
			continue
		}
		for i := range got.names {
			if i > 0 && got.names[i].Name <= got.names[i-1].Name {
				t.Fatalf("%x: names out of order", d)
			}
		}
		for i, sp := range got.funcs {
			if sp.lo >= sp.hi || sp.id < 0 || sp.id >= len(got.syms) || (i > 0 && sp.lo < got.funcs[i-1].hi) {
				t.Fatalf("%x: span %d %+v out of order or range", d, i, sp)
			}
		}
	}
	broken := map[string]func(*symIndex){
		"names out of order": func(x *symIndex) { x.names[0], x.names[1] = x.names[1], x.names[0] },
		"spans overlap":      func(x *symIndex) { x.funcs[0].hi = 0x1030 },
		"empty span":         func(x *symIndex) { x.funcs[1].hi = x.funcs[1].lo },
		"span of no symbol":  func(x *symIndex) { x.funcs[1].id = 2 },
		"objects unsorted":   func(x *symIndex) { x.objs = append(x.objs, Sym{Name: "alpha", Value: 0x10, Size: 1}) },
	}
	for what, damage := range broken {
		x := &symIndex{names: slices.Clone(idx.names), syms: slices.Clone(idx.syms), funcs: slices.Clone(idx.funcs), objs: slices.Clone(idx.objs)}
		damage(x)
		if got := decodeSymbols(encodeSymbols(x, src, true), src, true); got != nil {
			t.Errorf("%s: decoded %+v", what, got)
		}
	}
}

// TestKeptData: what KeepData keeps for a file is what KeptData gives an
// image of the same file in a later run (a copy), and nothing once the
// file changed, under another name, or without a section cache.
func TestKeptData(t *testing.T) {
	dir := t.TempDir()
	prog := compile(t, "gcc", dir, "prog")
	c, err := sectioncache.Open(filepath.Join(dir, "cache"), 0)
	if err != nil {
		t.Fatal(err)
	}
	im1 := openWith(t, prog, OpenOptions{Sections: c})
	im1.KeepData("derived_1", []byte("what took long"))
	// Names the section cache takes, but KeepData does not.
	refused := []string{"", "a.b", strings.Repeat("a", 41)}
	for _, n := range refused {
		im1.KeepData(n, []byte("not kept"))
	}
	im2 := openWith(t, prog, OpenOptions{Sections: c})
	got := im2.KeptData("derived_1")
	if string(got) != "what took long" {
		t.Fatalf("KeptData = %q, want what was kept", got)
	}
	got[0] = 'W'
	if again := im2.KeptData("derived_1"); string(again) != "what took long" {
		t.Errorf("a change to the returned bytes reached the cache: %q", again)
	}
	for _, n := range refused {
		if b := im2.KeptData(n); b != nil {
			t.Errorf("name %q: %q; want nothing kept", n, b)
		}
	}
	if b := im2.KeptData("derived_2"); b != nil {
		t.Errorf("another name: %q", b)
	}
	if b := openWith(t, prog, OpenOptions{}).KeptData("derived_1"); b != nil {
		t.Errorf("no section cache: %q", b)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(prog, later, later); err != nil {
		t.Fatal(err)
	}
	if b := openWith(t, prog, OpenOptions{Sections: c}).KeptData("derived_1"); b != nil {
		t.Errorf("the file changed: %q", b)
	}
}

// TestAddSymbols: symbols added to a stripped library's index are found
// by name and by address as the file's own would be; a name the file
// defines keeps the file's symbol, a name added twice its first symbol,
// and the file's data symbols stay.
func TestAddSymbols(t *testing.T) {
	dir := t.TempDir()
	full := compile(t, "gcc", dir, "prog", "-shared", "-fPIC")
	stripped := filepath.Join(dir, "stripped")
	run(t, "objcopy", "--strip-all", full, stripped)
	im := openWith(t, stripped, OpenOptions{})
	addOne, ok := im.Symbol("add_one")
	if !ok {
		t.Fatal("add_one not in .dynsym")
	}
	zeroed, ok := im.Symbol("zeroed")
	if !ok || zeroed.Size != 64 {
		t.Fatalf("zeroed = %+v, %v; want 64 bytes from .dynsym", zeroed, ok)
	}
	if _, ok := im.Symbol("helper"); ok {
		t.Fatal("helper found in a file stripped of its .symtab")
	}
	// helper as recovered: placed before add_one (gcc emits it first).
	helper := Sym{Name: "helper", Value: addOne.Value - 0x20, Size: 0x10, Func: true}
	im.AddSymbols([]Sym{
		helper,
		{Name: "helper", Value: addOne.Value - 0x40, Size: 8, Func: true}, // the same name again
		{Name: "add_one", Value: addOne.Value + 4, Size: 2, Func: true},   // a name the file defines
		{Name: "recovered_table", Value: zeroed.Value + 0x1000, Size: 32}, // sized data
		{Name: "recovered_unsized", Value: zeroed.Value + 0x2000},         // no size: no data range
	})
	if s, ok := im.Symbol("helper"); !ok || s != helper {
		t.Errorf("Symbol(helper) = %+v, %v; want the first added, %+v", s, ok, helper)
	}
	if s, ok := im.SymbolAt(helper.Value + 4); !ok || s != helper {
		t.Errorf("SymbolAt(helper+4) = %+v, %v; want helper", s, ok)
	}
	if s, ok := im.SymbolAt(addOne.Value - 0x40 + 4); ok && s.Name == "helper" {
		t.Errorf("SymbolAt(second helper+4) = %+v; the second helper was added", s)
	}
	if s, ok := im.Symbol("add_one"); !ok || s != addOne {
		t.Errorf("Symbol(add_one) = %+v, %v; want the file's %+v", s, ok, addOne)
	}
	if s, ok := im.SymbolAt(addOne.Value + 5); !ok || s.Name != "add_one" || s.Value != addOne.Value {
		t.Errorf("SymbolAt(add_one+5) = %+v, %v; want the file's add_one", s, ok)
	}
	if s, ok := im.DataSymbolAt(zeroed.Value + 63); !ok || s != zeroed {
		t.Errorf("DataSymbolAt(end of zeroed) = %+v, %v; want the file's zeroed", s, ok)
	}
	if s, ok := im.DataSymbolAt(zeroed.Value + 0x1000 + 31); !ok || s.Name != "recovered_table" {
		t.Errorf("DataSymbolAt(end of recovered_table) = %+v, %v; want it", s, ok)
	}
	if s, ok := im.DataSymbolAt(zeroed.Value + 0x2000); ok {
		t.Errorf("DataSymbolAt(recovered_unsized) = %+v; an unsized symbol has no range", s)
	}
}

// Symbol answers from the name index (IndexSymbolNames) exactly as from
// the binary search, for every name and for a name none has; symbols
// added after it are found too.
func TestIndexSymbolNames(t *testing.T) {
	im, err := Open("/usr/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	if err := im.LoadSymbols(); err != nil {
		t.Fatal(err)
	}
	names := im.symbols().names
	want := map[string]Sym{}
	for _, e := range names {
		s, ok := im.Symbol(e.Name)
		if !ok {
			t.Fatalf("%s not found before the index", e.Name)
		}
		want[e.Name] = s
	}
	im.IndexSymbolNames()
	if im.symbols().hashed == nil || len(names) < 1000 {
		t.Fatalf("no name index over libc's %d names", len(names))
	}
	for name, w := range want {
		if s, ok := im.Symbol(name); !ok || s != w {
			t.Fatalf("Symbol(%s) = %+v, %v from the index; want %+v", name, s, ok, w)
		}
	}
	if _, ok := im.Symbol("no_such_symbol_in_libc"); ok {
		t.Error("a missing name found in the index")
	}
	im.AddSymbols([]Sym{{Name: "recovered_fn", Value: 0x1000, Size: 16, Func: true}})
	if s, ok := im.Symbol("recovered_fn"); !ok || s.Value != 0x1000 {
		t.Errorf("Symbol(recovered_fn) after AddSymbols = %+v, %v", s, ok)
	}
	if s, ok := im.Symbol("malloc"); !ok || s != want["malloc"] {
		t.Errorf("Symbol(malloc) after AddSymbols = %+v, %v; want %+v", s, ok, want["malloc"])
	}
}
