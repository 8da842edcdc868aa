package elf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// optionsBuildID and otherBuildID are the build-ids of the programs the
// OpenWith tests build.
const (
	optionsBuildID = "5eed0f0e1d0c0b0a09080706050403020100ff01"
	otherBuildID   = "5eed0f0e1d0c0b0a09080706050403020100ff02"
)

// strippedPair builds testdata/symbols.c with build-id id in dir and
// returns a stripped copy linked to its debug file by the name prog.debug
// (outside dir) and the debug file's contents, which no default place
// holds.
func strippedPair(t *testing.T, dir, id string) (stripped string, debug []byte) {
	t.Helper()
	full := compile(t, "gcc", dir, "prog-"+id, "-Wl,--build-id=0x"+id)
	dbg := filepath.Join(dir, "keep.debug")
	run(t, "objcopy", "--only-keep-debug", full, dbg)
	data, err := os.ReadFile(dbg)
	if err != nil {
		t.Fatal(err)
	}
	// The debug link records the name prog.debug and the CRC of the
	// debug file's contents.
	linkDir := t.TempDir()
	link := filepath.Join(linkDir, "prog.debug")
	if err := os.WriteFile(link, data, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "prog")
	run(t, "objcopy", "--strip-all", "--add-gnu-debuglink="+link, full, bin)
	for _, p := range []string{dbg, link, full} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	return bin, data
}

// place writes data to path, making its directory.
func place(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// openWith opens path with opts, closing it at the end of the test.
func openWith(t *testing.T, path string, opts OpenOptions) *Image {
	t.Helper()
	im, err := OpenWith(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	return im
}

// TestOpenWithDebugDirs finds a stripped program's debug file in the
// directories given, by build-id and by debug-link name, and not without
// them.
func TestOpenWithDebugDirs(t *testing.T) {
	stripped, debug := strippedPair(t, t.TempDir(), optionsBuildID)
	if im := openWith(t, stripped, OpenOptions{}); im.DebugFile() != "" {
		t.Fatalf("without debug directories DebugFile = %q, want none", im.DebugFile())
	}
	if im := mustOpen(t, stripped); im.DebugFile() != "" {
		t.Fatalf("Open: DebugFile = %q, want none", im.DebugFile())
	}

	byID := t.TempDir()
	want := filepath.Join(byID, ".build-id", optionsBuildID[:2], optionsBuildID[2:]+".debug")
	place(t, want, debug)
	flat := t.TempDir()
	place(t, filepath.Join(flat, "prog.debug"), debug)
	tree := t.TempDir()
	place(t, filepath.Join(tree, filepath.Dir(stripped), "prog.debug"), debug)
	empty := t.TempDir()

	for _, c := range []struct {
		name string
		dirs []string
		want string
	}{
		{"build-id", []string{"", empty, byID}, want},
		{"debug-link name in the directory", []string{empty, flat}, filepath.Join(flat, "prog.debug")},
		{"debug-link name under the image's directory", []string{tree}, filepath.Join(tree, filepath.Dir(stripped), "prog.debug")},
		{"build-id before debug-link", []string{flat, byID}, want},
	} {
		t.Run(c.name, func(t *testing.T) {
			im := openWith(t, stripped, OpenOptions{DebugDirs: c.dirs})
			if got := im.DebugFile(); got != c.want {
				t.Fatalf("DebugFile = %q, want %s", got, c.want)
			}
			checkProgram(t, im)
		})
	}

	// A relative directory is taken from the current directory.
	t.Run("relative", func(t *testing.T) {
		t.Chdir(filepath.Dir(byID))
		im := openWith(t, stripped, OpenOptions{DebugDirs: []string{filepath.Base(byID)}})
		if got := im.DebugFile(); got != want {
			t.Fatalf("DebugFile = %q, want %s", got, want)
		}
	})
}

// TestOpenWithFetch asks the fetcher only when no local file matched,
// once, with the image's build-id, and uses what it names only if the
// build-id matches.
func TestOpenWithFetch(t *testing.T) {
	dir := t.TempDir()
	stripped, debug := strippedPair(t, dir, optionsBuildID)
	_, other := strippedPair(t, dir, otherBuildID)
	good := filepath.Join(t.TempDir(), "fetched.debug")
	place(t, good, debug)
	wrong := filepath.Join(t.TempDir(), "wrong.debug")
	place(t, wrong, other)

	var asked []string
	fetch := func(path string, err error) func(string) (string, error) {
		return func(id string) (string, error) {
			asked = append(asked, id)
			return path, err
		}
	}

	t.Run("used", func(t *testing.T) {
		asked = nil
		im := openWith(t, stripped, OpenOptions{Fetch: fetch(good, nil)})
		if got := im.DebugFile(); got != good {
			t.Fatalf("DebugFile = %q, want %s", got, good)
		}
		checkProgram(t, im)
		if got := im.DebugFile(); got != good {
			t.Fatalf("DebugFile again = %q, want %s", got, good)
		}
		if len(asked) != 1 || asked[0] != optionsBuildID {
			t.Fatalf("fetcher asked for %q, want [%s]", asked, optionsBuildID)
		}
	})

	t.Run("not asked when a local file matches", func(t *testing.T) {
		asked = nil
		root := t.TempDir()
		local := filepath.Join(root, ".build-id", optionsBuildID[:2], optionsBuildID[2:]+".debug")
		place(t, local, debug)
		im := openWith(t, stripped, OpenOptions{DebugDirs: []string{root}, Fetch: fetch(good, nil)})
		if got := im.DebugFile(); got != local {
			t.Fatalf("DebugFile = %q, want %s", got, local)
		}
		if len(asked) != 0 {
			t.Fatalf("fetcher asked for %q, want nothing", asked)
		}
	})

	// noneFound is the start of the error for the stripped program,
	// whose debug-link names prog.debug.
	d := filepath.Dir(stripped)
	tried := strings.Join([]string{
		"/usr/lib/debug/.build-id/" + optionsBuildID[:2] + "/" + optionsBuildID[2:] + ".debug",
		filepath.Join(d, "prog.debug"), filepath.Join(d, ".debug", "prog.debug"),
		filepath.Join("/usr/lib/debug", d, "prog.debug"),
	}, ", ")
	noneFound := stripped + ": no separate debug file found (tried " + tried + "); "

	for _, c := range []struct {
		name  string
		fetch func(string) (string, error)
		err   string
	}{
		{"another build-id", fetch(wrong, nil), noneFound + "debug file " + wrong + " fetched for build-id " + optionsBuildID + ` has build-id "` + otherBuildID + `"`},
		{"an error", fetch("", errors.New("debuginfod: server down")), noneFound + "debuginfod: server down"},
		{"not a file", fetch(filepath.Join(dir, "absent"), nil), noneFound + "debug file fetched for build-id " + optionsBuildID + ": opening ELF file: stat " + filepath.Join(dir, "absent") + ": no such file or directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			im := openWith(t, stripped, OpenOptions{Fetch: c.fetch})
			if got := im.DebugFile(); got != "" {
				t.Fatalf("DebugFile = %q, want none", got)
			}
			if _, err := im.separate(); err == nil || err.Error() != c.err {
				t.Fatalf("error = %v\nwant    %s", err, c.err)
			}
		})
	}

	t.Run("nothing to say", func(t *testing.T) {
		im := openWith(t, stripped, OpenOptions{Fetch: fetch("", nil)})
		want := strings.TrimSuffix(noneFound, "; ")
		if _, err := im.separate(); err == nil || err.Error() != want {
			t.Fatalf("error = %v\nwant    %s", err, want)
		}
	})
}

// TestReadBuildID reads the build-id of an open file and refuses what is
// not ELF.
func TestReadBuildID(t *testing.T) {
	dir := t.TempDir()
	_, debug := strippedPair(t, dir, optionsBuildID)
	p := filepath.Join(dir, "x.debug")
	place(t, p, debug)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if id, err := ReadBuildID(f); id != optionsBuildID || err != nil {
		t.Fatalf("ReadBuildID = %q, %v; want %s", id, err, optionsBuildID)
	}

	txt := filepath.Join(dir, "text")
	place(t, txt, []byte(strings.Repeat("not ELF at all; ", 8)))
	g, err := os.Open(txt)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	want := txt + ": not a valid ELF file: bad magic number '[110 111 116 32]' in record at byte 0x0"
	if id, err := ReadBuildID(g); id != "" || err == nil || err.Error() != want {
		t.Fatalf("ReadBuildID of a text file = %q, %v; want %s", id, err, want)
	}

	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	want = "reading the build-id of " + dir + ": not a regular file"
	if _, err := ReadBuildID(d); err == nil || err.Error() != want {
		t.Fatalf("ReadBuildID of a directory: %v, want %s", err, want)
	}
}
