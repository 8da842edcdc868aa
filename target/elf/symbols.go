package elf

import (
	"cmp"
	"debug/elf"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Sym is an ELF symbol at its link-time value.
type Sym struct {
	// Name is the symbol name, without a version suffix.
	Name string
	// Value is the link-time address (for TLS symbols, the offset in
	// the TLS block) and Size the size in bytes, 0 when unknown.
	Value, Size uint64
	// TLS is set for STT_TLS symbols; Value is then the offset inside
	// the module's TLS block.
	TLS bool
	// Func is set for STT_FUNC and STT_GNU_IFUNC symbols.
	Func bool
}

// symIndex holds the symbols of an image, by name and (for functions) by
// address.
type symIndex struct {
	// names has one symbol of each name, sorted by name: the first
	// global or weak one, else the first local one, in table order.
	names []symEntry
	// funcs are disjoint address ranges sorted by start, each naming the
	// innermost function symbol covering it.
	funcs []span
	syms  []Sym // function symbols, referenced by funcs
	// objs are the sized data symbols (not functions, not TLS), sorted
	// by address.
	objs []Sym
	// hashed indexes names by name (IndexSymbolNames); nil for none.
	hashed map[string]int
}

type symEntry struct {
	Sym
	local bool
}

// Symbol finds a defined symbol by name in .symtab and .dynsym (and in
// the .symtab of a separate debug file when the image has none). Global
// and weak definitions win over local ones of the same name.
func (im *Image) Symbol(name string) (Sym, bool) {
	im.LoadSymbols()
	e, ok := im.symbols().byName(name)
	return e.Sym, ok
}

// byName finds the symbol of the given name.
func (idx *symIndex) byName(name string) (symEntry, bool) {
	if idx.hashed != nil {
		i, ok := idx.hashed[name]
		if !ok {
			return symEntry{}, false
		}
		return idx.names[i], true
	}
	i, ok := slices.BinarySearchFunc(idx.names, name, func(e symEntry, name string) int { return strings.Compare(e.Name, name) })
	if !ok {
		return symEntry{}, false
	}
	return idx.names[i], true
}

// uniqueNames sorts entries by name and keeps one of each name: the first
// global or weak one, else the first local one, in the entries' order.
func uniqueNames(entries []symEntry) []symEntry {
	slices.SortStableFunc(entries, func(a, b symEntry) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		switch {
		case a.local == b.local:
			return 0
		case b.local:
			return -1
		}
		return 1
	})
	return slices.CompactFunc(entries, func(a, b symEntry) bool { return a.Name == b.Name })
}

// SymbolAt returns the function symbol whose range contains the link-time
// address addr. A symbol of size 0 covers the addresses up to the next
// function symbol.
func (im *Image) SymbolAt(addr uint64) (Sym, bool) {
	im.LoadSymbols()
	idx := im.symbols()
	i, ok := findSpan(idx.funcs, addr)
	if !ok {
		return Sym{}, false
	}
	return idx.syms[i], true
}

// DataSymbolAt returns the sized data symbol (an object, not a function
// or a TLS variable) whose range [Value, Value+Size) contains the
// link-time address addr.
func (im *Image) DataSymbolAt(addr uint64) (Sym, bool) {
	im.LoadSymbols()
	objs := im.symbols().objs
	i := sort.Search(len(objs), func(i int) bool { return objs[i].Value > addr })
	// Objects do not overlap in practice; look back a little for one
	// that covers addr.
	for j := i - 1; j >= 0 && j >= i-8; j-- {
		if o := objs[j]; addr-o.Value < o.Size {
			return o, true
		}
	}
	return Sym{}, false
}

// LoadSymbols builds the symbol index if it is not built yet and returns
// the error met while reading the symbol tables, if any. Symbol and
// SymbolAt call it themselves and treat an unreadable table as empty; the
// index then holds what could be read.
func (im *Image) LoadSymbols() error {
	im.symOnce.Do(func() {
		if idx := im.loadSymbols(); idx != nil {
			im.syms.Store(idx)
			return
		}
		idx, err := im.indexSymbols()
		im.syms.Store(idx)
		im.symErr = err
		if err == nil {
			// An index read with errors is made again, and its
			// errors reported, in every run.
			im.storeSymbols(idx)
		}
	})
	return im.symErr
}

func (im *Image) indexSymbols() (*symIndex, error) {
	var errs []error
	var tables [][]symEntry
	total := 0
	add := func(src *Image, typ elf.SectionType) {
		entries, err := src.readSymbols(typ)
		if err != nil {
			errs = append(errs, err)
		}
		tables = append(tables, entries)
		total += len(entries)
	}
	add(im, elf.SHT_SYMTAB)
	add(im, elf.SHT_DYNSYM)
	if im.ef.SectionByType(elf.SHT_SYMTAB) == nil {
		// A stripped file: its separate debug file usually keeps the
		// full symbol table, local symbols included.
		if sep, err := im.separate(); err == nil {
			add(sep, elf.SHT_SYMTAB)
		}
	}
	// Sized once for every table: growing them was a third of reading
	// libc's symbols.
	idx := &symIndex{}
	all := make([]symEntry, 0, total)
	funcs := make([]symEntry, 0, total)
	for _, entries := range tables {
		all = append(all, entries...)
		for _, e := range entries {
			switch {
			case e.Func:
				funcs = append(funcs, e)
			case !e.TLS && e.Size > 0:
				idx.objs = append(idx.objs, e.Sym)
			}
		}
	}
	idx.names = uniqueNames(all)
	idx.syms, idx.funcs = im.funcSpans(funcs)
	sortObjects(idx.objs)
	return idx, errors.Join(errs...)
}

// sortObjects sorts data symbols by address, then name.
func sortObjects(objs []Sym) {
	slices.SortFunc(objs, func(a, b Sym) int {
		if a.Value != b.Value {
			return cmp.Compare(a.Value, b.Value)
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// readSymbols reads the defined, named symbols of the table of type typ
// (SHT_SYMTAB or SHT_DYNSYM).
func (im *Image) readSymbols(typ elf.SectionType) ([]symEntry, error) {
	s := im.ef.SectionByType(typ)
	if s == nil || s.Type == elf.SHT_NOBITS {
		return nil, nil
	}
	if s.Size/elf.Sym64Size > MaxSymbols {
		return nil, fmt.Errorf("reading %s of %s: %d bytes hold more than %d symbols (limit MaxSymbols)", s.Name, im.Path, s.Size, MaxSymbols)
	}
	if s.Offset > uint64(im.size) || s.Size > uint64(im.size)-s.Offset {
		return nil, fmt.Errorf("reading %s of %s: section at offset %#x, %d bytes, lies beyond the end of the file (%d bytes)", s.Name, im.Path, s.Offset, s.Size, im.size)
	}
	var raw []elf.Symbol
	err := guard(func() error {
		var err error
		if typ == elf.SHT_SYMTAB {
			raw, err = im.ef.Symbols()
		} else {
			raw, err = im.ef.DynamicSymbols()
		}
		return err
	})
	if err != nil {
		if errors.Is(err, elf.ErrNoSymbols) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s of %s: %w", s.Name, im.Path, err)
	}
	out := make([]symEntry, 0, len(raw))
	for _, r := range raw {
		t := elf.ST_TYPE(r.Info)
		if r.Name == "" || r.Section == elf.SHN_UNDEF || t == elf.STT_SECTION || t == elf.STT_FILE {
			continue
		}
		out = append(out, symEntry{
			Sym: Sym{
				Name:  r.Name,
				Value: r.Value,
				Size:  r.Size,
				TLS:   t == elf.STT_TLS,
				Func:  t == elf.STT_FUNC || t == elf.STT_GNU_IFUNC,
			},
			local: elf.ST_BIND(r.Info) == elf.STB_LOCAL,
		})
	}
	return out, nil
}

// funcSpans turns function symbols into disjoint address spans. Of
// symbols at the same address (aliases) one is kept: global before local,
// sized before unsized, then by name.
func (im *Image) funcSpans(funcs []symEntry) ([]Sym, []span) {
	sort.Slice(funcs, func(i, j int) bool {
		a, b := funcs[i], funcs[j]
		if a.Value != b.Value {
			return a.Value < b.Value
		}
		if a.local != b.local {
			return !a.local
		}
		if (a.Size == 0) != (b.Size == 0) {
			return a.Size != 0
		}
		if a.Size != b.Size {
			return a.Size > b.Size
		}
		return a.Name < b.Name
	})
	var syms []Sym
	for i, f := range funcs {
		if i > 0 && f.Value == funcs[i-1].Value {
			continue
		}
		syms = append(syms, f.Sym)
	}
	ivs := make([]interval, 0, len(syms))
	for i, s := range syms {
		end := s.Value + s.Size
		if s.Size == 0 || end < s.Value {
			// Unsized: up to the next symbol, or the end of the
			// segment for the last one.
			end = s.Value + 1
			if i+1 < len(syms) {
				end = syms[i+1].Value
			} else if l, ok := im.loadAt(s.Value); ok && l.Vaddr+l.Memsz > s.Value {
				end = l.Vaddr + l.Memsz
			}
		}
		ivs = append(ivs, interval{lo: s.Value, hi: end, id: i})
	}
	return syms, flatten(ivs)
}

// interval is a half-open address range naming item id.
type interval struct {
	lo, hi uint64
	id     int
}

// span is a piece of the flattened set of intervals.
type span struct {
	lo, hi uint64
	id     int
}

// flatten turns possibly nested intervals into disjoint spans sorted by
// address, each naming the innermost interval that covers it. Intervals
// that overlap without nesting are cut where the later one starts.
func flatten(ivs []interval) []span {
	sort.SliceStable(ivs, func(i, j int) bool {
		if ivs[i].lo != ivs[j].lo {
			return ivs[i].lo < ivs[j].lo
		}
		return ivs[i].hi > ivs[j].hi
	})
	var out []span
	var stack []interval
	cur := uint64(0)
	emit := func(lo, hi uint64, id int) {
		if lo < hi {
			out = append(out, span{lo: lo, hi: hi, id: id})
		}
	}
	// popTo closes every open interval that ends at or before x.
	popTo := func(x uint64) {
		for len(stack) > 0 {
			top := stack[len(stack)-1]
			if top.hi > x {
				return
			}
			emit(cur, top.hi, top.id)
			if top.hi > cur {
				cur = top.hi
			}
			stack = stack[:len(stack)-1]
		}
	}
	for _, iv := range ivs {
		if iv.hi <= iv.lo {
			continue
		}
		popTo(iv.lo)
		if len(stack) > 0 {
			emit(cur, iv.lo, stack[len(stack)-1].id)
		}
		cur = iv.lo
		stack = append(stack, iv)
	}
	popTo(^uint64(0)) // every hi is at most the top address
	return out
}

// findSpan returns the id of the span containing addr.
func findSpan(spans []span, addr uint64) (int, bool) {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].lo > addr }) - 1
	if i < 0 || addr >= spans[i].hi {
		return 0, false
	}
	return spans[i].id, true
}

// symbols returns the current symbol index (LoadSymbols has run).
func (im *Image) symbols() *symIndex { return im.syms.Load() }

// IndexSymbolNames indexes the image's symbols by name in a hash table,
// which Symbol then uses instead of a binary search among the names: for
// an image whose symbols are looked up by name many times while a target
// is held (the OpenMP runtime's), done before the stop. The names
// AddSymbols adds later are looked up by the binary search again.
func (im *Image) IndexSymbolNames() {
	im.LoadSymbols()
	im.symMu.Lock()
	defer im.symMu.Unlock()
	old := im.symbols()
	if old == nil || old.hashed != nil {
		return
	}
	idx := *old
	idx.hashed = make(map[string]int, len(old.names))
	for i, e := range old.names {
		idx.hashed[e.Name] = i
	}
	im.syms.Store(&idx)
}

// AddSymbols adds symbols that another source than the file knows (what
// was recovered from its code) to the image's index, as if the file had
// them as local symbols: Symbol, SymbolAt and FuncAt then find them. A
// name the file already defines keeps the file's symbol. It is safe to
// call while other goroutines look symbols up.
func (im *Image) AddSymbols(add []Sym) {
	im.LoadSymbols()
	im.symsAdded.Store(true) // answers now depend on more than the file
	im.symMu.Lock()
	defer im.symMu.Unlock()
	old := im.symbols()
	idx := &symIndex{objs: slices.Clone(old.objs)}
	names := slices.Clone(old.names)
	funcs := make([]symEntry, 0, len(old.syms)+len(add))
	for _, f := range old.syms {
		funcs = append(funcs, symEntry{Sym: f})
	}
	added := make(map[string]bool, len(add))
	for _, a := range add {
		if _, ok := old.byName(a.Name); ok || added[a.Name] {
			continue // the file's, or the first of this name
		}
		added[a.Name] = true
		e := symEntry{Sym: a, local: true}
		names = append(names, e)
		switch {
		case a.Func:
			funcs = append(funcs, e)
		case !a.TLS && a.Size > 0:
			idx.objs = append(idx.objs, a)
		}
	}
	idx.names = uniqueNames(names)
	idx.syms, idx.funcs = im.funcSpans(funcs)
	sortObjects(idx.objs)
	im.syms.Store(idx)
}
