package debuginfod

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ompd-inspect/ompd-inspect/target/elf"
	"github.com/ompd-inspect/ompd-inspect/target/privdir"
)

// cacheFile is the name of a debug file in its build-id directory, as
// elfutils' client names it.
const cacheFile = "debuginfo"

// cache is a checked cache directory.
type cache struct {
	// dir is the cache directory with its symbolic links resolved.
	dir string
	// uid is the invoking user, who owns the cache.
	uid int
	// max is the largest file accepted.
	max int64
	// warn receives what is ignored on the way to a result.
	warn func(string)
}

// openCache creates the client's cache directory if needed (mode 0700)
// and checks it and every directory above it.
func (c *Client) openCache() (*cache, error) {
	uid := os.Getuid()
	resolved, err := privdir.Open("debuginfod cache", c.CacheDir, uid)
	if err != nil {
		return nil, err
	}
	return &cache{dir: resolved, uid: uid, max: c.maxBytes(), warn: c.warn}, nil
}

// entryDir returns the build-id directory of id, creating it (mode 0700)
// when create is set. It is "" when it does not exist and create is
// not set.
func (k *cache) entryDir(id string, create bool) (string, error) {
	d := filepath.Join(k.dir, id)
	if create {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("debuginfod cache: %w", err)
		}
	}
	fi, err := os.Lstat(d)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("debuginfod cache: %w", err)
	}
	if why := privdir.OwnDir(fi, k.uid); why != "" {
		return "", fmt.Errorf("debuginfod cache entry %s %s: %w; not used", d, why, ErrUnsafeCache)
	}
	return d, nil
}

// lookup returns the path of the cached debug file of id after checking
// it, or "" when there is none to use: no entry, elfutils' empty marker of
// a failed lookup, or a file that is not the one (which a download then
// replaces; a warning says so). An entry that is not safe to open is an
// error.
func (k *cache) lookup(id string) (string, error) {
	d, err := k.entryDir(id, false)
	if err != nil || d == "" {
		return "", err
	}
	p := filepath.Join(d, cacheFile)
	f, fi, err := privdir.OpenFile("debuginfod cache entry", p, k.uid)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case errors.Is(err, privdir.ErrUnsafe):
		return "", err
	case err != nil:
		return "", fmt.Errorf("debuginfod cache: %w", err)
	}
	defer f.Close()
	if fi.Size() == 0 {
		// elfutils' client leaves an empty file for a build-id that no
		// server had.
		return "", nil
	}
	if fi.Size() > k.max {
		k.warn(fmt.Sprintf("debuginfod cache entry %s has %d bytes: %v (limit %d bytes); fetching it again", p, fi.Size(), ErrTooLarge, k.max))
		return "", nil
	}
	got, err := elf.ReadBuildID(f)
	switch {
	case err != nil:
		// ReadBuildID's error names the file again; its cause is what
		// matters.
		if cause := errors.Unwrap(err); cause != nil {
			err = cause
		}
		k.warn(fmt.Sprintf("debuginfod cache entry %s: %v: not ELF (%v); fetching it again", p, ErrMismatch, err))
		return "", nil
	case got != id:
		k.warn(fmt.Sprintf("debuginfod cache entry %s: %v: it has build-id %q; fetching it again", p, ErrMismatch, got))
		return "", nil
	}
	return p, nil
}
