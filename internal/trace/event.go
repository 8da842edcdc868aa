package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/ompd/llvm"
	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/ptrace"
)

// eventTarget is the process as the OMPD layer sees it at an event: the
// stopped thread (the others run), memory read live through the Tracee's
// cache, the current modules.
type eventTarget struct {
	tc     *ptrace.Tracee
	thread []target.Thread
}

func (e *eventTarget) PID() int                            { return e.tc.PID() }
func (e *eventTarget) Threads() []target.Thread            { return e.thread }
func (e *eventTarget) Warnings() []string                  { return nil }
func (e *eventTarget) Close() error                        { return nil }
func (e *eventTarget) ReadMemory(a uint64, b []byte) error { return e.tc.ReadMemory(a, b) }
func (e *eventTarget) Modules() []*target.Module {
	mods, _ := e.tc.Modules()
	return mods
}

// eventCallbacks serves the OMPD layer at events: inspect's callbacks,
// with the thread context of the thread stopped at the event.
type eventCallbacks struct {
	*inspect.Callbacks
	view *eventTarget
}

func newEventCallbacks(view *eventTarget, rt *target.Module) *eventCallbacks {
	return &eventCallbacks{Callbacks: inspect.NewCallbacks(view, rt), view: view}
}

// ThreadContext implements ompd.Callbacks for the stopped thread.
func (c *eventCallbacks) ThreadContext(kind ompd.ThreadIDKind, id uint64) (ompd.ThreadContext, error) {
	for i := range c.view.thread {
		th := &c.view.thread[i]
		if kind == ompd.ThreadIDPthread && th.ThreadPointer() == id || kind == ompd.ThreadIDLWP && uint64(th.TID) == id {
			return th, nil
		}
	}
	return nil, fmt.Errorf("thread id %#x is not the thread stopped at the event", id)
}

// event handles one pass of thread tid through a breakpoint location. done
// is true when the trace ends here (--stop-at with --then detach or kill).
func (s *session) event(kind string, tid int, regs target.Registers) (done bool, exit Exit, err error) {
	ev := Event{Time: s.now(), Kind: kind, OSTID: tid}
	s.sum.threads[tid] = true
	th, err := s.threadAt(tid, regs)
	if errors.Is(err, errNoAddressSpace) {
		if kind != KindRuntimeReady {
			s.warn("no OpenMP details for events: %v", err)
		}
		return s.emit(&ev)
	}
	if kind == KindRuntimeReady && !s.as.StateTracking() {
		s.warn("the program runs without OMPD data collection (OMP_DEBUG=enabled is not in its environment): its runtime passes no other breakpoint location, so no OpenMP events follow")
	}
	if err != nil {
		// A worker passes ompd_bp_thread_begin before the thread that
		// created it has recorded its pthread id; its gtid is in its
		// thread-local __kmp_gtid already.
		if g, ok := s.tlsGTID(); ok {
			ev.GTID = &g
		} else if kind != KindRuntimeReady {
			ev.Warnings = append(ev.Warnings, fmt.Sprintf("not an OpenMP thread: %v", err))
		}
		return s.emit(&ev)
	}
	g := th.GTID()
	ev.GTID = &g
	if done, exit, err := s.switchedUnseen(tid, th); done || err != nil {
		return done, exit, err
	}
	switch kind {
	case KindParallelBegin:
		return s.parallelBegin(&ev, th, regs)
	case KindParallelEnd:
		s.parallelEnd(&ev, th)
	case KindTaskBegin, KindTaskEnd:
		if !s.task(&ev, th) {
			return false, Exit{}, nil
		}
	case KindThreadEnd:
		// What the thread began and did not end never ends now; its id
		// may come back for another thread.
		s.regions.forget(tid)
		s.tasks.forget(tid)
	}
	return s.emit(&ev)
}

// errNoAddressSpace wraps the failure to initialize OMPD on the runtime.
var errNoAddressSpace = errors.New("no OMPD address space")

// threadAt makes thread tid, stopped with regs, the one the OMPD layer
// sees, and returns its OpenMP thread handle.
func (s *session) threadAt(tid int, regs target.Registers) (*llvm.Thread, error) {
	s.view.thread = []target.Thread{{TID: tid, Regs: regs}}
	as, err := s.addressSpace()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoAddressSpace, err)
	}
	return as.ThreadHandle(ompd.ThreadIDPthread, regs.FSBase)
}

// tlsGTID reads the stopped thread's __kmp_gtid.
func (s *session) tlsGTID() (int, bool) {
	fam := inspect.FamilyOf(s.runtime)
	if fam == nil || fam.GTIDSymbol() == "" {
		return 0, false
	}
	addr, err := s.cb.ThreadSymbolAddr(&s.view.thread[0], fam.GTIDSymbol(), s.runtime.Name)
	if err != nil {
		return 0, false
	}
	var b [4]byte
	if err := s.tc.ReadMemory(addr, b[:]); err != nil {
		return 0, false
	}
	g := int(int32(binary.LittleEndian.Uint32(b[:])))
	return g, g >= 0
}

// parallelBegin describes a region that begins. OMPD says the new region
// is current at ompd_bp_parallel_begin, but LLVM's runtime passes it in
// its fork function (the family's ForkFunction) before it makes the new
// team the encountering thread's
// (ompd_get_curr_parallel_handle still gives the enclosing region there,
// or a hot team's previous state). Coming from there, the event waits
// until the thread writes its team pointer (a watch), and is described
// then. Serialized regions are current at the location.
func (s *session) parallelBegin(ev *Event, th *llvm.Thread, regs target.Registers) (bool, Exit, error) {
	req := s.requested(th)
	if !s.fromFork(regs) {
		return s.beginRegion(ev, th, req)
	}
	if old := s.begins[ev.OSTID]; old != nil {
		// Never seen to happen: the runtime writes the team pointer
		// before it can pass another location.
		delete(s.begins, ev.OSTID)
		old.ev.Warnings = append(old.ev.Warnings, "the thread passed another parallel-begin before the region became current")
		if done, exit, err := s.emit(old.ev); done || err != nil {
			return done, exit, err
		}
	}
	addr, err := th.TeamFieldAddr()
	if err == nil {
		err = s.tc.WatchWrite(ev.OSTID, addr)
	}
	if err != nil {
		ev.Warnings = append(ev.Warnings, fmt.Sprintf("the new region is not current yet, and watching for it failed: %v", err))
		return s.beginRegion(ev, th, req)
	}
	s.begins[ev.OSTID] = &pendingBegin{ev: ev, requested: req}
	return false, Exit{}, nil
}

// switchedUnseen resolves the thread's pending parallel-begin at its next
// location when the watch never fired (debug register traps are not
// delivered in some virtual machines; and a hot team's pointer may be
// written with the value it had). The thread's next location is in the
// new region (a nested region's begin, or the region's end), so the
// region is current there.
func (s *session) switchedUnseen(tid int, th *llvm.Thread) (bool, Exit, error) {
	pb := s.begins[tid]
	if pb == nil {
		return false, Exit{}, nil
	}
	delete(s.begins, tid)
	if err := s.tc.Unwatch(tid); err != nil {
		pb.ev.Warnings = append(pb.ev.Warnings, err.Error())
	}
	return s.beginRegion(pb.ev, th, pb.requested)
}

// beginRegion describes the thread's current region as the one ev begins,
// and remembers it for its end.
func (s *session) beginRegion(ev *Event, th *llvm.Thread, requested *int) (bool, Exit, error) {
	p, err := th.CurrentParallel()
	if err != nil {
		ev.Warnings = append(ev.Warnings, fmt.Sprintf("current region: %v", err))
		return s.emit(ev)
	}
	r := s.region(p, ev, false)
	r.Requested = requested
	ev.Region = r
	k := s.sum.begin(ClassParallel, r.Location, r.Function, r.TeamSize, nil)
	s.regions.begin(ev.OSTID, open{id: r.ID, time: ev.Time, key: k})
	return s.emit(ev)
}

// fromFork reports whether the thread, stopped at the first instruction
// of a breakpoint location, was called from the runtime's function that
// forks a team (the family's ForkFunction).
func (s *session) fromFork(regs target.Registers) bool {
	var b [8]byte
	if s.forkEnd == 0 || s.tc.ReadMemory(regs.Rsp, b[:]) != nil {
		return false
	}
	ret := binary.LittleEndian.Uint64(b[:])
	return ret > s.forkStart && ret <= s.forkEnd
}

// teamSwitched finishes a parallel-begin event once its thread made the
// new region current.
func (s *session) teamSwitched(tid int, regs target.Registers) (bool, Exit, error) {
	pb := s.begins[tid]
	delete(s.begins, tid)
	if pb == nil {
		return false, Exit{}, nil
	}
	th, err := s.threadAt(tid, regs)
	if err != nil {
		pb.ev.Warnings = append(pb.ev.Warnings, fmt.Sprintf("thread: %v", err))
		return s.emit(pb.ev)
	}
	return s.beginRegion(pb.ev, th, pb.requested)
}

// parallelEnd describes a region that ends and matches it to its begin.
func (s *session) parallelEnd(ev *Event, th *llvm.Thread) {
	p, err := th.CurrentParallel()
	if err != nil {
		ev.Warnings = append(ev.Warnings, fmt.Sprintf("current region: %v", err))
		return
	}
	ev.Region = s.region(p, ev, true)
	if o, ok := s.regions.end(ev.OSTID, ev.Region.ID); ok {
		d := ev.Time - o.time
		ev.Duration = &d
		s.sum.end(o.key, d, ev.Region.Threads)
	}
}

// region describes p; with members, the team's gtids too.
func (s *session) region(p *llvm.Parallel, ev *Event, members bool) *Region {
	r := &Region{ID: ompd.Hex(p.Addr()), Serialized: p.Serialized()}
	note := func(what string, err error) {
		ev.Warnings = append(ev.Warnings, fmt.Sprintf("region %s: %s: %v", r.ID, what, err))
	}
	if fn, err := p.Function(); err == nil {
		r.Function = s.symbolize(fn)
	} else {
		note("entry function", err)
	}
	if loc, err := p.Location(); err == nil {
		r.Location = loc.String()
	} else {
		note("location", err)
	}
	if n, err := p.TeamSize(); err == nil {
		r.TeamSize = n
	} else {
		note("team size", err)
	}
	if l, err := p.Level(); err == nil {
		r.Level = l
	} else {
		note("level", err)
	}
	if r.Level > 1 {
		if e, err := p.Enclosing(); err == nil && e != nil {
			r.Parent = ompd.Hex(e.Addr())
		}
	}
	if members {
		for i := 0; i < r.TeamSize; i++ {
			t, err := p.ThreadIn(i)
			if err != nil {
				note(fmt.Sprintf("thread %d of the team", i), err)
				break
			}
			r.Threads = append(r.Threads, t.GTID())
		}
	}
	return r
}

// requested reads the nthreads-var of the thread that encounters a
// region, as it begins: the number of threads the region gets without a
// num_threads clause (the first element of the list).
func (s *session) requested(th *llvm.Thread) *int {
	v, err := s.as.ICVValue(th, s.nthreads)
	if err != nil {
		return nil
	}
	n := int(v.Num)
	if v.IsString {
		first, _, _ := strings.Cut(v.Str, ",")
		if n, err = strconv.Atoi(first); err != nil {
			return nil
		}
	}
	return &n
}

// task describes the task of a task event. It returns false for a
// task-end pass that ends no explicit task (LLVM's runtime passes
// ompd_bp_task_end after a barrier's task loop too): that pass is counted
// as ignored, not reported.
func (s *session) task(ev *Event, th *llvm.Thread) bool {
	k, err := th.CurrentTask()
	if err != nil {
		ev.Warnings = append(ev.Warnings, fmt.Sprintf("current task: %v", err))
		return true
	}
	fl, err := k.Flags()
	if err != nil {
		ev.Warnings = append(ev.Warnings, fmt.Sprintf("task %s: flags: %v", ompd.Hex(k.Addr()), err))
		return true
	}
	if !fl.Explicit && ev.Kind == KindTaskEnd {
		s.sum.ignored++
		return false
	}
	t := &Task{ID: ompd.Hex(k.Addr()), Flags: flagNames(fl)}
	if fn, err := k.Function(); err == nil {
		t.Function = s.symbolize(fn)
	} else {
		ev.Warnings = append(ev.Warnings, fmt.Sprintf("task %s: entry function: %v", t.ID, err))
	}
	if loc, err := k.Location(); err == nil {
		t.Location = loc.String()
	} else if !errors.Is(err, ompd.ErrUnavailable) {
		ev.Warnings = append(ev.Warnings, fmt.Sprintf("task %s: location: %v", t.ID, err))
	}
	if g, err := k.Generating(); err == nil && g != nil {
		t.Parent = ompd.Hex(g.Addr())
	}
	if p, err := k.Parallel(); err == nil && p != nil {
		t.Region = ompd.Hex(p.Addr())
	}
	ev.Task = t
	s.pairTask(ev)
	return true
}

// pairTask counts a described task event in the summary and, for a
// task-end, matches it to the begin of the same part: the same task begun
// on the same thread (see opens).
func (s *session) pairTask(ev *Event) {
	switch ev.Kind {
	case KindTaskBegin:
		gtid := -1
		if ev.GTID != nil {
			gtid = *ev.GTID
		}
		k := s.sum.begin(ClassTask, ev.Task.Location, ev.Task.Function, 0, []int{gtid})
		s.tasks.begin(ev.OSTID, open{id: ev.Task.ID, time: ev.Time, key: k})
	case KindTaskEnd:
		if o, ok := s.tasks.end(ev.OSTID, ev.Task.ID); ok {
			d := ev.Time - o.time
			ev.Duration = &d
			s.sum.end(o.key, d, nil)
		}
	}
}

func flagNames(f ompd.Flags) []string {
	out := []string{"implicit"}
	if f.Explicit {
		out[0] = "explicit"
	}
	if f.Final {
		out = append(out, "final")
	}
	if f.Untied {
		out = append(out, "untied")
	}
	if f.Serial {
		out = append(out, "undeferred")
	}
	return out
}

// emit passes a finished event on, and stops at it when --stop-at selects
// it.
func (s *session) emit(ev *Event) (bool, Exit, error) {
	s.sum.events[ev.Kind]++
	if s.opts.OnEvent != nil && (s.opts.Classes == nil || s.opts.Classes[classOf(ev.Kind)]) {
		s.opts.OnEvent(*ev)
	}
	if s.opts.StopAt == nil || s.stopped || !s.opts.StopAt.matches(ev) {
		return false, Exit{}, nil
	}
	s.stopped = true
	snap, err := s.tc.StopAll()
	if err != nil {
		return false, Exit{}, fmt.Errorf("stopping the program at %s: %w", ev.Kind, err)
	}
	if s.opts.OnStop != nil {
		if err := s.opts.OnStop(snap, *ev); err != nil {
			return false, Exit{}, err
		}
	}
	switch s.opts.Then {
	case ThenDetach:
		return true, Exit{Detached: true}, s.tc.Detach()
	case ThenKill:
		return true, Exit{Killed: true, Code: 128 + 9, Signal: 9}, s.tc.Kill()
	}
	return false, Exit{}, nil
}
