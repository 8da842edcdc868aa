// Package privdir keeps a cache directory private to the invoking user.
// ompd-inspect often runs as root: a cache it reads must be one that
// nobody else could have written or pointed elsewhere. A directory is
// accepted when the invoking user owns it and nobody else can write it,
// and every directory above it is owned by root or that user and is not
// writable by others (unless sticky, as /tmp). Missing directories are
// created one level at a time, mode 0700, only below a directory that
// passes. Files in it are accepted only as regular files of the invoking
// user that nobody else can write, opened without following links.
package privdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrUnsafe marks a directory or file refused as unsafe.
var ErrUnsafe = errors.New("unsafe cache")

// Open creates the directory dir if needed (mode 0700, and its missing
// parents) and checks it and every directory above it; it returns dir
// with its symbolic links resolved. what names the directory in errors
// ("debuginfod cache"); a refusal wraps ErrUnsafe.
func Open(what, dir string, uid int) (string, error) {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := makeDir(what, dir, uid); err != nil {
			return "", err
		}
	}
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", what, dir, err)
	}
	fi, err := os.Lstat(resolved)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", what, dir, err)
	}
	if why := OwnDir(fi, uid); why != "" {
		return "", unsafe(what, dir, resolved, resolved, why)
	}
	for p := filepath.Dir(resolved); ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", what, dir, err)
		}
		if why := ancestor(fi, uid); why != "" {
			return "", unsafe(what, dir, resolved, p, why)
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	return resolved, nil
}

// unsafe is the error for a refused directory: path (the directory or
// one above it) fails the rule for why.
func unsafe(what, dir, resolved, path, why string) error {
	where := dir
	if resolved != filepath.Clean(dir) {
		where += " (" + resolved + ")"
	}
	if path == resolved {
		return fmt.Errorf("%s %s %s: %w; not used", what, where, why, ErrUnsafe)
	}
	return fmt.Errorf("%s %s: %s %s: %w; not used", what, where, path, why, ErrUnsafe)
}

// makeDir creates dir and the directories missing above it, one level at
// a time (mode 0700), only below an existing directory that passes the
// ancestor rule, with every directory above that one passing it too:
// nothing is created where someone else could have pointed it.
func makeDir(what, dir string, uid int) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, dir, err)
	}
	var missing []string
	base := abs
	for {
		_, err := os.Lstat(base)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || base == filepath.Dir(base) {
			return fmt.Errorf("%s %s: %w", what, dir, err)
		}
		missing = append(missing, base)
		base = filepath.Dir(base)
	}
	for p := base; ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("%s %s: %w", what, dir, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return unsafe(what, dir, abs, p, "is a symbolic link")
		}
		if why := ancestor(fi, uid); why != "" {
			return unsafe(what, dir, abs, p, why)
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s %s: %w", what, dir, err)
		}
		fi, err := os.Lstat(missing[i])
		if err != nil {
			return fmt.Errorf("%s %s: %w", what, dir, err)
		}
		if why := OwnDir(fi, uid); why != "" {
			return unsafe(what, dir, abs, missing[i], why)
		}
	}
	return nil
}

// OwnDir returns why fi is not a directory of the cache: one the invoking
// user (uid) owns and nobody else can write. "" means it is.
func OwnDir(fi fs.FileInfo, uid int) string {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return "is a symbolic link"
	case !fi.IsDir():
		return "is not a directory"
	}
	return Owned(fi, uid)
}

// OwnFile returns why fi is not a file of the cache: a regular file the
// invoking user owns and nobody else can write. "" means it is.
func OwnFile(fi fs.FileInfo, uid int) string {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return "is a symbolic link"
	case !fi.Mode().IsRegular():
		return "is not a regular file"
	}
	return Owned(fi, uid)
}

// Owned returns why fi, a cache directory or file, is refused: owned by
// someone other than the invoking user or writable by its group or
// others. "" means it is not.
func Owned(fi fs.FileInfo, uid int) string {
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

// OpenFile opens the file p of a cache directory for reading after
// checking it (OwnFile), without following a link, and checks that what
// was opened is what was checked. A refusal wraps ErrUnsafe; what names
// the file in errors.
func OpenFile(what, p string, uid int) (*os.File, fs.FileInfo, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, nil, err
	}
	if why := OwnFile(fi, uid); why != "" {
		return nil, nil, fmt.Errorf("%s %s %s: %w; not used", what, p, why, ErrUnsafe)
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !os.SameFile(st, fi) {
		f.Close()
		return nil, nil, fmt.Errorf("%s %s changed while it was checked: %w; not used", what, p, ErrUnsafe)
	}
	return f, st, nil
}
