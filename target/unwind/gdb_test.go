package unwind

import (
	"bufio"
	"context"
	"debug/elf"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-delve/delve/pkg/dwarf/regnum"

	"github.com/ompd-inspect/ompd-inspect/target"
)

// gdbTimeout bounds one run of gdb.
const gdbTimeout = 5 * time.Minute

// sigtrampName is what gdb prints for a sigreturn trampoline frame, and
// what the tests call ours.
const sigtrampName = "<signal handler called>"

// gdbFrame is one frame as gdb sees it (testdata/gdb_frames.py).
type gdbFrame struct {
	level   int
	typ     string // gdb's frame type: normal, inline, tailcall, sigtramp, ...
	pc      uint64
	sp, bp  uint64
	spKnown bool
	bpKnown bool
	name    string
}

func (f gdbFrame) String() string {
	return fmt.Sprintf("#%-2d %-8s pc %#x sp %#x bp %#x %s", f.level, f.typ, f.pc, f.sp, f.bp, f.name)
}

// machine reports whether the frame is a machine frame: gdb shows a
// function inlined into another as an inline frame sharing the registers
// of the frame it is inlined into (the real function, a normal frame),
// and reconstructs tail calls from DWARF call-site information as tail
// call frames, which have no stack frame of their own. Neither is a frame
// of the stack, so neither is compared.
func (f gdbFrame) machine() bool { return f.typ != "inline" && f.typ != "tailcall" }

// gdbStack is one thread's frames as gdb sees them.
type gdbStack struct {
	frames []gdbFrame
	stop   string // why gdb's walk ended early, if it says
}

// machineFrames returns the machine frames (see gdbFrame.machine).
func (s gdbStack) machineFrames() []gdbFrame {
	var out []gdbFrame
	for _, f := range s.frames {
		if f.machine() {
			out = append(out, f)
		}
	}
	return out
}

func (s gdbStack) String() string {
	var b strings.Builder
	for _, f := range s.frames {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	if s.stop != "" {
		fmt.Fprintf(&b, "  stop: %s\n", s.stop)
	}
	return b.String()
}

// runGDB runs gdb in batch mode with args and the script that lists the
// frames of every thread (testdata/gdb_frames.py), with backtraces past
// main, and returns them by thread id.
func runGDB(t *testing.T, args ...string) (map[int]gdbStack, string) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "gdb_frames.py"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), gdbTimeout)
	defer cancel()
	full := append([]string{"-batch", "-nx"}, args...)
	full = append(full, "-ex", "set width unlimited", "-ex", "set backtrace past-main on",
		"-ex", "source "+script)
	cmd := exec.CommandContext(ctx, "gdb", full...)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gdb %s: %v\n%s", strings.Join(full, " "), err, out)
	}
	stacks := map[int]gdbStack{}
	tid := 0
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	hex := func(s string) (uint64, bool) {
		v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
		return v, err == nil
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "@@THREAD "):
			tid, err = strconv.Atoi(strings.TrimPrefix(line, "@@THREAD "))
			if err != nil {
				t.Fatalf("gdb: %q: %v", line, err)
			}
			stacks[tid] = gdbStack{}
		case strings.HasPrefix(line, "@@STOP "):
			s := stacks[tid]
			s.stop = strings.TrimPrefix(line, "@@STOP ")
			stacks[tid] = s
		case strings.HasPrefix(line, "@@FRAME "):
			f := strings.SplitN(strings.TrimPrefix(line, "@@FRAME "), " ", 6)
			if len(f) != 6 || tid == 0 {
				t.Fatalf("gdb: cannot parse %q", line)
			}
			var fr gdbFrame
			var ok bool
			fr.level, err = strconv.Atoi(f[0])
			fr.typ = f[1]
			fr.pc, ok = hex(f[2])
			if err != nil || !ok {
				t.Fatalf("gdb: cannot parse %q", line)
			}
			fr.sp, fr.spKnown = hex(f[3])
			fr.bp, fr.bpKnown = hex(f[4])
			fr.name = f[5]
			s := stacks[tid]
			s.frames = append(s.frames, fr)
			stacks[tid] = s
		}
	}
	return stacks, string(out)
}

// ourStack is one thread's frames as this package found them.
// The names are taken while the target is open (a closed target's images
// cannot be read).
type ourStack struct {
	frames []Frame
	names  []string
	// aliases holds, for each frame, the other ELF symbol names of its
	// function (symbols with the same address), which gdb may print
	// instead of the DWARF name: glibc's hidden aliases, for example
	// __GI___clock_nanosleep for __clock_nanosleep.
	aliases [][]string
	stop    Stop
}

func newOurStack(t *testing.T, frames []Frame, stop Stop) ourStack {
	s := ourStack{frames: frames, stop: stop}
	for i := range frames {
		f := &frames[i]
		s.names = append(s.names, frameName(f))
		var aliases []string
		if m := f.Module; m != nil && m.Image != nil && !f.Trampoline {
			if sym, ok := m.Image.SymbolAt(f.LookupPC() - m.Bias); ok {
				aliases = symbolsAt(t, m.Image.Path, m.Image.DebugFile(), sym.Value)
			}
		}
		s.aliases = append(s.aliases, aliases)
	}
	return s
}

var (
	symTablesMu sync.Mutex
	symTables   = map[string]map[uint64][]string{}
)

// symbolsAt returns the names of the function symbols of the ELF files
// (the module and its debug file) at link-time address addr.
func symbolsAt(t *testing.T, paths ...any) []string {
	t.Helper()
	addr := paths[len(paths)-1].(uint64)
	var names []string
	for _, p := range paths[:len(paths)-1] {
		path := p.(string)
		if path == "" {
			continue
		}
		symTablesMu.Lock()
		tab, ok := symTables[path]
		if !ok {
			tab = map[uint64][]string{}
			if f, err := elf.Open(path); err == nil {
				syms, _ := f.Symbols()
				dyn, _ := f.DynamicSymbols()
				for _, s := range append(syms, dyn...) {
					if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Name != "" {
						name, _, _ := strings.Cut(s.Name, "@")
						tab[s.Value] = append(tab[s.Value], name)
					}
				}
				f.Close()
			}
			symTables[path] = tab
		}
		names = append(names, tab[addr]...)
		symTablesMu.Unlock()
	}
	return names
}

func (s ourStack) String() string {
	var b strings.Builder
	for i := range s.frames {
		f := &s.frames[i]
		mod := "?"
		if f.Module != nil {
			mod = f.Module.Name
		} else if f.mem != nil {
			mod = f.mem.name
		}
		fmt.Fprintf(&b, "  #%-2d pc %#x cfa %#x sp %#x bp %#x %-13s %s (%s)\n", i, f.PC, f.CFA, f.SP, f.BP, f.How, s.names[i], mod)
	}
	fmt.Fprintf(&b, "  stop: %s\n", s.stop)
	return b.String()
}

// frameName names a frame as gdb would: the function at its lookup pc.
func frameName(f *Frame) string {
	if f.Trampoline {
		return sigtrampName
	}
	if name, ok := f.Function(); ok {
		return name
	}
	return "??"
}

// unwindAll unwinds every thread of tg. UnwindAppend, into one array
// after a frame already there, must find the same frames and stop.
func unwindAll(t *testing.T, tg target.Target) map[int]ourStack {
	t.Helper()
	u := New(tg)
	out := map[int]ourStack{}
	arena := []Frame{{PC: 0xdead}}
	for _, th := range tg.Threads() {
		frames, stop := u.Unwind(th)
		out[th.TID] = newOurStack(t, frames, stop)
		start := len(arena)
		var astop Stop
		arena, astop = u.UnwindAppend(arena, th)
		if fmt.Sprint(arena[start:], astop) != fmt.Sprint(frames, stop) || arena[0].PC != 0xdead {
			t.Fatalf("thread %d: UnwindAppend found %v, %v; Unwind %v, %v", th.TID, arena[start:], astop, frames, stop)
		}
	}
	for _, w := range u.Warnings() {
		t.Logf("unwind warning: %s", w)
	}
	return out
}

// normalize reduces a function name to what both gdb and the DWARF index
// agree on: gdb qualifies C++ members with their class and prints the
// template arguments of a specialization, the DWARF DW_AT_name of a member
// has neither, so both are compared without scope and template arguments.
func normalize(name string) string {
	// Drop template argument lists (nesting aware).
	var b strings.Builder
	depth := 0
	for _, r := range name {
		switch {
		case r == '<' && name != sigtrampName:
			depth++
		case r == '>' && depth > 0 && name != sigtrampName:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	s := b.String()
	if i := strings.LastIndex(s, "::"); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// compareWithGDB asserts that every thread's frames are gdb's machine
// frames: the same number, and for each the same pc, the same rsp, the same
// rbp (where gdb knows it) and the same function name.
func compareWithGDB(t *testing.T, what string, ours map[int]ourStack, gdb map[int]gdbStack, gdbOut string) {
	t.Helper()
	var tids []int
	for tid := range ours {
		tids = append(tids, tid)
	}
	sort.Ints(tids)
	if len(gdb) != len(ours) {
		t.Errorf("%s: gdb shows %d threads, we have %d (%v)\n%s", what, len(gdb), len(ours), tids, gdbOut)
	}
	for _, tid := range tids {
		o := ours[tid]
		g, ok := gdb[tid]
		if !ok {
			t.Errorf("%s: thread %d: not in gdb's output", what, tid)
			continue
		}
		if diff := diffFrames(o, g.machineFrames()); diff != "" {
			t.Errorf("%s: thread %d: %s\nours:\n%sgdb:\n%s", what, tid, diff, o, g)
		}
		if !o.stop.Complete() {
			t.Errorf("%s: thread %d: the walk ended early: %s\n%s", what, tid, o.stop, o)
		}
	}
}

// diffFrames returns what differs between our frames and gdb's machine
// frames, or "".
func diffFrames(o ourStack, g []gdbFrame) string {
	var diffs []string
	for i := range max(len(o.frames), len(g)) {
		if i >= len(o.frames) {
			diffs = append(diffs, fmt.Sprintf("#%d: gdb has %s, we have no frame", i, g[i]))
			continue
		}
		if i >= len(g) {
			diffs = append(diffs, fmt.Sprintf("#%d: we have %s, gdb has no frame", i, o.names[i]))
			continue
		}
		f, gf := &o.frames[i], g[i]
		// gdb names a trampoline frame by its type (bt prints
		// "<signal handler called>"), checked below.
		if gf.typ != "sigtramp" && !o.nameMatches(i, gf.name) {
			diffs = append(diffs, fmt.Sprintf("#%d: function %s, gdb says %s", i, o.names[i], gf.name))
		}
		if f.PC != gf.pc {
			diffs = append(diffs, fmt.Sprintf("#%d: pc %#x, gdb says %#x", i, f.PC, gf.pc))
		}
		if gf.spKnown && f.SP != gf.sp {
			diffs = append(diffs, fmt.Sprintf("#%d: rsp %#x, gdb says %#x", i, f.SP, gf.sp))
		}
		if bp, ok := f.Reg(regnum.AMD64_Rbp); gf.bpKnown && ok && bp != gf.bp {
			diffs = append(diffs, fmt.Sprintf("#%d: rbp %#x, gdb says %#x", i, bp, gf.bp))
		}
		if f.Trampoline != (gf.typ == "sigtramp") {
			diffs = append(diffs, fmt.Sprintf("#%d: trampoline %v, gdb's frame type %s", i, f.Trampoline, gf.typ))
		}
	}
	return strings.Join(diffs, "; ")
}

// nameMatches reports whether gdb's name for frame i is ours: the DWARF
// name of our frame's function or one of its ELF aliases, after normalize.
func (o ourStack) nameMatches(i int, gdbName string) bool {
	g := normalize(gdbName)
	if normalize(o.names[i]) == g {
		return true
	}
	return slices.ContainsFunc(o.aliases[i], func(a string) bool { return normalize(a) == g })
}
