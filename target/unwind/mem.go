package unwind

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/go-delve/delve/pkg/dwarf/frame"
)

// An ELF image that is mapped but is no module of the target: the vDSO,
// which the kernel maps into every process without a file (neither
// /proc/PID/maps nor a core's NT_FILE names it as one). Its ELF headers,
// section headers and .eh_frame are all in its mapping, so it is read
// from memory when a pc falls outside every module.

const (
	// memImageScanPages is how many pages at and below a pc are looked
	// at for the image's ELF header.
	memImageScanPages = 8
	// maxMemImageBytes bounds the size of an in-memory image.
	maxMemImageBytes = 1 << 20
	pageSize         = 4096
)

// memImage is an ELF image read from the target's memory.
type memImage struct {
	name       string
	start, end uint64 // mapped range
	bias       uint64
	fdes       frameEntries
	syms       []memSym // function symbols sorted by address
}

type memSym struct {
	name       string
	addr, size uint64 // link-time
}

// funcAt names the function at the runtime address pc.
func (mi *memImage) funcAt(pc uint64) (string, bool) {
	addr := pc - mi.bias
	i := sort.Search(len(mi.syms), func(i int) bool { return mi.syms[i].addr > addr }) - 1
	if i < 0 {
		return "", false
	}
	s := mi.syms[i]
	if s.size != 0 && addr-s.addr >= s.size {
		return "", false
	}
	return s.name, true
}

// memImageAt returns the in-memory image that maps pc, or nil.
func (u *Unwinder) memImageAt(pc uint64) *memImage {
	page := pc &^ (pageSize - 1)
	u.mu.Lock()
	for _, mi := range u.mems {
		if mi != nil && pc >= mi.start && pc < mi.end {
			u.mu.Unlock()
			return mi
		}
	}
	u.mu.Unlock()
	for i := uint64(0); i < memImageScanPages && page >= i*pageSize; i++ {
		base := page - i*pageSize
		u.mu.Lock()
		mi, seen := u.mems[base]
		u.mu.Unlock()
		if !seen {
			mi = u.readMemImage(base)
			u.mu.Lock()
			u.mems[base] = mi
			u.mu.Unlock()
		}
		if mi != nil {
			if pc >= mi.start && pc < mi.end {
				return mi
			}
			return nil
		}
	}
	return nil
}

// readMemImage parses the ELF image whose header is at base, or returns
// nil when there is none.
func (u *Unwinder) readMemImage(base uint64) (mi *memImage) {
	var hdr [64]byte
	if u.t.ReadMemory(base, hdr[:]) != nil || string(hdr[:4]) != elf.ELFMAG ||
		elf.Class(hdr[elf.EI_CLASS]) != elf.ELFCLASS64 || elf.Data(hdr[elf.EI_DATA]) != elf.ELFDATA2LSB {
		return nil
	}
	le := binary.LittleEndian
	phoff, shoff := le.Uint64(hdr[32:]), le.Uint64(hdr[40:])
	phentsize, phnum := uint64(le.Uint16(hdr[54:])), uint64(le.Uint16(hdr[56:]))
	shentsize, shnum := uint64(le.Uint16(hdr[58:])), uint64(le.Uint16(hdr[60:]))
	size := max(phoff+phentsize*phnum, shoff+shentsize*shnum)
	if phoff > maxMemImageBytes || shoff > maxMemImageBytes || size > maxMemImageBytes || size < 64 {
		return nil
	}
	data := make([]byte, size)
	if u.t.ReadMemory(base, data) != nil {
		return nil
	}
	// The headers tell how much of the file is mapped; read it all.
	defer func() {
		if recover() != nil {
			mi = nil
		}
	}()
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil
	}
	fileEnd := size
	var loads []elf.ProgHeader
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			loads = append(loads, p.ProgHeader)
			fileEnd = max(fileEnd, p.Off+p.Filesz)
		}
	}
	if len(loads) == 0 || fileEnd > maxMemImageBytes {
		return nil
	}
	if fileEnd > size {
		data = make([]byte, fileEnd)
		if u.t.ReadMemory(base, data) != nil {
			return nil
		}
		if ef, err = elf.NewFile(bytes.NewReader(data)); err != nil {
			return nil
		}
	}
	first := loads[0]
	if first.Off != 0 {
		return nil
	}
	mi = &memImage{name: fmt.Sprintf("ELF image in memory at %#x", base), start: base, bias: base - first.Vaddr}
	for _, l := range loads {
		mi.end = max(mi.end, mi.bias+l.Vaddr+l.Memsz)
	}
	if soname, err := ef.DynString(elf.DT_SONAME); err == nil && len(soname) == 1 {
		mi.name = soname[0]
	}
	if s := ef.Section(".eh_frame"); s != nil && s.Type != elf.SHT_NOBITS && s.Addr != 0 {
		if b, err := io.ReadAll(io.LimitReader(s.Open(), maxMemImageBytes)); err == nil {
			if fdes, err := frame.Parse(b, binary.LittleEndian, 0, 8, s.Addr); err == nil {
				for _, f := range fdes {
					if f != nil && f.CIE != nil && f.End() > f.Begin() {
						mi.fdes = append(mi.fdes, f)
					}
				}
				mi.fdes = frameEntries(nil).Append(mi.fdes)
			}
		}
	}
	if syms, err := ef.DynamicSymbols(); err == nil {
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 && s.Name != "" {
				mi.syms = append(mi.syms, memSym{name: s.Name, addr: s.Value, size: s.Size})
			}
		}
		// Of aliases (clock_gettime, __vdso_clock_gettime), keep the
		// shortest name, as gdb shows.
		sort.SliceStable(mi.syms, func(i, j int) bool {
			a, b := mi.syms[i], mi.syms[j]
			if a.addr != b.addr {
				return a.addr < b.addr
			}
			return len(a.name) < len(b.name)
		})
		mi.syms = slices.CompactFunc(mi.syms, func(a, b memSym) bool { return a.addr == b.addr })
	}
	return mi
}
