package debuginfod

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// Build-ids of the test programs; idMissing belongs to none.
const (
	idA       = "da7a000000000000000000000000000000000a01"
	idB       = "da7a000000000000000000000000000000000b02"
	idMissing = "da7a000000000000000000000000000000000c03"
)

// nobody owns the files that must be refused.
const nobody = 65534

// run runs a command and fails the test with its output if it fails.
func run(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// program is a test program: a stripped binary and its debug file.
type program struct {
	stripped, debug string
	debugData       []byte
}

var (
	programsMu sync.Mutex
	programs   = map[string]program{}
	programDir string
)

// build compiles testdata/prog.c with build-id id (gcc -g), keeps its
// debug information in a separate file (objcopy --only-keep-debug) and
// strips the program. Programs are built once per test binary.
func build(t *testing.T, id string) program {
	t.Helper()
	programsMu.Lock()
	defer programsMu.Unlock()
	if p, ok := programs[id]; ok {
		return p
	}
	if programDir == "" {
		d, err := os.MkdirTemp("", "debuginfod-test-")
		if err != nil {
			t.Fatal(err)
		}
		programDir = d
	}
	src, err := filepath.Abs(filepath.Join("testdata", "prog.c"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(programDir, id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, "prog.full")
	run(t, "gcc", "-g", "-O0", "-Wl,--build-id=0x"+id, "-o", full, src)
	p := program{stripped: filepath.Join(dir, "prog"), debug: filepath.Join(dir, "prog.debug")}
	run(t, "objcopy", "--only-keep-debug", full, p.debug)
	run(t, "objcopy", "--strip-all", full, p.stripped)
	if err := os.Remove(full); err != nil {
		t.Fatal(err)
	}
	if p.debugData, err = os.ReadFile(p.debug); err != nil {
		t.Fatal(err)
	}
	programs[id] = p
	return p
}

func TestMain(m *testing.M) {
	code := m.Run()
	if programDir != "" {
		os.RemoveAll(programDir)
	}
	os.Exit(code)
}

// listing returns every entry under dir, relative, directories with a
// trailing slash, sorted; nil when dir does not exist.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, rel)
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// server is a test HTTP server on the loopback address that counts the
// requests it gets.
type server struct {
	URL   string
	count atomic.Int64
	// release is closed when the test ends, so that handlers that stall
	// return.
	release chan struct{}
}

// serve starts a server running h. It is closed when the test ends.
func serve(t *testing.T, h func(s *server, w http.ResponseWriter, r *http.Request)) *server {
	t.Helper()
	s := &server{release: make(chan struct{})}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.count.Add(1)
		h(s, w, r)
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(s.release) })
	s.URL = ts.URL
	return s
}

// files serves the debug files of the given programs by build-id, and
// 404 for anything else.
func files(progs ...program) func(*server, http.ResponseWriter, *http.Request) {
	return func(_ *server, w http.ResponseWriter, r *http.Request) {
		for _, p := range progs {
			id, err := elfBuildID(p.debug)
			if err == nil && r.URL.Path == "/buildid/"+id+"/debuginfo" {
				http.ServeFile(w, r, p.debug)
				return
			}
		}
		http.NotFound(w, r)
	}
}

// elfBuildID returns the build-id of the ELF file at path.
func elfBuildID(path string) (string, error) {
	im, err := elf.Open(path)
	if err != nil {
		return "", err
	}
	defer im.Close()
	return im.BuildID(), nil
}

// newClient returns a client of the given servers with a cache in a new
// temporary directory (not yet created), collecting its warnings.
func newClient(t *testing.T, urls ...string) (*Client, *[]string) {
	t.Helper()
	var mu sync.Mutex
	warns := &[]string{}
	c := &Client{URLs: urls, CacheDir: filepath.Join(t.TempDir(), "cache"), Warn: func(s string) {
		mu.Lock()
		defer mu.Unlock()
		*warns = append(*warns, s)
	}}
	return c, warns
}

// wantErr fails the test unless err is target (errors.Is) with exactly
// the message want.
func wantErr(t *testing.T, what string, err, target error, want string) {
	t.Helper()
	if err == nil || err.Error() != want {
		t.Fatalf("%s: error\n  %v\nwant\n  %s", what, err, want)
	}
	if target != nil && !errors.Is(err, target) {
		t.Fatalf("%s: error %v is not %v", what, err, target)
	}
}

func TestParseURLs(t *testing.T) {
	many := ""
	var manyWant []string
	for i := range MaxServers + 1 {
		u := fmt.Sprintf("http://h%d", i)
		many += u + " "
		if i < MaxServers {
			manyWant = append(manyWant, u)
		}
	}
	for _, c := range []struct {
		in       string
		urls     []string
		problems []string
	}{
		{"", nil, nil},
		{" \t\n ", nil, nil},
		{"https://debuginfod.debian.net", []string{"https://debuginfod.debian.net"}, nil},
		{"http://a:8002/  https://b/x//\thttp://a:8002", []string{"http://a:8002", "https://b/x"}, nil},
		{"ftp://a file:///usr/lib/debug http://ok", []string{"http://ok"}, []string{
			`DEBUGINFOD_URLS: ftp://a refused: scheme "ftp" is not http or https`,
			`DEBUGINFOD_URLS: file:///usr/lib/debug refused: scheme "file" is not http or https`,
		}},
		{"/usr/lib/debug http:// https://h/?x http://h/#f", nil, []string{
			`DEBUGINFOD_URLS: /usr/lib/debug refused: scheme "" is not http or https`,
			`DEBUGINFOD_URLS: http:// refused: no host`,
			`DEBUGINFOD_URLS: https://h/?x refused: a base URL has no query or fragment`,
			`DEBUGINFOD_URLS: http://h/#f refused: a base URL has no query or fragment`,
		}},
		{"http://a%zz", nil, []string{`DEBUGINFOD_URLS: http://a%zz refused: parse "http://a%zz": invalid URL escape "%zz"`}},
		{many, manyWant, []string{fmt.Sprintf("DEBUGINFOD_URLS: http://h%d ignored: more than %d servers", MaxServers, MaxServers)}},
	} {
		urls, problems := ParseURLs(c.in)
		var ps []string
		for _, p := range problems {
			ps = append(ps, p.Error())
		}
		if !slices.Equal(urls, c.urls) || !slices.Equal(ps, c.problems) {
			t.Errorf("ParseURLs(%q) = %q, %q\nwant %q, %q", c.in, urls, ps, c.urls, c.problems)
		}
	}
}

func TestFromEnv(t *testing.T) {
	reset := func() {
		for _, v := range []string{"DEBUGINFOD_URLS", "DEBUGINFOD_CACHE_PATH", "DEBUGINFOD_TIMEOUT", "DEBUGINFOD_MAXTIME", "DEBUGINFOD_MAXSIZE", "XDG_CACHE_HOME"} {
			t.Setenv(v, "")
		}
	}
	home := t.TempDir()
	t.Setenv("HOME", home)

	reset()
	c, warns := FromEnv()
	if c.Enabled() || len(warns) != 0 || c.Fetcher(t.Context()) != nil || c.CacheDir != "" {
		t.Fatalf("FromEnv without DEBUGINFOD_URLS = %+v, %q; want a client that is not enabled", c, warns)
	}

	reset()
	t.Setenv("DEBUGINFOD_URLS", "file:///srv ftp://x")
	c, warns = FromEnv()
	want := []string{
		`DEBUGINFOD_URLS: file:///srv refused: scheme "file" is not http or https`,
		`DEBUGINFOD_URLS: ftp://x refused: scheme "ftp" is not http or https`,
	}
	if c.Enabled() || !slices.Equal(warns, want) {
		t.Fatalf("FromEnv with refused URLs: enabled %v, warnings %q; want not enabled, %q", c.Enabled(), warns, want)
	}

	for _, e := range []struct {
		name             string
		env              map[string]string
		cache            string
		timeout, maxTime time.Duration
		maxBytes         int64
		warns            []string
	}{
		{"defaults", nil, filepath.Join(home, ".cache", "debuginfod_client"), 0, 0, 0, nil},
		{"XDG", map[string]string{"XDG_CACHE_HOME": "/x/cache"}, "/x/cache/debuginfod_client", 0, 0, 0, nil},
		{"cache path first", map[string]string{"XDG_CACHE_HOME": "/x/cache", "DEBUGINFOD_CACHE_PATH": "/y/dc"}, "/y/dc", 0, 0, 0, nil},
		{"limits", map[string]string{"DEBUGINFOD_TIMEOUT": "7", "DEBUGINFOD_MAXTIME": " 60 ", "DEBUGINFOD_MAXSIZE": "1000"},
			filepath.Join(home, ".cache", "debuginfod_client"), 7 * time.Second, time.Minute, 1000, nil},
		{"capped", map[string]string{"DEBUGINFOD_TIMEOUT": "90000", "DEBUGINFOD_MAXTIME": "90000", "DEBUGINFOD_MAXSIZE": "99999999999"},
			filepath.Join(home, ".cache", "debuginfod_client"), MaxTimeout, MaxMaxTime, 0,
			[]string{"DEBUGINFOD_MAXSIZE=99999999999 is above the limit; using 1073741824"}},
		{"refused", map[string]string{"DEBUGINFOD_TIMEOUT": "0", "DEBUGINFOD_MAXTIME": "soon", "DEBUGINFOD_MAXSIZE": "-1"},
			filepath.Join(home, ".cache", "debuginfod_client"), 0, 0, 0, []string{
				`DEBUGINFOD_TIMEOUT="0" is not a positive number of seconds; using 30s`,
				`DEBUGINFOD_MAXTIME="soon" is not a positive number of seconds; using 5m0s`,
				`DEBUGINFOD_MAXSIZE="-1" is not a positive number of bytes; using 1073741824`,
			}},
	} {
		t.Run(e.name, func(t *testing.T) {
			reset()
			t.Setenv("DEBUGINFOD_URLS", "http://127.0.0.1:1/ https://example.invalid")
			for k, v := range e.env {
				t.Setenv(k, v)
			}
			c, warns := FromEnv()
			if !c.Enabled() || !slices.Equal(c.URLs, []string{"http://127.0.0.1:1", "https://example.invalid"}) {
				t.Fatalf("URLs = %q", c.URLs)
			}
			if c.CacheDir != e.cache || c.Timeout != e.timeout || c.MaxTime != e.maxTime || c.MaxBytes != e.maxBytes || !slices.Equal(warns, e.warns) {
				t.Fatalf("FromEnv = cache %s, timeout %v, max time %v, max bytes %d, warnings %q\nwant cache %s, timeout %v, max time %v, max bytes %d, warnings %q",
					c.CacheDir, c.Timeout, c.MaxTime, c.MaxBytes, warns, e.cache, e.timeout, e.maxTime, e.maxBytes, e.warns)
			}
			if _, err := os.Stat(c.CacheDir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("FromEnv touched the cache %s: %v", c.CacheDir, err)
			}
		})
	}
}

// TestNoServers: without DEBUGINFOD_URLS nothing is requested and the cache
// is not touched, through the client and through elf.OpenWith.
func TestNoServers(t *testing.T) {
	a := build(t, idA)
	s := serve(t, files(a))
	cache := filepath.Join(t.TempDir(), "cache")
	t.Setenv("DEBUGINFOD_CACHE_PATH", cache)

	// The server is reachable, and counted, when it is named.
	t.Setenv("DEBUGINFOD_URLS", s.URL)
	c, warns := FromEnv()
	if len(warns) != 0 {
		t.Fatal(warns)
	}
	if p, err := c.Fetch(t.Context(), idA); err != nil || p != filepath.Join(cache, idA, "debuginfo") {
		t.Fatalf("Fetch = %q, %v", p, err)
	}
	if n := s.count.Load(); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
	if err := os.RemoveAll(cache); err != nil {
		t.Fatal(err)
	}

	for _, v := range []string{"", "   "} {
		t.Setenv("DEBUGINFOD_URLS", v)
		c, warns := FromEnv()
		if c.Enabled() || len(warns) != 0 {
			t.Fatalf("DEBUGINFOD_URLS=%q: enabled %v, warnings %q", v, c.Enabled(), warns)
		}
		_, err := c.Fetch(t.Context(), idA)
		wantErr(t, "Fetch", err, ErrNoServers, "no debuginfod server configured (DEBUGINFOD_URLS names none)")
		im, err := elf.OpenWith(a.stripped, elf.OpenOptions{Fetch: c.Fetcher(t.Context())})
		if err != nil {
			t.Fatal(err)
		}
		if f := im.DebugFile(); f != "" {
			t.Fatalf("DebugFile = %q, want none", f)
		}
		im.Close()
	}
	os.Unsetenv("DEBUGINFOD_URLS")
	if c, _ := FromEnv(); c.Enabled() {
		t.Fatal("enabled with DEBUGINFOD_URLS unset")
	}
	if n := s.count.Load(); n != 1 {
		t.Fatalf("%d requests, want still 1", n)
	}
	if l := listing(t, cache); l != nil {
		t.Fatalf("cache holds %q, want nothing", l)
	}
}

// TestBadBuildID refuses build-ids that are not lowercase hex before any
// request.
func TestBadBuildID(t *testing.T) {
	s := serve(t, files())
	c, _ := newClient(t, s.URL)
	for _, id := range []string{"", "a", "ABCD", "../../etc", "abc", strings.Repeat("ab", 65), "ab/cd"} {
		_, err := c.Fetch(t.Context(), id)
		wantErr(t, id, err, ErrBadBuildID, fmt.Sprintf("debuginfod: %q: not a build-id (want 1 to 64 bytes of lowercase hex)", id))
	}
	if n := s.count.Load(); n != 0 {
		t.Fatalf("%d requests, want 0", n)
	}
	if l := listing(t, c.CacheDir); l != nil {
		t.Fatalf("cache holds %q", l)
	}
}

// TestHostile: what a hostile or broken server sends is refused with the
// exact error and leaves no file in the cache.
func TestHostile(t *testing.T) {
	b := build(t, idB)
	const limit = 64 << 10
	chunk := bytes.Repeat([]byte("x"), 4096)
	for _, c := range []struct {
		name    string
		h       func(s *server, w http.ResponseWriter, r *http.Request)
		timeout time.Duration
		maxTime time.Duration
		target  error
		err     string // after "debuginfod: build-id idA: URL: "
		cache   []string
	}{
		{name: "another build-id", h: func(_ *server, w http.ResponseWriter, r *http.Request) {
			http.ServeFile(w, r, b.debug)
		}, target: ErrMismatch,
			err: `not the debug file asked for: the file sent has build-id "` + idB + `"`, cache: []string{idA + "/"}},
		{name: "not ELF", h: func(_ *server, w http.ResponseWriter, r *http.Request) {
			w.Write(bytes.Repeat([]byte("<html>oops</html>\n"), 10))
		}, target: ErrMismatch,
			err: "not the debug file asked for: the file sent is not ELF (bad magic number '[60 104 116 109]' in record at byte 0x0)", cache: []string{idA + "/"}},
		{name: "empty", h: func(_ *server, w http.ResponseWriter, r *http.Request) {}, target: ErrMismatch,
			err: "not the debug file asked for: the response is empty", cache: []string{idA + "/"}},
		{name: "too large declared", h: func(_ *server, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(limit+1))
			w.WriteHeader(http.StatusOK)
		}, target: ErrTooLarge, err: fmt.Sprintf("response of %d bytes: too large (limit %d bytes)", limit+1, limit)},
		{name: "endless", h: func(s *server, w http.ResponseWriter, r *http.Request) {
			for {
				if _, err := w.Write(chunk); err != nil {
					return
				}
				select {
				case <-s.release:
					return
				default:
				}
			}
		}, target: ErrTooLarge, err: fmt.Sprintf("response: too large: more than %d bytes", limit), cache: []string{idA + "/"}},
		{name: "stall before the headers", h: func(s *server, w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-s.release:
			}
		}, timeout: 300 * time.Millisecond, target: ErrTimeout, err: "timed out: no response within 300ms"},
		{name: "stall in the body", h: func(s *server, w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("\x7fELF012345"))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-s.release:
			}
			// The headers and 10 bytes come at once; the timeout is long
			// enough that a loaded machine still delivers them within it.
		}, timeout: 2 * time.Second, target: ErrTimeout, err: "timed out: no data for 2s after 10 bytes", cache: []string{idA + "/"}},
		{name: "trickle past the maximum time", h: func(s *server, w http.ResponseWriter, r *http.Request) {
			for {
				if _, err := w.Write([]byte("x")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-s.release:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}, timeout: time.Minute, maxTime: 500 * time.Millisecond, target: ErrTimeout, err: "timed out: transfer not complete after 500ms", cache: []string{idA + "/"}},
		{name: "server error", h: func(_ *server, w http.ResponseWriter, r *http.Request) {
			http.Error(w, "broken", http.StatusInternalServerError)
		}, err: "HTTP status 500 Internal Server Error"},
		{name: "redirect to a file", h: func(_ *server, w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "file:///etc/shadow", http.StatusFound)
		}, err: `redirect to file:///etc/shadow refused: scheme "file" is not http or https`},
		{name: "redirect loop", h: func(_ *server, w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, r.URL.Path, http.StatusFound)
		}, err: "more than 5 redirects"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := serve(t, c.h)
			cl, warns := newClient(t, s.URL)
			cl.MaxBytes, cl.Timeout, cl.MaxTime = limit, c.timeout, c.maxTime
			p, err := cl.Fetch(t.Context(), idA)
			if p != "" {
				t.Errorf("Fetch returned %q", p)
			}
			wantErr(t, "Fetch", err, c.target, "debuginfod: build-id "+idA+": "+s.URL+": "+c.err)
			var fe *FetchError
			if !errors.As(err, &fe) || fe.BuildID != idA || len(fe.Errs) != 1 {
				t.Errorf("error %#v is not a FetchError of one server", err)
			}
			if l := listing(t, cl.CacheDir); !slices.Equal(l, c.cache) {
				t.Errorf("cache holds %q, want %q", l, c.cache)
			}
			if len(*warns) != 0 {
				t.Errorf("warnings %q", *warns)
			}
		})
	}
}

// TestNotFound: every server without the file gives ErrNotFound.
func TestNotFound(t *testing.T) {
	s1, s2 := serve(t, files()), serve(t, files())
	c, warns := newClient(t, s1.URL, s2.URL+"/")
	c.URLs, _ = ParseURLs(strings.Join(c.URLs, " "))
	_, err := c.Fetch(t.Context(), idMissing)
	wantErr(t, "Fetch", err, ErrNotFound, "debuginfod: build-id "+idMissing+": not found on "+s1.URL+", "+s2.URL)
	if s1.count.Load() != 1 || s2.count.Load() != 1 || len(*warns) != 0 {
		t.Fatalf("requests %d and %d, warnings %q; want 1, 1, none", s1.count.Load(), s2.count.Load(), *warns)
	}
	if l := listing(t, c.CacheDir); l != nil {
		t.Fatalf("cache holds %q", l)
	}
}

// TestFallback: a failing server is passed over with a warning; the file
// then comes from the cache without any request.
func TestFallback(t *testing.T) {
	a := build(t, idA)
	bad := serve(t, func(_ *server, w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusServiceUnavailable)
	})
	missing := serve(t, files())
	good := serve(t, files(a))
	c, warns := newClient(t, bad.URL, missing.URL, good.URL)
	want := filepath.Join(c.CacheDir, idA, "debuginfo")
	if p, err := c.Fetch(t.Context(), idA); p != want || err != nil {
		t.Fatalf("Fetch = %q, %v; want %s", p, err, want)
	}
	wantWarns := []string{bad.URL + ": HTTP status 503 Service Unavailable", missing.URL + ": not found"}
	if !slices.Equal(*warns, wantWarns) {
		t.Fatalf("warnings %q, want %q", *warns, wantWarns)
	}
	checkCached(t, want, a.debugData)
	if l := listing(t, c.CacheDir); !slices.Equal(l, []string{idA + "/", idA + "/debuginfo"}) {
		t.Fatalf("cache holds %q", l)
	}
	if p, err := c.Fetch(t.Context(), idA); p != want || err != nil {
		t.Fatalf("second Fetch = %q, %v; want %s", p, err, want)
	}
	if n := bad.count.Load() + missing.count.Load() + good.count.Load(); n != 3 {
		t.Fatalf("%d requests, want 3 (none for the second fetch)", n)
	}
}

// checkCached checks that the cache file at p holds data and is the
// invoking user's, read-only, in a directory of mode 0700.
func checkCached(t *testing.T, p string, data []byte) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("%s: %d bytes differing from the %d-byte debug file", p, len(got), len(data))
	}
	for _, c := range []struct {
		path string
		mode fs.FileMode
	}{{p, 0o400}, {filepath.Dir(p), fs.ModeDir | 0o700}} {
		fi, err := os.Lstat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != c.mode || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Getuid() {
			t.Fatalf("%s: mode %v uid %d, want %v uid %d", c.path, fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid, c.mode, os.Getuid())
		}
	}
}

// TestConcurrent: clients fetching the same file into one cache at once
// all succeed and leave one file.
func TestConcurrent(t *testing.T) {
	a := build(t, idA)
	s := serve(t, files(a))
	cache := filepath.Join(t.TempDir(), "cache")
	want := filepath.Join(cache, idA, "debuginfo")
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c := &Client{URLs: []string{s.URL}, CacheDir: cache}
			p, err := c.Fetch(context.Background(), idA)
			if err == nil && p != want {
				err = fmt.Errorf("path %s, want %s", p, want)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	checkCached(t, want, a.debugData)
	if l := listing(t, cache); !slices.Equal(l, []string{idA + "/", idA + "/debuginfo"}) {
		t.Fatalf("cache holds %q", l)
	}
}

// TestCacheSafety: a cache or cache entry that someone else could have
// placed is refused, without a request; a cache entry that is not the
// file is fetched again.
func TestCacheSafety(t *testing.T) {
	a, b := build(t, idA), build(t, idB)
	root := os.Getuid() == 0
	uid := os.Getuid()

	type setup func(t *testing.T, cache string)
	chown := func(t *testing.T, p string, uid int) {
		t.Helper()
		if !root {
			t.Skip("changing owners needs root")
		}
		if err := os.Lchown(p, uid, -1); err != nil {
			t.Fatal(err)
		}
	}
	chmod := func(t *testing.T, p string, m fs.FileMode) {
		t.Helper()
		if err := os.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
	}
	mkdir := func(t *testing.T, p string) {
		t.Helper()
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(t *testing.T, p string, data []byte, m fs.FileMode) {
		t.Helper()
		mkdir(t, filepath.Dir(p))
		if err := os.WriteFile(p, data, m); err != nil {
			t.Fatal(err)
		}
		chmod(t, p, m)
	}
	symlink := func(t *testing.T, target, p string) {
		t.Helper()
		mkdir(t, filepath.Dir(p))
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	entry := func(cache string) string { return filepath.Join(cache, idA, "debuginfo") }

	for _, c := range []struct {
		name  string
		setup setup
		err   func(cache string) string // "" when the fetch succeeds
		warn  func(cache string) string
		reqs  int64
	}{
		{name: "cache owned by someone else", setup: func(t *testing.T, cache string) {
			mkdir(t, cache)
			chown(t, cache, nobody)
		}, err: func(cache string) string {
			return fmt.Sprintf("debuginfod cache %s is owned by uid %d, not by you (uid %d): unsafe cache; not used", cache, nobody, uid)
		}},
		{name: "cache writable by its group", setup: func(t *testing.T, cache string) {
			mkdir(t, cache)
			chmod(t, cache, 0o770)
		}, err: func(cache string) string {
			return "debuginfod cache " + cache + " is writable by its group (mode 0770): unsafe cache; not used"
		}},
		{name: "cache writable by everyone", setup: func(t *testing.T, cache string) {
			mkdir(t, cache)
			chmod(t, cache, 0o777)
		}, err: func(cache string) string {
			return "debuginfod cache " + cache + " is writable by its group and others (mode 0777): unsafe cache; not used"
		}},
		{name: "cache in someone else's directory", setup: func(t *testing.T, cache string) {
			mkdir(t, cache)
			chown(t, filepath.Dir(cache), nobody)
		}, err: func(cache string) string {
			return fmt.Sprintf("debuginfod cache %s: %s is owned by uid %d, neither root nor you (uid %d): unsafe cache; not used", cache, filepath.Dir(cache), nobody, uid)
		}},
		{name: "cache in a directory others can write", setup: func(t *testing.T, cache string) {
			mkdir(t, cache)
			chmod(t, filepath.Dir(cache), 0o777)
		}, err: func(cache string) string {
			return "debuginfod cache " + cache + ": " + filepath.Dir(cache) + " is writable by its group and others (mode 0777): unsafe cache; not used"
		}},
		{name: "cache in a sticky directory others can write", setup: func(t *testing.T, cache string) {
			mkdir(t, cache)
			chmod(t, filepath.Dir(cache), 0o777|fs.ModeSticky)
		}, reqs: 1},
		{name: "cache through a symbolic link", setup: func(t *testing.T, cache string) {
			real := filepath.Join(filepath.Dir(cache), "real")
			mkdir(t, real)
			symlink(t, real, cache)
		}, err: nil, reqs: 1},
		{name: "entry directory a symbolic link", setup: func(t *testing.T, cache string) {
			elsewhere := filepath.Join(filepath.Dir(cache), "elsewhere")
			write(t, filepath.Join(elsewhere, "debuginfo"), a.debugData, 0o400)
			symlink(t, elsewhere, filepath.Join(cache, idA))
		}, err: func(cache string) string {
			return "debuginfod cache entry " + filepath.Join(cache, idA) + " is a symbolic link: unsafe cache; not used"
		}},
		{name: "entry directory owned by someone else", setup: func(t *testing.T, cache string) {
			mkdir(t, filepath.Join(cache, idA))
			chown(t, filepath.Join(cache, idA), nobody)
		}, err: func(cache string) string {
			return fmt.Sprintf("debuginfod cache entry %s is owned by uid %d, not by you (uid %d): unsafe cache; not used", filepath.Join(cache, idA), nobody, uid)
		}},
		{name: "entry a symbolic link", setup: func(t *testing.T, cache string) {
			symlink(t, a.debug, entry(cache))
		}, err: func(cache string) string {
			return "debuginfod cache entry " + entry(cache) + " is a symbolic link: unsafe cache; not used"
		}},
		{name: "entry owned by someone else", setup: func(t *testing.T, cache string) {
			write(t, entry(cache), a.debugData, 0o400)
			chown(t, entry(cache), nobody)
		}, err: func(cache string) string {
			return fmt.Sprintf("debuginfod cache entry %s is owned by uid %d, not by you (uid %d): unsafe cache; not used", entry(cache), nobody, uid)
		}},
		{name: "entry writable by others", setup: func(t *testing.T, cache string) {
			write(t, entry(cache), a.debugData, 0o602)
		}, err: func(cache string) string {
			return "debuginfod cache entry " + entry(cache) + " is writable by others (mode 0602): unsafe cache; not used"
		}},
		{name: "entry a FIFO", setup: func(t *testing.T, cache string) {
			mkdir(t, filepath.Join(cache, idA))
			if err := syscall.Mkfifo(entry(cache), 0o600); err != nil {
				t.Fatal(err)
			}
		}, err: func(cache string) string {
			return "debuginfod cache entry " + entry(cache) + " is not a regular file: unsafe cache; not used"
		}},
		{name: "entry with another build-id", setup: func(t *testing.T, cache string) {
			write(t, entry(cache), b.debugData, 0o400)
		}, warn: func(cache string) string {
			return "debuginfod cache entry " + entry(cache) + `: not the debug file asked for: it has build-id "` + idB + `"; fetching it again`
		}, reqs: 1},
		{name: "entry not ELF", setup: func(t *testing.T, cache string) {
			write(t, entry(cache), bytes.Repeat([]byte("garbage!"), 16), 0o400)
		}, warn: func(cache string) string {
			return "debuginfod cache entry " + entry(cache) + ": not the debug file asked for: not ELF (bad magic number '[103 97 114 98]' in record at byte 0x0); fetching it again"
		}, reqs: 1},
		{name: "entry too large", setup: func(t *testing.T, cache string) {
			write(t, entry(cache), make([]byte, len(a.debugData)+1), 0o400)
		}, warn: func(cache string) string {
			return fmt.Sprintf("debuginfod cache entry %s has %d bytes: too large (limit %d bytes); fetching it again", entry(cache), len(a.debugData)+1, len(a.debugData))
		}, reqs: 1},
		{name: "elfutils' marker of a failed lookup", setup: func(t *testing.T, cache string) {
			write(t, entry(cache), nil, 0)
		}, reqs: 1},
		{name: "valid entry", setup: func(t *testing.T, cache string) {
			write(t, entry(cache), a.debugData, 0o400)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := serve(t, files(a))
			cl, warns := newClient(t, s.URL)
			cl.MaxBytes = int64(len(a.debugData))
			c.setup(t, cl.CacheDir)
			p, err := cl.Fetch(t.Context(), idA)
			if c.err != nil {
				if p != "" {
					t.Errorf("Fetch returned %q", p)
				}
				wantErr(t, "Fetch", err, ErrUnsafeCache, c.err(cl.CacheDir))
			} else {
				resolved, rerr := filepath.EvalSymlinks(cl.CacheDir)
				if rerr != nil {
					t.Fatal(rerr)
				}
				if want := entry(resolved); p != want || err != nil {
					t.Fatalf("Fetch = %q, %v; want %s", p, err, want)
				}
				got, rerr := os.ReadFile(p)
				if rerr != nil || !bytes.Equal(got, a.debugData) {
					t.Fatalf("%s does not hold the debug file (%v)", p, rerr)
				}
			}
			var wantWarns []string
			if c.warn != nil {
				wantWarns = []string{c.warn(cl.CacheDir)}
			}
			if !slices.Equal(*warns, wantWarns) {
				t.Errorf("warnings %q, want %q", *warns, wantWarns)
			}
			if n := s.count.Load(); n != c.reqs {
				t.Errorf("%d requests, want %d", n, c.reqs)
			}
		})
	}
}
