package elf

import (
	"debug/elf"
	"strings"

	"github.com/ompd-inspect/ompd-inspect/target/sectioncache"
)

// The symbol index of an image is kept in the section cache: reading the
// C library's symbols (its debug file's .symtab) and sorting them was
// most of the time spent preparing a process's modules before it is
// stopped.

// symbolsSection names the section cache's entry of an image's symbol
// index. Its number changes with what an index holds (readSymbols'
// choice of symbols, the format): an entry of another version is then
// not read.
const symbolsSection = ".ompdi_symbols1"

// symbolsKey is the section cache's key of the image's symbol index.
func (im *Image) symbolsKey() (key sectioncache.Key, ok bool) {
	if im.sections == nil {
		return sectioncache.Key{}, false
	}
	return im.cacheKey(symbolsSection, 0, 0)
}

// symbolSource returns the identity of the separate debug file whose
// .symtab the index takes (the image has none), and whether there is one.
func (im *Image) symbolSource() (fileIdentity, bool) {
	if im.ef.SectionByType(elf.SHT_SYMTAB) != nil {
		return fileIdentity{}, false
	}
	sep, err := im.separate()
	if err != nil || sep.ino == 0 {
		return fileIdentity{}, false
	}
	return sep.identity(), true
}

// loadSymbols returns the image's symbol index kept in the section cache,
// nil when none is kept for this file and its debug file as they are.
func (im *Image) loadSymbols() *symIndex {
	key, ok := im.symbolsKey()
	if !ok {
		return nil
	}
	b := im.sections.Get(key, sectioncache.AnySize)
	if b == nil {
		return nil
	}
	// Found before the entry is read: it may read files of its own.
	src, hasSrc := im.symbolSource()
	var idx *symIndex
	if guard(func() error { idx = decodeSymbols(b, src, hasSrc); return nil }) != nil {
		return nil // a mapped entry that faults is no entry
	}
	return idx
}

// storeSymbols keeps the image's symbol index in the section cache.
func (im *Image) storeSymbols(idx *symIndex) {
	key, ok := im.symbolsKey()
	if !ok {
		return
	}
	src, hasSrc := im.symbolSource()
	_ = im.sections.Put(key, encodeSymbols(idx, src, hasSrc)) // a cache that cannot be written only costs time
}

// maxPresized bounds the items a decoder makes room for before reading
// them (1.5 MiB of symbols), besides what the bytes left could hold: a
// C library's debug file has about 10000 symbols, and growing the slices
// from a smaller start was a fifth of the decoding.
const maxPresized = 1 << 15

// Symbol flags in the cache.
const (
	symFlagTLS = 1 << iota
	symFlagFunc
	symFlagLocal
)

// encodeSymbols serializes an index: the identity of the debug file it
// read (a flag, then five numbers), the names (their count, their bytes
// as one string, then each one's length, value, size and flags, in name
// order), then the function symbols, the spans and the data symbols
// (each a count, then its items: a symbol as the index of its name,
// value, size and flags; a span as its start, length and symbol).
func encodeSymbols(idx *symIndex, src fileIdentity, hasSrc bool) []byte {
	var w KeptWriter
	w.Flag(hasSrc)
	if hasSrc {
		for _, v := range src {
			w.Uint(v)
		}
	}
	var blob strings.Builder
	for _, e := range idx.names {
		blob.WriteString(e.Name)
	}
	w.Uint(uint64(len(idx.names)))
	w.Str(blob.String())
	nameAt := make(map[string]uint64, len(idx.names))
	for i, e := range idx.names {
		nameAt[e.Name] = uint64(i)
		w.Uint(uint64(len(e.Name)))
		w.Uint(e.Value)
		w.Uint(e.Size)
		w.Uint(symFlags(e))
	}
	sym := func(s Sym) {
		w.Uint(nameAt[s.Name])
		w.Uint(s.Value)
		w.Uint(s.Size)
		w.Uint(symFlags(symEntry{Sym: s}))
	}
	w.Uint(uint64(len(idx.syms)))
	for _, s := range idx.syms {
		sym(s)
	}
	w.Uint(uint64(len(idx.funcs)))
	for _, sp := range idx.funcs {
		w.Uint(sp.lo)
		w.Uint(sp.hi - sp.lo)
		w.Uint(uint64(sp.id))
	}
	w.Uint(uint64(len(idx.objs)))
	for _, s := range idx.objs {
		sym(s)
	}
	return w.Data()
}

func symFlags(e symEntry) uint64 {
	var f uint64
	if e.TLS {
		f |= symFlagTLS
	}
	if e.Func {
		f |= symFlagFunc
	}
	if e.local {
		f |= symFlagLocal
	}
	return f
}

// decodeSymbols reads what encodeSymbols wrote, nil when it was written
// for another debug file than src (or none, when hasSrc is false), does
// not parse whole, or breaks an order the lookups rely on: names
// ascending, spans ascending and disjoint, data symbols by address, and
// every reference in range.
func decodeSymbols(b []byte, src fileIdentity, hasSrc bool) *symIndex {
	r := NewKeptReader(b)
	if r.Flag() != hasSrc {
		return nil
	}
	if hasSrc {
		for _, v := range src {
			if r.Uint() != v {
				return nil
			}
		}
	}
	// Every item below takes at least one byte: a count that exceeds
	// the bytes left is refused. The slices grow as items are read, so
	// that a count is never trusted for more memory than the items read
	// take (an item in memory is several times its bytes here).
	n := r.Count()
	blob := r.Str()
	// The names are distinct: all but one (empty) take a byte at least.
	if r.Bad() || n > uint64(len(blob))+1 {
		return nil
	}
	// Each name's item takes 4 bytes at least after the blob.
	idx := &symIndex{names: make([]symEntry, 0, min(n, uint64(r.Len())/4, maxPresized))}
	off := uint64(0)
	for i := range n {
		l := r.Uint()
		if r.Bad() || l > uint64(len(blob))-off {
			return nil
		}
		name := blob[off : off+l]
		off += l
		if i > 0 && name <= idx.names[i-1].Name {
			return nil
		}
		e := symEntry{Sym: Sym{Name: name, Value: r.Uint(), Size: r.Uint()}}
		if !setSymFlags(&e, r.Uint()) {
			return nil
		}
		idx.names = append(idx.names, e)
	}
	if off != uint64(len(blob)) {
		return nil
	}
	syms := func() []Sym {
		n := r.Count()
		out := make([]Sym, 0, min(n, uint64(r.Len())/4, maxPresized)) // an item takes 4 bytes at least
		for range n {
			at := r.Uint()
			if r.Bad() || at >= uint64(len(idx.names)) {
				r.Fail()
				return nil
			}
			e := symEntry{Sym: Sym{Name: idx.names[at].Name, Value: r.Uint(), Size: r.Uint()}}
			if !setSymFlags(&e, r.Uint()) {
				r.Fail()
				return nil
			}
			out = append(out, e.Sym)
		}
		return out
	}
	idx.syms = syms()
	nspans := r.Count()
	idx.funcs = make([]span, 0, min(nspans, uint64(r.Len())/3, maxPresized)) // 3 bytes at least
	for i := range nspans {
		lo, size, id := r.Uint(), r.Uint(), r.Uint()
		if r.Bad() || size == 0 || lo+size < lo || id >= uint64(len(idx.syms)) || (i > 0 && lo < idx.funcs[i-1].hi) {
			return nil
		}
		idx.funcs = append(idx.funcs, span{lo: lo, hi: lo + size, id: int(id)})
	}
	idx.objs = syms()
	for i := 1; i < len(idx.objs); i++ {
		if idx.objs[i].Value < idx.objs[i-1].Value {
			return nil
		}
	}
	if !r.Done() {
		return nil
	}
	return idx
}

// setSymFlags sets e's flags from f; false for unknown flags.
func setSymFlags(e *symEntry, f uint64) bool {
	if f&^(symFlagTLS|symFlagFunc|symFlagLocal) != 0 {
		return false
	}
	e.TLS, e.Func, e.local = f&symFlagTLS != 0, f&symFlagFunc != 0, f&symFlagLocal != 0
	return true
}
