package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
)

// plantedLibrary builds, in dir, a libompd.so whose constructor creates
// the file marker: loading it at all runs the planter's code.
func plantedLibrary(t *testing.T, dir, marker string) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "planted.c")
	code := "#include <fcntl.h>\n#include <unistd.h>\n" +
		"__attribute__((constructor)) static void planted(void) {\n" +
		"  int fd = open(\"" + marker + "\", O_CREAT | O_WRONLY, 0644);\n" +
		"  if (fd >= 0) close(fd);\n}\n"
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-o", filepath.Join(dir, "libompd.so"), src).CombinedOutput(); err != nil {
		t.Fatalf("building the planted library: %v\n%s", err, out)
	}
}

// runtimeCopy makes a directory (mode 0755, root's) hold a copy of the
// OMPD-enabled libomp, and returns it; tests give it to another owner
// themselves.
func runtimeCopy(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ompd-inspect-rt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	fixture.CopyFile(t, filepath.Join(fixture.OMPDLibDir(), "libomp.so"), filepath.Join(dir, "libomp.so"))
	for _, p := range []string{dir, filepath.Join(dir, "libomp.so")} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startOn runs the nested fixture on the runtime in dir (preloaded, so
// that it takes the place of the one the fixture's RPATH names), as root
// or, with asUser, as nobody.
func startOn(t *testing.T, dir string, asUser bool) *fixture.Process {
	t.Helper()
	argv := []string{"/usr/bin/env", "LD_PRELOAD=" + filepath.Join(dir, "libomp.so"), fixture.Exe(t, "nested")}
	if asUser {
		argv = asNobody(argv...)
	}
	p := fixture.Start(t, "nested", fixture.StartOptions{Exe: argv[0], Args: argv[1:]})
	maps, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/maps")
	if err != nil || !strings.Contains(string(maps), " "+filepath.Join(dir, "libomp.so")+"\n") {
		t.Fatalf("the fixture does not run on the copied runtime %s: %v", dir, err)
	}
	return p
}

// TestDLLTrust: run as root against another user's process, the dll
// backend does not load an OMPD library that user planted beside their
// copy of the runtime, and says why in one line; a library where only root
// can write loads; --ompd-library loads what the person names.
func TestDLLTrust(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the trust test switches users and must run as root")
	}
	bin := builtCLI(t)
	marker := filepath.Join(t.TempDir(), "planted-code-ran")

	t.Run("planted by another user", func(t *testing.T) {
		dir := runtimeCopy(t)
		plantedLibrary(t, dir, marker)
		for _, p := range []string{dir, filepath.Join(dir, "libomp.so"), filepath.Join(dir, "libompd.so")} {
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		p := startOn(t, dir, true)
		pid := strconv.Itoa(p.PID)
		for _, be := range []string{"dll", "both"} {
			wantProcessError(t, bin, "ompd-inspect: the dll backend: not loading "+dir+"/libompd.so: "+dir+
				"/libompd.so is owned by uid 65534, neither root nor you (uid 0): only files that root or you own, in directories only root or you can write, are loaded from where a target points (name a library you trust with --ompd-library); "+
				"loading OMPD library libompd.so: not found in LD_LIBRARY_PATH, the directories of /etc/ld.so.conf or the default library directories; the native backend (--backend native) works without it",
				"attach", pid, "--backend", be)
			if _, err := os.Stat(marker); err == nil {
				t.Fatalf("--backend %s ran the planted library's code", be)
			}
		}
		assertRunning(t, p)
	})

	t.Run("group-writable directory", func(t *testing.T) {
		dir := runtimeCopy(t)
		plantedLibrary(t, dir, marker)
		if err := os.Chmod(dir, 0o775); err != nil {
			t.Fatal(err)
		}
		p := startOn(t, dir, false)
		wantProcessError(t, bin, "ompd-inspect: the dll backend: not loading "+dir+"/libompd.so: "+dir+
			" is writable by its group (mode 0775): only files that root or you own, in directories only root or you can write, are loaded from where a target points (name a library you trust with --ompd-library); "+
			"loading OMPD library libompd.so: not found in LD_LIBRARY_PATH, the directories of /etc/ld.so.conf or the default library directories; the native backend (--backend native) works without it",
			"attach", strconv.Itoa(p.PID), "--backend", "dll")
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the planted library's code ran")
		}
		assertRunning(t, p)
	})

	t.Run("trusted", func(t *testing.T) {
		dir := runtimeCopy(t)
		lib := filepath.Join(dir, "libompd.so")
		fixture.CopyFile(t, fixture.LibompdPath(), lib)
		if err := os.Chmod(lib, 0o755); err != nil {
			t.Fatal(err)
		}
		p := startOn(t, dir, false)
		r := reportOfProcess(t, "attach", strconv.Itoa(p.PID), "regions", "--backend", "dll")
		if r.Runtime.OMPDLibrary == nil || r.Runtime.OMPDLibrary.Path != lib {
			t.Fatalf("OMPD library %+v; want the trusted %s", r.Runtime.OMPDLibrary, lib)
		}
		if len(r.Regions) != 4 {
			t.Errorf("%d regions through the trusted library; want the fixture's 4", len(r.Regions))
		}
		assertRunning(t, p)
	})

	t.Run("named by the person", func(t *testing.T) {
		// --ompd-library is the person's own choice: the rule does not
		// apply to it (here a library in nobody's directory).
		dir := runtimeCopy(t)
		lib := filepath.Join(dir, "libompd.so")
		fixture.CopyFile(t, fixture.LibompdPath(), lib)
		for _, p := range []string{dir, lib} {
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		p := fixture.Start(t, "nested", fixture.StartOptions{})
		r := reportOfProcess(t, "attach", strconv.Itoa(p.PID), "regions", "--backend", "dll", "--ompd-library", lib)
		if r.Runtime.OMPDLibrary == nil || r.Runtime.OMPDLibrary.Path != lib || len(r.Regions) != 4 {
			t.Fatalf("OMPD library %+v with %d regions; want %s and 4", r.Runtime.OMPDLibrary, len(r.Regions), lib)
		}
		assertRunning(t, p)
	})
}
