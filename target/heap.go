package target

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MinReadyHeap is the least ReadyHeap readies: for less, the collection
// it runs costs more than the page faults it saves.
const MinReadyHeap = 4 << 20

// ReadyHeap makes the Go heap hold about n bytes of free memory that the
// kernel has already backed, so that what is allocated next costs no page
// faults: a caller readies it before it stops a target, for what it
// allocates while the target is held stopped (a page fault costs
// 10-20 µs on a virtual machine, and a thousand threads' report allocates
// thousands of pages). It allocates n bytes, has the kernel populate them
// in one call (MADV_POPULATE_WRITE), drops them and runs a collection,
// which frees their pages for the heap to use again.
//
// It is not asked to be made of transparent huge pages: see pageArena.
//
// It does nothing for n under MinReadyHeap, or where the kernel cannot
// populate a range in one call: writing to each page would cost what the
// faults it saves cost.
func ReadyHeap(n int) { readyHeap(n) }

// readyHeap is ReadyHeap; it returns the range it populated (empty when
// it did nothing), which tests look up in the process's mappings.
func readyHeap(n int) (start, end uintptr) {
	if n < MinReadyHeap {
		return 0, 0
	}
	// One page more: its whole pages are at least n bytes.
	mem := alignedPart(make([]byte, n+PageSize), PageSize)
	if unix.Madvise(mem, madvPopulateWrite) != nil {
		return 0, 0
	}
	start = uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	end = start + uintptr(len(mem))
	runtime.KeepAlive(mem) // dead from here: the collection frees it
	runtime.GC()
	return start, end
}
