package debuginfod

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

const (
	// maxRedirects bounds the redirects followed for one request.
	maxRedirects = 5
	// maxHeaderBytes bounds a response's headers.
	maxHeaderBytes = 64 << 10
	// userAgent names the client to servers.
	userAgent = "ompd-inspect (debuginfod client)"
)

// client returns the HTTP client, built on first use. Time limits are not
// the transport's: download bounds each request with its context.
func (c *Client) client() *http.Client {
	c.httpOnce.Do(func() {
		c.http = &http.Client{
			Transport: &http.Transport{
				Proxy:                  http.ProxyFromEnvironment,
				DisableCompression:     true,
				MaxResponseHeaderBytes: maxHeaderBytes,
				ForceAttemptHTTP2:      true,
				IdleConnTimeout:        30 * time.Second,
			},
			CheckRedirect: func(req *http.Request, via []*http.Request) error {
				if len(via) >= maxRedirects {
					return fmt.Errorf("more than %d redirects", maxRedirects)
				}
				if s := req.URL.Scheme; s != "http" && s != "https" {
					return fmt.Errorf("redirect to %s refused: scheme %q is not http or https", req.URL.Redacted(), s)
				}
				if len(via) > 0 && via[len(via)-1].URL.Scheme == "https" && req.URL.Scheme == "http" {
					return fmt.Errorf("redirect to %s refused: from https to http", req.URL.Redacted())
				}
				return nil
			},
		}
	})
	return c.http
}

// download asks the server at base for the debug file of id and stores it
// in the cache, returning its path. The response is written to a
// temporary file next to the cache entry and renamed into place only
// after it proves to be an ELF file with build-id id; on any failure the
// temporary file is removed.
func (c *Client) download(ctx context.Context, k *cache, base, id string) (path string, err error) {
	if _, err := checkURL(base); err != nil {
		return "", err
	}
	timeout := c.timeout()
	parent := ctx
	ctx, cancelTotal := context.WithTimeoutCause(ctx, c.maxTime(), errMaxTime)
	defer cancelTotal()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The timer fires when the server is silent for timeout: before the
	// response headers, then between reads of the body.
	timer := time.AfterFunc(timeout, func() { cancel(errIdle) })
	defer timer.Stop()
	var got int64
	headers := false
	// failed turns a transfer error into one that says what happened.
	failed := func(err error) error {
		switch {
		case parent.Err() != nil:
			return fmt.Errorf("%s: %w", base, context.Cause(parent))
		case context.Cause(ctx) == errIdle && !headers:
			return fmt.Errorf("%s: %w: no response within %v", base, ErrTimeout, timeout)
		case context.Cause(ctx) == errIdle:
			return fmt.Errorf("%s: %w: no data for %v after %d bytes", base, ErrTimeout, timeout, got)
		case context.Cause(ctx) == errMaxTime:
			return fmt.Errorf("%s: %w: transfer not complete after %v", base, ErrTimeout, c.maxTime())
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%s: %w", base, err)
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/buildid/"+id+"/debuginfo", nil)
	if err != nil {
		return "", fmt.Errorf("%s: %w", base, err)
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := c.client().Do(req)
	if err != nil {
		return "", failed(err)
	}
	defer resp.Body.Close()
	headers = true
	timer.Reset(timeout)
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return "", fmt.Errorf("%s: %w", base, ErrNotFound)
	case resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("%s: HTTP status %s", base, resp.Status)
	}
	max := k.max
	if resp.ContentLength > max {
		return "", fmt.Errorf("%s: response of %d bytes: %w (limit %d bytes)", base, resp.ContentLength, ErrTooLarge, max)
	}

	dir, err := k.entryDir(id, true)
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, cacheFile+".*.tmp")
	if err != nil {
		return "", fmt.Errorf("debuginfod cache: %w", err)
	}
	name := tmp.Name()
	defer func() {
		tmp.Close() // a second Close only returns os.ErrClosed
		if err != nil {
			os.Remove(name)
		}
	}()
	body := &progress{r: io.LimitReader(resp.Body, max+1), on: func(n int) {
		got += int64(n)
		timer.Reset(timeout)
	}}
	if _, err := io.Copy(tmp, body); err != nil {
		return "", failed(err)
	}
	if got > max {
		return "", fmt.Errorf("%s: response: %w: more than %d bytes", base, ErrTooLarge, max)
	}
	timer.Stop()
	if got == 0 {
		return "", fmt.Errorf("%s: %w: the response is empty", base, ErrMismatch)
	}
	bid, err := elf.ReadBuildID(tmp)
	if err != nil {
		// ReadBuildID's error names the temporary file; its cause is
		// what matters.
		if cause := errors.Unwrap(err); cause != nil {
			err = cause
		}
		return "", fmt.Errorf("%s: %w: the file sent is not ELF (%v)", base, ErrMismatch, err)
	}
	if bid != id {
		return "", fmt.Errorf("%s: %w: the file sent has build-id %q", base, ErrMismatch, bid)
	}
	if err := tmp.Chmod(0o400); err != nil {
		return "", fmt.Errorf("debuginfod cache: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("debuginfod cache: writing %s: %w", name, err)
	}
	path = filepath.Join(dir, cacheFile)
	if err := os.Rename(name, path); err != nil {
		return "", fmt.Errorf("debuginfod cache: %w", err)
	}
	return path, nil
}

// Causes of a download's cancellation by its own limits.
var (
	errIdle    = errors.New("server silent past the timeout")
	errMaxTime = errors.New("transfer longer than the maximum time")
)

// progress reads from r and reports every read's byte count to on.
type progress struct {
	r  io.Reader
	on func(int)
}

// Read reads from the underlying reader and reports what it got.
func (p *progress) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.on(n)
	}
	return n, err
}
