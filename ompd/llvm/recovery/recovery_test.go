package recovery

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
	"github.com/ompd-inspect/ompd-inspect/target/sectioncache"
)

// wantSymbols are the names every Debian libomp must give.
var wantSymbols = []string{
	"ompd_init", "ompd_dll_locations", "ompd_state", "ompd_env_block", "ompd_env_block_size",
	"ompd_dll_locations_valid", "ompd_bp_parallel_begin", "ompd_bp_parallel_end", "ompd_bp_task_begin",
	"ompd_bp_task_end", "ompd_bp_thread_begin", "ompd_bp_thread_end",
	"__kmp_threads", "__kmp_threads_capacity", "__kmp_max_task_priority", "__kmp_omp_cancellation",
	"__kmp_stksize", "__kmp_avail_proc", "__kmp_affinity_format", "__kmp_display_affinity",
	"__kmp_nested_nth", "__kmp_nested_proc_bind", "__kmp_max_nth", "__kmp_tool", "__kmp_tool_libraries",
	"__kmp_tool_verbose_init", "__kmp_openmp_version", "__kmp_i_lock_table",
	"__kmp_join_barrier", "__kmp_fork_barrier", "__kmp_join_call", "__kmp_launch_thread",
}

// symtabNames are the names of C++ functions in the OMPD build's symbol
// table (mangled).
var symtabNames = map[string]string{
	"ompd_init":          "_Z9ompd_initv",
	"__kmp_fork_barrier": "_Z18__kmp_fork_barrierii",
	"__kmp_join_barrier": "_Z18__kmp_join_barrieri",
}

func mustOpen(t *testing.T, path string) *elf.Image {
	t.Helper()
	im, err := elf.Open(path)
	if err != nil {
		t.Fatalf("opening %s (scripts/setup.sh provides it): %v", path, err)
	}
	t.Cleanup(func() { im.Close() })
	return im
}

// procMem reads a running process's memory.
type procMem struct {
	t    *testing.T
	f    *os.File
	bias uint64
}

// openProc opens pid's memory, with the load bias of the module whose
// file is lib.
func openProc(t *testing.T, pid int, lib string) *procMem {
	t.Helper()
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var bias uint64
	found := false
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 6 && f[5] == lib && f[2] == "00000000" {
			start, _, _ := strings.Cut(f[0], "-")
			bias, _ = strconv.ParseUint(start, 16, 64)
			found = true
			break
		}
	}
	if !found {
		t.Fatalf("process %d does not map %s", pid, lib)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &procMem{t: t, f: f, bias: bias}
}

func (m *procMem) read(addr uint64, n int) []byte {
	m.t.Helper()
	b := make([]byte, n)
	if _, err := m.f.ReadAt(b, int64(addr)); err != nil {
		m.t.Fatalf("reading %d bytes at %#x: %v", n, addr, err)
	}
	return b
}

func (m *procMem) u64(addr uint64) uint64 { return binary.LittleEndian.Uint64(m.read(addr, 8)) }
func (m *procMem) i32(addr uint64) int64 {
	return int64(int32(binary.LittleEndian.Uint32(m.read(addr, 4))))
}

func (m *procMem) str(addr uint64) string {
	b := m.read(addr, 256)
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}

// global returns the runtime address of a recovered symbol.
func (m *procMem) global(k *Knowledge, name string) uint64 {
	m.t.Helper()
	a, ok := k.Symbols[name]
	if !ok {
		m.t.Fatalf("%s not recovered", name)
	}
	return m.bias + a
}

// envOfTest sets the runtime's settings to values the test checks in its
// memory: the program's environment is the oracle.
var envOfTest = []string{
	"OMP_MAX_TASK_PRIORITY=7", "OMP_CANCELLATION=true", "OMP_STACKSIZE=3M",
	"OMP_NUM_THREADS=3,2", "OMP_PROC_BIND=spread,close", "OMP_AFFINITY_FORMAT=fmt-of-test %n",
	"OMP_TOOL=disabled", "OMP_TOOL_LIBRARIES=/nonexistent/tool-of-test.so", "OMP_TOOL_VERBOSE_INIT=disabled",
	"KMP_DEVICE_THREAD_LIMIT=77", "OMP_DISPLAY_ENV=true", "OMP_DEBUG=enabled",
}

// checkLive runs the nested fixture on lib and checks every recovered
// global and layout value against the process: the layout block in
// memory (which ompd_init wrote) equals the values read from the code,
// and the settings hold what the environment set.
func checkLive(t *testing.T, k *Knowledge, lib string, opts fixture.StartOptions) {
	t.Helper()
	opts.Env = append(opts.Env, envOfTest...)
	p := fixture.Start(t, "nested", opts)
	m := openProc(t, p.PID, lib)
	lay := k.Layout
	for name, v := range lay {
		if got := m.u64(m.global(k, name)); got != v {
			t.Errorf("%s: memory holds %#x, ompd_init's code stores %#x", name, got, v)
		}
	}
	i32 := func(name string) int64 { return m.i32(m.global(k, name)) }
	for name, want := range map[string]int64{
		"__kmp_max_task_priority": 7, "__kmp_omp_cancellation": 1, "__kmp_tool": 0,
		"__kmp_max_nth": 77, "__kmp_avail_proc": int64(runtime.NumCPU()), "__kmp_display_affinity": 0,
	} {
		if got := i32(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
	if got := m.u64(m.global(k, "__kmp_stksize")); got != 3<<20 {
		t.Errorf("__kmp_stksize = %d; want 3 MiB (4 MiB is the default)", got)
	}
	for name, want := range map[string]string{
		"__kmp_affinity_format": "fmt-of-test %n", "__kmp_tool_libraries": "/nonexistent/tool-of-test.so",
		"__kmp_tool_verbose_init": "disabled",
	} {
		if got := m.str(m.u64(m.global(k, name))); got != want {
			t.Errorf("%s = %q; want %q", name, got, want)
		}
	}
	// The nested lists: kmp_nested_nthreads_t and kmp_nested_proc_bind_t.
	nth := m.global(k, "__kmp_nested_nth")
	if used := m.i32(nth + lay["ompd_access__kmp_nested_nthreads_t__used"]); used != 2 {
		t.Errorf("__kmp_nested_nth.used = %d; want 2", used)
	} else if arr := m.u64(nth + lay["ompd_access__kmp_nested_nthreads_t__nth"]); m.i32(arr) != 3 || m.i32(arr+4) != 2 {
		t.Errorf("__kmp_nested_nth.nth = [%d %d]; want [3 2]", m.i32(arr), m.i32(arr+4))
	}
	pb := m.global(k, "__kmp_nested_proc_bind")
	if used := m.i32(pb + lay["ompd_access__kmp_nested_proc_bind_t__used"]); used != 2 {
		t.Errorf("__kmp_nested_proc_bind.used = %d; want 2", used)
	} else if arr := m.u64(pb + lay["ompd_access__kmp_nested_proc_bind_t__bind_types"]); m.i32(arr) != 4 || m.i32(arr+4) != 3 {
		// kmp_proc_bind_t: close 3, spread 4.
		t.Errorf("__kmp_nested_proc_bind.bind_types = [%d %d]; want [4 3] (spread, close)", m.i32(arr), m.i32(arr+4))
	}
	if got := m.u64(m.global(k, "ompd_state")); got != 1 {
		t.Errorf("ompd_state = %d with OMP_DEBUG=enabled; want 1", got)
	}
	locs := m.u64(m.global(k, "ompd_dll_locations"))
	if l0, l1 := m.str(m.u64(locs)), m.str(m.u64(locs+8)); l0 != "libompd.so" || l1 != filepath.Dir(lib)+"/libompd.so" {
		t.Errorf("ompd_dll_locations = [%q %q]; want libompd.so and one beside the runtime", l0, l1)
	}
	// OMP_DISPLAY_ENV prints the runtime's _OPENMP version on stderr.
	ver := i32("__kmp_openmp_version")
	if want := fmt.Sprintf("_OPENMP='%d'", ver); !strings.Contains(p.Stderr(), want) {
		t.Errorf("__kmp_openmp_version = %d, but the runtime's OMP_DISPLAY_ENV output has no %s:\n%s", ver, want, p.Stderr())
	}
	// The thread table: the initial thread has gtid 0, within capacity.
	capacity := i32("__kmp_threads_capacity")
	threads := m.u64(m.u64(m.global(k, "__kmp_threads")))
	tid := lay["ompd_access__kmp_info_t__th"] + lay["ompd_access__kmp_base_info_t__th_info"] + lay["ompd_access__kmp_desc_t__ds"] + lay["ompd_access__kmp_desc_base_t__ds_tid"]
	if capacity < 4 || capacity > 1<<20 || threads == 0 || m.i32(threads+tid) != 0 {
		t.Errorf("__kmp_threads_capacity %d, __kmp_threads[0] %#x with ds_tid %d; want a capacity of at least the fixture's threads and thread 0", capacity, threads, m.i32(threads+tid))
	}
	// The environment block the runtime keeps for OMPD: its settings
	// (as they were before the environment was read), one a line.
	if n := m.u64(m.global(k, "ompd_env_block_size")); n == 0 || n > 1<<20 {
		t.Errorf("ompd_env_block_size = %d", n)
	} else if blk := string(m.read(m.u64(m.global(k, "ompd_env_block")), int(n))); !strings.HasPrefix(blk, "KMP_ABORT_DELAY=0\n") || !strings.Contains(blk, "\nOMP_MAX_TASK_PRIORITY=0\n") {
		t.Errorf("ompd_env_block is not the runtime's settings:\n%s", blk)
	}
}

// TestRecoverStock: every Debian libomp gives every name, with no warning,
// and the process running on it agrees.
func TestRecoverStock(t *testing.T) {
	for _, v := range fixture.StockVersions {
		t.Run(strconv.Itoa(v), func(t *testing.T) {
			lib := fixture.StockLibomp(v)
			k, err := Recover(mustOpen(t, lib))
			if err != nil {
				t.Fatal(err)
			}
			if len(k.Warnings) != 0 {
				t.Errorf("warnings: %q", k.Warnings)
			}
			if !strings.HasPrefix(k.Release, fmt.Sprintf("Debian libomp5-%d ", v)) || !slices.Equal(k.NameLists, []int{v}) || len(k.Layout) != 145 {
				t.Errorf("release %q, lists %v, %d layout values; want Debian's %d, its list, 145", k.Release, k.NameLists, len(k.Layout), v)
			}
			for _, n := range wantSymbols {
				if _, ok := k.Symbols[n]; !ok {
					t.Errorf("%s not recovered", n)
				}
			}
			checkLive(t, k, lib, fixture.StartOptions{Stripped: true, Runtime: lib})
		})
	}
}

// TestRecoverOMPDBuild: the OMPD build with its symbols removed gives the
// addresses its symbol table has and the values its ompd_init wrote.
func TestRecoverOMPDBuild(t *testing.T) {
	orig := filepath.Join(fixture.OMPDLibDir(), "libomp.so")
	stripped := filepath.Join(t.TempDir(), "libomp.so")
	if out, err := exec.Command("objcopy", "--strip-all", orig, stripped).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, out)
	}
	k, err := Recover(mustOpen(t, stripped))
	if err != nil {
		t.Fatal(err)
	}
	// An unknown build: named by the lists of 13-19, which agree, with a
	// warning saying so.
	want := "libomp build " + mustOpen(t, stripped).BuildID()[:12] + " is not one ompd-inspect knows: its 145 layout values are named with the list that libomp 13, 14, 15, 16, 19 share, and checked against the code that uses them"
	if k.Release != "" || !slices.Equal(k.Warnings, []string{want}) {
		t.Errorf("release %q, warnings %q; want none and %q", k.Release, k.Warnings, want)
	}
	im := mustOpen(t, orig)
	for _, n := range wantSymbols {
		s, ok := im.Symbol(n)
		if m, mangled := symtabNames[n]; mangled {
			s, ok = im.Symbol(m)
		}
		if got, rok := k.Symbols[n]; !ok || !rok || got != s.Value {
			t.Errorf("%s: recovered %#x (%v); the symbol table says %#x (%v)", n, got, rok, s.Value, ok)
		}
	}
	checked := 0
	for n, a := range k.Symbols {
		if strings.HasPrefix(n, "ompd_sizeof__") || strings.HasPrefix(n, "ompd_access__") || strings.HasPrefix(n, "ompd_bitfield__") {
			if s, ok := im.Symbol(n); !ok || s.Value != a {
				t.Errorf("%s: recovered at %#x; the symbol table says %#x (%v)", n, a, s.Value, ok)
			}
			checked++
		}
	}
	if checked != 145 {
		t.Errorf("%d layout variables checked; want 145", checked)
	}
	checkLive(t, k, orig, fixture.StartOptions{})
}

// keptCounter is a section cache that counts the reads of what Recover
// keeps.
type keptCounter struct {
	c          *sectioncache.Cache
	hits, puts int
}

func (kc *keptCounter) Get(k sectioncache.Key, size uint64) []byte {
	b := kc.c.Get(k, size)
	if b != nil && strings.HasSuffix(k.Section, keptName) {
		kc.hits++
	}
	return b
}

func (kc *keptCounter) Put(k sectioncache.Key, data []byte) error {
	if strings.HasSuffix(k.Section, keptName) {
		kc.puts++
	}
	return kc.c.Put(k, data)
}

// TestRecoverKeptStock: what Recover finds in every Debian libomp is
// kept and used by a later image of the same file (the checks of a kept
// entry accept what Recover finds).
func TestRecoverKeptStock(t *testing.T) {
	c, err := sectioncache.Open(filepath.Join(t.TempDir(), "cache"), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range fixture.StockVersions {
		lib := fixture.StockLibomp(v)
		var got [2]*Knowledge
		for run := range 2 {
			kc := &keptCounter{c: c}
			im, err := elf.OpenWith(lib, elf.OpenOptions{Sections: kc})
			if err != nil {
				t.Fatal(err)
			}
			if got[run], err = Recover(im); err != nil {
				t.Fatal(err)
			}
			im.Close()
			if want := 1 - run; kc.puts != want {
				t.Errorf("libomp %d, run %d: kept %d times, want %d (the second run uses the first's)", v, run, kc.puts, want)
			}
		}
		if !reflect.DeepEqual(got[0], got[1]) {
			t.Errorf("libomp %d: the kept knowledge differs from the recovered", v)
		}
	}
}

// TestRecoverKept: what Recover found in Debian's libomp 19 is kept with
// the image's section cache, and a later image of the same file gets the
// same knowledge from there; a kept entry that is damaged, cut or names
// another build-id is recovered again.
func TestRecoverKept(t *testing.T) {
	lib := fixture.StockLibomp(19)
	c, err := sectioncache.Open(filepath.Join(t.TempDir(), "cache"), 0)
	if err != nil {
		t.Fatal(err)
	}
	open := func() (*elf.Image, *keptCounter) {
		kc := &keptCounter{c: c}
		im, err := elf.OpenWith(lib, elf.OpenOptions{Sections: kc})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { im.Close() })
		return im, kc
	}
	recover := func(im *elf.Image) *Knowledge {
		k, err := Recover(im)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	im1, first := open()
	want := recover(im1)
	if first.hits != 0 || first.puts != 1 || len(want.Layout) != 145 || want.Symbols["__kmp_threads"] == 0 {
		t.Fatalf("first run: %d kept entries read, %d kept, %d layout values, __kmp_threads at %#x; want none read, one kept, 145, an address",
			first.hits, first.puts, len(want.Layout), want.Symbols["__kmp_threads"])
	}
	im2, second := open()
	if got := recover(im2); second.hits != 1 || second.puts != 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("second run: %d kept entries read, %d kept; knowledge equal: %v; want it read and used", second.hits, second.puts, reflect.DeepEqual(got, want))
	}
	good := im2.KeptData(keptName)
	// tampered is the kept entry with one change to what it says.
	tampered := func(change func(k *Knowledge, kk *keptKnowledge)) []byte {
		var c keptKnowledge
		if err := json.Unmarshal(good, &c); err != nil {
			t.Fatal(err)
		}
		change(c.Knowledge, &c)
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	shifted := func(name string, by uint64) []byte {
		return tampered(func(k *Knowledge, _ *keptKnowledge) { k.Symbols[name] += by })
	}
	for what, bad := range map[string][]byte{
		"cut": good[:len(good)/2],
		"breakpoint in data": tampered(func(k *Knowledge, _ *keptKnowledge) {
			k.Symbols["ompd_bp_parallel_begin"] = k.Symbols["__kmp_threads"]
		}),
		"function mid-code": shifted("__kmp_fork_barrier", 4),
		"layout hole":       shifted("ompd_sizeof__kmp_info_t", 8),
		"a layout var less": tampered(func(k *Knowledge, _ *keptKnowledge) { delete(k.Layout, "ompd_sizeof__kmp_info_t") }),
		"a list not known":  tampered(func(k *Knowledge, _ *keptKnowledge) { k.NameLists = []int{99} }),
		"another file":      bytes.Replace(good, []byte(want.BuildID), []byte(strings.Repeat("0", len(want.BuildID))), 1),
		"no layout":         tampered(func(k *Knowledge, _ *keptKnowledge) { k.Layout = map[string]uint64{} }),
		"unknown field":     append([]byte(`{"Extra":1,`), good[1:]...),
		"two values":        append(slices.Clone(good), good...),
		"a bracket after":   append(slices.Clone(good), ']'),
		"not JSON at all":   []byte("\x00\x01"),
		"another version":   tampered(func(_ *Knowledge, kk *keptKnowledge) { kk.Version = "0-" + kk.Version }),
		"not a layout var":  tampered(func(k *Knowledge, _ *keptKnowledge) { k.Layout["__kmp_threads"] = 8 }),
		"address outside":   tampered(func(k *Knowledge, _ *keptKnowledge) { k.Symbols["__kmp_threads"] = 1 << 60 }),
		"stray evidence":    tampered(func(k *Knowledge, _ *keptKnowledge) { k.Evidence["nothing"] = "made up" }),
	} {
		im2.KeepData(keptName, bad)
		im, kc := open()
		if got := recover(im); !reflect.DeepEqual(got, want) || kc.puts != 1 {
			t.Errorf("%s: recovered the first run's knowledge: %v, kept again %d times; want it recovered again and kept", what, reflect.DeepEqual(got, want), kc.puts)
		}
		if kept := im.KeptData(keptName); !bytes.Equal(kept, good) {
			t.Errorf("%s: the entry kept is not the first run's", what)
		}
	}
}
