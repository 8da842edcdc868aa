// Package debuginfod fetches separate debug files by build-id from
// debuginfod servers, with the client protocol and cache of elfutils'
// client: GET URL/buildid/HEX/debuginfo for each server named by
// DEBUGINFOD_URLS, the answer kept as CACHE/HEX/debuginfo, where CACHE is
// DEBUGINFOD_CACHE_PATH, else $XDG_CACHE_HOME/debuginfod_client, else
// ~/.cache/debuginfod_client. elfutils' tools and this package share the
// cache.
//
// ompd-inspect often runs as root, so every byte from a server, the cache
// or a file is treated as hostile:
//
//   - Nothing happens (no cache access, no request) unless DEBUGINFOD_URLS
//     names at least one http or https server; other schemes are refused.
//   - A response is bounded in size (MaxBytes, at most MaxDebugFileBytes)
//     and time (Timeout for the connection, the response headers and
//     every pause of the body; MaxTime for the whole transfer).
//   - A response goes to a temporary file in the cache and is renamed into
//     place only after it parses as ELF and carries the build-id asked
//     for; otherwise it is removed. Concurrent runs never see each other's
//     partial files.
//   - The cache directory must be owned by the invoking user (the real
//     user id) and writable by nobody else, and so must every directory
//     above it unless it is owned by root (a sticky directory such as
//     /tmp may be writable by others). A cache entry that is a symbolic
//     link, not owned by the invoking user, or writable by others is
//     refused, never followed. A cached file is used only after its
//     build-id is checked.
//
// Failures (a server down, slow, without the file, or sending something
// else) are errors, never hangs or panics.
package debuginfod

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ompd-inspect/ompd-inspect/target/privdir"
)

// Limits. DEBUGINFOD_TIMEOUT, DEBUGINFOD_MAXTIME and DEBUGINFOD_MAXSIZE can
// choose other values up to the caps.
const (
	// MaxDebugFileBytes is the largest debug file downloaded or read from
	// the cache (1 GiB); DEBUGINFOD_MAXSIZE can only lower it.
	MaxDebugFileBytes = 1 << 30
	// DefaultTimeout bounds connecting to a server and receiving its
	// response headers, and then every pause while the body arrives.
	// elfutils' default is 90 s; an interactive tool should give up on a
	// dead server sooner.
	DefaultTimeout = 30 * time.Second
	// MaxTimeout caps DEBUGINFOD_TIMEOUT.
	MaxTimeout = 5 * time.Minute
	// DefaultMaxTime bounds a whole transfer from one server.
	DefaultMaxTime = 5 * time.Minute
	// MaxMaxTime caps DEBUGINFOD_MAXTIME.
	MaxMaxTime = time.Hour
	// MaxServers is the largest number of servers asked for one file;
	// further entries of DEBUGINFOD_URLS are ignored.
	MaxServers = 16
	// maxBuildIDBytes bounds the length of a build-id (a SHA-1 build-id
	// has 20 bytes).
	maxBuildIDBytes = 64
)

// Errors that Fetch wraps; test them with errors.Is.
var (
	// ErrNoServers: DEBUGINFOD_URLS names no usable server, so nothing
	// was fetched (and nothing was looked up in the cache).
	ErrNoServers = errors.New("no debuginfod server configured (DEBUGINFOD_URLS names none)")
	// ErrBadBuildID: the build-id asked for is not lowercase hex of 1 to
	// 64 bytes.
	ErrBadBuildID = errors.New("not a build-id")
	// ErrNotFound: every server answered that it has no such file.
	ErrNotFound = errors.New("not found")
	// ErrTooLarge: a response or cached file exceeds the size limit.
	ErrTooLarge = errors.New("too large")
	// ErrTimeout: a server did not answer or stalled past the timeout,
	// or a transfer took longer than the maximum time.
	ErrTimeout = errors.New("timed out")
	// ErrMismatch: a response or cached file is not ELF or carries
	// another build-id.
	ErrMismatch = errors.New("not the debug file asked for")
	// ErrUnsafeCache: the cache directory or an entry in it is refused
	// (owned by someone else, writable by others, a symbolic link).
	ErrUnsafeCache = privdir.ErrUnsafe
)

// Client fetches debug files. Its exported fields may be set before the
// first Fetch; the zero value of a limit means its default. A Client is
// safe for concurrent use.
type Client struct {
	// URLs are the servers' base URLs, asked in order.
	URLs []string
	// CacheDir is the cache directory (see DefaultCacheDir).
	CacheDir string
	// Timeout bounds connecting and receiving the response headers, and
	// every pause of a response body (0: DefaultTimeout).
	Timeout time.Duration
	// MaxTime bounds a whole transfer from one server (0:
	// DefaultMaxTime).
	MaxTime time.Duration
	// MaxBytes is the largest file accepted (0: MaxDebugFileBytes; never
	// more).
	MaxBytes int64
	// Warn, when not nil, receives what went wrong on the way to a
	// success: a server that failed before another one answered, a
	// cache entry that was replaced. Failures of the whole fetch are its
	// error instead.
	Warn func(string)

	httpOnce sync.Once
	http     *http.Client
}

// FromEnv returns a client configured by the environment as elfutils'
// client is: DEBUGINFOD_URLS (space-separated base URLs),
// DEBUGINFOD_CACHE_PATH, DEBUGINFOD_TIMEOUT (seconds), DEBUGINFOD_MAXTIME
// (seconds) and DEBUGINFOD_MAXSIZE (bytes). Settings that are refused
// (a URL that is not http or https, a number out of range) are ignored,
// each with a warning in the returned list. The client is not Enabled
// when no usable URL is left.
//
// DEBUGINFOD_TIMEOUT differs slightly from elfutils' reading (the time
// until the first 100 KiB have arrived, 90 s by default): here it bounds
// the connection and the response headers, then every pause of the body
// (DefaultTimeout by default, at most MaxTimeout); DEBUGINFOD_MAXTIME
// bounds the whole transfer from one server (DefaultMaxTime by default,
// at most MaxMaxTime). Servers are asked one after the other, so a fetch
// that fails everywhere takes at most MaxTime per server.
func FromEnv() (*Client, []string) {
	var warns []string
	c := &Client{}
	urls, problems := ParseURLs(os.Getenv("DEBUGINFOD_URLS"))
	for _, p := range problems {
		warns = append(warns, p.Error())
	}
	c.URLs = urls
	if !c.Enabled() {
		return c, warns
	}
	dir, err := DefaultCacheDir()
	if err != nil {
		warns = append(warns, err.Error())
	}
	c.CacheDir = dir
	if d, ok, err := seconds("DEBUGINFOD_TIMEOUT", MaxTimeout); err != nil {
		warns = append(warns, err.Error()+fmt.Sprintf("; using %v", DefaultTimeout))
	} else if ok {
		c.Timeout = d
	}
	if d, ok, err := seconds("DEBUGINFOD_MAXTIME", MaxMaxTime); err != nil {
		warns = append(warns, err.Error()+fmt.Sprintf("; using %v", DefaultMaxTime))
	} else if ok {
		c.MaxTime = d
	}
	if s := strings.TrimSpace(os.Getenv("DEBUGINFOD_MAXSIZE")); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		switch {
		case err != nil || n <= 0:
			warns = append(warns, fmt.Sprintf("DEBUGINFOD_MAXSIZE=%q is not a positive number of bytes; using %d", s, MaxDebugFileBytes))
		case n > MaxDebugFileBytes:
			warns = append(warns, fmt.Sprintf("DEBUGINFOD_MAXSIZE=%d is above the limit; using %d", n, MaxDebugFileBytes))
		default:
			c.MaxBytes = n
		}
	}
	return c, warns
}

// seconds reads the environment variable name as a positive whole number
// of seconds, capped at max (a larger value is capped without error). ok
// is false when the variable is unset or empty.
func seconds(name string, max time.Duration) (time.Duration, bool, error) {
	s := strings.TrimSpace(os.Getenv(name))
	if s == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, false, fmt.Errorf("%s=%q is not a positive number of seconds", name, s)
	}
	if n > int64(max/time.Second) {
		return max, true, nil
	}
	return time.Duration(n) * time.Second, true, nil
}

// ParseURLs splits a DEBUGINFOD_URLS value at white space and returns the
// usable base URLs (http or https, with a host, without query or
// fragment; trailing slashes removed), at most MaxServers of them, in
// order and without repeats, and an error for every entry refused.
func ParseURLs(s string) ([]string, []error) {
	var urls []string
	var problems []error
	seen := map[string]bool{}
	for _, f := range strings.Fields(s) {
		u, err := checkURL(f)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		if seen[u] {
			continue
		}
		if len(urls) == MaxServers {
			problems = append(problems, fmt.Errorf("DEBUGINFOD_URLS: %s ignored: more than %d servers", f, MaxServers))
			continue
		}
		seen[u] = true
		urls = append(urls, u)
	}
	return urls, problems
}

// checkURL returns the base URL u with trailing slashes removed, or why
// it is refused.
func checkURL(u string) (string, error) {
	p, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("DEBUGINFOD_URLS: %s refused: %w", u, err)
	}
	switch strings.ToLower(p.Scheme) {
	case "http", "https":
	default:
		return "", fmt.Errorf("DEBUGINFOD_URLS: %s refused: scheme %q is not http or https", u, p.Scheme)
	}
	if p.Host == "" {
		return "", fmt.Errorf("DEBUGINFOD_URLS: %s refused: no host", u)
	}
	if p.RawQuery != "" || p.Fragment != "" || p.ForceQuery {
		return "", fmt.Errorf("DEBUGINFOD_URLS: %s refused: a base URL has no query or fragment", u)
	}
	return strings.TrimRight(u, "/"), nil
}

// DefaultCacheDir returns the cache directory elfutils' client uses:
// DEBUGINFOD_CACHE_PATH, else $XDG_CACHE_HOME/debuginfod_client, else
// $HOME/.cache/debuginfod_client, made absolute.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("DEBUGINFOD_CACHE_PATH"); d != "" {
		return absDir("DEBUGINFOD_CACHE_PATH", d)
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return absDir("XDG_CACHE_HOME", filepath.Join(d, "debuginfod_client"))
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("debuginfod cache: %w (set DEBUGINFOD_CACHE_PATH)", err)
	}
	return absDir("HOME", filepath.Join(home, ".cache", "debuginfod_client"))
}

func absDir(from, d string) (string, error) {
	abs, err := filepath.Abs(d)
	if err != nil {
		return "", fmt.Errorf("debuginfod cache %s (from %s): %w", d, from, err)
	}
	return abs, nil
}

// Enabled reports whether the client has a server to ask. A client that
// is not enabled does nothing: Fetch returns ErrNoServers.
func (c *Client) Enabled() bool { return c != nil && len(c.URLs) > 0 }

// Fetcher returns a function for elf.OpenOptions.Fetch that fetches with
// ctx, or nil when the client is not enabled.
func (c *Client) Fetcher(ctx context.Context) func(buildID string) (string, error) {
	if !c.Enabled() {
		return nil
	}
	return func(buildID string) (string, error) { return c.Fetch(ctx, buildID) }
}

// CachedFetcher returns a function for elf.OpenOptions.Fetch that only
// looks in the cache (Cached), never asks a server, or nil when the
// client is not enabled: for while a process is held stopped.
func (c *Client) CachedFetcher() func(buildID string) (string, error) {
	if !c.Enabled() {
		return nil
	}
	return c.Cached
}

// Cached returns the path of the cache's valid copy of the debug file
// with the given build-id, or "" and nil when the cache has none; it asks
// no server. A client that is not enabled gives ErrNoServers and does not
// touch the cache.
func (c *Client) Cached(buildID string) (string, error) {
	_, p, err := c.cached(buildID)
	return p, err
}

// cached checks buildID, opens the cache and looks the file up in it:
// what Cached and Fetch do first.
func (c *Client) cached(buildID string) (*cache, string, error) {
	if err := checkBuildID(buildID); err != nil {
		return nil, "", err
	}
	if !c.Enabled() {
		return nil, "", ErrNoServers
	}
	if c.CacheDir == "" {
		return nil, "", fmt.Errorf("debuginfod: build-id %s: no cache directory", buildID)
	}
	k, err := c.openCache()
	if err != nil {
		return nil, "", err
	}
	p, err := k.lookup(buildID)
	return k, p, err
}

// Fetch returns the path of the debug file with the given build-id
// (lowercase hex): the cache's copy when there is a valid one, else the
// first server's answer, stored in the cache. Its errors wrap the
// package's Err values and name the build-id, the server or the cache
// path.
func (c *Client) Fetch(ctx context.Context, buildID string) (string, error) {
	cache, p, err := c.cached(buildID)
	if err != nil || p != "" {
		return p, err
	}
	var errs []error
	allNotFound := true
	for _, base := range c.URLs {
		p, err := c.download(ctx, cache, base, buildID)
		if err == nil {
			for _, e := range errs {
				c.warn(e.Error())
			}
			return p, nil
		}
		errs = append(errs, err)
		if !errors.Is(err, ErrNotFound) {
			allNotFound = false
		}
		if ctx.Err() != nil {
			break
		}
	}
	if allNotFound {
		return "", fmt.Errorf("debuginfod: build-id %s: %w on %s", buildID, ErrNotFound, strings.Join(c.URLs, ", "))
	}
	return "", &FetchError{BuildID: buildID, Errs: errs}
}

// FetchError is Fetch's error when no server gave the file and not all
// said they lack it: one error per server asked, in order.
type FetchError struct {
	// BuildID is the build-id asked for.
	BuildID string
	// Errs are the servers' errors, each naming its server.
	Errs []error
}

// Error names the build-id and every server's failure.
func (e *FetchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "debuginfod: build-id %s: ", e.BuildID)
	for i, err := range e.Errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

// Unwrap returns the servers' errors.
func (e *FetchError) Unwrap() []error { return e.Errs }

// checkBuildID checks that id is lowercase hex of 1 to maxBuildIDBytes
// bytes: it becomes a path component and part of a URL.
func checkBuildID(id string) error {
	if len(id) < 2 || len(id)%2 != 0 || len(id) > 2*maxBuildIDBytes {
		return fmt.Errorf("debuginfod: %q: %w (want 1 to %d bytes of lowercase hex)", id, ErrBadBuildID, maxBuildIDBytes)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("debuginfod: %q: %w (want 1 to %d bytes of lowercase hex)", id, ErrBadBuildID, maxBuildIDBytes)
		}
	}
	return nil
}

func (c *Client) warn(msg string) {
	if c.Warn != nil {
		c.Warn(msg)
	}
}

func (c *Client) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

func (c *Client) maxTime() time.Duration {
	if c.MaxTime > 0 {
		return c.MaxTime
	}
	return DefaultMaxTime
}

func (c *Client) maxBytes() int64 {
	if c.MaxBytes > 0 && c.MaxBytes < MaxDebugFileBytes {
		return c.MaxBytes
	}
	return MaxDebugFileBytes
}
