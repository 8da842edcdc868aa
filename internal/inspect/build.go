package inspect

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ompd-inspect/ompd-inspect/internal/handles"
	"github.com/ompd-inspect/ompd-inspect/internal/trust"
	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/ompd/backend"
	"github.com/ompd-inspect/ompd-inspect/ompd/dll"
	"github.com/ompd-inspect/ompd-inspect/ompd/gomp"
	"github.com/ompd-inspect/ompd-inspect/ompd/llvm"
	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/unwind"
)

// MaxNesting bounds every walk up a chain of regions or tasks; a longer
// chain is reported as a warning naming the structure (a cycle, or memory
// that changed under us).
const MaxNesting = 256

// Source says what kind of target a report is built from.
type Source struct {
	Kind string // "process" or "core"
	Core string // the core file's path, for cores

	backend string // the backend asked for, set by Build
}

// Options says how to build a report.
type Options struct {
	// Backend is backend.NameNative (the default when empty) or
	// backend.NameDLL: the runtime's own OMPD library.
	Backend string
	// Library is the OMPD library the dll backend loads; empty means the
	// one the runtime names in ompd_dll_locations.
	Library string
	// Stacks, when not nil, gives a thread's native stack walked from its
	// registers to its outermost frame (false when it has none): the
	// stacks unwound while the report is built. The report then reads a
	// thread's call into the runtime from it, where it would walk the
	// thread's stack again.
	Stacks func(th *target.Thread) ([]unwind.Frame, bool)
	// NoSettings leaves the ICVs and the runtime's control variables out
	// of the report (ICVs and ControlVars empty), for a view that shows
	// neither: nothing else in the report depends on them, and reading
	// them is about a fifth of the read of a few threads' report. The
	// warnings reading them would give (and an OMPD library's messages
	// then) are left out with them.
	NoSettings bool
}

// Build inspects a stopped target and returns its report.
//
// A target whose OpenMP state cannot be read at all (no OpenMP runtime, a
// runtime whose layout cannot be known or trusted) still gets a report:
// its threads (none of them OpenMP threads) and, for the views that show
// stacks, their backtraces, with a warning that says what is missing and
// why. Only a target without threads, and a backend the caller asked for
// that cannot be used, are errors.
func Build(t target.Target, src Source, opts Options) (*Report, error) {
	src.backend = opts.Backend
	rt, err := FindRuntime(t)
	if err != nil {
		return degraded(t, src, nil, err)
	}
	if FamilyOf(rt) == gomp.Family {
		return buildGNU(t, src, opts, rt)
	}
	know, err := KnowledgeOf(rt)
	if err != nil {
		return degraded(t, src, rt, err)
	}
	cb := NewCallbacks(t, rt)
	cb.UseKnowledge(know)
	cb.stacks = opts.Stacks
	if err := know.CheckMemory(t, rt); err != nil {
		return degraded(t, src, rt, err)
	}
	learned := keptWith[llvm.Learned](rt)
	nat, err := llvm.ProcessInitialize(cb, rt.Name, learned.get())
	if err != nil {
		return degraded(t, src, rt, fmt.Errorf("initializing OMPD on %s: %w", rt.Name, err))
	}
	// The layout the report read, once it is read.
	defer func() { learned.set(t, nat.Learned()) }()
	b := &builder{t: t, cb: cb, nat: nat, rt: rt, know: know, unavailable: map[string]bool{}, noSettings: opts.NoSettings}
	b.dllLocs, b.dllLocsErr = nat.DLLLocations()
	switch opts.Backend {
	case "", backend.NameNative:
		b.as = llvm.Backend(nat)
	case backend.NameDLL:
		if err := b.openDLL(opts.Library); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown backend %q: want %s or %s", opts.Backend, backend.NameNative, backend.NameDLL)
	}
	b.r.Runtime.Family = "llvm"
	return b.build(src)
}

// RuntimeThreadPointers returns the thread pointers (pthread_t values) of
// at most n of the threads the OpenMP runtime of t lists in a table of its
// own, in the table's order (the initial thread's first). LLVM's libomp
// keeps one; GNU libgomp keeps none and gives none, as does a runtime
// that cannot be read. It serves a rehearsal on a running process, whose
// threads' registers (the thread pointer among them) cannot be read.
func RuntimeThreadPointers(t target.Target, n int) []uint64 {
	rt, err := FindRuntime(t)
	if err != nil || FamilyOf(rt) == gomp.Family {
		return nil
	}
	know, err := KnowledgeOf(rt)
	if err != nil {
		return nil
	}
	cb := NewCallbacks(t, rt)
	cb.UseKnowledge(know)
	if know.CheckMemory(t, rt) != nil {
		return nil
	}
	nat, err := llvm.ProcessInitialize(cb, rt.Name, keptWith[llvm.Learned](rt).get())
	if err != nil {
		return nil
	}
	ths, err := nat.Threads()
	if err != nil {
		return nil
	}
	var out []uint64
	for _, th := range ths {
		if len(out) == n {
			break
		}
		if id, err := th.ID(ompd.ThreadIDPthread); err == nil && id != 0 {
			out = append(out, id)
		}
	}
	return out
}

// buildGNU builds the report of a target on GNU libgomp: its own reader
// (ompd/gomp) behind the same backend interface; no OMPD library exists
// for it.
func buildGNU(t target.Target, src Source, opts Options, rt *target.Module) (*Report, error) {
	if opts.Backend != "" && opts.Backend != backend.NameNative {
		return nil, fmt.Errorf("the dll backend: %s is GNU libgomp, for which no OMPD library exists; the native backend reads it", rt.Name)
	}
	cb := NewCallbacks(t, rt)
	cb.stacks = opts.Stacks
	learned := keptWith[gomp.Learned](rt)
	gas, err := gomp.NewAddressSpace(cb, learned.get())
	if err != nil {
		return degraded(t, src, rt, err)
	}
	learned.set(t, gas.Learned())
	b := &builder{t: t, cb: cb, rt: rt, unavailable: map[string]bool{}, gnu: gas, noSettings: opts.NoSettings}
	b.as = gomp.Backend(gas)
	b.r.Runtime.Family = "gnu"
	b.r.Warnings = append(b.r.Warnings, gas.Warnings...)
	return b.build(src)
}

// build fills the report from b.as.
func (b *builder) build(src Source) (*Report, error) {
	t := b.t
	defer b.release()
	b.r.Target = TargetInfo{Kind: src.Kind, PID: t.PID(), Core: src.Core, Crash: crashOf(t, src)}
	if mods := t.Modules(); len(mods) > 0 {
		b.r.Target.Executable = mods[0].Name
	}
	b.r.Warnings = append(b.r.Warnings, t.Warnings()...)
	if b.gnu != nil {
		b.runtimeGNU()
	} else {
		b.runtime()
	}
	b.threads()
	b.queued()
	b.blocked()
	if !b.noSettings {
		b.icvs()
		b.controlVars()
	}
	if lib, ok := b.as.(interface{ Messages() []string }); ok && b.r.Runtime.OMPDLibrary != nil {
		b.r.Runtime.OMPDLibrary.Messages = lib.Messages()
	}
	if u, ok := b.as.(interface{ Unavailable() []string }); ok {
		for _, f := range u.Unavailable() {
			b.unavailable[f] = true
		}
	}
	for f := range b.unavailable {
		b.r.Runtime.Unavailable = append(b.r.Runtime.Unavailable, f)
	}
	sort.Strings(b.r.Runtime.Unavailable)
	b.r.normalize()
	return &b.r, nil
}

// degraded is the report of a target whose OpenMP state cannot be read:
// its threads, and a warning that says why there is nothing else. A
// target without any thread (a core cut short) has nothing to report: why
// is the error then.
func degraded(t target.Target, src Source, rt *target.Module, why error) (*Report, error) {
	if len(t.Threads()) == 0 {
		return nil, why
	}
	if src.backend != "" && src.backend != backend.NameNative {
		// The OMPD library the caller asked for has nothing to work on.
		return nil, fmt.Errorf("the dll backend: %w", why)
	}
	r := Report{Target: TargetInfo{Kind: src.Kind, PID: t.PID(), Core: src.Core, Crash: crashOf(t, src)}}
	if mods := t.Modules(); len(mods) > 0 {
		r.Target.Executable = mods[0].Name
	}
	if rt != nil {
		r.Runtime.Library = rt.Name
	}
	r.Runtime.Backend = backend.NameNative
	r.Warnings = append(r.Warnings, t.Warnings()...)
	r.Warnings = append(r.Warnings, fmt.Sprintf("no OpenMP state: %v; the threads and their stacks are shown without it", why))
	for _, nt := range t.Threads() {
		r.Threads = append(r.Threads, Thread{OSTID: nt.TID, TaskStack: []string{}})
	}
	r.normalize()
	return &r, nil
}

// openDLL loads the runtime's own OMPD library: path, or the first of the
// runtime's ompd_dll_locations that loads.
func (b *builder) openDLL(path string) error {
	if !dll.BuiltIn {
		return dll.ErrNotBuiltIn
	}
	paths := []string{path}
	if path == "" {
		if b.dllLocsErr != nil {
			return fmt.Errorf("the dll backend: %w", b.dllLocsErr) // it names ompd_dll_locations
		}
		paths = dll.Candidates(b.dllLocs, b.rt.File)
		if len(paths) == 0 {
			return fmt.Errorf("the dll backend: the runtime %s names no OMPD library (ompd_dll_locations is empty); give one with --ompd-library, or use the native backend (--backend native), which works without it", b.rt.Name)
		}
	}
	var errs []string
	for _, p := range paths {
		if path == "" {
			// The target named p: load it only if nobody but root and the
			// invoking user could have written it.
			resolved, err := dll.Trusted(p, trust.Invoker())
			if trust.IsUntrusted(err) {
				errs = append(errs, fmt.Sprintf("not loading %s: %v: only files that root or you own, in directories only root or you can write, are loaded from where a target points (name a library you trust with --ompd-library)", p, err))
				continue
			}
			if err != nil {
				errs = append(errs, fmt.Sprintf("loading OMPD library %v", err))
				continue
			}
			p = resolved
		}
		as, err := dll.Open(p, b.cb, b.rt.Name)
		if err == nil {
			b.as = as
			lp, ver := p, ""
			if l, ok := as.(interface{ Library() (string, string) }); ok {
				lp, ver = l.Library()
			}
			b.r.Runtime.OMPDLibrary = &OMPDLibrary{Path: lp, Version: ver, Messages: []string{}}
			return nil
		}
		if errors.Is(err, dll.ErrNotBuiltIn) {
			return err
		}
		errs = append(errs, err.Error())
	}
	return fmt.Errorf("the dll backend: %s; the native backend (--backend native) works without it", strings.Join(errs, "; "))
}

type builder struct {
	t   target.Target
	cb  *Callbacks
	nat *llvm.AddressSpace
	as  backend.AddressSpace
	rt  *target.Module
	// know says where the runtime's symbols and layout come from (LLVM's
	// runtimes).
	know *Knowledge
	// gnu is GNU libgomp's state, nil for LLVM's runtimes.
	gnu *gomp.AddressSpace
	r   Report

	// dllLocs is the runtime's ompd_dll_locations, read once.
	dllLocs    []string
	dllLocsErr error

	// regions and tasks hold one handle per region and task; their
	// indexes are those of r.Regions and r.Tasks until normalize.
	regions handles.Table[backend.Parallel]
	tasks   handles.Table[backend.Task]
	threadH []backend.Thread // OpenMP thread handles, parallel to ompTIDs
	ompTIDs []int
	// threadsErr is the fault of the runtime's thread table, when it has
	// one (warned about once).
	threadsErr error
	// unavailable collects the report fields the backend cannot fill.
	unavailable map[string]bool
	// symbolized caches symbolize's answers by address.
	symbolized map[uint64][2]string
	// noSettings leaves out the ICVs and control variables
	// (Options.NoSettings).
	noSettings bool
}

// release gives every handle back, then the address space.
func (b *builder) release() {
	var errs []error
	for _, h := range b.threadH {
		errs = append(errs, h.Release())
	}
	errs = append(errs, b.regions.Release(), b.tasks.Release(), b.as.Release())
	if err := errors.Join(errs...); err != nil {
		b.warn("%v", err)
	}
}

// lacks records that the backend cannot fill field when err says so, and
// reports whether it did.
func (b *builder) lacks(err error, field string) bool {
	if err != nil && backend.Unsupported(err) {
		b.unavailable[field] = true
		return true
	}
	return false
}

// regionID and taskID name the object at index i of their table.
func (b *builder) regionID(i int) string {
	if l := b.regions.At(i).Label(); l != "" {
		return l
	}
	return fmt.Sprintf("region#%d", i+1)
}

func (b *builder) taskID(i int) string {
	if l := b.tasks.At(i).Label(); l != "" {
		return l
	}
	return fmt.Sprintf("task#%d", i+1)
}

func (b *builder) warn(format string, args ...any) {
	b.r.Warnings = append(b.r.Warnings, fmt.Sprintf(format, args...))
}

func strp(s string) *string { return &s }
func intp(i int) *int       { return &i }

// openMPVersionName turns the runtime's _OPENMP value into a version.
func openMPVersionName(v int) string {
	switch v {
	case 201511:
		return "4.5"
	case 201611:
		return "5.0 preview (TR4)"
	case 201811:
		return "5.0"
	case 202011:
		return "5.1"
	case 202111:
		return "5.2"
	case 202411:
		return "6.0"
	}
	return fmt.Sprint(v)
}

func (b *builder) runtime() {
	r := &b.r.Runtime
	r.Library = b.rt.Name
	r.LayoutSource, r.SymbolsSource = b.know.LayoutSource, b.know.SymbolsSource
	if b.know.DebugFile != "" {
		r.DebugFile = b.know.DebugFile
	}
	if rec := b.know.Recovered; rec != nil {
		r.Release = rec.Release
		b.r.Warnings = append(b.r.Warnings, rec.Warnings...)
	}
	r.Backend = b.as.Backend()
	if v, err := b.as.OMPVersion(); err == nil {
		r.OpenMPVersion = v
		r.Version = "LLVM OpenMP runtime, OpenMP " + openMPVersionName(v)
	} else {
		b.warn("runtime version: %v", err)
	}
	if b.dllLocsErr != nil {
		b.warn("%v", b.dllLocsErr) // it names ompd_dll_locations
	}
	r.OMPDDLLLocations = b.dllLocs
	if _, src, err := b.cb.typeIndex(); err == nil {
		r.TypeInfo = src
	} else {
		b.warn("construct locations from the runtime and queued tasks are unavailable: %v", err)
	}
	r.StateTracking = b.as.StateTracking()
	if r.StateTracking {
		r.StateSource = "runtime"
	}
	r.NeedsStateTracking = []string{}
	if !r.StateTracking {
		r.NeedsStateTracking = []string{"threads[].state", "threads[].wait_id", "tasks[].exit_frame", "tasks[].enter_frame"}
		r.Hint = "the program runs without OMPD state tracking: thread states, wait ids and task frames are not recorded. Start it with OMP_DEBUG=enabled to see them"
	}
}

// runtimeGNU describes GNU libgomp: its release, where its layout comes
// from, and that its thread states are inferred.
func (b *builder) runtimeGNU() {
	r := &b.r.Runtime
	g := b.gnu
	r.Library = b.rt.Name
	r.Backend = b.as.Backend()
	r.Version, _ = b.as.OMPVersionString()
	r.SymbolsSource = "runtime-symbols"
	r.LayoutSource = "code"
	if g.Layout.Release != 0 {
		r.LayoutSource = "release-table"
		r.TypeInfo = "release-table"
	}
	if g.Release.ByBuildID {
		r.Release = fmt.Sprintf("GCC %d", g.Release.Major)
	}
	r.StateSource = "inferred"
	r.NeedsStateTracking = []string{}
	r.OMPDDLLLocations = []string{}
}

// symbolize names the function at addr and gives its DWARF source line,
// once per address: a thousand threads' implicit tasks run one function.
func (b *builder) symbolize(addr uint64) (fn, loc string) {
	if s, ok := b.symbolized[addr]; ok {
		return s[0], s[1]
	}
	m := target.ModuleAt(b.t, addr)
	fn = funcNameIn(m, addr)
	if m != nil && m.Image != nil {
		if file, line, ok := m.Image.LineAt(addr - m.Bias); ok {
			loc = fmt.Sprintf("%s:%d", file, line)
		}
	}
	if b.symbolized == nil {
		b.symbolized = map[uint64][2]string{}
	}
	b.symbolized[addr] = [2]string{fn, loc}
	return fn, loc
}

// FuncName names the function of the target at addr (an entry point the
// runtime recorded): from its module's DWARF or symbols, else the address
// in hex; empty for 0.
func FuncName(t target.Target, addr uint64) string {
	return funcNameIn(target.ModuleAt(t, addr), addr)
}

// funcNameIn is FuncName for the module m that maps addr (nil for none).
func funcNameIn(m *target.Module, addr uint64) string {
	if addr == 0 {
		return ""
	}
	if m != nil && m.Image != nil {
		if name, ok := m.Image.FuncAt(addr - m.Bias); ok {
			return name
		}
	}
	return ompd.Hex(addr)
}

func (b *builder) threads() {
	if err := b.as.CheckThreads(); err != nil {
		// Every thread handle would fail the same way: say it once.
		b.threadsErr = err
		b.warn("%v", err)
		for _, nt := range b.t.Threads() {
			b.r.Threads = append(b.r.Threads, Thread{OSTID: nt.TID, TaskStack: []string{}})
		}
		return
	}
	ths := b.t.Threads()
	// Sized once: each thread has a task at least.
	b.r.Threads = slices.Grow(b.r.Threads, len(ths))
	b.r.Tasks = slices.Grow(b.r.Tasks, len(ths))
	for _, nt := range ths {
		th := Thread{OSTID: nt.TID}
		h, err := b.as.ThreadHandle(ompd.ThreadIDPthread, nt.ThreadPointer())
		if err != nil {
			if !errors.Is(err, ompd.ErrUnavailable) {
				b.warn("thread %d: %v", nt.TID, err)
			}
			b.r.Threads = append(b.r.Threads, th)
			continue
		}
		th.OpenMP = true
		if g, err := h.GTID(); err == nil {
			th.GTID = intp(g)
		} else if !b.lacks(err, "threads[].gtid") {
			b.warn("thread %d: %v", nt.TID, err)
		}
		if n, err := h.ThreadNum(); err == nil {
			th.ThreadNum = intp(n)
		} else if !errors.Is(err, ompd.ErrUnavailable) {
			b.warn("thread %d: %v", nt.TID, err)
		}
		if b.r.Runtime.StateTracking {
			if st, wait, err := h.State(); err == nil {
				th.State = strp(st.String())
				th.WaitID = &wait
			} else {
				b.warn("thread %d: %v", nt.TID, err)
			}
		} else if inf, ok := h.(interface {
			InferredState() (ompd.State, uint64)
			IdleReason() string
		}); ok {
			st, futex := inf.InferredState()
			th.State = strp(st.String())
			if futex != 0 {
				th.Futex = strp(ompd.Hex(futex))
			}
			if why := inf.IdleReason(); why != "" {
				th.Idle = strp(why)
			}
		}
		var region = -1
		if p, err := h.CurrentParallel(); err == nil {
			region = b.addRegionChain(nt.TID, p)
			if region >= 0 {
				th.Region = strp(b.r.Regions[region].ID)
			}
		} else if !errors.Is(err, ompd.ErrUnavailable) {
			b.warn("thread %d: current parallel region: %v", nt.TID, err)
		}
		if w, ok := h.(ompd.Waiter); ok {
			if bo, err := w.BlockedOn(); err != nil {
				b.warn("thread %d: what it waits for: %v", nt.TID, err)
			} else if bo != nil {
				th.BlockedOn = b.blockedOn(bo)
			}
		} else {
			// No OMPD call says what a thread waits for: what the
			// report says comes from its state or stack alone.
			b.unavailable["threads[].blocked_on"] = true
		}
		th.TaskStack = []string{}
		if k, err := h.CurrentTask(); err == nil {
			i := b.addTaskChain(k, nt.TID)
			t := b.r.Tasks[i]
			th.Task = strp(t.ID)
			th.Function, th.Location = t.Function, t.Location
			th.TaskStack = b.taskStack(nt.TID, i, region, th.ThreadNum)
		} else if !errors.Is(err, ompd.ErrUnavailable) {
			b.warn("thread %d: current task: %v", nt.TID, err)
		}
		b.threadH = append(b.threadH, h)
		b.ompTIDs = append(b.ompTIDs, nt.TID)
		b.r.Threads = append(b.r.Threads, th)
	}
}

// blockedOn turns what the runtime says a thread waits for into the
// model: the holder's thread pointer becomes its os_tid. A wait the
// backend found from the thread's call into the runtime has source
// "stack".
func (b *builder) blockedOn(w *ompd.Wait) *BlockedOn {
	bo := &BlockedOn{What: string(w.What), Name: w.Name, HolderUnknown: w.HolderUnknown, WaitingFor: []WaitTarget{}, Source: "runtime"}
	if w.FromCall {
		bo.Source = "stack"
	}
	if w.Object != 0 {
		bo.Object = ompd.Hex(w.Object)
	}
	if w.Team != 0 && w.What == ompd.WaitBarrier {
		bo.Object = ompd.Hex(w.Team)
	}
	if w.Holder != 0 {
		if nt, ok := b.cb.ThreadByPointer(w.Holder); ok {
			bo.Holder = intp(nt.TID)
		} else {
			bo.HolderUnknown = fmt.Sprintf("the runtime names holder %#x, which is none of the target's threads", w.Holder)
		}
	}
	return bo
}

// explicit reports whether task i is known to be an explicit task.
func (b *builder) explicit(i int) bool { return b.r.Tasks[i].Kind == "explicit" }

// taskStack returns the ids of the tasks thread tid is in the middle of,
// innermost first, from its current task (index cur): each task's
// scheduling task (recorded with state tracking), and at the bottom the
// thread's implicit task in its current region (found without state
// tracking too). Tasks not yet recorded are recorded as suspended.
//
// region is the index of the thread's current region (-1 when none) and
// num its thread number in it (nil when unknown).
func (b *builder) taskStack(tid, cur int, region int, num *int) []string {
	ids := []string{b.r.Tasks[cur].ID}
	seen := map[int]bool{cur: true}
	implicit := false
	for depth := 0; ; depth++ {
		if !b.explicit(cur) {
			implicit = true
			break
		}
		if depth == MaxNesting {
			b.warn("thread %d: the chain of scheduling tasks is longer than %d: stopped there (a cycle, or memory changing while read)", tid, MaxNesting)
			return ids
		}
		s, err := b.tasks.At(cur).Scheduling()
		if err != nil {
			if !errors.Is(err, ompd.ErrUnavailable) {
				b.warn("thread %d: scheduling task of %s: %v", tid, ids[len(ids)-1], err)
			}
			break
		}
		i := b.addTaskChain(s, 0)
		if seen[i] {
			b.warn("thread %d: the chain of scheduling tasks repeats task %s: stopped there (a cycle, or memory changing while read)", tid, b.r.Tasks[i].ID)
			return ids
		}
		ids = append(ids, b.r.Tasks[i].ID)
		seen[i] = true
		cur = i
	}
	if implicit || region < 0 || num == nil {
		return ids
	}
	it, err := b.regions.At(region).TaskIn(*num)
	if err != nil {
		b.warn("thread %d: its implicit task: %v", tid, err)
		return ids
	}
	if i := b.addTaskChain(it, 0); !seen[i] {
		ids = append(ids, b.r.Tasks[i].ID)
	}
	return ids
}

// addRegionChain records p and its enclosing regions (level >= 1) and
// returns p's index in r.Regions, or -1 when p is the initial implicit
// region. It takes p over: p is kept or released.
func (b *builder) addRegionChain(tid int, p backend.Parallel) int {
	var chain []int // indexes in r.Regions, from p outwards
	depth := 0
	for ; depth < MaxNesting; depth++ {
		level, err := p.Level()
		if err != nil {
			b.warn("thread %d: %v", tid, err)
			b.regions.ReleaseOne(p)
			break
		}
		if level == 0 {
			b.regions.ReleaseOne(p)
			break
		}
		idx, first := b.regions.Intern(p)
		p = b.regions.At(idx)
		if !first && slices.Contains(chain, idx) {
			b.warn("region %s: the chain of enclosing parallel regions repeats region %s: stopped there (a cycle, or memory changing while read)", b.r.Regions[chain[0]].ID, b.r.Regions[idx].ID)
			break
		}
		if first {
			b.newRegion(idx, level, p)
		}
		if reg := &b.r.Regions[idx]; reg.Serialized && !slices.Contains(reg.Threads, tid) {
			reg.Threads = append(reg.Threads, tid)
		}
		chain = append(chain, idx)
		if !first {
			break // the rest of the chain is recorded already
		}
		up, err := p.Enclosing()
		if err != nil {
			if !errors.Is(err, ompd.ErrUnavailable) {
				b.warn("region %s: enclosing region: %v", b.r.Regions[idx].ID, err)
			}
			break
		}
		p = up
	}
	if depth == MaxNesting {
		b.regions.ReleaseOne(p) // met, never kept
		b.warn("region %s: the chain of enclosing parallel regions is longer than %d: stopped there (a cycle, or memory changing while read)", b.r.Regions[chain[0]].ID, MaxNesting)
	}
	for i := 0; i+1 < len(chain); i++ {
		b.r.Regions[chain[i]].Parent = strp(b.r.Regions[chain[i+1]].ID)
	}
	if len(chain) == 0 {
		return -1
	}
	return chain[0]
}

// newRegion appends the region p, just interned at index idx, to
// r.Regions.
func (b *builder) newRegion(idx, level int, p backend.Parallel) {
	id := b.regionID(idx)
	reg := Region{ID: id, Level: level, Threads: []int{}}
	if ser, err := p.Serialized(); err == nil {
		reg.Serialized = ser
	} else if !b.lacks(err, "regions[].serialized") {
		b.warn("region %s: %v", id, err)
	}
	if al, err := p.ActiveLevel(); err == nil {
		reg.ActiveLevel = al
	}
	if n, err := p.TeamSize(); err == nil {
		reg.TeamSize = n
	} else {
		b.warn("region %s: %v", id, err)
	}
	if fn, err := p.Function(); err == nil {
		reg.EntryAddr = ompd.Hex(fn)
		var dwarfLoc string
		reg.Function, dwarfLoc = b.symbolize(fn)
		reg.Location = dwarfLoc
	} else if !errors.Is(err, ompd.ErrNeedsStateTracking) && !errors.Is(err, ompd.ErrNoLocation) {
		b.warn("region %s: entry function: %v", id, err)
	}
	if loc, err := p.Location(); err == nil {
		reg.Location = loc.String()
		reg.ConstructFunction = loc.Function
	} else if b.lacks(err, "regions[].construct_function") {
		b.unavailable["regions[].location"] = true
	} else if !errors.Is(err, ompd.ErrNoLocation) && (reg.Location == "" || b.r.Runtime.TypeInfo == "dwarf") {
		// With the runtime's DWARF types the construct's location is
		// readable: failing to read it is worth saying even when the
		// outlined function's line stands in for it.
		b.warn("region %s: source location: %v", id, err)
	}
	if !reg.Serialized {
		for i := 0; i < reg.TeamSize; i++ {
			th, err := p.ThreadIn(i)
			if err != nil {
				b.warn("region %s: thread %d: %v", id, i, err)
				continue
			}
			pt, err := th.ID(ompd.ThreadIDPthread)
			if rerr := th.Release(); rerr != nil {
				b.warn("region %s: thread %d: %v", id, i, rerr)
			}
			if err != nil {
				b.warn("region %s: thread %d: %v", id, i, err)
				continue
			}
			if nt, ok := b.cb.ThreadByPointer(pt); ok {
				reg.Threads = append(reg.Threads, nt.TID)
			} else {
				b.warn("region %s: thread %d (pthread %#x) is not among the target's threads", id, i, pt)
			}
		}
	}
	b.r.Regions = append(b.r.Regions, reg)
}

// addTaskChain records task k as running on tid (tid 0: suspended) and
// its generating tasks up the chain; it returns k's index in r.Tasks. It
// takes k over: k is kept or released.
func (b *builder) addTaskChain(k backend.Task, tid int) int {
	first, prev := -1, -1
	status := "running"
	if tid == 0 {
		status = "suspended"
	}
	var chain []int // indexes in r.Tasks of the tasks new in this walk
	for depth := 0; ; depth++ {
		if depth == MaxNesting {
			b.warn("task %s: the chain of generating tasks is longer than %d: stopped there (a cycle, or memory changing while read)", b.r.Tasks[first].ID, MaxNesting)
			b.tasks.ReleaseOne(k)
			return first
		}
		idx, isNew := b.tasks.Intern(k)
		k = b.tasks.At(idx)
		if first < 0 {
			first = idx
		}
		if !isNew && slices.Contains(chain, idx) {
			b.warn("task %s: the chain of generating tasks repeats task %s: stopped there (a cycle, or memory changing while read)", b.r.Tasks[first].ID, b.r.Tasks[idx].ID)
			return first
		}
		chain = append(chain, idx)
		if prev >= 0 {
			b.r.Tasks[prev].Parent = strp(b.taskID(idx))
		}
		if !isNew {
			t := &b.r.Tasks[idx]
			if status == "running" {
				t.Status, t.Thread = "running", intp(tid)
			}
			return first
		}
		b.newTask(idx, k, status, tid)
		status = "suspended"
		parent, err := k.Generating()
		if err != nil {
			if !errors.Is(err, ompd.ErrUnavailable) {
				b.warn("task %s: generating task: %v", b.r.Tasks[idx].ID, err)
			}
			return first
		}
		prev, k = idx, parent
	}
}

// newTask appends the task k, just interned at index idx, to r.Tasks.
func (b *builder) newTask(idx int, k backend.Task, status string, tid int) {
	id := b.taskID(idx)
	t := Task{ID: id, Status: status, Flags: []string{}}
	if status == "running" && tid != 0 {
		t.Thread = intp(tid)
	}
	f, known, err := k.Flags()
	if err != nil {
		b.warn("task %s: %v", id, err)
	}
	if known&backend.AllFlags != backend.AllFlags {
		b.unavailable["tasks[].flags"] = true
	}
	t.Kind = "implicit"
	if f.Explicit {
		t.Kind = "explicit"
	}
	if f.Final {
		t.Flags = append(t.Flags, "final")
	}
	if f.Explicit && f.Untied {
		t.Flags = append(t.Flags, "untied")
	}
	if f.Explicit && f.Serial {
		t.Flags = append(t.Flags, "undeferred")
	}
	var dwarfLoc string
	if fn, err := k.Function(); err == nil {
		t.EntryAddr = ompd.Hex(fn)
		t.Function, dwarfLoc = b.symbolize(fn)
	}
	if p, err := k.Parallel(); err == nil {
		// A region in the table has level >= 1; another one is named by
		// its label when its level says it is not the initial one.
		if i, ok := b.regions.Find(p); ok {
			t.Region = strp(b.r.Regions[i].ID)
		} else if l := p.Label(); l != "" {
			if lvl, err := p.Level(); err == nil && lvl >= 1 {
				t.Region = strp(l)
			}
		}
		b.regions.ReleaseOne(p)
	}
	if m, ok := k.(ompd.TaskgroupMember); ok {
		if tg, err := m.Taskgroup(); err != nil {
			b.warn("task %s: its taskgroup: %v", id, err)
		} else if tg != 0 {
			t.Taskgroup = strp(ompd.Hex(tg))
		}
	}
	if loc, err := k.Location(); err == nil {
		t.Location = loc.String()
		t.ConstructFunction = loc.Function
	} else {
		t.Location = dwarfLoc
		if b.lacks(err, "tasks[].construct_function") {
			b.unavailable["tasks[].location"] = true
			b.unavailable["threads[].location"] = true // the current task's
			// stacks names outlined task functions after the construct's
			// function.
			b.unavailable["backtraces[].frames[].user_function"] = true
		} else if !errors.Is(err, ompd.ErrNoLocation) && b.r.Runtime.TypeInfo == "dwarf" {
			b.warn("task %s: source location: %v", id, err)
		}
	}
	if b.r.Runtime.StateTracking {
		if exit, enter, err := k.Frame(); err == nil {
			t.ExitFrame, t.EnterFrame = strp(ompd.Hex(exit)), strp(ompd.Hex(enter))
		}
	}
	b.r.Tasks = append(b.r.Tasks, t)
}

func (b *builder) queued() {
	tasks, err := b.as.QueuedTasks()
	// runtime() said why there are no type layouts, threads() what is
	// wrong with the thread table.
	if err != nil && !errors.Is(err, ompd.ErrNoTypeLayouts) && !b.lacks(err, "tasks[status=queued]") && b.threadsErr == nil {
		b.warn("queued tasks: %v", err)
	}
	for _, k := range tasks {
		b.addUnstarted(k, "queued")
	}
}

// addUnstarted records a task that has not started (queued or blocked)
// with its parent, and returns its index in r.Tasks, or false when the
// task was recorded already. It takes k over.
func (b *builder) addUnstarted(k backend.Task, status string) (int, bool) {
	idx, first := b.tasks.Intern(k)
	if !first {
		return idx, false
	}
	b.newTask(idx, k, status, 0)
	if parent, err := k.Generating(); err == nil {
		if pi, ok := b.tasks.Find(parent); ok {
			b.r.Tasks[idx].Parent = strp(b.r.Tasks[pi].ID)
		} else if l := parent.Label(); l != "" {
			b.r.Tasks[idx].Parent = strp(l)
		}
		b.tasks.ReleaseOne(parent)
	}
	return idx, true
}

// blocked records the explicit tasks that wait for dependences, with the
// tasks they wait for.
func (b *builder) blocked() {
	from := make([]backend.Task, b.tasks.Len())
	for i := range from {
		from[i] = b.tasks.At(i)
	}
	tasks, err := b.as.BlockedTasks(from)
	if err != nil && !errors.Is(err, ompd.ErrNoTypeLayouts) && !b.lacks(err, "tasks[status=blocked]") {
		b.warn("tasks waiting for dependences: %v", err)
	}
	for _, bt := range tasks {
		idx, ok := b.addUnstarted(bt.Task, "blocked")
		if !ok {
			continue
		}
		t := &b.r.Tasks[idx]
		t.WaitsFor = []string{}
		for _, p := range bt.Predecessors {
			if pi, ok := b.tasks.Find(p); ok {
				t.WaitsFor = append(t.WaitsFor, b.r.Tasks[pi].ID)
			} else {
				t.WaitsFor = append(t.WaitsFor, p.Label())
			}
			b.tasks.ReleaseOne(p)
		}
		t.PendingDependences = intp(bt.Pending)
	}
}

func (b *builder) icvs() {
	all, err := b.as.ICVs()
	if err != nil {
		b.warn("ICVs: %v", err)
		return
	}
	// Split by scope once, and sized once: a thousand threads have tens
	// of thousands of ICVs.
	scoped := map[ompd.Scope][]ompd.ICV{}
	for _, icv := range all {
		scoped[icv.Scope] = append(scoped[icv.Scope], icv)
	}
	b.r.ICVs = slices.Grow(b.r.ICVs, len(scoped[ompd.ScopeAddressSpace])+len(scoped[ompd.ScopeThread])*len(b.threadH)+
		len(scoped[ompd.ScopeParallel])*len(b.r.Regions)+len(scoped[ompd.ScopeTask])*len(b.r.Tasks))
	vals := make([]ompd.Value, len(all))
	errs := make([]error, len(all))
	// add reads the ICVs of a scope from h, one handle's at once
	// (backend.ReadICVs). Each owner is made an interface value once,
	// not once per ICV.
	add := func(icvs []ompd.ICV, owner any, h any) {
		backend.ReadICVs(b.as, h, icvs, vals, errs)
		for i, icv := range icvs {
			if err := errs[i]; err != nil {
				if owner == nil {
					b.warn("ICV %s (%s): %v", icv.Name, icv.Scope, err)
				} else {
					b.warn("ICV %s (%s %v): %v", icv.Name, icv.Scope, owner, err)
				}
				continue
			}
			var val any = vals[i].Num
			if vals[i].IsString {
				val = vals[i].Str
			}
			b.r.ICVs = append(b.r.ICVs, ICV{Name: icv.Name, Scope: icv.Scope.String(), Owner: owner, Value: val})
		}
	}
	add(scoped[ompd.ScopeAddressSpace], nil, b.as)
	for i, h := range b.threadH {
		add(scoped[ompd.ScopeThread], any(b.ompTIDs[i]), h)
	}
	for i, reg := range b.r.Regions { // index i is the region's in b.regions until normalize
		add(scoped[ompd.ScopeParallel], any(reg.ID), b.regions.At(i))
	}
	for i, t := range b.r.Tasks {
		add(scoped[ompd.ScopeTask], any(t.ID), b.tasks.At(i))
	}
}

func (b *builder) controlVars() {
	vars, err := b.as.DisplayControlVars()
	if err != nil {
		b.warn("display control variables: %v", err)
		return
	}
	for _, v := range vars {
		name, value, _ := strings.Cut(strings.TrimSpace(v), "=")
		b.r.ControlVars = append(b.r.ControlVars, ControlVar{Name: name, Value: strings.Trim(value, "'")})
	}
}

// normalize orders the report deterministically and replaces nil slices
// with empty ones so the JSON has [] rather than null.
func (r *Report) normalize() {
	sort.SliceStable(r.Regions, func(i, j int) bool {
		if r.Regions[i].Level != r.Regions[j].Level {
			return r.Regions[i].Level < r.Regions[j].Level
		}
		return r.Regions[i].ID < r.Regions[j].ID
	})
	for i := range r.Regions {
		if r.Regions[i].Serialized {
			sort.Ints(r.Regions[i].Threads)
		}
	}
	if r.Threads == nil {
		r.Threads = []Thread{}
	}
	for i := range r.Threads {
		if r.Threads[i].TaskStack == nil {
			r.Threads[i].TaskStack = []string{}
		}
	}
	if r.Runtime.Unavailable == nil {
		r.Runtime.Unavailable = []string{}
	}
	if r.Regions == nil {
		r.Regions = []Region{}
	}
	if r.Tasks == nil {
		r.Tasks = []Task{}
	}
	if r.ICVs == nil {
		r.ICVs = []ICV{}
	}
	if r.ControlVars == nil {
		r.ControlVars = []ControlVar{}
	}
	if r.Warnings == nil {
		r.Warnings = []string{}
	}
	if r.WaitGraph == nil {
		r.WaitGraph = []WaitEdge{}
	}
	if r.Diagnosis == nil {
		r.Diagnosis = []Diagnosis{}
	}
	if r.Runtime.OMPDDLLLocations == nil {
		r.Runtime.OMPDDLLLocations = []string{}
	}
}
