package elf

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ompd-inspect/ompd-inspect/target/sectioncache"
)

// systemDebugDir is the global debug directory searched for every image
// opened by Open or OpenWith.
const systemDebugDir = "/usr/lib/debug"

// OpenOptions says where an image's separate debug file is looked for
// besides the default places (/usr/lib/debug and the image's own
// directory, see Image.DebugFile).
type OpenOptions struct {
	// DebugDirs are directories searched for the debug file before
	// /usr/lib/debug, in order and each like it: by build-id
	// (DIR/.build-id/xx/rest.debug), then by the .gnu_debuglink name
	// (DIR/NAME and DIR/<the image's directory>/NAME). Empty entries are
	// ignored; relative ones are taken from the current directory.
	DebugDirs []string

	// Fetch, when not nil, is asked for the debug file by the image's
	// build-id (lowercase hex) after no local file matched: it returns
	// the path of a local copy (a debuginfod client's cache entry), or
	// "" and nil when it has nothing to say. The file it names is used
	// only if it carries the same build-id. An error becomes part of the
	// image's "no separate debug file found" error. It is called at most
	// once per image, from whichever goroutine first needs the debug
	// file.
	Fetch func(buildID string) (string, error)

	// Sections, when not nil, keeps the decompressed debug sections of
	// the image (or of its separate debug file) across runs: a section
	// stored for the same build-id and file is read from it instead of
	// being inflated again (sectioncache.Cache).
	Sections SectionCache
}

// SectionCache keeps decompressed sections across runs; see
// sectioncache.Cache, which implements it.
type SectionCache interface {
	// Get returns the section k names, of decompressed size size, or
	// nil when it holds none that matches.
	Get(k sectioncache.Key, size uint64) []byte
	// Put stores a section's decompressed data.
	Put(k sectioncache.Key, data []byte) error
}

// OpenWith opens the ELF file at path, as Open does, and looks for its
// separate debug file also where opts says.
func OpenWith(path string, opts OpenOptions) (*Image, error) {
	var dirs []string
	for _, d := range opts.DebugDirs {
		if d == "" {
			continue
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, fmt.Errorf("opening ELF file %s: debug directory %s: %w", path, d, err)
		}
		dirs = append(dirs, abs)
	}
	im, err := open(path, append(append([]string(nil), dirs...), systemDebugDir))
	if err != nil {
		return nil, err
	}
	im.debugDirs = dirs
	im.fetch = opts.Fetch
	im.sections = opts.Sections
	return im, nil
}

// fetchSeparate asks the image's fetcher for its debug file by build-id
// and opens it. It returns nil and nil when the fetcher has nothing.
func (im *Image) fetchSeparate() (*Image, error) {
	p, err := im.fetch(im.buildID)
	if err != nil {
		return nil, err
	}
	if p == "" {
		return nil, nil
	}
	d, err := open(p, nil)
	if err != nil {
		return nil, fmt.Errorf("debug file fetched for build-id %s: %w", im.buildID, err)
	}
	if d.buildID != im.buildID {
		d.Close()
		return nil, fmt.Errorf("debug file %s fetched for build-id %s has build-id %q", p, im.buildID, d.buildID)
	}
	return d, nil
}

// ReadBuildID parses the open file f as ELF and returns its
// NT_GNU_BUILD_ID note as lowercase hex, "" when it has none. Only a
// regular file is read; a file that is not valid ELF gives an error.
// f's offset is not used.
func ReadBuildID(f *os.File) (string, error) {
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("reading the build-id of %s: %w", f.Name(), err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("reading the build-id of %s: not a regular file", f.Name())
	}
	im := &Image{Path: f.Name(), file: f, size: st.Size()}
	if err := guard(func() error {
		ef, err := elf.NewFile(f)
		if err != nil {
			return err
		}
		im.ef = ef
		return nil
	}); err != nil {
		return "", fmt.Errorf("%s: not a valid ELF file: %w", f.Name(), err)
	}
	return im.findBuildID(), nil
}
