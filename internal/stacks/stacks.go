// Package stacks builds OpenMP-aware backtraces: it unwinds every thread
// of a target (target/unwind), names each frame, classifies it as user,
// OpenMP runtime or system code, marks where parallel regions and tasks
// begin, and continues a worker's stack into the stack of the thread that
// encountered its region. It reads OpenMP facts only from an
// inspect.Report, so it works the same with and without state tracking.
package stacks

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
	"github.com/ompd-inspect/ompd-inspect/target/unwind"
)

// MaxHops bounds how many times one logical stack continues on another
// thread (one hop per nesting level).
const MaxHops = 64

// phys is one native frame, named and classified, or a tail call frame
// rebuilt from DWARF call-site information between two native frames.
type phys struct {
	pc       uint64
	cfa      uint64
	kind     string
	function string
	file     string
	line     int
	// inlined are the functions inlined at this pc, innermost first, each
	// with its own source position; function, file and line are then
	// those of the concrete function that contains them.
	inlined []elf.SourceFrame
	// tail is set for a function that called the frame before it by a
	// tail call (a jump) and so has no frame of its own on the stack:
	// pc is the address after its jump, cfa is 0 (see elf.TailCalls).
	tail bool
	// calls names the function the frame's call instruction called, for
	// the innermost user frame under runtime or system frames: the entry
	// point it entered, which may have left no frame (a tail jump).
	calls string
}

// threadStack is a thread's native stack and what was found on it.
type threadStack struct {
	tid      int
	frames   []phys
	stop     unwind.Stop
	complete bool
	// boundaries maps a region id to the index of the frame that begins
	// the region on this thread (the outlined function's frame).
	boundaries map[string]int
}

// builder holds one Add call's state.
type builder struct {
	rep *inspect.Report
	// t is the target, only for its modules: Add may run after it was
	// detached.
	t       target.Target
	stacks  map[int]*threadStack
	threads map[int]*inspect.Thread
	regions map[string]*inspect.Region
	tasks   map[string]*inspect.Task
	// taskFns maps an explicit task's entry function to the tasks that
	// run it.
	taskFns map[string][]*inspect.Task
	// exitFrames maps an OMPD exit frame address to its task.
	exitFrames map[uint64]*inspect.Task
	// fam is the runtime's family (what its functions mean); nil when
	// the target has no runtime ompd-inspect knows.
	fam ompd.Family
	// names and tails keep what name and tailCalls found, for the
	// threads that run the same code.
	names map[nameKey]phys
	tails map[tailKey][]phys
	pcs   map[uint64]*string // frames' pc strings, shared (pcString)
}

// Walks are the native stacks of a target's threads, unwound while it was
// stopped: everything Add needs from the target's memory, so that frames
// can be named and placed after the target has resumed.
type Walks struct {
	threads    []walk
	t          target.Target // for its modules (Add reads no memory)
	runtimeLib string        // the runtime's module name, as Unwind was told
	warnings   []string
}

// Runtime returns the name of the module Unwind was told is the OpenMP
// runtime. Add needs walks made for its report's runtime.
func (w *Walks) Runtime() string { return w.runtimeLib }

// walk is one thread's native stack.
type walk struct {
	tid    int
	frames []unwind.Frame
	stop   unwind.Stop
	// callAt is the index in frames of the innermost frame in user code
	// (by its module) below other frames, -1 when there is none or its
	// call could not be decoded; callee is the entry point its call
	// instruction called (unwind.CallTarget), read from memory here
	// because Add may run after the target resumed.
	callAt int
	callee uint64
}

// Unwind unwinds every thread of t, whose OpenMP runtime is the module
// named runtimeLib (a report's Runtime.Library; "" when there is none). It
// must run while the target is stopped; Add then needs only the target's
// modules and their images, so the target may be detached (but not
// closed) before it. It may run while a report of the same target is
// built: both only read the target's memory (see StartUnwind).
func Unwind(t target.Target, runtimeLib string) *Walks {
	u := StartUnwind(t, runtimeLib, runtime.GOMAXPROCS(0))
	return u.Wait()
}

// Unwinding is an Unwind under way (StartUnwind).
type Unwinding struct {
	w      *Walks
	u      *unwind.Unwinder
	ths    []target.Thread
	byTID  map[int]int    // index in ths by thread id
	state  []atomic.Int32 // of each thread's walk: walkFree, walkTaken, walkDone
	next   atomic.Int64   // the next thread to walk
	wg     sync.WaitGroup
	failed atomic.Pointer[any] // a walk's panic, raised again by Wait

	ahead sync.Once // the threads' stack pages read ahead (readStacksAhead)
}

// States of a thread's walk in an Unwinding.
const (
	walkFree  = iota // no one walks it yet
	walkTaken        // a goroutine walks it
	walkDone         // its frames are there (none if the walk panicked)
)

// StartUnwind begins Unwind on workers goroutines (none is fine) and
// returns at once. The threads are walked on every CPU the caller gives:
// the target is held stopped meanwhile, and most of a walk is waiting for
// its memory reads. A caller that builds a report meanwhile gives one CPU
// fewer than it has, so that the report has a CPU of its own (with one
// more goroutine than CPUs it had two thirds of one, and was the longer
// of the two), then lends its goroutine with Help when it is done.
func StartUnwind(t target.Target, runtimeLib string, workers int) *Unwinding {
	u := &Unwinding{w: &Walks{t: t, runtimeLib: runtimeLib}}
	func() {
		// Kept for Wait, as a walk's: the caller builds its report first.
		defer u.keepPanic()
		u.u = unwind.New(t)
		u.ths = t.Threads()
	}()
	u.w.threads = make([]walk, len(u.ths))
	u.state = make([]atomic.Int32, len(u.ths))
	u.byTID = make(map[int]int, len(u.ths))
	for i := range u.ths {
		if _, dup := u.byTID[u.ths[i].TID]; dup {
			u.byTID[u.ths[i].TID] = -1 // a core's (damaged) list: which is meant is not known
			continue
		}
		u.byTID[u.ths[i].TID] = i
	}
	for range min(workers, len(u.ths)) {
		u.wg.Go(u.Help)
	}
	return u
}

// keepPanic, deferred, keeps a panic for Wait.
func (u *Unwinding) keepPanic() {
	if p := recover(); p != nil {
		u.failed.CompareAndSwap(nil, &p)
	}
}

// Help walks threads not yet taken on the calling goroutine until none is
// left. A walk's panic is kept for Wait.
func (u *Unwinding) Help() {
	defer u.keepPanic()
	u.ahead.Do(u.readStacksAhead)
	// The frames of the threads this goroutine walks share arrays (an
	// array for each thread was a tenth of the walk), sized for the
	// threads left: an array is cleared when it is made, and one of
	// arenaFrames cost a few threads' walk a millisecond.
	var arena []unwind.Frame
	for {
		i := int(u.next.Add(1) - 1)
		if i >= len(u.ths) {
			return
		}
		if !u.state[i].CompareAndSwap(walkFree, walkTaken) {
			continue // Frames walked it
		}
		if cap(arena)-len(arena) < arenaRoom {
			arena = make([]unwind.Frame, 0, arenaSize(len(u.ths)-i))
		}
		arena = u.walk(i, arena)
	}
}

// arenaSize is how many frames an array of Help's holds when left threads
// are not yet taken: framesPerThread each, at least arenaRoom and at most
// arenaFrames.
func arenaSize(left int) int {
	return min(max(left*framesPerThread, arenaRoom), arenaFrames)
}

// readStacksAhead asks a target that reads ahead (target.Prefetcher) for
// the page at every thread's stack pointer, which its walk reads first: a
// thousand pages in one system call cost a third of what they cost one
// by one. The first goroutine to help does it; the others wait for it,
// as their walks need those pages.
func (u *Unwinding) readStacksAhead() {
	p, ok := u.w.t.(target.Prefetcher)
	if !ok {
		return
	}
	sps := make([]uint64, 0, len(u.ths))
	for _, th := range u.ths {
		if th.Regs.Rsp != 0 {
			sps = append(sps, th.Regs.Rsp)
		}
	}
	p.Prefetch(sps)
}

// Frames returns the frames of thread th of the target, walking it now on
// the calling goroutine unless another has (waiting for that walk to
// end). The report built beside the unwinding asks this of a thread whose
// call into the runtime it reads (the lock a thread waits for, on a
// runtime that records no state): one walk of each thread instead of two.
// It returns false for a thread the unwinding does not know, or whose id
// two of the target's threads have.
func (u *Unwinding) Frames(th *target.Thread) ([]unwind.Frame, bool) {
	i, ok := u.byTID[th.TID]
	if !ok || i < 0 {
		return nil, false
	}
	if u.state[i].CompareAndSwap(walkFree, walkTaken) {
		func() {
			defer u.keepPanic()
			u.walk(i, nil)
		}()
	}
	// A walk takes tens of microseconds.
	for u.state[i].Load() != walkDone {
		runtime.Gosched()
	}
	return u.w.threads[i].frames, true
}

// Sizes of Help's arrays of frames: at most arenaFrames; a new one is
// made when one has room for fewer than arenaRoom (a walk that needs more
// moves its own frames to a larger array); framesPerThread is the depth
// of an OpenMP thread's stack, for the size (10 to 20 frames are usual).
const (
	arenaFrames     = 2048
	arenaRoom       = 64
	framesPerThread = 24
)

// walk unwinds thread i, its frames appended to arena, and returns the
// arena. The thread's frames are a slice of it that appending to the
// arena cannot reach. A walk that outgrows the arena has its frames moved
// to an array of their own (the arena's other threads' frames are not
// copied), whose room is the arena returned.
func (u *Unwinding) walk(i int, arena []unwind.Frame) []unwind.Frame {
	// Done, with or without frames, also when the walk panics: a
	// goroutine in Frames waits for it.
	defer u.state[i].Store(walkDone)
	t, th := u.w.t, u.ths[i]
	wk := &u.w.threads[i]
	wk.tid, wk.callAt = th.TID, -1
	start := len(arena)
	frames, stop := u.u.UnwindAppend(arena[start:start], th)
	wk.frames, wk.stop = frames[:len(frames):len(frames)], stop
	if len(frames) > cap(arena)-start {
		arena = frames // moved: append made it a larger array
	} else {
		arena = arena[:start+len(frames)]
	}
	for j := range wk.frames {
		f := &wk.frames[j]
		if classifyModule(f.Module, u.w.runtimeLib) != inspect.KindUser {
			continue
		}
		// By the module alone: naming may yet make _start or _init
		// system code, whose calls are not looked at, so a user frame
		// beyond them loses its call (no stack of an OpenMP thread has
		// one there).
		if j > 0 && !f.ExactPC() {
			if callee, ok := unwind.CallTarget(t, f.PC); ok {
				wk.callAt, wk.callee = j, callee
			}
		}
		break
	}
	return arena
}

// Wait helps (Help) until every thread is walked, waits for the workers
// and returns the walks. A walk's panic is raised again here, on the
// caller's goroutine, whose recover releases the target.
func (u *Unwinding) Wait() *Walks {
	u.Help()
	u.wg.Wait()
	if p := u.failed.Load(); p != nil {
		panic(*p)
	}
	// Sorted: the order they were met in depends on the walks'.
	if u.u != nil {
		u.w.warnings = u.u.Warnings()
		slices.Sort(u.w.warnings)
	}
	return u.w
}

// Add fills rep.Backtraces and each thread's UserFrame from the stacks w
// (Unwind of the same report's target, told its Runtime.Library). The
// target may have resumed; its module images must still be open.
func Add(rep *inspect.Report, w *Walks) {
	b := &builder{
		rep: rep, t: w.t,
		stacks:     make(map[int]*threadStack, len(w.threads)),
		threads:    make(map[int]*inspect.Thread, len(rep.Threads)),
		regions:    make(map[string]*inspect.Region, len(rep.Regions)),
		tasks:      make(map[string]*inspect.Task, len(rep.Tasks)),
		taskFns:    map[string][]*inspect.Task{},
		exitFrames: make(map[uint64]*inspect.Task, len(rep.Tasks)),
		names:      map[nameKey]phys{},
		tails:      map[tailKey][]phys{},
	}
	for _, m := range w.t.Modules() {
		if rep.Runtime.Library != "" && m.Name == rep.Runtime.Library {
			b.fam = inspect.FamilyOf(m)
		}
	}
	for i := range rep.Threads {
		b.threads[rep.Threads[i].OSTID] = &rep.Threads[i]
	}
	for i := range rep.Regions {
		r := &rep.Regions[i]
		b.regions[r.ID] = r
	}
	for i := range rep.Tasks {
		k := &rep.Tasks[i]
		b.tasks[k.ID] = k
		if k.Kind == "explicit" && k.Function != "" {
			b.taskFns[k.Function] = append(b.taskFns[k.Function], k)
		}
		if k.ExitFrame != nil {
			if a := parseAddr(*k.ExitFrame); a != 0 {
				b.exitFrames[a] = k
			}
		}
	}
	indexModules(w.threads)
	// The named frames of every thread share one array too (as the
	// backtraces' below), sized for the frames walked; tail calls may
	// outgrow it.
	walked := 0
	for i := range w.threads {
		walked += len(w.threads[i].frames)
	}
	named := make([]phys, 0, walked)
	stacks := make([]threadStack, len(w.threads))
	order := make([]*threadStack, 0, len(w.threads))
	for i := range w.threads {
		wk := &w.threads[i]
		ts := &stacks[i]
		*ts = threadStack{tid: wk.tid, stop: wk.stop, complete: wk.stop.Complete(), boundaries: map[string]int{}}
		start := len(named)
		for j := range wk.frames {
			named = append(named, b.name(&wk.frames[j]))
			if j+1 < len(wk.frames) {
				named = append(named, b.tailCalls(&wk.frames[j], &wk.frames[j+1])...)
			}
		}
		if len(named) > start {
			ts.frames = named[start:len(named):len(named)]
		}
		b.markCall(ts, wk)
		b.stacks[wk.tid] = ts
		order = append(order, ts)
	}
	for _, msg := range w.warnings {
		rep.Warnings = append(rep.Warnings, "unwinding: "+msg)
	}
	for _, ts := range order {
		b.regionEntries(ts)
	}
	b.implicitTasks()
	for _, ts := range order {
		b.findBoundaries(ts)
	}
	// The backtraces' frames share one array, sized for every thread's
	// frames twice (a worker's stack goes on on its encountering thread)
	// and a few markers, which a stack of several hops can outgrow (it
	// then grows as a slice does): appending frame by frame to a slice
	// of each was most of the time Add took at 1024 threads. The
	// backtraces keep the array alive together.
	size := 0
	for _, ts := range order {
		for _, p := range ts.frames {
			size += 2 * (1 + len(p.inlined))
		}
		size += 4
	}
	arena := make([]inspect.Frame, 0, size)
	rep.Backtraces = slices.Grow(rep.Backtraces, len(order))
	for _, ts := range order {
		bt := inspect.Backtrace{OSTID: ts.tid, Stop: ts.stop.String(), Complete: ts.complete}
		th := b.threads[ts.tid]
		if th != nil {
			bt.GTID, bt.OpenMP, bt.State = th.GTID, th.OpenMP, th.State
		}
		// A backtrace's frames stay where they are if the array grows:
		// the full slice expression keeps the next one's off them.
		start := len(arena)
		arena = b.logical(arena, ts, 0, 0, map[string]bool{})
		if len(arena) > start {
			bt.Frames = arena[start:len(arena):len(arena)]
		}
		bt.Activity = activity(ts.frames, th != nil && th.Region != nil, b.fam)
		if th != nil && th.OpenMP && rep.Runtime.StateSource == "inferred" {
			b.inferState(ts, th, &bt)
		}
		b.userFunctions(bt.Frames)
		if it := th; it != nil {
			for _, f := range bt.Frames {
				if f.Kind == inspect.KindUser && f.Thread == it.OSTID {
					it.UserFrame = &inspect.FrameRef{Function: displayName(f), File: f.File, Line: f.Line}
					break
				}
			}
		}
		rep.Backtraces = append(rep.Backtraces, bt)
	}
}

// parseAddr reads a "0x..." address, 0 when s is not one.
func parseAddr(s string) uint64 {
	hex, ok := strings.CutPrefix(s, "0x")
	if !ok {
		return 0
	}
	v, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return 0
	}
	return v
}

func hex(a uint64) *string {
	s := ompd.Hex(a)
	return &s
}

// nameKey is what naming a native frame depends on: its module and the
// address looked up.
type nameKey struct {
	m      *target.Module
	lookup uint64
}

// name symbolizes and classifies one native frame. Threads in the same
// code share their frames' names: each address is looked up once.
func (b *builder) name(f *unwind.Frame) phys {
	k := nameKey{f.Module, f.LookupPC()}
	if p, ok := b.names[k]; ok {
		p.pc, p.cfa = f.PC, f.CFA
		return p
	}
	p := b.lookupName(f)
	b.names[k] = p
	return p
}

// lookupName symbolizes and classifies one native frame.
func (b *builder) lookupName(f *unwind.Frame) phys {
	p := phys{pc: f.PC, cfa: f.CFA, kind: b.classify(f.Module)}
	var sf []elf.SourceFrame
	if m := f.Module; m != nil && m.Image != nil {
		sf = m.Image.FramesAt(f.LookupPC() - m.Bias)
	}
	if n := len(sf); n > 0 {
		p.function, p.file, p.line = sf[n-1].Function, sf[n-1].File, sf[n-1].Line
		p.inlined = sf[:n-1]
	} else if fn, ok := f.Function(); ok {
		p.function = fn // the vDSO, which is no module
	}
	if p.kind == inspect.KindUser && systemFunctions[p.function] {
		p.kind = inspect.KindSystem
	}
	return p
}

// markCall sets calls of the innermost user frame of ts when frames
// inside other code are above it: the entry point its call instruction
// called (unwind.CallTarget, read by Unwind), named only when that
// address starts a function of its module.
func (b *builder) markCall(ts *threadStack, wk *walk) {
	for i, p := range ts.frames {
		if p.kind != inspect.KindUser {
			continue
		}
		// Unwind decoded the call of the native frame callAt: it must be
		// this frame (tail call frames have none).
		if i == 0 || p.tail || wk.callAt < 0 || wk.frames[wk.callAt].PC != p.pc {
			return
		}
		callee := wk.callee
		if m := target.ModuleAt(b.t, callee); m != nil && m.Image != nil && callee >= m.Bias {
			if sym, ok := m.Image.SymbolAt(callee - m.Bias); ok && sym.Value == callee-m.Bias {
				ts.frames[i].calls = sym.Name
			}
		}
		return
	}
}

// tailCalls returns the tail call frames between the native frame f and
// its caller: the functions that jumped to f's function after the
// caller's call instruction, innermost first. There are only any when
// both frames are in the same module with DWARF call-site information and
// the caller's pc is a return address.
func (b *builder) tailCalls(f, caller *unwind.Frame) []phys {
	k := tailKey{f.Module, caller.Module, caller.PC, f.LookupPC(), caller.ExactPC()}
	if out, ok := b.tails[k]; ok {
		return out
	}
	out := b.lookupTailCalls(f, caller)
	b.tails[k] = out
	return out
}

// tailKey is what the tail calls between two frames depend on.
type tailKey struct {
	m, cm            *target.Module
	caller, function uint64
	exact            bool
}

// lookupTailCalls finds the tail call frames between f and its caller.
func (b *builder) lookupTailCalls(f, caller *unwind.Frame) []phys {
	m := f.Module
	cm := caller.Module
	if m == nil || m.Image == nil || cm == nil || cm.Image != m.Image || cm.Bias != m.Bias || caller.ExactPC() || caller.PC < m.Bias {
		return nil
	}
	tcs := m.Image.TailCalls(caller.PC-m.Bias, f.LookupPC()-m.Bias)
	if len(tcs) == 0 {
		return nil
	}
	kind := b.classify(m)
	out := make([]phys, 0, len(tcs))
	for _, tc := range tcs {
		p := phys{pc: tc.PC + m.Bias, kind: kind, function: tc.Function, file: tc.File, line: tc.Line, tail: true}
		if p.kind == inspect.KindUser && systemFunctions[p.function] {
			p.kind = inspect.KindSystem
		}
		out = append(out, p)
	}
	return out
}

// systemDirs are where a system's shared libraries live.
var systemDirs = []string{"/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/usr/libexec/"}

// systemFunctions are functions of the executable that belong to the C
// library's start-up code.
var systemFunctions = map[string]bool{"_start": true, "__libc_csu_init": true, "_init": true}

// classify says whose code a module holds (classifyModule), for the
// report's runtime.
func (b *builder) classify(m *target.Module) string {
	return classifyModule(m, b.rep.Runtime.Library)
}

// classifyModule says whose code a module holds: the OpenMP runtime's (the
// module named runtimeLib), the system's (libc, the dynamic linker, the vDSO
// and other libraries in the system's library directories) or the user's
// (everything else).
func classifyModule(m *target.Module, runtimeLib string) string {
	if m == nil {
		return inspect.KindSystem // the vDSO, or code in no module
	}
	if m.Name == runtimeLib {
		return inspect.KindRuntime
	}
	for _, d := range systemDirs {
		if strings.HasPrefix(m.Name, d) {
			return inspect.KindSystem
		}
	}
	return inspect.KindUser
}

// callerIsRuntime reports whether the caller of frame i of ts is the
// OpenMP runtime's code.
func (b *builder) callerIsRuntime(ts *threadStack, i int) bool {
	return i+1 < len(ts.frames) && ts.frames[i+1].kind == inspect.KindRuntime
}

// findBoundaries records, for each region the thread's stack runs, the
// frame that begins it, matching the thread's chain of regions (its
// current region, then each enclosing one) innermost first.
func (b *builder) findBoundaries(ts *threadStack) {
	th := b.threads[ts.tid]
	if th == nil || th.Region == nil {
		return
	}
	var chain []*inspect.Region
	for id := th.Region; id != nil && len(chain) < MaxHops; {
		r := b.regions[*id]
		if r == nil {
			break
		}
		chain = append(chain, r)
		id = r.Parent
	}
	next := 0
	for i, f := range ts.frames {
		if next >= len(chain) || f.kind != inspect.KindUser || !b.callerIsRuntime(ts, i) {
			continue
		}
		// The next region of the chain that runs this function.
		for j := next; j < len(chain); j++ {
			if chain[j].Function == f.function {
				ts.boundaries[chain[j].ID] = i
				next = j + 1
				break
			}
		}
	}
}

// regionEntries names the regions of ts's thread whose runtime did not
// record their outlined function (GNU libgomp): each region of the
// thread's chain, innermost first, begins at the next user frame its
// runtime called that is no explicit task's entry; a fork entry point met
// before any such frame means the thread waits at the end of that region
// (its code has returned). The region's location is then the line of the
// outlined function's entry (gcc gives it the construct's line), else its
// declaration. The first thread to name
// a region names it.
func (b *builder) regionEntries(ts *threadStack) {
	th := b.threads[ts.tid]
	if th == nil || th.Region == nil || b.fam == nil || b.rep.Runtime.Family != "gnu" {
		// LLVM's runtime records them; a backend that cannot give them
		// (the dll one without state tracking) shows they are missing.
		return
	}
	var chain []*inspect.Region
	missing := false
	for id := th.Region; id != nil && len(chain) < MaxHops; {
		r := b.regions[*id]
		if r == nil {
			break
		}
		chain = append(chain, r)
		missing = missing || (r.Function == "" && r.EntryAddr == "")
		id = r.Parent
	}
	if !missing {
		return
	}
	next, entrySinceFork := 0, false
	for i, f := range ts.frames {
		if next >= len(chain) {
			return
		}
		if f.kind == inspect.KindRuntime && b.fam.ForkEntry(f.function) {
			if !entrySinceFork {
				next++ // waiting at the end of chain[next]
			}
			entrySinceFork = false
			continue
		}
		if f.kind != inspect.KindUser || f.tail || !b.callerIsRuntime(ts, i) || len(b.taskFns[f.function]) > 0 {
			continue
		}
		if c := ts.frames[i+1].function; c != "" && !b.fam.ForkEntry(c) {
			// Called by a named entry point that starts no region: an
			// undeferred task run by GOMP_task, say. A region's code is
			// called by a fork entry (thread 0) or by the runtime's
			// internal thread start (workers, unnamed when stripped).
			continue
		}
		if r := chain[next]; r.Function == "" && r.EntryAddr == "" {
			r.Function = f.function
			if m := target.ModuleAt(b.t, f.pc); m != nil && m.Image != nil {
				if sym, ok := m.Image.SymbolAt(f.pc - m.Bias); ok {
					r.EntryAddr = *hex(sym.Value + m.Bias)
					// gcc gives the outlined function's entry the
					// construct's line.
					if file, line, ok := m.Image.LineAt(sym.Value); ok && r.Location == "" {
						r.Location = fmt.Sprintf("%s:%d", file, line)
					}
				}
				if file, line, ok := m.Image.FuncDecl(f.pc - m.Bias); ok && r.Location == "" {
					r.Location = fmt.Sprintf("%s:%d", file, line)
				}
			}
		}
		next++
		entrySinceFork = true
	}
}

// implicitTasks gives implicit tasks, and the threads that run them, the
// function and location of their region when the runtime did not record
// them (regionEntries found them on the stacks).
func (b *builder) implicitTasks() {
	for _, k := range b.tasks {
		if k.Kind != "implicit" || k.Function != "" || k.Region == nil {
			continue
		}
		if r := b.regions[*k.Region]; r != nil {
			k.Function, k.Location, k.EntryAddr = r.Function, r.Location, r.EntryAddr
		}
	}
	for _, th := range b.threads {
		if th.Task != nil && th.Function == "" {
			if k := b.tasks[*th.Task]; k != nil && k.Kind == "implicit" {
				th.Function, th.Location = k.Function, k.Location
			}
		}
	}
}

// waitStates are the states a thread's activity tells, for a runtime
// whose states are inferred.
var waitStates = map[string]ompd.State{
	ActivityLock:            ompd.StateWaitLock,
	ActivityCritical:        ompd.StateWaitCritical,
	ActivityTaskwait:        ompd.StateWaitTaskwait,
	ActivityTaskgroup:       ompd.StateWaitTaskgroup,
	ActivityOrdered:         ompd.StateWaitOrdered,
	ActivityBarrierExplicit: ompd.StateWaitBarrierExplicit,
	ActivityBarrierImplicit: ompd.StateWaitBarrierImplicitParallel,
	ActivityIdle:            ompd.StateIdle,
}

// inferState refines the state the runtime layer inferred from a thread's
// futex with what its stack shows: the entry point it waits in (a lock,
// a critical section ...), and, for a thread asleep on its team's
// barrier, whether its region's code is still on its stack (an explicit
// barrier or the end of a worksharing construct) or has returned (the
// implicit barrier at the region's end).
func (b *builder) inferState(ts *threadStack, th *inspect.Thread, bt *inspect.Backtrace) {
	st := ""
	if th.State != nil {
		st = *th.State
	}
	switch {
	case th.Idle != nil || st == ompd.StateIdle.String():
		bt.Activity = ActivityIdle
	case st == ompd.StateWaitBarrier.String() && (bt.Activity == ActivityRuntime || bt.Activity == ActivityBarrierExplicit || bt.Activity == ActivityBarrierImplicit):
		bt.Activity = ActivityBarrierImplicit
		if th.Region != nil {
			if _, ok := ts.boundaries[*th.Region]; ok {
				bt.Activity = ActivityBarrierExplicit
			}
		}
	}
	if ws, ok := waitStates[bt.Activity]; ok {
		st = ws.String()
	}
	if st != "" {
		th.State = &st
		bt.State = &st
	}
}

// frameAddr is the frame address (__builtin_frame_address(0)) of a frame
// with a standard prologue: the saved rbp, just below the return address.
func frameAddr(p phys) uint64 {
	if p.cfa < 16 {
		return 0
	}
	return p.cfa - 16
}

// callerFrameAddr is the frame address of the first native frame after
// frame i of ts (tail call frames have none), 0 when there is none.
func callerFrameAddr(ts *threadStack, i int) uint64 {
	for j := i + 1; j < len(ts.frames); j++ {
		if !ts.frames[j].tail {
			return frameAddr(ts.frames[j])
		}
	}
	return 0
}

func (b *builder) forkFrame(ts *threadStack) int {
	for i := 1; i < len(ts.frames); i++ {
		if ts.frames[i].kind == inspect.KindUser && ts.frames[i-1].kind == inspect.KindRuntime && b.fam != nil && b.fam.ForkEntry(ts.frames[i-1].function) {
			return i
		}
	}
	return -1
}

// continuation returns where the logical stack of a region's encountering
// thread goes on: the frame after the region's boundary on its stack, or,
// when it no longer runs the region's code (it waits at the region's end),
// its frame that called the fork entry point.
func (b *builder) continuation(ts *threadStack, region string) (int, bool) {
	if i, ok := ts.boundaries[region]; ok {
		return i + 1, true
	}
	if i := b.forkFrame(ts); i >= 0 {
		return i, true
	}
	return 0, false
}

func (b *builder) regionMarker(ts *threadStack, r *inspect.Region, atEnd bool) inspect.Frame {
	num := indexOf(r.Threads, ts.tid)
	text := fmt.Sprintf("%s parallel at %s — team of %d, thread %d", directive(r.Location), orUnknown(filepath.Base(r.Location)), r.TeamSize, num)
	if atEnd {
		text = "at the end of " + text + " (its code has returned; waiting for the team)"
	}
	return inspect.Frame{Kind: inspect.KindRegionMarker, Thread: ts.tid, Region: &r.ID, Boundary: "entry-point", Text: text}
}

// frames returns frame i of ts as shown: the functions inlined at its pc
// (innermost first), then the function itself.
func (b *builder) frames(out []inspect.Frame, ts *threadStack, i int) []inspect.Frame {
	p := ts.frames[i]
	pc := b.pcString(p.pc)
	for _, in := range p.inlined {
		out = append(out, inspect.Frame{Kind: p.kind, Thread: ts.tid, PC: pc, Function: in.Function, File: in.File, Line: in.Line, Inlined: true})
	}
	return append(out, inspect.Frame{Kind: p.kind, Thread: ts.tid, PC: pc, Function: p.function, File: p.file, Line: p.line, TailCall: p.tail})
}

// pcString is hex(pc), one string per address for all the frames at it.
func (b *builder) pcString(pc uint64) *string {
	s := b.pcs[pc]
	if s == nil {
		if b.pcs == nil {
			b.pcs = map[uint64]*string{}
		}
		s = hex(pc)
		b.pcs[pc] = s
	}
	return s
}

// logical appends to out the logical stack of ts from frame from on: its
// frames, with markers, continuing on the encountering thread of a region
// this thread only works in.
func (b *builder) logical(out []inspect.Frame, ts *threadStack, from, hops int, used map[string]bool) []inspect.Frame {
	regionAt := make(map[int]string, len(ts.boundaries))
	for id, i := range ts.boundaries {
		regionAt[i] = id
	}
	// The thread's current region, when its stack no longer runs the
	// region's code: the thread waits at the region's end.
	var ending *inspect.Region
	if th := b.threads[ts.tid]; from == 0 && th != nil && th.Region != nil {
		if _, ok := ts.boundaries[*th.Region]; !ok {
			ending = b.regions[*th.Region]
		}
	}
	endAt := -1
	if ending != nil && len(ending.Threads) > 0 && ending.Threads[0] == ts.tid {
		endAt = b.forkFrame(ts)
	}
	for i := from; i < len(ts.frames); i++ {
		if i == endAt {
			out = append(out, b.regionMarker(ts, ending, true))
			ending = nil
		}
		p := ts.frames[i]
		out = b.frames(out, ts, i)
		if construct, k, ok := b.taskAt(ts, i, used); ok {
			out = append(out, b.taskMarker(ts, i, construct, k))
			continue
		}
		id, ok := regionAt[i]
		if !ok || p.kind != inspect.KindUser || !b.callerIsRuntime(ts, i) {
			continue
		}
		r := b.regions[id]
		m := b.regionMarker(ts, r, false)
		if k := b.exitFrames[callerFrameAddr(ts, i)]; k != nil && k.Kind == "implicit" && k.Region != nil && *k.Region == r.ID {
			m.Boundary = "ompd-frame"
		}
		out = append(out, m)
		if len(r.Threads) == 0 || r.Threads[0] == ts.tid || r.Serialized {
			continue // this thread encountered the region: its stack goes on
		}
		// A worker: the rest of its own stack is the runtime's thread
		// pool; the region was encountered by the team's thread 0.
		for j := i + 1; j < len(ts.frames); j++ {
			out = b.frames(out, ts, j)
		}
		return b.hop(out, r, hops, used)
	}
	if ending != nil && len(ending.Threads) > 0 && ending.Threads[0] != ts.tid && !ending.Serialized {
		// A worker waiting at the end of its region.
		out = append(out, b.regionMarker(ts, ending, true))
		out = b.hop(out, ending, hops, used)
	}
	return out
}

// hop appends to out the continuation of a logical stack on the thread
// that encountered region r.
func (b *builder) hop(out []inspect.Frame, r *inspect.Region, hops int, used map[string]bool) []inspect.Frame {
	master := b.stacks[r.Threads[0]]
	if master == nil || hops >= MaxHops {
		return out
	}
	at, ok := b.continuation(master, r.ID)
	if !ok {
		return append(out, inspect.Frame{Kind: inspect.KindHop, Thread: master.tid,
			Text: fmt.Sprintf("the region was encountered by thread 0 (%d), whose stack does not show where", master.tid)})
	}
	out = append(out, inspect.Frame{Kind: inspect.KindHop, Thread: master.tid,
		Text: fmt.Sprintf("continued on thread 0 (%d), which encountered the region", master.tid)})
	return b.logical(out, master, at, hops+1, used)
}

// taskAt returns the construct whose task frame i of ts begins (the frame
// runs an explicit task's entry function) and, when it can tell, which
// task it is: the innermost task of that construct in the thread's task
// stack not yet placed in this backtrace (used), or the only one of the
// construct that is running or suspended. ok is false when the frame runs
// no task entry.
func (b *builder) taskAt(ts *threadStack, i int, used map[string]bool) (construct, task *inspect.Task, ok bool) {
	p := ts.frames[i]
	if p.kind != inspect.KindUser {
		return nil, nil, false
	}
	cands := b.taskFns[p.function]
	if len(cands) == 0 {
		return nil, nil, false
	}
	if th := b.threads[ts.tid]; th != nil {
		for _, id := range th.TaskStack {
			for _, k := range cands {
				if k.ID == id && !used[id] {
					used[id] = true
					return k, k, true
				}
			}
		}
	}
	var only *inspect.Task
	for _, k := range cands {
		if (k.Status == "running" || k.Status == "suspended") && !used[k.ID] {
			if only != nil {
				return cands[0], nil, true // several could be this one
			}
			only = k
		}
	}
	if only != nil {
		used[only.ID] = true
		return only, only, true
	}
	return cands[0], nil, true
}

func (b *builder) taskMarker(ts *threadStack, i int, construct, k *inspect.Task) inspect.Frame {
	loc := orUnknown(filepath.Base(construct.Location))
	if k == nil {
		return inspect.Frame{Kind: inspect.KindTaskMarker, Thread: ts.tid, Boundary: "entry-point",
			Text: fmt.Sprintf("%s task at %s — one of several tasks of this construct", directive(construct.Location), loc)}
	}
	parent := "none"
	if k.Parent != nil {
		parent = *k.Parent
	}
	m := inspect.Frame{Kind: inspect.KindTaskMarker, Thread: ts.tid, Task: &k.ID, Boundary: "entry-point",
		Text: fmt.Sprintf("%s task at %s — task %s, parent %s", directive(construct.Location), loc, k.ID, parent)}
	if i+1 < len(ts.frames) {
		if e := b.exitFrames[callerFrameAddr(ts, i)]; e == k {
			m.Boundary = "ompd-frame"
		}
	}
	return m
}

// directive is how a construct at loc (file:line) is written: "!$omp" in
// a Fortran source file, "#pragma omp" otherwise.
func directive(loc string) string {
	file, _, _ := strings.Cut(loc, ":")
	switch strings.ToLower(filepath.Ext(file)) {
	case ".f", ".for", ".ftn", ".f77", ".f90", ".f95", ".f03", ".f08", ".f18":
		return "!$omp"
	}
	return "#pragma omp"
}

func indexOf(s []int, v int) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func orUnknown(s string) string {
	if s == "" || s == "." {
		return "unknown location"
	}
	return s
}

// isOutlined reports whether name is a compiler-outlined OpenMP function
// (clang: .omp_outlined., NAME.omp_outlined, .omp_task_entry.; gcc:
// NAME._omp_fn.N).
func isOutlined(name string) bool {
	return strings.Contains(name, "omp_outlined") || strings.HasPrefix(name, ".omp_task_entry.") ||
		strings.Contains(name, "._omp_fn.")
}

// userFunctions sets UserFunction of every outlined frame: the function
// that contains the construct whose marker is below it (as the compiler
// recorded it, else the next user frame below the marker).
func (b *builder) userFunctions(frames []inspect.Frame) {
	current, next := "", ""
	for i := len(frames) - 1; i >= 0; i-- {
		f := &frames[i]
		switch {
		case f.Kind == inspect.KindRegionMarker && f.Region != nil:
			current = next
			if r := b.regions[*f.Region]; r != nil && r.ConstructFunction != "" {
				current = r.ConstructFunction
			}
		case f.Kind == inspect.KindTaskMarker && f.Task != nil:
			current = ""
			if k := b.tasks[*f.Task]; k != nil && k.ConstructFunction != "" {
				current = k.ConstructFunction
			}
		case f.Kind == inspect.KindUser && isOutlined(f.Function):
			switch {
			case current != "":
				f.UserFunction = current
			case prefixName(f.Function) != "":
				f.UserFunction = prefixName(f.Function)
			}
		case f.Kind == inspect.KindUser:
			// The innermost function below the marker, inlined or not:
			// the construct is in its code.
			next = f.Function
		}
	}
}

// prefixName extracts the user function from an outlined name that
// carries it (main.omp_outlined, main._omp_fn.0).
func prefixName(name string) string {
	for _, sep := range []string{".omp_outlined", "._omp_fn."} {
		if i := strings.Index(name, sep); i > 0 {
			return name[:i]
		}
	}
	return ""
}

// displayName is how a frame's function is shown: an outlined function as
// the user function that contains the construct.
func displayName(f inspect.Frame) string {
	if f.UserFunction != "" {
		return f.UserFunction
	}
	return f.Function
}

// Filter returns bt as a view shows it: without allFrames, runtime frames
// are folded away, and so are system frames that do not lead to user code
// (the runtime's waits, thread start-up); without cont, frames from other
// threads' stacks (after a hop) are dropped.
func Filter(bt inspect.Backtrace, allFrames, cont bool) inspect.Backtrace {
	out := bt
	out.Frames = nil
	for i, f := range bt.Frames {
		if !cont && (f.Thread != bt.OSTID || f.Kind == inspect.KindHop) {
			continue
		}
		if !allFrames {
			switch f.Kind {
			case inspect.KindRuntime:
				continue
			case inspect.KindSystem:
				if !leadsToUser(bt.Frames, i) {
					continue
				}
			}
		}
		out.Frames = append(out.Frames, f)
	}
	if out.Frames == nil {
		out.Frames = []inspect.Frame{}
	}
	return out
}

// leadsToUser reports whether the first frame below frames[i] that is not
// system code is a user frame of the same thread: a system function that
// user code called.
func leadsToUser(frames []inspect.Frame, i int) bool {
	for j := i + 1; j < len(frames); j++ {
		f := frames[j]
		if f.Thread != frames[i].Thread {
			return false
		}
		switch f.Kind {
		case inspect.KindSystem:
			continue
		case inspect.KindUser:
			return true
		default:
			return false
		}
	}
	return false
}

// GroupKey is what makes two backtraces the same for grouping: the
// sequence of shown frames' functions, lines, regions and tasks, ignoring
// which thread holds them.
func GroupKey(bt inspect.Backtrace) string {
	var sb strings.Builder
	sb.WriteString(bt.Activity)
	for _, f := range bt.Frames {
		fmt.Fprintf(&sb, "|%s %s:%d", f.Kind, f.Function, f.Line)
		if f.Region != nil {
			sb.WriteString(" r" + *f.Region)
		}
		if f.Task != nil {
			sb.WriteString(" t" + *f.Task)
		}
	}
	return sb.String()
}

// indexModules opens, in parallel, the debug information of every module
// that some frame's pc falls in and the frame cache cannot answer for
// (reading and decompressing its sections, listing its compile units):
// the units the frames need are then indexed on first lookup, and opening
// several modules at a time is what makes the first backtrace fast.
func indexModules(walks []walk) {
	seen := map[*elf.Image]bool{}
	var images []*elf.Image
	for _, w := range walks {
		for _, f := range w.frames {
			m := f.Module
			if m == nil || m.Image == nil || seen[m.Image] || f.LookupPC() < m.Bias {
				continue
			}
			// An image whose answers the frame cache holds for every
			// frame is not opened: a warm run may not need it.
			if !m.Image.FramesCachedAt(f.LookupPC() - m.Bias) {
				seen[m.Image] = true
				images = append(images, m.Image)
			}
		}
	}
	var wg sync.WaitGroup
	for _, im := range images {
		wg.Add(1)
		go func() {
			defer wg.Done()
			im.PrepareDWARF() // problems show when frames are named
		}()
	}
	wg.Wait()
}

// PrepareUnwind does on the file of one of a target's modules, before
// the target is stopped, the work Unwind will do on it: its code is
// scanned for sigreturn trampolines, or an earlier run's scan read
// (unwind.PrepareTrampolines); the rows an earlier run kept are read
// (unwind.PrepareRows), or else its call frame information is parsed
// (Unwind reports what cannot be read).
func PrepareUnwind(im *elf.Image) {
	unwind.PrepareTrampolines(im)
	if unwind.PrepareRows(im) {
		return
	}
	_, _ = im.FrameEntries()
}

// KeepRows keeps for later runs what the call frame information of w's
// target's modules said at the pcs the walks met (unwind.KeepRows). Call
// it once the target is released: it may write files.
func KeepRows(w *Walks) {
	for _, m := range w.t.Modules() {
		if m.Image != nil {
			unwind.KeepRows(m.Image)
		}
	}
}

// smallDWARF is the size of .debug_info up to which PrepareImage indexes
// all of an executable's DWARF before the stop (Build names the regions'
// functions from it while the target is held): a few thousand lines of
// C, indexed in a few milliseconds.
const smallDWARF = 256 << 10

// PrepareImage does PrepareUnwind, and opens the debug information Add
// names frames with, for the modules nearly every OpenMP thread's stack
// passes through: the executable (whose DWARF also names the regions'
// functions, while the target is stopped: a small one is indexed whole),
// and the OpenMP runtime and the C library unless the frame cache holds
// answers for them (a warm run may not need their DWARF; Add opens it,
// once the target is released, when a frame's answer is not kept). The
// other modules' are opened when frames land in them, after the target
// is released: a process may map hundreds of libraries with debug files.
func PrepareImage(im *elf.Image) {
	PrepareUnwind(im)
	if _, exe := im.Symbol("main"); exe {
		im.PrepareDWARFIndex(smallDWARF)
		return
	}
	if im.FramesCached() {
		return
	}
	m := &target.Module{Name: im.Path, Image: im}
	if _, libc := im.Symbol("__libc_start_main"); libc || inspect.FamilyOf(m) != nil {
		im.PrepareDWARF()
	}
}
