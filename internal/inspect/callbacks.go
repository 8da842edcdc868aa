// Package inspect builds ompd-inspect's report of a target: it finds the
// OpenMP runtime, serves the OMPD layer's callbacks from a target.Target,
// and turns OMPD answers into the model that every view renders (text or
// JSON).
package inspect

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/ompd/gomp"
	"github.com/ompd-inspect/ompd-inspect/ompd/llvm/recovery"
	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
	"github.com/ompd-inspect/ompd-inspect/target/unwind"
)

// Callbacks serves ompd.Callbacks from a target. Symbol lookups are
// cached; memory reads go through the target's per-stop cache.
type Callbacks struct {
	t       target.Target
	runtime *target.Module
	// know gives the runtime's symbols that its file does not name
	// (recovered from its code); nil when the file names them.
	know *Knowledge

	mu   sync.Mutex
	syms map[string]symResult
	tids map[uint64]*target.Thread // pthread (thread pointer) -> thread

	unwOnce sync.Once
	unw     *unwind.Unwinder // short walks for CallSite
	// stacks gives the walks CallSite reads instead (Options.Stacks).
	stacks func(th *target.Thread) ([]unwind.Frame, bool)

	tiOnce   sync.Once
	ti       typeLayouts
	tiSource string
	tiErr    error
}

type symResult struct {
	addr uint64
	err  error
}

// NewCallbacks returns callbacks over t; runtime is the module that holds
// the OpenMP runtime (searched first for symbols), may be nil.
func NewCallbacks(t target.Target, runtime *target.Module) *Callbacks {
	c := &Callbacks{t: t, runtime: runtime, syms: make(map[string]symResult), tids: make(map[uint64]*target.Thread)}
	threads := t.Threads()
	for i := range threads {
		c.tids[threads[i].ThreadPointer()] = &threads[i]
	}
	return c
}

// UseKnowledge makes symbol lookups fall back, for the runtime module, to
// what k recovered from its code.
func (c *Callbacks) UseKnowledge(k *Knowledge) {
	c.mu.Lock()
	c.know = k
	clear(c.syms)
	c.mu.Unlock()
}

// SymbolAddr implements ompd.Callbacks.
func (c *Callbacks) SymbolAddr(name, fileHint string) (ompd.Address, error) {
	c.mu.Lock()
	r, ok := c.syms[name]
	c.mu.Unlock()
	if ok {
		return r.addr, r.err
	}
	var s target.Symbol
	var err error
	if c.runtime != nil {
		// The runtime's own symbols are indexed by name (PrepareImage):
		// found there, they are not cached again.
		if s, err = target.LookupSymbol(c.t, name, c.runtime); err == nil && !s.TLS {
			return s.Addr, nil
		}
	}
	if c.runtime != nil && err != nil {
		if a, ok := c.know.symbol(c.runtime, name); ok {
			s, err = target.Symbol{Name: name, Addr: a, Module: c.runtime}, nil
		}
	}
	if c.runtime == nil || err != nil {
		s, err = target.LookupSymbol(c.t, name, nil)
	}
	if err == nil && s.TLS {
		err = fmt.Errorf("symbol %s is thread-local", name)
	}
	r = symResult{addr: s.Addr, err: err}
	c.mu.Lock()
	c.syms[name] = r
	c.mu.Unlock()
	return r.addr, r.err
}

// ReadMemory implements ompd.Callbacks.
func (c *Callbacks) ReadMemory(addr ompd.Address, buf []byte) error {
	return c.t.ReadMemory(addr, buf)
}

// Prefetch implements ompd.Prefetcher for a target that reads ahead.
func (c *Callbacks) Prefetch(addrs []ompd.Address) {
	if p, ok := c.t.(target.Prefetcher); ok {
		p.Prefetch(addrs)
	}
}

// ReadString implements ompd.Callbacks: it reads in chunks that do not
// cross a page, so a string near the end of a mapping reads correctly.
func (c *Callbacks) ReadString(addr ompd.Address, max int) (string, error) {
	var out []byte
	for len(out) < max {
		n := target.PageSize - int(addr%target.PageSize)
		if n > 256 {
			n = 256
		}
		if rest := max - len(out); n > rest {
			n = rest
		}
		buf := make([]byte, n)
		if err := c.t.ReadMemory(addr, buf); err != nil {
			return "", err
		}
		if i := bytes.IndexByte(buf, 0); i >= 0 {
			return string(append(out, buf[:i]...)), nil
		}
		out = append(out, buf...)
		addr += uint64(n)
	}
	return "", fmt.Errorf("string at %#x has no terminating NUL within %d bytes", addr-uint64(len(out)), max)
}

// Sizes implements ompd.Callbacks for x86-64 (LP64).
func (c *Callbacks) Sizes() (ompd.TypeSizes, error) {
	return ompd.TypeSizes{Char: 1, Short: 2, Int: 4, Long: 8, LongLong: 8, Pointer: 8}, nil
}

// ThreadContext implements ompd.Callbacks: the context of a native thread
// is its *target.Thread.
func (c *Callbacks) ThreadContext(kind ompd.ThreadIDKind, id uint64) (ompd.ThreadContext, error) {
	switch kind {
	case ompd.ThreadIDPthread:
		if t, ok := c.tids[id]; ok {
			return t, nil
		}
		return nil, fmt.Errorf("no thread with pthread id %#x", id)
	case ompd.ThreadIDLWP:
		for _, t := range c.tids {
			if uint64(t.TID) == id {
				return t, nil
			}
		}
		return nil, fmt.Errorf("no thread with LWP id %d", id)
	}
	return nil, fmt.Errorf("thread id kind %d not supported", kind)
}

// ThreadRegisters implements gomp.RegisterReader: the registers of a
// thread context.
func (c *Callbacks) ThreadRegisters(ctx ompd.ThreadContext) (gomp.Registers, error) {
	t, ok := ctx.(*target.Thread)
	if !ok {
		return gomp.Registers{}, fmt.Errorf("thread context %T is not a target thread", ctx)
	}
	r := t.Regs
	return gomp.Registers{Rip: r.Rip, Rax: r.Rax, OrigRax: r.OrigRax, Rdi: r.Rdi, FSBase: r.FSBase, Rsp: r.Rsp}, nil
}

// SymbolAt implements gomp.SymbolNamer: the function or data symbol of
// the target's module at addr whose range holds it.
func (c *Callbacks) SymbolAt(addr uint64) (string, bool) {
	m := target.ModuleAt(c.t, addr)
	if m == nil || m.Image == nil || addr < m.Bias {
		return "", false
	}
	a := addr - m.Bias
	if s, ok := m.Image.SymbolAt(a); ok && (s.Size == 0 || a-s.Value < s.Size) {
		return s.Name, true
	}
	if s, ok := m.Image.DataSymbolAt(a); ok {
		return s.Name, true
	}
	return "", false
}

// callSiteFrames bounds the walk CallSite makes: the runtime's frames of a
// waiting thread and the few library frames inside them (a futex wait).
const callSiteFrames = 24

// callSiteLeading is how many frames outside the runtime (the C library's
// futex or yield) CallSite steps over before the runtime's own.
const callSiteLeading = 4

// CallSite implements ompd.CallSiteReader: the thread's stack is walked
// from its innermost frame over at most a few library frames, then over
// the runtime's frames; the first frame below them is the caller, and its
// call is the site when it called one of callees. The walk is the one
// Options.Stacks gives when there is one, its first callSiteFrames frames.
func (c *Callbacks) CallSite(ctx ompd.ThreadContext, callees []ompd.Address) (ompd.CallSite, bool) {
	th, ok := ctx.(*target.Thread)
	if !ok || c.runtime == nil {
		return ompd.CallSite{}, false
	}
	var frames []unwind.Frame
	walked := false
	if c.stacks != nil {
		frames, walked = c.stacks(th)
		frames = frames[:min(len(frames), callSiteFrames)]
	}
	if !walked {
		c.unwOnce.Do(func() {
			c.unw = unwind.New(c.t)
			c.unw.MaxFrames = callSiteFrames
		})
		frames, _ = c.unw.Unwind(*th)
	}
	i := 0
	for i < len(frames) && i < callSiteLeading && !c.inRuntime(frames[i].Module) {
		i++
	}
	if i >= len(frames) || !c.inRuntime(frames[i].Module) {
		return ompd.CallSite{}, false
	}
	for i < len(frames) && c.inRuntime(frames[i].Module) {
		i++
	}
	if i >= len(frames) {
		return ompd.CallSite{}, false
	}
	caller := &frames[i]
	callee, ok := unwind.CallTarget(c.t, caller.PC)
	if !ok || !slices.Contains(callees, callee) {
		return ompd.CallSite{}, false
	}
	// The caller's callee-saved registers are known when every step to
	// it restored them: call frame information or a signal frame, not
	// a frame-pointer step (which copies the callee's).
	trusted := true
	for k := 1; k <= i; k++ {
		if h := frames[k].How; h != unwind.MethodCFI && h != unwind.MethodSignal {
			trusted = false
		}
	}
	args := unwind.CallArgs(c.t, caller, trusted)
	return ompd.CallSite{Callee: callee, Args: args.Value, Known: args.Known}, true
}

// inRuntime reports whether m is the runtime's module.
func (c *Callbacks) inRuntime(m *target.Module) bool {
	return m != nil && c.runtime != nil && m.Start == c.runtime.Start
}

// ThreadPointers implements gomp.ThreadLister: every thread's thread
// pointer, in ascending order.
func (c *Callbacks) ThreadPointers() []uint64 {
	out := make([]uint64, 0, len(c.tids))
	for tp := range c.tids {
		out = append(out, tp)
	}
	slices.Sort(out)
	return out
}

// ThreadByPointer returns the target thread whose thread pointer (pthread
// id) is tp.
func (c *Callbacks) ThreadByPointer(tp uint64) (*target.Thread, bool) {
	t, ok := c.tids[tp]
	return t, ok
}

// typeLayouts is where the runtime types OMPD's layout values do not
// describe come from: the runtime's DWARF, else (for a runtime recovered
// from its code) the table of its release.
type typeLayouts interface {
	TypeSize(typ string) (uint64, error)
	FieldLayout(typ, field string) (uint64, uint64, error)
}

// dwarfTypes adapts the runtime's DWARF type index.
type dwarfTypes struct{ ti *elf.TypeIndex }

func (d dwarfTypes) TypeSize(typ string) (uint64, error) { return d.ti.Size(typ) }
func (d dwarfTypes) FieldLayout(typ, field string) (uint64, uint64, error) {
	return d.ti.Field(typ, field)
}

// Where type layouts come from (runtime.type_info).
const (
	TypeInfoDWARF        = "dwarf"
	TypeInfoReleaseTable = "release-table"
)

// typeIndex finds the runtime's type layouts once, on first use, and says
// where they come from.
func (c *Callbacks) typeIndex() (typeLayouts, string, error) {
	c.tiOnce.Do(func() {
		if c.runtime == nil || c.runtime.Image == nil {
			c.tiErr = errors.New("no runtime module")
			return
		}
		ti, err := c.runtime.Image.Types()
		if err == nil {
			c.ti, c.tiSource = dwarfTypes{ti}, TypeInfoDWARF
			return
		}
		c.tiErr = err
		c.mu.Lock()
		know := c.know
		c.mu.Unlock()
		rec := (*recovery.Knowledge)(nil)
		if know != nil {
			rec = know.Recovered
		}
		if rec == nil && know != nil && know.SymbolsSource == SourceDebugFile {
			// A debug file with symbols but no DWARF types (one that
			// ompd-inspect debug-file wrote): the release's table still
			// fits, once the code confirms the release.
			rec, _ = recovery.Recover(c.runtime.Image)
		}
		if rec != nil {
			// Found once per image: for a stripped runtime, before the
			// stop (PrepareImage).
			tt, terr := recoveredTypes(c.runtime.Image, rec)
			if terr != nil {
				c.tiErr = fmt.Errorf("%v; %w", err, terr)
				return
			}
			c.ti, c.tiSource, c.tiErr = tt, TypeInfoReleaseTable, nil
		}
	})
	return c.ti, c.tiSource, c.tiErr
}

// TypeSize implements ompd.TypeLayouts.
func (c *Callbacks) TypeSize(typ string) (uint64, error) {
	ti, _, err := c.typeIndex()
	if err != nil {
		return 0, err
	}
	return ti.TypeSize(typ)
}

// FieldLayout implements ompd.TypeLayouts.
func (c *Callbacks) FieldLayout(typ, field string) (uint64, uint64, error) {
	ti, _, err := c.typeIndex()
	if err != nil {
		return 0, 0, err
	}
	return ti.FieldLayout(typ, field)
}

// ThreadSymbolAddr implements dll.Callbacks: a thread-local symbol resolves
// to the instance of ctx's thread (ctx is a *target.Thread from
// ThreadContext), any other symbol as SymbolAddr does.
func (c *Callbacks) ThreadSymbolAddr(ctx ompd.ThreadContext, name, fileHint string) (ompd.Address, error) {
	th, ok := ctx.(*target.Thread)
	if !ok {
		return 0, fmt.Errorf("symbol %s: %T is not a thread context of ompd-inspect", name, ctx)
	}
	addr, err := target.LookupTLSSymbol(c.t, th, name, c.runtime)
	if err != nil && c.runtime != nil {
		addr, err = target.LookupTLSSymbol(c.t, th, name, nil)
	}
	return addr, err
}
