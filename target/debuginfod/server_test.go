package debuginfod

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// Bounds of the polls that wait for the debuginfod server.
const (
	pollTries    = 500
	pollInterval = 20 * time.Millisecond
	// stopWait bounds the wait for the server to exit after SIGTERM.
	stopWait = 10 * time.Second
)

// debuginfodServer is elfutils' debuginfod started by a test.
type debuginfodServer struct {
	URL  string
	Port int
	cmd  *exec.Cmd
	log  string
	// exited is closed when the process has exited.
	exited chan struct{}
	once   sync.Once
}

// Stop ends the server (SIGTERM, then SIGKILL after stopWait) and waits
// for it. It may be called more than once.
func (s *debuginfodServer) Stop() {
	s.once.Do(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(stopWait):
			s.cmd.Process.Kill()
			<-s.exited
		}
	})
}

// logText returns the server's output, for failure messages.
func (s *debuginfodServer) logText() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

// loopbackShim builds testdata/bindloopback.c, which makes the server
// bind to the loopback address only.
func loopbackShim(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("testdata", "bindloopback.c"))
	if err != nil {
		t.Fatal(err)
	}
	so := filepath.Join(t.TempDir(), "bindloopback.so")
	run(t, "gcc", "-shared", "-fPIC", "-O2", "-o", so, src, "-ldl")
	return so
}

// freePort returns a TCP port that was free on the loopback address a
// moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startDebuginfod runs `debuginfod -F DIR -p PORT -d DB` bound to the
// loopback address only, and waits (a bounded poll) until it serves
// the debug file of ready. It is stopped when the test ends.
func startDebuginfod(t *testing.T, dir, ready string) *debuginfodServer {
	t.Helper()
	bin, err := exec.LookPath("debuginfod")
	if err != nil {
		t.Fatalf("debuginfod not installed (run scripts/setup.sh): %v", err)
	}
	shim := loopbackShim(t)
	var last *debuginfodServer
	// A port taken between freePort and the server's bind makes the
	// server exit; another port is tried then.
	for range 3 {
		work := t.TempDir()
		s := &debuginfodServer{Port: freePort(t), log: filepath.Join(work, "log"), exited: make(chan struct{})}
		s.URL = "http://127.0.0.1:" + strconv.Itoa(s.Port)
		logf, err := os.Create(s.log)
		if err != nil {
			t.Fatal(err)
		}
		s.cmd = exec.Command(bin, "-F", "-p", strconv.Itoa(s.Port), "-d", filepath.Join(work, "db.sqlite"), "-t", "0", "-g", "0", dir)
		// Nothing of the test's environment: DEBUGINFOD_URLS there would
		// make the server forward misses to other servers.
		s.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + work, "TMPDIR=" + work, "LD_PRELOAD=" + shim}
		s.cmd.Stdout, s.cmd.Stderr = logf, logf
		if err := s.cmd.Start(); err != nil {
			logf.Close()
			t.Fatal(err)
		}
		logf.Close()
		go func() {
			s.cmd.Wait()
			close(s.exited)
		}()
		t.Cleanup(s.Stop)
		last = s
		if s.waitListening(t) {
			s.waitServing(t, ready)
			return s
		}
	}
	t.Fatalf("debuginfod exited before listening, 3 times; last output:\n%s", last.logText())
	return nil
}

// waitListening polls until the server listens on its port and checks
// that it listens on the loopback address only; false when the server
// exited first.
func (s *debuginfodServer) waitListening(t *testing.T) bool {
	t.Helper()
	for range pollTries {
		select {
		case <-s.exited:
			return false
		default:
		}
		addrs := listening(t, s.Port)
		if len(addrs) > 0 {
			for _, a := range addrs {
				if !slices.Contains(loopbackAddrs, a) {
					s.Stop()
					t.Fatalf("debuginfod listens on %s (hex, /proc/net), not only on the loopback address: was the bind shim not preloaded?\n%s", a, s.logText())
				}
			}
			return true
		}
		time.Sleep(pollInterval)
	}
	s.Stop()
	t.Fatalf("debuginfod does not listen on port %d after %d tries:\n%s", s.Port, pollTries, s.logText())
	return false
}

// loopbackAddrs are the loopback addresses as /proc/net/tcp and tcp6
// write them: 127.0.0.1, ::ffff:127.0.0.1, ::1.
var loopbackAddrs = []string{"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}

// listening returns the local addresses (hex, as /proc/net writes them)
// of the TCP sockets listening on port.
func listening(t *testing.T, port int) []string {
	t.Helper()
	var addrs []string
	suffix := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			// sl local_address rem_address st ...; st 0A is LISTEN.
			if len(fs) > 3 && fs[3] == "0A" && strings.HasSuffix(fs[1], suffix) {
				addrs = append(addrs, strings.TrimSuffix(fs[1], suffix))
			}
		}
	}
	return addrs
}

// waitServing polls until the server has indexed and serves the debug
// file of build-id id.
func (s *debuginfodServer) waitServing(t *testing.T, id string) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	last := ""
	for range pollTries {
		resp, err := hc.Get(s.URL + "/buildid/" + id + "/debuginfo")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-s.exited:
			t.Fatalf("debuginfod exited:\n%s", s.logText())
		default:
		}
		time.Sleep(pollInterval)
	}
	s.Stop()
	t.Fatalf("debuginfod does not serve %s after %d tries (last: %s):\n%s", id, pollTries, last, s.logText())
}

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
	srv := startDebuginfod(t, served, idA)

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
