package core

import (
	"fmt"
	"io"
	"sort"

	"github.com/ompd-inspect/ompd-inspect/target"
)

// ReadMemory fills buf with the process memory at addr. Bytes come from
// the core's segments; bytes of a mapped file that the core did not dump
// come from the module's file when its build-id matched (or could not be
// checked). Any byte in neither gives an error wrapping
// target.ErrUnmapped. Each contiguous piece costs one read of the core or
// of the file.
func (c *Core) ReadMemory(addr uint64, buf []byte) error {
	return c.read(addr, buf, true)
}

// ReadCode implements target.CodeReader: code is read as any memory is,
// from the core's segments first (a page the process wrote, which the
// kernel dumps), then from the module's file.
func (c *Core) ReadCode(addr uint64, buf []byte) error { return c.ReadMemory(addr, buf) }

// readCore is ReadMemory restricted to the bytes the core holds.
func (c *Core) readCore(addr uint64, buf []byte) error {
	return c.read(addr, buf, false)
}

func (c *Core) read(addr uint64, buf []byte, files bool) error {
	n := 0
	for n < len(buf) {
		cur := addr + uint64(n)
		if cur < addr {
			return c.unmapped(addr, len(buf), cur, "address wraps", nil)
		}
		rem := uint64(len(buf) - n)
		// limit is how far the current source may serve: the end of the
		// segment holding cur, or the start of the next one.
		limit := ^uint64(0) - cur
		i := sort.Search(len(c.segs), func(i int) bool { return c.segs[i].vaddr > cur })
		if i < len(c.segs) {
			limit = c.segs[i].vaddr - cur
		}
		if i > 0 {
			s := c.segs[i-1]
			if segOff := cur - s.vaddr; segOff < s.memsz {
				if segOff < s.avail {
					k := min(rem, s.avail-segOff)
					got, err := c.f.ReadAt(buf[n:n+int(k)], int64(s.off+segOff))
					if uint64(got) < k {
						if err == nil {
							err = io.ErrUnexpectedEOF
						}
						return c.unmapped(addr, len(buf), cur+uint64(got), fmt.Sprintf("reading core at offset %#x", s.off+segOff+uint64(got)), err)
					}
					n += int(k)
					continue
				}
				if segOff < s.dumped {
					return c.unmapped(addr, len(buf), cur, fmt.Sprintf("core is truncated: segment at %#x has only %d of %d bytes", s.vaddr, s.avail, s.dumped), nil)
				}
				limit = s.memsz - segOff
			}
		}
		if !files {
			return c.unmapped(addr, len(buf), cur, "not in the core", nil)
		}
		m := c.mapAt(cur)
		if m == nil {
			return c.unmapped(addr, len(buf), cur, "not in the core nor in a mapped file", nil)
		}
		if m.mod == nil || m.mod.Image == nil {
			return c.unmapped(addr, len(buf), cur, fmt.Sprintf("not in the core, and %s is not available", m.name), nil)
		}
		k := min(rem, limit, m.end-cur)
		if _, err := m.mod.Image.ReadVaddr(cur-m.mod.Bias, buf[n:n+int(k)]); err != nil {
			return c.unmapped(addr, len(buf), cur, "not in the core", err)
		}
		n += int(k)
	}
	return nil
}

// unmapped builds the error for a read that failed at address bad.
func (c *Core) unmapped(addr uint64, size int, bad uint64, why string, cause error) error {
	if cause != nil {
		return fmt.Errorf("reading %d bytes at %#x from core %s: %#x %s: %w: %w", size, addr, c.Path, bad, why, target.ErrUnmapped, cause)
	}
	return fmt.Errorf("reading %d bytes at %#x from core %s: %#x %s: %w", size, addr, c.Path, bad, why, target.ErrUnmapped)
}

// mapAt returns the NT_FILE mapping containing addr, or nil.
func (c *Core) mapAt(addr uint64) *mapping {
	i := sort.Search(len(c.maps), func(i int) bool { return c.maps[i].start > addr }) - 1
	if i < 0 || addr >= c.maps[i].end {
		return nil
	}
	return &c.maps[i]
}
