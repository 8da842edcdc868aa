package elf

import (
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ompd-inspect/ompd-inspect/target/sectioncache"
)

// dwarfIndex holds what is looked up by address in the DWARF of an image.
type dwarfIndex struct {
	rows  []lineRow // all line-table rows, sorted by address
	files []string  // file names referenced by rows; files[0] is ""
	spans []span    // disjoint subprogram ranges, ids index funcs
	funcs []funcInfo

	// inl are the inlined subroutines with code; inlSpans are their
	// disjoint ranges, each naming the innermost one (see inline.go).
	inl      []inlineNode
	inlSpans []span

	// sites are the call sites that return (not tail calls) with a
	// return pc, sorted by it; tails are the tail call sites, sorted by
	// the entry of the function that holds them (see callsite.go).
	// callsIncomplete is set when some call site could not be indexed.
	sites           []callSite
	tails           []callSite
	callsIncomplete bool
}

// lineRow is one row of a line table.
type lineRow struct {
	addr uint64
	file uint32
	line uint32
	end  bool // end of a sequence: addr is the first address past it
}

// funcInfo describes one subprogram with code.
type funcInfo struct {
	name  string
	file  string
	line  int
	entry uint64 // link-time entry address
}

// subInfo is what is recorded of every DW_TAG_subprogram while walking,
// so that concrete instances can borrow their name and declaration from
// the abstract instance or declaration they refer to.
type subInfo struct {
	name      string
	file      string
	line      int
	origin    dwarf.Offset
	hasOrigin bool

	linkage  string // DW_AT_linkage_name
	external bool   // DW_AT_external
	fn       int32  // funcs index when it has code, else -1
	entry    uint64 // entry address when it has code
}

// errTooManyRows stops indexing at MaxLineRows rows.
var errTooManyRows = fmt.Errorf("more than %d line-table rows (limit MaxLineRows)", MaxLineRows)

// maxSubprogramRanges is MaxSubprogramRanges; a test lowers it.
var maxSubprogramRanges = MaxSubprogramRanges

// maxOriginDepth bounds how many DW_AT_abstract_origin and
// DW_AT_specification links are followed.
const maxOriginDepth = 8

// LineAt returns the source file (the full path the line table records)
// and line of the link-time address addr.
func (im *Image) LineAt(addr uint64) (file string, line int, ok bool) {
	idx := im.indexAt(addr)
	if idx == nil {
		return "", 0, false
	}
	rows := idx.rows
	i := sort.Search(len(rows), func(i int) bool { return rows[i].addr > addr }) - 1
	if i < 0 || rows[i].end || rows[i].line == 0 {
		return "", 0, false
	}
	return idx.files[rows[i].file], int(rows[i].line), true
}

// FuncAt returns the name of the function containing the link-time
// address addr: the DW_TAG_subprogram whose ranges contain it, or else
// the function symbol (see SymbolAt).
func (im *Image) FuncAt(addr uint64) (name string, ok bool) {
	if idx := im.indexAt(addr); idx != nil {
		if i, ok := findSpan(idx.spans, addr); ok && idx.funcs[i].name != "" {
			return idx.funcs[i].name, true
		}
	}
	if s, ok := im.SymbolAt(addr); ok {
		return s.Name, true
	}
	return "", false
}

// FuncDecl returns the declaration (DW_AT_decl_file, DW_AT_decl_line) of
// the subprogram containing the link-time address addr.
func (im *Image) FuncDecl(addr uint64) (file string, line int, ok bool) {
	idx := im.indexAt(addr)
	if idx == nil {
		return "", 0, false
	}
	i, ok := findSpan(idx.spans, addr)
	if !ok {
		return "", 0, false
	}
	f := idx.funcs[i]
	if f.file == "" && f.line == 0 {
		return "", 0, false
	}
	return f.file, f.line, true
}

// DebugInfo indexes the whole DWARF if it is not indexed yet and reports
// the file the DWARF came from: Path itself or a separate debug file. err
// tells why there is no DWARF, or what went wrong while indexing it (the
// index then holds what was read before the problem). Lookups do not need
// it: they index only the compile unit that covers their address.
func (im *Image) DebugInfo() (file string, err error) {
	dd := im.openDWARF()
	if dd == nil {
		return im.dwFile, im.dwErr
	}
	return im.dwFile, dd.indexAll()
}

// PrepareDWARF opens the image's DWARF (its separate debug file when the
// image has none) and reads the address ranges of its compile units, so
// that a lookup indexes only the unit it needs. Lookups do this on first
// use; calling it ahead, for several images at once, overlaps the reading
// and decompressing of their debug sections.
func (im *Image) PrepareDWARF() { im.openDWARF() }

// PrepareDWARFIndex does PrepareDWARF, and indexes every unit as well when
// the DWARF's .debug_info has at most maxInfo bytes: the lookups into a
// small program's DWARF then index nothing. Problems show in lookups.
func (im *Image) PrepareDWARFIndex(maxInfo uint64) {
	if dd := im.openDWARF(); dd != nil && dd.infoSize <= maxInfo {
		_ = dd.indexAll()
	}
}

// hasDWARF reports whether the file itself carries .debug_info.
func (im *Image) hasDWARF() bool {
	for _, s := range im.ef.Sections {
		if (s.Name == ".debug_info" || s.Name == ".zdebug_info") && s.Type != elf.SHT_NOBITS && s.Size > 0 {
			return true
		}
	}
	return false
}

// openDWARF opens the DWARF once; nil when there is none (im.dwErr says
// why).
func (im *Image) openDWARF() *dwarfData {
	im.dwOnce.Do(func() {
		src, err := im.dwarfSource()
		if err != nil {
			im.dwErr = err
			return
		}
		im.dwFile = src.Path
		im.dw, im.dwErr = im.openUnits(src)
	})
	return im.dw
}

// dwarfSource returns the image whose DWARF describes im: im itself, or
// its separate debug file.
func (im *Image) dwarfSource() (*Image, error) {
	if im.hasDWARF() {
		return im, nil
	}
	sep, err := im.separate()
	if err != nil {
		return nil, fmt.Errorf("%s has no DWARF: %w", im.Path, err)
	}
	if !sep.hasDWARF() {
		return nil, fmt.Errorf("%s has no DWARF, nor has its debug file %s", im.Path, sep.Path)
	}
	return sep, nil
}

// cacheKey is the section cache's key of what is kept for the image under
// section: the image's build-id and identity, and off and size (a
// section's place in the file, or 0). ok is false when the image has no
// build-id or no identity: nothing of it can be kept.
func (im *Image) cacheKey(section string, off, size uint64) (k sectioncache.Key, ok bool) {
	if im.buildID == "" || im.ino == 0 {
		return sectioncache.Key{}, false
	}
	return sectioncache.Key{BuildID: im.buildID, Section: section, FileDev: im.dev, FileIno: im.ino,
		FileSize: im.size, FileModTime: im.mtime, FileChangeTime: im.ctime, Offset: off, Size: size}, true
}

// loadCached gives decode the entry k of store, when there is one, and
// reports whether decode took it. A mapped entry that faults is no entry.
func loadCached(store SectionCache, k sectioncache.Key, decode func([]byte) bool) bool {
	b := store.Get(k, sectioncache.AnySize)
	if b == nil {
		return false
	}
	ok := false
	return guard(func() error { ok = decode(b); return nil }) == nil && ok
}

// dwarfData is an image's opened DWARF: the address ranges of its units,
// and the index of each unit, built when a lookup first needs it.
type dwarfData struct {
	d        *dwarf.Data
	src      *Image // the image the DWARF comes from (itself or its debug file)
	path     string // the file the DWARF comes from
	valid    func(uint64) bool
	line     lineSection
	infoSize uint64
	sym      func(string) (uint64, bool)

	units     []*unitIndex // in .debug_info order
	spans     []span       // disjoint ranges of the units' code; ids index units
	rangeless []int        // units with children but no ranges: searched when no span covers an address
	openErr   error        // a problem met listing the units

	// mu serializes the indexing of units: their budgets are shared.
	mu sync.Mutex
	// typeMu serializes d.Type, whose cache is not safe for concurrent
	// use, among the type indexes of the image.
	typeMu    sync.Mutex
	used      budget // what the units indexed so far hold
	exhausted bool   // a limit tripped: no more units are indexed
	errs      []error
	files     map[int]unitFiles // line-table files of units, for entries read across units
	rangeDone bool              // the rangeless units are indexed
}

// unitIndex is one unit and its index, nil until built.
type unitIndex struct {
	entry *dwarf.Entry
	done  atomic.Bool
	idx   *dwarfIndex
}

// unitFiles are a unit's line-table files and compilation directory.
type unitFiles struct {
	files   []*dwarf.LineFile
	compDir string
}

// budget counts what indexed units hold, against the image's limits
// (MaxLineRows, MaxSubprograms, MaxSubprogramRanges,
// MaxInlinedSubroutines, MaxInlineRanges, maxCallSites).
type budget struct {
	rows, subs, ranges, inlines, inlRanges, sites int
}

// openUnits opens the DWARF of src (the image itself or its separate
// debug file) and lists its units with their address ranges. Addresses
// are checked against the image's executable segments, to drop code the
// linker discarded (whose line tables and ranges start at 0 or at a
// tombstone address).
func (im *Image) openUnits(src *Image) (*dwarfData, error) {
	// First: it sets the size of a .zdebug_info, read below.
	infoSize := src.debugInfoSize()
	for _, s := range src.ef.Sections {
		if !strings.HasPrefix(s.Name, ".debug_") && !strings.HasPrefix(s.Name, ".zdebug_") {
			continue
		}
		if s.Size > MaxDebugSectionBytes {
			return nil, fmt.Errorf("reading DWARF of %s: section %s has %d bytes, more than %d (limit MaxDebugSectionBytes)", src.Path, s.Name, s.Size, MaxDebugSectionBytes)
		}
	}
	var d *dwarf.Data
	line := lineSection{order: binary.LittleEndian}
	if src.ef.ByteOrder != nil {
		line.order = src.ef.ByteOrder
	}
	if err := guard(func() error {
		var err error
		d, line.data, err = loadDWARFData(src, im.sections)
		return err
	}); err != nil {
		return nil, fmt.Errorf("reading DWARF of %s: %w", src.Path, err)
	}
	hasExec := false
	for _, l := range im.loads {
		if l.Flags&elf.PF_X != 0 {
			hasExec = true
		}
	}
	dd := &dwarfData{
		d:        d,
		src:      src,
		path:     src.Path,
		line:     line,
		infoSize: infoSize,
		files:    map[int]unitFiles{},
		valid: func(addr uint64) bool {
			if !hasExec {
				return addr != 0
			}
			l, ok := im.loadAt(addr)
			return ok && l.Flags&elf.PF_X != 0
		},
		sym: func(name string) (uint64, bool) {
			s, ok := im.Symbol(name)
			return s.Value, ok && s.Func
		},
	}
	if err := guard(func() error { dd.openErr = dd.listUnits(); return nil }); err != nil {
		dd.openErr = err
	}
	return dd, nil
}

// dwarfSections are the debug sections lookups read, by name after
// ".debug_" (or ".zdebug_"): entries, their abbreviations and strings,
// line tables and address ranges, and DWARF 5's tables of addresses,
// strings and ranges (type units for types). Location lists, frame
// tables, name and macro tables are not read: decompressing them was
// most of the time spent opening a large debug file.
var dwarfSections = []string{"abbrev", "info", "str", "line", "ranges", "addr", "line_str", "rnglists", "str_offsets", "types"}

// loadDWARFData reads the debug sections lookups need (dwarfSections)
// of src, decompressed: a compressed section from cache when it holds it
// (it is stored there after it is inflated). A relocatable file's sections
// need relocations applied: debug/elf's DWARF does that, reading every
// section. line is the .debug_line section, for the line tables.
func loadDWARFData(src *Image, cache SectionCache) (d *dwarf.Data, line []byte, err error) {
	ef := src.ef
	if ef.Type == elf.ET_REL {
		d, err = ef.DWARF()
		return d, src.debugLine().data, err
	}
	dat := map[string][]byte{}
	var types [][]byte
	for _, s := range ef.Sections {
		name, ok := strings.CutPrefix(s.Name, ".debug_")
		if !ok {
			if name, ok = strings.CutPrefix(s.Name, ".zdebug_"); !ok {
				continue
			}
		}
		if !slices.Contains(dwarfSections, name) || s.Type == elf.SHT_NOBITS {
			continue
		}
		if _, seen := dat[name]; seen && name != "types" {
			continue
		}
		b, err := src.sectionData(s, cache)
		if err != nil {
			return nil, nil, err
		}
		if name == "types" {
			types = append(types, b)
			continue
		}
		dat[name] = b
	}
	d, err = dwarf.New(dat["abbrev"], nil, nil, dat["info"], dat["line"], nil, dat["ranges"], dat["str"])
	if err != nil {
		return nil, nil, err
	}
	for _, name := range []string{"addr", "line_str", "rnglists", "str_offsets"} {
		if b, ok := dat[name]; ok {
			if err := d.AddSection(".debug_"+name, b); err != nil {
				return nil, nil, err
			}
		}
	}
	for i, b := range types {
		if err := d.AddTypes(fmt.Sprintf("types-%d", i), b); err != nil {
			return nil, nil, err
		}
	}
	return d, dat["line"], nil
}

// sectionData returns section s of the image decompressed, through cache
// when s is compressed and the image has a build-id to key it by.
func (im *Image) sectionData(s *elf.Section, cache SectionCache) ([]byte, error) {
	compressed := s.Flags&elf.SHF_COMPRESSED != 0 || strings.HasPrefix(s.Name, ".zdebug_")
	key, keyed := im.cacheKey(s.Name, s.Offset, s.FileSize)
	useCache := compressed && cache != nil && keyed
	if useCache {
		if b := cache.Get(key, s.Size); b != nil {
			return b, nil
		}
	}
	b, err := s.Data()
	if err != nil && uint64(len(b)) < s.Size {
		return nil, fmt.Errorf("section %s: %w", s.Name, err)
	}
	if useCache && uint64(len(b)) == s.Size {
		cache.Put(key, b) // a cache that cannot be written only costs time
	}
	return b, nil
}

// listUnits reads each unit's first entry and its ranges, skipping the
// unit's other entries.
func (dd *dwarfData) listUnits() error {
	var ivs []interval
	// What was listed before a problem is kept.
	defer func() { dd.spans = flatten(ivs) }()
	r := dd.d.Reader()
	for n := uint64(0); ; n++ {
		if n > dd.infoSize {
			return errStuckEntries(dd.infoSize)
		}
		e, err := r.Next()
		if err != nil {
			return fmt.Errorf("reading units: %w", err)
		}
		if e == nil {
			break
		}
		if e.Tag != dwarf.TagCompileUnit && e.Tag != dwarf.TagPartialUnit {
			r.SkipChildren()
			continue
		}
		id := len(dd.units)
		dd.units = append(dd.units, &unitIndex{entry: e})
		covered := false
		if rs, err := dd.d.Ranges(e); err == nil {
			for _, rg := range rs {
				if rg[0] < rg[1] && dd.valid(rg[0]) {
					ivs = append(ivs, interval{lo: rg[0], hi: rg[1], id: id})
					covered = true
				}
			}
		}
		if !covered && e.Children && e.Tag == dwarf.TagCompileUnit {
			dd.rangeless = append(dd.rangeless, id)
		}
		r.SkipChildren()
	}
	return nil
}

// indexAt returns the index of the unit that covers the link-time address
// addr, building it on first use; nil when no unit does (or the image has
// no DWARF).
func (im *Image) indexAt(addr uint64) *dwarfIndex {
	dd := im.openDWARF()
	if dd == nil {
		return nil
	}
	if id, ok := findSpan(dd.spans, addr); ok {
		if idx := dd.unit(id); idx != nil {
			return idx
		}
	}
	return dd.rangelessAt(addr)
}

// unit returns unit id's index, building it on first use.
func (dd *dwarfData) unit(id int) *dwarfIndex {
	u := dd.units[id]
	if u.done.Load() {
		return u.idx
	}
	dd.mu.Lock()
	defer dd.mu.Unlock()
	dd.build(id)
	return u.idx
}

// build indexes unit id unless it is indexed; dd.mu is held.
func (dd *dwarfData) build(id int) {
	u := dd.units[id]
	if u.done.Load() {
		return
	}
	defer u.done.Store(true)
	if dd.exhausted {
		return
	}
	idx := &dwarfIndex{files: []string{""}}
	var used budget
	var err error
	var stop bool
	if perr := guard(func() error {
		used, stop, err = idx.walk(dd, id)
		return nil
	}); perr != nil {
		err, stop = perr, true
		idx.callsIncomplete = true
	}
	sort.SliceStable(idx.rows, func(i, j int) bool {
		a, b := idx.rows[i], idx.rows[j]
		if a.addr != b.addr {
			return a.addr < b.addr
		}
		return a.end && !b.end
	})
	u.idx = idx
	dd.used.rows += used.rows
	dd.used.subs += used.subs
	dd.used.ranges += used.ranges
	dd.used.inlines += used.inlines
	dd.used.inlRanges += used.inlRanges
	dd.used.sites += used.sites
	if err != nil {
		dd.errs = append(dd.errs, err)
	}
	if stop {
		dd.exhausted = true
	}
}

// isExhausted reports whether a limit tripped, so that units are left
// out.
func (dd *dwarfData) isExhausted() bool {
	dd.mu.Lock()
	defer dd.mu.Unlock()
	return dd.exhausted
}

// rangelessAt searches the units that list no ranges for addr.
func (dd *dwarfData) rangelessAt(addr uint64) *dwarfIndex {
	if len(dd.rangeless) == 0 {
		return nil
	}
	for _, id := range dd.rangeless {
		idx := dd.unit(id)
		if idx == nil {
			continue
		}
		if _, ok := findSpan(idx.spans, addr); ok {
			return idx
		}
		if i := sort.Search(len(idx.rows), func(i int) bool { return idx.rows[i].addr > addr }) - 1; i >= 0 && !idx.rows[i].end {
			return idx
		}
	}
	return nil
}

// indexAll indexes every unit and returns the problems met.
func (dd *dwarfData) indexAll() error {
	dd.mu.Lock()
	defer dd.mu.Unlock()
	for id := range dd.units {
		dd.build(id)
	}
	errs := dd.errs
	if dd.openErr != nil {
		errs = append([]error{dd.openErr}, errs...)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("indexing DWARF of %s: %w", dd.path, errors.Join(errs...))
}

// filesOf returns the line-table files of the unit that holds the entry
// at off, for an entry read outside the walk of its unit; dd.mu is held.
func (dd *dwarfData) filesOf(off dwarf.Offset) unitFiles {
	i := sort.Search(len(dd.units), func(i int) bool { return dd.units[i].entry.Offset > off }) - 1
	if i < 0 {
		return unitFiles{}
	}
	if f, ok := dd.files[i]; ok {
		return f
	}
	e := dd.units[i].entry
	var f unitFiles
	f.compDir, _ = e.Val(dwarf.AttrCompDir).(string)
	if off, ok := e.Val(dwarf.AttrStmtList).(int64); !ok || off < 0 || checkLineHeader(dd.line.data, dd.line.order, uint64(off)) == nil {
		if lr, err := dd.d.LineReader(e); err == nil && lr != nil {
			f.files = lr.Files()
		}
	}
	dd.files[i] = f
	return f
}

// walk indexes the entries of unit id once, reading its line table and
// recording its subprograms, the inlined subroutines with code inside
// them and their call sites, and, for names and declarations, the
// subprograms of other units its entries refer to (dwz's partial units,
// LTO). It returns what the index holds against the image's limits, and
// stop when a limit tripped (no more units are indexed then).
func (idx *dwarfIndex) walk(dd *dwarfData, id int) (used budget, stop bool, err error) {
	w := &walker{
		d:          dd.d,
		dd:         dd,
		line:       dd.line,
		valid:      dd.valid,
		idx:        idx,
		base:       dd.used,
		fileIDs:    make(map[string]uint32),
		subs:       make(map[dwarf.Offset]*subInfo),
		inlOrigins: make(map[dwarf.Offset]dwarf.Offset),
	}
	r := dd.d.Reader()
	r.Seek(dd.units[id].entry.Offset)
	var next dwarf.Offset // the next unit's first entry, 0 for none listed
	if id+1 < len(dd.units) {
		next = dd.units[id+1].entry.Offset
	}
	depth := 0
	for n := uint64(0); ; n++ {
		if n > dd.infoSize {
			w.errs = append(w.errs, errStuckEntries(dd.infoSize))
			w.sitesIncomplete = true
			break
		}
		e, err := r.Next()
		if err != nil {
			w.errs = append(w.errs, fmt.Errorf("reading entries: %w", err))
			w.sitesIncomplete = true
			break
		}
		if e == nil {
			break
		}
		if n > 0 && (depth <= 0 || e.Tag == dwarf.TagCompileUnit || e.Tag == dwarf.TagPartialUnit || (next != 0 && e.Offset >= next)) {
			// The next unit: a unit whose entries do not close is
			// not read past its end.
			break
		}
		if e.Tag == 0 {
			w.pop()
			depth--
			if depth <= 0 {
				break
			}
			continue
		}
		sc, halt := w.entry(e)
		if halt {
			w.sitesIncomplete = true
			stop = true
			break
		}
		if e.Children {
			w.push(sc)
			depth++
		}
	}
	if !stop {
		w.importForeign()
	}
	idx.funcs = make([]funcInfo, len(w.concrete))
	for i, off := range w.concrete {
		idx.funcs[i] = resolveSub(w.subs, off)
		idx.funcs[i].entry = w.subs[off].entry
	}
	idx.spans = flatten(w.ivs)
	for i := range idx.inl {
		n := &idx.inl[i]
		if n.hasOrigin {
			n.name = resolveName(w.subs, w.inlOrigins, n.origin)
		}
	}
	idx.inlSpans = flatten(w.inlIvs)
	w.finishCallSites(dd.sym)
	// Subprograms read from other units are not counted: each unit reads
	// at most a few per reference of its own, so they are bounded by its
	// size, and counting them for every unit that refers to the same
	// shared ones (dwz) would exhaust the image's budget.
	used = budget{rows: len(idx.rows), subs: len(w.subs) - w.foreignSubs, ranges: len(w.ivs), inlines: w.inlCount, inlRanges: len(w.inlIvs), sites: len(w.sites)}
	if len(w.errs) > 0 {
		err = errors.Join(w.errs...)
	}
	return used, stop, err
}

// importForeign reads the subprograms of other units that this unit's
// entries refer to (abstract origins, specifications, call targets) and
// their own origins, so that names and declarations resolve as if the
// whole DWARF had been walked.
func (w *walker) importForeign() {
	var pending []dwarf.Offset
	for _, s := range w.subs {
		if s.hasOrigin {
			pending = append(pending, s.origin)
		}
	}
	for i := range w.idx.inl {
		if n := &w.idx.inl[i]; n.hasOrigin {
			pending = append(pending, n.origin)
		}
	}
	for _, o := range w.inlOrigins {
		pending = append(pending, o)
	}
	for _, s := range w.sites {
		if s.byDIE {
			pending = append(pending, dwarf.Offset(s.target))
		}
	}
	tried := map[dwarf.Offset]bool{}
	for depth := 0; depth <= maxOriginDepth && len(pending) > 0; depth++ {
		var next []dwarf.Offset
		for _, off := range pending {
			if tried[off] || w.subs[off] != nil {
				continue
			}
			if _, ok := w.inlOrigins[off]; ok {
				continue
			}
			tried[off] = true
			if len(w.subs) >= MaxSubprograms {
				return
			}
			s := w.foreign(off)
			if s == nil {
				continue
			}
			w.subs[off] = s
			w.foreignSubs++
			if s.hasOrigin {
				next = append(next, s.origin)
			}
		}
		pending = next
	}
}

// foreign reads the subprogram entry at off, of another unit; nil when it
// is no subprogram or cannot be read.
func (w *walker) foreign(off dwarf.Offset) *subInfo {
	r := w.d.Reader()
	r.Seek(off)
	e, err := r.Next()
	if err != nil || e == nil || e.Offset != off || e.Tag != dwarf.TagSubprogram {
		return nil
	}
	uf := w.dd.filesOf(off)
	s := subInfoOf(e, uf.files, uf.compDir)
	return &s
}

// debugInfoSize returns the (uncompressed) size of the image's
// .debug_info section. Every entry takes at least one byte of it, so a
// reader that returns more entries is stuck: debug/dwarf's Reader.Next
// returns null entries forever, without advancing, at a LEB128 number
// that the end of a unit cuts off (golang/go#79586).
//
// It is found once: opening a .zdebug section sets its uncompressed size,
// which other readers of the section then see.
func (im *Image) debugInfoSize() uint64 {
	im.infoOnce.Do(func() {
		for _, s := range im.ef.Sections {
			if (s.Name == ".debug_info" || s.Name == ".zdebug_info") && s.Type != elf.SHT_NOBITS {
				guard(func() error { s.Open(); return nil })
				im.infoSize = s.Size
				return
			}
		}
	})
	return im.infoSize
}

// lineSection is the contents of a .debug_line section and the byte
// order of its file.
type lineSection struct {
	data  []byte
	order binary.ByteOrder
}

// debugLine returns the image's .debug_line section (no data when it has
// none or it cannot be read).
func (im *Image) debugLine() lineSection {
	ls := lineSection{order: binary.LittleEndian}
	if im.ef.ByteOrder != nil {
		ls.order = im.ef.ByteOrder
	}
	for _, s := range im.ef.Sections {
		if (s.Name == ".debug_line" || s.Name == ".zdebug_line") && s.Type != elf.SHT_NOBITS && s.Size <= MaxDebugSectionBytes {
			guard(func() error {
				var err error
				if ls.data, err = s.Data(); err != nil {
					ls.data = nil
				}
				return nil
			})
			break
		}
	}
	return ls
}

// errStuckEntries is the error of a walk over the entries of a
// .debug_info of infoSize bytes that returned more entries than bytes.
func errStuckEntries(infoSize uint64) error {
	return fmt.Errorf("reading entries: more entries than the %d bytes of .debug_info (a malformed entry at the end of a unit)", infoSize)
}

// walker is the state of one walk over the entries of a DWARF image.
type walker struct {
	d     *dwarf.Data
	dd    *dwarfData
	line  lineSection
	valid func(uint64) bool
	idx   *dwarfIndex
	// base is what the units indexed before hold, against the limits.
	base budget
	// foreignSubs counts the subprograms read from other units.
	foreignSubs int

	// fileIDs interns full file paths into idx.files; unitFiles maps
	// the file entries of the current unit's line table to their ids.
	fileIDs   map[string]uint32
	unitFiles map[*dwarf.LineFile]uint32
	files     []*dwarf.LineFile // file entries of the current unit
	compDir   string

	subs       map[dwarf.Offset]*subInfo
	concrete   []dwarf.Offset // subprograms with code, by funcs index
	ivs        []interval     // subprogram ranges, ids index funcs
	inlOrigins map[dwarf.Offset]dwarf.Offset
	inlCount   int        // inlined subroutine entries seen
	inlIvs     []interval // inlined subroutine ranges, ids index idx.inl
	inlStopped bool       // a limit tripped: no more inlined subroutines

	// stack holds the scope of every open entry with children, up to
	// maxTreeDepth; deep counts the open entries beyond.
	stack    []scope
	deep     int
	deepErr  bool
	chainErr bool

	// sites are the call sites read; sitesIncomplete is set when one
	// was missed (a limit, entries too deep, a walk ended early).
	sites           []rawSite
	sitesIncomplete bool

	errs []error
}

// scope is what the children of an entry are inside of.
type scope struct {
	fn  int32 // funcs index of the enclosing concrete subprogram, or -1
	inl int32 // idx.inl index of the enclosing inlined subroutine, or -1 (none) or noInline
}

// noInline marks a scope whose inlined subroutines are not recorded: an
// enclosing inlined subroutine was not recorded, so their chain would be
// wrong.
const noInline = -2

// maxTreeDepth bounds how many nested entries are tracked; inlined
// subroutines nested deeper are not recorded.
const maxTreeDepth = 1024

var outside = scope{fn: -1, inl: -1}

func (w *walker) top() scope {
	if w.deep > 0 {
		return scope{fn: -1, inl: noInline}
	}
	if len(w.stack) == 0 {
		return outside
	}
	return w.stack[len(w.stack)-1]
}

func (w *walker) push(sc scope) {
	if w.deep > 0 || len(w.stack) >= maxTreeDepth {
		w.deep++
		if !w.deepErr {
			w.deepErr = true
			w.errs = append(w.errs, fmt.Errorf("entries nested more than %d deep: inlined subroutines below are not indexed", maxTreeDepth))
		}
		return
	}
	w.stack = append(w.stack, sc)
}

func (w *walker) pop() {
	if w.deep > 0 {
		w.deep--
		return
	}
	if len(w.stack) > 0 {
		w.stack = w.stack[:len(w.stack)-1]
	}
}

// entry records one entry and returns the scope of its children. stop
// is set when a limit ends the walk.
func (w *walker) entry(e *dwarf.Entry) (sc scope, stop bool) {
	switch e.Tag {
	case dwarf.TagCompileUnit, dwarf.TagPartialUnit:
		// A unit starts at the top, whatever a malformed previous
		// unit left open.
		w.stack, w.deep = w.stack[:0], 0
		return outside, !w.unit(e)
	case dwarf.TagSubprogram:
		id, ok := w.subprogram(e)
		if !ok {
			return outside, true
		}
		return scope{fn: id, inl: -1}, false
	case dwarf.TagInlinedSubroutine:
		cur := w.top()
		return scope{fn: cur.fn, inl: w.inlined(e, cur)}, false
	case dwarf.TagCallSite, tagGNUCallSite:
		w.callSite(e, w.top())
	}
	return w.top(), false
}

// unit starts a compile or partial unit: its directory and line table.
// It returns false when MaxLineRows is exceeded, which ends the walk.
func (w *walker) unit(e *dwarf.Entry) bool {
	w.files, w.unitFiles = nil, make(map[*dwarf.LineFile]uint32)
	w.compDir, _ = e.Val(dwarf.AttrCompDir).(string)
	if off, ok := e.Val(dwarf.AttrStmtList).(int64); ok && off >= 0 {
		if err := checkLineHeader(w.line.data, w.line.order, uint64(off)); err != nil {
			w.errs = append(w.errs, fmt.Errorf("line table of unit at %#x: %w", e.Offset, err))
			return true
		}
	}
	lr, err := w.d.LineReader(e)
	if err != nil {
		w.errs = append(w.errs, fmt.Errorf("line table of unit at %#x: %w", e.Offset, err))
		return true
	}
	if lr == nil {
		return true
	}
	w.files = lr.Files()
	if err := w.addLines(lr); err != nil {
		w.errs = append(w.errs, fmt.Errorf("line table of unit at %#x: %w", e.Offset, err))
		if errors.Is(err, errTooManyRows) {
			return false
		}
	}
	return true
}

// fileID returns the id in idx.files of a file entry of the current
// unit's line table.
func (w *walker) fileID(f *dwarf.LineFile) uint32 {
	if id, ok := w.unitFiles[f]; ok {
		return id
	}
	full := fullPath(w.compDir, f.Name)
	id, ok := w.fileIDs[full]
	if !ok {
		id = uint32(len(w.idx.files))
		w.idx.files = append(w.idx.files, full)
		w.fileIDs[full] = id
	}
	w.unitFiles[f] = id
	return id
}

// subprogram records a DW_TAG_subprogram and returns its funcs index, or
// -1 when it has no code. ok is false when MaxSubprograms or
// MaxSubprogramRanges is exceeded.
func (w *walker) subprogram(e *dwarf.Entry) (id int32, ok bool) {
	if w.base.subs+len(w.subs) >= MaxSubprograms {
		w.errs = append(w.errs, fmt.Errorf("more than %d subprograms (limit MaxSubprograms)", MaxSubprograms))
		return -1, false
	}
	si := subInfoOf(e, w.files, w.compDir)
	s := &si
	w.subs[e.Offset] = s
	rs, err := w.d.Ranges(e)
	if err != nil {
		return -1, true
	}
	id = -1
	for _, rg := range rs {
		if rg[0] >= rg[1] || !w.valid(rg[0]) {
			continue
		}
		if w.base.ranges+len(w.ivs) >= maxSubprogramRanges {
			w.errs = append(w.errs, fmt.Errorf("more than %d ranges of subprograms (limit MaxSubprogramRanges)", maxSubprogramRanges))
			return -1, false
		}
		if id < 0 {
			id = int32(len(w.concrete))
			w.concrete = append(w.concrete, e.Offset)
			// The entry is the start of the first range listed
			// (DW_AT_low_pc, or the first of DW_AT_ranges), unless
			// DW_AT_entry_pc says otherwise.
			s.fn, s.entry = id, rg[0]
		}
		w.ivs = append(w.ivs, interval{lo: rg[0], hi: rg[1], id: int(id)})
	}
	if id >= 0 {
		if f := e.AttrField(dwarf.AttrEntrypc); f != nil {
			switch v := f.Val.(type) {
			case uint64:
				if f.Class == dwarf.ClassAddress && w.valid(v) {
					s.entry = v
				}
			case int64:
				// DWARF 5: an offset from the base address, the
				// entry's DW_AT_low_pc.
				if lo, ok := e.Val(dwarf.AttrLowpc).(uint64); ok && v >= 0 && w.valid(lo+uint64(v)) {
					s.entry = lo + uint64(v)
				}
			}
		}
	}
	return id, true
}

// subInfoOf reads what is recorded of a DW_TAG_subprogram; files and
// compDir are those of its unit's line table.
func subInfoOf(e *dwarf.Entry, files []*dwarf.LineFile, compDir string) subInfo {
	s := subInfo{fn: -1}
	s.name, _ = e.Val(dwarf.AttrName).(string)
	s.linkage, _ = e.Val(dwarf.AttrLinkageName).(string)
	if s.linkage == "" {
		s.linkage, _ = e.Val(attrMIPSLinkageName).(string)
	}
	s.external, _ = e.Val(dwarf.AttrExternal).(bool)
	if i, ok := e.Val(dwarf.AttrDeclFile).(int64); ok && i >= 0 && i < int64(len(files)) && files[i] != nil {
		s.file = fullPath(compDir, files[i].Name)
	}
	if l, ok := e.Val(dwarf.AttrDeclLine).(int64); ok && l > 0 && l <= 1<<31 {
		s.line = int(l)
	}
	if o, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset); ok {
		s.origin, s.hasOrigin = o, true
	} else if o, ok := e.Val(dwarf.AttrSpecification).(dwarf.Offset); ok {
		s.origin, s.hasOrigin = o, true
	}
	return s
}

// resolveSub fills in a subprogram's missing name and declaration from
// the entries its abstract origin or specification chain refers to.
func resolveSub(subs map[dwarf.Offset]*subInfo, off dwarf.Offset) funcInfo {
	var f funcInfo
	for depth := 0; depth <= maxOriginDepth; depth++ {
		s := subs[off]
		if s == nil {
			break
		}
		if f.name == "" {
			f.name = s.name
		}
		if f.file == "" && f.line == 0 {
			f.file, f.line = s.file, s.line
		}
		if !s.hasOrigin || (f.name != "" && (f.file != "" || f.line != 0)) {
			break
		}
		off = s.origin
	}
	return f
}

// fullPath makes a relative file name of a line table absolute. DWARF 5
// directory entries other than the first are relative to the compilation
// directory, which debug/dwarf does not apply.
func fullPath(compDir, name string) string {
	if name == "" || path.IsAbs(name) || compDir == "" {
		return name
	}
	return path.Join(compDir, name)
}

// addLines appends the rows of one line table. A sequence is kept only
// when it covers some addresses and starts inside an executable segment.
func (w *walker) addLines(lr *dwarf.LineReader) error {
	idx := w.idx
	var seq []lineRow
	var le dwarf.LineEntry
	for {
		err := lr.Next(&le)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		row := lineRow{addr: le.Address, end: le.EndSequence}
		if le.Line > 0 && le.Line <= 1<<31 {
			row.line = uint32(le.Line)
		}
		if le.File != nil {
			row.file = w.fileID(le.File)
		}
		if row.end {
			// Rows at the end address cover nothing; kept, they
			// would outlast the end row, which sorts first.
			for len(seq) > 0 && seq[len(seq)-1].addr == row.addr {
				seq = seq[:len(seq)-1]
			}
		}
		seq = append(seq, row)
		if w.base.rows+len(idx.rows)+len(seq) > MaxLineRows {
			return errTooManyRows
		}
		if le.EndSequence {
			if len(seq) > 1 && w.valid(seq[0].addr) {
				idx.rows = append(idx.rows, seq...)
			}
			seq = seq[:0]
		}
	}
}
