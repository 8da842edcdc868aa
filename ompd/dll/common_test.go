package dll

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/trust"
)

func TestLocate(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, p := range []string{filepath.Join(b, "libx.so"), filepath.Join(a, "liby.so"), filepath.Join(b, "liby.so")} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(a, "libx.so"), 0o755); err != nil { // not a file: skipped
		t.Fatal(err)
	}
	path := a + ":" + b
	for name, want := range map[string]string{
		"libx.so": filepath.Join(b, "libx.so"), // a's is a directory
		"liby.so": filepath.Join(a, "liby.so"), // the first directory wins
		// libc is in a directory of /etc/ld.so.conf or a default one.
		"libc.so.6": "/lib/x86_64-linux-gnu/libc.so.6",
	} {
		if got, err := Locate(name, path); err != nil || got != want {
			t.Errorf("Locate(%s) = %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := Locate("libnone-ompd-inspect.so", path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Locate of a missing library: %v; want not-exist", err)
	}
	if _, err := Locate("../libx.so", path); err == nil {
		t.Error("Locate of a name with a slash: no error")
	}
}

func TestLdSoConfDirs(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "conf.d")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "ld.so.conf"), "# top\n/opt/one # trailing comment\ninclude conf.d/*.conf\n\nrelative/ignored\n/opt/last\n")
	write(filepath.Join(sub, "a.conf"), "/opt/a\ninclude ../ld.so.conf\n") // a loop, bounded
	write(filepath.Join(sub, "b.conf"), "\t/opt/b \n")
	got := ldSoConfDirs(filepath.Join(dir, "ld.so.conf"), map[string]bool{})
	// a.conf includes ld.so.conf again: each file is read once.
	want := []string{"/opt/one", "/opt/a", "/opt/b", "/opt/last"}
	if !slices.Equal(got, want) {
		t.Fatalf("dirs %q\nwant %q", got, want)
	}
}

// TestTrustedCandidate: a bare name is located before it is judged, and
// the resolved file is what is loaded.
func TestTrustedCandidate(t *testing.T) {
	got, err := Trusted("libc.so.6", trust.Invoker())
	if err != nil || got != "/usr/lib/x86_64-linux-gnu/libc.so.6" {
		t.Errorf("Trusted(libc.so.6) = %q, %v; want the resolved /usr/lib/x86_64-linux-gnu/libc.so.6", got, err)
	}
	if _, err := Trusted("/nonexistent/libompd.so", trust.Invoker()); err == nil || err.Error() != "/nonexistent/libompd.so: no such file" {
		t.Errorf("Trusted of a missing file: %v", err)
	}
}
