// Package elf reads the ELF images ompd-inspect needs: symbols from .symtab
// and .dynsym, the build-id, the load bias, the PT_TLS segment, the
// debug-link, and (from DWARF, in the file itself or in a separate debug
// file) functions and source lines.
//
// An Image wraps debug/elf. Indexes (symbols, line table, functions) are
// built once, on first use, and are then safe for concurrent readers.
// Malformed files produce errors, never panics.
package elf

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"

	"debug/elf"
)

// Limits on what the contents of a file may make the package allocate or
// loop over. A file that exceeds one gets an error naming the limit.
const (
	// MaxSymbols is the largest symbol table (entries) that is indexed.
	MaxSymbols = 1 << 24
	// MaxNoteBytes is the largest note section or segment that is read
	// when looking for the build-id.
	MaxNoteBytes = 1 << 20
	// MaxDebugSectionBytes is the largest (uncompressed) DWARF section
	// that is loaded.
	MaxDebugSectionBytes = 1 << 30
	// MaxLineRows is the largest number of line-table rows indexed.
	MaxLineRows = 1 << 25
	// MaxSubprograms is the largest number of DW_TAG_subprogram entries
	// indexed.
	MaxSubprograms = 1 << 23
	// MaxSubprogramRanges is the largest number of address ranges of
	// subprograms indexed, one per subprogram at MaxSubprograms. (Entries
	// can share a range list, so the ranges are not bounded by the size
	// of the range lists.)
	MaxSubprogramRanges = 1 << 23
	// MaxLoads is the largest number of PT_LOAD segments accepted.
	MaxLoads = 1 << 16
)

// pageSize is the x86-64 page size, the granularity of mappings.
const pageSize = 4096

// ntGNUBuildID is the note type of the GNU build-id.
const ntGNUBuildID = 3

// maxDebugLinkBytes bounds the .gnu_debuglink section.
const maxDebugLinkBytes = 4096

// ErrNotLoaded is returned (wrapped) by ReadVaddr for an address that no
// PT_LOAD segment of the file covers.
var ErrNotLoaded = errors.New("address not in any PT_LOAD segment")

// Image is an opened ELF file.
type Image struct {
	// Path is the file name Open was given.
	Path string

	file  *os.File
	ef    *elf.File
	size  int64
	mtime int64 // modification time, Unix nanoseconds
	// dev, ino and ctime (change time, Unix nanoseconds) identify the
	// file opened, for the section cache.
	dev, ino uint64
	ctime    int64
	loads    []Load // PT_LOAD segments sorted by Vaddr
	tls      TLS
	hasTLS   bool
	buildID  string
	link     debugLink

	// debugRoots are the global debug directories searched for a
	// separate debug file (normally /usr/lib/debug); nil for an image
	// that is itself a separate debug file.
	debugRoots []string
	// debugDirs are the directories OpenWith was given (also in
	// debugRoots), where a debug-link name is looked for directly too.
	debugDirs []string
	// fetch asks for the separate debug file by build-id when no local
	// file matched (OpenOptions.Fetch); nil for none.
	fetch func(buildID string) (string, error)

	// code keeps the pages of code ReadCode read.
	code codePages

	symOnce sync.Once
	syms    atomic.Pointer[symIndex]
	symErr  error
	symMu   sync.Mutex // serializes AddSymbols
	// symsAdded is set once AddSymbols added symbols: names found then
	// are not the file's alone, and the frame cache is left alone.
	symsAdded atomic.Bool

	sepOnce sync.Once
	sep     *Image
	sepErr  error

	// sections keeps decompressed debug sections across runs; nil for
	// none (OpenOptions.Sections).
	sections SectionCache

	dwOnce sync.Once
	dw     *dwarfData
	dwFile string
	dwErr  error

	// infoSize is the uncompressed size of .debug_info (debugInfoSize),
	// found once: finding it sets the size of a .zdebug section.
	infoOnce sync.Once
	infoSize uint64

	derivedMu sync.Mutex
	derived   map[any]*derivedValue // Derived's values, by key
}

// derivedValue is one value of Derived, computed once.
type derivedValue struct {
	once     sync.Once
	v        any
	done     atomic.Bool // v is set
	panicked any         // what compute panicked with, raised again for every caller
}

// Derived returns what compute derives from the image's file for key,
// computing it on the first call for that key (once, whatever the number
// of concurrent callers) and keeping it with the image. It lets packages
// above this one keep what they learn from a file's content (a runtime's
// knowledge recovered from its code, say) for every user of the image,
// and compute it early, before a target is stopped. Keys are compared as
// map keys: use a package's own unexported type.
func (im *Image) Derived(key any, compute func() any) any {
	im.derivedMu.Lock()
	if im.derived == nil {
		im.derived = make(map[any]*derivedValue)
	}
	d := im.derived[key]
	if d == nil {
		d = &derivedValue{}
		im.derived[key] = d
	}
	im.derivedMu.Unlock()
	d.once.Do(func() {
		defer func() {
			if p := recover(); p != nil {
				d.panicked = p
			}
		}()
		d.v = compute()
		d.done.Store(true)
	})
	if d.panicked != nil {
		panic(d.panicked)
	}
	return d.v
}

type debugLink struct {
	name string
	crc  uint32
	ok   bool
}

// Load is a PT_LOAD segment: Memsz bytes at link-time address Vaddr,
// the first Filesz of them from file offset Offset, the rest zero.
type Load struct {
	Vaddr, Memsz, Offset, Filesz uint64
	// Flags are the segment's permissions (PF_R, PF_W, PF_X).
	Flags elf.ProgFlag
}

// LoadSpan returns the addresses the image's PT_LOAD segments cover when
// it is loaded with bias, page-aligned; ok is false when it has none. A
// mapping of the file outside the span is no part of the loaded image (a
// program that maps the file again to read it).
func (im *Image) LoadSpan(bias uint64) (lo, hi uint64, ok bool) {
	const page = 0x1000
	for _, l := range im.loads {
		start := (bias + l.Vaddr) &^ (page - 1)
		end := (bias + l.Vaddr + l.Memsz + page - 1) &^ (page - 1)
		if !ok || start < lo {
			lo = start
		}
		if !ok || end > hi {
			hi = end
		}
		ok = true
	}
	return lo, hi, ok && lo < hi
}

// TLS describes the PT_TLS segment: the initialization image of the
// module's thread-local storage block, Filesz bytes at link-time address
// Vaddr followed by zeros up to Memsz, aligned to Align in each thread.
type TLS struct {
	Vaddr, Filesz, Memsz, Align uint64
}

// Open opens the ELF file at path.
func Open(path string) (*Image, error) {
	return open(path, []string{systemDebugDir})
}

// open opens path; debugRoots are the global debug directories to search
// for a separate debug file (nil: none, the image is a debug file).
func open(path string, debugRoots []string) (im *Image, err error) {
	// Only a regular file is opened: opening a FIFO blocks, opening a
	// device can act on it.
	if st, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("opening ELF file: %w", err)
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("opening ELF file %s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening ELF file: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("opening ELF file %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("opening ELF file %s: not a regular file", path)
	}
	im = &Image{Path: path, file: f, size: st.Size(), mtime: st.ModTime().UnixNano(), debugRoots: debugRoots}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		im.dev, im.ino, im.ctime = sys.Dev, sys.Ino, sys.Ctim.Nano()
	}
	if err := guard(func() error {
		ef, err := elf.NewFile(f)
		if err != nil {
			return err
		}
		im.ef = ef
		return nil
	}); err != nil {
		return nil, fmt.Errorf("%s: not a valid ELF file: %w", path, err)
	}
	if err := im.readHeaders(); err != nil {
		return nil, err
	}
	return im, nil
}

// SameFile reports whether path names the file the image was opened
// from, unchanged since: the same device and inode, size, modification
// and change times.
func (im *Image) SameFile(path string) bool {
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && sys.Dev == im.dev && sys.Ino == im.ino && st.Size() == im.size &&
		st.ModTime().UnixNano() == im.mtime && sys.Ctim.Nano() == im.ctime
}

// readHeaders collects the program headers, the build-id and the
// debug-link.
func (im *Image) readHeaders() error {
	for _, p := range im.ef.Progs {
		switch p.Type {
		case elf.PT_LOAD:
			if len(im.loads) >= MaxLoads {
				return fmt.Errorf("%s: more than %d PT_LOAD segments (limit MaxLoads)", im.Path, MaxLoads)
			}
			im.loads = append(im.loads, Load{Vaddr: p.Vaddr, Memsz: p.Memsz, Offset: p.Off, Filesz: p.Filesz, Flags: p.Flags})
		case elf.PT_TLS:
			if !im.hasTLS {
				im.tls = TLS{Vaddr: p.Vaddr, Filesz: p.Filesz, Memsz: p.Memsz, Align: p.Align}
				im.hasTLS = true
			}
		}
	}
	sort.SliceStable(im.loads, func(i, j int) bool { return im.loads[i].Vaddr < im.loads[j].Vaddr })
	// The build-id and the debug-link are optional: a malformed note or
	// link section only means there is none.
	im.buildID = im.findBuildID()
	im.link = im.findDebugLink()
	return nil
}

// Close closes the file and any separate debug file opened for it. A
// value Derived keeps that has an onClose method is told first (the type
// index then keeps what it learned in the section cache).
func (im *Image) Close() error {
	im.derivedMu.Lock()
	var closers []interface{ onClose() }
	for _, d := range im.derived {
		if d.done.Load() {
			if c, ok := d.v.(interface{ onClose() }); ok {
				closers = append(closers, c)
			}
		}
	}
	im.derivedMu.Unlock()
	for _, c := range closers {
		c.onClose()
	}
	var errs []error
	if im.sep != nil {
		errs = append(errs, im.sep.Close())
		im.sep = nil
	}
	if im.file != nil {
		if err := im.file.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing %s: %w", im.Path, err))
		}
		im.file = nil
	}
	return errors.Join(errs...)
}

// Type returns the ELF file type (ET_EXEC, ET_DYN, ...).
func (im *Image) Type() elf.Type { return im.ef.Type }

// Machine returns the ELF machine (EM_X86_64, ...).
func (im *Image) Machine() elf.Machine { return im.ef.Machine }

// BuildID returns the NT_GNU_BUILD_ID note as lowercase hex, or "" if the
// file has none.
func (im *Image) BuildID() string { return im.buildID }

// DebugLink returns the file name and CRC-32 recorded in the
// .gnu_debuglink section; ok is false when there is none.
func (im *Image) DebugLink() (name string, crc uint32, ok bool) {
	return im.link.name, im.link.crc, im.link.ok
}

// TLS returns the PT_TLS segment; ok is false when the file has no
// thread-local storage.
func (im *Image) TLS() (TLS, bool) { return im.tls, im.hasTLS }

// Loads returns the PT_LOAD segments sorted by virtual address.
func (im *Image) Loads() []Load {
	return append([]Load(nil), im.loads...)
}

// BiasFor returns the load bias (runtime address minus link-time address)
// given that the page at file offset fileOffset is mapped at address
// mapStart. It is false when no PT_LOAD segment maps fileOffset. For a
// non-PIE executable mapped at its link-time address the bias is 0.
//
// One file page can be mapped by two segments (the end of one and the
// start of the next share it). The segment starting exactly at
// fileOffset is preferred, then the first whose first page is at
// fileOffset, then the first that contains it; callers that can should
// pass the mapping of the lowest file offset, which is unambiguous.
func (im *Image) BiasFor(mapStart, fileOffset uint64) (uint64, bool) {
	best, rank := -1, 3
	for i, l := range im.loads {
		first := l.Offset &^ (pageSize - 1)
		r := 3
		switch {
		case l.Offset == fileOffset:
			r = 0
		case first == fileOffset:
			r = 1
		case fileOffset > first && fileOffset-first < l.Offset-first+l.Filesz:
			r = 2
		}
		if r < rank {
			best, rank = i, r
		}
	}
	if best < 0 {
		return 0, false
	}
	l := im.loads[best]
	// File offset X of the segment is at link-time address
	// Vaddr - Offset + X; the mapping start is page aligned.
	link := (l.Vaddr - l.Offset + fileOffset) &^ (pageSize - 1)
	return mapStart - link, true
}

// loadAt returns the PT_LOAD segment whose memory image contains vaddr.
func (im *Image) loadAt(vaddr uint64) (Load, bool) {
	i := sort.Search(len(im.loads), func(i int) bool { return im.loads[i].Vaddr > vaddr }) - 1
	if i < 0 {
		return Load{}, false
	}
	l := im.loads[i]
	if vaddr-l.Vaddr >= l.Memsz {
		return Load{}, false
	}
	return l, true
}

// ReadVaddr fills buf with the file's memory image at link-time virtual
// address vaddr, as the PT_LOAD segments describe it: bytes past a
// segment's file size and up to its memory size read as zero. It returns
// the number of bytes filled; an address that no segment covers gives an
// error wrapping ErrNotLoaded.
func (im *Image) ReadVaddr(vaddr uint64, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		cur := vaddr + uint64(n)
		if cur < vaddr {
			return n, fmt.Errorf("reading %d bytes at link-time address %#x of %s: address wraps: %w", len(buf), vaddr, im.Path, ErrNotLoaded)
		}
		l, ok := im.loadAt(cur)
		if !ok {
			return n, fmt.Errorf("reading %d bytes at link-time address %#x of %s: %#x: %w", len(buf), vaddr, im.Path, cur, ErrNotLoaded)
		}
		segOff := cur - l.Vaddr
		want := min(uint64(len(buf)-n), l.Memsz-segOff)
		chunk := buf[n : n+int(want)]
		fileN := uint64(0)
		if segOff < l.Filesz {
			fileN = min(want, l.Filesz-segOff)
			off := l.Offset + segOff
			if off < l.Offset || off > uint64(im.size) || fileN > uint64(im.size)-off {
				return n, fmt.Errorf("reading %d bytes at link-time address %#x of %s: segment data at file offset %#x lies beyond the end of the file (%d bytes)", len(buf), vaddr, im.Path, off, im.size)
			}
			got, err := im.file.ReadAt(chunk[:fileN], int64(off))
			if uint64(got) < fileN {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return n + got, fmt.Errorf("reading %s at file offset %#x (link-time address %#x): %w", im.Path, off, cur, err)
			}
		}
		clear(chunk[fileN:])
		n += int(want)
	}
	return n, nil
}

// ReadCode fills buf with the file's bytes at link-time virtual address
// vaddr when all of them lie in the file part of one PT_LOAD segment that
// is executable and not writable: code the process maps from the file,
// as the file holds it (what a tracer or a patch wrote into the process
// is not seen). A segment whose file part lies beyond the file, whose
// addresses wrap or that another segment overlaps is refused. Otherwise
// it reads nothing and returns an error wrapping ErrNotLoaded.
//
// The file is read a page at a time, and the pages kept with the image
// (up to maxCodePages): the few bytes a walk reads at each frame's pc
// cost a system call only the first time a page is read.
func (im *Image) ReadCode(vaddr uint64, buf []byte) error {
	l, ok := im.loadAt(vaddr)
	end := vaddr + uint64(len(buf))
	if !ok || end < vaddr || l.Flags&elf.PF_X == 0 || l.Flags&elf.PF_W != 0 || end-l.Vaddr > l.Filesz {
		return fmt.Errorf("reading %d bytes of code at link-time address %#x of %s: not in the file part of a read-only code segment: %w", len(buf), vaddr, im.Path, ErrNotLoaded)
	}
	if !im.codeInFile(l) {
		return fmt.Errorf("reading %d bytes of code at link-time address %#x of %s: its segment (file offset %#x, %d bytes at %#x) does not lie within the file: %w", len(buf), vaddr, im.Path, l.Offset, l.Filesz, l.Vaddr, ErrNotLoaded)
	}
	for n := 0; n < len(buf); {
		cur := vaddr + uint64(n)
		page, lo, err := im.codePage(l, cur&^(codePageSize-1))
		if err != nil {
			return err
		}
		n += copy(buf[n:], page[cur-lo:])
	}
	return nil
}

// codeInFile reports whether segment l's file part lies within the file
// and its addresses do not wrap, and no other segment's addresses overlap
// it: the pages ReadCode keeps of it are then the file's bytes at
// l.Offset on, and small.
func (im *Image) codeInFile(l Load) bool {
	if l.Offset > uint64(im.size) || l.Filesz > uint64(im.size)-l.Offset || l.Vaddr+l.Filesz < l.Vaddr {
		return false
	}
	for _, o := range im.loads {
		if o != l && o.Memsz > 0 && o.Vaddr < l.Vaddr+l.Filesz && (o.Vaddr+o.Memsz < o.Vaddr || l.Vaddr < o.Vaddr+o.Memsz) {
			return false
		}
	}
	return true
}

// codePageSize is the size of the pages of code ReadCode keeps.
const codePageSize = 4096

// maxCodePages bounds the pages of code an image keeps (4 MiB); past it,
// pages are read but not kept.
const maxCodePages = 1024

// codePages are the pages of an image's code that ReadCode read.
type codePages struct {
	mu    sync.Mutex
	pages map[codePageKey][]byte
}

// codePageKey names a page of code: its link-time address, and the
// segment it was read for (two segments of a malformed file may share a
// page).
type codePageKey struct{ segment, page uint64 }

// codePage returns the bytes of segment l's file part in the page at
// link-time address page, and the address of the first (the page's, or
// the segment's start when it begins inside the page).
func (im *Image) codePage(l Load, page uint64) ([]byte, uint64, error) {
	key := codePageKey{l.Vaddr, page}
	im.code.mu.Lock()
	b, ok := im.code.pages[key]
	im.code.mu.Unlock()
	lo := max(page, l.Vaddr)
	if ok {
		return b, lo, nil
	}
	// Subtractions only: codeInFile checked that the segment's file
	// part lies within the file and its addresses do not wrap.
	n := min(codePageSize-(lo-page), l.Filesz-(lo-l.Vaddr))
	b = make([]byte, n)
	off := l.Offset + (lo - l.Vaddr)
	if got, err := im.file.ReadAt(b, int64(off)); uint64(got) < n {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, 0, fmt.Errorf("reading code of %s at file offset %#x (link-time address %#x): %w", im.Path, off, lo, err)
	}
	im.code.mu.Lock()
	if im.code.pages == nil {
		im.code.pages = make(map[codePageKey][]byte)
	}
	if len(im.code.pages) < maxCodePages {
		im.code.pages[key] = b
	}
	im.code.mu.Unlock()
	return b, lo, nil
}

// Note is one entry of an ELF note section or segment.
type Note struct {
	Name string // owner, without the terminating NUL
	Type uint32
	Desc []byte
}

// ParseNotes splits the contents of a note section or segment into notes.
// align is the section's or segment's alignment; notes are padded to 4
// bytes unless it is 8.
func ParseNotes(data []byte, order binary.ByteOrder, align uint64) ([]Note, error) {
	pad := uint64(4)
	if align == 8 {
		pad = 8
	}
	var notes []Note
	total := uint64(len(data))
	off := uint64(0)
	for total-off >= 12 {
		namesz := uint64(order.Uint32(data[off:]))
		descsz := uint64(order.Uint32(data[off+4:]))
		typ := order.Uint32(data[off+8:])
		nameOff := off + 12
		if namesz > total-nameOff {
			return notes, fmt.Errorf("note %d at offset %#x: name size %d overruns the %d-byte note area", len(notes), off, namesz, total)
		}
		name := data[nameOff : nameOff+namesz]
		for len(name) > 0 && name[len(name)-1] == 0 {
			name = name[:len(name)-1]
		}
		descOff := alignUp(nameOff+namesz, pad)
		if descOff > total || descsz > total-descOff {
			return notes, fmt.Errorf("note %d at offset %#x: descriptor size %d overruns the %d-byte note area", len(notes), off, descsz, total)
		}
		notes = append(notes, Note{Name: string(name), Type: typ, Desc: data[descOff : descOff+descsz : descOff+descsz]})
		off = alignUp(descOff+descsz, pad)
		if off > total {
			break
		}
	}
	return notes, nil
}

// BuildIDFromNotes returns the hex NT_GNU_BUILD_ID found in notes, or "".
func BuildIDFromNotes(notes []Note) string {
	for _, n := range notes {
		if n.Name == "GNU" && n.Type == ntGNUBuildID && len(n.Desc) > 0 {
			return hex.EncodeToString(n.Desc)
		}
	}
	return ""
}

func alignUp(x, a uint64) uint64 {
	if r := x % a; r != 0 {
		return x + a - r
	}
	return x
}

// findBuildID looks for NT_GNU_BUILD_ID in the note sections, then in the
// PT_NOTE segments (for files without section headers).
func (im *Image) findBuildID() string {
	for _, s := range im.ef.Sections {
		if s.Type != elf.SHT_NOTE || s.Size > MaxNoteBytes {
			continue
		}
		data, err := im.readRange(s.Offset, s.Size)
		if err != nil {
			continue
		}
		notes, _ := ParseNotes(data, im.ef.ByteOrder, s.Addralign)
		if id := BuildIDFromNotes(notes); id != "" {
			return id
		}
	}
	for _, p := range im.ef.Progs {
		if p.Type != elf.PT_NOTE || p.Filesz > MaxNoteBytes {
			continue
		}
		data, err := im.readRange(p.Off, p.Filesz)
		if err != nil {
			continue
		}
		notes, _ := ParseNotes(data, im.ef.ByteOrder, p.Align)
		if id := BuildIDFromNotes(notes); id != "" {
			return id
		}
	}
	return ""
}

// findDebugLink parses .gnu_debuglink: a NUL-terminated file name, padding
// to 4 bytes, and a CRC-32 of the debug file.
func (im *Image) findDebugLink() debugLink {
	s := im.ef.Section(".gnu_debuglink")
	if s == nil || s.Type == elf.SHT_NOBITS || s.Size > maxDebugLinkBytes {
		return debugLink{}
	}
	data, err := im.readRange(s.Offset, s.Size)
	if err != nil {
		return debugLink{}
	}
	end := 0
	for end < len(data) && data[end] != 0 {
		end++
	}
	crcOff := alignUp(uint64(end)+1, 4)
	if end == 0 || crcOff+4 > uint64(len(data)) {
		return debugLink{}
	}
	return debugLink{name: string(data[:end]), crc: im.ef.ByteOrder.Uint32(data[crcOff:]), ok: true}
}

// readRange reads size bytes at file offset off, checking both against
// the file size.
func (im *Image) readRange(off, size uint64) ([]byte, error) {
	if off > uint64(im.size) || size > uint64(im.size)-off {
		return nil, fmt.Errorf("reading %d bytes at offset %#x of %s: beyond the end of the file (%d bytes)", size, off, im.Path, im.size)
	}
	buf := make([]byte, size)
	if _, err := im.file.ReadAt(buf, int64(off)); err != nil {
		return nil, fmt.Errorf("reading %d bytes at offset %#x of %s: %w", size, off, im.Path, err)
	}
	return buf, nil
}

// guard runs f and turns a panic inside it (debug/elf and debug/dwarf can
// still panic on some malformed inputs) into an error.
func guard(f func() error) (err error) {
	// A mapped section cache entry that faults (a file system that
	// lost it) is an error too, not a crash.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed data: %v", r)
		}
	}()
	return f()
}
