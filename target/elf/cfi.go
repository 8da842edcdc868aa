package elf

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sort"
	"sync"
	"weak"

	"github.com/go-delve/delve/pkg/dwarf/frame"
)

// Limits on the call frame information that is loaded.
const (
	// MaxFrameSectionBytes is the largest (uncompressed) .eh_frame or
	// .debug_frame section that is parsed.
	MaxFrameSectionBytes = 1 << 26
	// MaxFDEs is the largest number of frame description entries kept
	// for one image.
	MaxFDEs = 1 << 22
)

// cfiIndex holds the parsed call frame information of an image.
type cfiIndex struct {
	once sync.Once
	fdes frame.FrameDescriptionEntries
	err  error
}

// cfiIndexes maps each Image to its cfiIndex. It lives outside Image so
// that this file does not change the struct elf.go declares. The keys are
// weak: an Image that is no longer referenced is collected, and a cleanup
// then removes its entry.
var (
	cfiMu      sync.Mutex
	cfiIndexes = map[weak.Pointer[Image]]*cfiIndex{}
)

func (im *Image) cfi() *cfiIndex {
	key := weak.Make(im)
	cfiMu.Lock()
	defer cfiMu.Unlock()
	c := cfiIndexes[key]
	if c == nil {
		c = &cfiIndex{}
		cfiIndexes[key] = c
		runtime.AddCleanup(im, func(k weak.Pointer[Image]) {
			cfiMu.Lock()
			delete(cfiIndexes, k)
			cfiMu.Unlock()
		}, key)
	}
	return c
}

// FrameEntries returns the image's call frame information: the frame
// description entries of its .eh_frame and of its .debug_frame (or, when
// the image has no .debug_frame, that of its separate debug file), sorted
// by link-time start address. Where both sections describe the same range,
// the .eh_frame entry is kept. Entries whose range is empty or lies outside
// the image's executable segments (code the linker discarded) are dropped.
//
// The entries are parsed once, on first call, and are then shared by all
// callers, who must not modify them. err tells which section could not be
// read or parsed; the entries then hold what the other section gave.
func (im *Image) FrameEntries() (frame.FrameDescriptionEntries, error) {
	c := im.cfi()
	c.once.Do(func() {
		c.fdes, c.err = im.loadFrameEntries()
	})
	return c.fdes, c.err
}

// FDEForPC returns the frame description entry covering the link-time
// address pc, or nil when there is none (see FrameEntries).
func (im *Image) FDEForPC(pc uint64) *frame.FrameDescriptionEntry {
	fdes, _ := im.FrameEntries()
	return FindFDE(fdes, pc)
}

// maxFDEOverlap bounds how many entries before the candidate FindFDE
// inspects for one that still covers the address.
const maxFDEOverlap = 8

// FindFDE returns the entry of fdes (sorted by start address, as
// FrameEntries returns them) that covers pc, or nil. When entries overlap,
// the one starting last at or before pc wins.
func FindFDE(fdes frame.FrameDescriptionEntries, pc uint64) *frame.FrameDescriptionEntry {
	i := sort.Search(len(fdes), func(i int) bool { return fdes[i].Begin() > pc }) - 1
	for j := i; j >= 0 && i-j < maxFDEOverlap; j-- {
		if fdes[j].Cover(pc) {
			return fdes[j]
		}
	}
	return nil
}

// FrameSource identifies the file FrameEntries reads besides the image's
// own: its separate debug file, when the image has no .debug_frame and
// that file has one; ok is false when there is none. What is kept about
// the image's call frame information across runs must name it, as the
// image's build-id and identity cannot: a debug file installed or
// changed since changes the entries.
func (im *Image) FrameSource() (id [5]uint64, ok bool) {
	if s := im.ef.Section(".debug_frame"); s != nil && s.Type != elf.SHT_NOBITS {
		return id, false
	}
	sep, err := im.separate()
	if err != nil || sep == nil {
		return id, false
	}
	if s := sep.ef.Section(".debug_frame"); s == nil || s.Type == elf.SHT_NOBITS {
		return id, false
	}
	return sep.identity(), true
}

func (im *Image) loadFrameEntries() (frame.FrameDescriptionEntries, error) {
	var errs []error
	ptrSize := 8
	if im.ef.Class == elf.ELFCLASS32 {
		ptrSize = 4
	}
	var eh, dbg frame.FrameDescriptionEntries
	if s := im.ef.Section(".eh_frame"); s != nil && s.Type != elf.SHT_NOBITS {
		var err error
		eh, err = parseFrameSection(im, s, ptrSize)
		if err != nil {
			errs = append(errs, err)
		}
	}
	src := im
	if s := im.ef.Section(".debug_frame"); s == nil || s.Type == elf.SHT_NOBITS {
		src = nil
		if sep, err := im.separate(); err == nil && sep != nil {
			src = sep
		}
	}
	if src != nil {
		if s := src.ef.Section(".debug_frame"); s != nil && s.Type != elf.SHT_NOBITS {
			var err error
			dbg, err = parseFrameSection(src, s, ptrSize)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	all := im.keepFDEs(eh, nil)
	all = im.keepFDEs(dbg, all)
	if len(all) > MaxFDEs {
		errs = append(errs, fmt.Errorf("call frame information of %s: more than %d entries (limit MaxFDEs); keeping the first", im.Path, MaxFDEs))
		all = all[:MaxFDEs]
	}
	// Append sorts stably by start address and drops entries whose
	// range equals that of an earlier one: .eh_frame wins over
	// .debug_frame.
	var out frame.FrameDescriptionEntries
	if err := guard(func() error {
		out = frame.FrameDescriptionEntries(nil).Append(all)
		return nil
	}); err != nil {
		return nil, errors.Join(append(errs, fmt.Errorf("sorting call frame information of %s: %w", im.Path, err))...)
	}
	return out, errors.Join(errs...)
}

// keepFDEs appends to dst the entries of fdes that cover a non-empty range
// inside the image's executable segments.
func (im *Image) keepFDEs(fdes, dst frame.FrameDescriptionEntries) frame.FrameDescriptionEntries {
	hasExec := false
	for _, l := range im.loads {
		if l.Flags&elf.PF_X != 0 {
			hasExec = true
			break
		}
	}
	for _, f := range fdes {
		if f == nil || f.CIE == nil {
			continue
		}
		b, e := f.Begin(), f.End()
		if e <= b {
			continue
		}
		if hasExec {
			l, ok := im.loadAt(b)
			if !ok || l.Flags&elf.PF_X == 0 || e-l.Vaddr > l.Memsz {
				continue
			}
		} else if b == 0 {
			continue
		}
		dst = append(dst, f)
	}
	return dst
}

// parseFrameSection reads and parses one .eh_frame or .debug_frame
// section of src.
func parseFrameSection(src *Image, s *elf.Section, ptrSize int) (frame.FrameDescriptionEntries, error) {
	if s.Size > MaxFrameSectionBytes {
		return nil, fmt.Errorf("reading %s of %s: %d bytes, more than %d (limit MaxFrameSectionBytes)", s.Name, src.Path, s.Size, MaxFrameSectionBytes)
	}
	var data []byte
	if err := guard(func() error {
		r := s.Open()
		b, err := io.ReadAll(io.LimitReader(r, MaxFrameSectionBytes+1))
		if err != nil {
			return err
		}
		data = b
		return nil
	}); err != nil {
		return nil, fmt.Errorf("reading %s of %s: %w", s.Name, src.Path, err)
	}
	if len(data) > MaxFrameSectionBytes {
		return nil, fmt.Errorf("reading %s of %s: more than %d bytes uncompressed (limit MaxFrameSectionBytes)", s.Name, src.Path, MaxFrameSectionBytes)
	}
	ehAddr := uint64(0)
	if s.Name == ".eh_frame" {
		if s.Addr == 0 {
			return nil, fmt.Errorf("parsing %s of %s: the section has address 0", s.Name, src.Path)
		}
		ehAddr = s.Addr
	}
	var order binary.ByteOrder = binary.LittleEndian
	if src.ef.ByteOrder != nil {
		order = src.ef.ByteOrder
	}
	var fdes frame.FrameDescriptionEntries
	if err := guard(func() error {
		var err error
		fdes, err = frame.Parse(data, order, 0, ptrSize, ehAddr)
		return err
	}); err != nil {
		return nil, fmt.Errorf("parsing %s of %s: %w", s.Name, src.Path, err)
	}
	return fdes, nil
}
