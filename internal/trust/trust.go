// Package trust decides whether a file may be loaded as code into
// ompd-inspect's own process. ompd-inspect often runs as root against
// other users' processes, and some of the files it could load are named
// by the target (an OMPD library that the runtime's ompd_dll_locations
// names, or one beside the runtime's file). The rule is the one debuggers
// use for code found through what they debug: a file is trusted only if
// it and every directory above it are owned by root or by the invoking
// user (the real user id), and none of them can be written by a group or
// by others. A directory with the sticky bit (/tmp) is the exception: there
// only an entry's owner can rename or remove it, so an entry that root or
// the invoking user owns stays theirs.
//
// A path is judged after its symbolic links are resolved; the caller must
// then use the resolved path, which nobody else can change.
package trust

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Owners are the users whose files are trusted: root and the invoking
// user.
type Owners struct {
	// UID is the invoking user's id (os.Getuid()); root (0) is always
	// trusted.
	UID int
}

// Invoker returns the owners trusted for the running process.
func Invoker() Owners { return Owners{UID: os.Getuid()} }

// UntrustedError says why a file is not trusted: which path on the way to
// it is owned or writable by someone else.
type UntrustedError struct {
	// File is the path that was asked about; Resolved the file it leads to.
	File, Resolved string
	// Path is the file or directory that fails the rule, Reason says how.
	Path, Reason string
}

func (e *UntrustedError) Error() string {
	s := e.Path + " " + e.Reason
	if e.Resolved != "" && e.Resolved != filepath.Clean(e.File) {
		s += " (" + e.File + " leads to " + e.Resolved + ")"
	}
	return s
}

// File checks that path names a regular file that may be loaded, and
// returns its resolved path (absolute, without symbolic links), which the
// caller must use instead of path. A file that does not exist gives an
// error for which errors.Is(err, fs.ErrNotExist) holds; a file that fails
// the rule gives an *UntrustedError.
func (o Owners) File(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	fi, err := os.Lstat(resolved)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", &UntrustedError{File: path, Resolved: resolved, Path: resolved, Reason: "is not a regular file"}
	}
	if why := o.judge(fi, false); why != "" {
		return "", &UntrustedError{File: path, Resolved: resolved, Path: resolved, Reason: why}
	}
	for dir := filepath.Dir(resolved); ; dir = filepath.Dir(dir) {
		di, err := os.Lstat(dir)
		if err != nil {
			return "", err
		}
		if di.Mode()&fs.ModeSymlink != 0 {
			// EvalSymlinks resolved it a moment ago: someone changed it.
			return "", &UntrustedError{File: path, Resolved: resolved, Path: dir, Reason: "became a symbolic link while it was checked"}
		}
		if !di.IsDir() {
			return "", &UntrustedError{File: path, Resolved: resolved, Path: dir, Reason: "is not a directory"}
		}
		if why := o.judge(di, true); why != "" {
			return "", &UntrustedError{File: path, Resolved: resolved, Path: dir, Reason: why}
		}
		if dir == "/" || dir == filepath.Dir(dir) {
			break
		}
	}
	return resolved, nil
}

// judge returns why fi fails the rule, or "".
func (o Owners) judge(fi fs.FileInfo, dir bool) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "has no owner that can be checked"
	}
	uid := int(st.Uid)
	if uid != 0 && uid != o.UID {
		return fmt.Sprintf("is owned by uid %d, neither root nor you (uid %d)", uid, o.UID)
	}
	perm := fi.Mode().Perm()
	if perm&0o022 == 0 || dir && fi.Mode()&fs.ModeSticky != 0 {
		return ""
	}
	var who []string
	if perm&0o020 != 0 {
		who = append(who, "its group")
	}
	if perm&0o002 != 0 {
		who = append(who, "others")
	}
	return fmt.Sprintf("is writable by %s (mode %04o)", strings.Join(who, " and "), perm)
}

// IsUntrusted reports whether err says a file failed the rule.
func IsUntrusted(err error) bool {
	var u *UntrustedError
	return errors.As(err, &u)
}
