package ptrace

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
)

// TestModuleOfAnotherNamespace runs a program in a mount namespace of its
// own where another build is mounted over its path: the path, read from
// here, names a file the process did not map. Attach must read the
// module from the mapped file (through map_files), so that the_global's
// symbol gives the address the program printed, and say why; the build
// at the path would give another address.
func TestModuleOfAnotherNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting in a mount namespace needs root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare(1) here")
	}
	mapped := buildC(t, "threads")
	path := filepath.Join(t.TempDir(), "prog")
	otherBuild(t, path)
	if a, b := globalOffset(t, mapped), globalOffset(t, path); a == b {
		t.Fatalf("the_global at %#x in both builds: the test could not tell them apart", a)
	}
	probe := exec.Command(unshare, "-m", "--propagation", "private", "mount", "--bind", mapped, path)
	if b, err := probe.CombinedOutput(); err != nil {
		t.Skipf("cannot bind-mount in a new mount namespace here: %v\n%s", err, b)
	}

	cmd := exec.Command(unshare, "-m", "--propagation", "private",
		"sh", "-c", `mount --bind "$1" "$2" && exec "$2"`, "sh", mapped, path)
	tt := startThreadsCmd(t, cmd, path)
	if tt.pid != tt.tids[0] {
		t.Fatalf("the program runs as %d, the command as %d: unshare forked", tt.tids[0], tt.pid)
	}
	p := attach(t, tt.pid, Options{})
	exe := p.Modules()[0]
	if exe.Name != path || exe.Image == nil {
		t.Fatalf("first module %q (image %v), want %q with its image", exe.Name, exe.Image != nil, path)
	}
	if !strings.HasPrefix(exe.File, fmt.Sprintf("/proc/%d/map_files/", tt.pid)) {
		t.Errorf("module read from %q, want the mapped file through /proc/%d/map_files", exe.File, tt.pid)
	}
	sym, ok := exe.Image.Symbol("the_global")
	if !ok || sym.Value+exe.Bias != tt.global {
		t.Errorf("the_global: %#x + bias %#x (found %v), want %#x, as the program printed", sym.Value, exe.Bias, ok, tt.global)
	}
	want := "module " + path + ": the file at that path is not the one the process mapped"
	var warned bool
	for _, w := range p.Warnings() {
		warned = warned || strings.HasPrefix(w, want)
	}
	if !warned {
		t.Errorf("warnings %q, want one starting %q", p.Warnings(), want)
	}
}

// otherBuild compiles at path another build of the threads program: the
// same program with data linked before its own, so that its the_global
// lies elsewhere and its build-id differs.
func otherBuild(t *testing.T, path string) {
	t.Helper()
	pad := filepath.Join(t.TempDir(), "pad.c")
	if err := os.WriteFile(pad, []byte("char pad_data[20000] = {1};\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("gcc", "-O1", "-g", "-pthread", "-o", path, pad, filepath.Join("testdata", "threads.c")).CombinedOutput(); err != nil {
		t.Fatalf("compiling the other build: %v\n%s", err, b)
	}
}

// globalOffset returns the_global's link-time address in the ELF file at
// path, read with the standard library.
func globalOffset(t *testing.T, path string) uint64 {
	t.Helper()
	for _, s := range fixture.ELFSymbols(t, path) {
		if s.Name == "the_global" {
			return s.Value
		}
	}
	t.Fatalf("%s has no the_global", path)
	return 0
}

// TestModuleOfAnotherBuildNotRoot: the file at the executable's path is
// not the one the process mapped (another file is bind-mounted over it)
// and the tracer is not root (user nobody, tracing its own process), so
// /proc/PID/map_files cannot be read: the build-id in the process's
// memory decides. The same build at the path is used quietly, and gives
// the_global where the program printed it; another build is not used,
// with a warning naming both build-ids (read here from the files' note
// sections with the standard library).
func TestModuleOfAnotherBuildNotRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to bind-mount and to run as another user")
	}
	// The tracing helper is not the target's parent.
	if scope, err := os.ReadFile(yamaScopeFile); err == nil && strings.TrimSpace(string(scope)) != "0" {
		t.Skipf("kernel.yama.ptrace_scope is %s: user nobody may not trace a process it did not start", strings.TrimSpace(string(scope)))
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc here to compile another build")
	}
	dir, helper := helperForNobody(t)
	prog, same, other := filepath.Join(dir, "prog"), filepath.Join(dir, "same"), filepath.Join(dir, "other")
	copyExecutable(t, buildC(t, "threads"), prog)
	copyExecutable(t, prog, same) // another inode, the same build
	otherBuild(t, other)
	progID, otherID := fixture.ELFBuildID(t, prog), fixture.ELFBuildID(t, other)
	if progID == otherID || progID != fixture.ELFBuildID(t, same) {
		t.Fatalf("build-ids %s (prog), %s (same), %s (other): the test needs one the same and one other", progID, fixture.ELFBuildID(t, same), otherID)
	}
	nobody := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	for _, c := range []struct {
		name, over string
		want       func(tt *threadsTarget) []string
	}{
		{"same build", same, func(tt *threadsTarget) []string { return []string{fmt.Sprintf("symbol %#x", tt.global)} }},
		{"other build", other, func(*threadsTarget) []string {
			return []string{"no image", "warning: module " + prog + ": the file at that path is another build (build-id " + otherID +
				") than the process mapped (build-id " + progID + ", read from its memory); its symbols and code are not used"}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(prog)
			cmd.SysProcAttr = nobody
			tt := startThreadsCmd(t, cmd, prog)
			if b, err := exec.Command("mount", "--bind", c.over, prog).CombinedOutput(); err != nil {
				t.Skipf("cannot bind-mount here: %v\n%s", err, b)
			}
			t.Cleanup(func() {
				if b, err := exec.Command("umount", prog).CombinedOutput(); err != nil {
					t.Errorf("umount %s: %v\n%s", prog, err, b)
				}
			})
			h := exec.Command(helper, "-test.run=^$")
			h.Env = append(os.Environ(), helperEnv+"=module-symbol", helperPIDEnv+"="+strconv.Itoa(tt.pid))
			h.Dir = dir
			h.SysProcAttr = nobody
			out, err := h.CombinedOutput()
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				// Only what concerns the executable: other modules are
				// the host's own files.
				if !strings.HasPrefix(l, "warning: ") || strings.Contains(l, "module "+prog+":") {
					got = append(got, l)
				}
			}
			if want := c.want(tt); !slices.Equal(got, want) {
				t.Errorf("the helper printed\n%q\nwant\n%q", got, want)
			}
			waitRunning(t, tt.pid)
		})
	}
}
