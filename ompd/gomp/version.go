package gomp

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Bounds of the reads of libgomp's ELF image in the target's memory.
const (
	maxHeaderPages = 1024 // pages searched back from a function for the ELF header
	pageSize       = 4096
	maxPhdrs       = 64
	maxDynamic     = 512
	maxVerdefs     = 256
	maxNoteBytes   = 4096
)

// Image is what libgomp's loaded ELF image says about its release.
type Image struct {
	// Base is the address of its ELF header (its load bias).
	Base uint64
	// Nodes are its symbol version definitions (GOMP_5.1, OMP_5.1 ...).
	Nodes []string
	// BuildID is its GNU build-id in hex, "" when it has none.
	BuildID string
}

// readImage finds the ELF header of the module that holds addr (a libgomp
// function) by going back page by page, and reads its version definitions
// and build-id, all from the target's memory: the loaded image keeps its
// first page, program headers, dynamic section, version definitions and
// notes mapped.
func (m *mem) readImage(addr uint64) (*Image, error) {
	page := addr &^ (pageSize - 1)
	var hdr [64]byte
	found := false
	for i := 0; i < maxHeaderPages && page >= pageSize; i, page = i+1, page-pageSize {
		if err := m.read(page, hdr[:4]); err != nil {
			continue
		}
		if string(hdr[:4]) == "\x7fELF" {
			found = true
			break
		}
	}
	if !found {
		return nil, fmt.Errorf("no ELF header within %d pages below %#x", maxHeaderPages, addr)
	}
	if err := m.read(page, hdr[:]); err != nil {
		return nil, fmt.Errorf("ELF header at %#x: %w", page, err)
	}
	if hdr[4] != 2 || hdr[5] != 1 {
		return nil, fmt.Errorf("ELF header at %#x: not a little-endian 64-bit image", page)
	}
	le := binary.LittleEndian
	phoff, phentsize, phnum := le.Uint64(hdr[32:]), uint64(le.Uint16(hdr[54:])), int(le.Uint16(hdr[56:]))
	if phentsize < 56 || phnum == 0 || phnum > maxPhdrs {
		return nil, fmt.Errorf("ELF header at %#x: %d program headers of %d bytes", page, phnum, phentsize)
	}
	img := &Image{Base: page}
	var dynAddr, dynSize, noteAddr, noteSize []uint64
	for i := 0; i < phnum; i++ {
		var ph [56]byte
		if err := m.read(page+phoff+uint64(i)*phentsize, ph[:]); err != nil {
			return nil, fmt.Errorf("program header %d: %w", i, err)
		}
		typ, vaddr, filesz := le.Uint32(ph[0:]), le.Uint64(ph[16:]), le.Uint64(ph[32:])
		switch typ {
		case 2: // PT_DYNAMIC
			dynAddr, dynSize = append(dynAddr, page+vaddr), append(dynSize, filesz)
		case 4: // PT_NOTE
			noteAddr, noteSize = append(noteAddr, page+vaddr), append(noteSize, filesz)
		}
	}
	for i := range noteAddr {
		if id := m.buildID(noteAddr[i], noteSize[i]); id != "" {
			img.BuildID = id
			break
		}
	}
	if len(dynAddr) == 0 {
		return img, errors.New("libgomp's image has no dynamic section")
	}
	nodes, err := m.versionNodes(page, dynAddr[0], dynSize[0])
	img.Nodes = nodes
	return img, err
}

// buildID reads the NT_GNU_BUILD_ID note among the notes at addr.
func (m *mem) buildID(addr, size uint64) string {
	if size > maxNoteBytes {
		size = maxNoteBytes
	}
	b := make([]byte, size)
	if m.read(addr, b) != nil {
		return ""
	}
	le := binary.LittleEndian
	for len(b) >= 12 {
		namesz, descsz, typ := uint64(le.Uint32(b)), uint64(le.Uint32(b[4:])), le.Uint32(b[8:])
		n := (namesz + 3) &^ 3
		d := (descsz + 3) &^ 3
		if 12+n+d > uint64(len(b)) {
			return ""
		}
		if typ == 3 && namesz == 4 && string(b[12:15]) == "GNU" {
			return hex.EncodeToString(b[12+n : 12+n+descsz])
		}
		b = b[12+n+d:]
	}
	return ""
}

// versionNodes reads the names of the version definitions (DT_VERDEF).
// The dynamic loader relocates some entries of the dynamic section in place
// (DT_STRTAB) and not others (DT_VERDEF): a value below the base is taken
// as relative to it.
func (m *mem) versionNodes(base, dyn, size uint64) ([]string, error) {
	n := size / 16
	if n > maxDynamic {
		n = maxDynamic
	}
	b := make([]byte, n*16)
	if err := m.read(dyn, b); err != nil {
		return nil, fmt.Errorf("dynamic section at %#x: %w", dyn, err)
	}
	le := binary.LittleEndian
	abs := func(v uint64) uint64 {
		if v < base {
			return base + v
		}
		return v
	}
	var strtab, verdef, verdefnum uint64
	for i := uint64(0); i < n; i++ {
		tag, val := le.Uint64(b[i*16:]), le.Uint64(b[i*16+8:])
		switch tag {
		case 0:
			i = n
		case 5: // DT_STRTAB
			strtab = abs(val)
		case 0x6ffffffc: // DT_VERDEF
			verdef = abs(val)
		case 0x6ffffffd: // DT_VERDEFNUM
			verdefnum = val
		}
	}
	if strtab == 0 || verdef == 0 {
		return nil, errors.New("libgomp's dynamic section has no version definitions")
	}
	if verdefnum > maxVerdefs {
		return nil, fmt.Errorf("libgomp has %d version definitions (more than %d)", verdefnum, maxVerdefs)
	}
	var nodes []string
	at := verdef
	for i := uint64(0); i < verdefnum; i++ {
		var vd [20]byte
		if err := m.read(at, vd[:]); err != nil {
			return nodes, fmt.Errorf("version definition %d: %w", i, err)
		}
		flags, aux, next := le.Uint16(vd[2:]), le.Uint32(vd[12:]), le.Uint32(vd[16:])
		var va [8]byte
		if err := m.read(at+uint64(aux), va[:]); err != nil {
			return nodes, fmt.Errorf("version definition %d: %w", i, err)
		}
		name, err := m.cb.ReadString(strtab+uint64(le.Uint32(va[:])), 64)
		if err != nil {
			return nodes, fmt.Errorf("version definition %d: name: %w", i, err)
		}
		if flags&1 == 0 { // not VER_FLG_BASE (the file's own name)
			nodes = append(nodes, name)
		}
		if next == 0 {
			break
		}
		at += uint64(next)
	}
	return nodes, nil
}

// Release is how libgomp's GCC release was identified.
type Release struct {
	// Major is the GCC major release, 0 when unknown.
	Major int
	// Node is the highest GOMP_ version node, which dates the release.
	Node string
	// ByBuildID is true when the build-id is a known one.
	ByBuildID bool
}

// identify gives the release of img: a known build-id, else the latest
// version node libgomp defines that is known to date a release.
func identify(img *Image) (Release, error) {
	var r Release
	builds, err := knownBuilds()
	if err != nil {
		return r, err
	}
	nodes, err := knownNodes()
	if err != nil {
		return r, err
	}
	r.Node = highestNode(img.Nodes, "GOMP_")
	if v, ok := builds[img.BuildID]; ok && img.BuildID != "" {
		r.Major, r.ByBuildID = v, true
		return r, nil
	}
	for _, n := range img.Nodes {
		if v, ok := nodes[n]; ok && v > r.Major {
			r.Major = v
		}
	}
	// A node newer than every known one: a later release.
	if r.Node != "" && r.Major != 0 && nodes[r.Node] == 0 {
		r.Major = 0
	}
	return r, nil
}

// highestNode returns the highest version node with prefix (GOMP_5.1.2 >
// GOMP_5.1 > GOMP_5.0.1); PLUGIN nodes are left out.
func highestNode(nodes []string, prefix string) string {
	var cand []string
	for _, n := range nodes {
		if strings.HasPrefix(n, prefix) && !strings.Contains(n, "PLUGIN") {
			cand = append(cand, n)
		}
	}
	sort.Slice(cand, func(i, j int) bool { return versionLess(cand[i], cand[j], prefix) })
	if len(cand) == 0 {
		return ""
	}
	return cand[len(cand)-1]
}

func versionLess(a, b, prefix string) bool {
	pa, pb := strings.Split(strings.TrimPrefix(a, prefix), "."), strings.Split(strings.TrimPrefix(b, prefix), ".")
	for i := 0; i < len(pa) || i < len(pb); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}
