package llvm_test

// A synthetic target for the OMPD layer's tests: a sparse memory image, a
// symbol table, and a layout engine that places libomp's runtime objects
// the way a compiler would for a chosen set of layout parameters, then
// publishes the resulting sizes, offsets and bit masks as the runtime's
// ompd_sizeof__* / ompd_access__* / ompd_bitfield__* symbols. The same
// scenario built with different parameters must give the same answers:
// that is what proves nothing about the layout is compiled into ompd/.

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// ---------------------------------------------------------------------------
// Memory image and callbacks.

const pageSize = 4096

type span struct{ addr, n uint64 }

// image is a sparse little-endian memory image: only written pages exist;
// a read touching any other page, or a denied range, fails.
type image struct {
	pages  map[uint64][]byte
	denied []span
}

func newImage() *image { return &image{pages: map[uint64][]byte{}} }

func (im *image) write(addr uint64, b []byte) {
	for len(b) > 0 {
		pg := addr &^ (pageSize - 1)
		p, ok := im.pages[pg]
		if !ok {
			p = make([]byte, pageSize)
			im.pages[pg] = p
		}
		n := copy(p[addr-pg:], b)
		b = b[n:]
		addr += uint64(n)
	}
}

// mapZero maps the pages of [addr, addr+n) that are not mapped yet,
// zero-filled.
func (im *image) mapZero(addr, n uint64) {
	for pg := addr &^ (pageSize - 1); pg < addr+n; pg += pageSize {
		if _, ok := im.pages[pg]; !ok {
			im.pages[pg] = make([]byte, pageSize)
		}
	}
}

func (im *image) read(addr uint64, buf []byte) error {
	if addr+uint64(len(buf)) < addr {
		return fmt.Errorf("read of %d bytes at %#x wraps around", len(buf), addr)
	}
	for _, d := range im.denied {
		if addr < d.addr+d.n && d.addr < addr+uint64(len(buf)) {
			return fmt.Errorf("input/output error reading %d bytes at %#x", len(buf), addr)
		}
	}
	for len(buf) > 0 {
		pg := addr &^ (pageSize - 1)
		p, ok := im.pages[pg]
		if !ok {
			return fmt.Errorf("address %#x is not mapped", addr)
		}
		n := copy(buf, p[addr-pg:])
		buf = buf[n:]
		addr += uint64(n)
	}
	return nil
}

func (im *image) clone() *image {
	c := &image{pages: make(map[uint64][]byte, len(im.pages)), denied: slices.Clone(im.denied)}
	for k, v := range im.pages {
		c.pages[k] = slices.Clone(v)
	}
	return c
}

// fakeCtx is the thread context the fake hands out.
type fakeCtx struct {
	kind ompd.ThreadIDKind
	id   uint64
}

// fakeTarget implements ompd.Callbacks over an image and a symbol table.
// It records what the OMPD layer asked for.
type fakeTarget struct {
	mem      *image
	syms     map[string]uint64
	sizes    ompd.TypeSizes
	sizesErr error
	ctxErr   error

	mu         sync.Mutex
	asked      map[string]int   // symbol name -> lookups
	hints      map[string]int   // fileHint -> lookups
	maxStrings []int            // the max of every ReadString
	prefetched [][]ompd.Address // the lists given to Prefetch
}

// Prefetch records what it is given (ompd.Prefetcher).
func (f *fakeTarget) Prefetch(addrs []ompd.Address) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prefetched = append(f.prefetched, append([]ompd.Address(nil), addrs...))
}

func newFakeTarget(sizes ompd.TypeSizes) *fakeTarget {
	return &fakeTarget{mem: newImage(), syms: map[string]uint64{}, sizes: sizes,
		asked: map[string]int{}, hints: map[string]int{}}
}

func (f *fakeTarget) SymbolAddr(name, hint string) (ompd.Address, error) {
	f.mu.Lock()
	f.asked[name]++
	f.hints[hint]++
	f.mu.Unlock()
	a, ok := f.syms[name]
	if !ok {
		return 0, fmt.Errorf("symbol %s not found in %s", name, hint)
	}
	return a, nil
}

func (f *fakeTarget) ReadMemory(addr ompd.Address, buf []byte) error { return f.mem.read(addr, buf) }

func (f *fakeTarget) ReadString(addr ompd.Address, max int) (string, error) {
	f.mu.Lock()
	f.maxStrings = append(f.maxStrings, max)
	f.mu.Unlock()
	var out []byte
	var b [1]byte
	for len(out) < max {
		if err := f.mem.read(addr+uint64(len(out)), b[:]); err != nil {
			return "", err
		}
		if b[0] == 0 {
			return string(out), nil
		}
		out = append(out, b[0])
	}
	return "", fmt.Errorf("string at %#x has no terminating NUL within %d bytes", addr, max)
}

func (f *fakeTarget) Sizes() (ompd.TypeSizes, error) { return f.sizes, f.sizesErr }

func (f *fakeTarget) ThreadContext(kind ompd.ThreadIDKind, id uint64) (ompd.ThreadContext, error) {
	if f.ctxErr != nil {
		return nil, f.ctxErr
	}
	return fakeCtx{kind, id}, nil
}

// dwarfTarget adds ompd.TypeLayouts (what the runtime's DWARF would give)
// to a fakeTarget. A bare *fakeTarget does not implement it.
type dwarfTarget struct {
	*fakeTarget
	lay *layout
}

func (d dwarfTarget) TypeSize(typ string) (uint64, error) {
	tl, ok := d.lay.types[typ]
	if !ok {
		return 0, fmt.Errorf("no DWARF type %s", typ)
	}
	return tl.size, nil
}

func (d dwarfTarget) FieldLayout(typ, field string) (uint64, uint64, error) {
	tl, ok := d.lay.types[typ]
	if !ok {
		return 0, 0, fmt.Errorf("no DWARF type %s", typ)
	}
	fl, ok := tl.fields[field]
	if !ok {
		return 0, 0, fmt.Errorf("DWARF type %s has no member %s", typ, field)
	}
	return fl.off, fl.size, nil
}

var (
	_ ompd.Callbacks   = (*fakeTarget)(nil)
	_ ompd.TypeLayouts = dwarfTarget{}
)

// ---------------------------------------------------------------------------
// The runtime's types, as a schema the layout engine places.

type kind int

const (
	kPtr    kind = iota // any pointer
	kInt                // C int, kmp_int32, enums
	kInt8               // kmp_int8
	kU64                // 64-bit integer (ompt_wait_id_t, ompt_data_t.value)
	kSizeT              // size_t, pthread_t: pointer-sized integer
	kFlags              // the kmp_tasking_flags_t bit word
	kStruct             // an embedded struct or union
	kPad                // bytes the OMPD layer never reads
)

type fieldDef struct {
	name string
	k    kind
	typ  string // kStruct
	n    int    // kPad
}

type typeDef struct {
	union bool // every member at offset 0
	// wrapper marks the unions whose member offset the runtime publishes
	// (kmp_info_t.th, kmp_team_p.t, kmp_desc_t.ds, kmp_root_t.r): a layout
	// with a header moves the member to prove the offset is read.
	wrapper bool
	fields  []fieldDef
}

func f(name string, k kind) fieldDef   { return fieldDef{name: name, k: k} }
func sub(name, typ string) fieldDef    { return fieldDef{name: name, k: kStruct, typ: typ} }
func pad(name string, n int) fieldDef  { return fieldDef{name: name, k: kPad, n: n} }
func fields(fs ...fieldDef) []fieldDef { return fs }
func union(fs ...fieldDef) typeDef     { return typeDef{union: true, fields: fs} }
func wrapper(fs ...fieldDef) typeDef   { return typeDef{union: true, wrapper: true, fields: fs} }
func strct(fs ...fieldDef) typeDef     { return typeDef{fields: fs} }
func alignUp(v, a uint64) uint64       { return (v + a - 1) / a * a }
func le(size uint64, v uint64) []byte  { b := binary.LittleEndian.AppendUint64(nil, v); return b[:size] }
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// schema follows kmp.h / ompt-internal.h of LLVM 19 closely enough; the
// pads stand for the many members OMPD never reads.
var schema = map[string]typeDef{
	"ompt_data_t":  union(f("value", kU64), f("ptr", kPtr)),
	"ompt_frame_t": strct(sub("exit_frame", "ompt_data_t"), sub("enter_frame", "ompt_data_t"), f("exit_frame_flags", kInt), f("enter_frame_flags", kInt)),
	"ompt_task_info_t": strct(sub("frame", "ompt_frame_t"), sub("task_data", "ompt_data_t"),
		f("scheduling_parent", kPtr), f("thread_num", kInt), pad("dispatch_chunk", 16)),
	"ompt_team_info_t": strct(sub("parallel_data", "ompt_data_t"), f("master_return_address", kPtr)),
	"ompt_lw_taskteam_t": strct(sub("ompt_team_info", "ompt_team_info_t"), sub("ompt_task_info", "ompt_task_info_t"),
		f("heap", kInt), f("parent", kPtr)),
	"ompt_thread_info_t": strct(sub("thread_data", "ompt_data_t"), sub("task_data", "ompt_data_t"), sub("target_task_data", "ompt_data_t"),
		f("return_address", kPtr), f("state", kInt), f("wait_id", kU64), f("ompt_task_yielded", kInt), f("parallel_flags", kInt), f("idle_frame", kPtr)),

	"kmp_desc_base_t": strct(f("ds_stackbase", kPtr), f("ds_stacksize", kSizeT), f("ds_stackgrow", kInt),
		f("ds_thread", kSizeT), f("ds_tid", kInt), f("ds_gtid", kInt)),
	"kmp_desc_t": wrapper(sub("ds", "kmp_desc_base_t"), pad("ds_pad", 128)),
	"kmp_base_info_t": strct(sub("th_info", "kmp_desc_t"), f("th_team", kPtr), f("th_root", kPtr), f("th_next_pool", kPtr),
		f("th_dispatch", kPtr), pad("th_misc", 64), f("th_current_task", kPtr), f("th_task_team", kPtr), pad("th_bar", 32),
		sub("ompt_thread_info", "ompt_thread_info_t"), pad("th_tail", 16)),
	"kmp_info_t": wrapper(sub("th", "kmp_base_info_t"), pad("th_pad", 64)),

	"kmp_r_sched_t": strct(f("r_sched_type", kInt), f("chunk", kInt)),
	"kmp_internal_control_t": strct(f("serial_nesting_level", kInt), f("dynamic", kInt8), f("bt_set", kInt8), f("blocktime", kInt),
		f("nproc", kInt), f("thread_limit", kInt), f("task_thread_limit", kInt), f("max_active_levels", kInt),
		sub("sched", "kmp_r_sched_t"), f("proc_bind", kInt), f("default_device", kInt), f("next", kPtr)),
	"kmp_tasking_flags_t": union(f("bits", kFlags)), // one bit word: no padding
	"kmp_taskdata_t": strct(f("td_task_id", kInt), sub("td_flags", "kmp_tasking_flags_t"), f("td_team", kPtr), f("td_alloc_thread", kPtr),
		f("td_parent", kPtr), f("td_level", kInt), f("td_untied_count", kInt), f("td_ident", kPtr), pad("td_misc", 16),
		f("td_depnode", kPtr),
		sub("td_icvs", "kmp_internal_control_t"), pad("td_more", 24), sub("ompt_task_info", "ompt_task_info_t"), pad("td_tail", 8)),
	"kmp_task_t": strct(f("shareds", kPtr), f("routine", kPtr), f("part_id", kInt), pad("data", 16)),

	"kmp_base_team_t": strct(pad("t_head", 16), f("t_pkfn", kPtr), f("t_ident", kPtr), f("t_parent", kPtr), f("t_threads", kPtr),
		f("t_nproc", kInt), f("t_master_tid", kInt), f("t_level", kInt), f("t_active_level", kInt),
		f("t_implicit_task_taskdata", kPtr), sub("ompt_team_info", "ompt_team_info_t"), f("ompt_serialized_team_info", kPtr), pad("t_tail", 32)),
	"kmp_team_p":      wrapper(sub("t", "kmp_base_team_t"), pad("t_pad", 64)),
	"kmp_base_root_t": strct(f("r_in_parallel", kInt), pad("r_rest", 8)),
	"kmp_root_t":      wrapper(sub("r", "kmp_base_root_t")),

	"kmp_nested_nthreads_t":  strct(f("nth", kPtr), f("size", kInt), f("used", kInt)),
	"kmp_nested_proc_bind_t": strct(f("bind_types", kPtr), f("size", kInt), f("used", kInt)),

	// Only in DWARF (ompd.TypeLayouts), not published by OMPD.
	"ident_t":              strct(f("reserved_1", kInt), f("flags", kInt), f("reserved_2", kInt), f("reserved_3", kInt), f("psource", kPtr)),
	"kmp_base_task_team_t": strct(pad("tt_head", 16), f("tt_threads_data", kPtr), pad("tt_mid", 8), f("tt_nproc", kInt), f("tt_max_threads", kInt)),
	"kmp_task_team_t":      union(sub("tt", "kmp_base_task_team_t"), pad("tt_pad", 64)),
	"kmp_base_thread_data_t": strct(pad("td_deque_lock", 8), f("td_deque", kPtr), f("td_deque_size", kInt), f("td_deque_head", kInt),
		f("td_deque_tail", kInt), f("td_deque_ntasks", kInt)),
	"kmp_thread_data_t": union(sub("td", "kmp_base_thread_data_t"), pad("td_pad", 128)),
	"kmp_base_depnode_t": strct(f("successors", kPtr), f("task", kPtr), pad("mtx_locks", 32), f("mtx_num_locks", kInt),
		pad("lock", 8), f("npredecessors", kInt), f("nrefs", kInt)),
	"kmp_depnode_t":      wrapper(sub("dn", "kmp_base_depnode_t"), pad("dn_pad", 64)),
	"kmp_depnode_list_t": strct(f("node", kPtr), f("next", kPtr)),
}

// accessList is OMPD_FOREACH_ACCESS of LLVM 19's ompd-specific.h: the
// runtime publishes ompd_access__T__F and ompd_sizeof__T__F for exactly
// these, and the fake publishes nothing else.
var accessList = [][2]string{
	{"kmp_base_info_t", "th_current_task"}, {"kmp_base_info_t", "th_team"}, {"kmp_base_info_t", "th_info"}, {"kmp_base_info_t", "ompt_thread_info"},
	{"kmp_base_root_t", "r_in_parallel"},
	{"kmp_base_team_t", "ompt_team_info"}, {"kmp_base_team_t", "ompt_serialized_team_info"}, {"kmp_base_team_t", "t_active_level"},
	{"kmp_base_team_t", "t_implicit_task_taskdata"}, {"kmp_base_team_t", "t_master_tid"}, {"kmp_base_team_t", "t_nproc"},
	{"kmp_base_team_t", "t_level"}, {"kmp_base_team_t", "t_parent"}, {"kmp_base_team_t", "t_pkfn"}, {"kmp_base_team_t", "t_threads"},
	{"kmp_desc_t", "ds"},
	{"kmp_desc_base_t", "ds_thread"}, {"kmp_desc_base_t", "ds_tid"},
	{"kmp_info_t", "th"},
	{"kmp_r_sched_t", "r_sched_type"}, {"kmp_r_sched_t", "chunk"},
	{"kmp_root_t", "r"},
	{"kmp_internal_control_t", "dynamic"}, {"kmp_internal_control_t", "max_active_levels"}, {"kmp_internal_control_t", "nproc"},
	{"kmp_internal_control_t", "proc_bind"}, {"kmp_internal_control_t", "sched"}, {"kmp_internal_control_t", "default_device"},
	{"kmp_internal_control_t", "thread_limit"},
	{"kmp_taskdata_t", "ompt_task_info"}, {"kmp_taskdata_t", "td_flags"}, {"kmp_taskdata_t", "td_icvs"}, {"kmp_taskdata_t", "td_parent"},
	{"kmp_taskdata_t", "td_team"},
	{"kmp_task_t", "routine"},
	{"kmp_team_p", "t"},
	{"kmp_nested_nthreads_t", "used"}, {"kmp_nested_nthreads_t", "nth"},
	{"kmp_nested_proc_bind_t", "used"}, {"kmp_nested_proc_bind_t", "bind_types"},
	{"ompt_task_info_t", "frame"}, {"ompt_task_info_t", "scheduling_parent"}, {"ompt_task_info_t", "task_data"},
	{"ompt_team_info_t", "parallel_data"},
	{"ompt_thread_info_t", "state"}, {"ompt_thread_info_t", "wait_id"}, {"ompt_thread_info_t", "thread_data"},
	{"ompt_data_t", "value"}, {"ompt_data_t", "ptr"},
	{"ompt_frame_t", "exit_frame"}, {"ompt_frame_t", "enter_frame"},
	{"ompt_lw_taskteam_t", "parent"}, {"ompt_lw_taskteam_t", "ompt_team_info"}, {"ompt_lw_taskteam_t", "ompt_task_info"},
}

// llvmFlagBits is OMPD_FOREACH_BITFIELD, with the bit LLVM gives each
// flag on a little-endian target.
var llvmFlagBits = map[string]uint{
	"tiedness": 0, "final": 1, "tasktype": 16, "task_serial": 17, "tasking_ser": 18, "team_serial": 19,
	"started": 20, "executing": 21, "complete": 22, "freed": 23, "native": 24,
}

// icvGlobals are the runtime globals of OMPD_FOREACH_SIZEOF whose size a
// layout chooses (ompd_sizeof____kmp_x).
var icvGlobals = []string{"__kmp_avail_proc", "__kmp_max_nth", "__kmp_stksize", "__kmp_omp_cancellation",
	"__kmp_max_task_priority", "__kmp_display_affinity", "__kmp_tool"}

// ---------------------------------------------------------------------------
// Layouts.

type layoutParams struct {
	name      string
	sizes     ompd.TypeSizes
	intSize   int  // size of kInt members
	int8Size  int  // size of kInt8 members
	flagsSize int  // sizeof(kmp_tasking_flags_t)
	reverse   bool // struct members in reverse order
	pad       int  // padding before every struct member
	header    int  // offset of the member of a wrapper union
	flagBits  map[string]uint
	globals   map[string]int // sizes of icvGlobals
}

// The three layouts every scenario test runs with. A is LLVM's own on
// x86-64; B moves and widens everything; C is a 32-bit target.
var layouts = []layoutParams{
	{
		name:    "llvm-lp64",
		sizes:   ompd.TypeSizes{Char: 1, Short: 2, Int: 4, Long: 8, LongLong: 8, Pointer: 8},
		intSize: 4, int8Size: 1, flagsSize: 4,
		flagBits: llvmFlagBits,
		globals: map[string]int{"__kmp_avail_proc": 4, "__kmp_max_nth": 4, "__kmp_stksize": 8, "__kmp_omp_cancellation": 4,
			"__kmp_max_task_priority": 4, "__kmp_display_affinity": 4, "__kmp_tool": 4},
	},
	{
		name:    "shuffled-wide",
		sizes:   ompd.TypeSizes{Char: 1, Short: 2, Int: 4, Long: 8, LongLong: 8, Pointer: 8},
		intSize: 8, int8Size: 2, flagsSize: 8, reverse: true, pad: 8, header: 48,
		flagBits: map[string]uint{"tiedness": 40, "final": 33, "tasktype": 3, "task_serial": 62, "tasking_ser": 7,
			"team_serial": 12, "started": 50, "executing": 0, "complete": 21, "freed": 31, "native": 63},
		globals: map[string]int{"__kmp_avail_proc": 8, "__kmp_max_nth": 2, "__kmp_stksize": 8, "__kmp_omp_cancellation": 1,
			"__kmp_max_task_priority": 2, "__kmp_display_affinity": 1, "__kmp_tool": 8},
	},
	{
		name:    "ilp32",
		sizes:   ompd.TypeSizes{Char: 1, Short: 2, Int: 4, Long: 4, LongLong: 8, Pointer: 4},
		intSize: 4, int8Size: 1, flagsSize: 4, reverse: true, pad: 4, header: 12,
		flagBits: func() map[string]uint {
			m := map[string]uint{}
			for k, v := range llvmFlagBits {
				m[k] = 31 - v
			}
			return m
		}(),
		globals: map[string]int{"__kmp_avail_proc": 4, "__kmp_max_nth": 4, "__kmp_stksize": 4, "__kmp_omp_cancellation": 4,
			"__kmp_max_task_priority": 4, "__kmp_display_affinity": 4, "__kmp_tool": 4},
	},
}

type fieldLayout struct {
	off, size uint64
	k         kind
	typ       string
}

type typeLayout struct {
	size, align uint64
	fields      map[string]fieldLayout
}

type layout struct {
	p     layoutParams
	types map[string]*typeLayout
}

func newLayout(p layoutParams) *layout {
	l := &layout{p: p, types: map[string]*typeLayout{}}
	for _, name := range sortedKeys(schema) {
		l.resolve(name)
	}
	return l
}

func (l *layout) scalar(k kind) uint64 {
	switch k {
	case kPtr, kSizeT:
		return uint64(l.p.sizes.Pointer)
	case kInt:
		return uint64(l.p.intSize)
	case kInt8:
		return uint64(l.p.int8Size)
	case kU64:
		return 8
	case kFlags:
		return uint64(l.p.flagsSize)
	}
	panic(fmt.Sprintf("kind %d is not a scalar", k))
}

func (l *layout) resolve(name string) *typeLayout {
	if tl, ok := l.types[name]; ok {
		return tl
	}
	def, ok := schema[name]
	if !ok {
		panic("no type " + name)
	}
	tl := &typeLayout{align: 1, fields: map[string]fieldLayout{}}
	fs := slices.Clone(def.fields)
	if !def.union && l.p.reverse {
		slices.Reverse(fs)
	}
	var off, end uint64
	if def.wrapper {
		off = uint64(l.p.header)
	}
	for _, fd := range fs {
		var size, al uint64
		switch fd.k {
		case kStruct:
			s := l.resolve(fd.typ)
			size, al = s.size, s.align
		case kPad:
			size, al = uint64(fd.n), 1
		default:
			size = l.scalar(fd.k)
			al = min(size, 8)
		}
		fo := off
		if !def.union {
			fo = alignUp(off+uint64(l.p.pad), al)
			off = fo + size
		}
		tl.fields[fd.name] = fieldLayout{off: fo, size: size, k: fd.k, typ: fd.typ}
		tl.align = max(tl.align, al)
		end = max(end, fo+size)
	}
	tl.size = alignUp(end, tl.align)
	l.types[name] = tl
	return tl
}

func (l *layout) sizeof(typ string) uint64 { return l.resolve(typ).size }

// path returns the offset and size of a dotted member path in typ
// ("th.th_info.ds.ds_tid" in kmp_info_t).
func (l *layout) path(typ, path string) (uint64, uint64) {
	var off uint64
	var size uint64
	for _, name := range strings.Split(path, ".") {
		tl := l.resolve(typ)
		fl, ok := tl.fields[name]
		if !ok {
			panic(fmt.Sprintf("type %s has no member %s (path %s)", typ, name, path))
		}
		off += fl.off
		size = fl.size
		typ = fl.typ
	}
	return off, size
}

// ---------------------------------------------------------------------------
// Builder: lays out objects and symbols in the image.

const (
	dataBase = 0x00100000 // symbols
	heapBase = 0x01000000 // runtime objects
	hint     = "libomp.so.5"
)

type builder struct {
	t    testing.TB
	lay  *layout
	tgt  *fakeTarget
	heap uint64
	data uint64
}

func newBuilder(t testing.TB, p layoutParams) *builder {
	return &builder{t: t, lay: newLayout(p), tgt: newFakeTarget(p.sizes), heap: heapBase, data: dataBase}
}

func (b *builder) alloc(n uint64) uint64 {
	a := alignUp(b.heap, 64)
	b.heap = a + max(n, 1)
	b.tgt.mem.write(a, make([]byte, n))
	return a
}

// put writes the low size bytes of v.
func (b *builder) put(addr, size, v uint64) {
	if size == 0 || size > 8 {
		b.t.Fatalf("put of %d bytes at %#x", size, addr)
	}
	b.tgt.mem.write(addr, le(size, v))
}

func (b *builder) obj(typ string) uint64 { return b.alloc(b.lay.sizeof(typ)) }

func (b *builder) set(base uint64, typ, path string, v uint64) {
	off, size := b.lay.path(typ, path)
	b.put(base+off, size, v)
}

func (b *builder) addrOf(base uint64, typ, path string) uint64 {
	off, _ := b.lay.path(typ, path)
	return base + off
}

func (b *builder) ptr(addr, v uint64) { b.put(addr, uint64(b.lay.p.sizes.Pointer), v) }

// symbol defines a global of size bytes holding v.
func (b *builder) symbol(name string, size, v uint64) uint64 {
	a := alignUp(b.data, 8)
	b.data = a + max(size, 8)
	b.put(a, size, v)
	b.tgt.syms[name] = a
	return a
}

// symbolBytes defines a global holding data.
func (b *builder) symbolBytes(name string, data []byte) uint64 {
	a := alignUp(b.data, 8)
	b.data = a + max(uint64(len(data)), 8)
	b.tgt.mem.write(a, data)
	b.tgt.syms[name] = a
	return a
}

func (b *builder) cstring(s string) uint64 {
	a := b.alloc(uint64(len(s)) + 1)
	b.tgt.mem.write(a, append([]byte(s), 0))
	return a
}

func (b *builder) ptrArray(vals ...uint64) uint64 {
	ps := uint64(b.lay.p.sizes.Pointer)
	a := b.alloc(ps * uint64(max(len(vals), 1)))
	for i, v := range vals {
		b.ptr(a+uint64(i)*ps, v)
	}
	return a
}

func (b *builder) intArray(vals ...int64) uint64 {
	is := uint64(b.lay.p.sizes.Int)
	a := b.alloc(is * uint64(max(len(vals), 1)))
	for i, v := range vals {
		b.put(a+uint64(i)*is, is, uint64(v))
	}
	return a
}

// publish defines the runtime's OMPD layout symbols for the layout, as
// ompd_init() fills them in.
func (b *builder) publish() {
	for _, a := range accessList {
		off, size := b.lay.path(a[0], a[1])
		b.symbol("ompd_access__"+a[0]+"__"+a[1], 8, off)
		b.symbol("ompd_sizeof__"+a[0]+"__"+a[1], 8, size)
	}
	for _, name := range sortedKeys(llvmFlagBits) {
		b.symbol("ompd_bitfield__kmp_tasking_flags_t__"+name, 8, 1<<b.lay.p.flagBits[name])
	}
	p := b.lay.p
	for _, typ := range []string{"kmp_info_t", "kmp_taskdata_t", "kmp_task_t", "kmp_tasking_flags_t",
		"ompt_data_t", "kmp_nested_nthreads_t", "kmp_nested_proc_bind_t"} {
		b.symbol("ompd_sizeof__"+typ, 8, b.lay.sizeof(typ))
	}
	for _, g := range icvGlobals {
		b.symbol("ompd_sizeof__"+g, 8, uint64(p.globals[g]))
	}
	ps := uint64(p.sizes.Pointer)
	for name, v := range map[string]uint64{
		"kmp_thread_t": ps, "ompt_id_t": 8, "__kmp_affinity_format": ps, "__kmp_tool_libraries": ps,
		"__kmp_tool_verbose_init": ps, "ompd_state": 8, "__kmp_nested_nth": b.lay.sizeof("kmp_nested_nthreads_t"),
		"__kmp_nested_proc_bind": b.lay.sizeof("kmp_nested_proc_bind_t"), "int": uint64(p.sizes.Int), "char": 1,
		"__kmp_gtid": 4, "__kmp_nth": 4,
	} {
		b.symbol("ompd_sizeof__"+name, 8, v)
	}
}

// flagsWord composes a kmp_tasking_flags_t value from flag names.
func (b *builder) flagsWord(names ...string) uint64 {
	var v uint64
	for _, n := range names {
		bit, ok := b.lay.p.flagBits[n]
		if !ok {
			b.t.Fatalf("no flag %s", n)
		}
		v |= 1 << bit
	}
	return v
}

// ---------------------------------------------------------------------------
// Helpers.

// hangGuard bounds how long a call may take before the test says it
// loops. It is a guard against hanging the test binary, not a timing
// assertion: everything here returns in microseconds.
const hangGuard = 60 * time.Second

// within runs fn, failing the test if it panics or does not return.
func within(t testing.TB, what string, fn func()) {
	t.Helper()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		fn()
	}()
	select {
	case p := <-done:
		if p != nil {
			t.Fatalf("%s panicked: %v", what, p)
		}
	case <-time.After(hangGuard):
		t.Fatalf("%s did not return within %v: it loops", what, hangGuard)
	}
}

func wantErrContains(t testing.TB, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}

func wantRC(t testing.TB, err error, rc ompd.RC) {
	t.Helper()
	if got := ompd.RCOf(err); got != rc {
		t.Fatalf("got %v (error %v), want %v", got, err, rc)
	}
}

// result carries a (value, error) pair so that try(f()).must(t) can
// check it inline.
type result[T any] struct {
	v   T
	err error
}

func try[T any](v T, err error) result[T] { return result[T]{v, err} }

func (r result[T]) must(t testing.TB) T {
	t.Helper()
	if r.err != nil {
		t.Fatalf("unexpected error: %v", r.err)
	}
	return r.v
}

func hexs(v uint64) string { return fmt.Sprintf("%#x", v) }
