package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

// pluginDir is where Debian's libomp-19-dev installs LLVM's gdb OMPD
// plugin.
const pluginDir = "/usr/lib/llvm-19/share/gdb/python/ompd"

// systemDebugDir is gdb's default debug-file-directory on Debian, kept
// first when a test names a directory of its own: it holds the C
// library's debug information (libc6-dbg).
const systemDebugDir = "/usr/lib/debug"

// TestGDBPluginOnStock: `ompd-inspect debug-file` makes LLVM's own gdb
// plugin (with Debian's libompd) work on Debian's stripped libomp 19: its
// `ompd init` loads, and its `ompd icvs` and `ompd parallel` agree with
// ompd-inspect's report of the same stopped process.
func TestGDBPluginOnStock(t *testing.T) {
	lib := "/usr/lib/llvm-19/lib/libomp.so.5"
	dir := t.TempDir()
	out, errs, code := cli("debug-file", lib, dir)
	want := filepath.Join(dir, ".build-id", "88", "dd4c1b40803a1eb06aab61e1089e0504fed768.debug") + "\n"
	if code != 0 || out != want || errs != "" {
		t.Fatalf("debug-file: exit %d, stdout %q, stderr %q; want %q", code, out, errs, want)
	}
	p := fixture.Start(t, "nested", fixture.StartOptions{Stripped: true, Env: []string{"OMP_DEBUG=enabled"}})
	r := reportOf(t, "attach", strconv.Itoa(p.PID), "summary")

	gdb := exec.Command("gdb", "-nx", "-batch", "-iex", "set debug-file-directory "+systemDebugDir+":"+dir,
		"-ex", "source "+pluginDir+"/__init__.py", "-ex", "ompd init", "-ex", "ompd icvs", "-ex", "ompd parallel",
		"-p", strconv.Itoa(p.PID))
	gout, err := gdb.CombinedOutput()
	assertRunning(t, p)
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, gout)
	}
	text := string(gout)
	if !strings.Contains(text, "Loaded OMPD lib successfully!") {
		t.Fatalf("the plugin's ompd init failed:\n%s", text)
	}

	// gdb's current thread is the initial thread (the process id).
	th := find(t, r.Threads, func(x inspect.Thread) bool { return x.OSTID == p.PID }, "the initial thread")
	icvs, _ := r.ThreadICVs(p.PID)
	ours := map[string]string{}
	for _, v := range icvs {
		val := fmt.Sprint(v.Value)
		if f, ok := v.Value.(float64); ok { // JSON numbers
			val = strconv.FormatFloat(f, 'f', -1, 64)
		}
		ours[v.Name+" "+v.Scope] = val
	}
	row := regexp.MustCompile(`(?m)^([a-z-]+-var)[ \t]+(address_space|thread|parallel|task)[ \t]*(.*?)[ \t]*$`)
	compared := 0
	for _, m := range row.FindAllStringSubmatch(text, -1) {
		name, scope, val := m[1], m[2], m[3]
		got, ok := ours[name+" "+scope]
		if !ok {
			continue // an ICV ompd-inspect names differently or has not
		}
		compared++
		if got != val {
			t.Errorf("%s (%s): the plugin says %q, ompd-inspect %q", name, scope, val, got)
		}
	}
	if compared < 15 {
		t.Errorf("only %d ICVs compared with the plugin's:\n%s", compared, text)
	}

	// ompd parallel: the initial thread's innermost region.
	reg := find(t, r.Regions, func(x inspect.Region) bool { return th.Region != nil && x.ID == *th.Region }, "the initial thread's region")
	wantPar := fmt.Sprintf("Parallel Region: Nesting Level %d: Team Size: %d", reg.Level, reg.TeamSize)
	if !strings.Contains(text, wantPar) {
		t.Errorf("the plugin's ompd parallel does not say %q:\n%s", wantPar, text)
	}
}
