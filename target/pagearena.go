package target

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sizes of the chunks a pageArena allocates, in pages: the first is small
// (a report of a few threads reads a few dozen pages), the second
// secondChunkPages, each next one twice the last up to maxChunkPages; a
// request larger than the next chunk gets a chunk of its own size.
const (
	firstChunkPages  = 64
	secondChunkPages = 1024
	maxChunkPages    = 4096
)

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14): populate a range
// writable, as a write to every page would.
const madvPopulateWrite = 23

// pageArena holds the pages a MemCache reads during one stop, in chunks
// populated before use. A page of fresh memory costs a page fault when the
// kernel first writes it, several times the cost of the read itself, and
// a thousand threads' stacks and structures are about 5000 pages, read
// while the target is held stopped.
//
// The chunks are not asked to be transparent huge pages (MADV_HUGEPAGE),
// nor is the readied heap (ReadyHeap). Back to back, huge pages made a
// run of a thousand threads a few milliseconds faster; but a virtual
// machine that reports free memory to its host (virtio-balloon's free
// page reporting, which Firecracker and QEMU can offer their guests)
// hands back free blocks of 2 MiB, exactly what a huge page takes, and
// backing them again made a run that came seconds after the last one, as
// a person's does, spend 90 to 160 ms more before the stop
// (docs/benchmarks.md, the thirteenth round). Small pages mostly come
// from smaller free blocks, which are not reported: with them that run
// took no longer than one right after another.
//
// The chunks are Go memory (byte slices, which the collector does not
// scan): a page a caller still holds stays valid (a small first chunk is
// used again after reset; reading it after Invalidate breaks MemCache's
// contract, and gives other bytes, never a fault).
//
// A pageArena is not safe for concurrent use.
type pageArena struct {
	chunks [][]byte // chunks, in the order they are used
	cur    int      // index in chunks of the chunk rest is from
	rest   []byte   // the unused part of chunks[cur]
	next   int      // pages in the next chunk
}

// reserve populates chunks so that at least n pages are free (the rest of
// the current chunk included), so that no page of them costs a fault
// later.
func (a *pageArena) reserve(n int) {
	free := len(a.rest) / PageSize
	for i := a.cur + 1; i < len(a.chunks); i++ {
		free += len(a.chunks[i]) / PageSize
	}
	if free < n {
		mem := a.newChunk(n - free)
		if len(a.chunks) == 0 {
			a.cur, a.rest = 0, mem
		}
		a.chunks = append(a.chunks, mem)
	}
}

// alloc returns n pages.
func (a *pageArena) alloc(n int) []byte {
	size := n * PageSize
	for len(a.rest) < size {
		if a.cur+1 < len(a.chunks) {
			// A reserved chunk; too small ones are skipped.
			a.cur++
			a.rest = a.chunks[a.cur]
			continue
		}
		mem := a.newChunk(n)
		a.chunks = append(a.chunks, mem)
		a.cur, a.rest = len(a.chunks)-1, mem
	}
	b := a.rest[:size:size]
	a.rest = a.rest[size:]
	return b
}

// newChunk allocates and populates the next chunk, of at least n pages.
func (a *pageArena) newChunk(n int) []byte {
	if a.next == 0 {
		a.next = firstChunkPages
	}
	pages := max(a.next, n)
	if a.next == firstChunkPages {
		a.next = secondChunkPages
	} else {
		a.next = min(a.next*2, maxChunkPages)
	}
	mem := make([]byte, pages*PageSize)
	populate(mem)
	return mem
}

// alignedPart returns the part of b that begins and ends on a multiple of
// align (a power of two), empty when there is none.
func alignedPart(b []byte, align int) []byte {
	if len(b) == 0 {
		return b
	}
	off := 0
	if mis := int(uintptr(unsafe.Pointer(&b[0])) % uintptr(align)); mis != 0 {
		off = align - mis
	}
	if off >= len(b) {
		return b[:0]
	}
	return b[off : off+(len(b)-off)&^(align-1)]
}

// populate makes the kernel back every page of mem (page-aligned) now,
// with one call where the kernel can (MADV_POPULATE_WRITE), else by
// writing to each page.
func populate(mem []byte) {
	if uintptr(unsafe.Pointer(&mem[0]))%PageSize == 0 && unix.Madvise(mem, madvPopulateWrite) == nil {
		return
	}
	for i := 0; i < len(mem); i += PageSize {
		mem[i] = 0
	}
}

// reset starts again for the next stop. A first chunk of firstChunkPages
// is kept and used again: a trace stops thousands of times and reads a
// few pages at each stop. Larger chunks are dropped, and the heap reuses
// their memory for what comes next.
func (a *pageArena) reset() {
	if len(a.chunks) > 0 && len(a.chunks[0]) <= firstChunkPages*PageSize {
		first := a.chunks[0]
		*a = pageArena{chunks: [][]byte{first}, rest: first, next: secondChunkPages}
		return
	}
	*a = pageArena{}
}
