package target

import (
	"fmt"
	"sync"
)

// PageSize is the granularity of the memory cache.
const PageSize = 4096

// PageReader reads whole runs of pages from a target. Backends implement
// it with one system call (or one file read) per run; ReadPages may return
// fewer bytes than asked when the tail is unmapped, and must then return
// the count that was read.
type PageReader interface {
	ReadPages(addr uint64, buf []byte) (int, error)
}

// MemCache serves reads from a cache of target pages, valid for one stop.
// A read that misses fetches every missing page it spans in a single
// ReadPages call, so walking a structure costs one system call per page
// touched, not one per field. Reads from several goroutines fetch at the
// same time: the lock is held to look pages up and to record them, never
// during a fetch.
type MemCache struct {
	mu     sync.Mutex
	src    PageReader
	pages  map[uint64][]byte // page address -> page bytes (empty, not nil: unmapped)
	gen    uint64            // counts Invalidate calls: a fetch begun before one is not recorded
	misses int
	reads  int
}

// NewMemCache returns an empty cache over src.
func NewMemCache(src PageReader) *MemCache {
	return &MemCache{src: src, pages: make(map[uint64][]byte)}
}

// Invalidate forgets every cached page (call it when the target resumes).
func (c *MemCache) Invalidate() {
	c.mu.Lock()
	c.pages = make(map[uint64][]byte)
	c.gen++
	c.mu.Unlock()
}

// Stats reports how many reads were served and how many page runs were
// fetched from the source.
func (c *MemCache) Stats() (reads, fetches int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads, c.misses
}

// unmappedPage is what the cache holds for a page that cannot be read:
// empty, and not nil (nil is a page not looked at yet).
func unmappedPage() []byte { return make([]byte, 0) }

// ReadMemory fills buf from addr.
func (c *MemCache) ReadMemory(addr uint64, buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	end := addr + uint64(len(buf))
	if end < addr {
		return fmt.Errorf("reading %d bytes at %#x: %w", len(buf), addr, ErrUnmapped)
	}
	first := addr &^ (PageSize - 1)
	count := int(((end-1)&^(PageSize-1)-first)/PageSize) + 1
	var few [2][]byte
	pages := few[:0]
	if count > len(few) {
		pages = make([][]byte, 0, count)
	}
	pages = pages[:count]

	c.mu.Lock()
	c.reads++
	gen := c.gen
	missing := false
	for i := range pages {
		pages[i] = c.pages[first+uint64(i)*PageSize]
		missing = missing || pages[i] == nil
	}
	c.mu.Unlock()

	// Fetch each run of missing pages in one call, without the lock.
	for i := 0; missing && i < count; {
		if pages[i] != nil {
			i++
			continue
		}
		j := i
		for j < count && pages[j] == nil {
			j++
		}
		fetches := c.fetch(first+uint64(i)*PageSize, pages[i:j])
		c.record(gen, first+uint64(i)*PageSize, pages[i:j], fetches)
		i = j
	}

	// Pages are never written once recorded: copy without the lock.
	for i, page := range pages {
		p := first + uint64(i)*PageSize
		if len(page) == 0 {
			bad := max(p, addr)
			return fmt.Errorf("reading %d bytes at %#x: %#x: %w", len(buf), addr, bad, ErrUnmapped)
		}
		lo, hi := max(p, addr), min(p+PageSize, end)
		copy(buf[lo-addr:hi-addr], page[lo-p:hi-p])
	}
	return nil
}

// fetch reads the run of pages starting at start into run (one slot per
// page, every one nil), and returns how many calls it made. A short read
// means the page after the bytes read is unmapped; the pages after it are
// fetched again, so one hole does not hide the mapped pages behind it.
func (c *MemCache) fetch(start uint64, run [][]byte) int {
	calls := 0
	for i := 0; i < len(run); {
		tmp := make([]byte, (len(run)-i)*PageSize)
		got, _ := c.src.ReadPages(start+uint64(i)*PageSize, tmp)
		calls++
		whole := got / PageSize
		for k := 0; k < whole; k++ {
			run[i+k] = tmp[k*PageSize : (k+1)*PageSize : (k+1)*PageSize]
		}
		i += whole
		if i < len(run) {
			run[i] = unmappedPage()
			i++
		}
	}
	return calls
}

// record keeps the pages of run, fetched from start, unless the cache was
// invalidated since the fetch began (generation gen). A page another read
// recorded meanwhile is kept, and replaces the copy in run, so every
// reader sees the same bytes.
func (c *MemCache) record(gen, start uint64, run [][]byte, fetches int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.misses += fetches
	if c.gen != gen {
		return
	}
	for k, page := range run {
		p := start + uint64(k)*PageSize
		if old, ok := c.pages[p]; ok {
			run[k] = old
			continue
		}
		c.pages[p] = page
	}
}
