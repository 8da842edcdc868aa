package llvm

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// layout reads the runtime's OMPD layout symbols: ompd_sizeof__T,
// ompd_sizeof__T__F, ompd_access__T__F and ompd_bitfield__T__F, each a
// 64-bit variable the runtime fills in at start-up. Values are read once
// and kept for the life of the address space handle.
type layout struct {
	cb   ompd.Callbacks
	hint string
	mu   sync.Mutex
	vals map[layoutKey]uint64
	// fields are the offsets and sizes of fields read (fieldAt): one
	// lookup for a field read, where there would be two of vals.
	fields map[[2]string][2]uint64
	// recent serve vals and fields without a lock or a hash of the
	// names (recentSlot): a report of a thousand threads makes a hundred
	// thousand lookups of a few hundred keys, most named by the same
	// string constants each time.
	recentVals   [recentSlots]atomic.Pointer[recentValue]
	recentFields [recentSlots]atomic.Pointer[recentValue]
	slow         int // lookups the recent slots did not answer (tests)
	// learned counts the values read from the target that are not 0 and
	// not ompd_state's: what AddressSpace.Learned can pass on.
	learned int
}

// recentValue is one answer kept in a recent slot: the value of k, or
// for fields the offset (v) and size (v2) of k.typ's k.field.
type recentValue struct {
	k     layoutKey
	v, v2 uint64
}

// recentSlots is the size of a layout's recent tables (a power of two).
const recentSlots = 512

// recentSlot is the slot of k in a recent table: a hash of where its
// strings' bytes lie, which is the same for every use of one constant.
// Keys whose strings lie elsewhere only miss, and are looked up in the
// maps.
func recentSlot(k layoutKey) int {
	h := uintptr(unsafe.Pointer(unsafe.StringData(k.typ)))*0x9e3779b1 ^
		uintptr(unsafe.Pointer(unsafe.StringData(k.field)))*0x85ebca6b ^
		uintptr(unsafe.Pointer(unsafe.StringData(k.prefix)))
	return int((h ^ h>>17) & (recentSlots - 1))
}

// holds reports whether e is the answer for k.
func (e *recentValue) holds(k layoutKey) bool {
	return e != nil && sameString(e.k.typ, k.typ) && sameString(e.k.field, k.field) && sameString(e.k.prefix, k.prefix)
}

// sameString is a == b, at once when both are the same bytes.
func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// layoutKey names a layout symbol by its parts: a key is built for every
// field read, the symbol's name only when it is first read.
type layoutKey struct {
	prefix     string // "ompd_sizeof__", "ompd_access__", "ompd_bitfield__"
	typ, field string // field is "" for a type's size
}

// name is the symbol's name.
func (k layoutKey) name() string {
	if k.field == "" {
		return k.prefix + k.typ
	}
	return k.prefix + k.typ + "__" + k.field
}

func newLayout(cb ompd.Callbacks, hint string) *layout {
	return &layout{cb: cb, hint: hint, vals: make(map[layoutKey]uint64), fields: make(map[[2]string][2]uint64)}
}

// value returns the 64-bit value stored at the symbol k names.
func (l *layout) value(k layoutKey) (uint64, error) {
	slot := &l.recentVals[recentSlot(k)]
	if e := slot.Load(); e.holds(k) {
		return e.v, nil
	}
	l.mu.Lock()
	l.slow++
	v, ok := l.vals[k]
	l.mu.Unlock()
	if ok {
		slot.Store(&recentValue{k: k, v: v})
		return v, nil
	}
	name := k.name()
	addr, err := l.cb.SymbolAddr(name, l.hint)
	if err != nil {
		return 0, fmt.Errorf("layout symbol %s: %w", name, err)
	}
	var b [8]byte
	if err := l.cb.ReadMemory(addr, b[:]); err != nil {
		return 0, fmt.Errorf("reading layout symbol %s at %#x: %w", name, addr, err)
	}
	v = binary.LittleEndian.Uint64(b[:])
	l.mu.Lock()
	l.vals[k] = v
	if v != 0 && k.prefix != stateSymbol {
		l.learned++
	}
	l.mu.Unlock()
	slot.Store(&recentValue{k: k, v: v})
	return v, nil
}

// sizeof is the size of type typ (ompd_sizeof__typ).
func (l *layout) sizeof(typ string) (uint64, error) {
	return l.value(layoutKey{"ompd_sizeof__", typ, ""})
}

// offset is the offset of field in typ (ompd_access__typ__field).
func (l *layout) offset(typ, field string) (uint64, error) {
	return l.value(layoutKey{"ompd_access__", typ, field})
}

// fieldSize is the size of field in typ (ompd_sizeof__typ__field).
func (l *layout) fieldSize(typ, field string) (uint64, error) {
	return l.value(layoutKey{"ompd_sizeof__", typ, field})
}

// offsetSize is the offset and the size of field in typ.
func (l *layout) offsetSize(typ, field string) (off, size uint64, err error) {
	rk := layoutKey{typ: typ, field: field}
	slot := &l.recentFields[recentSlot(rk)]
	if e := slot.Load(); e.holds(rk) {
		return e.v, e.v2, nil
	}
	k := [2]string{typ, field}
	l.mu.Lock()
	l.slow++
	v, ok := l.fields[k]
	l.mu.Unlock()
	if ok {
		slot.Store(&recentValue{k: rk, v: v[0], v2: v[1]})
		return v[0], v[1], nil
	}
	if off, err = l.offset(typ, field); err != nil {
		return 0, 0, err
	}
	if size, err = l.fieldSize(typ, field); err != nil {
		return 0, 0, err
	}
	l.mu.Lock()
	l.fields[k] = [2]uint64{off, size}
	l.mu.Unlock()
	slot.Store(&recentValue{k: rk, v: off, v2: size})
	return off, size, nil
}

// mask is the bit mask of bitfield field in typ (ompd_bitfield__typ__field).
func (l *layout) mask(typ, field string) (uint64, error) {
	return l.value(layoutKey{"ompd_bitfield__", typ, field})
}

// memory reads typed values from the target on behalf of an address
// space handle.
type memory struct {
	cb  ompd.Callbacks
	lay *layout
	ptr int // pointer size
	// words holds the buffers uint reads into: one on its stack escapes
	// through the callback interface, and a report of a thousand threads
	// reads a hundred thousand fields, each then a small allocation.
	words sync.Pool
}

// uint reads an unsigned little-endian integer of size bytes.
func (m *memory) uint(addr ompd.Address, size uint64) (uint64, error) {
	if size == 0 || size > 8 {
		return 0, fmt.Errorf("reading %d-byte integer at %#x: unsupported size", size, addr)
	}
	b, _ := m.words.Get().(*[8]byte)
	if b == nil {
		b = new([8]byte)
	}
	defer m.words.Put(b)
	*b = [8]byte{}
	if err := m.cb.ReadMemory(addr, b[:size]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// int reads a signed little-endian integer of size bytes.
func (m *memory) int(addr ompd.Address, size uint64) (int64, error) {
	u, err := m.uint(addr, size)
	if err != nil {
		return 0, err
	}
	shift := 64 - 8*size
	return int64(u<<shift) >> shift, nil
}

// pointer reads a pointer.
func (m *memory) pointer(addr ompd.Address) (ompd.Address, error) { return m.uint(addr, uint64(m.ptr)) }

// field returns the address of field in the typ object at base.
func (m *memory) field(base ompd.Address, typ, field string) (ompd.Address, error) {
	off, err := m.lay.offset(typ, field)
	if err != nil {
		return 0, err
	}
	return base + off, nil
}

// fieldAt returns the address and size of field in the typ object at base.
func (m *memory) fieldAt(base ompd.Address, typ, field string) (ompd.Address, uint64, error) {
	off, size, err := m.lay.offsetSize(typ, field)
	if err != nil {
		return 0, 0, err
	}
	return base + off, size, nil
}

// readField reads field (of its own size) of the typ object at base as an
// unsigned value.
func (m *memory) readField(base ompd.Address, typ, field string) (uint64, error) {
	addr, size, err := m.fieldAt(base, typ, field)
	if err != nil {
		return 0, err
	}
	v, err := m.uint(addr, size)
	if err != nil {
		return 0, fmt.Errorf("reading %s.%s at %#x: %w", typ, field, addr, err)
	}
	return v, nil
}

// readFieldInt reads field of the typ object at base, sign-extended.
func (m *memory) readFieldInt(base ompd.Address, typ, field string) (int64, error) {
	addr, size, err := m.fieldAt(base, typ, field)
	if err != nil {
		return 0, err
	}
	v, err := m.int(addr, size)
	if err != nil {
		return 0, fmt.Errorf("reading %s.%s at %#x: %w", typ, field, addr, err)
	}
	return v, nil
}

// globalValue reads the global variable name with the size the runtime
// recorded in ompd_sizeof__name.
func (m *memory) globalValue(name string) (int64, error) {
	size, err := m.lay.sizeof(name)
	if err != nil {
		return 0, err
	}
	return m.globalSized(name, size)
}

// globalSized reads the global variable name as a signed integer of size
// bytes.
func (m *memory) globalSized(name string, size uint64) (int64, error) {
	addr, err := m.cb.SymbolAddr(name, m.lay.hint)
	if err != nil {
		return 0, err
	}
	v, err := m.int(addr, size)
	if err != nil {
		return 0, fmt.Errorf("reading %s at %#x: %w", name, addr, err)
	}
	return v, nil
}

// globalString reads the string a global char* variable points to; a NULL
// pointer reads as the empty string.
func (m *memory) globalString(name string) (string, error) {
	addr, err := m.cb.SymbolAddr(name, m.lay.hint)
	if err != nil {
		return "", err
	}
	p, err := m.pointer(addr)
	if err != nil {
		return "", fmt.Errorf("reading %s at %#x: %w", name, addr, err)
	}
	if p == 0 {
		return "", nil
	}
	s, err := m.cb.ReadString(p, maxString)
	if err != nil {
		return "", fmt.Errorf("reading string %s at %#x: %w", name, p, err)
	}
	return s, nil
}

// maxString bounds every string read from the target.
const maxString = 4096
