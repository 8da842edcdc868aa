// Package core reads Linux x86-64 ELF core files, as written by the kernel
// or by gdb's gcore, and presents them as a target.Target.
//
// Threads and registers come from the NT_PRSTATUS notes, the mapped files
// from NT_FILE. Memory is read from the core's PT_LOAD segments; pages the
// core did not dump (typically the read-only text and data of mapped ELF
// files) are read from the files themselves, once their build-id has been
// checked against the one the core recorded.
package core

import (
	"bufio"
	"cmp"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"

	"github.com/ompd-inspect/ompd-inspect/target"

	telf "github.com/ompd-inspect/ompd-inspect/target/elf"
)

// Limits on what the contents of a core may make Open allocate or loop
// over. A core that exceeds one gets an error or warning naming the limit.
const (
	// MaxProgramHeaders is the largest number of program headers read.
	MaxProgramHeaders = 1 << 21
	// MaxNotes is the largest number of notes read.
	MaxNotes = 1 << 22
	// MaxThreads is the largest number of NT_PRSTATUS notes accepted.
	MaxThreads = 1 << 20
	// MaxMappings is the largest number of NT_FILE entries accepted.
	MaxMappings = 1 << 21
	// MaxFileNoteBytes is the largest NT_FILE note read.
	MaxFileNoteBytes = 256 << 20
	// MaxWarnings is the largest number of warnings kept about one
	// core; Warnings adds one line counting the rest. A core opened on
	// another machine without --sysroot warns once for every library it
	// names: the cap leaves room for a large program's (so the warning
	// that matters is not the one cut), and still bounds a hostile core.
	MaxWarnings = 500
)

const (
	maxNoteName      = 4096    // longest note owner name
	maxSmallNote     = 1 << 20 // largest NT_PRSTATUS, NT_PRPSINFO or NT_AUXV read
	maxTruncWarnings = 8       // truncated segments reported one by one
	maxMemPhdrs      = 1024    // program headers read from a module's first page
	maxMemNoteBytes  = 64 << 10
)

// Note types read from a core.
const (
	ntPRSTATUS = 1
	ntPRPSINFO = 3
	ntAUXV     = 6
	ntFILE     = 0x46494c45
)

// x86-64 layouts of the kernel's elf_prstatus and elf_prpsinfo.
const (
	prstatusCursig = 12
	prstatusPid    = 32
	prstatusReg    = 112
	prstatusSize   = prstatusReg + 27*8 // through pr_reg
	prpsinfoPid    = 24
	prpsinfoFname  = 40
	prpsinfoSize   = prpsinfoFname + 16 // through pr_fname
)

// Auxiliary vector keys used to find the executable.
const (
	atPHDR  = 3
	atENTRY = 9
)

// Options tell Open where to find the files a core refers to.
type Options struct {
	// Exe replaces the path of the executable recorded in the core. It
	// is used as given: Sysroot is not prefixed to it.
	Exe string
	// Sysroot, when set, is the directory in which every path the core
	// records is looked up, as if it were the root directory: ".." in
	// a path stops at Sysroot, and a symbolic link inside Sysroot is
	// followed inside it (an absolute target is taken relative to
	// Sysroot, as in a chroot). A path from the core never names a file
	// outside Sysroot.
	Sysroot string
	// SearchPath lists directories in which a file that is not at its
	// recorded path is looked for by base name.
	SearchPath []string
	// Images says where the separate debug files of the core's modules
	// are looked for besides the default places.
	Images telf.OpenOptions
}

// Mismatch is a module whose file on disk carries a build-id other than
// the one the core recorded; the file is not used.
type Mismatch struct {
	// Module is the affected module; its Image is nil.
	Module *target.Module
	// File is the file that did not match.
	File string
	// CoreBuildID is the build-id found in the core's copy of the
	// module's first page, as hex.
	CoreBuildID string
	// FileBuildID is the file's build-id, "" when it has none.
	FileBuildID string
}

// Core is an opened core file. It implements target.Target.
type Core struct {
	// Path is the core file name Open was given.
	Path string

	f        *os.File
	size     int64
	pid      int
	crashTID int
	fname    string
	threads  []target.Thread
	// tooManyThreads is set once MaxThreads was reached and warned about.
	tooManyThreads bool
	auxv           map[uint64]uint64
	segs           []segment // PT_LOAD segments sorted by vaddr
	maps           []mapping // NT_FILE entries sorted by start
	modules        []*target.Module
	mismatches     []Mismatch
	warnings       []string
	// warningsLeft counts the warnings beyond MaxWarnings, not kept.
	warningsLeft int

	// noteRanges are the file ranges [start, end) of the PT_NOTE
	// segments read, sorted; overlapped counts the segments skipped
	// because they overlap one of them (warned about once).
	noteRanges [][2]uint64
	overlapped int
}

var _ target.Target = (*Core)(nil)

// segment is a PT_LOAD segment of the core.
type segment struct {
	vaddr, memsz uint64
	off          uint64 // file offset of the data
	dumped       uint64 // bytes the core meant to hold (p_filesz, at most memsz)
	avail        uint64 // bytes actually present before EOF
	flags        elf.ProgFlag
}

// mapping is one NT_FILE entry.
type mapping struct {
	start, end, off uint64 // off: file offset in bytes
	name            string
	mod             *target.Module // nil when the file is not a module
}

// Open reads the core file at path. Files the core refers to are looked
// up as opts says; problems with them become warnings, not errors.
func Open(path string, opts Options) (*Core, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening core: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("opening core %s: %w", path, err)
	}
	c := &Core{Path: path, f: f, size: st.Size()}
	if err := c.load(opts); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Core) load(opts Options) error {
	phdrs, err := c.readHeader()
	if err != nil {
		return err
	}
	truncated := 0
	for _, p := range phdrs {
		switch p.Type {
		case elf.PT_LOAD:
			s := segment{vaddr: p.Vaddr, memsz: p.Memsz, off: p.Off, dumped: min(p.Filesz, p.Memsz), flags: p.Flags}
			if s.off < uint64(c.size) {
				s.avail = min(s.dumped, uint64(c.size)-s.off)
			}
			if s.avail < s.dumped {
				truncated++
				if truncated <= maxTruncWarnings {
					c.warnf("core is truncated: %d of %d bytes of segment at %#x present", s.avail, s.dumped, s.vaddr)
				}
			}
			c.segs = append(c.segs, s)
		case elf.PT_NOTE:
			if err := c.readNotes(p); err != nil {
				return err
			}
		}
	}
	if truncated > maxTruncWarnings {
		c.warnf("core is truncated: %d more segments are incomplete", truncated-maxTruncWarnings)
	}
	sort.SliceStable(c.segs, func(i, j int) bool { return c.segs[i].vaddr < c.segs[j].vaddr })
	sort.SliceStable(c.maps, func(i, j int) bool { return c.maps[i].start < c.maps[j].start })
	c.orderThreads()
	if len(c.threads) == 0 {
		c.warnf("core has no NT_PRSTATUS note: no threads")
	}
	if c.pid == 0 && len(c.threads) > 0 {
		c.pid = c.threads[0].TID
	}
	c.buildModules(opts)
	return nil
}

// readHeader validates the ELF header and returns the program headers.
func (c *Core) readHeader() ([]elf.ProgHeader, error) {
	var h [64]byte
	n, _ := c.f.ReadAt(h[:], 0)
	if n < 4 || string(h[:4]) != elf.ELFMAG {
		return nil, fmt.Errorf("%s: not an ELF file", c.Path)
	}
	if n < 20 {
		return nil, fmt.Errorf("%s: ELF header truncated at %d bytes", c.Path, n)
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if elf.Data(h[elf.EI_DATA]) == elf.ELFDATA2MSB {
		bo = binary.BigEndian
	}
	if t := elf.Type(bo.Uint16(h[16:])); t != elf.ET_CORE {
		return nil, fmt.Errorf("%s: not a core file (ELF type %v)", c.Path, t)
	}
	if m := elf.Machine(bo.Uint16(h[18:])); m != elf.EM_X86_64 {
		return nil, fmt.Errorf("%s: core is for machine %v; only EM_X86_64 is supported", c.Path, m)
	}
	if cl := elf.Class(h[elf.EI_CLASS]); cl != elf.ELFCLASS64 || bo != binary.LittleEndian {
		return nil, fmt.Errorf("%s: x86-64 core with class %v and data encoding %v; want ELFCLASS64, ELFDATA2LSB", c.Path, cl, elf.Data(h[elf.EI_DATA]))
	}
	if n < len(h) {
		return nil, fmt.Errorf("%s: ELF header truncated at %d bytes", c.Path, n)
	}
	le := binary.LittleEndian
	phoff := le.Uint64(h[32:])
	shoff := le.Uint64(h[40:])
	phentsize := uint64(le.Uint16(h[54:]))
	phnum := uint64(le.Uint16(h[56:]))
	if phnum == 0xffff { // PN_XNUM: the count is in section header 0
		var sh [64]byte
		if shoff > uint64(c.size) || uint64(c.size)-shoff < uint64(len(sh)) {
			return nil, fmt.Errorf("%s: PN_XNUM program headers but section header 0 at %#x lies beyond the end of the file (%d bytes)", c.Path, shoff, c.size)
		}
		if _, err := c.f.ReadAt(sh[:], int64(shoff)); err != nil {
			return nil, fmt.Errorf("%s: reading section header 0 for PN_XNUM: %w", c.Path, err)
		}
		phnum = uint64(le.Uint32(sh[44:]))
	}
	if phnum == 0 {
		return nil, nil
	}
	if phentsize != 56 {
		return nil, fmt.Errorf("%s: program header entry size %d, want 56", c.Path, phentsize)
	}
	if phnum > MaxProgramHeaders {
		return nil, fmt.Errorf("%s: %d program headers, more than %d (limit MaxProgramHeaders)", c.Path, phnum, MaxProgramHeaders)
	}
	if phoff > uint64(c.size) || phnum*56 > uint64(c.size)-phoff {
		return nil, fmt.Errorf("%s: core is truncated: %d program headers at offset %#x lie beyond the end of the file (%d bytes)", c.Path, phnum, phoff, c.size)
	}
	raw := make([]byte, phnum*56)
	if _, err := c.f.ReadAt(raw, int64(phoff)); err != nil {
		return nil, fmt.Errorf("%s: reading program headers: %w", c.Path, err)
	}
	phdrs := make([]elf.ProgHeader, phnum)
	for i := range phdrs {
		b := raw[i*56:]
		phdrs[i] = elf.ProgHeader{
			Type:   elf.ProgType(le.Uint32(b[0:])),
			Flags:  elf.ProgFlag(le.Uint32(b[4:])),
			Off:    le.Uint64(b[8:]),
			Vaddr:  le.Uint64(b[16:]),
			Paddr:  le.Uint64(b[24:]),
			Filesz: le.Uint64(b[32:]),
			Memsz:  le.Uint64(b[40:]),
			Align:  le.Uint64(b[48:]),
		}
	}
	return phdrs, nil
}

// newNoteRange records the note segment [start, end) of the file, unless
// it overlaps one already recorded.
func (c *Core) newNoteRange(start, end uint64) bool {
	i, _ := slices.BinarySearchFunc(c.noteRanges, start, func(r [2]uint64, v uint64) int { return cmp.Compare(r[0], v) })
	if i > 0 && c.noteRanges[i-1][1] > start || i < len(c.noteRanges) && c.noteRanges[i][0] < end {
		return false
	}
	c.noteRanges = slices.Insert(c.noteRanges, i, [2]uint64{start, end})
	return true
}

// readNotes reads the notes of one PT_NOTE segment. Malformed or
// truncated notes end the segment with a warning; only an I/O error is
// returned.
func (c *Core) readNotes(p elf.ProgHeader) error {
	avail := uint64(0)
	if p.Off < uint64(c.size) {
		avail = min(p.Filesz, uint64(c.size)-p.Off)
	}
	if avail < p.Filesz {
		c.warnf("core is truncated: %d of %d bytes of the note segment at offset %#x present", avail, p.Filesz, p.Off)
	}
	// A segment that overlaps one already read would have the same notes
	// (threads, files) read again: it is skipped.
	if avail > 0 && !c.newNoteRange(p.Off, p.Off+avail) {
		c.overlapped++
		if c.overlapped == 1 {
			c.warnf("reading notes of %s: the PT_NOTE segment at offset %#x overlaps one already read; it is ignored, as is every other such segment", c.Path, p.Off)
		}
		return nil
	}
	br := bufio.NewReaderSize(io.NewSectionReader(c.f, int64(p.Off), int64(avail)), int(min(avail, 64<<10)))
	pos := uint64(0)
	for count := 0; ; count++ {
		if count >= MaxNotes {
			c.warnf("core has more than %d notes (limit MaxNotes); the rest are ignored", MaxNotes)
			return nil
		}
		var hdr [12]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			return c.noteEnd(pos, err)
		}
		namesz := uint64(binary.LittleEndian.Uint32(hdr[0:]))
		descsz := uint64(binary.LittleEndian.Uint32(hdr[4:]))
		typ := binary.LittleEndian.Uint32(hdr[8:])
		if namesz > maxNoteName {
			c.warnf("reading notes of %s: note at offset %#x has a %d-byte name (limit %d); the rest are ignored", c.Path, p.Off+pos, namesz, maxNoteName)
			return nil
		}
		name := make([]byte, alignUp4(namesz))
		if _, err := io.ReadFull(br, name); err != nil {
			return c.noteEnd(pos, err)
		}
		name = name[:namesz]
		for len(name) > 0 && name[len(name)-1] == 0 {
			name = name[:len(name)-1]
		}
		padded := alignUp4(descsz)
		limit := uint64(0) // notes not read are skipped
		if string(name) == "CORE" {
			switch typ {
			case ntPRSTATUS, ntPRPSINFO, ntAUXV:
				limit = maxSmallNote
			case ntFILE:
				limit = MaxFileNoteBytes
			}
		}
		if descsz > 0 && descsz <= limit {
			// The size is read from the file: the note must fit in
			// what is left of the segment before it sizes a buffer.
			if padded > avail-(pos+12+alignUp4(namesz)) {
				return c.noteEnd(pos, io.ErrUnexpectedEOF)
			}
			desc := make([]byte, padded)
			if _, err := io.ReadFull(br, desc); err != nil {
				return c.noteEnd(pos, err)
			}
			c.handleNote(typ, desc[:descsz], p.Off+pos)
		} else {
			if limit > 0 && descsz > limit {
				c.warnf("reading notes of %s: %s note at offset %#x has %d bytes, more than %d; ignored", c.Path, noteName(typ), p.Off+pos, descsz, limit)
			}
			if _, err := br.Discard(int(padded)); err != nil {
				return c.noteEnd(pos, err)
			}
		}
		pos += 12 + alignUp4(namesz) + padded
	}
}

// noteEnd reports a note segment that ends inside a note.
func (c *Core) noteEnd(pos uint64, err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		c.warnf("core is truncated: notes end inside the note at segment offset %#x", pos)
		return nil
	}
	return fmt.Errorf("reading notes of %s: %w", c.Path, err)
}

func noteName(typ uint32) string {
	switch typ {
	case ntPRSTATUS:
		return "NT_PRSTATUS"
	case ntPRPSINFO:
		return "NT_PRPSINFO"
	case ntAUXV:
		return "NT_AUXV"
	case ntFILE:
		return "NT_FILE"
	}
	return fmt.Sprintf("type %#x", typ)
}

func (c *Core) handleNote(typ uint32, desc []byte, off uint64) {
	le := binary.LittleEndian
	switch typ {
	case ntPRSTATUS:
		if len(desc) < prstatusSize {
			c.warnf("reading NT_PRSTATUS note at offset %#x of %s: %d bytes, want at least %d; thread ignored", off, c.Path, len(desc), prstatusSize)
			return
		}
		if len(c.threads) >= MaxThreads {
			if !c.tooManyThreads {
				c.warnf("core has more than %d threads (limit MaxThreads); the rest are ignored", MaxThreads)
				c.tooManyThreads = true
			}
			return
		}
		t := target.Thread{
			TID:    int(int32(le.Uint32(desc[prstatusPid:]))),
			Signal: int(int16(le.Uint16(desc[prstatusCursig:]))),
		}
		r := desc[prstatusReg:]
		regs := []*uint64{
			&t.Regs.R15, &t.Regs.R14, &t.Regs.R13, &t.Regs.R12, &t.Regs.Rbp, &t.Regs.Rbx, &t.Regs.R11, &t.Regs.R10,
			&t.Regs.R9, &t.Regs.R8, &t.Regs.Rax, &t.Regs.Rcx, &t.Regs.Rdx, &t.Regs.Rsi, &t.Regs.Rdi,
			&t.Regs.OrigRax, &t.Regs.Rip, &t.Regs.Cs, &t.Regs.Eflags, &t.Regs.Rsp, &t.Regs.Ss,
			&t.Regs.FSBase, &t.Regs.GSBase, &t.Regs.Ds, &t.Regs.Es, &t.Regs.Fs, &t.Regs.Gs,
		}
		for i, p := range regs {
			*p = le.Uint64(r[i*8:])
		}
		if len(c.threads) == 0 {
			c.crashTID = t.TID
		}
		c.threads = append(c.threads, t)
	case ntPRPSINFO:
		if len(desc) < prpsinfoSize {
			c.warnf("reading NT_PRPSINFO note at offset %#x of %s: %d bytes, want at least %d; ignored", off, c.Path, len(desc), prpsinfoSize)
			return
		}
		c.pid = int(int32(le.Uint32(desc[prpsinfoPid:])))
		name := desc[prpsinfoFname : prpsinfoFname+16]
		for i, b := range name {
			if b == 0 {
				name = name[:i]
				break
			}
		}
		c.fname = string(name)
	case ntAUXV:
		c.auxv = make(map[uint64]uint64)
		for i := 0; i+16 <= len(desc); i += 16 {
			k := le.Uint64(desc[i:])
			if k == 0 {
				break
			}
			c.auxv[k] = le.Uint64(desc[i+8:])
		}
	case ntFILE:
		if err := c.parseFileNote(desc); err != nil {
			c.warnf("reading NT_FILE note at offset %#x of %s: %v; no modules from it", off, c.Path, err)
		}
	}
}

// parseFileNote reads NT_FILE: count, page size, count (start, end, page
// offset) triples, then count NUL-terminated names.
func (c *Core) parseFileNote(d []byte) error {
	le := binary.LittleEndian
	if len(d) < 16 {
		return fmt.Errorf("%d bytes, too short for the header", len(d))
	}
	count := le.Uint64(d[0:])
	page := le.Uint64(d[8:])
	if count > MaxMappings {
		return fmt.Errorf("%d mappings, more than %d (limit MaxMappings)", count, MaxMappings)
	}
	if page == 0 || page&(page-1) != 0 || page > 1<<30 {
		return fmt.Errorf("page size %d is not a power of two up to 1 GiB", page)
	}
	tableEnd := 16 + count*24
	if tableEnd > uint64(len(d)) {
		return fmt.Errorf("%d mappings need %d bytes, note has %d", count, tableEnd, len(d))
	}
	names := d[tableEnd:]
	maps := make([]mapping, 0, count)
	for i := uint64(0); i < count; i++ {
		e := d[16+i*24:]
		start, end, pgoff := le.Uint64(e[0:]), le.Uint64(e[8:]), le.Uint64(e[16:])
		j := 0
		for j < len(names) && names[j] != 0 {
			j++
		}
		if j == len(names) {
			return fmt.Errorf("names end after %d of %d mappings", i, count)
		}
		name := string(names[:j])
		names = names[j+1:]
		if end <= start {
			return fmt.Errorf("mapping %d of %s: end %#x not above start %#x", i, name, end, start)
		}
		if pgoff > ^uint64(0)/page {
			return fmt.Errorf("mapping %d of %s: page offset %#x overflows", i, name, pgoff)
		}
		maps = append(maps, mapping{start: start, end: end, off: pgoff * page, name: name})
	}
	c.maps = append(c.maps, maps...)
	return nil
}

// orderThreads puts the main thread first.
func (c *Core) orderThreads() {
	if c.pid == 0 {
		return
	}
	for i, t := range c.threads {
		if t.TID == c.pid && i > 0 {
			copy(c.threads[1:i+1], c.threads[:i])
			c.threads[0] = t
			break
		}
	}
}

func alignUp4(x uint64) uint64 { return (x + 3) &^ 3 }

// warnf adds a warning, or counts it once MaxWarnings are kept: how many
// a hostile core gives must not grow with its size.
func (c *Core) warnf(format string, args ...any) {
	if len(c.warnings) >= MaxWarnings {
		c.warningsLeft++
		return
	}
	c.warnings = append(c.warnings, fmt.Sprintf(format, args...))
}

// PID returns the process id the core recorded.
func (c *Core) PID() int { return c.pid }

// Threads returns the threads of the core, the main thread first when it
// was still alive.
func (c *Core) Threads() []target.Thread { return append([]target.Thread(nil), c.threads...) }

// CrashTID returns the id of the thread whose NT_PRSTATUS note came first:
// for a kernel core, the thread that received the fatal signal.
func (c *Core) CrashTID() int { return c.crashTID }

// Modules returns the ELF objects mapped in the core, the executable
// first.
func (c *Core) Modules() []*target.Module { return append([]*target.Module(nil), c.modules...) }

// ModuleAt implements target.ModuleFinder.
func (c *Core) ModuleAt(addr uint64) *target.Module { return target.ModuleIn(c.modules, addr) }

// Warnings returns what Open noticed and worked around: the first
// MaxWarnings warnings, then, if there were more, one line saying how
// many were left out.
func (c *Core) Warnings() []string {
	w := append([]string(nil), c.warnings...)
	switch {
	case c.warningsLeft == 1:
		w = append(w, "1 more warning about this core file was left out")
	case c.warningsLeft > 1:
		w = append(w, fmt.Sprintf("%d more warnings about this core file were left out", c.warningsLeft))
	}
	return w
}

// Mismatches returns the modules whose file on disk did not match the
// build-id recorded in the core.
func (c *Core) Mismatches() []Mismatch { return append([]Mismatch(nil), c.mismatches...) }

// Close closes the core and the module files.
func (c *Core) Close() error {
	if c.f == nil {
		return nil
	}
	var errs []error
	for _, m := range c.modules {
		if m.Image != nil {
			errs = append(errs, m.Image.Close())
		}
	}
	if c.f != nil {
		if err := c.f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing core %s: %w", c.Path, err))
		}
		c.f = nil
	}
	return errors.Join(errs...)
}
