package target

import (
	"golang.org/x/sys/unix"
)

// Sizes of the chunks a pageArena maps, in pages: the first is small (a
// report of a few threads reads a few dozen pages), each next one twice
// the last, up to the largest.
const (
	firstChunkPages = 64
	maxChunkPages   = 1024
)

// pageArena holds the pages a MemCache reads during one stop, in memory
// mapped for it and populated by the kernel in one call per chunk
// (MAP_POPULATE). A page of fresh Go heap costs a page fault when the
// kernel first writes it, several times the cost of the read itself: a
// thousand threads' stacks and structures are about 5000 pages, read
// while the target is held stopped. The memory is outside the Go heap:
// the collector neither scans nor keeps it.
//
// Chunks are never unmapped: reset gives their memory back to the system
// (MADV_DONTNEED) and keeps the mappings for the next stop, so that a page
// a caller still held could at worst read zeros, never fault.
//
// A pageArena is not safe for concurrent use.
type pageArena struct {
	chunks [][]byte // mapped chunks, in the order they are used
	cur    int      // index in chunks of the chunk rest is from
	rest   []byte   // the unused part of chunks[cur]
	next   int      // pages in the next chunk mapped
}

// alloc returns n pages. When mapping fails (a memory limit, say), they
// come from the Go heap.
func (a *pageArena) alloc(n int) []byte {
	size := n * PageSize
	for len(a.rest) < size {
		if a.cur+1 < len(a.chunks) {
			// A chunk kept from an earlier stop; too small ones are
			// skipped.
			a.cur++
			a.rest = a.chunks[a.cur]
			continue
		}
		if a.next == 0 {
			a.next = firstChunkPages
		}
		pages := max(a.next, n)
		mem, err := unix.Mmap(-1, 0, pages*PageSize, unix.PROT_READ|unix.PROT_WRITE,
			unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
		if err != nil {
			return make([]byte, size)
		}
		a.chunks = append(a.chunks, mem)
		a.cur, a.rest = len(a.chunks)-1, mem
		a.next = min(a.next*2, maxChunkPages)
	}
	b := a.rest[:size:size]
	a.rest = a.rest[size:]
	return b
}

// reset gives the memory of every page handed out back to the system and
// starts again from the first chunk.
func (a *pageArena) reset() {
	for _, c := range a.chunks {
		_ = unix.Madvise(c, unix.MADV_DONTNEED) // advice: nothing to do if refused
	}
	a.cur, a.rest = 0, nil
	if len(a.chunks) > 0 {
		a.rest = a.chunks[0]
	}
}
