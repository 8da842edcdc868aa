package target

import (
	"errors"
	"testing"
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
	reads, fetches := c.Stats()
	if fetches != src.calls || fetches != 2 {
		t.Fatalf("fetches = %d (source calls %d), want 2: pages must be fetched once per stop", fetches, src.calls)
	}
	if reads != 4 {
		t.Fatalf("reads = %d, want 4", reads)
	}
}
