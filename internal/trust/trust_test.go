package trust

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nobody owns the files that must not be trusted.
const nobody = 65534

// tree makes root/a/b/lib.so, all owned by the test's user, modes 0755 and
// 0644, under a private temporary directory.
func tree(t *testing.T) (top, lib string) {
	t.Helper()
	top = t.TempDir()
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(top, "a", "b")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lib = filepath.Join(dir, "lib.so")
	if err := os.WriteFile(lib, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	return top, lib
}

func mustChmod(t *testing.T, p string, m fs.FileMode) {
	t.Helper()
	if err := os.Chmod(p, m); err != nil {
		t.Fatal(err)
	}
}

func TestFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing owners needs root") // the test suite runs as root (README)
	}
	me := Owners{UID: 0}
	type tc struct {
		name  string
		setup func(t *testing.T, top, lib string) string // returns the path to ask about
		want  string                                     // the error, with TOP for the tree; "" for trusted
	}
	cases := []tc{
		{"trusted", func(t *testing.T, top, lib string) string { return lib }, ""},
		{"file of another user", func(t *testing.T, top, lib string) string {
			if err := os.Chown(lib, nobody, nobody); err != nil {
				t.Fatal(err)
			}
			return lib
		}, "TOP/a/b/lib.so is owned by uid 65534, neither root nor you (uid 0)"},
		{"directory of another user", func(t *testing.T, top, lib string) string {
			if err := os.Chown(filepath.Join(top, "a"), nobody, nobody); err != nil {
				t.Fatal(err)
			}
			return lib
		}, "TOP/a is owned by uid 65534, neither root nor you (uid 0)"},
		{"group-writable file", func(t *testing.T, top, lib string) string {
			mustChmod(t, lib, 0o664)
			return lib
		}, "TOP/a/b/lib.so is writable by its group (mode 0664)"},
		{"world-writable directory", func(t *testing.T, top, lib string) string {
			mustChmod(t, filepath.Join(top, "a", "b"), 0o777)
			return lib
		}, "TOP/a/b is writable by its group and others (mode 0777)"},
		{"sticky world-writable directory", func(t *testing.T, top, lib string) string {
			mustChmod(t, filepath.Join(top, "a"), 0o777|fs.ModeSticky)
			return lib
		}, ""},
		{"sticky directory, file of another user", func(t *testing.T, top, lib string) string {
			mustChmod(t, filepath.Join(top, "a", "b"), 0o777|fs.ModeSticky)
			if err := os.Chown(lib, nobody, nobody); err != nil {
				t.Fatal(err)
			}
			return lib
		}, "TOP/a/b/lib.so is owned by uid 65534, neither root nor you (uid 0)"},
		{"link in a trusted place to an untrusted file", func(t *testing.T, top, lib string) string {
			if err := os.Chown(filepath.Join(top, "a", "b"), nobody, nobody); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(top, "link.so")
			if err := os.Symlink(lib, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "TOP/a/b is owned by uid 65534, neither root nor you (uid 0) (TOP/link.so leads to TOP/a/b/lib.so)"},
		{"directory, not a file", func(t *testing.T, top, lib string) string { return filepath.Dir(lib) },
			"TOP/a/b is not a regular file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			top, lib := tree(t)
			top, err := filepath.EvalSymlinks(top)
			if err != nil {
				t.Fatal(err)
			}
			lib = filepath.Join(top, "a", "b", "lib.so")
			p := c.setup(t, top, lib)
			got, err := me.File(p)
			if c.want == "" {
				if err != nil || got != lib {
					t.Fatalf("File(%s) = %q, %v; want %q", p, got, err, lib)
				}
				return
			}
			want := strings.ReplaceAll(c.want, "TOP", top)
			if err == nil || err.Error() != want || !IsUntrusted(err) || got != "" {
				t.Fatalf("File(%s) = %q, %v\nwant error %q", p, got, err, want)
			}
		})
	}
}

// TestFileInvokingUser: the invoking user's own files are trusted, another
// ordinary user's are not, and root's always are.
func TestFileInvokingUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing owners needs root")
	}
	top, lib := tree(t)
	top, _ = filepath.EvalSymlinks(top)
	lib = filepath.Join(top, "a", "b", "lib.so")
	if err := os.Chown(lib, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if got, err := (Owners{UID: nobody}).File(lib); err != nil || got != lib {
		t.Errorf("nobody's file for nobody: %q, %v; want trusted", got, err)
	}
	if _, err := (Owners{UID: 1000}).File(lib); !IsUntrusted(err) {
		t.Errorf("nobody's file for uid 1000: %v; want untrusted", err)
	}
	if err := os.Chown(lib, 0, 0); err != nil {
		t.Fatal(err)
	}
	if got, err := (Owners{UID: 1000}).File(lib); err != nil || got != lib {
		t.Errorf("root's file for uid 1000: %q, %v; want trusted", got, err)
	}
}

func TestFileMissing(t *testing.T) {
	_, err := Invoker().File(filepath.Join(t.TempDir(), "none.so"))
	if !errors.Is(err, fs.ErrNotExist) || IsUntrusted(err) {
		t.Errorf("missing file: %v; want a not-exist error", err)
	}
}
