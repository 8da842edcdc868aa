//go:build cgo

package dll

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// maxRead bounds one memory read the library asks for.
const maxRead = 1 << 28

// sessionOf returns the open session a context names, or nil when it
// is stale.
func sessionOf(id C.uintptr_t) *session { return registry.session(uintptr(id)) }

// rcOf maps a callback's error to a return code, and remembers it so that
// the failing OMPD call can say what went wrong underneath.
func (s *session) rcOf(err error, what string) C.ompd_rc_t {
	if err == nil {
		return C.OI_RC_OK
	}
	s.noteErr(fmt.Errorf("%s: %w", what, err))
	var e *ompd.Error
	if errors.As(err, &e) {
		return C.ompd_rc_t(e.RC)
	}
	return C.OI_RC_ERROR
}

//export oiGoPrint
func oiGoPrint(s *C.char, category C.int) C.ompd_rc_t {
	registry.print(C.GoString(s))
	return C.OI_RC_OK
}

//export oiGoSizes
func oiGoSizes(h C.uintptr_t, out *C.ompd_device_type_sizes_t) C.ompd_rc_t {
	s := sessionOf(h)
	if s == nil {
		return C.OI_RC_STALE_HANDLE
	}
	sz, err := s.cb.Sizes()
	if err != nil {
		return s.rcOf(err, "primitive type sizes")
	}
	out.sizeof_char = C.uint8_t(sz.Char)
	out.sizeof_short = C.uint8_t(sz.Short)
	out.sizeof_int = C.uint8_t(sz.Int)
	out.sizeof_long = C.uint8_t(sz.Long)
	out.sizeof_long_long = C.uint8_t(sz.LongLong)
	out.sizeof_pointer = C.uint8_t(sz.Pointer)
	return C.OI_RC_OK
}

//export oiGoSymbol
func oiGoSymbol(h C.uintptr_t, thread C.uintptr_t, name, file *C.char, out *C.ompd_addr_t) C.ompd_rc_t {
	s := sessionOf(h)
	if s == nil {
		return C.OI_RC_STALE_HANDLE
	}
	n := C.GoString(name)
	hint := s.hint
	if file != nil {
		hint = C.GoString(file)
	}
	var addr ompd.Address
	var err error
	if thread == 0 {
		addr, err = s.cb.SymbolAddr(n, hint)
	} else {
		ctx, ok := s.threadContext(uintptr(thread))
		if !ok {
			return C.OI_RC_STALE_HANDLE
		}
		addr, err = s.cb.ThreadSymbolAddr(ctx, n, hint)
	}
	if err != nil {
		return s.rcOf(err, "symbol "+n)
	}
	*out = C.ompd_addr_t(addr)
	return C.OI_RC_OK
}

//export oiGoRead
func oiGoRead(h C.uintptr_t, addr C.ompd_addr_t, n C.ompd_size_t, buf unsafe.Pointer) C.ompd_rc_t {
	s := sessionOf(h)
	if s == nil {
		return C.OI_RC_STALE_HANDLE
	}
	if n == 0 {
		return C.OI_RC_OK
	}
	if n > maxRead {
		s.noteErr(fmt.Errorf("a read of %d bytes at %#x is larger than any runtime structure", uint64(n), uint64(addr)))
		return C.OI_RC_BAD_INPUT
	}
	dst := unsafe.Slice((*byte)(buf), int(n))
	return s.rcOf(s.cb.ReadMemory(uint64(addr), dst), fmt.Sprintf("reading %d bytes at %#x", uint64(n), uint64(addr)))
}

//export oiGoReadString
func oiGoReadString(h C.uintptr_t, addr C.ompd_addr_t, n C.ompd_size_t, buf unsafe.Pointer) C.ompd_rc_t {
	s := sessionOf(h)
	if s == nil {
		return C.OI_RC_STALE_HANDLE
	}
	if n == 0 || n > maxRead {
		return C.OI_RC_BAD_INPUT
	}
	// The string and its terminator must fit in n bytes.
	str, err := s.cb.ReadString(uint64(addr), int(n)-1)
	if err != nil {
		return s.rcOf(err, fmt.Sprintf("reading a string at %#x", uint64(addr)))
	}
	dst := unsafe.Slice((*byte)(buf), int(n))
	copy(dst, str)
	dst[len(str)] = 0
	return C.OI_RC_OK
}

//export oiGoThreadContext
func oiGoThreadContext(h C.uintptr_t, kind C.ompd_thread_id_t, size C.ompd_size_t, id unsafe.Pointer, out *unsafe.Pointer) C.ompd_rc_t {
	s := sessionOf(h)
	if s == nil {
		return C.OI_RC_STALE_HANDLE
	}
	var v uint64
	switch size {
	case 8:
		v = *(*uint64)(id)
	case 4:
		v = uint64(*(*uint32)(id))
	default:
		s.noteErr(fmt.Errorf("a thread id of %d bytes", uint64(size)))
		return C.OI_RC_BAD_INPUT
	}
	p, err := s.newThreadContext(ompd.ThreadIDKind(kind), v)
	if err != nil {
		return s.rcOf(err, fmt.Sprintf("thread context of thread id %#x (kind %d)", v, uint64(kind)))
	}
	*out = unsafe.Pointer(p)
	return C.OI_RC_OK
}
