package unwind

import (
	"bytes"
	"slices"
	"testing"

	ielf "github.com/ompd-inspect/ompd-inspect/target/elf"
)

// libcCode opens the C library and returns its code segment's file part.
func libcCode(t *testing.T) (*ielf.Image, ielf.Load, []byte) {
	t.Helper()
	im, err := ielf.Open("/usr/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	for _, l := range im.Loads() {
		if codeSegment(l) {
			code := make([]byte, l.Filesz)
			if _, err := im.ReadVaddr(l.Vaddr, code); err != nil {
				t.Fatal(err)
			}
			return im, l, code
		}
	}
	t.Fatal("libc has no code segment")
	return nil, ielf.Load{}, nil
}

// The scan finds every place the trampoline's code begins in libc's code
// (glibc has one, __restore_rt), counted here in the whole segment at
// once, whatever the size of the chunks it reads, including chunks whose
// boundary cuts the code in two.
func TestScanTramps(t *testing.T) {
	im, l, code := libcCode(t)
	var want []uint64
	for i := 0; ; {
		j := bytes.Index(code[i:], restoreRT)
		if j < 0 {
			break
		}
		want = append(want, l.Vaddr+uint64(i+j))
		i += j + 1
	}
	if len(want) != 1 {
		t.Fatalf("libc's code holds the trampoline's code %d times, want once", len(want))
	}
	cut := want[0] - l.Vaddr + 4 // a chunk ends 4 bytes into the code
	for _, chunk := range []uint64{scanChunk, 4096, cut, 1000} {
		s := scanTrampsBy(im, chunk)
		if !s.ok || !slices.Equal(s.addrs, want) {
			t.Errorf("chunks of %d: sites %#x (ok %v), want %#x", chunk, s.addrs, s.ok, want)
		}
	}
	s := trampolinesOf(im)
	if !s.has(want[0]) || s.has(want[0]+1) || !s.covers(want[0]) || s.covers(l.Vaddr+l.Filesz) {
		t.Errorf("trampolinesOf(libc) = %+v: want %#x, covering the code segment only", s, want[0])
	}
}

// Kept sites read back as written; an entry whose site lies outside the
// code, repeats, holds other code than the trampoline's, or is cut short
// or padded is refused.
func TestKeptTramps(t *testing.T) {
	im, l, _ := libcCode(t)
	s := scanTramps(im)
	if len(s.addrs) != 1 {
		t.Fatalf("libc's sites %#x, want one", s.addrs)
	}
	site := s.addrs[0]
	got, ok := decodeTramps(im, encodeTramps(s))
	if !ok || !slices.Equal(got.addrs, s.addrs) || !got.ok {
		t.Errorf("decode(encode(%#x)) = %+v, %v", s.addrs, got, ok)
	}
	for name, addrs := range map[string][]uint64{
		"outside the code":    {l.Vaddr + l.Filesz},
		"past the code's end": {l.Vaddr + l.Filesz - 4},
		"before the code":     {l.Vaddr - 0x100},
		"repeated":            {site, site},
		"other code":          {site + 1},
		"other code too":      {l.Vaddr + 0x10, site},
	} {
		if _, ok := decodeTramps(im, encodeTramps(&trampSites{addrs: addrs, ok: true})); ok {
			t.Errorf("%s: %#x accepted", name, addrs)
		}
	}
	b := encodeTramps(s)
	if _, ok := decodeTramps(im, b[:len(b)-1]); ok {
		t.Error("a cut entry accepted")
	}
	if _, ok := decodeTramps(im, append(b, 0)); ok {
		t.Error("an entry with bytes after it accepted")
	}
}
