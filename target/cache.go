package target

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// PageSize is the granularity of the memory cache.
const PageSize = 4096

// PageReader reads whole runs of pages from a target. Backends implement
// it with one system call (or one file read) per run; ReadPages may return
// fewer bytes than asked when the tail is unmapped, and must then return
// the count that was read. A MemCache calls it from several goroutines at
// once: it must be safe for concurrent use.
type PageReader interface {
	ReadPages(addr uint64, buf []byte) (int, error)
}

// PageListReader is a PageReader that also reads scattered pages in one
// call (MemCache.Prefetch uses it).
type PageListReader interface {
	// ReadPageList reads the pages at addrs (page-aligned, at most
	// maxPageList of them) into buf (a PageSize slot each, in order), and
	// returns how many it read: the page after them, when they are fewer
	// than addrs, could not be read. An error says no more can be read:
	// ErrNoPageList that it cannot read lists, another that the target
	// cannot be read (it has gone, say). An empty list reads nothing and
	// says ErrNoPageList when a list would.
	ReadPageList(addrs []uint64, buf []byte) (int, error)
}

// ErrNoPageList is returned by a PageListReader that cannot read lists of
// pages; MemCache.Prefetch then does nothing.
var ErrNoPageList = errors.New("reading lists of pages is not supported")

// MemCache serves reads from a cache of target pages, valid for one stop.
// A read that misses fetches every missing page it spans in a single
// ReadPages call, so walking a structure costs one system call per page
// touched, not one per field. Reads from several goroutines proceed at
// once: the pages are kept in shards, each with its own lock, held only to
// record a page or look up one the index does not hold, never during a
// fetch; a read of one or two pages the index holds takes no lock
// (pageIndex). The pages' memory is a pageArena's.
type MemCache struct {
	src    PageReader
	shards [cacheShards]cacheShard
	// index finds the pages recorded in the shards without their locks.
	index atomic.Pointer[pageIndex]
	// gen counts Invalidate calls: pages fetched across one are not
	// recorded.
	gen atomic.Uint64

	arenaMu sync.Mutex
	arena   pageArena
}

// cacheShards is the number of shards of a MemCache; a page's shard is
// its page number modulo cacheShards.
const cacheShards = 16

// cacheShard is one shard of a MemCache.
type cacheShard struct {
	mu      sync.Mutex
	pages   map[uint64][]byte // page address -> page bytes (empty, not nil: unmapped)
	misses  int               // fetches of runs that begin in this shard
	lookups int               // reads that begin in this shard and that the index did not serve
	_       [64]byte          // keeps the shards' locks on their own cache lines
}

// NewMemCache returns an empty cache over src.
func NewMemCache(src PageReader) *MemCache {
	c := &MemCache{src: src}
	for i := range c.shards {
		c.shards[i].pages = make(map[uint64][]byte)
	}
	c.index.Store(newPageIndex(defaultIndexPages))
	return c
}

func (c *MemCache) shard(page uint64) *cacheShard {
	return &c.shards[(page/PageSize)%cacheShards]
}

// Invalidate forgets every cached page (call it when the target resumes,
// when no read is in progress, and begin none before it returns; a read
// still in progress records nothing).
func (c *MemCache) Invalidate() {
	c.gen.Add(1)
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		sh.pages = make(map[uint64][]byte)
		sh.mu.Unlock()
	}
	// After the shards: a record that passed its check of the generation
	// held its shard's lock until its page was indexed.
	c.index.Load().clear()
	c.arenaMu.Lock()
	c.arena.reset()
	c.arenaMu.Unlock()
}

// Reserve readies room for n pages before they are read (before the
// target is stopped, say), so that reading them costs no page fault, and
// an index that finds them without a lock.
func (c *MemCache) Reserve(n int) {
	if n > c.index.Load().capacity() {
		// Pages the old index held are found in the shards.
		c.index.Store(newPageIndex(n))
	}
	c.arenaMu.Lock()
	defer c.arenaMu.Unlock()
	c.arena.reserve(n)
}

// Readied reports how many pages of memory the cache has readied for
// reads in this stop, used or not.
func (c *MemCache) Readied() int {
	c.arenaMu.Lock()
	defer c.arenaMu.Unlock()
	n := 0
	for _, ch := range c.arena.chunks {
		n += len(ch) / PageSize
	}
	return n
}

// Stats reports how many reads the index did not serve (they looked their
// pages up in the shards: those that missed, and those of pages the
// index had no room for) and how many page runs were fetched from the
// source.
func (c *MemCache) Stats() (lookups, fetches int) {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		lookups += sh.lookups
		fetches += sh.misses
		sh.mu.Unlock()
	}
	return lookups, fetches
}

// Pages lists the addresses of the pages the cache holds that could be
// read, in ascending order.
func (c *MemCache) Pages() []uint64 {
	var out []uint64
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		for p, page := range sh.pages {
			if len(page) > 0 {
				out = append(out, p)
			}
		}
		sh.mu.Unlock()
	}
	slices.Sort(out)
	return out
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
	if c.readIndexed(addr, end, buf) {
		return nil
	}
	count := int(((end-1)&^(PageSize-1)-first)/PageSize) + 1
	var few [2][]byte
	pages := few[:0]
	if count > len(few) {
		pages = make([][]byte, 0, count)
	}
	pages = pages[:count]

	gen := c.gen.Load()
	missing := false
	for i := range pages {
		p := first + uint64(i)*PageSize
		sh := c.shard(p)
		sh.mu.Lock()
		if i == 0 {
			sh.lookups++
		}
		pages[i] = sh.pages[p]
		sh.mu.Unlock()
		missing = missing || pages[i] == nil
	}

	// Fetch each run of missing pages in one call, without a lock.
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

	// Pages are never written once recorded: copy without a lock.
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

// readIndexed fills buf from addr (to end, past it) when the index holds
// every page it spans (at most two: longer reads take the shards' path),
// and reports whether it did.
func (c *MemCache) readIndexed(addr, end uint64, buf []byte) bool {
	idx := c.index.Load()
	first := addr &^ (PageSize - 1)
	last := (end - 1) &^ (PageSize - 1)
	if last-first > PageSize {
		return false
	}
	p0 := idx.find(first)
	if p0 == nil {
		return false
	}
	if last == first {
		copy(buf, p0[addr-first:end-first])
		return true
	}
	p1 := idx.find(last)
	if p1 == nil {
		return false
	}
	n := copy(buf, p0[addr-first:])
	copy(buf[n:], p1[:end-last])
	return true
}

// Prefetch reads the pages holding addrs that are not cached yet, as few
// calls as the source allows (a PageListReader reads a thousand scattered
// pages in one, where reading them one by one costs up to three times as
// much), and keeps those it could read. It is advice: a page it cannot
// read is left to the read that needs it, which says why; nothing is done
// when the source reads no lists. Every page it reads takes room in the
// cache's memory: ask only for pages likely to be read.
func (c *MemCache) Prefetch(addrs []uint64) {
	src, ok := c.src.(PageListReader)
	if !ok || len(addrs) == 0 {
		return
	}
	gen := c.gen.Load()
	pages := make([]uint64, 0, len(addrs))
	for _, a := range addrs {
		pages = append(pages, a&^(PageSize-1))
	}
	slices.Sort(pages)
	pages = slices.Compact(pages)
	missing := pages[:0]
	for _, p := range pages {
		sh := c.shard(p)
		sh.mu.Lock()
		cached := sh.pages[p] != nil
		sh.mu.Unlock()
		if !cached {
			missing = append(missing, p)
		}
	}
	// A source that reads no lists (any more) takes no memory.
	if _, err := src.ReadPageList(nil, nil); err != nil {
		return
	}
	// One block of the cache's memory for the pages of each list, read
	// into in place however many calls the pages it cannot read take;
	// after maxPrefetchHoles of those, the rest is left to the reads.
	holes := 0
	for len(missing) > 0 && holes < maxPrefetchHoles {
		list := missing[:min(len(missing), maxPageList)]
		missing = missing[len(list):]
		block := c.alloc(len(list))
		for done := 0; done < len(list) && holes < maxPrefetchHoles; {
			got, err := src.ReadPageList(list[done:], block[done*PageSize:])
			if errors.Is(err, ErrNoPageList) {
				return
			}
			sh := c.shard(list[done])
			sh.mu.Lock()
			sh.misses++
			sh.mu.Unlock()
			if err != nil {
				return // the target cannot be read
			}
			got = min(max(got, 0), len(list)-done)
			for k := done; k < done+got; k++ {
				c.keep(gen, list[k], block[k*PageSize:(k+1)*PageSize:(k+1)*PageSize])
			}
			// The page after those read could not be: skipped.
			done += got + 1
			if done <= len(list) {
				holes++
			}
		}
	}
}

// maxPrefetchHoles is how many unreadable pages one Prefetch skips before
// it leaves the rest to the reads: each costs a system call.
const maxPrefetchHoles = 16

// maxPageList is the most pages one ReadPageList call is given (a
// system call takes at most 1024 iovecs).
const maxPageList = 1024

// keep records one page read by Prefetch (fetched from the source in
// generation gen), unless the cache was invalidated since or another read
// recorded it meanwhile.
func (c *MemCache) keep(gen, p uint64, page []byte) {
	sh := c.shard(p)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c.gen.Load() != gen {
		return
	}
	if _, ok := sh.pages[p]; !ok {
		sh.pages[p] = page
		c.index.Load().add(p, page)
	}
}

// fetch reads the run of pages starting at start into run (one slot per
// page, every one nil), and returns how many calls it made. A short read
// means the page after the bytes read is unmapped; the pages after it are
// fetched again, so one hole does not hide the mapped pages behind it.
// The run takes one block of memory, whatever its holes: the slot of each
// page is its own.
func (c *MemCache) fetch(start uint64, run [][]byte) int {
	block := c.alloc(len(run))
	calls := 0
	for i := 0; i < len(run); {
		tmp := block[i*PageSize:]
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

// alloc returns room for n pages from the arena.
func (c *MemCache) alloc(n int) []byte {
	c.arenaMu.Lock()
	defer c.arenaMu.Unlock()
	return c.arena.alloc(n)
}

// record keeps the pages of run, fetched from start, unless the cache was
// invalidated since the read began (generation gen). A page another read
// recorded meanwhile is kept, and replaces the copy in run, so every
// reader sees the same bytes.
func (c *MemCache) record(gen, start uint64, run [][]byte, fetches int) {
	first := c.shard(start)
	first.mu.Lock()
	first.misses += fetches
	first.mu.Unlock()
	for k, page := range run {
		p := start + uint64(k)*PageSize
		sh := c.shard(p)
		sh.mu.Lock()
		// Checked under the shard's lock: Invalidate counts before it
		// empties the shards.
		if c.gen.Load() != gen {
			sh.mu.Unlock()
			return
		}
		if old, ok := sh.pages[p]; ok {
			run[k] = old
		} else {
			sh.pages[p] = page
			c.index.Load().add(p, page)
		}
		sh.mu.Unlock()
	}
}

// pageIndex finds the readable pages a MemCache recorded without a lock:
// an open-addressing table of page addresses, each slot set once (its
// address, then its page) and never changed until clear. A page is added
// under its shard's lock after the shard recorded it; a page the index
// has no room for, or that is being added, is found in the shards. Its
// readers take no lock and write nothing, so reads from several CPUs do
// not contend (BenchmarkMemCacheHit: with two goroutines reading 5000
// pages, 80 ns a read through the shards' locks and maps, 50 through the
// index).
type pageIndex struct {
	slots []indexSlot
	mask  uint64
	// filled lists the slots set since the last clear, the first used
	// of it (each slot is set once), so that clear empties only those:
	// a trace empties the cache at each of thousands of stops, having
	// read a few pages.
	filled []uint32
	used   atomic.Int64
}

// indexSlot is one slot of a pageIndex: a page's address (0: free; no
// page at address 0 is indexed), then its bytes.
type indexSlot struct {
	addr atomic.Uint64
	page atomic.Pointer[[PageSize]byte]
}

// defaultIndexPages is how many pages a MemCache's index is sized for
// until Reserve asks for more.
const defaultIndexPages = 1024

// maxIndexProbes is how many slots a lookup or an addition looks at: a
// table at most half full finds nearly every page in one or two.
const maxIndexProbes = 16

// newPageIndex returns an index with room for n pages: at least twice as many
// slots, a power of two.
func newPageIndex(n int) *pageIndex {
	size := 1
	for size < 2*max(n, 1) {
		size <<= 1
	}
	return &pageIndex{slots: make([]indexSlot, size), mask: uint64(size - 1), filled: make([]uint32, size)}
}

// capacity is how many pages the index is sized for.
func (x *pageIndex) capacity() int { return len(x.slots) / 2 }

// home is the first slot looked at for page p (its page number, hashed).
func (x *pageIndex) home(p uint64) uint64 {
	return ((p / PageSize) * 0x9E3779B97F4A7C15 >> 32) & x.mask
}

// find returns the bytes of page p, nil when the index does not hold it.
func (x *pageIndex) find(p uint64) *[PageSize]byte {
	if p == 0 {
		return nil
	}
	i := x.home(p)
	for range maxIndexProbes {
		s := &x.slots[i]
		switch s.addr.Load() {
		case p:
			return s.page.Load() // nil while it is being added
		case 0:
			return nil
		}
		i = (i + 1) & x.mask
	}
	return nil
}

// add indexes page p, whose bytes are page, unless it is unreadable
// (empty), at address 0, or finds no free slot in maxIndexProbes. It is
// called with p's shard's lock held, once per page and stop.
func (x *pageIndex) add(p uint64, page []byte) {
	if len(page) != PageSize || p == 0 {
		return
	}
	i := x.home(p)
	for range maxIndexProbes {
		s := &x.slots[i]
		if s.addr.CompareAndSwap(0, p) {
			s.page.Store((*[PageSize]byte)(page))
			x.filled[x.used.Add(1)-1] = uint32(i) // its own element: at most one add per slot
			return
		}
		if s.addr.Load() == p {
			return
		}
		i = (i + 1) & x.mask
	}
}

// clear empties the slots set since the last clear; no read or addition
// may be under way, nor begin before it returns.
func (x *pageIndex) clear() {
	for _, i := range x.filled[:x.used.Load()] {
		x.slots[i].page.Store(nil)
		x.slots[i].addr.Store(0)
	}
	x.used.Store(0)
}
