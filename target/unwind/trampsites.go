package unwind

import (
	"bytes"
	"debug/elf"
	"slices"

	ielf "github.com/ompd-inspect/ompd-inspect/target/elf"
)

// A walk asks at every frame whether its pc is a sigreturn trampoline's
// (isTrampoline). For a pc in a module's read-only code the answer comes
// from the places the trampoline's code begins in the module's file,
// found once for the file by scanning its code (trampolinesOf) and kept
// across runs (elf.Image.KeepData): a few bytes read at each frame's pc
// cost, in system calls and fresh buffers, more than the rest of the
// walk.

// keptTrampsName names an image's trampoline sites kept across runs; its
// digit is the encoding's version.
const keptTrampsName = "unwind_tramps1"

// maxScannedCode bounds the code segment a scan reads (256 MiB): the pcs
// of a larger one are checked one by one.
const maxScannedCode = 256 << 20

// scanChunk is how much code a scan reads at a time.
const scanChunk = 1 << 20

// trampsKey keys an image's trampoline sites (elf.Image.Derived).
type trampsKey struct{}

// trampSites are the link-time addresses where the trampoline's code
// (restoreRT) begins in an image's read-only code segments, sorted. ok is
// false when a segment could not be scanned: the pcs are then checked by
// reading their code.
type trampSites struct {
	addrs []uint64
	code  []ielf.Load // the image's code segments (codeSegment)
	ok    bool
}

// newTrampSites returns the sites of no trampoline in im's code segments.
func newTrampSites(im *ielf.Image) *trampSites {
	s := &trampSites{ok: true}
	for _, l := range im.Loads() {
		if codeSegment(l) {
			s.code = append(s.code, l)
		}
	}
	return s
}

// trampolinesOf returns im's trampoline sites: those an earlier run kept,
// else a scan of its code (kept for later runs when it read all of it).
func trampolinesOf(im *ielf.Image) *trampSites {
	return im.Derived(trampsKey{}, func() any {
		if b := im.KeptData(keptTrampsName); b != nil {
			if s, ok := decodeTramps(im, b); ok {
				return s
			}
		}
		s := scanTramps(im)
		if s.ok {
			im.KeepData(keptTrampsName, encodeTramps(s))
		}
		return s
	}).(*trampSites)
}

// PrepareTrampolines finds im's trampoline sites before a target is
// stopped (trampolinesOf).
func PrepareTrampolines(im *ielf.Image) {
	if im != nil {
		trampolinesOf(im)
	}
}

// codeSegment reports whether l is a segment whose code ReadCode reads
// from the file: executable, not writable.
func codeSegment(l ielf.Load) bool {
	return l.Flags&elf.PF_X != 0 && l.Flags&elf.PF_W == 0 && l.Filesz > 0
}

// scanTramps finds where restoreRT begins in the file part of im's code
// segments.
func scanTramps(im *ielf.Image) *trampSites { return scanTrampsBy(im, scanChunk) }

// scanTrampsBy is scanTramps reading chunk bytes at a time.
func scanTrampsBy(im *ielf.Image, chunk uint64) *trampSites {
	s := newTrampSites(im)
	buf := make([]byte, 0, chunk+uint64(len(restoreRT)))
	for _, l := range s.code {
		if l.Filesz > maxScannedCode {
			s.ok = false
			continue
		}
		// Chunks overlap by the pattern's length less one, so that an
		// occurrence across two chunks is seen once.
		for off := uint64(0); off < l.Filesz; off += chunk {
			n := min(chunk+uint64(len(restoreRT)-1), l.Filesz-off)
			buf = buf[:n]
			if _, err := im.ReadVaddr(l.Vaddr+off, buf); err != nil {
				s.ok = false
				break
			}
			for i := 0; ; {
				j := bytes.Index(buf[i:], restoreRT)
				if j < 0 || uint64(i+j) >= chunk {
					break
				}
				s.addrs = append(s.addrs, l.Vaddr+off+uint64(i+j))
				i += j + 1
			}
		}
	}
	slices.Sort(s.addrs)
	s.addrs = slices.Compact(s.addrs)
	return s
}

// covers reports whether the scan read the code at link-time address a:
// a's segment is a code segment and was scanned.
func (s *trampSites) covers(a uint64) bool {
	if !s.ok {
		return false
	}
	for _, l := range s.code {
		if a >= l.Vaddr && a-l.Vaddr < l.Filesz {
			return true
		}
	}
	return false
}

// has reports whether the trampoline's code begins at link-time address a.
func (s *trampSites) has(a uint64) bool {
	_, found := slices.BinarySearch(s.addrs, a)
	return found
}

// maxKeptTramps bounds the sites kept for one image: more is no real
// library's, and is not kept.
const maxKeptTramps = 1024

// encodeTramps writes s for KeepData: the count, then each address as
// the difference from the one before.
func encodeTramps(s *trampSites) []byte {
	var w ielf.KeptWriter
	if len(s.addrs) > maxKeptTramps {
		return nil
	}
	w.Uint(uint64(len(s.addrs)))
	prev := uint64(0)
	for _, a := range s.addrs {
		w.Uint(a - prev)
		prev = a
	}
	return w.Data()
}

// decodeTramps reads what encodeTramps wrote for im. Each site must lie
// in one of im's code segments, with room for the trampoline's code,
// follow the one before, and hold the trampoline's code in the file; and
// every code segment must be one a scan reads whole. Otherwise the entry
// is refused (and the code scanned again).
func decodeTramps(im *ielf.Image, b []byte) (*trampSites, bool) {
	r := ielf.NewKeptReader(b)
	n := r.Count()
	if r.Bad() || n > maxKeptTramps {
		return nil, false
	}
	s := newTrampSites(im)
	for _, l := range s.code {
		if l.Filesz > maxScannedCode {
			return nil, false
		}
	}
	s.addrs = make([]uint64, 0, n)
	code := make([]byte, len(restoreRT))
	prev := uint64(0)
	for i := uint64(0); i < n; i++ {
		d := r.Uint()
		a := prev + d
		if r.Bad() || a < prev || (i > 0 && d == 0) || !s.inCode(a) {
			return nil, false
		}
		if _, err := im.ReadVaddr(a, code); err != nil || !bytes.Equal(code, restoreRT) {
			return nil, false
		}
		s.addrs = append(s.addrs, a)
		prev = a
	}
	if !r.Done() {
		return nil, false
	}
	return s, true
}

// inCode reports whether the trampoline's code fits at link-time address
// a within the file part of one of the code segments.
func (s *trampSites) inCode(a uint64) bool {
	for _, l := range s.code {
		if a >= l.Vaddr && a-l.Vaddr <= l.Filesz-uint64(len(restoreRT)) && l.Filesz >= uint64(len(restoreRT)) {
			return true
		}
	}
	return false
}
