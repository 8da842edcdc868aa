package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

// stock19ID is the build-id of Debian's libomp 19.
const stock19ID = "88dd4c1b40803a1eb06aab61e1089e0504fed768"

// TestDebugFileSources: the debug file `ompd-inspect debug-file` writes
// for Debian's libomp 19 is found in a --debug-dir directory and through
// Debian's debuginfod server, the report names it as the source, and says
// what the report recovered from the code says.
func TestDebugFileSources(t *testing.T) {
	dir := t.TempDir()
	if out, errs, code := cli("debug-file", "/usr/lib/llvm-19/lib/libomp.so.5", dir); code != 0 {
		t.Fatalf("debug-file: exit %d: %s%s", code, out, errs)
	}
	file := filepath.Join(dir, ".build-id", stock19ID[:2], stock19ID[2:]+".debug")
	p := fixture.Start(t, "nested", fixture.StartOptions{Stripped: true, Env: []string{"OMP_DEBUG=enabled"}})
	pid := strconv.Itoa(p.PID)
	recovered := reportOf(t, "attach", pid, "summary")
	if rt := recovered.Runtime; rt.SymbolsSource != "recovered-from-code" || rt.DebugFile != "" {
		t.Fatalf("without a debug file: symbols from %q, debug file %q", rt.SymbolsSource, rt.DebugFile)
	}
	want := canonical(recovered, p.Ready)

	check := func(what string, r *inspect.Report, debugFile string) {
		t.Helper()
		rt := r.Runtime
		if rt.SymbolsSource != "debug-file" || rt.LayoutSource != "debug-file" || rt.DebugFile != debugFile || rt.TypeInfo != "release-table" {
			t.Errorf("%s: symbols from %q, layout from %q, debug file %q, types from %q; want the debug file %s and the release's type table",
				what, rt.SymbolsSource, rt.LayoutSource, rt.DebugFile, rt.TypeInfo, debugFile)
		}
		if got := canonical(r, p.Ready); !slices.Equal(got, want) {
			a, b := diffLines(got, want)
			t.Errorf("%s: the report differs from the one recovered from the code:\n only with the debug file: %q\n only recovered: %q", what, a, b)
		}
	}
	check("--debug-dir", reportOf(t, "attach", pid, "summary", "--debug-dir", dir), file)

	srv := fixture.StartDebuginfod(t, dir, stock19ID)
	cache := t.TempDir()
	cmd := exec.Command(builtCLI(t), "attach", pid, "summary", "--json")
	cmd.Env = append(os.Environ(), "DEBUGINFOD_URLS="+srv.URL, "DEBUGINFOD_CACHE_PATH="+cache)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ompd-inspect with DEBUGINFOD_URLS: %v: %s", err, stderrOf(err))
	}
	var r inspect.Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	check("debuginfod", &r, filepath.Join(cache, stock19ID, "debuginfo"))
	assertRunning(t, p)
}

// TestDebuginfodNotWhileStopped: with DEBUGINFOD_URLS set, attach asks
// the servers before it stops the process, never while it holds it: a
// server that records, at each request, whether the target is traced
// sees it untraced every time.
func TestDebuginfodNotWhileStopped(t *testing.T) {
	p := fixture.Start(t, "nested", fixture.StartOptions{Stripped: true})
	var mu sync.Mutex
	var requests, whileTraced int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, _ := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/status")
		mu.Lock()
		requests++
		if !strings.Contains(string(status), "\nTracerPid:\t0\n") {
			whileTraced++
		}
		mu.Unlock()
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	cmd := exec.Command(builtCLI(t), "attach", strconv.Itoa(p.PID), "summary", "--json")
	cmd.Env = append(os.Environ(), "DEBUGINFOD_URLS="+srv.URL, "DEBUGINFOD_CACHE_PATH="+t.TempDir())
	if out, err := cmd.Output(); err != nil {
		t.Fatalf("ompd-inspect: %v: %s\n%s", err, stderrOf(err), out)
	}
	mu.Lock()
	defer mu.Unlock()
	// Debian's libomp has no debug file here: it at least was asked for.
	if requests == 0 || whileTraced != 0 {
		t.Errorf("%d requests, %d of them while the target was traced; want some, none while traced", requests, whileTraced)
	}
	assertRunning(t, p)
}
