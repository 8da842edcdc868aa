package target

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// holeReader serves pages 0x1000-0x5000 except the hole at 0x3000, stopping
// a read at the first unmapped page as process_vm_readv does.
type holeReader struct{ calls int }

func (h *holeReader) ReadPages(addr uint64, buf []byte) (int, error) {
	h.calls++
	n := 0
	for n < len(buf) {
		a := addr + uint64(n)
		if a < 0x1000 || a >= 0x5000 || (a >= 0x3000 && a < 0x4000) {
			return n, errors.New("unmapped")
		}
		buf[n] = byte(a >> 12)
		n++
	}
	return n, nil
}

func TestMemCacheHoleDoesNotHideLaterPages(t *testing.T) {
	src := &holeReader{}
	c := NewMemCache(src)
	buf := make([]byte, 0x4000)
	err := c.ReadMemory(0x1000, buf)
	if !errors.Is(err, ErrUnmapped) {
		t.Fatalf("read across the hole: err = %v, want ErrUnmapped", err)
	}
	if want := "reading 16384 bytes at 0x1000: 0x3000: address not mapped"; err.Error() != want {
		t.Fatalf("error = %q, want %q", err, want)
	}
	var b [2]byte
	if err := c.ReadMemory(0x4fff, b[:1]); err != nil || b[0] != 4 {
		t.Fatalf("page after the hole: %v, byte %d; want 4", err, b[0])
	}
	if err := c.ReadMemory(0x2fff, b[:2]); !errors.Is(err, ErrUnmapped) {
		t.Fatalf("read into the hole: err = %v", err)
	}
	if err := c.ReadMemory(0x1fff, b[:2]); err != nil || b[0] != 1 || b[1] != 2 {
		t.Fatalf("read across pages 1-2: %v %v", err, b)
	}
	lookups, fetches := c.Stats()
	if fetches != src.calls || fetches != 2 {
		t.Fatalf("fetches = %d (source calls %d), want 2: pages must be fetched once per stop", fetches, src.calls)
	}
	// The reads of pages held (0x4fff; 0x1fff across pages 1 and 2) were
	// served by the index; the first read and the read into the hole,
	// whose page is not held, looked their pages up.
	if lookups != 2 {
		t.Fatalf("lookups = %d, want 2", lookups)
	}
}

// gateReader serves every page with its page number, and holds each
// ReadPages call until want calls are inside at once.
type gateReader struct {
	want    int
	mu      sync.Mutex
	inside  int
	all     chan struct{}
	calls   int
	onFetch func()
}

func (g *gateReader) ReadPages(addr uint64, buf []byte) (int, error) {
	g.mu.Lock()
	g.calls++
	g.inside++
	if g.inside == g.want {
		close(g.all)
	}
	g.mu.Unlock()
	select {
	case <-g.all:
	case <-time.After(time.Minute):
		return 0, errors.New("the other fetch never came in: fetches are serialized")
	}
	if g.onFetch != nil {
		g.onFetch()
	}
	for i := range buf {
		buf[i] = byte((addr + uint64(i)) >> 12)
	}
	return len(buf), nil
}

// TestMemCacheFetchesConcurrently checks that two reads that miss fetch at
// the same time (the lock is not held during a fetch), and that each gets
// its own pages.
func TestMemCacheFetchesConcurrently(t *testing.T) {
	src := &gateReader{want: 2, all: make(chan struct{})}
	c := NewMemCache(src)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			var b [1]byte
			// Pages cacheShards apart: the same shard, whose lock must
			// not be held during a fetch either.
			addr := uint64(0x10000 + i*cacheShards*PageSize)
			if errs[i] = c.ReadMemory(addr, b[:]); errs[i] == nil && b[0] != byte(addr>>12) {
				errs[i] = fmt.Errorf("read %d at %#x, want %d", b[0], addr, byte(addr>>12))
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, fetches := c.Stats(); fetches != 2 {
		t.Fatalf("fetches = %d, want 2", fetches)
	}
}

// TestMemCacheInvalidateDuringFetch checks that pages fetched across an
// Invalidate (the target resumed meanwhile) are not kept, and that pages
// fetched after it, into the arena's first chunk used again, are right.
func TestMemCacheInvalidateDuringFetch(t *testing.T) {
	src := &gateReader{want: 1, all: make(chan struct{})}
	c := NewMemCache(src)
	src.onFetch = c.Invalidate
	var b [1]byte
	if err := c.ReadMemory(0x5000, b[:]); err != nil || b[0] != 5 {
		t.Fatalf("read: %v, byte %d", err, b[0])
	}
	src.onFetch = nil
	if err := c.ReadMemory(0x5000, b[:]); err != nil || b[0] != 5 {
		t.Fatalf("second read: %v, byte %d", err, b[0])
	}
	if src.calls != 2 {
		t.Fatalf("the page was fetched %d times, want 2: a page fetched across Invalidate must not be kept", src.calls)
	}
	// Another stop: every page is fetched again, into the same chunk.
	c.Invalidate()
	buf := make([]byte, 3*PageSize)
	if err := c.ReadMemory(0x7000, buf); err != nil {
		t.Fatal(err)
	}
	for i, v := range buf {
		if want := byte((0x7000 + i) >> 12); v != want {
			t.Fatalf("byte %d after Invalidate is %d, want %d", i, v, want)
		}
	}
	if _, fetches := c.Stats(); fetches != 3 {
		t.Fatalf("fetches = %d, want 3", fetches)
	}
}

// TestPageArena checks the arena's chunks: pages are handed out in order
// without overlap, the second chunk is secondChunkPages, a request larger
// than the next chunk gets a chunk of its own size (not rounded up, and
// not advised to be huge pages), and a reservation is used before
// anything else is allocated.
func TestPageArena(t *testing.T) {
	var a pageArena
	p1 := a.alloc(1)
	p2 := a.alloc(firstChunkPages - 1)
	if &p2[0] != &a.chunks[0][PageSize] || len(p2) != (firstChunkPages-1)*PageSize || &p1[0] != &a.chunks[0][0] {
		t.Fatalf("the first two allocations are not the first chunk, in order")
	}
	three := a.alloc(3 * firstChunkPages)
	if len(a.chunks) != 2 || len(a.chunks[1]) != secondChunkPages*PageSize || &three[0] != &a.chunks[1][0] {
		t.Fatalf("a request of 3 small chunks: %d chunks, the last of %d bytes; want a second chunk of %d pages", len(a.chunks), len(a.chunks[len(a.chunks)-1]), secondChunkPages)
	}
	const bigPages = 4*secondChunkPages + 1 // more than the next chunk, twice the second
	big := a.alloc(bigPages)
	if len(a.chunks) != 3 || len(a.chunks[2]) != bigPages*PageSize || &big[0] != &a.chunks[2][0] {
		t.Fatalf("a request of %d pages: %d chunks, the last of %d bytes; want a third chunk of %d bytes", bigPages, len(a.chunks), len(a.chunks[len(a.chunks)-1]), bigPages*PageSize)
	}
	if lo := uintptr(unsafe.Pointer(&big[0])); adviseHuge(t, lo, lo+uintptr(len(big))) {
		t.Errorf("the arena's chunk was advised to hold huge pages (\"hg\" in its VmFlags)")
	}
	a.reset()
	if again := a.alloc(1); len(a.chunks) != 1 || &again[0] != &p1[0] {
		t.Fatal("after reset, the arena did not use its small first chunk again")
	}

	var r pageArena
	r.reserve(5000)
	if len(r.chunks) != 1 || len(r.chunks[0]) < 5000*PageSize {
		t.Fatalf("reserve(5000): %d chunks", len(r.chunks))
	}
	for range len(r.chunks[0]) / PageSize {
		r.alloc(1)
	}
	if len(r.chunks) != 1 {
		t.Fatalf("the reserved chunk used up: %d chunks, want 1", len(r.chunks))
	}
	r.reserve(10)
	if len(r.chunks) != 2 {
		t.Fatalf("reserve beyond the first chunk: %d chunks, want 2", len(r.chunks))
	}
	// A large first chunk is not kept: the heap gets it back.
	r.reset()
	if len(r.chunks) != 0 {
		t.Fatalf("after reset, %d chunks kept of a reservation; want none", len(r.chunks))
	}
}

// TestMemCacheConcurrentReads reads overlapping ranges from many
// goroutines (run with -race) and checks every byte.
func TestMemCacheConcurrentReads(t *testing.T) {
	c := NewMemCache(&gateReader{want: 1, all: make(chan struct{})})
	var wg sync.WaitGroup
	var bad atomic.Int32
	for g := range 8 {
		wg.Go(func() {
			for k := range 200 {
				addr := uint64(0x1000 + (g*997+k*131)%0x1f00)
				buf := make([]byte, 1+(k%3)*700)
				if err := c.ReadMemory(addr, buf); err != nil {
					bad.Add(1)
					continue
				}
				for i, v := range buf {
					if v != byte((addr+uint64(i))>>12) {
						bad.Add(1)
						break
					}
				}
			}
		})
	}
	wg.Wait()
	if n := bad.Load(); n != 0 {
		t.Fatalf("%d reads failed or returned wrong bytes", n)
	}
}

// unmappedReader has nothing mapped: every read stops at once.
type unmappedReader struct{ calls atomic.Int32 }

func (u *unmappedReader) ReadPages(uint64, []byte) (int, error) {
	u.calls.Add(1)
	return 0, errors.New("unmapped")
}

// TestMemCacheUnmappedRunMemory checks that a read across unmapped pages,
// which fetches again after each one, takes memory for the run once, not
// once per retry.
func TestMemCacheUnmappedRunMemory(t *testing.T) {
	src := &unmappedReader{}
	c := NewMemCache(src)
	const pages = 128
	err := c.ReadMemory(0x100000, make([]byte, pages*PageSize))
	if !errors.Is(err, ErrUnmapped) {
		t.Fatalf("err = %v, want ErrUnmapped", err)
	}
	if n := src.calls.Load(); n != pages {
		t.Fatalf("%d fetches, want one per page (%d)", n, pages)
	}
	held := 0
	for _, ch := range c.arena.chunks {
		held += len(ch)
	}
	if held > 2*pages*PageSize {
		t.Fatalf("the cache holds %d KiB for a read of %d KiB", held>>10, pages*PageSize>>10)
	}
}

// TestAlignedPart: the part of a slice that begins and ends on a multiple
// of the alignment, at every offset of a slice into an aligned buffer.
func TestAlignedPart(t *testing.T) {
	buf := alignedPart(make([]byte, 5*PageSize), PageSize)[:4*PageSize]
	for _, c := range []struct{ from, to, wantFrom, wantLen int }{
		{0, 4 * PageSize, 0, 4 * PageSize},
		{1, 4 * PageSize, PageSize, 3 * PageSize},
		{0, 4*PageSize - 1, 0, 3 * PageSize},
		{PageSize - 1, 2*PageSize + 5, PageSize, PageSize},
		{1, PageSize, 0, 0},                // no whole page
		{PageSize + 1, PageSize + 2, 0, 0}, // the next boundary is past the end
	} {
		got := alignedPart(buf[c.from:c.to], PageSize)
		if len(got) != c.wantLen {
			t.Errorf("[%d:%d]: %d bytes, want %d", c.from, c.to, len(got), c.wantLen)
			continue
		}
		if c.wantLen > 0 && &got[0] != &buf[c.wantFrom] {
			t.Errorf("[%d:%d]: begins at another byte than %d", c.from, c.to, c.wantFrom)
		}
	}
	if got := alignedPart(nil, PageSize); len(got) != 0 {
		t.Errorf("nil: %d bytes", len(got))
	}
}

// listReader is holeReader that also reads lists of pages, stopping at
// the first it cannot read as process_vm_readv does; with refuse set it
// reads no lists.
type listReader struct {
	holeReader
	lists  [][]uint64 // the lists asked for
	refuse bool
	calls  int // ReadPageList calls
}

func (l *listReader) ReadPageList(addrs []uint64, buf []byte) (int, error) {
	l.calls++
	if l.refuse {
		return 0, ErrNoPageList
	}
	if len(addrs) == 0 {
		return 0, nil
	}
	l.lists = append(l.lists, append([]uint64(nil), addrs...))
	for i, a := range addrs {
		if got, _ := l.ReadPages(a, buf[i*PageSize:(i+1)*PageSize]); got < PageSize {
			return i, nil
		}
	}
	return len(addrs), nil
}

// goneReader is a listReader whose lists fail as for a target that went.
type goneReader struct{ *listReader }

func (g *goneReader) ReadPageList(addrs []uint64, buf []byte) (int, error) {
	g.calls++
	return 0, errors.New("no such process")
}

// TestMemCachePrefetch: Prefetch reads the pages not cached yet in one
// list, sorted and without duplicates; the pages after one it cannot read
// are read in the next list and kept; the reads that follow cost nothing,
// and a read of the page it could not read fails as it does without
// Prefetch. A source that reads no lists is left alone.
func TestMemCachePrefetch(t *testing.T) {
	src := &listReader{}
	c := NewMemCache(src)
	var b [1]byte
	if err := c.ReadMemory(0x1000, b[:]); err != nil || b[0] != 1 {
		t.Fatalf("page 1: %v %v", err, b)
	}
	c.Prefetch([]uint64{0x4010, 0x1ff0, 0x2000, 0x3008, 0x1000, 0x4020})
	want := [][]uint64{{0x2000, 0x3000, 0x4000}, {0x4000}}
	if fmt.Sprint(src.lists) != fmt.Sprint(want) {
		t.Fatalf("lists read %#x, want %#x", src.lists, want)
	}
	calls := src.calls
	for _, a := range []uint64{0x2000, 0x4fff} {
		if err := c.ReadMemory(a, b[:]); err != nil || b[0] != byte(a>>12) {
			t.Fatalf("prefetched page at %#x: %v %v", a, err, b)
		}
	}
	if src.calls != calls {
		t.Fatalf("reading prefetched pages read the source %d times", src.calls-calls)
	}
	if err := c.ReadMemory(0x3000, b[:]); err == nil || err.Error() != "reading 1 bytes at 0x3000: 0x3000: address not mapped" {
		t.Fatalf("the page Prefetch could not read: %v", err)
	}

	refusing := &listReader{refuse: true}
	c = NewMemCache(refusing)
	c.Prefetch([]uint64{0x1000, 0x2000})
	if _, fetches := c.Stats(); fetches != 0 || refusing.calls != 1 || refusing.holeReader.calls != 0 || c.Readied() != 0 {
		t.Fatalf("a source that reads no lists: %d fetches, %d lists, %d reads, %d pages readied", fetches, refusing.calls, refusing.holeReader.calls, c.Readied())
	}

	// Nothing readable, a thousand pages: one block of memory, and
	// maxPrefetchHoles calls (after the empty one that asks whether
	// lists are read).
	none := &listReader{}
	c = NewMemCache(none)
	var far []uint64
	for i := range 1000 {
		far = append(far, 0x100000+uint64(i)*PageSize)
	}
	c.Prefetch(far)
	if none.calls != 1+maxPrefetchHoles || c.Readied() > 2*len(far) {
		t.Fatalf("nothing readable: %d calls (want %d), %d pages readied", none.calls, 1+maxPrefetchHoles, c.Readied())
	}
	// A target that cannot be read any more: the one empty call.
	gone := &listReader{}
	c = NewMemCache(&goneReader{gone})
	c.Prefetch(far)
	if gone.calls != 1 || c.Readied() != 0 {
		t.Fatalf("a target gone: %d calls, %d pages readied", gone.calls, c.Readied())
	}
	plain := NewMemCache(&holeReader{})
	plain.Prefetch([]uint64{0x1000})
	if _, fetches := plain.Stats(); fetches != 0 {
		t.Fatalf("a source without lists: %d fetches", fetches)
	}
}

// everyReader serves every page, each byte its page number's low byte.
type everyReader struct{}

func (everyReader) ReadPages(addr uint64, buf []byte) (int, error) {
	for i := range buf {
		buf[i] = byte((addr + uint64(i)) >> 12)
	}
	return len(buf), nil
}

// TestMemCachePages: Pages lists the pages read in ascending order (pages
// of one shard read in descending order among them), and not the hole a
// read met nor the pages of no read.
func TestMemCachePages(t *testing.T) {
	c := NewMemCache(&holeReader{})
	if got := c.Pages(); len(got) != 0 {
		t.Fatalf("pages of an empty cache: %#x", got)
	}
	var b [2]byte
	_ = c.ReadMemory(0x4fff, b[:1])
	_ = c.ReadMemory(0x2fff, b[:2]) // page 0x2000, then the hole at 0x3000
	_ = c.ReadMemory(0x1000, b[:1])
	want := []uint64{0x1000, 0x2000, 0x4000}
	if got := c.Pages(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Pages() = %#x, want %#x", got, want)
	}
	c.Invalidate()
	if got := c.Pages(); len(got) != 0 {
		t.Fatalf("pages after Invalidate: %#x", got)
	}

	c = NewMemCache(everyReader{})
	want = nil
	for i := uint64(0); i < 8; i++ {
		want = append(want, 0x1000+i*cacheShards*PageSize) // all in shard 1
	}
	for i := len(want) - 1; i >= 0; i-- {
		if err := c.ReadMemory(want[i], b[:1]); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Pages(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Pages() = %#x, want %#x", got, want)
	}
}

// BenchmarkMemCacheHit reads 16 bytes at random places within one of 64
// or 5000 cached pages, on as many goroutines as -cpu says (ns/op is the
// wall time over all of them): the cost of a read the cache holds, which
// a report of a thousand threads makes 70 000 times.
func BenchmarkMemCacheHit(b *testing.B) {
	for _, n := range []int{64, 5000} {
		b.Run(fmt.Sprint(n, "pages"), func(b *testing.B) { benchmarkMemCacheHit(b, n) })
	}
}

func benchmarkMemCacheHit(b *testing.B, n int) {
	c := NewMemCache(everyReader{})
	c.Reserve(n)
	addrs := make([]uint64, 0, n)
	for i := range n {
		a := 0x7f0000000000 + uint64(i)*3*PageSize
		addrs = append(addrs, a)
		var x [8]byte
		if err := c.ReadMemory(a, x[:]); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(1, 2))
		var x [16]byte
		for pb.Next() {
			a := addrs[r.IntN(len(addrs))] + uint64(r.IntN(PageSize-len(x)))
			if err := c.ReadMemory(a, x[:]); err != nil {
				panic(err)
			}
		}
	})
}

// changingReader serves every byte a value of its own address and of the
// stop (changingByte), reading lists of pages too: what a page holds
// changes from one stop to the next, and a read at a wrong offset or of
// a wrong page shows.
type changingReader struct{ stop byte }

func changingByte(addr uint64, stop byte) byte { return byte(addr) ^ byte(addr>>12)*7 + stop }

func (r *changingReader) ReadPages(addr uint64, buf []byte) (int, error) {
	for i := range buf {
		buf[i] = changingByte(addr+uint64(i), r.stop)
	}
	return len(buf), nil
}

func (r *changingReader) ReadPageList(addrs []uint64, buf []byte) (int, error) {
	for i, a := range addrs {
		_, _ = r.ReadPages(a, buf[i*PageSize:(i+1)*PageSize])
	}
	return len(addrs), nil
}

// checkChanging reads n bytes at addr from c and compares them with what
// a changingReader in stop holds there.
func checkChanging(t *testing.T, c *MemCache, addr uint64, n int, stop byte) {
	t.Helper()
	b := make([]byte, n)
	if err := c.ReadMemory(addr, b); err != nil {
		t.Fatalf("stop %d, read of %d bytes at %#x: %v", stop, n, addr, err)
	}
	for k := range b {
		if want := changingByte(addr+uint64(k), stop); b[k] != want {
			t.Fatalf("stop %d, read of %d bytes at %#x: byte %d is %#x, want %#x", stop, n, addr, k, b[k], want)
		}
	}
}

// TestMemCacheIndex: a read of held pages is served by the index, without
// a lookup in the shards, with the bytes of the right offsets, within a
// page and across two; the pages the index has no room for are served by
// the shards; after Invalidate (the target ran), neither serves a page
// of the stop before.
func TestMemCacheIndex(t *testing.T) {
	src := &changingReader{}
	c := NewMemCache(src)
	c.index.Store(newPageIndex(8)) // 16 slots: the first 16 pages read
	if maxIndexProbes < 16 {
		t.Fatalf("maxIndexProbes %d: the test counts on an addition looking at all 16 slots", maxIndexProbes)
	}
	const pages = 40
	check := func(stop byte) {
		t.Helper()
		for i := range pages {
			base := uint64(0x10000 + i*PageSize)
			checkChanging(t, c, base+0xffe, 4, stop)     // across pages 0x10+i and 0x11+i
			checkChanging(t, c, base+0x123, 40, stop)    // within page 0x10+i
			checkChanging(t, c, base+0x800, 0x900, stop) // across, longer
		}
	}
	check(0)
	lookups, fetches := c.Stats()
	// One fetch a round (pages 0x10 and 0x11 in one). The first read of
	// each round looks its new page up; from round 15 on, the index is
	// full: round 15's last read, and every read after it, looks up
	// page 0x20 or later.
	if want := 15 + 2 + 3*(pages-16); lookups != want || fetches != pages {
		t.Fatalf("first reads: %d lookups %d fetches, want %d and %d", lookups, fetches, want, pages)
	}
	check(0)
	again, fetchesAgain := c.Stats()
	if fetchesAgain != fetches {
		t.Fatalf("held pages fetched again: %d fetches, want %d", fetchesAgain, fetches)
	}
	// The index holds the first 16 pages read, 0x10000 to 0x1f000: it
	// served the 15 rounds of reads within them (3 reads each), and the
	// within-page read of round 15; the others looked up their pages in
	// the shards.
	if served := 3*pages - (again - lookups); served != 3*15+1 {
		t.Fatalf("the index served %d of %d reads of held pages, want %d", served, 3*pages, 3*15+1)
	}

	c.Invalidate()
	src.stop = 1
	check(1)
	if _, f := c.Stats(); f != 2*pages {
		t.Fatalf("after Invalidate: %d fetches, want %d: every page is read again", f, 2*pages)
	}
}

// TestMemCacheIndexReserved: Reserve sizes the index for the pages it
// readies, and the pages Prefetch reads are indexed too: after reading
// ahead 3000 pages and reading each, reading them all again looks up none
// in the shards; Invalidate empties it.
func TestMemCacheIndexReserved(t *testing.T) {
	src := &changingReader{}
	c := NewMemCache(src)
	c.Reserve(3000)
	if got := c.index.Load().capacity(); got < 3000 {
		t.Fatalf("index for %d pages after Reserve(3000)", got)
	}
	var addrs []uint64
	for i := range 3000 {
		addrs = append(addrs, 0x7f0000000000+uint64(i)*5*PageSize)
	}
	c.Prefetch(addrs)
	for _, a := range addrs {
		checkChanging(t, c, a+0x10, 8, 0)
	}
	lookups, fetches := c.Stats()
	if lookups != 0 {
		t.Fatalf("reads of pages read ahead: %d lookups in the shards, want none", lookups)
	}
	if x := c.index.Load(); x.used.Load() != 3000 {
		t.Fatalf("%d slots set, want 3000", x.used.Load())
	}
	c.Invalidate()
	if x := c.index.Load(); x.used.Load() != 0 || x.find(addrs[0]) != nil || x.find(addrs[2999]) != nil {
		t.Fatalf("after Invalidate: %d slots set, pages found %v %v", x.used.Load(), x.find(addrs[0]) != nil, x.find(addrs[2999]) != nil)
	}
	src.stop = 2
	checkChanging(t, c, addrs[7]+0x10, 8, 2)
	if _, f := c.Stats(); f != fetches+1 {
		t.Fatalf("a read after Invalidate made %d fetches, want 1", f-fetches)
	}
}

// TestPageIndex: find gives the bytes added for a page, nil for a page not
// added, an unreadable page or address 0, and nothing once cleared; a
// full index adds nothing more.
func TestPageIndex(t *testing.T) {
	x := newPageIndex(2) // 4 slots
	page := func(b byte) []byte { return bytes.Repeat([]byte{b}, PageSize) }
	x.add(0x1000, page(1))
	x.add(0x2000, page(2))
	x.add(0x3000, []byte{}) // unreadable
	x.add(0, page(9))
	x.add(0x2000, page(7)) // already there: kept
	if p := x.find(0x1000); p == nil || p[0] != 1 {
		t.Fatalf("find(0x1000) = %v, want page 1", p)
	}
	if p := x.find(0x2000); p == nil || p[0] != 2 {
		t.Fatalf("find(0x2000) = %v, want page 2 as first added", p)
	}
	for _, a := range []uint64{0x3000, 0, 0x4000} {
		if p := x.find(a); p != nil {
			t.Fatalf("find(%#x) = page %d, want nil", a, p[0])
		}
	}
	x.add(0x5000, page(5))
	x.add(0x6000, page(6))
	x.add(0x8000, page(8)) // no slot left
	if p := x.find(0x8000); p != nil {
		t.Fatal("a full index found a page it had no room for")
	}
	if p := x.find(0x6000); p == nil || p[0] != 6 {
		t.Fatalf("find(0x6000) = %v, want page 6", p)
	}
	x.clear()
	for _, a := range []uint64{0x1000, 0x2000, 0x5000, 0x6000} {
		if p := x.find(a); p != nil {
			t.Fatalf("after clear, find(%#x) = page %d, want nil", a, p[0])
		}
	}
	x.add(0x8000, page(8)) // room again
	if p := x.find(0x8000); p == nil || p[0] != 8 || x.used.Load() != 1 {
		t.Fatalf("after clear, find(0x8000) = %v with %d slots set, want page 8 in one", p, x.used.Load())
	}
}
