package trace

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/ompd/llvm"
	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/ptrace"
)

// What to do after a --stop-at report.
const (
	ThenContinue = "continue"
	ThenDetach   = "detach"
	ThenKill     = "kill"
)

// StopAt selects the event to stop at: a kind (parallel-begin) or a class
// (parallel: either kind of the class), optionally at a source location.
type StopAt struct {
	Kind string
	File string // matched against the end of the construct's file name
	Line int
}

// ParseStopAt reads EVENT[:FILE:LINE] (FILE may hold colons).
func ParseStopAt(s string) (*StopAt, error) {
	kind, rest, located := strings.Cut(s, ":")
	st := &StopAt{Kind: kind}
	if !slices.Contains(Kinds, kind) && !slices.Contains(Classes, kind) {
		return nil, fmt.Errorf("--stop-at %q: %q is not an event; want one of %s (or a class: %s)", s, kind, strings.Join(Kinds, ", "), strings.Join(Classes, ", "))
	}
	if !located {
		return st, nil
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return nil, fmt.Errorf("--stop-at %q: want EVENT or EVENT:FILE:LINE", s)
	}
	line, err := strconv.Atoi(rest[i+1:])
	if err != nil || line <= 0 || i == 0 {
		return nil, fmt.Errorf("--stop-at %q: want EVENT:FILE:LINE with a line number above 0", s)
	}
	st.File, st.Line = rest[:i], line
	return st, nil
}

// Kinds lists the event kinds, in the order the summary counts them.
var Kinds = []string{KindParallelBegin, KindParallelEnd, KindTaskBegin, KindTaskEnd, KindThreadBegin, KindThreadEnd, KindDeviceBegin, KindDeviceEnd, KindRuntimeReady}

// classOf returns the class of an event kind.
func classOf(kind string) string {
	if kind == KindRuntimeReady {
		return ClassRuntime
	}
	return kind[:strings.IndexByte(kind, '-')]
}

// matches reports whether ev is the event st selects.
func (st *StopAt) matches(ev *Event) bool {
	if st.Kind != ev.Kind && st.Kind != classOf(ev.Kind) {
		return false
	}
	if st.File == "" {
		return true
	}
	var loc string
	switch {
	case ev.Region != nil:
		loc = ev.Region.Location
	case ev.Task != nil:
		loc = ev.Task.Location
	}
	file, line, ok := splitLocation(loc)
	if !ok {
		return false
	}
	return line == st.Line && (file == st.File || strings.HasSuffix(file, "/"+st.File))
}

// splitLocation splits FILE:LINE at its last colon.
func splitLocation(loc string) (file string, line int, ok bool) {
	i := strings.LastIndexByte(loc, ':')
	if i < 0 {
		return "", 0, false
	}
	line, err := strconv.Atoi(loc[i+1:])
	return loc[:i], line, err == nil
}

// Options says what Run reports and when it stops.
type Options struct {
	// Classes are the event classes passed to OnEvent; every event is
	// counted in the summary all the same. Nil means all.
	Classes map[string]bool
	// OnEvent receives the selected events as they happen.
	OnEvent func(Event)
	// OnWarning receives what the trace could not do or tell, once each.
	OnWarning func(string)
	// StopAt, when set, stops the program at the first matching event and
	// calls OnStop with every thread stopped; Then says what follows.
	StopAt *StopAt
	Then   string
	OnStop func(t target.Target, ev Event) error
}

// markers are the OMPD breakpoint locations and their event kinds.
var markers = []struct{ symbol, kind string }{
	{"ompd_dll_locations_valid", KindRuntimeReady},
	{"ompd_bp_parallel_begin", KindParallelBegin},
	{"ompd_bp_parallel_end", KindParallelEnd},
	{"ompd_bp_task_begin", KindTaskBegin},
	{"ompd_bp_task_end", KindTaskEnd},
	{"ompd_bp_thread_begin", KindThreadBegin},
	{"ompd_bp_thread_end", KindThreadEnd},
	{"ompd_bp_device_begin", KindDeviceBegin},
	{"ompd_bp_device_end", KindDeviceEnd},
}

// loaderMarker is the dynamic linker's function called after each change
// of the loaded libraries (r_debug.r_brk).
const loaderMarker = "_dl_debug_state"

// session is one trace.
type session struct {
	tc    *ptrace.Tracee
	opts  Options
	start time.Time

	loaderBP uint64
	runtime  *target.Module
	// know says where the runtime's symbols come from (its own, or
	// recovered from its code).
	know     *inspect.Knowledge
	kinds    map[uint64]string // breakpoint address -> event kind
	view     *eventTarget
	cb       *eventCallbacks
	as       *llvm.AddressSpace
	nthreads ompd.ICVID // the id of nthreads-var
	// fork is the runtime's function that forks a team (runtime
	// addresses [start, end)), where LLVM passes ompd_bp_parallel_begin
	// early.
	forkStart, forkEnd uint64
	funcs              map[uint64]string // symbolize's names by address

	regions opens                 // regions each OS thread began
	tasks   opens                 // task parts each OS thread began
	begins  map[int]*pendingBegin // parallel-begin waiting for the new team (by OS thread)
	sum     *summer
	warned  map[string]bool
	stopped bool
}

// pendingBegin is a parallel-begin event whose region is not current yet.
type pendingBegin struct {
	ev        *Event
	requested *int
}

// Run follows the program until it ends, is detached or killed, and
// returns how it ended and the summary of what it did. Interrupt the
// Tracee to stop early: its breakpoints are removed and it runs on.
func Run(tc *ptrace.Tracee, opts Options) (Exit, *Summary, error) {
	s := &session{
		tc:      tc,
		opts:    opts,
		start:   time.Now(),
		kinds:   make(map[uint64]string),
		regions: make(opens),
		tasks:   make(opens),
		begins:  make(map[int]*pendingBegin),
		sum:     newSummer(),
		warned:  make(map[string]bool),
		funcs:   make(map[uint64]string),
	}
	s.view = &eventTarget{tc: tc}
	exit, err := s.run()
	return exit, s.sum.summary(), err
}

func (s *session) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if s.warned[msg] {
		return
	}
	s.warned[msg] = true
	s.sum.warnings = append(s.sum.warnings, msg)
	if s.opts.OnWarning != nil {
		s.opts.OnWarning(msg)
	}
}

func (s *session) run() (Exit, error) {
	if err := s.arm(); err != nil {
		return s.abandon(err)
	}
	for {
		ev, err := s.tc.Continue()
		if err != nil {
			return s.abandon(err)
		}
		switch ev.Kind {
		case ptrace.EventExit:
			if ev.Signal != 0 {
				return Exit{Code: 128 + ev.Signal, Signal: ev.Signal}, nil
			}
			return Exit{Code: ev.ExitCode}, nil
		case ptrace.EventInterrupted:
			return Exit{Detached: true, Interrupted: true}, s.tc.Detach()
		case ptrace.EventExec:
			s.forget()
			if err := s.arm(); err != nil {
				return s.abandon(err)
			}
		case ptrace.EventWatch:
			if done, exit, err := s.teamSwitched(ev.TID, ev.Regs); done || err != nil {
				return exit, err
			}
		case ptrace.EventBreakpoint:
			if ev.Addr == s.loaderBP {
				s.tc.ModulesChanged()
				if err := s.armRuntime(); err != nil {
					return s.abandon(err)
				}
				continue
			}
			kind, ok := s.kinds[ev.Addr]
			if !ok {
				continue
			}
			if done, exit, err := s.event(kind, ev.TID, ev.Regs); done || err != nil {
				return exit, err
			}
		}
	}
}

// abandon detaches after an error, so that the program runs on without
// breakpoints.
func (s *session) abandon(err error) (Exit, error) {
	if derr := s.tc.Detach(); derr != nil {
		err = errors.Join(err, derr)
	}
	return Exit{Detached: true}, err
}

// forget drops what belonged to the program before an exec.
func (s *session) forget() {
	s.loaderBP, s.runtime, s.as, s.cb = 0, nil, nil, nil
	s.forkStart, s.forkEnd = 0, 0
	s.funcs = make(map[uint64]string)
	s.kinds = make(map[uint64]string)
	s.regions = make(opens)
	s.tasks = make(opens)
	s.begins = make(map[int]*pendingBegin)
}

// arm sets the dynamic linker's breakpoint and, if the runtime is loaded,
// the runtime's.
func (s *session) arm() error {
	mods, err := s.tc.Modules()
	if err != nil {
		return err
	}
	for _, m := range mods {
		if m.Image == nil {
			continue
		}
		if sym, ok := m.Image.Symbol(loaderMarker); ok {
			addr, err := s.site(m, sym.Value, sym.Size)
			if err != nil {
				return fmt.Errorf("%s in %s: %w", loaderMarker, m.Name, err)
			}
			if err := s.tc.SetBreakpoint(addr); err != nil {
				return err
			}
			s.loaderBP = addr
			break
		}
	}
	return s.armRuntime()
}

// site returns where the breakpoint on the function at link-time address
// value goes, from the module's file.
func (s *session) site(m *target.Module, value, size uint64) (uint64, error) {
	if size == 0 || size > 256 {
		size = 256
	}
	code := make([]byte, size)
	n, err := m.Image.ReadVaddr(value, code)
	if err != nil && n == 0 {
		return 0, fmt.Errorf("reading its code: %w", err)
	}
	off, err := ptrace.ReturnSite(code[:n])
	if err != nil {
		return 0, err
	}
	return value + m.Bias + uint64(off), nil
}

// armRuntime sets the OMPD breakpoints once the runtime is loaded.
func (s *session) armRuntime() error {
	if s.runtime != nil {
		return nil
	}
	if _, err := s.tc.Modules(); err != nil {
		return err
	}
	rt, err := inspect.FindRuntime(s.view)
	if err != nil {
		return nil // not loaded (yet)
	}
	s.runtime = rt
	if fam := inspect.FamilyOf(rt); fam != nil && !fam.Traceable() {
		s.warn("the OpenMP runtime %s is the %s, whose OpenMP events cannot be traced yet: the program runs untraced", rt.Name, fam.Name())
		return nil
	}
	know, err := inspect.KnowledgeOf(rt)
	if err != nil {
		s.warn("no OpenMP events can be seen: %v", err)
		return nil
	}
	s.know = know
	n := 0
	for _, mk := range markers {
		value, size, ok := know.LinkSymbol(rt, mk.symbol)
		if !ok {
			continue
		}
		addr, err := s.site(rt, value, size)
		if err != nil {
			s.warn("no breakpoint at %s in %s: %v", mk.symbol, rt.Name, err)
			continue
		}
		if err := s.tc.SetBreakpoint(addr); err != nil {
			return err
		}
		s.kinds[addr] = mk.kind
		n++
	}
	if n == 0 {
		s.warn("the OpenMP runtime %s has no OMPD breakpoint locations (ompd_bp_*) that ompd-inspect could find; no OpenMP events can be seen", rt.Name)
		return nil
	}
	if fam := inspect.FamilyOf(rt); fam != nil && fam.ForkFunction() != "" {
		if value, size, ok := know.LinkSymbol(rt, fam.ForkFunction()); ok {
			s.forkStart, s.forkEnd = value+rt.Bias, value+rt.Bias+size
		}
	}
	s.cb = newEventCallbacks(s.view, rt)
	s.cb.UseKnowledge(know)
	s.warmUp(rt)
	return nil
}

// warmUp indexes, before the program goes on, what describing events
// needs: the runtime's DWARF types and the executable's functions (where
// compilers put outlined region and task bodies). Done
// at the first event instead, it would delay the first region by as much
// as the parsing takes and spoil its measured time.
func (s *session) warmUp(rt *target.Module) {
	llvm.WarmTypes(s.cb)
	if mods, _ := s.tc.Modules(); len(mods) > 0 && mods[0].Image != nil && mods[0] != rt {
		mods[0].Image.FuncAt(0)
	}
}

// addressSpace returns the OMPD address space, initializing it on first
// use (the runtime must have initialized its OMPD support).
func (s *session) addressSpace() (*llvm.AddressSpace, error) {
	if s.as != nil {
		s.as.Refresh()
		return s.as, nil
	}
	if s.cb == nil {
		return nil, errors.New("no OpenMP runtime with OMPD support is loaded")
	}
	if err := s.know.CheckMemory(s.view, s.runtime); err != nil {
		return nil, err
	}
	as, err := llvm.ProcessInitialize(s.cb, s.runtime.Name, nil)
	if err != nil {
		return nil, err
	}
	s.as = as
	for _, icv := range as.EnumerateICVs() {
		if icv.Name == "nthreads-var" {
			s.nthreads = icv.ID
		}
	}
	return as, nil
}

// now returns the seconds since the trace began.
func (s *session) now() float64 { return time.Since(s.start).Seconds() }

// hex formats an id.

// symbolize names the function at addr, once per address.
func (s *session) symbolize(addr uint64) string {
	name, ok := s.funcs[addr]
	if !ok {
		name = inspect.FuncName(s.view, addr)
		s.funcs[addr] = name
	}
	return name
}
