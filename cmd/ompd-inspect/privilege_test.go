package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

// nobody is the user the least-privilege tests run as.
const nobody = "65534"

// asNobody returns the command line that runs argv as user and group
// nobody, without supplementary groups or capabilities.
func asNobody(argv ...string) []string {
	return append([]string{"/usr/bin/setpriv", "--reuid=" + nobody, "--regid=" + nobody, "--clear-groups", "--inh-caps=-all", "--"}, argv...)
}

// publicCLI copies the built ompd-inspect where any user may run it.
func publicCLI(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ompd-inspect-public")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "ompd-inspect")
	fixture.CopyFile(t, builtCLI(t), bin)
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestOrdinaryUser: ompd-inspect needs no privilege to inspect a process
// of its own user, and names what refuses it for another user's process.
func TestOrdinaryUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the least-privilege test switches users and must run as root")
	}
	bin := publicCLI(t)

	// The user's own process: the fixture runs as nobody too.
	argv := asNobody(fixture.Exe(t, "nested"))
	own := fixture.Start(t, "nested", fixture.StartOptions{Exe: argv[0], Args: argv[1:]})
	status, err := os.ReadFile("/proc/" + strconv.Itoa(own.PID) + "/status")
	if err != nil || !strings.Contains(string(status), "\nUid:\t"+nobody+"\t"+nobody+"\t") {
		t.Fatalf("the fixture does not run as nobody: %v\n%s", err, status)
	}
	nb := asNobody(bin, "attach", strconv.Itoa(own.PID), "regions", "--json")
	cmd := exec.Command(nb[0], nb[1:]...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ompd-inspect as nobody on nobody's process: %v: %s", err, stderrOf(err))
	}
	var r inspect.Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	sizes := map[int]int{}
	for _, reg := range r.Regions {
		sizes[reg.TeamSize]++
	}
	if r.Target.PID != own.PID {
		t.Errorf("report of process %d; want %d", r.Target.PID, own.PID)
	}
	if len(r.Regions) != 4 || sizes[2] != 1 || sizes[3] != 2 || sizes[4] != 1 {
		t.Errorf("regions as nobody: %d regions with team sizes %v; want 4: one of 2, two of 3, one of 4", len(r.Regions), sizes)
	}
	assertRunning(t, own)

	// Another user's process (root's): refused, with the reason.
	root := fixture.Start(t, "nested", fixture.StartOptions{})
	nb = asNobody(bin, "attach", strconv.Itoa(root.PID))
	cmd = exec.Command(nb[0], nb[1:]...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	want := "ompd-inspect: process " + strconv.Itoa(root.PID) + ": attaching refused: operation not permitted; "
	// The reason depends on the Yama setting; the test runs where there is
	// none or it is 0 (at 1 and above nobody could not inspect its own
	// process either, which the first half asserts).
	switch scope, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); {
	case err != nil:
		want += "there is no kernel.yama.ptrace_scope on this system, so the process probably belongs to another user, has changed its credentials or is not dumpable"
	case strings.TrimSpace(string(scope)) == "0":
		want += "kernel.yama.ptrace_scope is 0, so the process probably belongs to another user, has changed its credentials or is not dumpable"
	default:
		t.Fatalf("kernel.yama.ptrace_scope is %s: an ordinary user cannot attach to its own processes here", strings.TrimSpace(string(scope)))
	}
	want += "; attaching needs CAP_SYS_PTRACE (for example running as root), which ompd-inspect does not have\n"
	if code != 1 || stdout.Len() != 0 || stderr.String() != want {
		t.Errorf("as nobody on root's process: exit %d, stdout %q\n stderr %q\n want   %q", code, stdout.String(), stderr.String(), want)
	}
	assertRunning(t, root)
}

// stderrOf returns the stderr an exec.ExitError captured.
func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// TestSectionCacheDirectory: the cache of decompressed sections is used
// when its directory is private (entries appear in it), refused with one
// warning when another user could write it (the report is still made),
// and not used at all when OMPD_INSPECT_SECTION_CACHE is off.
func TestSectionCacheDirectory(t *testing.T) {
	p := fixture.Start(t, "nested", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}})
	dir := t.TempDir()
	run := func(cacheDir string) (string, string) {
		t.Helper()
		cmd := exec.Command(builtCLI(t), "attach", strconv.Itoa(p.PID), "threads")
		cmd.Env = append(os.Environ(), "OMPD_INSPECT_SECTION_CACHE="+cacheDir, "XDG_CACHE_HOME="+filepath.Join(dir, "xdg"))
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("attach with the section cache %s: %v\n%s", cacheDir, err, stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	private := filepath.Join(dir, "private", "sections")
	want, errs := run(private)
	ents, err := os.ReadDir(private)
	if errs != "" || err != nil || len(ents) == 0 {
		t.Errorf("private cache %s: stderr %q, %d entries (%v); want entries for libc's compressed debug sections", private, errs, len(ents), err)
	}
	if fi, err := os.Stat(private); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v; want mode 0700", private, err)
	}
	if out, errs := run(private); out != want || errs != "" {
		t.Errorf("second run, from the cache: stderr %q, stdout differs: %v", errs, out != want)
	}

	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o770)
	out, errs := run(shared)
	wantErr := fmt.Sprintf("ompd-inspect: warning: section cache %s is writable by its group (mode 0770): unsafe cache; not used\n", shared)
	if out != want || errs != wantErr {
		t.Errorf("group-writable cache: stderr %q, want %q; stdout differs: %v", errs, wantErr, out != want)
	}
	if ents, _ := os.ReadDir(shared); len(ents) != 0 {
		t.Errorf("the refused cache got %d entries", len(ents))
	}

	if out, errs := run("off"); out != want || errs != "" {
		t.Errorf("cache off: stderr %q; stdout differs: %v", errs, out != want)
	}
	if _, err := os.Lstat(filepath.Join(dir, "xdg")); err == nil {
		t.Errorf("with the cache off, %s was made", filepath.Join(dir, "xdg"))
	}
	if out, errs := run(""); out != want || errs != "" {
		t.Errorf("default cache: stderr %q; stdout differs: %v", errs, out != want)
	}
	// Only the run with the default cache made it, under XDG_CACHE_HOME.
	if ents, err := os.ReadDir(filepath.Join(dir, "xdg", "ompd-inspect", "sections")); err != nil || len(ents) == 0 {
		t.Errorf("the default cache under XDG_CACHE_HOME: %v, %d entries", err, len(ents))
	}
}
