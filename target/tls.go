package target

// Thread-local storage on x86-64 Linux with glibc (TLS variant II: the
// thread pointer points at the TCB, and the static TLS blocks of the
// modules loaded at start-up lie just below it).
//
// A module's TLS block in a thread is found as libthread_db finds it:
//
//   - The module's struct link_map comes from the dynamic linker's list of
//     loaded objects (_r_debug.r_map, and the r_next chain of further
//     namespaces when r_version >= 2), matched by its load bias (l_addr).
//   - The offsets of the private link_map fields l_tls_offset and
//     l_tls_modid, of the DTV pointer in struct pthread, of the DTV's
//     entries and of the dynamic linker's slotinfo list are read from the
//     field descriptors glibc's libc.so.6 exports for libthread_db
//     (_thread_db_*: {size in bits, element count, offset in bytes}). None
//     of them is compiled in.
//   - A block in static TLS (l_tls_offset is a byte count) is at
//     TP - l_tls_offset. Otherwise (NO_TLS_OFFSET, FORCED_DYNAMIC_TLS_OFFSET)
//     the thread's DTV entry for the module's id holds the block, once the
//     thread has allocated it.

import (
	"errors"
	"fmt"
)

// ErrTLSNotAllocated is returned (wrapped) by TLSAddress and
// LookupTLSSymbol when a module's TLS block is dynamic (the module was
// loaded by dlopen and not placed in static TLS) and the thread has not
// allocated its copy yet: it has not accessed any of the module's
// thread-local variables. The block then does not exist in that thread.
var ErrTLSNotAllocated = errors.New("the thread has not allocated this TLS block yet")

// glibc's special values of link_map.l_tls_offset on TLS_TCB_AT_TP targets
// such as x86-64 (glibc's include/link.h: NO_TLS_OFFSET defaults to 0 and
// FORCED_DYNAMIC_TLS_OFFSET is then -1). Every other value is the distance
// from the thread pointer down to the module's static TLS block.
const (
	noTLSOffset            = 0
	forcedDynamicTLSOffset = -1
)

// Bounds of the walks through the dynamic linker's data structures.
const (
	// maxLinkMaps bounds the number of link_map entries read, over all
	// namespaces.
	maxLinkMaps = 4096
	// maxNamespaces bounds the r_debug_extended chain (glibc has
	// DL_NNS = 16 namespaces).
	maxNamespaces = 64
	// maxSlotinfoLists bounds the chain of dtv_slotinfo_list nodes.
	maxSlotinfoLists = 4096
	// maxPathLen bounds the l_name strings read.
	maxPathLen = 4096
)

// Layout of the public ABI structures of <link.h> on LP64.
const (
	rDebugVersion = 0  // int r_version
	rDebugMap     = 8  // struct link_map *r_map
	rDebugNext    = 40 // struct r_debug_extended *r_next (r_version >= 2)
	linkMapAddr   = 0  // ElfW(Addr) l_addr: the load bias
	linkMapName   = 8  // char *l_name
	linkMapNext   = 24 // struct link_map *l_next
)

// TLSAddress returns the address, in thread th, of byte offset of module
// m's TLS block: the address of a thread-local variable of m whose symbol
// value is offset. The module must have a PT_TLS segment and offset must
// lie inside it. When the module's block is dynamic and th has not
// allocated it yet, the error wraps ErrTLSNotAllocated.
//
// The target must use glibc on x86-64: the layout of glibc's private
// structures is read from the libthread_db descriptors its libc exports.
func TLSAddress(t Target, th *Thread, m *Module, offset uint64) (uint64, error) {
	addr, err := tlsAddress(t, th, m, offset)
	if err != nil {
		return 0, fmt.Errorf("TLS offset %#x of %s for thread %d: %w", offset, moduleName(m), threadID(th), err)
	}
	return addr, nil
}

// LookupTLSSymbol resolves symbol name as LookupSymbol does (module may be
// nil to search every module). For a thread-local symbol (Symbol.TLS) it
// returns the address of thread th's instance (see TLSAddress); for an
// ordinary symbol it returns the symbol's address, and th is not used
// (it may then be nil).
func LookupTLSSymbol(t Target, th *Thread, name string, module *Module) (uint64, error) {
	s, err := LookupSymbol(t, name, module)
	if err != nil {
		return 0, fmt.Errorf("TLS of %s for thread %d: %w", name, threadID(th), err)
	}
	if !s.TLS {
		return s.Addr, nil
	}
	addr, err := tlsAddress(t, th, s.Module, s.Addr)
	if err != nil {
		return 0, fmt.Errorf("TLS of %s for thread %d: %w", name, threadID(th), err)
	}
	return addr, nil
}

func moduleName(m *Module) string {
	if m == nil {
		return "<nil module>"
	}
	return m.Name
}

func threadID(th *Thread) int {
	if th == nil {
		return 0
	}
	return th.TID
}

// tlsAddress does the work of TLSAddress; its errors do not repeat the
// thread and the offset.
func tlsAddress(t Target, th *Thread, m *Module, offset uint64) (uint64, error) {
	if th == nil {
		return 0, errors.New("no thread given")
	}
	if m == nil {
		return 0, errors.New("no module given")
	}
	if m.Image == nil {
		return 0, fmt.Errorf("%s has no ELF image (its file was not found or did not match), so its PT_TLS segment is unknown", m.Name)
	}
	seg, ok := m.Image.TLS()
	if !ok {
		return 0, fmt.Errorf("%s has no PT_TLS segment: it defines no thread-local storage", m.Name)
	}
	if offset >= seg.Memsz {
		return 0, fmt.Errorf("offset %#x lies beyond the %d-byte TLS block of %s", offset, seg.Memsz, m.Name)
	}
	tp := th.ThreadPointer()
	if tp == 0 {
		return 0, errors.New("the thread pointer (fs_base) is 0: the thread has not set up its TLS")
	}

	lm, err := findLinkMap(t, m)
	if err != nil {
		return 0, fmt.Errorf("reading link_map of %s: %w", m.Name, err)
	}
	tlsOffDesc, err := readDesc(t, "link_map_l_tls_offset")
	if err != nil {
		return 0, err
	}
	raw, err := tlsOffDesc.read(t, lm, "l_tls_offset of "+m.Name)
	if err != nil {
		return 0, err
	}
	tlsOff := tlsOffDesc.signed(raw) // a ptrdiff_t
	switch {
	case tlsOff > 0:
		// Static TLS: the block lies below the thread pointer.
		if uint64(tlsOff) < seg.Memsz || uint64(tlsOff) > tp {
			return 0, fmt.Errorf("l_tls_offset %d of %s (link_map at %#x) does not fit a %d-byte block below thread pointer %#x", tlsOff, m.Name, lm, seg.Memsz, tp)
		}
		return tp - uint64(tlsOff) + offset, nil
	case tlsOff == noTLSOffset || tlsOff == forcedDynamicTLSOffset:
		base, err := dtvBlock(t, tp, lm, m)
		if err != nil {
			return 0, err
		}
		return base + offset, nil
	default:
		return 0, fmt.Errorf("l_tls_offset of %s (link_map at %#x) is %d: neither a static TLS offset nor glibc's NO_TLS_OFFSET (%d) or FORCED_DYNAMIC_TLS_OFFSET (%d)", m.Name, lm, tlsOff, noTLSOffset, forcedDynamicTLSOffset)
	}
}

// dtvBlock returns the address of the dynamic TLS block of the module
// whose link_map is at lm, in the thread whose thread pointer is tp, from
// the thread's dynamic thread vector (DTV), as libthread_db's
// td_thr_tlsbase does.
func dtvBlock(t Target, tp, lm uint64, m *Module) (uint64, error) {
	modidDesc, err := readDesc(t, "link_map_l_tls_modid")
	if err != nil {
		return 0, err
	}
	modid, err := modidDesc.read(t, lm, "l_tls_modid of "+m.Name)
	if err != nil {
		return 0, err
	}
	if modid == 0 {
		return 0, fmt.Errorf("%s (link_map at %#x) has no TLS module id yet: the dynamic linker has not set up its TLS", m.Name, lm)
	}

	// The generation of the module's slot: a thread whose DTV is older has
	// never seen the module.
	modGen, slotMap, err := slotinfo(t, modid)
	if err != nil {
		return 0, fmt.Errorf("looking up TLS module id %d of %s in the dynamic linker's slotinfo list: %w", modid, m.Name, err)
	}
	if slotMap != lm {
		return 0, fmt.Errorf("TLS module id %d of %s (link_map at %#x) belongs to link_map %#x in the dynamic linker's slotinfo list", modid, m.Name, lm, slotMap)
	}

	dtvpDesc, err := readDesc(t, "pthread_dtvp")
	if err != nil {
		return 0, err
	}
	dtv, err := dtvpDesc.read(t, tp, "the DTV pointer of the thread descriptor")
	if err != nil {
		return 0, err
	}
	if dtv == 0 {
		return 0, fmt.Errorf("the thread descriptor at %#x has no DTV", tp)
	}
	dtvDesc, err := readDesc(t, "dtv_dtv")
	if err != nil {
		return 0, err
	}
	counterDesc, err := readDesc(t, "dtv_t_counter")
	if err != nil {
		return 0, err
	}
	valDesc, err := readDesc(t, "dtv_t_pointer_val")
	if err != nil {
		return 0, err
	}
	genAt, err := dtvDesc.elem(0)
	if err != nil {
		return 0, err
	}
	dtvGen, err := counterDesc.read(t, dtv+genAt, "the DTV generation (dtv[0].counter)")
	if err != nil {
		return 0, err
	}
	if dtvGen < modGen {
		return 0, fmt.Errorf("the thread's DTV at %#x (generation %d) predates %s (generation %d): %w", dtv, dtvGen, m.Name, modGen, ErrTLSNotAllocated)
	}
	slotAt, err := dtvDesc.elem(modid)
	if err != nil {
		return 0, err
	}
	block, err := valDesc.read(t, dtv+slotAt, fmt.Sprintf("DTV entry %d (dtv[%d].pointer.val)", modid, modid))
	if err != nil {
		return 0, err
	}
	// TLS_DTV_UNALLOCATED is (void *) -1; glibc tests its low bit. A zero
	// entry was never filled in.
	if block == 0 || block&1 != 0 {
		return 0, fmt.Errorf("DTV entry %d at %#x of %s is %#x: %w", modid, dtv+slotAt, m.Name, block, ErrTLSNotAllocated)
	}
	return block, nil
}

// slotinfo returns the generation and the link_map address recorded in the
// dynamic linker's slotinfo entry for TLS module id modid
// (_rtld_global._dl_tls_dtv_slotinfo_list, a chain of arrays).
func slotinfo(t Target, modid uint64) (gen, lm uint64, err error) {
	rtld, err := LookupSymbol(t, "_rtld_global", nil)
	if err != nil {
		return 0, 0, fmt.Errorf("finding the dynamic linker's state: %w", err)
	}
	if rtld.TLS {
		return 0, 0, fmt.Errorf("_rtld_global in %s is a thread-local symbol", rtld.Module.Name)
	}
	var d struct{ head, length, next, slots, gen, mp dbDesc }
	for _, f := range []struct {
		p    *dbDesc
		name string
	}{
		{&d.head, "rtld_global__dl_tls_dtv_slotinfo_list"},
		{&d.length, "dtv_slotinfo_list_len"},
		{&d.next, "dtv_slotinfo_list_next"},
		{&d.slots, "dtv_slotinfo_list_slotinfo"},
		{&d.gen, "dtv_slotinfo_gen"},
		{&d.mp, "dtv_slotinfo_map"},
	} {
		if *f.p, err = readDesc(t, f.name); err != nil {
			return 0, 0, err
		}
	}
	node, err := d.head.read(t, rtld.Addr, "_rtld_global._dl_tls_dtv_slotinfo_list")
	if err != nil {
		return 0, 0, err
	}
	var base uint64 // module id of the first slot of node
	for i := 0; node != 0; i++ {
		if i == maxSlotinfoLists {
			return 0, 0, fmt.Errorf("the slotinfo list has more than %d nodes (a cycle?)", maxSlotinfoLists)
		}
		n, err := d.length.read(t, node, fmt.Sprintf("the length of slotinfo list node %#x", node))
		if err != nil {
			return 0, 0, err
		}
		if modid-base < n {
			off, err := d.slots.elem(modid - base)
			if err != nil {
				return 0, 0, err
			}
			slot := node + off
			gen, err := d.gen.read(t, slot, fmt.Sprintf("the generation of slot %d", modid))
			if err != nil {
				return 0, 0, err
			}
			lm, err := d.mp.read(t, slot, fmt.Sprintf("the link_map of slot %d", modid))
			if err != nil {
				return 0, 0, err
			}
			return gen, lm, nil
		}
		base += n
		if base > modid {
			return 0, 0, fmt.Errorf("slotinfo list node %#x has implausible length %d", node, n)
		}
		node, err = d.next.read(t, node, fmt.Sprintf("the next node after slotinfo list node %#x", node))
		if err != nil {
			return 0, 0, err
		}
	}
	return 0, 0, fmt.Errorf("the list ends after %d slots", base)
}

// linkMapEntry is one struct link_map of the dynamic linker's list.
type linkMapEntry struct {
	addr uint64 // address of the link_map
	name uint64 // l_name
}

// findLinkMap returns the address of the struct link_map of module m: the
// entry of the dynamic linker's list whose l_addr is m's load bias. When
// several entries have that bias (a non-PIE executable and a prelinked
// library both have 0), the one whose l_name is m's name wins; the
// executable (the first module) has the empty name.
func findLinkMap(t Target, m *Module) (uint64, error) {
	rd, err := LookupSymbol(t, "_r_debug", nil)
	if err != nil {
		return 0, fmt.Errorf("finding the dynamic linker's list of loaded objects: %w", err)
	}
	if rd.TLS {
		return 0, fmt.Errorf("_r_debug in %s is a thread-local symbol", rd.Module.Name)
	}
	var cands []linkMapEntry
	seen := make(map[uint64]bool)
	ns := rd.Addr
	for nsIdx := 0; ns != 0; nsIdx++ {
		if nsIdx == maxNamespaces {
			return 0, fmt.Errorf("more than %d namespaces in the r_debug_extended chain from %#x (a cycle?)", maxNamespaces, rd.Addr)
		}
		var v [4]byte
		if err := t.ReadMemory(ns+rDebugVersion, v[:]); err != nil {
			return 0, fmt.Errorf("reading r_version of the r_debug at %#x: %w", ns, err)
		}
		version := int32(le32(v[:]))
		if version <= 0 {
			if nsIdx == 0 {
				return 0, fmt.Errorf("_r_debug at %#x in %s has r_version %d: the dynamic linker has not initialized it", ns, rd.Module.Name, version)
			}
			return 0, fmt.Errorf("the r_debug_extended of namespace %d at %#x has r_version %d", nsIdx, ns, version)
		}
		lm, err := ReadUint64(t, ns+rDebugMap)
		if err != nil {
			return 0, fmt.Errorf("reading r_map of the r_debug at %#x: %w", ns, err)
		}
		for lm != 0 {
			if seen[lm] {
				return 0, fmt.Errorf("the list of loaded objects of namespace %d loops back to the link_map at %#x", nsIdx, lm)
			}
			if len(seen) == maxLinkMaps {
				return 0, fmt.Errorf("more than %d loaded objects in the dynamic linker's lists", maxLinkMaps)
			}
			seen[lm] = true
			var head [linkMapNext + 8]byte
			if err := t.ReadMemory(lm, head[:]); err != nil {
				return 0, fmt.Errorf("reading the link_map at %#x: %w", lm, err)
			}
			if le64(head[linkMapAddr:]) == m.Bias {
				cands = append(cands, linkMapEntry{addr: lm, name: le64(head[linkMapName:])})
			}
			lm = le64(head[linkMapNext:])
		}
		if version < 2 {
			break
		}
		next, err := ReadUint64(t, ns+rDebugNext)
		if err != nil {
			return 0, fmt.Errorf("reading r_next of the r_debug_extended at %#x: %w", ns, err)
		}
		ns = next
	}
	switch len(cands) {
	case 0:
		return 0, fmt.Errorf("none of the %d objects in the dynamic linker's list has l_addr %#x, the load bias of %s", len(seen), m.Bias, m.Name)
	case 1:
		return cands[0].addr, nil
	}
	isExe := false
	if mods := t.Modules(); len(mods) > 0 && mods[0] == m {
		isExe = true
	}
	var match []uint64
	var names []string
	for _, c := range cands {
		name := ""
		if c.name != 0 {
			s, err := readCString(t, c.name, maxPathLen)
			if err != nil {
				return 0, fmt.Errorf("reading l_name of the link_map at %#x: %w", c.addr, err)
			}
			name = s
		}
		names = append(names, fmt.Sprintf("%#x %q", c.addr, name))
		if name == m.Name || (isExe && name == "") {
			match = append(match, c.addr)
		}
	}
	if len(match) != 1 {
		return 0, fmt.Errorf("%d objects in the dynamic linker's list have l_addr %#x, the load bias of %s, and %d of them its name: %v", len(cands), m.Bias, m.Name, len(match), names)
	}
	return match[0], nil
}

// readCString reads a NUL-terminated string of at most limit bytes at
// addr, page by page so that a string that ends before an unmapped page
// reads.
func readCString(t Target, addr uint64, limit int) (string, error) {
	const page = 4096
	var out []byte
	for len(out) < limit {
		n := page - int((addr+uint64(len(out)))%page)
		if n > limit-len(out) {
			n = limit - len(out)
		}
		buf := make([]byte, n)
		if err := t.ReadMemory(addr+uint64(len(out)), buf); err != nil {
			return "", fmt.Errorf("reading the string at %#x: %w", addr, err)
		}
		for i, b := range buf {
			if b == 0 {
				return string(append(out, buf[:i]...)), nil
			}
		}
		out = append(out, buf...)
	}
	return "", fmt.Errorf("the string at %#x is longer than %d bytes", addr, limit)
}

// dbDesc is one of the field descriptors glibc exports for libthread_db
// (_thread_db_STRUCT_FIELD, nptl_db/structs.def): three uint32 holding the
// size of one element in bits, the number of elements (0 for a flexible
// array) and the field's byte offset in its structure.
type dbDesc struct {
	name   string
	bits   uint32
	nelem  uint32
	offset uint32
}

// readDesc reads the libthread_db descriptor _thread_db_<field> from the
// target (libc.so.6 defines them in .rodata).
func readDesc(t Target, field string) (dbDesc, error) {
	name := "_thread_db_" + field
	s, err := LookupSymbol(t, name, nil)
	if err != nil {
		return dbDesc{}, fmt.Errorf("reading glibc's libthread_db descriptor %s: not found in any module (a target using glibc's libc.so.6 has it)", name)
	}
	if s.TLS {
		return dbDesc{}, fmt.Errorf("reading glibc's libthread_db descriptor %s: a thread-local symbol in %s", name, s.Module.Name)
	}
	var b [12]byte
	if err := t.ReadMemory(s.Addr, b[:]); err != nil {
		return dbDesc{}, fmt.Errorf("reading glibc's libthread_db descriptor %s at %#x in %s: %w", name, s.Addr, s.Module.Name, err)
	}
	d := dbDesc{name: name, bits: le32(b[0:]), nelem: le32(b[4:]), offset: le32(b[8:])}
	if d.bits == 0 || d.bits%8 != 0 || d.bits&0xff000000 != 0 {
		return dbDesc{}, fmt.Errorf("glibc's libthread_db descriptor %s at %#x in %s is {%d, %d, %d}: not a field of a little-endian target", name, s.Addr, s.Module.Name, d.bits, d.nelem, d.offset)
	}
	return d, nil
}

// elem returns the byte offset of element idx of the field from the start
// of its structure.
func (d dbDesc) elem(idx uint64) (uint64, error) {
	// libthread_db refuses an index above the element count (a count of 0
	// is a flexible array).
	if d.nelem != 0 && idx > uint64(d.nelem) {
		return 0, fmt.Errorf("index %d beyond the %d elements of %s", idx, d.nelem, d.name)
	}
	return uint64(int64(int32(d.offset))) + idx*uint64(d.bits/8), nil
}

// read reads the scalar field (element 0) of the structure at base,
// zero-extended; what names the value for errors.
func (d dbDesc) read(t Target, base uint64, what string) (uint64, error) {
	switch d.bits {
	case 8, 16, 32, 64:
	default:
		return 0, fmt.Errorf("reading %s: %s describes a %d-bit field, not a scalar", what, d.name, d.bits)
	}
	addr := base + uint64(int64(int32(d.offset)))
	var b [8]byte
	if err := t.ReadMemory(addr, b[:d.bits/8]); err != nil {
		return 0, fmt.Errorf("reading %s at %#x: %w", what, addr, err)
	}
	return le64(b[:]), nil
}

// signed sign-extends a value read by read.
func (d dbDesc) signed(v uint64) int64 {
	shift := 64 - d.bits
	return int64(v<<shift) >> shift
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
