package ptrace

import (
	"fmt"
	"sync/atomic"

	"github.com/ompd-inspect/ompd-inspect/target"
)

// memView is a process's memory as a Process (and, before the stop, a
// Running) reads it: through a page cache, or straight from the process
// (the cache's source), until the view is ended, after which every read
// fails with an error wrapping endErr. It implements target.PageReader,
// target.PageListReader and target.Prefetcher for the types that embed
// it, and is safe for concurrent use.
type memView struct {
	pid    int
	mem    *memReader
	cache  *target.MemCache
	ended  atomic.Bool
	endErr error // what reads after the end wrap: errClosed, errRehearsalOver
}

// endedError is the error of a read of n bytes at addr after the end.
func (v *memView) endedError(addr uint64, n int) error {
	return fmt.Errorf("process %d: reading %d bytes at %#x: %w", v.pid, n, addr, v.endErr)
}

// ReadMemory fills buf from the process's memory at addr through the page
// cache. It fails with an error wrapping target.ErrUnmapped when any byte
// is unreadable, and once the view has ended (a Process's after Detach or
// Close).
func (v *memView) ReadMemory(addr uint64, buf []byte) error {
	if v.ended.Load() {
		return v.endedError(addr, len(buf))
	}
	if err := v.cache.ReadMemory(addr, buf); err != nil {
		return fmt.Errorf("process %d: %w", v.pid, err)
	}
	return nil
}

// ReadPages reads len(buf) bytes at addr straight from the process,
// bypassing the cache (target.PageReader). It returns how many bytes were
// read; when fewer than asked, the error says why and wraps
// target.ErrUnmapped if the rest is not mapped.
func (v *memView) ReadPages(addr uint64, buf []byte) (int, error) {
	if v.ended.Load() {
		return 0, v.endedError(addr, len(buf))
	}
	return v.mem.ReadPages(addr, buf)
}

// ReadPageList reads scattered pages straight from the process
// (target.PageListReader, for the cache's Prefetch).
func (v *memView) ReadPageList(addrs []uint64, buf []byte) (int, error) {
	if v.ended.Load() {
		return 0, fmt.Errorf("process %d: reading %d pages: %w", v.pid, len(addrs), v.endErr)
	}
	return v.mem.ReadPageList(addrs, buf)
}

// Ended reports whether the view's reads have ended (target.Ender).
func (v *memView) Ended() bool { return v.ended.Load() }

// Prefetch reads ahead the pages holding addrs into the cache
// (target.Prefetcher); nothing once the view has ended.
func (v *memView) Prefetch(addrs []uint64) {
	if !v.ended.Load() {
		v.cache.Prefetch(addrs)
	}
}
