package debuginfod

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ompd-inspect/ompd-inspect/target/elf"
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
	dir := c.CacheDir
	uid := os.Getuid()
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := makeCacheDir(dir, uid); err != nil {
			return nil, err
		}
	}
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("debuginfod cache %s: %w", dir, err)
	}
	fi, err := os.Lstat(resolved)
	if err != nil {
		return nil, fmt.Errorf("debuginfod cache %s: %w", dir, err)
	}
	if why := ownDir(fi, uid); why != "" {
		return nil, unsafeCache(dir, resolved, resolved, why)
	}
	for p := filepath.Dir(resolved); ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, fmt.Errorf("debuginfod cache %s: %w", dir, err)
		}
		if why := ancestor(fi, uid); why != "" {
			return nil, unsafeCache(dir, resolved, p, why)
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	return &cache{dir: resolved, uid: uid, max: c.maxBytes(), warn: c.warn}, nil
}

// unsafeCache is the error for a refused cache directory: path (the cache
// or a directory above it) fails the rule for why.
func unsafeCache(dir, resolved, path, why string) error {
	where := dir
	if resolved != filepath.Clean(dir) {
		where += " (" + resolved + ")"
	}
	if path == resolved {
		return fmt.Errorf("debuginfod cache %s %s: %w; not used", where, why, ErrUnsafeCache)
	}
	return fmt.Errorf("debuginfod cache %s: %s %s: %w; not used", where, path, why, ErrUnsafeCache)
}

// makeCacheDir creates the cache directory dir and the directories
// missing above it, one level at a time (mode 0700), only below an
// existing directory that passes the ancestor rule, with every directory
// above that one passing it too: nothing is created where someone else
// could have pointed it.
func makeCacheDir(dir string, uid int) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("debuginfod cache %s: %w", dir, err)
	}
	var missing []string
	base := abs
	for {
		_, err := os.Lstat(base)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || base == filepath.Dir(base) {
			return fmt.Errorf("debuginfod cache %s: %w", dir, err)
		}
		missing = append(missing, base)
		base = filepath.Dir(base)
	}
	for p := base; ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("debuginfod cache %s: %w", dir, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return unsafeCache(dir, abs, p, "is a symbolic link")
		}
		if why := ancestor(fi, uid); why != "" {
			return unsafeCache(dir, abs, p, why)
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("debuginfod cache %s: %w", dir, err)
		}
		fi, err := os.Lstat(missing[i])
		if err != nil {
			return fmt.Errorf("debuginfod cache %s: %w", dir, err)
		}
		if why := ownDir(fi, uid); why != "" {
			return unsafeCache(dir, abs, missing[i], why)
		}
	}
	return nil
}

// ownDir returns why fi is not a directory of the cache: one the
// invoking user owns and nobody else can write. "" means it is.
func ownDir(fi fs.FileInfo, uid int) string {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return "is a symbolic link"
	case !fi.IsDir():
		return "is not a directory"
	}
	return owned(fi, uid)
}

// owned returns why fi, a cache directory or file, is refused: owned by
// someone other than the invoking user or writable by its group or
// others. "" means it is not.
func owned(fi fs.FileInfo, uid int) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "has no owner that can be checked"
	}
	if int(st.Uid) != uid {
		return fmt.Sprintf("is owned by uid %d, not by you (uid %d)", st.Uid, uid)
	}
	return writable(fi)
}

// writable returns why fi is writable by its group or others, or "".
func writable(fi fs.FileInfo) string {
	perm := fi.Mode().Perm()
	var who []string
	if perm&0o020 != 0 {
		who = append(who, "its group")
	}
	if perm&0o002 != 0 {
		who = append(who, "others")
	}
	if len(who) == 0 {
		return ""
	}
	return fmt.Sprintf("is writable by %s (mode %04o)", strings.Join(who, " and "), perm)
}

// ancestor returns why fi, a directory above the cache, would let someone
// else replace the cache: it is owned by another user than root and the
// invoking user, or writable by others without the sticky bit. "" means
// it would not.
func ancestor(fi fs.FileInfo, uid int) string {
	if !fi.IsDir() {
		return "is not a directory"
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "has no owner that can be checked"
	}
	if st.Uid != 0 && int(st.Uid) != uid {
		return fmt.Sprintf("is owned by uid %d, neither root nor you (uid %d)", st.Uid, uid)
	}
	if fi.Mode()&fs.ModeSticky != 0 {
		return ""
	}
	return writable(fi)
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
	if why := ownDir(fi, k.uid); why != "" {
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
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("debuginfod cache: %w", err)
	}
	if err := k.checkFile(p, fi); err != nil {
		return "", err
	}
	if fi.Size() == 0 {
		// elfutils' client leaves an empty file for a build-id that no
		// server had.
		return "", nil
	}
	if fi.Size() > k.max {
		k.warn(fmt.Sprintf("debuginfod cache entry %s has %d bytes: %v (limit %d bytes); fetching it again", p, fi.Size(), ErrTooLarge, k.max))
		return "", nil
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("debuginfod cache: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return "", fmt.Errorf("debuginfod cache: %w", err)
	} else if !os.SameFile(st, fi) {
		return "", fmt.Errorf("debuginfod cache entry %s changed while it was checked: %w; not used", p, ErrUnsafeCache)
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

// checkFile refuses a cache entry p that is not a regular file of the
// invoking user that nobody else can write.
func (k *cache) checkFile(p string, fi fs.FileInfo) error {
	why := ""
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		why = "is a symbolic link"
	case !fi.Mode().IsRegular():
		why = "is not a regular file"
	default:
		why = owned(fi, k.uid)
	}
	if why != "" {
		return fmt.Errorf("debuginfod cache entry %s %s: %w; not used", p, why, ErrUnsafeCache)
	}
	return nil
}
