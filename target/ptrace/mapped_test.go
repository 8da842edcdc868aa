package ptrace

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	// Another build at the path: the same program with data linked before
	// its own, so that its the_global lies elsewhere.
	dir := t.TempDir()
	pad := filepath.Join(dir, "pad.c")
	if err := os.WriteFile(pad, []byte("char pad_data[20000] = {1};\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "prog")
	if b, err := exec.Command("gcc", "-O1", "-g", "-pthread", "-o", path, pad, filepath.Join("testdata", "threads.c")).CombinedOutput(); err != nil {
		t.Fatalf("compiling the other build: %v\n%s", err, b)
	}
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
