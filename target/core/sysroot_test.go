package core

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sysrootTree makes dir/root with:
//
//	usr/lib/libin.so      an ELF file (a copy of the test binary)
//	lib -> /usr/lib       absolute, as copied from a target system
//	lib32 -> ../../outside  relative, climbing above the sysroot
//	lib64/liblink.so -> DIR/outside/libsecret.so  absolute, to a host path
//	loop -> loop
//
// and, outside the sysroot, dir/outside/libsecret.so, another ELF file.
// It returns dir and root.
func sysrootTree(t *testing.T) (string, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	for _, d := range []string{"outside", "root/usr/lib", "root/lib64"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, exe, filepath.Join(dir, "outside/libsecret.so"), -1)
	copyFile(t, exe, filepath.Join(root, "usr/lib/libin.so"), -1)
	for link, to := range map[string]string{
		"lib":              "/usr/lib",
		"lib32":            "../../outside",
		"lib64/liblink.so": filepath.Join(dir, "outside/libsecret.so"),
		"loop":             "loop",
	} {
		if err := os.Symlink(to, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	return dir, root
}

// TestInSysroot: a name resolves inside the sysroot, however it is
// spelled and whatever links it meets.
func TestInSysroot(t *testing.T) {
	dir, root := sysrootTree(t)
	top := dir[:strings.Index(dir[1:], "/")+1] // the first component of dir, e.g. /tmp
	for _, c := range []struct {
		name, want, err string
	}{
		{"/usr/lib/libin.so", root + "/usr/lib/libin.so", ""},
		{"/lib/libin.so", root + "/usr/lib/libin.so", ""},
		{"usr/lib/../lib/./libin.so", root + "/usr/lib/libin.so", ""},
		{"/../../usr/lib/libin.so", root + "/usr/lib/libin.so", ""},
		{"/../outside/libsecret.so", root + "/outside/libsecret.so", "lstat " + root + "/outside: no such file or directory"},
		{"/../../../../../../../../.." + dir + "/outside/libsecret.so", root + dir + "/outside/libsecret.so", "lstat " + root + top + ": no such file or directory"},
		{"/lib32/libsecret.so", root + "/outside/libsecret.so", "lstat " + root + "/outside: no such file or directory"},
		{"/lib64/liblink.so", root + dir + "/outside/libsecret.so", "lstat " + root + top + ": no such file or directory"},
		// The name is cleaned first: its ".." removes "lib", not the
		// directory the link leads to.
		{"/lib/../lib64", root + "/lib64", ""},
		{"/loop/x", root + "/loop", fmt.Sprintf("resolving /loop/x in %s: more than 40 symbolic links", root)},
		{"/usr/lib/libin.so/x", root + "/usr/lib/libin.so/x", "lstat " + root + "/usr/lib/libin.so/x: not a directory"},
		{"/", root, ""},
	} {
		got, err := inSysroot(root, c.name)
		var gotErr string
		if err != nil {
			gotErr = err.Error()
		}
		if got != c.want || gotErr != c.err {
			t.Errorf("inSysroot(%q) = %q, %q; want %q, %q", c.name, got, gotErr, c.want, c.err)
		}
	}
}

// TestSysrootEscape: NT_FILE names that climb out of the sysroot with
// "..", or meet a link in it that points out of it, do not open the ELF
// file outside; a link inside the sysroot leads to the file inside.
func TestSysrootEscape(t *testing.T) {
	dir, root := sysrootTree(t)
	names := []string{
		"/../outside/libsecret.so",
		"/../../../../../../../../.." + dir + "/outside/libsecret.so",
		"/lib32/libsecret.so",
		"/lib64/liblink.so",
		"/lib/libin.so",
	}
	s := synthCore{pid: 1, threads: []synthThread{{tid: 1}}}
	for i, n := range names {
		start := uint64(0x100000 * (i + 1))
		s.files = append(s.files, synthFile{start, start + 0x1000, 0, n})
		s.loads = append(s.loads, synthLoad{vaddr: start, memsz: 0x1000, data: elfPage(), flags: elf.PF_R | elf.PF_X})
	}
	c := mustOpenCore(t, writeSynth(t, s), Options{Sysroot: root})
	notFound := func(label, tried string) string {
		return fmt.Sprintf("%s: file not found (tried %s); its code and read-only data are unavailable", label, tried)
	}
	want := []string{
		notFound("libsecret.so", root+"/outside/libsecret.so"),
		notFound("libsecret.so", root+dir+"/outside/libsecret.so"),
		notFound("libsecret.so", root+"/outside/libsecret.so"),
		notFound("liblink.so", root+dir+"/outside/libsecret.so"),
		"libin.so: the core has no build-id for /lib/libin.so; using " + root + "/usr/lib/libin.so unverified",
	}
	if w := c.Warnings(); strings.Join(w, "\n") != strings.Join(want, "\n") {
		t.Errorf("Warnings =\n%s\nwant\n%s", strings.Join(w, "\n"), strings.Join(want, "\n"))
	}
	mods := c.Modules()
	if len(mods) != len(names) {
		t.Fatalf("%d modules, want %d", len(mods), len(names))
	}
	for i, m := range mods[:4] {
		if m.Name != names[i] || m.Image != nil || m.File != "" {
			t.Errorf("module %d: %s with file %q, want %s without a file", i, m.Name, m.File, names[i])
		}
	}
	if m := mods[4]; m.Image == nil || m.File != root+"/usr/lib/libin.so" {
		t.Errorf("module %s: file %q, want %s", m.Name, m.File, root+"/usr/lib/libin.so")
	}
}

// TestSysrootSearchPathBase: a name whose cleaned form has no base name
// looks for nothing on the search path.
func TestSysrootSearchPathBase(t *testing.T) {
	dir := t.TempDir()
	s := synthCore{pid: 1, threads: []synthThread{{tid: 1}},
		files: []synthFile{{0x100000, 0x101000, 0, "/x/.."}},
		loads: []synthLoad{{vaddr: 0x100000, memsz: 0x1000, data: elfPage(), flags: elf.PF_R | elf.PF_X}},
	}
	c := mustOpenCore(t, writeSynth(t, s), Options{Sysroot: dir, SearchPath: []string{dir}})
	want := "..: no usable file (tried " + dir + "): " + dir + " is not an ELF file; its code and read-only data are unavailable"
	if w := c.Warnings(); len(w) != 1 || w[0] != want {
		t.Errorf("Warnings = %q, want [%q]", w, want)
	}
}

// TestWarningsCapped: a core naming many missing files gives
// MaxWarnings warnings and one line counting the rest.
func TestWarningsCapped(t *testing.T) {
	for _, c := range []struct {
		files int
		last  string
	}{
		{MaxWarnings, ""},
		{MaxWarnings + 1, "1 more warning about this core file was left out"},
		{4 * MaxWarnings, fmt.Sprintf("%d more warnings about this core file were left out", 3*MaxWarnings)},
	} {
		s := synthCore{pid: 1, threads: []synthThread{{tid: 1}},
			loads: []synthLoad{{vaddr: 0x100000, memsz: uint64(c.files) * 0x1000, flags: elf.PF_R | elf.PF_X}},
		}
		for i := range c.files {
			start := 0x100000 + uint64(i)*0x1000
			s.files = append(s.files, synthFile{start, start + 0x1000, 0, fmt.Sprintf("/nonexistent/lib%03d.so", i)})
		}
		core := mustOpenCore(t, writeSynth(t, s), Options{})
		w := core.Warnings()
		wantLen := MaxWarnings
		if c.last != "" {
			wantLen++
		}
		if len(w) != wantLen {
			t.Fatalf("%d files: %d warnings, want %d", c.files, len(w), wantLen)
		}
		for i := range MaxWarnings {
			want := fmt.Sprintf("lib%03d.so: file not found (tried /nonexistent/lib%03d.so); its code and read-only data are unavailable", i, i)
			if w[i] != want {
				t.Errorf("%d files: warning %d = %q, want %q", c.files, i, w[i], want)
			}
		}
		if c.last != "" && w[MaxWarnings] != c.last {
			t.Errorf("%d files: last warning %q, want %q", c.files, w[MaxWarnings], c.last)
		}
		if n := len(core.Modules()); n != c.files {
			t.Errorf("%d files: %d modules; the cap is on warnings only", c.files, n)
		}
	}
}
