package debuginfod

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ompd-inspect/ompd-inspect/target/elf"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
)

// debuginfodFind runs elfutils' client, debuginfod-find, for the debug
// file of id with the given server and cache, and returns the path it
// prints.
func debuginfodFind(t *testing.T, url, cache, id string) (string, error) {
	t.Helper()
	cmd := exec.Command("debuginfod-find", "debuginfo", id)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DEBUGINFOD_URLS=" + url, "DEBUGINFOD_CACHE_PATH=" + cache, "DEBUGINFOD_TIMEOUT=10"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("debuginfod-find debuginfo %s: %v: %s", id, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// TestServer fetches from elfutils' debuginfod: the file lands in the
// cache, a second fetch needs no server, a missing build-id is not found,
// a stopped server fails at once, and elfutils' client and this one read
// each other's caches.
func TestServer(t *testing.T) {
	a := build(t, idA)
	served := t.TempDir()
	if err := os.WriteFile(filepath.Join(served, "prog.debug"), a.debugData, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := fixture.StartDebuginfod(t, served, idA)

	ours, warns := newClient(t, srv.URL)
	want := filepath.Join(ours.CacheDir, idA, "debuginfo")
	if p, err := ours.Fetch(t.Context(), idA); p != want || err != nil {
		t.Fatalf("Fetch = %q, %v; want %s", p, err, want)
	}
	checkCached(t, want, a.debugData)

	// Through the elf hook: the stripped program gets its symbols from
	// the fetched file.
	im, err := elf.OpenWith(a.stripped, elf.OpenOptions{Fetch: ours.Fetcher(t.Context())})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	if f := im.DebugFile(); f != want {
		t.Fatalf("DebugFile = %q, want %s", f, want)
	}
	if s, ok := im.Symbol("debuginfod_probe"); !ok || !s.Func {
		t.Fatalf("symbol debuginfod_probe = %+v, %v; want the static function from the debug file", s, ok)
	}

	_, err = ours.Fetch(t.Context(), idMissing)
	wantErr(t, "Fetch of a missing build-id", err, ErrNotFound, "debuginfod: build-id "+idMissing+": not found on "+srv.URL)

	// elfutils' client fills a cache of its own.
	theirs := filepath.Join(t.TempDir(), "elfutils-cache")
	if p, err := debuginfodFind(t, srv.URL, theirs, idA); err != nil || p != filepath.Join(theirs, idA, "debuginfo") {
		t.Fatalf("debuginfod-find = %q, %v; want %s", p, err, filepath.Join(theirs, idA, "debuginfo"))
	}

	srv.Stop()

	// Both caches serve without the server.
	if p, err := ours.Fetch(t.Context(), idA); p != want || err != nil {
		t.Fatalf("Fetch from the cache = %q, %v; want %s", p, err, want)
	}
	fromTheirs := &Client{URLs: []string{srv.URL}, CacheDir: theirs}
	if p, err := fromTheirs.Fetch(t.Context(), idA); p != filepath.Join(theirs, idA, "debuginfo") || err != nil {
		t.Fatalf("Fetch from elfutils' cache = %q, %v; want %s", p, err, filepath.Join(theirs, idA, "debuginfo"))
	}
	if p, err := debuginfodFind(t, srv.URL, ours.CacheDir, idA); err != nil || p != want {
		t.Fatalf("debuginfod-find on this client's cache = %q, %v; want %s", p, err, want)
	}
	if len(*warns) != 0 {
		t.Fatalf("warnings %q", *warns)
	}

	// The server is down: the connection is refused, at once (not a
	// timeout: the client would wait an hour for one).
	down, _ := newClient(t, srv.URL)
	down.Timeout = time.Hour
	_, err = down.Fetch(t.Context(), idA)
	wantErr(t, "Fetch from a stopped server", err, syscall.ECONNREFUSED,
		"debuginfod: build-id "+idA+": "+srv.URL+": dial tcp 127.0.0.1:"+strconv.Itoa(srv.Port)+": connect: connection refused")
	if errors.Is(err, ErrTimeout) {
		t.Fatal("a refused connection reported as a timeout")
	}
	if l := listing(t, down.CacheDir); l != nil {
		t.Fatalf("cache holds %q, want nothing", l)
	}
}
