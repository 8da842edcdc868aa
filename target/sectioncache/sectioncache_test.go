package sectioncache

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ompd-inspect/ompd-inspect/target/privdir"
)

// nobody is a uid that is neither root nor the test's user.
const nobody = 65534

func key(section string) Key {
	return Key{BuildID: "93ac61ec5a8eb1396f9fbd350e3169a558528a40", Section: section, FileDev: 0x10301, FileIno: 1234567,
		FileSize: 4166896, FileModTime: 1777000000e9, FileChangeTime: 1777000100e9, Offset: 0x53a8, Size: 2348634}
}

func data(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func open(t *testing.T, max int64) *Cache {
	t.Helper()
	c, err := Open(filepath.Join(t.TempDir(), "a", "b"), max)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRoundTrip: a section put is got back for the same key and size,
// and for nothing else; the directories are created private (0700).
func TestRoundTrip(t *testing.T) {
	c := open(t, 0)
	for _, d := range []string{c.Dir(), filepath.Dir(c.Dir())} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, mode %v; want 0700", d, err, fi.Mode().Perm())
		}
	}
	k, d := key(".debug_info"), data(100000, 3)
	if got := c.Get(k, uint64(len(d))); got != nil {
		t.Fatalf("Get before Put = %d bytes", len(got))
	}
	if err := c.Put(k, d); err != nil {
		t.Fatal(err)
	}
	if got := c.Get(k, uint64(len(d))); !bytes.Equal(got, d) {
		t.Fatalf("Get after Put: %d bytes, not the data", len(got))
	}
	if fi, err := os.Stat(filepath.Join(c.Dir(), name(k))); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("entry: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	// Another file that looks the same (a copy another user made, with
	// the same build-id, size and modification time) is not served the
	// entry; nor is the file after any change.
	for what, change := range map[string]func(*Key){
		"modification time": func(k *Key) { k.FileModTime++ },
		"inode":             func(k *Key) { k.FileIno++ },
		"device":            func(k *Key) { k.FileDev++ },
		"change time":       func(k *Key) { k.FileChangeTime++ },
		"section offset":    func(k *Key) { k.Offset++ },
	} {
		other := k
		change(&other)
		if got := c.Get(other, uint64(len(d))); got != nil {
			t.Errorf("Get for a file with another %s = %d bytes, want none", what, len(got))
		}
		if err := c.Put(k, d); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Get(k, AnySize); !bytes.Equal(got, d) {
		t.Errorf("Get with AnySize: %d bytes, not the data", len(got))
	}
	if got := c.Get(k, uint64(len(d))+1); got != nil {
		t.Errorf("Get with another size = %d bytes, want none", len(got))
	}
	for _, bad := range []Key{{BuildID: "../../etc", Section: ".debug_info"}, {BuildID: "abcd", Section: "../x"}, {BuildID: "ABCD", Section: ".debug_info"}} {
		if err := c.Put(bad, d); err != nil || c.Get(bad, uint64(len(d))) != nil {
			t.Errorf("key %+v: Put %v; want nothing stored", bad, err)
		}
	}
	if ents, _ := os.ReadDir(c.Dir()); len(ents) != 0 {
		t.Errorf("entries left: %v (the ones refused as mismatched are removed)", ents)
	}
}

// TestDamagedEntries: an entry whose data or header was changed, or that
// was cut short, is not used and is removed; the next Put writes it again.
func TestDamagedEntries(t *testing.T) {
	k, d := key(".debug_line"), data(5000, 9)
	for _, c := range []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"a data byte flipped", func(b []byte) []byte { b[len(b)-100] ^= 1; return b }},
		{"a header byte flipped", func(b []byte) []byte { b[10] ^= 1; return b }},
		{"the checksum flipped", func(b []byte) []byte { b[len(header(k, 0, 0))-1] ^= 1; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }},
		{"empty", func(b []byte) []byte { return nil }},
	} {
		for _, want := range []uint64{uint64(len(d)), AnySize} {
			t.Run(fmt.Sprintf("%s/want=%#x", c.name, want), func(t *testing.T) {
				cache := open(t, 0)
				if err := cache.Put(k, d); err != nil {
					t.Fatal(err)
				}
				p := filepath.Join(cache.Dir(), name(k))
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, c.damage(b), 0o600); err != nil {
					t.Fatal(err)
				}
				if got := cache.Get(k, want); got != nil {
					t.Fatalf("Get of a damaged entry = %d bytes", len(got))
				}
				if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the damaged entry is still there: %v", err)
				}
				if err := cache.Put(k, d); err != nil {
					t.Fatal(err)
				}
				if got := cache.Get(k, want); !bytes.Equal(got, d) {
					t.Errorf("Get after the entry was written again: %d bytes", len(got))
				}
			})
		}
	}
}

// TestUnsafe: a cache directory, or a directory above it, that someone
// else could write or owns is refused; an entry that is a link, or that
// someone else owns or could write, is not read (and not removed).
func TestUnsafe(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to give files to another user")
	}
	t.Run("directory writable by its group", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "c")
		if err := os.Mkdir(dir, 0o770); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o770)
		_, err := Open(dir, 0)
		if want := fmt.Sprintf("section cache %s is writable by its group (mode 0770): unsafe cache; not used", dir); err == nil || err.Error() != want || !errors.Is(err, privdir.ErrUnsafe) {
			t.Errorf("Open: %v; want %q", err, want)
		}
	})
	t.Run("a link into another user's directory", func(t *testing.T) {
		base := t.TempDir()
		theirs := filepath.Join(base, "theirs")
		if err := os.Mkdir(theirs, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(theirs, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(base, "cache")
		if err := os.Symlink(theirs, link); err != nil {
			t.Fatal(err)
		}
		_, err := Open(link, 0)
		if want := fmt.Sprintf("section cache %s (%s) is owned by uid %d, not by you (uid 0): unsafe cache; not used", link, theirs, nobody); err == nil || err.Error() != want {
			t.Errorf("Open: %v; want %q", err, want)
		}
	})
	t.Run("not created under another user's directory", func(t *testing.T) {
		theirs := filepath.Join(t.TempDir(), "theirs")
		if err := os.Mkdir(theirs, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chown(theirs, nobody, nobody)
		dir := filepath.Join(theirs, "cache")
		if _, err := Open(dir, 0); err == nil || !errors.Is(err, privdir.ErrUnsafe) {
			t.Errorf("Open: %v; want it refused", err)
		}
		if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was created: %v", dir, err)
		}
	})
	k, d := key(".debug_str"), data(3000, 1)
	for _, c := range []struct {
		name  string
		plant func(t *testing.T, p string)
	}{
		{"owned by another user", func(t *testing.T, p string) { os.Chown(p, nobody, nobody) }},
		{"writable by others", func(t *testing.T, p string) { os.Chmod(p, 0o602) }},
		{"a link to a valid entry elsewhere", func(t *testing.T, p string) {
			other := filepath.Join(t.TempDir(), "elsewhere")
			if err := os.Rename(p, other); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, p); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run("entry "+c.name, func(t *testing.T) {
			cache := open(t, 0)
			if err := cache.Put(k, d); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(cache.Dir(), name(k))
			c.plant(t, p)
			if got := cache.Get(k, uint64(len(d))); got != nil {
				t.Errorf("Get = %d bytes, want the entry refused", len(got))
			}
			if _, err := os.Lstat(p); err != nil {
				t.Errorf("the refused entry was removed: %v", err)
			}
		})
	}
}

// TestConcurrentPuts: runs that store the same sections at once leave
// whole entries and no temporary files.
func TestConcurrentPuts(t *testing.T) {
	c := open(t, 0)
	sections := []string{".debug_info", ".debug_line", ".debug_str"}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				s := sections[(i+j)%len(sections)]
				if err := c.Put(key(s), data(20000, byte(len(s)))); err != nil {
					t.Error(err)
				}
				if got := c.Get(key(s), 20000); got != nil && !bytes.Equal(got, data(20000, byte(len(s)))) {
					t.Errorf("%s: a partial or mixed entry", s)
				}
			}
		}()
	}
	wg.Wait()
	ents, err := os.ReadDir(c.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 3 || strings.Contains(strings.Join(names, " "), ".tmp-") {
		t.Errorf("entries %v; want the three sections", names)
	}
	for _, s := range sections {
		if got := c.Get(key(s), 20000); !bytes.Equal(got, data(20000, byte(len(s)))) {
			t.Errorf("%s: %d bytes", s, len(got))
		}
	}
}

// TestBounded: the directory is kept under its bound by removing the
// least recently used entries.
func TestBounded(t *testing.T) {
	const size = 1000
	entry := int64(size + len(header(key(".debug_info"), 0, 0)))
	c := open(t, 2*entry)
	old := time.Now().Add(-time.Hour)
	if err := c.Put(key(".debug_info"), data(size, 1)); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(filepath.Join(c.Dir(), name(key(".debug_info"))), old, old)
	if err := c.Put(key(".debug_line"), data(size, 2)); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(filepath.Join(c.Dir(), name(key(".debug_line"))), old.Add(time.Minute), old.Add(time.Minute))
	c.Get(key(".debug_info"), size) // used now: the most recent
	if err := c.Put(key(".debug_str"), data(size, 3)); err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{".debug_info": true, ".debug_line": false, ".debug_str": true} {
		if got := c.Get(key(s), size) != nil; got != want {
			t.Errorf("%s kept %v, want %v", s, got, want)
		}
	}
}

// TestReadNotMapped: on a file system not known to be local, entries are
// read rather than mapped, with the same checks.
func TestReadNotMapped(t *testing.T) {
	if localFS("/proc") {
		t.Fatal("/proc taken for a local file system whose files may be mapped")
	}
	c := open(t, 0)
	c.mapped = false
	k, d := key(".debug_str"), data(9000, 5)
	if err := c.Put(k, d); err != nil {
		t.Fatal(err)
	}
	got := c.Get(k, uint64(len(d)))
	if !bytes.Equal(got, d) {
		t.Fatalf("Get: %d bytes, not the data", len(got))
	}
	// Damage the entry in place (same file): bytes read are a copy, where
	// a mapping would show the change.
	p := filepath.Join(c.Dir(), name(k))
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, fi.Size()-1); err != nil {
		t.Fatal(err)
	}
	last[0] ^= 1
	if _, err := f.WriteAt(last, fi.Size()-1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !bytes.Equal(got, d) {
		t.Fatal("the data Get returned changed with the file: it was mapped, not read")
	}
	if got := c.Get(k, AnySize); got != nil {
		t.Fatalf("Get of a damaged entry = %d bytes", len(got))
	}
}
