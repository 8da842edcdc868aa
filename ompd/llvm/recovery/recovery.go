// Package recovery finds, in a stripped build of LLVM's OpenMP runtime
// (libomp), what OMPD needs and the symbol table no longer names: the
// OMPD layout values, the addresses of the runtime's global variables, and
// its OMPD breakpoint functions.
//
// Nothing is guessed. Every runtime built with OMPD support runs
// ompd_init at start-up, which stores each layout value as an immediate
// into a block of 64-bit variables laid out in declaration order; the
// stores are read from its code and named with the layout name list of
// the runtime's release (names/, generated from each release's source).
// Each global is found by code that uses it ("anchors": exported API
// functions whose code is known, the runtime's table of environment
// settings, ompd_init itself), confirmed by a second, independent anchor
// where the code has one; anchors that disagree leave the global out and
// say so. Offsets that exported functions reveal are checked against the
// recovered layout.
//
// The patterns assume code built by clang for x86-64 with relaxed GOT
// references (lea X(%rip)), as all of Debian's libomp builds are.
package recovery

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	delf "debug/elf"

	"golang.org/x/arch/x86/x86asm"

	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// Knowledge is what recovery found in one runtime file. Addresses are
// link-time addresses of the file (add the load bias for a process).
type Knowledge struct {
	// BuildID is the file's GNU build-id (hex).
	BuildID string
	// Release names the runtime when its build-id is one the project
	// knows (known.go), else "".
	Release string
	// NameLists are the releases (LLVM major versions) whose layout name
	// list named the layout values: every list of that length, when they
	// all agree.
	NameLists []int
	// Symbols maps names of the runtime's globals, OMPD breakpoint
	// functions and ompd_init to their addresses.
	Symbols map[string]uint64
	// Layout maps each OMPD layout variable (ompd_sizeof__*,
	// ompd_access__*, ompd_bitfield__*) to the value ompd_init stores.
	Layout map[string]uint64
	// Evidence says, for each symbol, which anchors found it.
	Evidence map[string]string
	// Warnings lists what could not be recovered or did not agree.
	Warnings []string
}

// Recover reads what OMPD needs from the stripped runtime im. It fails
// when im is not a runtime with OMPD support whose ompd_init it can read;
// globals it cannot confirm are left out with a warning.
func Recover(im *elf.Image) (k *Knowledge, err error) {
	// The file is the target's choice: a decoder's panic on it is an
	// error, never a crash.
	defer func() {
		if p := recover(); p != nil {
			k, err = nil, fmt.Errorf("%s: recovering what OMPD needs: malformed code or data: %v", im.Path, p)
		}
	}()
	if im.Machine() != delf.EM_X86_64 {
		return nil, fmt.Errorf("%s: recovery reads x86-64 code only, not %v", im.Path, im.Machine())
	}
	if k := kept(im); k != nil {
		return k, nil
	}
	defer func() {
		if err == nil && k != nil { // not while a panic unwinds
			keep(im, k)
		}
	}()
	r := &recoverer{im: im, k: &Knowledge{BuildID: im.BuildID(), Symbols: map[string]uint64{}, Layout: map[string]uint64{}, Evidence: map[string]string{}}}
	r.k.Release = knownReleases[r.k.BuildID].name
	if r.text, err = im.SectionData(".text"); err != nil {
		return nil, err
	}
	if r.rodata, err = im.SectionData(".rodata"); err != nil {
		return nil, err
	}
	if err := r.ompdInit(); err != nil {
		return nil, fmt.Errorf("%s: %w", im.Path, err)
	}
	r.checkOffsets()
	if len(r.k.Layout) == 0 {
		return nil, fmt.Errorf("%s: the recovered layout failed its checks: %s", im.Path, strings.Join(r.k.Warnings, "; "))
	}
	r.globals()
	r.functions()
	return r.k, nil
}

// keptName names what Recover keeps of a file for later runs (through
// the image's section cache): decoding the runtime's code is most of the
// time spent preparing a process that runs a stripped runtime.
const keptName = "llvm_recovery1"

// recoveryCode is the version of what Recover finds from the same file
// and name lists. It is changed by hand with any change to what Recover
// finds; what was kept by another version is not used.
const recoveryCode = 1

// keptKnowledge is what Recover keeps: the knowledge, and the version of
// the recovery that found it.
type keptKnowledge struct {
	Version   string
	Knowledge *Knowledge
}

// recoveryVersion names the version of the recovery (recoveryCode) and of
// the layout name lists it matched against, found once: both are built
// in.
var recoveryVersion = sync.OnceValue(func() string {
	h := sha256.New()
	files, _ := fs.Glob(namesFS, "names/*.txt") // sorted
	for _, f := range files {
		b, _ := namesFS.ReadFile(f)
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	return fmt.Sprintf("%d-%x", recoveryCode, h.Sum(nil)[:8])
})

// kept returns the knowledge an earlier run of this version recovered
// from the same file, nil when none is kept, or when what is kept does
// not read whole and alone, names another build-id, has no layout, or
// names a layout variable or an address the file cannot have.
func kept(im *elf.Image) *Knowledge {
	b := im.KeptData(keptName)
	if b == nil {
		return nil
	}
	var kk keptKnowledge
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if dec.Decode(&kk) != nil {
		return nil
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil // something follows the value
	}
	k := kk.Knowledge
	if kk.Version != recoveryVersion() || k == nil || k.BuildID != im.BuildID() || !plausible(im, k) {
		return nil
	}
	k.Release = knownReleases[k.BuildID].name
	if k.Evidence == nil {
		k.Evidence = map[string]string{}
	}
	return k
}

// plausible reports whether k, read back, has the shape of what Recover
// finds in im: the layout variables are exactly the names of the lists
// NameLists gives (lists that agree), one block of 64-bit variables in
// writable data in the lists' order; every function lies at the start of
// a function's call frame information in code (a trace sets breakpoints
// there); every other symbol lies in a loaded section; every piece of
// evidence is for a symbol.
func plausible(im *elf.Image, k *Knowledge) bool {
	all, err := lists()
	if err != nil || len(k.NameLists) == 0 {
		return false
	}
	var names []string
	for _, v := range k.NameLists {
		i := slices.IndexFunc(all, func(l nameList) bool { return l.version == v })
		if i < 0 || (names != nil && !slices.Equal(names, all[i].layout)) {
			return false
		}
		names = all[i].layout
	}
	if len(names) == 0 || len(k.Layout) != len(names) {
		return false
	}
	first := k.Symbols[names[0]]
	for i, n := range names {
		if _, ok := k.Layout[n]; !ok {
			return false
		}
		a, ok := k.Symbols[n]
		if !ok || a != first+8*uint64(i) {
			return false
		}
		if _, writable, ok := im.SectionAt(a); !ok || !writable {
			return false
		}
	}
	for name, a := range k.Symbols {
		if isFunction(name) {
			if fde := im.FDEForPC(a); !im.ExecutableAt(a) || fde == nil || fde.Begin() != a {
				return false
			}
		} else if _, _, ok := im.SectionAt(a); !ok {
			return false
		}
	}
	for name := range k.Evidence {
		if _, ok := k.Symbols[name]; !ok {
			return false
		}
	}
	return true
}

// keep keeps k for later runs.
func keep(im *elf.Image, k *Knowledge) {
	b, err := json.Marshal(keptKnowledge{Version: recoveryVersion(), Knowledge: k})
	if err == nil {
		im.KeepData(keptName, b)
	}
}

type recoverer struct {
	im           *elf.Image
	k            *Knowledge
	text, rodata *elf.Section
	relative     map[uint64]uint64 // R_X86_64_RELATIVE: offset -> addend
	relErr       error
	relDone      bool
}

func (r *recoverer) warn(format string, args ...any) {
	r.k.Warnings = append(r.k.Warnings, fmt.Sprintf(format, args...))
}

// findString returns the address of the NUL-terminated string s in
// .rodata; it must be there exactly once as a whole string.
func (r *recoverer) findString(s string) (uint64, error) {
	pat := append(append([]byte{0}, s...), 0)
	data := r.rodata.Data
	var found []uint64
	for i := 0; ; {
		j := bytes.Index(data[i:], pat)
		if j < 0 {
			break
		}
		found = append(found, r.rodata.Addr+uint64(i+j+1))
		i += j + 1
	}
	switch len(found) {
	case 0:
		return 0, fmt.Errorf("no string %q in .rodata", s)
	case 1:
		return found[0], nil
	}
	return 0, fmt.Errorf("the string %q is in .rodata %d times", s, len(found))
}

// refsTo returns the addresses of the instructions in .text whose
// rip-relative operand is addr.
func (r *recoverer) refsTo(addr uint64) []uint64 {
	data := r.text.Data
	var out []uint64
	for i := 2; i+4 <= len(data); i++ {
		next := r.text.Addr + uint64(i) + 4
		disp := int64(int32(binary.LittleEndian.Uint32(data[i:])))
		if uint64(int64(next)+disp) != addr {
			continue
		}
		// Confirm by decoding the instruction that ends with the
		// displacement (lea and mov loads: opcode, ModRM, optional prefixes).
		for k := 2; k <= 7 && k <= i; k++ {
			in, err := x86asm.Decode(data[i-k:], 64)
			if err != nil || in.Len != k+4 {
				continue
			}
			if hasRIPMem(in, int64(next), addr) {
				out = append(out, r.text.Addr+uint64(i-k))
				break
			}
		}
	}
	return out
}

func hasRIPMem(in x86asm.Inst, next int64, addr uint64) bool {
	for _, a := range in.Args {
		if m, ok := a.(x86asm.Mem); ok && m.Base == x86asm.RIP && uint64(next+m.Disp) == addr {
			return true
		}
	}
	return false
}

// funcAt decodes the function whose call frame information covers pc.
func (r *recoverer) funcAt(pc uint64) (*function, error) {
	fde := r.im.FDEForPC(pc)
	if fde == nil {
		return nil, fmt.Errorf("no call frame information covers %#x", pc)
	}
	return decodeRange(r.text, fde.Begin(), fde.End())
}

// exported decodes the exported function name (its .dynsym size gives its
// end).
func (r *recoverer) exported(name string) (*function, error) {
	s, ok := r.im.Symbol(name)
	if !ok || !s.Func || s.Size == 0 {
		return nil, fmt.Errorf("no exported function %s", name)
	}
	f, err := decodeRange(r.text, s.Value, s.Value+s.Size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

// isData reports whether a is in the runtime's writable data (.data or
// .bss), where its global variables live.
func (r *recoverer) isData(a uint64) bool {
	name, w, ok := r.im.SectionAt(a)
	return ok && w && (name == ".data" || name == ".bss")
}

// dataRefs returns the globals in .data and .bss that f uses, in order of
// first use.
func (r *recoverer) dataRefs(f *function) []uint64 {
	var out []uint64
	for _, x := range f.refs {
		if r.isData(x.target) && !slices.Contains(out, x.target) {
			out = append(out, x.target)
		}
	}
	return out
}

// ompdInit finds ompd_init through its reference to the string OMP_DEBUG
// and reads from it the layout block, ompd_dll_locations, ompd_state,
// ompd_env_block(_size) and the breakpoint functions.
func (r *recoverer) ompdInit() error {
	s, err := r.findString("OMP_DEBUG")
	if err != nil {
		return fmt.Errorf("no ompd_init (the runtime may be built without OMPD support): %w", err)
	}
	var init *function
	for _, at := range r.refsTo(s) {
		f, err := r.funcAt(at)
		if err != nil {
			continue
		}
		if n := len(layoutStores(f)); n >= 64 && (init == nil || n > len(layoutStores(init))) {
			init = f
		}
	}
	if init == nil {
		return fmt.Errorf("no function that reads OMP_DEBUG stores layout values: no ompd_init found")
	}
	r.k.Symbols["ompd_init"] = init.start
	r.k.Evidence["ompd_init"] = "the function that reads OMP_DEBUG and stores the layout values"

	stores := layoutStores(init)
	sort.Slice(stores, func(i, j int) bool { return stores[i].target < stores[j].target })
	for i := 1; i < len(stores); i++ {
		if stores[i].target != stores[i-1].target+8 {
			return fmt.Errorf("ompd_init's %d layout stores are not one block of 64-bit variables (%#x follows %#x)", len(stores), stores[i].target, stores[i-1].target)
		}
	}
	names, lists, err := r.layoutNames(len(stores))
	if err != nil {
		return err
	}
	r.k.NameLists = lists
	for i, s := range stores {
		r.k.Layout[names[i]] = uint64(s.imm)
		r.k.Symbols[names[i]] = s.target
	}
	blockEnd := stores[len(stores)-1].target + 8

	// ompd_dll_locations: the one global ompd_init stores a register to
	// (the malloc'ed array), declared right after the layout block.
	var locs []uint64
	for _, x := range init.refs {
		if x.kind == refStore && x.size == 8 && !x.hasImm && x.disp == 0 && !slices.Contains(locs, x.target) {
			locs = append(locs, x.target)
		}
	}
	if len(locs) != 1 || locs[0] != blockEnd {
		return fmt.Errorf("ompd_dll_locations: ompd_init stores a pointer to %s, want exactly one, right after the layout block (%#x)", hexList(locs), blockEnd)
	}
	r.set("ompd_dll_locations", blockEnd, "the array ompd_init allocates, declared after the layout block")

	// ompd_state: declared after ompd_dll_locations; ompd_init sets its
	// bit 0 (orb $1) when OMP_DEBUG=enabled.
	state := blockEnd + 8
	orb := false
	for _, x := range init.refs {
		if x.kind == refRMW && x.hasImm && x.imm == 1 && x.target == state && x.disp == 0 {
			orb = true
		}
	}
	if !orb {
		return fmt.Errorf("ompd_state: ompd_init sets no bit at %#x, the variable after ompd_dll_locations", state)
	}
	r.set("ompd_state", state, "declared after ompd_dll_locations; ompd_init sets its bit 0")
	// ompd_env_block and its size follow, then ompd_init's own
	// once-only flag, which it tests (cmpb $0) on entry.
	flag := state + 24
	tested := false
	for _, x := range init.refs {
		if x.kind == refCmp && x.size == 1 && x.target == flag {
			tested = true
		}
	}
	if tested {
		r.set("ompd_env_block", state+8, "declared after ompd_state, before ompd_init's flag")
		r.set("ompd_env_block_size", state+16, "declared after ompd_env_block, before ompd_init's flag")
	} else {
		r.warn("ompd_env_block: ompd_init does not test a flag at %#x, after the two variables expected after ompd_state: the runtime's environment block is not recovered", flag)
	}
	r.breakpoints(init)
	return nil
}

// layoutStores returns ompd_init's stores of a 64-bit immediate to a
// global.
func layoutStores(f *function) []ref {
	var out []ref
	seen := map[uint64]bool{}
	for _, x := range f.refs {
		if x.kind == refStore && x.size == 8 && x.hasImm && x.disp == 0 && !seen[x.target] {
			seen[x.target] = true
			out = append(out, x)
		}
	}
	return out
}

// breakpoints finds ompd_dll_locations_valid (the empty function
// ompd_init calls last) and the ompd_bp_* functions defined after it.
func (r *recoverer) breakpoints(init *function) {
	var valid []uint64
	for _, c := range init.calls {
		if isBareRet(r.text, c) && !slices.Contains(valid, c) {
			valid = append(valid, c)
		}
	}
	if len(valid) != 1 {
		r.warn("ompd_dll_locations_valid: ompd_init calls %d empty functions, want 1: the OMPD breakpoint locations are not recovered", len(valid))
		return
	}
	bps := r.breakpointNames()
	if len(bps) == 0 || bps[0] != "ompd_dll_locations_valid" {
		r.warn("no breakpoint list for this runtime: the OMPD breakpoint locations are not recovered")
		return
	}
	// The functions are defined one after the other, each an empty
	// function aligned to 16 bytes.
	for i, name := range bps {
		a := valid[0] + uint64(16*i)
		fde := r.im.FDEForPC(a)
		if !isBareRet(r.text, a) || fde != nil && fde.Begin() != a {
			r.warn("%s: no empty function at %#x, %d functions after ompd_dll_locations_valid: it and the later breakpoint locations are not recovered", name, a, i)
			return
		}
		how := "the empty function ompd_init calls last"
		if i > 0 {
			how = fmt.Sprintf("the empty function %d after ompd_dll_locations_valid, in definition order", i)
		}
		r.set(name, a, how)
	}
}

// set records a symbol found by the anchor described by how.
func (r *recoverer) set(name string, addr uint64, how string) {
	r.k.Symbols[name] = addr
	r.k.Evidence[name] = how
}

// checkOffsets compares offsets that exported functions use with the
// recovered layout; a mismatch means the layout was named wrongly, and it
// is dropped.
func (r *recoverer) checkOffsets() {
	lay := r.k.Layout
	ran := 0
	type check struct {
		fn     string
		fields []string // the layout offsets (summed) of the last loads before ret
	}
	for _, c := range []check{
		{"omp_get_level", []string{"ompd_access__kmp_info_t__th+ompd_access__kmp_base_info_t__th_team", "ompd_access__kmp_team_p__t+ompd_access__kmp_base_team_t__t_level"}},
		{"omp_get_active_level", []string{"ompd_access__kmp_info_t__th+ompd_access__kmp_base_info_t__th_team", "ompd_access__kmp_team_p__t+ompd_access__kmp_base_team_t__t_active_level"}},
	} {
		f, err := r.exported(c.fn)
		if err != nil {
			r.warn("checking the layout: %v", err)
			continue
		}
		ran++
		disps := lastLoadDisps(f, len(c.fields))
		for i, expr := range c.fields {
			var want uint64
			for _, n := range strings.Split(expr, "+") {
				want += lay[n]
			}
			if i >= len(disps) || uint64(disps[i]) != want {
				r.warn("the recovered layout disagrees with %s, which reads %s at %s, not %#x: the layout values are not used", c.fn, expr, hexInts(disps), want)
				clear(lay)
				return
			}
		}
	}
	if ran == 0 {
		r.warn("no exported function to check the recovered layout against: the layout values are not used")
		clear(lay)
	}
}

// lastLoadDisps returns the displacements of the last n loads through a
// register (not a global) before f's ret.
func lastLoadDisps(f *function, n int) []int64 {
	var out []int64
	for i := len(f.insts) - 1; i >= 0 && len(out) < n; i-- {
		in := f.insts[i]
		if in.Op != x86asm.MOV {
			continue
		}
		if m, ok := in.Args[1].(x86asm.Mem); ok && m.Base != x86asm.RIP && m.Index == 0 && m.Disp != 0 {
			out = append(out, m.Disp)
		}
	}
	slices.Reverse(out)
	return out
}

func hexList(a []uint64) string {
	var s []string
	for _, x := range a {
		s = append(s, fmt.Sprintf("%#x", x))
	}
	return "[" + strings.Join(s, " ") + "]"
}

func hexInts(a []int64) string {
	var s []string
	for _, x := range a {
		s = append(s, "+"+strconv.FormatInt(x, 16))
	}
	return "[" + strings.Join(s, " ") + "]"
}

//go:embed names/*.txt
var namesFS embed.FS

// nameList is one release's lists.
type nameList struct {
	version     int
	layout      []string
	breakpoints []string
}

// lists reads the committed name lists (names/NN.txt).
func lists() ([]nameList, error) {
	entries, err := namesFS.ReadDir("names")
	if err != nil {
		return nil, err
	}
	var out []nameList
	for _, e := range entries {
		v, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".txt"))
		if err != nil {
			continue
		}
		data, err := namesFS.ReadFile("names/" + e.Name())
		if err != nil {
			return nil, err
		}
		l := nameList{version: v}
		for _, line := range strings.Split(string(data), "\n") {
			kind, name, ok := strings.Cut(line, " ")
			switch {
			case !ok:
			case kind == "layout":
				l.layout = append(l.layout, name)
			case kind == "breakpoint":
				l.breakpoints = append(l.breakpoints, name)
			}
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// layoutNames returns the names of n layout values: the list of the
// runtime's release when it is known, else the lists of every release with
// n names, when they agree.
func (r *recoverer) layoutNames(n int) ([]string, []int, error) {
	all, err := lists()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the layout name lists: %w", err)
	}
	if rel, ok := knownReleases[r.k.BuildID]; ok {
		for _, l := range all {
			if l.version == rel.version {
				if len(l.layout) != n {
					return nil, nil, fmt.Errorf("ompd_init stores %d layout values; the list of libomp %d, the release of this build, has %d", n, l.version, len(l.layout))
				}
				return l.layout, []int{l.version}, nil
			}
		}
	}
	var fit []nameList
	for _, l := range all {
		if len(l.layout) == n {
			fit = append(fit, l)
		}
	}
	if len(fit) == 0 {
		return nil, nil, fmt.Errorf("ompd_init stores %d layout values, and no known libomp release has that many: an unknown release", n)
	}
	var versions []int
	for _, l := range fit {
		if !slices.Equal(l.layout, fit[0].layout) {
			return nil, nil, fmt.Errorf("ompd_init stores %d layout values, and the lists of libomp %d and %d, which differ, both have that many: the release of this unknown build cannot be told", n, fit[0].version, l.version)
		}
		versions = append(versions, l.version)
	}
	if _, ok := knownReleases[r.k.BuildID]; !ok {
		r.warn("libomp build %s is not one ompd-inspect knows: its %d layout values are named with the list that libomp %s share, and checked against the code that uses them", shortID(r.k.BuildID), n, joinInts(versions))
	}
	return fit[0].layout, versions, nil
}

// breakpointNames returns the breakpoint function list of the release the
// layout was named with (they agree when several were).
func (r *recoverer) breakpointNames() []string {
	all, _ := lists()
	var out []string
	for _, l := range all {
		if !slices.Contains(r.k.NameLists, l.version) {
			continue
		}
		if out != nil && !slices.Equal(out, l.breakpoints) {
			return nil
		}
		out = l.breakpoints
	}
	return out
}

func joinInts(v []int) string {
	var s []string
	for _, x := range v {
		s = append(s, strconv.Itoa(x))
	}
	return strings.Join(s, ", ")
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	if id == "" {
		return "(no build-id)"
	}
	return id
}

// errNone says an anchor found nothing.
var errNone = errors.New("not found")
