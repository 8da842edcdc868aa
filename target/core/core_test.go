package core

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	telf "github.com/ompd-inspect/ompd-inspect/target/elf"
)

// progInfo is what testdata/threads.c prints about itself.
type progInfo struct {
	pid      int
	global   uint64 // address of answer_global
	value    uint64 // its value
	greeting uint64 // address of greeting (in .rodata)
	self     map[int]uint64
	worker   map[int]int // tid -> worker number (1..3); main is absent
	mainTID  int
}

// buildProg compiles testdata/threads.c with -DVARIANT=variant into
// dir/name. It skips the test when gcc is missing.
func buildProg(t *testing.T, dir, name string, variant int) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skipf("gcc not installed: %v", err)
	}
	src, err := filepath.Abs("testdata/threads.c")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command("gcc", "-g", "-O0", "-pthread", fmt.Sprintf("-DVARIANT=%d", variant), "-o", out, src)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	return out
}

// readInfo parses the program's output up to "ready".
func readInfo(t *testing.T, r io.Reader) *progInfo {
	t.Helper()
	info := &progInfo{self: map[int]uint64{}, worker: map[int]int{}}
	sc := bufio.NewScanner(r)
	num := func(s string) uint64 {
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("parsing %q: %v", s, err)
		}
		return v
	}
	for sc.Scan() {
		line := sc.Text()
		var who, a, b string
		switch {
		case line == "ready":
			if len(info.self) != 4 {
				t.Fatalf("program reported %d threads, want 4", len(info.self))
			}
			return info
		case strings.HasPrefix(line, "pid="):
			info.pid = int(num(strings.TrimPrefix(line, "pid=")))
		case strings.HasPrefix(line, "global="):
			if _, err := fmt.Sscanf(line, "global=%s value=%s", &a, &b); err != nil {
				t.Fatalf("parsing %q: %v", line, err)
			}
			info.global, info.value = num(a), num(b)
		case strings.HasPrefix(line, "greeting="):
			info.greeting = num(strings.TrimPrefix(line, "greeting="))
		case strings.HasPrefix(line, "thread "):
			if _, err := fmt.Sscanf(line, "thread %s tid=%s self=%s", &who, &a, &b); err != nil {
				t.Fatalf("parsing %q: %v", line, err)
			}
			tid := int(num(a))
			info.self[tid] = num(b)
			if who == "main" {
				info.mainTID = tid
			} else {
				info.worker[tid] = int(num(strings.TrimPrefix(who, "w")))
			}
		}
	}
	t.Fatalf("program ended before \"ready\": %v", sc.Err())
	return nil
}

// corePatternFile is the kernel's core file name pattern.
const corePatternFile = "/proc/sys/kernel/core_pattern"

// lockCorePattern takes the exclusive lock that serializes changes of
// core_pattern between test binaries (internal/fixture uses the same
// file), and returns its release.
func lockCorePattern(t *testing.T) func() {
	t.Helper()
	path := filepath.Join(os.TempDir(), "ompd-inspect-core-pattern.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("opening lock file: %v", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		t.Fatalf("locking %s: %v", path, err)
	}
	return func() { f.Close() }
}

// useCorePattern makes the kernel write cores as "core" in the crashing
// process's directory and returns the function that restores the old
// pattern (callable more than once). It skips the test when the pattern
// cannot be read or set.
func useCorePattern(t *testing.T) func() {
	t.Helper()
	old, err := os.ReadFile(corePatternFile)
	if err != nil {
		t.Skipf("cannot read %s: %v", corePatternFile, err)
	}
	cur := strings.TrimRight(string(old), "\n")
	if cur == "core" {
		return func() {}
	}
	if err := os.WriteFile(corePatternFile, []byte("core\n"), 0o644); err != nil {
		t.Skipf("core_pattern is %q and cannot be set to \"core\": %v", cur, err)
	}
	done := false
	return func() {
		if done {
			return
		}
		done = true
		if err := os.WriteFile(corePatternFile, []byte(cur+"\n"), 0o644); err != nil {
			t.Errorf("restoring %s to %q: %v", corePatternFile, cur, err)
		}
	}
}

// kernelCore runs exe with "abort" under "ulimit -c unlimited" in a fresh
// directory and returns the core the kernel wrote. filter, when not
// empty, is written to the process's coredump_filter first. core_pattern
// is "core" (set under the shared lock, restored) while the program runs.
func kernelCore(t *testing.T, exe, filter string) (string, *progInfo) {
	t.Helper()
	dir := t.TempDir()
	script := `ulimit -c unlimited || exit 99
if [ -n "$1" ]; then echo "$1" > /proc/self/coredump_filter || exit 98; fi
exec "$0" abort`
	cmd := exec.Command("sh", "-c", script, exe, filter)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}

	unlock := lockCorePattern(t)
	defer unlock()
	restore := useCorePattern(t)
	defer restore()
	t.Cleanup(restore)

	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	info := readInfo(t, out)
	io.Copy(io.Discard, out)
	err = cmd.Wait()
	restore()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("program exited with %v, want SIGABRT", err)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGABRT {
		t.Fatalf("program ended with %v, want SIGABRT", ws)
	}
	if !ws.CoreDump() {
		t.Skipf("the kernel wrote no core (rlimit?); status %v", ws)
	}
	for _, name := range []string{"core", "core." + strconv.Itoa(info.pid)} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return filepath.Join(dir, name), info
		}
	}
	t.Fatalf("the kernel reports a core dump but %s holds neither core nor core.%d", dir, info.pid)
	return "", nil
}

// gcoreOf starts exe (without "abort"), waits for it to be ready and
// writes a core with gdb's gcore. The process is killed in cleanup.
func gcoreOf(t *testing.T, exe string) (string, *progInfo) {
	t.Helper()
	if _, err := exec.LookPath("gcore"); err != nil {
		t.Skipf("gcore not installed: %v", err)
	}
	dir := t.TempDir()
	cmd := exec.Command(exe)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	info := readInfo(t, out)
	go io.Copy(io.Discard, out)
	prefix := filepath.Join(dir, "gcore")
	g := exec.Command("gcore", "-o", prefix, strconv.Itoa(cmd.Process.Pid))
	if b, err := g.CombinedOutput(); err != nil {
		t.Fatalf("gcore: %v\n%s", err, b)
	}
	name := prefix + "." + strconv.Itoa(cmd.Process.Pid)
	if _, err := os.Stat(name); err != nil {
		t.Fatalf("gcore wrote no %s: %v", name, err)
	}
	return name, info
}

func mustOpenCore(t *testing.T, path string, opts Options) *Core {
	t.Helper()
	c, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// buildID returns the build-id of an ELF file.
func buildID(t *testing.T, path string) string {
	t.Helper()
	im, err := telf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	if im.BuildID() == "" {
		t.Fatalf("%s has no build-id", path)
	}
	return im.BuildID()
}

// copyFile copies src to dst, or its first n bytes when n >= 0.
func copyFile(t testing.TB, src, dst string, n int64) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	var r io.Reader = in
	if n >= 0 {
		r = io.LimitReader(in, n)
	}
	if _, err := io.Copy(out, r); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
