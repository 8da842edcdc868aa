// Package ompd implements OMPD, the OpenMP debugging interface, for LLVM's
// OpenMP runtime (libomp, also shipped as libiomp5). It reads the runtime's
// data structures in a stopped target and answers the OMPD 5.1 queries:
// threads, parallel regions, tasks, states, frames, ICVs and display
// control variables.
//
// The package reaches the target only through Callbacks, an interface
// shaped like OMPD's own callback table, so it works unchanged over live
// processes, core files or any other backend. Every type size, field offset
// and bitfield mask comes from the runtime's own OMPD layout symbols
// (ompd_sizeof__*, ompd_access__*, ompd_bitfield__*): nothing about the
// runtime's layout is compiled in.
package ompd

// Address is an address in the target.
type Address = uint64

// ThreadContext is the debugger's opaque name for one native thread, as
// returned by Callbacks.ThreadContext.
type ThreadContext interface{}

// ThreadIDKind is the kind of a native thread id (ompd_thread_id_t).
type ThreadIDKind int

// Thread id kinds. The values are the OpenMP 5.1 ones.
const (
	ThreadIDPthread ThreadIDKind = 0
	ThreadIDLWP     ThreadIDKind = 1
)

// TypeSizes holds the sizes in bytes of the target's primitive types
// (ompd_device_type_sizes_t).
type TypeSizes struct {
	Char, Short, Int, Long, LongLong, Pointer int
}

// Callbacks is how the OMPD layer reaches the target: the debugger side of
// OMPD's callback table. Every method may be called many times per query;
// implementations should cache per stop.
type Callbacks interface {
	// SymbolAddr returns the address of a global symbol. fileHint, when not
	// empty, names the module expected to define it (the runtime library).
	SymbolAddr(name, fileHint string) (Address, error)
	// ReadMemory fills buf from the target's memory at addr.
	ReadMemory(addr Address, buf []byte) error
	// ReadString reads a NUL-terminated string of at most max bytes at
	// addr. A string without terminator within max bytes is an error.
	ReadString(addr Address, max int) (string, error)
	// Sizes returns the target's primitive type sizes.
	Sizes() (TypeSizes, error)
	// ThreadContext returns the debugger's context for a native thread id
	// of the given kind.
	ThreadContext(kind ThreadIDKind, id uint64) (ThreadContext, error)
}

// Prefetcher is Callbacks that can read ahead: the debugger reads, in as
// few calls as it can, memory the runtime layer is about to read field by
// field (say one field of each of a thousand threads' descriptors). It is
// advice: what cannot be read is reported by the reads that follow.
type Prefetcher interface {
	Prefetch(addrs []Address)
}

// Prefetch gives addrs to cb's Prefetch when it has one.
func Prefetch(cb Callbacks, addrs []Address) {
	if p, ok := cb.(Prefetcher); ok {
		p.Prefetch(addrs)
	}
}
