package target_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/core"
	"github.com/ompd-inspect/ompd-inspect/target/ptrace"
)

// gdbTimeout bounds one run of gdb or gcore.
const gdbTimeout = 5 * time.Minute

// gdbTLSScript prints, for every thread of gdb's inferior and every name in
// VARS, one line
//
//	tls <lwp> <name> <address> <int value>
//
// or, when gdb cannot resolve it in that thread,
//
//	tlserr <lwp> <name> <gdb's message>
//
// and for every name in SYMS one line "sym <name> <address>". gdb finds a
// thread-local variable through glibc's libthread_db, independently of
// ompd-inspect.
const gdbTLSScript = `
import gdb

VARS = %s
SYMS = %s

for name in SYMS:
    a = int(gdb.parse_and_eval("(unsigned long)&" + name))
    print("sym %%s %%#x" %% (name, a))

for th in sorted(gdb.selected_inferior().threads(), key=lambda th: th.num):
    th.switch()
    for name in VARS:
        try:
            p = gdb.parse_and_eval("(int *)&" + name)
            a = int(p.cast(gdb.lookup_type("unsigned long")))
            v = int(p.dereference())
            print("tls %%d %%s %%#x %%d" %% (th.ptid[1], name, a, v))
        except Exception as e:
            print("tlserr %%d %%s %%s" %% (th.ptid[1], name, str(e).replace("\n", " ")))
`

// gdbTLS is gdb's answer for one thread-local variable in one thread.
type gdbTLS struct {
	addr uint64
	val  int64
	err  string // gdb's message when it could not resolve the variable
}

func (a gdbTLS) String() string {
	if a.err != "" {
		return "error: " + a.err
	}
	return fmt.Sprintf("%#x (value %d)", a.addr, a.val)
}

// gdbView is what gdb says about a target.
type gdbView struct {
	tls  map[int]map[string]gdbTLS // by thread id, then by name
	syms map[string]uint64
	out  string
}

func pyList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// runGDB runs gdb in batch mode on args (-p PID, or EXE CORE) with
// gdbTLSScript and parses its answer.
func runGDB(t *testing.T, vars, syms []string, args ...string) gdbView {
	t.Helper()
	script := filepath.Join(t.TempDir(), "tls.py")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(gdbTLSScript, pyList(vars), pyList(syms))), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), gdbTimeout)
	defer cancel()
	full := append([]string{"-batch", "-nx"}, args...)
	full = append(full, "-ex", "set width unlimited", "-x", script)
	cmd := exec.CommandContext(ctx, "gdb", full...)
	cmd.WaitDelay = 10 * time.Second
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("gdb %s: %v\n%s", strings.Join(full, " "), err, out)
	}
	v := gdbView{tls: map[int]map[string]gdbTLS{}, syms: map[string]uint64{}, out: out}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "sym":
			if len(f) != 3 {
				t.Fatalf("gdb: cannot parse %q", line)
			}
			v.syms[f[1]] = parseHex(t, f[2])
		case "tls", "tlserr":
			if len(f) < 3 {
				t.Fatalf("gdb: cannot parse %q", line)
			}
			tid, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("gdb: %q: %v", line, err)
			}
			var a gdbTLS
			if f[0] == "tls" {
				if len(f) != 5 {
					t.Fatalf("gdb: cannot parse %q", line)
				}
				a.addr = parseHex(t, f[3])
				if a.val, err = strconv.ParseInt(f[4], 10, 64); err != nil {
					t.Fatalf("gdb: %q: %v", line, err)
				}
			} else {
				a.err = strings.Join(f[3:], " ")
			}
			if v.tls[tid] == nil {
				v.tls[tid] = map[string]gdbTLS{}
			}
			v.tls[tid][f[2]] = a
		}
	}
	if len(v.tls) == 0 {
		t.Fatalf("gdb %s: no threads\n%s", strings.Join(full, " "), out)
	}
	return v
}

func parseHex(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	if err != nil {
		t.Fatalf("parsing %q: %v", s, err)
	}
	return n
}

// readInt32 reads a 4-byte int of the target.
func readInt32(t *testing.T, tg target.Target, addr uint64) int32 {
	t.Helper()
	var b [4]byte
	if err := tg.ReadMemory(addr, b[:]); err != nil {
		t.Fatalf("reading 4 bytes at %#x: %v", addr, err)
	}
	return int32(binary.LittleEndian.Uint32(b[:]))
}

// sameThreads asserts that gdb and the target list the same threads.
func sameThreads(t *testing.T, what string, tg target.Target, g gdbView) {
	t.Helper()
	var ours []int
	for _, th := range tg.Threads() {
		ours = append(ours, th.TID)
		if _, ok := g.tls[th.TID]; !ok {
			t.Errorf("%s: gdb does not show thread %d\n%s", what, th.TID, g.out)
		}
	}
	if len(g.tls) != len(ours) {
		t.Errorf("%s: gdb shows %d threads, the target %d (%v)\n%s", what, len(g.tls), len(ours), ours, g.out)
	}
}

// noChildrenLeft registers a cleanup, run after every other cleanup of the
// test, that fails the test if it left a child process behind.
func noChildrenLeft(t *testing.T) {
	t.Cleanup(func() {
		if kids := fixture.Children(os.Getpid()); len(kids) > 0 {
			t.Errorf("processes left behind: %v", kids)
		}
	})
}

// tracedThreads returns the threads of pid that are stopped or traced.
func tracedThreads(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		stopped := false
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimSpace(v)
			switch k {
			case "State":
				stopped = stopped || strings.HasPrefix(v, "T") || strings.HasPrefix(v, "t")
			case "TracerPid":
				stopped = stopped || v != "0"
			}
		}
		if stopped {
			tid, _ := strconv.Atoi(e.Name())
			out = append(out, tid)
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// __kmp_gtid in the nested fixture: libomp is DT_NEEDED, so its block is in
// static TLS.

// checkGtids asserts that LookupTLSSymbol finds __kmp_gtid where gdb does
// in every thread, that it holds what gdb reads there, a small
// non-negative gtid distinct in each thread, 0 in the initial thread.
func checkGtids(t *testing.T, what string, tg target.Target, g gdbView, initial int) {
	t.Helper()
	sameThreads(t, what, tg, g)
	seen := map[int32]int{}
	threads := tg.Threads()
	for i := range threads {
		th := &threads[i]
		want, ok := g.tls[th.TID]["__kmp_gtid"]
		if !ok || want.err != "" {
			t.Errorf("%s: gdb has no __kmp_gtid for thread %d: %v\n%s", what, th.TID, want, g.out)
			continue
		}
		addr, err := target.LookupTLSSymbol(tg, th, "__kmp_gtid", nil)
		if err != nil {
			t.Errorf("%s: thread %d: %v", what, th.TID, err)
			continue
		}
		if addr != want.addr {
			t.Errorf("%s: thread %d: &__kmp_gtid = %#x, gdb says %#x", what, th.TID, addr, want.addr)
			continue
		}
		gtid := readInt32(t, tg, addr)
		if int64(gtid) != want.val {
			t.Errorf("%s: thread %d: __kmp_gtid = %d, gdb reads %d", what, th.TID, gtid, want.val)
		}
		if gtid < 0 || gtid >= 64 {
			t.Errorf("%s: thread %d: __kmp_gtid = %d, want a gtid in [0, 64)", what, th.TID, gtid)
		}
		if th.TID == initial && gtid != 0 {
			t.Errorf("%s: the initial thread %d has __kmp_gtid %d, want 0", what, th.TID, gtid)
		}
		if other, dup := seen[gtid]; dup {
			t.Errorf("%s: threads %d and %d both have __kmp_gtid %d", what, other, th.TID, gtid)
		}
		seen[gtid] = th.TID

		// TLSAddress with the symbol's module and offset is the same.
		s, err := target.LookupSymbol(tg, "__kmp_gtid", nil)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !s.TLS || !strings.HasSuffix(s.Module.Name, "/libomp.so") {
			t.Fatalf("%s: __kmp_gtid = %+v, want a TLS symbol of libomp.so", what, s)
		}
		if a, err := target.TLSAddress(tg, th, s.Module, s.Addr); err != nil || a != addr {
			t.Errorf("%s: thread %d: TLSAddress(libomp, %#x) = %#x, %v; want %#x", what, th.TID, s.Addr, a, err, addr)
		}
	}
	if len(seen) != len(threads) {
		t.Errorf("%s: gtids %v for %d threads", what, seen, len(threads))
	}
}

// checkTLSErrors asserts the errors for a module without PT_TLS and for
// an offset outside the block, and that an ordinary symbol resolves to
// its address.
func checkTLSErrors(t *testing.T, what string, tg target.Target, g gdbView) {
	t.Helper()
	th := &tg.Threads()[0]
	exe := tg.Modules()[0]
	if _, ok := exe.Image.TLS(); ok {
		t.Fatalf("%s: %s has a PT_TLS segment; the test wants a module without", what, exe.Name)
	}
	_, err := target.TLSAddress(tg, th, exe, 0)
	want := fmt.Sprintf("TLS offset 0x0 of %s for thread %d: %s has no PT_TLS segment: it defines no thread-local storage", exe.Name, th.TID, exe.Name)
	if err == nil || err.Error() != want {
		t.Errorf("%s: TLSAddress(executable) error\n%v\nwant\n%s", what, err, want)
	}

	s, err := target.LookupSymbol(tg, "__kmp_gtid", nil)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	seg, _ := s.Module.Image.TLS()
	_, err = target.TLSAddress(tg, th, s.Module, seg.Memsz)
	want = fmt.Sprintf("TLS offset %#x of %s for thread %d: offset %#x lies beyond the %d-byte TLS block of %s",
		seg.Memsz, s.Module.Name, th.TID, seg.Memsz, seg.Memsz, s.Module.Name)
	if err == nil || err.Error() != want {
		t.Errorf("%s: TLSAddress(libomp, Memsz) error\n%v\nwant\n%s", what, err, want)
	}

	// A thread-local symbol looked up in a module that lacks it.
	_, err = target.LookupTLSSymbol(tg, th, "__kmp_gtid", exe)
	want = fmt.Sprintf("TLS of __kmp_gtid for thread %d: symbol __kmp_gtid: not found in any loaded module", th.TID)
	if err == nil || err.Error() != want {
		t.Errorf("%s: LookupTLSSymbol(__kmp_gtid in the executable) error\n%v\nwant\n%s", what, err, want)
	}

	// An ordinary symbol: its address, whatever the thread.
	main, err := target.LookupSymbol(tg, "main", nil)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if main.TLS || main.Addr != g.syms["main"] {
		t.Fatalf("%s: main = %+v, gdb says %#x", what, main, g.syms["main"])
	}
	if m, err := target.LookupSymbol(tg, "main", exe); err != nil || m.Addr != main.Addr || m.Module != exe {
		t.Errorf("%s: LookupSymbol(main, the executable) = %+v, %v; want %#x in %s", what, m, err, main.Addr, exe.Name)
	}
	for _, th := range []*target.Thread{nil, th} {
		if a, err := target.LookupTLSSymbol(tg, th, "main", nil); err != nil || a != main.Addr {
			t.Errorf("%s: LookupTLSSymbol(main) = %#x, %v; want %#x", what, a, err, main.Addr)
		}
	}
}

// TestTLSNestedMatchesGDB resolves libomp's __kmp_gtid in every thread of
// the nested fixture, live, from a gcore core and from a kernel core, and
// compares with gdb.
func TestTLSNestedMatchesGDB(t *testing.T) {
	noChildrenLeft(t)
	vars, syms := []string{"__kmp_gtid"}, []string{"main"}
	p := fixture.Start(t, "nested", fixture.StartOptions{})
	initial := p.Ready.Int(t, "initial")

	t.Run("live", func(t *testing.T) {
		// gdb first: one tracer at a time.
		g := runGDB(t, vars, syms, "-p", strconv.Itoa(p.PID))
		if stopped := p.StoppedThreads(t); len(stopped) > 0 {
			t.Fatalf("after gdb, threads %v are stopped or traced", stopped)
		}
		tg, err := ptrace.Attach(p.PID, ptrace.Options{})
		if err != nil {
			t.Fatalf("Attach: %v", err)
		}
		func() {
			defer func() {
				if err := tg.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}()
			checkGtids(t, "live", tg, g, initial)
			checkTLSErrors(t, "live", tg, g)
		}()
		if stopped := p.StoppedThreads(t); len(stopped) > 0 {
			t.Errorf("after Close, threads %v are stopped or traced", stopped)
		}
	})
	t.Run("gcore", func(t *testing.T) {
		path := p.Gcore(t)
		checkCore(t, "gcore", path, fixture.Exe(t, "nested"), vars, syms, initial)
	})
	t.Run("kernel", func(t *testing.T) {
		path, ready := fixture.KernelCore(t, "nested", fixture.StartOptions{})
		checkCore(t, "kernel core", path, fixture.Exe(t, "nested"), vars, syms, ready.Int(t, "initial"))
	})
}

func checkCore(t *testing.T, what, path, exe string, vars, syms []string, initial int) {
	t.Helper()
	g := runGDB(t, vars, syms, exe, path)
	c, err := core.Open(path, core.Options{})
	if err != nil {
		t.Fatalf("core.Open: %v", err)
	}
	defer c.Close()
	checkGtids(t, what, c, g, initial)
	checkTLSErrors(t, what, c, g)
}

// ---------------------------------------------------------------------------
// A library loaded by dlopen: its block is dynamic (found through the DTV)
// unless glibc places it in static TLS.

// dlopenMain is a program that dlopens the library argv[1] and ends with
// four threads in pause(): "main" and "touch" have accessed the library's
// thread-local variable, "idle" (created after dlopen) has not, nor has
// "early" (created before dlopen). Each thread sets the executable's own
// thread-local exe_tls to 10 + its role, and touch sets the library's
// dyn_var to 1000 + its role.
const dlopenMain = `#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { MAIN, EARLY, TOUCH, IDLE, NROLES };

__thread int exe_tls = 1;

static pthread_barrier_t created, ready;
static int (*touch)(int);
static pid_t tids[NROLES];

static void *run(void *arg) {
	int role = (int)(long)arg;
	tids[role] = (pid_t)syscall(SYS_gettid);
	exe_tls = 10 + role;
	if (role == EARLY)
		pthread_barrier_wait(&created);
	if (role == TOUCH)
		touch(role);
	pthread_barrier_wait(&ready);
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv) {
	pthread_t th;
	if (argc != 2)
		return 2;
	pthread_barrier_init(&created, NULL, 2);
	pthread_barrier_init(&ready, NULL, NROLES);
	tids[MAIN] = (pid_t)syscall(SYS_gettid);
	exe_tls = 10 + MAIN;
	pthread_create(&th, NULL, run, (void *)(long)EARLY);
	pthread_barrier_wait(&created);
	void *h = dlopen(argv[1], RTLD_NOW);
	if (h == NULL) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 1;
	}
	touch = (int (*)(int))dlsym(h, "touch");
	if (touch == NULL) {
		fprintf(stderr, "dlsym: %s\n", dlerror());
		return 1;
	}
	pthread_create(&th, NULL, run, (void *)(long)TOUCH);
	pthread_create(&th, NULL, run, (void *)(long)IDLE);
	touch(MAIN);
	pthread_barrier_wait(&ready);
	printf("READY main=%d early=%d touch=%d idle=%d\n", tids[MAIN], tids[EARLY], tids[TOUCH], tids[IDLE]);
	fflush(stdout);
	for (;;)
		pause();
}
`

// dlopenLib is the library: a block of 4 + 256 bytes of thread-local
// storage.
const dlopenLib = `__thread int dyn_var = 7;
__thread char dyn_pad[256];

int touch(int role) {
	dyn_var = 1000 + role;
	dyn_pad[0] = 1;
	return dyn_var;
}
`

// buildDlopen compiles the program and the library (with extra flags)
// into a temporary directory; it skips the test without gcc.
func buildDlopen(t *testing.T, libFlags ...string) (exe, lib string) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skipf("gcc not installed: %v", err)
	}
	dir := t.TempDir()
	for name, src := range map[string]string{"main.c": dlopenMain, "lib.c": dlopenLib} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exe, lib = filepath.Join(dir, "dlmain"), filepath.Join(dir, "libdyn.so")
	for _, args := range [][]string{
		{"-g", "-O1", "-Wall", "-pthread", "-o", exe, filepath.Join(dir, "main.c"), "-ldl"},
		append([]string{"-g", "-O1", "-Wall", "-shared", "-fPIC", "-o", lib, filepath.Join(dir, "lib.c")}, libFlags...),
	} {
		if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	return exe, lib
}

// dlopenProc is a running dlopen program.
type dlopenProc struct {
	pid   int
	roles map[string]int // role -> tid
}

// startDlopen runs exe on lib, waits for its READY line and kills and
// reaps it at cleanup.
func startDlopen(t *testing.T, exe, lib string) *dlopenProc {
	t.Helper()
	cmd := exec.Command(exe, lib)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var line string
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("%s exited before READY: %s", exe, stderr.String())
		}
		line = l
	case <-time.After(fixture.ReadyTimeout):
		t.Fatalf("%s: no READY line within %v", exe, fixture.ReadyTimeout)
	}
	f := strings.Fields(line)
	if len(f) != 5 || f[0] != "READY" {
		t.Fatalf("%s: unexpected line %q", exe, line)
	}
	p := &dlopenProc{pid: cmd.Process.Pid, roles: map[string]int{}}
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		tid, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("%s: READY %q: %v", exe, kv, err)
		}
		p.roles[k] = tid
	}
	// Wait until every thread sleeps in pause(), past the barrier.
	deadline := time.Now().Add(fixture.ReadyTimeout)
	for _, tid := range p.roles {
		for {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", p.pid, tid))
			if err != nil {
				t.Fatal(err)
			}
			s := string(b)
			if i := strings.LastIndexByte(s, ')'); i > 0 && i+2 < len(s) && s[i+2] == 'S' {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: thread %d does not sleep: %s", exe, tid, s)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return p
}

var roleNum = map[string]int64{"main": 0, "early": 1, "touch": 2, "idle": 3}

// notAllocatedCause is why a dynamic block does not exist in the threads
// that never accessed it: the DTV of a thread created before dlopen is
// older than the library, a thread created after has the DTV entry
// TLS_DTV_UNALLOCATED.
var notAllocatedCause = map[string]string{
	"early": "predates",
	"idle":  "is 0xffffffffffffffff",
}

// checkDlopen compares, in every thread, the addresses of exe_tls (static
// TLS of the executable) and dyn_var (the dlopened library) with gdb's,
// and their values with what the program stored. allocated lists the
// roles whose dyn_var exists; in the others LookupTLSSymbol must fail with
// ErrTLSNotAllocated, and gdb must fail too.
func checkDlopen(t *testing.T, what string, tg target.Target, g gdbView, p *dlopenProc, allocated map[string]bool) {
	t.Helper()
	sameThreads(t, what, tg, g)
	role := map[int]string{}
	for r, tid := range p.roles {
		role[tid] = r
	}
	threads := tg.Threads()
	if len(threads) != len(roleNum) {
		t.Fatalf("%s: %d threads, want %d", what, len(threads), len(roleNum))
	}
	for i := range threads {
		th := &threads[i]
		r, ok := role[th.TID]
		if !ok {
			t.Fatalf("%s: thread %d has no role (%v)", what, th.TID, p.roles)
		}

		want := g.tls[th.TID]["exe_tls"]
		addr, err := target.LookupTLSSymbol(tg, th, "exe_tls", nil)
		switch {
		case err != nil:
			t.Errorf("%s: %s thread %d: %v", what, r, th.TID, err)
		case want.err != "" || addr != want.addr:
			t.Errorf("%s: %s thread %d: &exe_tls = %#x, gdb says %v", what, r, th.TID, addr, want)
		case int64(readInt32(t, tg, addr)) != 10+roleNum[r]:
			t.Errorf("%s: %s thread %d: exe_tls = %d, want %d", what, r, th.TID, readInt32(t, tg, addr), 10+roleNum[r])
		}

		want = g.tls[th.TID]["dyn_var"]
		addr, err = target.LookupTLSSymbol(tg, th, "dyn_var", nil)
		if !allocated[r] {
			if !errors.Is(err, target.ErrTLSNotAllocated) {
				t.Errorf("%s: %s thread %d: &dyn_var = %#x, %v; want ErrTLSNotAllocated", what, r, th.TID, addr, err)
			} else if !strings.HasPrefix(err.Error(), fmt.Sprintf("TLS of dyn_var for thread %d: ", th.TID)) || !strings.Contains(err.Error(), "libdyn.so") {
				t.Errorf("%s: %s thread %d: error %q does not name the variable, the thread and the library", what, r, th.TID, err)
			}
			if cause := notAllocatedCause[r]; err != nil && !strings.Contains(err.Error(), cause) {
				t.Errorf("%s: %s thread %d: error %q does not say %q", what, r, th.TID, err, cause)
			}
			if want.err == "" {
				t.Errorf("%s: %s thread %d: gdb finds dyn_var at %#x", what, r, th.TID, want.addr)
			}
			continue
		}
		switch {
		case err != nil:
			t.Errorf("%s: %s thread %d: %v", what, r, th.TID, err)
		case want.err != "" || addr != want.addr:
			t.Errorf("%s: %s thread %d: &dyn_var = %#x, gdb says %v", what, r, th.TID, addr, want)
		}
		if err != nil {
			continue
		}
		val := int64(readInt32(t, tg, addr))
		wantVal := int64(7) // the initial value
		if r == "main" || r == "touch" {
			wantVal = 1000 + roleNum[r]
		}
		if val != wantVal {
			t.Errorf("%s: %s thread %d: dyn_var = %d, want %d", what, r, th.TID, val, wantVal)
		}
	}
}

// TestTLSDlopenMatchesGDB resolves the thread-local variables of a
// program and of a library it dlopens, live and from a gcore core, and
// compares with gdb. With the traditional TLS dialect the library's block
// is dynamic: it exists only in the threads that accessed it. With TLS
// descriptors (-mtls-dialect=gnu2) glibc places it in the surplus of static
// TLS at dlopen, so it exists in every thread, those created before too.
func TestTLSDlopenMatchesGDB(t *testing.T) {
	noChildrenLeft(t)
	vars, syms := []string{"exe_tls", "dyn_var"}, []string{"main"}
	for _, tc := range []struct {
		name      string
		flags     []string
		allocated map[string]bool
	}{
		{"dynamic", nil, map[string]bool{"main": true, "touch": true}},
		{"static", []string{"-mtls-dialect=gnu2"}, map[string]bool{"main": true, "touch": true, "idle": true, "early": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exe, lib := buildDlopen(t, tc.flags...)
			p := startDlopen(t, exe, lib)
			t.Run("live", func(t *testing.T) {
				g := runGDB(t, vars, syms, "-p", strconv.Itoa(p.pid))
				tg, err := ptrace.Attach(p.pid, ptrace.Options{})
				if err != nil {
					t.Fatalf("Attach: %v", err)
				}
				func() {
					defer func() {
						if err := tg.Close(); err != nil {
							t.Errorf("Close: %v", err)
						}
					}()
					checkDlopen(t, "live", tg, g, p, tc.allocated)
				}()
				if stopped := tracedThreads(t, p.pid); len(stopped) > 0 {
					t.Errorf("after Close, threads %v are stopped or traced", stopped)
				}
			})
			t.Run("gcore", func(t *testing.T) {
				prefix := filepath.Join(t.TempDir(), "gcore")
				ctx, cancel := context.WithTimeout(context.Background(), gdbTimeout)
				defer cancel()
				cmd := exec.CommandContext(ctx, "gcore", "-o", prefix, strconv.Itoa(p.pid))
				cmd.WaitDelay = 10 * time.Second
				if b, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("gcore: %v\n%s", err, b)
				}
				if stopped := tracedThreads(t, p.pid); len(stopped) > 0 {
					t.Fatalf("after gcore, threads %v are stopped or traced", stopped)
				}
				path := prefix + "." + strconv.Itoa(p.pid)
				g := runGDB(t, vars, syms, exe, path)
				c, err := core.Open(path, core.Options{})
				if err != nil {
					t.Fatalf("core.Open: %v", err)
				}
				defer c.Close()
				checkDlopen(t, "gcore", c, g, p, tc.allocated)
			})
		})
	}
}
