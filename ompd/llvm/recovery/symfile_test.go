package recovery

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
)

// writeDebugFile writes the recovered symbols of lib as DIR/.build-id/xx/rest.debug.
func writeDebugFile(t *testing.T, lib string) (dir string, k *Knowledge) {
	t.Helper()
	im := mustOpen(t, lib)
	k, err := Recover(im)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	id := im.BuildID()
	p := filepath.Join(dir, ".build-id", id[:2], id[2:]+".debug")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := im.WriteSymbolFile(f, k.FileSymbols(im)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, k
}

// TestSymbolFileGDB: gdb, given the written file's directory as its
// debug-file-directory, finds every recovered symbol at the recovered
// address in the stripped runtime.
func TestSymbolFileGDB(t *testing.T) {
	lib := fixture.StockLibomp(19)
	dir, k := writeDebugFile(t, lib)
	names := []string{"ompd_state", "ompd_dll_locations", "__kmp_threads", "__kmp_nested_nth", "ompd_sizeof__kmp_info_t", "ompd_bp_parallel_begin", "__kmp_gtid"}
	args := []string{"-nx", "-batch", "-iex", "set debug-file-directory " + dir}
	for _, n := range names {
		args = append(args, "-ex", "info address "+n)
	}
	out, err := exec.Command("gdb", append(args, lib)...).CombinedOutput()
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, out)
	}
	for _, n := range names {
		addr := k.Symbols[n] // __kmp_gtid: offset 0 of the TLS block
		want := fmt.Sprintf(`Symbol "%s" is at %#x in a file compiled without debugging.`, n, addr)
		if !strings.Contains(string(out), want) {
			t.Errorf("gdb does not say %q:\n%s", want, out)
		}
	}
}
