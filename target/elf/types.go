package elf

import (
	"debug/dwarf"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/ompd-inspect/ompd-inspect/target/sectioncache"
)

// TypeIndex finds struct, union and typedef types by name in an image's
// DWARF, to learn field offsets and sizes of a library's data structures
// from its own debug information.
type TypeIndex struct {
	path string
	// im is the image whose DWARF is read; dd is its opened DWARF, nil
	// until a lookup first needs it (the names and layouts a run needs
	// may all come from the section cache).
	im *Image
	dd *dwarfData

	mu    sync.Mutex
	cache map[string]dwarf.Type
	// names maps each type name met so far to its first definition;
	// units are the units to read, next the first not read yet.
	names    map[string]dwarf.Offset
	units    []dwarf.Offset
	next     int
	entries  uint64 // entries read so far
	infoSize uint64
	scanErr  error // what stopped the reading of units

	// store keeps the names of all units across runs, under key (nil
	// when nothing of the DWARF's file can be kept); stored is set once
	// they are there (read from it, or put).
	store  SectionCache
	key    sectioncache.Key
	stored bool

	// layouts are the types Size and Field answered, by name;
	// layoutsNew is set when some were read from the DWARF in this run
	// (saveLayouts then keeps them all).
	layouts    map[string]*typeLayout
	layoutsNew bool
}

// MaxTypeEntries bounds how many DWARF entries a TypeIndex reads.
const MaxTypeEntries = 50_000_000

// NewTypeIndex returns the type index of the image's DWARF (its own, or
// its separate debug file's), which it shares with the image's lookups.
// A name is looked up by reading the top-level entries of one unit after
// the other, in order, until one defines it: the first definition is
// found, and a lookup reads no further than it needs.
//
// The DWARF is opened when a lookup first needs it: not at all when the
// section cache holds the names of every unit and the layouts asked for.
func NewTypeIndex(im *Image) (*TypeIndex, error) {
	src, err := im.dwarfSource()
	if err != nil {
		return nil, fmt.Errorf("no DWARF type information: %w", err) // err names the file
	}
	ti := &TypeIndex{path: src.Path, im: im, names: make(map[string]dwarf.Offset), cache: make(map[string]dwarf.Type), infoSize: src.debugInfoSize()}
	if key, keyed := typeNamesKey(src); keyed && im.sections != nil {
		ti.store, ti.key = im.sections, key
		ti.loadLayouts()
		loadCached(ti.store, ti.key, func(b []byte) bool {
			names, ok := decodeTypeNames(b, ti.infoSize)
			if ok {
				// Every unit's names are known: none is left to read.
				ti.names, ti.stored = names, true
			}
			return ok
		})
	}
	if ti.stored {
		return ti, nil
	}
	if err := ti.open(); err != nil {
		return nil, err
	}
	for _, u := range ti.dd.units {
		ti.units = append(ti.units, u.entry.Offset)
	}
	if ti.dd.openErr != nil && len(ti.units) == 0 {
		return nil, fmt.Errorf("indexing DWARF types of %s: %w", ti.path, ti.dd.openErr)
	}
	return ti, nil
}

// open opens the image's DWARF for the index, once; ti.mu is held, or
// the index is not shared yet.
func (ti *TypeIndex) open() error {
	if ti.dd != nil {
		return nil
	}
	dd := ti.im.openDWARF()
	if dd == nil {
		return fmt.Errorf("no DWARF type information: %w", ti.im.dwErr) // it names the file
	}
	ti.dd = dd
	return nil
}

// typeNamesSection names the section cache's entry that keeps the type
// names of a DWARF (what ScanAll finds), so that a later run reads no
// unit to find them.
const typeNamesSection = ".ompdi_typenames1"

// typeNamesKey is the section cache's key of the type names of src's
// DWARF: src's build-id and identity, and the place of its .debug_info.
func typeNamesKey(src *Image) (sectioncache.Key, bool) {
	for _, s := range src.ef.Sections {
		if s.Name == ".debug_info" || s.Name == ".zdebug_info" {
			return src.cacheKey(typeNamesSection, s.Offset, s.FileSize)
		}
	}
	return src.cacheKey(typeNamesSection, 0, 0)
}

// encodeTypeNames serializes a name table: the number of names, then each
// name's length, bytes and offset (unsigned LEB128), in name order.
func encodeTypeNames(names map[string]dwarf.Offset) []byte {
	var w KeptWriter
	keys := slices.Sorted(maps.Keys(names))
	w.Uint(uint64(len(keys)))
	for _, n := range keys {
		w.Str(n)
		w.Uint(uint64(names[n]))
	}
	return w.Data()
}

// decodeTypeNames reads what encodeTypeNames wrote; ok is false for data
// that does not parse whole or names an offset past infoSize.
func decodeTypeNames(b []byte, infoSize uint64) (map[string]dwarf.Offset, bool) {
	r := NewKeptReader(b)
	count := r.Count()
	names := make(map[string]dwarf.Offset, min(count, 4096))
	for ; count > 0 && !r.Bad(); count-- {
		name := r.Str()
		if off := r.Uint(); off < infoSize {
			names[name] = dwarf.Offset(off)
		} else {
			r.Fail()
		}
	}
	return names, r.Done()
}

// typesKey keys an image's shared type index (Image.Derived).
type typesKey struct{}

// typeIndexResult is Types' answer, kept with the image.
type typeIndexResult struct {
	ti  *TypeIndex
	err error
}

// onClose keeps the layouts found in the section cache (Image.Close).
func (r typeIndexResult) onClose() {
	if r.ti != nil {
		r.ti.saveLayouts()
	}
}

// Types returns the image's type index (NewTypeIndex), made once and
// shared by every user of the image: what one lookup read serves the
// next.
func (im *Image) Types() (*TypeIndex, error) {
	r := im.Derived(typesKey{}, func() any {
		ti, err := NewTypeIndex(im)
		return typeIndexResult{ti, err}
	}).(typeIndexResult)
	return r.ti, r.err
}

// ScanAll reads the top-level entries of every unit not read yet, so that
// later lookups read none: it lets a caller do that work before a target
// is stopped. What stops the reading is what lookups then report. When
// no layouts were kept by an earlier run, it opens the DWARF too, which
// the lookups will read them from.
//
// The names found are kept in the image's section cache, when it has one:
// the type index of the same file in a later run reads them from there.
// A later run that asks for a type no earlier run asked about opens the
// DWARF then.
func (ti *TypeIndex) ScanAll() {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	if ti.layouts == nil {
		_ = ti.open() // the lookups report what fails
	}
	for ti.scanErr == nil && ti.next < len(ti.units) {
		ti.scanUnit()
	}
	if ti.scanErr == nil && ti.store != nil && !ti.stored {
		ti.stored = true
		_ = ti.store.Put(ti.key, encodeTypeNames(ti.names)) // a cache that cannot be written only costs time
	}
}

// scanUnit reads the top-level entries of the next unit; ti.mu is held.
func (ti *TypeIndex) scanUnit() {
	off := ti.units[ti.next]
	ti.next++
	err := guard(func() error {
		r := ti.dd.d.Reader()
		r.Seek(off)
		for first := true; ; first = false {
			ti.entries++
			if ti.entries > MaxTypeEntries {
				return fmt.Errorf("more than %d DWARF entries (limit MaxTypeEntries)", MaxTypeEntries)
			}
			if ti.entries > ti.infoSize {
				return errStuckEntries(ti.infoSize)
			}
			e, err := r.Next()
			if err != nil {
				return err
			}
			if e == nil {
				return nil
			}
			switch e.Tag {
			case dwarf.TagCompileUnit, dwarf.TagPartialUnit:
				if !first {
					return nil // the next unit
				}
				continue // descend into the unit's children
			case 0:
				// The end of the unit's children: what follows is the
				// next unit, or the end (a reader stuck on a cut-off
				// entry returns null entries until the bound).
				continue
			case dwarf.TagTypedef, dwarf.TagStructType, dwarf.TagUnionType:
				if decl, _ := e.Val(dwarf.AttrDeclaration).(bool); !decl {
					if name, ok := e.Val(dwarf.AttrName).(string); ok {
						if _, seen := ti.names[name]; !seen {
							ti.names[name] = e.Offset
						}
					}
				}
			}
			if e.Children {
				r.SkipChildren()
			}
		}
	})
	if err != nil {
		ti.scanErr = fmt.Errorf("indexing DWARF types of %s: %w", ti.path, err)
	}
}

func (ti *TypeIndex) typ(name string) (dwarf.Type, error) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	t, err := ti.typLocked(name)
	if err != nil {
		return nil, err
	}
	// A typedef may name a struct or union that its compile unit only
	// declares; another unit defines it under its tag name.
	if st, ok := t.(*dwarf.StructType); ok && st.Incomplete && st.StructName != "" && st.StructName != name {
		if full, err := ti.typLocked(st.StructName); err == nil {
			if fst, ok := full.(*dwarf.StructType); ok && !fst.Incomplete {
				ti.cache[name] = full
				return full, nil
			}
		}
	}
	return t, nil
}

// typLocked reads the type indexed under name, through typedefs; ti.mu is
// held.
func (ti *TypeIndex) typLocked(name string) (dwarf.Type, error) {
	if t, ok := ti.cache[name]; ok {
		return t, nil
	}
	off, ok := ti.names[name]
	for !ok && ti.scanErr == nil && ti.next < len(ti.units) {
		ti.scanUnit()
		off, ok = ti.names[name]
	}
	if !ok {
		if ti.scanErr != nil {
			return nil, fmt.Errorf("type %s: %w", name, ti.scanErr)
		}
		return nil, fmt.Errorf("type %s is not in the DWARF of %s", name, ti.path)
	}
	if err := ti.open(); err != nil {
		return nil, fmt.Errorf("type %s: %w", name, err)
	}
	var t dwarf.Type
	if err := guard(func() error {
		ti.dd.typeMu.Lock()
		defer ti.dd.typeMu.Unlock()
		if err := checkTypeGraph(ti.dd.d, off); err != nil {
			return err
		}
		var err error
		t, err = ti.dd.d.Type(off)
		return err
	}); err != nil {
		return nil, fmt.Errorf("reading type %s from %s: %w", name, ti.path, err)
	}
	for {
		td, ok := t.(*dwarf.TypedefType)
		if !ok {
			break
		}
		t = td.Type
	}
	ti.cache[name] = t
	return t, nil
}

// typeLayout is what Size and Field answer of one type: its size (-1 for
// none), whether it is a struct or union, and its fields' offsets and
// sizes (the first field of each name).
type typeLayout struct {
	size     int64
	isStruct bool
	fields   map[string]fieldLayout
}

// fieldLayout is a field's offset and size (-1 for none).
type fieldLayout struct {
	off  uint64
	size int64
}

// layoutOf returns the layout of the named type: from those already
// known (read from the section cache, or found earlier), else read from
// the DWARF and recorded, to be kept in the cache when the image closes.
func (ti *TypeIndex) layoutOf(name string) (*typeLayout, error) {
	ti.mu.Lock()
	lay := ti.layouts[name]
	ti.mu.Unlock()
	if lay != nil {
		return lay, nil
	}
	t, err := ti.typ(name)
	if err != nil {
		return nil, err
	}
	lay = &typeLayout{size: t.Size()}
	if st, ok := t.(*dwarf.StructType); ok {
		lay.isStruct = true
		lay.fields = make(map[string]fieldLayout, len(st.Field))
		for _, f := range st.Field {
			if _, dup := lay.fields[f.Name]; !dup {
				lay.fields[f.Name] = fieldLayout{off: uint64(f.ByteOffset), size: f.Type.Size()}
			}
		}
	}
	ti.mu.Lock()
	if ti.layouts == nil {
		ti.layouts = make(map[string]*typeLayout)
	}
	ti.layouts[name] = lay
	ti.layoutsNew = true
	ti.mu.Unlock()
	return lay, nil
}

// Size returns the size in bytes of the named type.
func (ti *TypeIndex) Size(name string) (uint64, error) {
	lay, err := ti.layoutOf(name)
	if err != nil {
		return 0, err
	}
	if lay.size < 0 {
		return 0, fmt.Errorf("type %s in %s has no size", name, ti.path)
	}
	return uint64(lay.size), nil
}

// Field returns the offset and size of a field of the named struct or
// union type.
func (ti *TypeIndex) Field(typName, field string) (offset, size uint64, err error) {
	lay, err := ti.layoutOf(typName)
	if err != nil {
		return 0, 0, err
	}
	if !lay.isStruct {
		return 0, 0, fmt.Errorf("type %s in %s is not a struct or union", typName, ti.path)
	}
	f, ok := lay.fields[field]
	if !ok {
		return 0, 0, fmt.Errorf("type %s in %s has no field %s", typName, ti.path, field)
	}
	if f.size < 0 {
		return 0, 0, fmt.Errorf("field %s.%s in %s has no size", typName, field, ti.path)
	}
	return f.off, uint64(f.size), nil
}

// typeLayoutsSection names the section cache's entry that keeps the
// layouts of the types a DWARF was asked about, so that a later run
// parses none of them.
const typeLayoutsSection = ".ompdi_typelayouts1"

// saveLayouts stores the layouts known in the section cache when some
// were found in this run. The image's Close calls it.
func (ti *TypeIndex) saveLayouts() {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	if ti.store == nil || !ti.layoutsNew {
		return
	}
	ti.layoutsNew = false
	k := ti.key
	k.Section = typeLayoutsSection
	_ = ti.store.Put(k, encodeTypeLayouts(ti.layouts)) // a cache that cannot be written only costs time
}

// loadLayouts reads the layouts the section cache keeps, if any.
func (ti *TypeIndex) loadLayouts() {
	k := ti.key
	k.Section = typeLayoutsSection
	loadCached(ti.store, k, func(b []byte) bool {
		lays, ok := decodeTypeLayouts(b)
		if ok {
			ti.layouts = lays
		}
		return ok
	})
}

// encodeTypeLayouts serializes layouts: the number of types, then for
// each (in name order) its name, size, struct flag and fields (name,
// offset, size), lengths and numbers as LEB128 (sizes zigzag-encoded).
func encodeTypeLayouts(lays map[string]*typeLayout) []byte {
	var w KeptWriter
	names := slices.Sorted(maps.Keys(lays))
	w.Uint(uint64(len(names)))
	for _, n := range names {
		lay := lays[n]
		w.Str(n)
		w.Int(lay.size)
		w.Flag(lay.isStruct)
		fields := slices.Sorted(maps.Keys(lay.fields))
		w.Uint(uint64(len(fields)))
		for _, f := range fields {
			w.Str(f)
			w.Uint(lay.fields[f].off)
			w.Int(lay.fields[f].size)
		}
	}
	return w.Data()
}

// decodeTypeLayouts reads what encodeTypeLayouts wrote; ok is false for
// data that does not parse whole.
func decodeTypeLayouts(b []byte) (map[string]*typeLayout, bool) {
	r := NewKeptReader(b)
	count := r.Count()
	lays := make(map[string]*typeLayout, min(count, 4096))
	for ; count > 0 && !r.Bad(); count-- {
		name := r.Str()
		lay := &typeLayout{size: r.Int(), isStruct: r.Flag()}
		nf := r.Count()
		if nf > 0 && !lay.isStruct {
			r.Fail()
		}
		if lay.isStruct {
			lay.fields = make(map[string]fieldLayout, min(nf, 4096))
		}
		for ; nf > 0 && !r.Bad(); nf-- {
			f := r.Str()
			lay.fields[f] = fieldLayout{off: r.Uint(), size: r.Int()}
		}
		lays[name] = lay
	}
	return lays, r.Done()
}

// Limits on the types debug/dwarf's Data.Type reads for one type. It
// recurses once per type along every reference it follows, and computes
// the size of a typedef, qualifier or array through the chain of types
// they refer to: a cycle in such a chain (a typedef of itself) or a long
// enough path of references overflows the goroutine stack, a fatal error
// that no recover catches.
const (
	// maxTypeGraph bounds the types reachable from a type that is read.
	maxTypeGraph = 1 << 16
	// maxTypeChain bounds a chain of typedefs, qualifiers and arrays.
	maxTypeChain = 1 << 10
)

// checkTypeGraph checks, before Data.Type reads the type at root, that it
// reaches at most maxTypeGraph types (following DW_AT_type of the types
// and of their children, a superset of what Data.Type follows) and that
// no chain of typedefs, qualifiers and arrays among them is cyclic or
// longer than maxTypeChain.
func checkTypeGraph(d *dwarf.Data, root dwarf.Offset) error {
	r := d.Reader()
	next := make(map[dwarf.Offset]dwarf.Offset) // chain links
	seen := map[dwarf.Offset]bool{root: true}
	todo := []dwarf.Offset{root}
	follow := func(e *dwarf.Entry) (dwarf.Offset, bool, error) {
		t, ok := e.Val(dwarf.AttrType).(dwarf.Offset)
		if ok && !seen[t] {
			if len(seen) >= maxTypeGraph {
				return 0, false, fmt.Errorf("the type at %#x reaches more than %d types (limit maxTypeGraph)", root, maxTypeGraph)
			}
			seen[t] = true
			todo = append(todo, t)
		}
		return t, ok, nil
	}
	for len(todo) > 0 {
		off := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		r.Seek(off)
		e, err := r.Next()
		if err != nil || e == nil {
			continue // Data.Type reports it
		}
		t, ok, err := follow(e)
		if err != nil {
			return err
		}
		switch e.Tag {
		case dwarf.TagTypedef, dwarf.TagConstType, dwarf.TagVolatileType, dwarf.TagRestrictType, dwarf.TagAtomicType, dwarf.TagArrayType:
			if ok {
				next[off] = t
			}
		}
		if !e.Children {
			continue
		}
		for {
			c, err := r.Next()
			if err != nil || c == nil || c.Tag == 0 {
				break
			}
			if _, _, err := follow(c); err != nil {
				return err
			}
			if c.Children {
				r.SkipChildren()
			}
		}
	}
	// The length of the chain from every link, each computed once.
	starts := make([]dwarf.Offset, 0, len(next))
	for off := range next {
		starts = append(starts, off)
	}
	slices.Sort(starts)
	length := make(map[dwarf.Offset]int, len(next))
	onPath := make(map[dwarf.Offset]bool)
	for _, start := range starts {
		var path []dwarf.Offset
		base := 0
		for cur := start; ; {
			if l, ok := length[cur]; ok {
				base = l
				break
			}
			nx, ok := next[cur]
			if !ok {
				break
			}
			if onPath[cur] {
				return fmt.Errorf("the type at %#x reaches a cycle of typedefs, qualifiers or arrays at %#x", root, cur)
			}
			onPath[cur] = true
			path = append(path, cur)
			if base+len(path) > maxTypeChain {
				return fmt.Errorf("the type at %#x reaches a chain of more than %d typedefs, qualifiers or arrays (limit maxTypeChain)", root, maxTypeChain)
			}
			cur = nx
		}
		for i := len(path) - 1; i >= 0; i-- {
			base++
			length[path[i]] = base
			delete(onPath, path[i])
		}
		if base > maxTypeChain {
			return fmt.Errorf("the type at %#x reaches a chain of more than %d typedefs, qualifiers or arrays (limit maxTypeChain)", root, maxTypeChain)
		}
	}
	return nil
}
