package elf

import (
	"debug/elf"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// separate finds, opens and verifies the separate debug file of a
// stripped image, once.
func (im *Image) separate() (*Image, error) {
	im.sepOnce.Do(func() {
		im.sep, im.sepErr = im.findSeparate()
	})
	return im.sep, im.sepErr
}

// DebugFile returns the path of the separate debug file used for the
// image's DWARF (and, when the image has no .symtab, its symbols), or ""
// when none is used. It searches for one on first call.
func (im *Image) DebugFile() string {
	if im.hasDWARF() && im.ef.SectionByType(elf.SHT_SYMTAB) != nil {
		return ""
	}
	sep, _ := im.separate()
	if sep == nil {
		return ""
	}
	return sep.Path
}

// findSeparate looks for the debug file by build-id under each debug root
// (ROOT/.build-id/xx/rest.debug), then by the .gnu_debuglink name next to
// the file, in its .debug subdirectory, under each debug root followed
// by the file's directory, and directly in each directory OpenWith was
// given; last it asks the fetcher, if any, by build-id. A build-id
// candidate must carry the same build-id, a debug-link candidate must
// match the recorded CRC-32.
func (im *Image) findSeparate() (*Image, error) {
	if im.debugRoots == nil {
		return nil, fmt.Errorf("%s is itself a separate debug file; not searching for another", im.Path)
	}
	var tried []string
	var problems []string
	self, _ := os.Stat(im.Path)
	isSelf := func(p string) bool {
		st, err := os.Stat(p)
		return err == nil && self != nil && os.SameFile(st, self)
	}
	if id := im.buildID; len(id) > 2 {
		for _, root := range im.debugRoots {
			p := filepath.Join(root, ".build-id", id[:2], id[2:]+".debug")
			tried = append(tried, p)
			if isSelf(p) {
				continue
			}
			d, err := open(p, nil)
			if err != nil {
				if !errors.Is(err, os.ErrNotExist) {
					problems = append(problems, err.Error())
				}
				continue
			}
			if d.buildID != id {
				problems = append(problems, fmt.Sprintf("%s has build-id %q, want %s", p, d.buildID, id))
				d.Close()
				continue
			}
			return d, nil
		}
	}
	if name, crc, ok := im.DebugLink(); ok && name != "" && !strings.ContainsRune(name, '/') {
		dirs := []string{filepath.Dir(im.Path)}
		if real, err := filepath.EvalSymlinks(im.Path); err == nil && filepath.Dir(real) != dirs[0] {
			dirs = append(dirs, filepath.Dir(real))
		}
		var cands []string
		for _, dir := range dirs {
			cands = append(cands, filepath.Join(dir, name), filepath.Join(dir, ".debug", name))
		}
		for _, dir := range dirs {
			if abs, err := filepath.Abs(dir); err == nil {
				for _, root := range im.debugRoots {
					cands = append(cands, filepath.Join(root, abs, name))
				}
			}
		}
		for _, dir := range im.debugDirs {
			cands = append(cands, filepath.Join(dir, name))
		}
		for _, p := range cands {
			tried = append(tried, p)
			if isSelf(p) {
				continue
			}
			got, err := fileCRC(p)
			if err != nil {
				if !errors.Is(err, os.ErrNotExist) {
					problems = append(problems, err.Error())
				}
				continue
			}
			if got != crc {
				problems = append(problems, fmt.Sprintf("%s has CRC-32 %08x, debug-link wants %08x", p, got, crc))
				continue
			}
			d, err := open(p, nil)
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			// A CRC-32 is no proof of origin: when the image has a
			// build-id, the debug file must carry the same.
			if im.buildID != "" && d.buildID != im.buildID {
				problems = append(problems, fmt.Sprintf("%s has build-id %q, want %s", p, d.buildID, im.buildID))
				d.Close()
				continue
			}
			return d, nil
		}
	}
	if im.fetch != nil && im.buildID != "" {
		d, err := im.fetchSeparate()
		if d != nil {
			return d, nil
		}
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	msg := fmt.Sprintf("%s: no separate debug file found", im.Path)
	if len(tried) > 0 {
		msg += " (tried " + strings.Join(tried, ", ") + ")"
	}
	if len(problems) > 0 {
		msg += "; " + strings.Join(problems, "; ")
	}
	return nil, errors.New(msg)
}

// fileCRC computes the CRC-32 (IEEE, as .gnu_debuglink uses) of a
// regular file. Anything else is not opened (a FIFO would block, a device
// may never end).
func fileCRC(path string) (uint32, error) {
	if st, err := os.Stat(path); err != nil {
		return 0, err
	} else if !st.Mode().IsRegular() {
		return 0, fmt.Errorf("computing CRC-32 of %s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h := crc32.NewIEEE()
	if _, err := io.Copy(h, f); err != nil {
		return 0, fmt.Errorf("computing CRC-32 of %s: %w", path, err)
	}
	return h.Sum32(), nil
}
