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
// touched, not one per field.
type MemCache struct {
	mu     sync.Mutex
	src    PageReader
	pages  map[uint64][]byte // page address -> page bytes (nil: unmapped)
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
	c.mu.Unlock()
}

// Stats reports how many reads were served and how many page runs were
// fetched from the source.
func (c *MemCache) Stats() (reads, fetches int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads, c.misses
}

// ReadMemory fills buf from addr.
func (c *MemCache) ReadMemory(addr uint64, buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	end := addr + uint64(len(buf))
	if end < addr {
		return fmt.Errorf("reading %d bytes at %#x: %w", len(buf), addr, ErrUnmapped)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	first := addr &^ (PageSize - 1)
	last := (end - 1) &^ (PageSize - 1)
	// Find the first missing page and fetch the run of missing pages up to
	// the last one in one call.
	var runStart uint64
	inRun := false
	// flush fetches [runStart, runEnd). A short read means the page after
	// the bytes read is unmapped; the pages after it are fetched again, so
	// one hole does not hide the mapped pages behind it.
	flush := func(runEnd uint64) {
		for start := runStart; start < runEnd; {
			tmp := make([]byte, int(runEnd-start))
			got, _ := c.src.ReadPages(start, tmp)
			c.misses++
			whole := uint64(got) / PageSize * PageSize
			for p := start; p < start+whole; p += PageSize {
				off := p - start
				c.pages[p] = tmp[off : off+PageSize : off+PageSize]
			}
			hole := start + whole
			if hole >= runEnd {
				return
			}
			c.pages[hole] = nil
			start = hole + PageSize
		}
	}
	for p := first; ; p += PageSize {
		_, cached := c.pages[p]
		if !cached && !inRun {
			runStart, inRun = p, true
		} else if cached && inRun {
			flush(p)
			inRun = false
		}
		if p == last {
			break
		}
	}
	if inRun {
		flush(last + PageSize)
	}
	for p := first; ; p += PageSize {
		page := c.pages[p]
		if page == nil {
			bad := p
			if bad < addr {
				bad = addr
			}
			return fmt.Errorf("reading %d bytes at %#x: %#x: %w", len(buf), addr, bad, ErrUnmapped)
		}
		lo, hi := p, p+PageSize
		if lo < addr {
			lo = addr
		}
		if hi > end {
			hi = end
		}
		copy(buf[lo-addr:hi-addr], page[lo-p:hi-p])
		if p == last {
			break
		}
	}
	return nil
}
