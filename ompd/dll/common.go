// Package dll hosts a runtime's own OMPD library (for LLVM's runtime,
// libompd.so) as a second implementation of ompd-inspect's OMPD
// operations (ompd/backend). The library is loaded with dlopen, once per
// process and path, initialized once with a callback table that
// ompd-inspect serves from its own targets, and then gives each target an
// address space handle of its own.
//
// The package needs cgo. Built without it, Open reports that the backend
// is not built in, and the native backend does all the work.
package dll

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ompd-inspect/ompd-inspect/internal/trust"
	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// ErrNotBuiltIn is returned by Open in a build without cgo.
var ErrNotBuiltIn = errors.New("the dll backend is not built in (ompd-inspect was built with CGO_ENABLED=0); the native backend (--backend native) works without it")

// Callbacks is what the library asks of the debugger: the callbacks of the
// native implementation, plus symbol lookup in a thread's context, which
// resolves a thread-local variable to that thread's instance.
type Callbacks interface {
	ompd.Callbacks
	// ThreadSymbolAddr returns the address of symbol name as thread ctx
	// sees it (ctx from ThreadContext).
	ThreadSymbolAddr(ctx ompd.ThreadContext, name, fileHint string) (ompd.Address, error)
}

// Candidates returns the paths to try, in order, for the OMPD library named
// by the runtime's ompd_dll_locations. The standard leaves relative names
// to the tool: ompd-inspect tries each name next to the runtime library
// (runtimeFile, the runtime's file on disk) and then as the dynamic linker
// would find it (see Locate). Absolute names are used as they are. Every
// candidate comes from the target: pass it through Trusted before loading
// it.
func Candidates(locations []string, runtimeFile string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, l := range locations {
		if l == "" {
			continue
		}
		if filepath.IsAbs(l) {
			add(l)
			continue
		}
		if runtimeFile != "" {
			p := filepath.Join(filepath.Dir(runtimeFile), l)
			if _, err := os.Stat(p); err == nil {
				add(p)
			}
		}
		add(l)
	}
	return out
}

// Trusted returns the file to load for a candidate that the target named
// (one of Candidates): a bare name is first located as the dynamic linker
// would (Locate), then the file must pass the trust rule of
// internal/trust for owners. The returned path is resolved (no symbolic
// links): load it, not the candidate. A candidate that fails the rule
// gives an error for which trust.IsUntrusted holds.
func Trusted(candidate string, owners trust.Owners) (string, error) {
	path := candidate
	if !strings.Contains(candidate, "/") {
		p, err := Locate(candidate, os.Getenv("LD_LIBRARY_PATH"))
		if err != nil {
			return "", err
		}
		path = p
	}
	resolved, err := owners.File(path)
	if err != nil {
		if trust.IsUntrusted(err) {
			return "", err
		}
		if errors.Is(err, fs.ErrNotExist) {
			return "", notExist(candidate + ": no such file")
		}
		return "", fmt.Errorf("%s: %w", candidate, err)
	}
	return resolved, nil
}

// defaultLibDirs are the directories the dynamic linker of Debian's x86-64
// systems searches after LD_LIBRARY_PATH and its cache.
var defaultLibDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// Locate finds a library file by bare name the way dlopen would: in the
// directories of ldLibraryPath (LD_LIBRARY_PATH's form), then those that
// /etc/ld.so.conf lists (from which the dynamic linker's cache is built),
// then the default directories. A name that is in none of them gives an
// error for which errors.Is(err, fs.ErrNotExist) holds.
func Locate(name, ldLibraryPath string) (string, error) {
	if name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("%q is not a bare library name", name)
	}
	var dirs []string
	if ldLibraryPath != "" {
		for _, d := range strings.Split(ldLibraryPath, ":") {
			if d == "" {
				d = "." // an empty entry is the working directory, as for ld.so
			}
			dirs = append(dirs, d)
		}
	}
	dirs = append(dirs, ldSoConfDirs("/etc/ld.so.conf", map[string]bool{})...)
	dirs = append(dirs, defaultLibDirs...)
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", notExist(name + ": not found in LD_LIBRARY_PATH, the directories of /etc/ld.so.conf or the default library directories")
}

// notExist is an error that says a file is not there, in its own words;
// errors.Is(err, fs.ErrNotExist) holds for it.
type notExist string

func (e notExist) Error() string        { return string(e) }
func (e notExist) Is(target error) bool { return target == fs.ErrNotExist }

// ldSoConfDirs returns the directories a dynamic linker configuration file
// lists, following its include lines (globs); each file is read once, and
// at most 256 files in all (seen holds those read).
func ldSoConfDirs(path string, seen map[string]bool) []string {
	if seen[path] || len(seen) >= 256 {
		return nil
	}
	seen[path] = true
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	for n := 0; sc.Scan() && n < 4096; n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case strings.HasPrefix(line, "include") && len(line) > 7 && (line[7] == ' ' || line[7] == '\t'):
			pat := strings.TrimSpace(line[8:])
			if !filepath.IsAbs(pat) {
				pat = filepath.Join(filepath.Dir(path), pat)
			}
			matches, _ := filepath.Glob(pat)
			for _, m := range matches {
				dirs = append(dirs, ldSoConfDirs(filepath.Clean(m), seen)...)
			}
		case filepath.IsAbs(line):
			dirs = append(dirs, line)
		}
	}
	return dirs
}
