package core

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ompd-inspect/ompd-inspect/target"
	telf "github.com/ompd-inspect/ompd-inspect/target/elf"
)

// fileGroup gathers the NT_FILE mappings of one file name.
type fileGroup struct {
	name  string
	maps  []int // indexes into Core.maps
	low   int   // the mapping with the lowest file offset
	start uint64
	end   uint64
	exec  bool // some mapping is executable (per the core's PT_LOAD flags)
}

// memHeader is what the core itself shows of an ELF file's first page.
type memHeader struct {
	known   bool   // the core holds the start of the mapping
	isELF   bool   // ... and it starts with the ELF magic
	bias    uint64 // load bias derived from the in-memory program headers
	hasBias bool
	buildID string // NT_GNU_BUILD_ID from the in-memory PT_NOTE, if dumped
}

// buildModules groups the NT_FILE mappings by file, opens the ELF files
// and checks their build-ids.
func (c *Core) buildModules(opts Options) {
	if len(c.maps) == 0 {
		c.warnf("core has no NT_FILE note: no modules")
		return
	}
	files := make([]target.FileMapping, len(c.maps))
	for i, m := range c.maps {
		files[i] = target.FileMapping{Name: m.name, Start: m.start, End: m.end, Offset: m.off}
	}
	var groups []*fileGroup
	for _, tg := range target.GroupFileMappings(files) {
		g := &fileGroup{name: tg.Name, maps: tg.Members, low: tg.First, start: tg.Start, end: tg.End}
		for _, i := range tg.Members {
			if s, ok := c.segmentAt(c.maps[i].start); ok && s.flags&elf.PF_X != 0 {
				g.exec = true
			}
		}
		groups = append(groups, g)
	}
	exe := c.findExe(groups)
	if exe < 0 && opts.Exe != "" {
		c.warnf("could not tell which mapped file is the executable; %s not used", opts.Exe)
	}
	if exe >= 0 {
		g := groups[exe]
		copy(groups[1:exe+1], groups[:exe])
		groups[0] = g
	}
	for gi, g := range groups {
		mod := c.openModule(g, gi == 0 && exe >= 0, opts)
		if mod == nil {
			continue
		}
		var lo, hi uint64
		spans := false
		if mod.Image != nil {
			lo, hi, spans = mod.Image.LoadSpan(mod.Bias)
		}
		if spans {
			// A file mapped again elsewhere (a library reading its
			// own file, as libgfortran's backtrace does) is not part
			// of the module: its mappings outside the image's load
			// span are left out.
			mod.Start, mod.End = max(mod.Start, lo), min(mod.End, hi)
		}
		c.modules = append(c.modules, mod)
		for _, i := range g.maps {
			if m := &c.maps[i]; !spans || (m.start < hi && m.end > lo) {
				m.mod = mod
			}
		}
	}
}

// findExe returns the index of the group holding the executable: the one
// mapping AT_ENTRY (or AT_PHDR), else the one named like NT_PRPSINFO's
// pr_fname, else -1.
func (c *Core) findExe(groups []*fileGroup) int {
	for _, key := range []uint64{atENTRY, atPHDR} {
		addr, ok := c.auxv[key]
		if !ok || addr == 0 {
			continue
		}
		if m := c.mapAt(addr); m != nil {
			for i, g := range groups {
				if g.name == m.name {
					return i
				}
			}
		}
	}
	if c.fname != "" {
		for i, g := range groups {
			base := filepath.Base(strings.TrimSuffix(g.name, " (deleted)"))
			if len(base) > 15 {
				base = base[:15]
			}
			if base == c.fname {
				return i
			}
		}
	}
	return -1
}

// segmentAt returns the core segment containing addr.
func (c *Core) segmentAt(addr uint64) (segment, bool) {
	for lo, hi := 0, len(c.segs); lo < hi; {
		mid := int(uint(lo+hi) >> 1)
		s := c.segs[mid]
		switch {
		case addr < s.vaddr:
			hi = mid
		case addr-s.vaddr >= s.memsz:
			lo = mid + 1
		default:
			return s, true
		}
	}
	return segment{}, false
}

// openModule finds and checks the file of one group. It returns nil when
// the group is not an ELF module (a data file, a shared memory object).
func (c *Core) openModule(g *fileGroup, isExe bool, opts Options) *target.Module {
	low := c.maps[g.low]
	hdr := c.readMemHeader(low.start, low.off)
	if hdr.known && !hdr.isELF {
		return nil
	}
	mod := &target.Module{Name: g.name, Start: g.start, End: g.end}
	label := filepath.Base(g.name)
	type candidate struct {
		path        string
		substituted bool
	}
	var cands []candidate
	recorded := strings.TrimSuffix(g.name, " (deleted)")
	var tried, problems []string
	if isExe && opts.Exe != "" {
		cands = append(cands, candidate{opts.Exe, true})
	} else {
		if opts.Sysroot != "" {
			path, err := inSysroot(opts.Sysroot, recorded)
			switch {
			case err == nil:
				cands = append(cands, candidate{path, true})
			case errors.Is(err, os.ErrNotExist):
				tried = append(tried, path)
			default:
				tried = append(tried, path)
				problems = append(problems, err.Error())
			}
		} else {
			cands = append(cands, candidate{recorded, false})
		}
		// The base name of the cleaned path: a name such as "/x/.."
		// has none.
		if base := filepath.Base(filepath.Clean("/" + recorded)); base != "/" {
			for _, dir := range opts.SearchPath {
				cands = append(cands, candidate{filepath.Join(dir, base), true})
			}
		}
	}
	var mismatch *Mismatch
	for _, cand := range cands {
		tried = append(tried, cand.path)
		isELF, err := fileIsELF(cand.path)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				problems = append(problems, err.Error())
			}
			continue
		}
		if !isELF {
			if !hdr.known {
				// The core has no copy of the first page and the
				// file is not ELF: a mapped data file.
				return nil
			}
			problems = append(problems, cand.path+" is not an ELF file")
			continue
		}
		im, err := telf.OpenWith(cand.path, opts.Images)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if im.Machine() != elf.EM_X86_64 {
			problems = append(problems, fmt.Sprintf("%s is for %v", cand.path, im.Machine()))
			im.Close()
			continue
		}
		if id := im.BuildID(); hdr.buildID != "" && id != hdr.buildID {
			if mismatch == nil {
				mismatch = &Mismatch{Module: mod, File: cand.path, CoreBuildID: hdr.buildID, FileBuildID: id}
			}
			im.Close()
			continue
		}
		bias, ok := im.BiasFor(low.start, low.off)
		if !ok {
			if !hdr.hasBias {
				problems = append(problems, fmt.Sprintf("no PT_LOAD segment of %s maps file offset %#x", cand.path, low.off))
				im.Close()
				continue
			}
			bias = hdr.bias
		}
		mod.Image, mod.File, mod.Bias = im, cand.path, bias
		if hdr.buildID == "" && cand.substituted {
			c.warnf("%s: the core has no build-id for %s; using %s unverified", label, g.name, cand.path)
		}
		return mod
	}
	if hdr.hasBias {
		mod.Bias = hdr.bias
	}
	if !hdr.known && !isExe && !g.exec && mismatch == nil && len(problems) == 0 {
		// Nothing says this is code: likely a data file that is gone.
		return nil
	}
	if mismatch != nil {
		fid := mismatch.FileBuildID
		if fid == "" {
			fid = "none"
		}
		c.warnf("%s: build-id in core %s differs from %s (%s); not used", label, mismatch.CoreBuildID, mismatch.File, fid)
		c.mismatches = append(c.mismatches, *mismatch)
		return mod
	}
	msg := fmt.Sprintf("%s: file not found (tried %s)", label, strings.Join(tried, ", "))
	if len(problems) > 0 {
		msg = fmt.Sprintf("%s: no usable file (tried %s): %s", label, strings.Join(tried, ", "), strings.Join(problems, "; "))
	}
	c.warnf("%s; its code and read-only data are unavailable", msg)
	return mod
}

// maxSysrootLinks bounds the symbolic links followed in resolving one
// path inside the sysroot (as Linux's 40 does for a path).
const maxSysrootLinks = 40

// inSysroot returns the file in root that name, a path the core records,
// refers to when root is taken as the root directory. The name is first
// cleaned as an absolute path (its ".." cannot climb above "/"); then a
// symbolic link met on the way is followed inside root (an absolute
// target from root, a relative one from the link's directory, ".." in it
// stopping at root). The result lies in root and has no symbolic link in
// it below root, so opening it cannot leave root (provided root does not
// change meanwhile).
//
// When a component does not exist, the error wraps os.ErrNotExist and
// the path returned is where the name would have been; when resolution
// fails otherwise (a link loop, a component that is not a directory),
// the path is as far as it got.
func inSysroot(root, name string) (string, error) {
	var done []string // resolved components below root
	at := func(extra ...string) string {
		return filepath.Join(append([]string{root}, append(done, extra...)...)...)
	}
	rest := strings.Split(filepath.Clean("/"+name), "/")
	links := 0
	for len(rest) > 0 {
		comp := rest[0]
		rest = rest[1:]
		switch comp {
		case "", ".":
			continue
		case "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
			}
			continue
		}
		p := at(comp)
		st, err := os.Lstat(p)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return filepath.Join(p, filepath.Clean("/"+strings.Join(rest, "/"))), err
			}
			return p, err
		}
		if st.Mode()&os.ModeSymlink == 0 {
			done = append(done, comp)
			continue
		}
		if links++; links > maxSysrootLinks {
			return p, fmt.Errorf("resolving %s in %s: more than %d symbolic links", name, root, maxSysrootLinks)
		}
		link, err := os.Readlink(p)
		if err != nil {
			return p, err
		}
		if filepath.IsAbs(link) {
			done = done[:0]
		}
		rest = append(strings.Split(link, "/"), rest...)
	}
	return at(), nil
}

// fileIsELF reports whether path is a regular file starting with the ELF
// magic. Anything else is not opened: a core may name any path, and
// opening a FIFO blocks, opening a device can act on it.
func fileIsELF(path string) (bool, error) {
	// Devices are not even opened (an open may have effects); the open
	// does not block, so a FIFO put in the file's place after that check
	// cannot hang it, and only what is still a regular file is read.
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return false, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	if !st.Mode().IsRegular() {
		return false, nil
	}
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil {
		return false, nil
	}
	return string(magic[:]) == elf.ELFMAG, nil
}

// readMemHeader looks at the first page of a file mapping as the core
// dumped it (start maps file offset off): the ELF header, the program
// headers, the load bias they imply, and the build-id note.
func (c *Core) readMemHeader(start, off uint64) memHeader {
	var h memHeader
	if off != 0 {
		return h
	}
	var eh [64]byte
	if err := c.readCore(start, eh[:4]); err != nil {
		return h
	}
	h.known = true
	if string(eh[:4]) != elf.ELFMAG {
		return h
	}
	h.isELF = true
	if err := c.readCore(start, eh[:]); err != nil {
		return h
	}
	if elf.Class(eh[elf.EI_CLASS]) != elf.ELFCLASS64 || elf.Data(eh[elf.EI_DATA]) != elf.ELFDATA2LSB {
		return h
	}
	le := binary.LittleEndian
	phoff := le.Uint64(eh[32:])
	phentsize := le.Uint16(eh[54:])
	phnum := uint64(le.Uint16(eh[56:]))
	if phentsize != 56 || phnum == 0 || phnum > maxMemPhdrs || phoff > 1<<20 {
		return h
	}
	raw := make([]byte, phnum*56)
	if err := c.readCore(start+phoff, raw); err != nil {
		return h
	}
	var notes []elf.ProgHeader
	lowOff := ^uint64(0)
	for i := uint64(0); i < phnum; i++ {
		b := raw[i*56:]
		p := elf.ProgHeader{
			Type:   elf.ProgType(le.Uint32(b[0:])),
			Off:    le.Uint64(b[8:]),
			Vaddr:  le.Uint64(b[16:]),
			Filesz: le.Uint64(b[32:]),
			Align:  le.Uint64(b[48:]),
		}
		switch p.Type {
		case elf.PT_LOAD:
			if p.Off < lowOff {
				// File offset 0 is at link-time address
				// Vaddr - Off, mapped at start.
				lowOff = p.Off
				h.bias = start - ((p.Vaddr - p.Off) &^ 0xfff)
				h.hasBias = true
			}
		case elf.PT_NOTE:
			notes = append(notes, p)
		}
	}
	if !h.hasBias {
		return h
	}
	for _, p := range notes {
		if p.Filesz == 0 || p.Filesz > maxMemNoteBytes {
			continue
		}
		data := make([]byte, p.Filesz)
		if err := c.readCore(h.bias+p.Vaddr, data); err != nil {
			continue
		}
		ns, _ := telf.ParseNotes(data, le, p.Align)
		if id := telf.BuildIDFromNotes(ns); id != "" {
			h.buildID = id
			break
		}
	}
	return h
}
