package llvm_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/ompd/llvm"
)

// TestLayoutsDiffer checks the harness itself: the layouts really move
// and resize what the OMPD layer reads, so that the same answers from
// all of them mean the layout is read, not assumed.
func TestLayoutsDiffer(t *testing.T) {
	probes := [][2]string{
		{"kmp_info_t", "th"}, {"kmp_team_p", "t"}, {"kmp_desc_t", "ds"},
		{"kmp_base_team_t", "t_nproc"}, {"kmp_base_info_t", "th_current_task"},
		{"kmp_taskdata_t", "td_parent"}, {"kmp_desc_base_t", "ds_thread"}, {"ompt_thread_info_t", "state"},
	}
	seen := map[string]map[[2]uint64]bool{}
	for _, p := range layouts {
		l := newLayout(p)
		for _, pr := range probes {
			off, size := l.path(pr[0], pr[1])
			k := pr[0] + "." + pr[1]
			if seen[k] == nil {
				seen[k] = map[[2]uint64]bool{}
			}
			seen[k][[2]uint64{off, size}] = true
		}
	}
	for k, v := range seen {
		if len(v) < 2 {
			t.Errorf("%s has the same offset and size in every layout", k)
		}
	}
}

func TestProcessInitialize(t *testing.T) {
	forLayouts(t, tracking, func(t *testing.T, s *scenario) {
		as := s.init(t)
		if !as.StateTracking() {
			t.Error("StateTracking() = false, want true (ompd_state = 1)")
		}
		if got := as.Sizes(); got != s.lay.p.sizes {
			t.Errorf("Sizes() = %+v, want %+v", got, s.lay.p.sizes)
		}
		if v := try(as.OMPVersion()).must(t); v != ompVersion {
			t.Errorf("OMPVersion() = %d, want %d", v, ompVersion)
		}
		if v := try(as.OMPVersionString()).must(t); v != "201611" {
			t.Errorf("OMPVersionString() = %q", v)
		}
	})
	s := newScenario(t, layouts[0], scenarioOpts{})
	if s.init(t).StateTracking() {
		t.Error("StateTracking() = true with ompd_state = 0")
	}
}

func TestProcessInitializeErrors(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(s *scenario)
		rc     ompd.RC
		want   []string
	}{
		{"no ompd_state", func(s *scenario) { delete(s.b.tgt.syms, "ompd_state") }, ompd.RCIncompatible,
			[]string{"ompd_process_initialize", "layout symbol ompd_state", "not found"}},
		{"no sizeof kmp_info_t", func(s *scenario) { delete(s.b.tgt.syms, "ompd_sizeof__kmp_info_t") }, ompd.RCIncompatible,
			[]string{"ompd_sizeof__kmp_info_t"}},
		{"stripped runtime", func(s *scenario) {
			for name := range s.b.tgt.syms {
				if strings.HasPrefix(name, "ompd_") {
					delete(s.b.tgt.syms, name)
				}
			}
		}, ompd.RCIncompatible, []string{"ompd_state"}},
		{"runtime not initialized", func(s *scenario) { s.b.put(s.b.tgt.syms["ompd_sizeof__kmp_info_t"], 8, 0) },
			ompd.RCUnavailable, []string{"not initialized"}},
		{"unreadable ompd_state", func(s *scenario) {
			s.b.tgt.mem.denied = append(s.b.tgt.mem.denied, span{s.b.tgt.syms["ompd_state"], 8})
		}, ompd.RCIncompatible, []string{"reading layout symbol ompd_state at"}},
		{"sizes fail", func(s *scenario) { s.b.tgt.sizesErr = errors.New("no architecture") }, ompd.RCCallbackError,
			[]string{"no architecture"}},
		{"16-bit pointers", func(s *scenario) { s.b.tgt.sizes.Pointer = 2 }, ompd.RCUnsupported, []string{"pointer size 2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newScenario(t, layouts[0], tracking)
			c.mutate(s)
			as, err := llvm.ProcessInitialize(s.cb, hint, nil)
			if as != nil {
				t.Error("got a handle along with the error")
			}
			wantRC(t, err, c.rc)
			wantErrContains(t, err, c.want...)
			if !errors.Is(err, &ompd.Error{RC: c.rc}) {
				t.Errorf("errors.Is(err, rc %v) = false", c.rc)
			}
		})
	}
}

// A layout symbol that is missing fails only the queries that need it,
// naming the symbol.
func TestMissingLayoutSymbol(t *testing.T) {
	s := newScenario(t, layouts[0], tracking)
	delete(s.b.tgt.syms, "ompd_access__kmp_base_team_t__t_nproc")
	as := s.init(t)
	p := try(try(as.ThreadHandle(ompd.ThreadIDPthread, ptTh1)).must(t).CurrentParallel()).must(t)
	_, err := p.TeamSize()
	wantRC(t, err, ompd.RCError)
	wantErrContains(t, err, "team-size-var", "ompd_access__kmp_base_team_t__t_nproc", "not found")
	if _, err := p.ThreadIn(0); err == nil {
		t.Error("ThreadIn without t_nproc's offset: no error")
	}
	if l := try(p.Level()).must(t); l != 2 {
		t.Errorf("Level() = %d, want 2", l)
	}
}

// Everything the OMPD layer looks up exists in the runtime (the fake
// publishes exactly LLVM 19's layout symbols), and every lookup names the
// runtime module.
func TestSymbolsAsked(t *testing.T) {
	s := newScenario(t, layouts[0], full)
	walkEverything(s.init(t))
	for name := range s.b.tgt.asked {
		if _, ok := s.b.tgt.syms[name]; !ok {
			t.Errorf("looked up %s, which the runtime does not define", name)
		}
	}
	for h := range s.b.tgt.hints {
		if h != hint {
			t.Errorf("SymbolAddr called with fileHint %q, want %q", h, hint)
		}
	}
	for _, m := range s.b.tgt.maxStrings {
		if m <= 0 || m > 4096 {
			t.Errorf("ReadString with max %d", m)
		}
	}
}

func TestThreads(t *testing.T) {
	forLayouts(t, tracking, func(t *testing.T, s *scenario) {
		as := s.init(t)
		ths := try(as.Threads()).must(t)
		if len(ths) != len(threadSpecs) {
			t.Fatalf("Threads() gave %d threads, want %d", len(ths), len(threadSpecs))
		}
		for i, ts := range threadSpecs {
			th := ths[i]
			if th.GTID() != ts.gtid || th.Addr() != s.base(ts.name) {
				t.Errorf("Threads()[%d] = gtid %d at %s, want gtid %d at %s", i, th.GTID(), s.name(th.Addr()), ts.gtid, ts.name)
			}
			if id := try(th.ID(ompd.ThreadIDPthread)).must(t); id != ts.pt {
				t.Errorf("%s: ID = %#x, want %#x", ts.name, id, ts.pt)
			}
			if th.Context() != nil || th.AddressSpace() != as {
				t.Errorf("%s: Context() = %v, AddressSpace() = %p", ts.name, th.Context(), th.AddressSpace())
			}
			h := try(as.ThreadHandle(ompd.ThreadIDPthread, ts.pt)).must(t)
			if h.Compare(th) != 0 || h.GTID() != ts.gtid {
				t.Errorf("ThreadHandle(%#x) = gtid %d at %s, want %s", ts.pt, h.GTID(), s.name(h.Addr()), ts.name)
			}
			if h.Context() != (fakeCtx{ompd.ThreadIDPthread, ts.pt}) {
				t.Errorf("ThreadHandle(%#x).Context() = %v", ts.pt, h.Context())
			}
			if n := try(th.ThreadNum()).must(t); n != ts.tid {
				t.Errorf("%s: ThreadNum() = %d, want %d", ts.name, n, ts.tid)
			}
		}
		// The threads' pthread ids were read ahead, one list of where
		// each lies, in gtid order.
		if len(s.b.tgt.prefetched) != 1 || len(s.b.tgt.prefetched[0]) != len(threadSpecs) {
			t.Fatalf("prefetched %#x; want one list of %d addresses", s.b.tgt.prefetched, len(threadSpecs))
		}
		for i, ts := range threadSpecs {
			var b [8]byte
			a := s.b.tgt.prefetched[0][i]
			if err := s.b.tgt.mem.read(a, b[:]); err != nil || binary.LittleEndian.Uint64(b[:]) != ts.pt {
				t.Errorf("prefetched address %d (%#x) holds %#x (%v); want %s's pthread id %#x", i, a, b, err, ts.name, ts.pt)
			}
		}
		if c := ths[0].Compare(ths[1]); c != -1 || ths[1].Compare(ths[0]) != 1 {
			t.Errorf("Compare of different threads = %d", c)
		}
		_, err := ths[0].ID(ompd.ThreadIDLWP)
		wantRC(t, err, ompd.RCUnsupported)
	})
}

func TestThreadHandleErrors(t *testing.T) {
	s := newScenario(t, layouts[0], tracking)
	as := s.init(t)
	_, err := as.ThreadHandle(ompd.ThreadIDPthread, 0x12345)
	if !errors.Is(err, ompd.ErrUnavailable) {
		t.Errorf("unknown pthread: %v, want ErrUnavailable", err)
	}
	wantErrContains(t, err, "ompd_get_thread_handle", "0x12345", "not an OpenMP thread")
	_, err = as.ThreadHandle(ompd.ThreadIDLWP, 1234)
	if !errors.Is(err, ompd.ErrUnsupported) {
		t.Errorf("LWP id: %v, want ErrUnsupported", err)
	}
	s.b.tgt.ctxErr = errors.New("no such thread")
	_, err = as.ThreadHandle(ompd.ThreadIDPthread, ptTh1)
	wantRC(t, err, ompd.RCCallbackError)
	wantErrContains(t, err, "no such thread")
}

func TestState(t *testing.T) {
	forLayouts(t, tracking, func(t *testing.T, s *scenario) {
		as := s.init(t)
		for _, ts := range threadSpecs {
			th := try(as.ThreadHandle(ompd.ThreadIDPthread, ts.pt)).must(t)
			st, wait, err := th.State()
			if err != nil || st != ts.state || wait != ts.wait {
				t.Errorf("%s: State() = %v, %#x, %v; want %v, %#x", ts.name, st, wait, err, ts.state, ts.wait)
			}
		}
		th2 := try(as.ThreadHandle(ompd.ThreadIDPthread, ptTh2)).must(t)
		st, _, _ := th2.State()
		if st.String() != "wait_lock" || st.FullName() != "ompt_state_wait_lock" || !st.Waiting() {
			t.Errorf("th2 state: %q %q waiting=%v", st.String(), st.FullName(), st.Waiting())
		}
	})
	s := newScenario(t, layouts[0], scenarioOpts{})
	th := try(s.init(t).ThreadHandle(ompd.ThreadIDPthread, ptTh0)).must(t)
	_, _, err := th.State()
	if !errors.Is(err, ompd.ErrNeedsStateTracking) {
		t.Fatalf("State() without tracking: %v", err)
	}
	wantErrContains(t, err, "ompd_get_state", "OMP_DEBUG=enabled")
}

func TestStateNames(t *testing.T) {
	for _, c := range []struct {
		s        ompd.State
		short    string
		full     string
		waiting  bool
		enumerat bool
	}{
		{ompd.StateWorkSerial, "work_serial", "ompt_state_work_serial", false, true},
		{ompd.StateWorkParallel, "work_parallel", "ompt_state_work_parallel", false, true},
		{ompd.StateWaitBarrier, "wait_barrier", "ompt_state_wait_barrier", true, true},
		{ompd.StateWaitBarrierImplicitParallel, "wait_barrier_implicit_parallel", "ompt_state_wait_barrier_implicit_parallel", true, true},
		{ompd.StateWaitTargetUpdate, "wait_target_update", "ompt_state_wait_target_update", true, true},
		{ompd.StateIdle, "idle", "ompt_state_idle", false, true},
		{ompd.StateOverhead, "overhead", "ompt_state_overhead", false, true},
		{ompd.StateUndefined, "undefined", "ompt_state_undefined", false, false},
		{ompd.State(0x7), "0x7", "ompt_state_0x7", false, false},
	} {
		if c.s.String() != c.short || c.s.FullName() != c.full || c.s.Waiting() != c.waiting {
			t.Errorf("State(%#x): %q %q %v; want %q %q %v", uint64(c.s), c.s.String(), c.s.FullName(), c.s.Waiting(), c.short, c.full, c.waiting)
		}
	}
}

func TestEnumerateStates(t *testing.T) {
	s := newScenario(t, layouts[0], tracking)
	got := s.init(t).EnumerateStates()
	want := []ompd.StateInfo{
		{Value: 0x000, Name: "ompt_state_work_serial"}, {Value: 0x001, Name: "ompt_state_work_parallel"}, {Value: 0x002, Name: "ompt_state_work_reduction"},
		{Value: 0x010, Name: "ompt_state_wait_barrier"}, {Value: 0x011, Name: "ompt_state_wait_barrier_implicit_parallel"},
		{Value: 0x012, Name: "ompt_state_wait_barrier_implicit_workshare"}, {Value: 0x013, Name: "ompt_state_wait_barrier_implicit"},
		{Value: 0x014, Name: "ompt_state_wait_barrier_explicit"}, {Value: 0x020, Name: "ompt_state_wait_taskwait"}, {Value: 0x021, Name: "ompt_state_wait_taskgroup"},
		{Value: 0x040, Name: "ompt_state_wait_mutex"}, {Value: 0x041, Name: "ompt_state_wait_lock"}, {Value: 0x042, Name: "ompt_state_wait_critical"},
		{Value: 0x043, Name: "ompt_state_wait_atomic"}, {Value: 0x044, Name: "ompt_state_wait_ordered"}, {Value: 0x080, Name: "ompt_state_wait_target"},
		{Value: 0x081, Name: "ompt_state_wait_target_map"}, {Value: 0x082, Name: "ompt_state_wait_target_update"}, {Value: 0x100, Name: "ompt_state_idle"},
		{Value: 0x101, Name: "ompt_state_overhead"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("EnumerateStates() =\n%v\nwant\n%v", got, want)
	}
	for _, si := range got {
		if si.Value.FullName() != si.Name {
			t.Errorf("%#x: FullName %q, enumerated as %q", uint64(si.Value), si.Value.FullName(), si.Name)
		}
	}
}

// walkRegions returns the chain of regions from p outwards, at most max.
func walkRegions(t *testing.T, p *llvm.Parallel, max int) ([]*llvm.Parallel, error) {
	t.Helper()
	var out []*llvm.Parallel
	var err error
	within(t, "walking enclosing regions", func() {
		for len(out) < max {
			out = append(out, p)
			if p, err = p.Enclosing(); err != nil {
				return
			}
		}
	})
	return out, err
}

type regionWant struct {
	name       string // team
	lwt        string // light-weight team, "" for none
	level      int
	active     int
	size       int
	fn         uint64
	threads    []string
	tasks      []string
	toolData   uint64
	threadGTID []int
}

func checkRegion(t *testing.T, s *scenario, p *llvm.Parallel, w regionWant) {
	t.Helper()
	wantAddr := s.bteam(w.name)
	if w.lwt != "" {
		wantAddr = s.lwt[w.lwt]
	}
	if p.Team() != s.bteam(w.name) || p.Addr() != wantAddr || p.Serialized() != (w.lwt != "") {
		t.Errorf("region = team %s addr %s serialized %v; want %s/%q", s.name(p.Team()), s.name(p.Addr()), p.Serialized(), w.name, w.lwt)
	}
	if v := try(p.Level()).must(t); v != w.level {
		t.Errorf("%s: Level() = %d, want %d", w.name, v, w.level)
	}
	if v := try(p.ActiveLevel()).must(t); v != w.active {
		t.Errorf("%s: ActiveLevel() = %d, want %d", w.name, v, w.active)
	}
	if v := try(p.TeamSize()).must(t); v != w.size {
		t.Errorf("%s: TeamSize() = %d, want %d", w.name, v, w.size)
	}
	if v := try(p.Function()).must(t); v != w.fn {
		t.Errorf("%s: Function() = %#x, want %#x", w.name, v, w.fn)
	}
	for i, th := range w.threads {
		h := try(p.ThreadIn(i)).must(t)
		if h.Addr() != s.base(th) || h.GTID() != w.threadGTID[i] {
			t.Errorf("%s: ThreadIn(%d) = %s gtid %d, want %s gtid %d", w.name, i, s.name(h.Addr()), h.GTID(), th, w.threadGTID[i])
		}
	}
	for _, n := range []int{-1, w.size} {
		if _, err := p.ThreadIn(n); !errors.Is(err, ompd.ErrBadInput) {
			t.Errorf("%s: ThreadIn(%d): %v, want ErrBadInput", w.name, n, err)
		}
		if _, err := p.TaskIn(n); !errors.Is(err, ompd.ErrBadInput) {
			t.Errorf("%s: TaskIn(%d): %v, want ErrBadInput", w.name, n, err)
		}
	}
	for i, tk := range w.tasks {
		k := try(p.TaskIn(i)).must(t)
		if k.TaskData() != s.task[tk] || k.Addr() != s.task[tk] {
			t.Errorf("%s: TaskIn(%d) = %s, want %s", w.name, i, s.name(k.Addr()), tk)
		}
	}
	if v, _, err := p.ToolData(); err != nil || v != w.toolData {
		t.Errorf("%s: ToolData() = %#x, %v; want %#x", w.name, v, err, w.toolData)
	}
}

var (
	regT0 = regionWant{name: "T0", level: 0, active: 0, size: 1, fn: 0, threads: []string{"th0"}, threadGTID: []int{0},
		tasks: []string{"imp0.0"}, toolData: 0x2000}
	regT1 = regionWant{name: "T1", level: 1, active: 1, size: 3, fn: fnOuter, threads: []string{"th0", "th1", "th2"},
		threadGTID: []int{0, 1, 2}, tasks: []string{"imp1.0", "imp1.1", "imp1.2"}, toolData: 0x2001}
	regT2 = regionWant{name: "T2", level: 2, active: 2, size: 2, fn: fnInner, threads: []string{"th1", "th3"},
		threadGTID: []int{1, 3}, tasks: []string{"imp2.0", "imp2.1"}, toolData: 0x2002}
	regSL2 = regionWant{name: "S", lwt: "L2", level: 4, active: 1, size: 1, fn: fnSerial, threads: []string{"th2"},
		threadGTID: []int{2}, tasks: []string{"impS.0"}, toolData: 0x2102}
	regSL1 = regionWant{name: "S", lwt: "L1", level: 4, active: 1, size: 1, fn: fnSerial, threads: []string{"th2"},
		threadGTID: []int{2}, tasks: []string{"impS.0"}, toolData: 0x2101}
)

func TestParallelNested(t *testing.T) {
	forLayouts(t, tracking, func(t *testing.T, s *scenario) {
		as := s.init(t)
		th1 := try(as.ThreadHandle(ompd.ThreadIDPthread, ptTh1)).must(t)
		chain, err := walkRegions(t, try(th1.CurrentParallel()).must(t), 10)
		if !errors.Is(err, ompd.ErrUnavailable) {
			t.Errorf("Enclosing() of the outermost region: %v, want ErrUnavailable", err)
		}
		wantErrContains(t, err, "ompd_get_enclosing_parallel_handle", "has no parent team")
		want := []regionWant{regT2, regT1, regT0}
		if len(chain) != len(want) {
			t.Fatalf("th1's regions: %d, want %d", len(chain), len(want))
		}
		for i, w := range want {
			checkRegion(t, s, chain[i], w)
		}
		// The same regions reached from another thread compare equal.
		th0 := try(as.ThreadHandle(ompd.ThreadIDPthread, ptTh0)).must(t)
		p0 := try(th0.CurrentParallel()).must(t)
		if p0.Compare(chain[1]) != 0 || chain[1].Compare(p0) != 0 {
			t.Error("T1 from th0 and from th1 compare different")
		}
		th3 := try(as.ThreadHandle(ompd.ThreadIDPthread, ptTh3)).must(t)
		if try(th3.CurrentParallel()).must(t).Compare(chain[0]) != 0 {
			t.Error("T2 from th3 and from th1 compare different")
		}
		if a, b := chain[0].Compare(chain[1]), chain[1].Compare(chain[0]); a == 0 || a != -b {
			t.Errorf("T2 vs T1: Compare %d and %d", a, b)
		}
	})
}

func TestParallelSerialized(t *testing.T) {
	forLayouts(t, tracking, func(t *testing.T, s *scenario) {
		as := s.init(t)
		th2 := try(as.ThreadHandle(ompd.ThreadIDPthread, ptTh2)).must(t)
		chain, err := walkRegions(t, try(th2.CurrentParallel()).must(t), 10)
		if !errors.Is(err, ompd.ErrUnavailable) {
			t.Errorf("end of chain: %v", err)
		}
		want := []regionWant{regSL2, regSL1, regT1, regT0}
		if len(chain) != len(want) {
			t.Fatalf("th2's regions: %d, want %d", len(chain), len(want))
		}
		for i, w := range want {
			checkRegion(t, s, chain[i], w)
		}
		if chain[0].Compare(chain[1]) == 0 {
			t.Error("the two serialized regions compare equal")
		}
		th0 := try(as.ThreadHandle(ompd.ThreadIDPthread, ptTh0)).must(t)
		if try(th0.CurrentParallel()).must(t).Compare(chain[2]) != 0 {
			t.Error("T1 reached through th2's serialized regions differs from th0's T1")
		}
	})
}

func TestNoTeamNoTask(t *testing.T) {
	s := newScenario(t, layouts[1], tracking)
	as := s.init(t)
	pool := try(as.ThreadHandle(ompd.ThreadIDPthread, ptPool)).must(t)
	_, err := pool.CurrentParallel()
	if !errors.Is(err, ompd.ErrUnavailable) {
		t.Errorf("CurrentParallel() of a pool thread: %v", err)
	}
	wantErrContains(t, err, "ompd_get_curr_parallel_handle", "has no team")
	_, err = pool.CurrentTask()
	if !errors.Is(err, ompd.ErrUnavailable) {
		t.Errorf("CurrentTask() of a pool thread: %v", err)
	}
	wantErrContains(t, err, "ompd_get_curr_task_handle", "has no current task")
	// A NULL t_threads entry.
	p := try(try(as.ThreadHandle(ompd.ThreadIDPthread, ptTh0)).must(t).CurrentParallel()).must(t)
	arr := try(s.b.tgt.mem.readPtr(s, s.b.addrOf(s.team["T1"], "kmp_team_p", "t.t_threads"))).must(t)
	s.b.ptr(arr+2*uint64(s.lay.p.sizes.Pointer), 0)
	_, err = p.ThreadIn(2)
	if !errors.Is(err, ompd.ErrUnavailable) {
		t.Errorf("ThreadIn of a NULL t_threads entry: %v", err)
	}
	wantErrContains(t, err, "t_threads[2]", "NULL")
}

func (im *image) readPtr(s *scenario, addr uint64) (uint64, error) {
	buf := make([]byte, 8)
	ps := s.lay.p.sizes.Pointer
	if err := im.read(addr, buf[:ps]); err != nil {
		return 0, err
	}
	var v uint64
	for i := ps - 1; i >= 0; i-- {
		v = v<<8 | uint64(buf[i])
	}
	return v, nil
}

// A team member missing from __kmp_threads still gives a usable thread
// handle, with gtid -1.
func TestThreadInNotInThreadTable(t *testing.T) {
	forLayouts(t, tracking, func(t *testing.T, s *scenario) {
		ghost := s.b.obj("kmp_info_t")
		s.b.set(ghost, "kmp_info_t", "th.th_info.ds.ds_thread", 0x7fa09700)
		s.b.set(ghost, "kmp_info_t", "th.th_info.ds.ds_tid", 1)
		arr := try(s.b.tgt.mem.readPtr(s, s.b.addrOf(s.team["T1"], "kmp_team_p", "t.t_threads"))).must(t)
		s.b.ptr(arr+uint64(s.lay.p.sizes.Pointer), ghost)
		as := s.init(t)
		p := try(try(as.ThreadHandle(ompd.ThreadIDPthread, ptTh0)).must(t).CurrentParallel()).must(t)
		h := try(p.ThreadIn(1)).must(t)
		if h.GTID() != -1 || h.Addr() != s.b.addrOf(ghost, "kmp_info_t", "th") || h.Context() != nil {
			t.Errorf("ThreadIn(1) = gtid %d at %#x", h.GTID(), h.Addr())
		}
		if id := try(h.ID(ompd.ThreadIDPthread)).must(t); id != 0x7fa09700 {
			t.Errorf("ID() = %#x", id)
		}
		if n := try(h.ThreadNum()).must(t); n != 1 {
			t.Errorf("ThreadNum() = %d", n)
		}
		if _, err := as.ThreadHandle(ompd.ThreadIDPthread, 0x7fa09700); !errors.Is(err, ompd.ErrUnavailable) {
			t.Errorf("ThreadHandle of a thread missing from __kmp_threads: %v", err)
		}
	})
}

type taskWant struct {
	td, lwt     string
	flags       ompd.Flags
	fn          uint64
	exit, enter uint64
	toolData    uint64
	region      regionWant
	scheduling  string // "" for unavailable
}

func checkTask(t *testing.T, s *scenario, as *llvm.AddressSpace, k *llvm.Task, w taskWant) {
	t.Helper()
	wantAddr := s.task[w.td]
	if w.lwt != "" {
		wantAddr = s.lwt[w.lwt]
	}
	if k.TaskData() != s.task[w.td] || k.Addr() != wantAddr {
		t.Errorf("task = %s addr %s, want %s/%q", s.name(k.TaskData()), s.name(k.Addr()), w.td, w.lwt)
		return
	}
	if f := try(k.Flags()).must(t); f != w.flags {
		t.Errorf("%s: Flags() = %+v, want %+v", w.td, f, w.flags)
	}
	if imp := try(k.Implicit()).must(t); imp == w.flags.Explicit {
		t.Errorf("%s: Implicit() = %v", w.td, imp)
	}
	if fn := try(k.Function()).must(t); fn != w.fn {
		t.Errorf("%s: Function() = %#x, want %#x", w.td, fn, w.fn)
	}
	exit, enter, err := k.Frame()
	if as.StateTracking() {
		if err != nil || exit != w.exit || enter != w.enter {
			t.Errorf("%s: Frame() = %#x, %#x, %v; want %#x, %#x", w.td, exit, enter, err, w.exit, w.enter)
		}
	} else if !errors.Is(err, ompd.ErrNeedsStateTracking) {
		t.Errorf("%s: Frame() without tracking: %v", w.td, err)
	}
	if v, _, err := k.ToolData(); err != nil || v != w.toolData {
		t.Errorf("%s: ToolData() = %#x, %v; want %#x", w.td, v, err, w.toolData)
	}
	checkRegion(t, s, try(k.Parallel()).must(t), w.region)
	sp, err := k.Scheduling()
	if w.scheduling == "" {
		if !errors.Is(err, ompd.ErrUnavailable) {
			t.Errorf("%s: Scheduling() = %v, %v; want ErrUnavailable", w.td, sp, err)
		}
	} else if err != nil || sp.TaskData() != s.task[w.scheduling] {
		t.Errorf("%s: Scheduling() = %v, %v; want %s", w.td, sp, err, w.scheduling)
	}
}

var implicitRunning = ompd.Flags{Started: true, Executing: true}

var (
	taskImp0 = taskWant{td: "imp0.0", flags: implicitRunning, fn: 0, toolData: 0x3000, region: regT0}
	taskImp1 = func(i int) taskWant {
		w := taskWant{td: "imp1." + fmt.Sprint(i), flags: implicitRunning, fn: fnOuter, toolData: 0x3010 + uint64(i), region: regT1}
		if i == 0 {
			w.exit, w.enter = 0x7ffd1000, 0x7ffd1100
		}
		return w
	}
	taskImp2 = func(i int) taskWant {
		return taskWant{td: "imp2." + fmt.Sprint(i), flags: implicitRunning, fn: fnInner, toolData: 0x3020 + uint64(i), region: regT2}
	}
	taskE1 = taskWant{td: "E1", flags: ompd.Flags{Explicit: true, Final: true, Untied: true, Started: true, Executing: true},
		fn: fnE1, exit: 0x7ffd0100, enter: 0, toolData: 0x3e1, region: regT2, scheduling: "imp2.0"}
	serialFlags = ompd.Flags{Serial: true, TeamSerial: true, Started: true, Executing: true}
	taskSL2     = taskWant{td: "impS.0", lwt: "L2", flags: serialFlags, fn: fnSerial, exit: 0x7ffd2000, enter: 0x7ffd2100,
		toolData: 0x3102, region: regSL2}
	taskSL1 = taskWant{td: "impS.0", lwt: "L1", flags: serialFlags, fn: fnSerial, exit: 0x7ffd2200, enter: 0x7ffd2300,
		toolData: 0x3101, region: regSL1}
)

// walkTasks returns the chain of generating tasks from k, at most max.
func walkTasks(t *testing.T, k *llvm.Task, max int) ([]*llvm.Task, error) {
	t.Helper()
	var out []*llvm.Task
	var err error
	within(t, "walking generating tasks", func() {
		for len(out) < max {
			out = append(out, k)
			if k, err = k.Generating(); err != nil {
				return
			}
		}
	})
	return out, err
}

func TestTasks(t *testing.T) {
	for _, o := range []scenarioOpts{tracking, {}} {
		t.Run(fmt.Sprintf("tracking=%v", o.stateTracking), func(t *testing.T) {
			forLayouts(t, o, func(t *testing.T, s *scenario) {
				as := s.init(t)
				for _, c := range []struct {
					pt   uint64
					want []taskWant
				}{
					{ptTh0, []taskWant{taskImp1(0), taskImp0}},
					{ptTh1, []taskWant{taskE1, taskImp2(0), taskImp1(1), taskImp0}},
					{ptTh2, []taskWant{taskSL2, taskSL1, taskImp1(2), taskImp0}},
					{ptTh3, []taskWant{taskImp2(1), taskImp1(1), taskImp0}},
				} {
					th := try(as.ThreadHandle(ompd.ThreadIDPthread, c.pt)).must(t)
					chain, err := walkTasks(t, try(th.CurrentTask()).must(t), 10)
					if !errors.Is(err, ompd.ErrUnavailable) {
						t.Errorf("Generating() of the initial task: %v, want ErrUnavailable", err)
					}
					wantErrContains(t, err, "ompd_get_generating_task_handle", "has no parent")
					if len(chain) != len(c.want) {
						t.Errorf("thread %#x: %d tasks, want %d", c.pt, len(chain), len(c.want))
						continue
					}
					for i, w := range c.want {
						checkTask(t, s, as, chain[i], w)
					}
				}
			})
		})
	}
}

func TestTaskCompare(t *testing.T) {
	s := newScenario(t, layouts[2], tracking)
	as := s.init(t)
	th1 := try(as.ThreadHandle(ompd.ThreadIDPthread, ptTh1)).must(t)
	e1 := try(th1.CurrentTask()).must(t)
	gen := try(e1.Generating()).must(t)
	in := try(try(th1.CurrentParallel()).must(t).TaskIn(0)).must(t)
	if gen.Compare(in) != 0 || in.Compare(gen) != 0 {
		t.Error("imp2.0 as E1's generating task and as TaskIn(0) of T2 compare different")
	}
	if a, b := e1.Compare(gen), gen.Compare(e1); a == 0 || a != -b {
		t.Errorf("E1 vs imp2.0: %d, %d", a, b)
	}
	// A serialized region's implicit task: the handle from the thread
	// carries the light-weight team; TaskIn, like LLVM's library, does not.
	th2 := try(as.ThreadHandle(ompd.ThreadIDPthread, ptTh2)).must(t)
	cur := try(th2.CurrentTask()).must(t)
	in2 := try(try(th2.CurrentParallel()).must(t).TaskIn(0)).must(t)
	if cur.TaskData() != in2.TaskData() || cur.Compare(in2) == 0 {
		t.Errorf("serialized implicit task: current %s/%s, TaskIn %s/%s", s.name(cur.TaskData()), s.name(cur.Addr()),
			s.name(in2.TaskData()), s.name(in2.Addr()))
	}
}

func TestEnumerateICVs(t *testing.T) {
	s := newScenario(t, layouts[0], tracking)
	got := s.init(t).EnumerateICVs()
	type icv struct {
		name   string
		scope  ompd.Scope
		isText bool
	}
	want := []icv{
		{"dyn-var", ompd.ScopeThread, false}, {"run-sched-var", ompd.ScopeTask, true},
		{"stacksize-var", ompd.ScopeAddressSpace, false}, {"cancel-var", ompd.ScopeAddressSpace, false},
		{"max-task-priority-var", ompd.ScopeAddressSpace, false}, {"debug-var", ompd.ScopeAddressSpace, false},
		{"nthreads-var", ompd.ScopeThread, false}, {"display-affinity-var", ompd.ScopeAddressSpace, false},
		{"affinity-format-var", ompd.ScopeAddressSpace, true}, {"default-device-var", ompd.ScopeThread, false},
		{"tool-var", ompd.ScopeAddressSpace, false}, {"tool-libraries-var", ompd.ScopeAddressSpace, true},
		{"tool-verbose-init-var", ompd.ScopeAddressSpace, true}, {"levels-var", ompd.ScopeParallel, false},
		{"active-levels-var", ompd.ScopeParallel, false}, {"thread-limit-var", ompd.ScopeTask, false},
		{"max-active-levels-var", ompd.ScopeTask, false}, {"bind-var", ompd.ScopeTask, false},
		{"num-procs-var", ompd.ScopeAddressSpace, false}, {"ompd-num-procs-var", ompd.ScopeAddressSpace, false},
		{"thread-num-var", ompd.ScopeThread, false}, {"ompd-thread-num-var", ompd.ScopeThread, false},
		{"final-task-var", ompd.ScopeTask, false}, {"ompd-final-var", ompd.ScopeTask, false},
		{"ompd-final-task-var", ompd.ScopeTask, false}, {"implicit-task-var", ompd.ScopeTask, false},
		{"ompd-implicit-var", ompd.ScopeTask, false}, {"ompd-implicit-task-var", ompd.ScopeTask, false},
		{"team-size-var", ompd.ScopeParallel, false}, {"ompd-team-size-var", ompd.ScopeParallel, false},
	}
	if len(got) != len(want) {
		t.Fatalf("EnumerateICVs() gave %d ICVs, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.ID != ompd.ICVID(i+1) || g.Name != w.name || g.Scope != w.scope || g.String != w.isText {
			t.Errorf("ICV %d = %+v, want id %d %+v", i, g, i+1, w)
		}
	}
	for sc, name := range map[ompd.Scope]string{ompd.ScopeGlobal: "global", ompd.ScopeAddressSpace: "address_space",
		ompd.ScopeThread: "thread", ompd.ScopeParallel: "parallel", ompd.ScopeImplicitTask: "implicit_task",
		ompd.ScopeTask: "task", ompd.Scope(9): "scope(9)"} {
		if sc.String() != name {
			t.Errorf("Scope(%d).String() = %q, want %q", int(sc), sc.String(), name)
		}
	}
}

// icvByName reads an ICV by name.
func icvByName(t *testing.T, as *llvm.AddressSpace, h any, name string) (ompd.Value, error) {
	t.Helper()
	for _, icv := range as.EnumerateICVs() {
		if icv.Name == name {
			return as.ICVValue(h, icv.ID)
		}
	}
	t.Fatalf("no ICV %s", name)
	return ompd.Value{}, nil
}

func num(n int64) ompd.Value   { return ompd.Value{Num: n} }
func text(s string) ompd.Value { return ompd.Value{Str: s, IsString: true} }

func TestICVValues(t *testing.T) {
	forLayouts(t, tracking, func(t *testing.T, s *scenario) {
		as := s.init(t)
		th := func(pt uint64) *llvm.Thread { return try(as.ThreadHandle(ompd.ThreadIDPthread, pt)).must(t) }
		cur := func(pt uint64) *llvm.Task { return try(th(pt).CurrentTask()).must(t) }
		reg := func(pt uint64) *llvm.Parallel { return try(th(pt).CurrentParallel()).must(t) }
		root := try(try(reg(ptTh0).Enclosing()).must(t).TaskIn(0)).must(t) // imp0.0
		if root.TaskData() != s.task["imp0.0"] {
			t.Fatalf("TaskIn(0) of T0 = %s", s.name(root.TaskData()))
		}
		cases := []struct {
			h    any
			name string
			want ompd.Value
		}{
			{as, "stacksize-var", num(stackSize)},
			{as, "cancel-var", num(1)},
			{as, "max-task-priority-var", num(10)},
			{as, "debug-var", num(1)},
			{as, "display-affinity-var", num(0)},
			{as, "affinity-format-var", text(affinityFormat)},
			{as, "tool-var", num(1)},
			{as, "tool-libraries-var", text("libarcher.so")},
			{as, "tool-verbose-init-var", text("")},
			{as, "num-procs-var", num(16)},
			{as, "ompd-num-procs-var", num(16)},

			{th(ptTh0), "dyn-var", num(1)},
			{th(ptTh0), "nthreads-var", text("2,1")}, // level 1 of __kmp_nested_nth {4,2,1}
			{th(ptTh0), "default-device-var", num(-1)},
			{th(ptTh0), "thread-num-var", num(0)},
			{th(ptTh1), "dyn-var", num(0)},
			{th(ptTh1), "nthreads-var", num(3)},
			{th(ptTh1), "default-device-var", num(1)},
			{th(ptTh2), "nthreads-var", num(1)},
			{th(ptTh3), "thread-num-var", num(1)},
			{th(ptTh3), "ompd-thread-num-var", num(1)},
			{th(ptTh3), "nthreads-var", num(4)},
			{th(ptPool), "thread-num-var", num(0)},

			{reg(ptTh1), "levels-var", num(2)},
			{reg(ptTh1), "active-levels-var", num(2)},
			{reg(ptTh1), "team-size-var", num(2)},
			{reg(ptTh1), "ompd-team-size-var", num(2)},
			{reg(ptTh2), "levels-var", num(4)},
			{reg(ptTh2), "active-levels-var", num(1)},
			{reg(ptTh2), "team-size-var", num(1)},
			{reg(ptTh0), "team-size-var", num(3)},

			{cur(ptTh0), "run-sched-var", text("guided,5")},
			{cur(ptTh0), "thread-limit-var", num(64)},
			{cur(ptTh0), "max-active-levels-var", num(3)},
			{cur(ptTh0), "bind-var", num(2)},
			{cur(ptTh0), "final-task-var", num(0)},
			{cur(ptTh0), "implicit-task-var", num(1)},
			{cur(ptTh1), "run-sched-var", text("nonmonotonic:dynamic,1")},
			{cur(ptTh1), "thread-limit-var", num(8)},
			{cur(ptTh1), "bind-var", num(4)},
			{cur(ptTh1), "final-task-var", num(1)},
			{cur(ptTh1), "ompd-final-var", num(1)},
			{cur(ptTh1), "ompd-final-task-var", num(1)},
			{cur(ptTh1), "implicit-task-var", num(0)},
			{cur(ptTh1), "ompd-implicit-var", num(0)},
			{cur(ptTh1), "ompd-implicit-task-var", num(0)},
			{cur(ptTh2), "run-sched-var", text("static,0")}, // unchunked static: chunk shown as 0
			{cur(ptTh3), "run-sched-var", text("monotonic:static,4")},
			{root, "run-sched-var", text("auto,0")},
			{root, "bind-var", text("2,3")}, // level 0 of __kmp_nested_proc_bind {2,3,4} used 2
			{root, "thread-limit-var", num(2147483647)},
		}
		for _, c := range cases {
			got, err := icvByName(t, as, c.h, c.name)
			if err != nil || got != c.want {
				t.Errorf("%s on %T: %+v, %v; want %+v", c.name, c.h, got, err, c.want)
			}
			// The same ICV read with every other of its scope, from
			// the same handle, at once.
			got, err = icvInBatch(t, as, c.h, c.name)
			if err != nil || got != c.want {
				t.Errorf("%s on %T in a batch: %+v, %v; want %+v", c.name, c.h, got, err, c.want)
			}
		}
	})
}

// icvInBatch reads every ICV of the scope of ICV name from h at once
// (ICVValues), and returns name's.
func icvInBatch(t *testing.T, as *llvm.AddressSpace, h any, name string) (ompd.Value, error) {
	t.Helper()
	all := as.EnumerateICVs()
	var scope ompd.Scope
	for _, icv := range all {
		if icv.Name == name {
			scope = icv.Scope
		}
	}
	var icvs []ompd.ICV
	for _, icv := range all {
		if icv.Scope == scope {
			icvs = append(icvs, icv)
		}
	}
	vals, errs := make([]ompd.Value, len(icvs)), make([]error, len(icvs))
	as.ICVValues(h, icvs, vals, errs)
	for i, icv := range icvs {
		if icv.Name == name {
			return vals[i], errs[i]
		}
	}
	t.Fatalf("no ICV %s", name)
	return ompd.Value{}, nil
}

// countingReads counts the reads of each address it passes on.
type countingReads struct {
	ompd.Callbacks
	reads map[ompd.Address]int
}

func (c *countingReads) ReadMemory(addr ompd.Address, buf []byte) error {
	c.reads[addr]++
	return c.Callbacks.ReadMemory(addr, buf)
}

// TestICVValuesReadOnce reads every task ICV of a task at once and checks
// that what they share is read once: the task's flags (six ICVs); and
// every thread ICV of a thread: its current task (three ICVs) and its
// number in its team (two).
func TestICVValuesReadOnce(t *testing.T) {
	s := newScenario(t, layouts[0], tracking)
	cr := &countingReads{Callbacks: s.cb, reads: map[ompd.Address]int{}}
	as, err := llvm.ProcessInitialize(cr, hint, nil)
	if err != nil {
		t.Fatal(err)
	}
	byScope := map[ompd.Scope][]ompd.ICV{}
	for _, icv := range as.EnumerateICVs() {
		byScope[icv.Scope] = append(byScope[icv.Scope], icv)
	}
	read := func(h any, icvs []ompd.ICV) {
		t.Helper()
		clear(cr.reads)
		vals, errs := make([]ompd.Value, len(icvs)), make([]error, len(icvs))
		as.ICVValues(h, icvs, vals, errs)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("%s: %v", icvs[i].Name, err)
			}
		}
	}
	td := s.task["imp0.0"]
	th0 := try(as.ThreadHandle(ompd.ThreadIDPthread, ptTh0)).must(t)
	root := try(try(try(th0.CurrentParallel()).must(t).Enclosing()).must(t).TaskIn(0)).must(t)
	read(root, byScope[ompd.ScopeTask])
	if n := len(byScope[ompd.ScopeTask]); n != 10 {
		t.Fatalf("%d task ICVs, want 10", n)
	}
	if n := cr.reads[s.b.addrOf(td, "kmp_taskdata_t", "td_flags")]; n != 1 {
		t.Errorf("td_flags of the task read %d times for its ICVs, want 1", n)
	}
	read(th0, byScope[ompd.ScopeThread])
	if n := cr.reads[s.b.addrOf(s.info["th0"], "kmp_info_t", "th.th_current_task")]; n != 1 {
		t.Errorf("th_current_task of the thread read %d times for its ICVs, want 1", n)
	}
	if n := cr.reads[s.b.addrOf(s.info["th0"], "kmp_info_t", "th.th_info.ds.ds_tid")]; n != 1 {
		t.Errorf("ds_tid of the thread read %d times for its ICVs, want 1", n)
	}
}

func TestICVValueErrors(t *testing.T) {
	s := newScenario(t, layouts[0], scenarioOpts{})
	as := s.init(t)
	th0 := try(as.ThreadHandle(ompd.ThreadIDPthread, ptTh0)).must(t)
	if v := try(icvByName(t, as, as, "debug-var")).must(t); v != num(0) {
		t.Errorf("debug-var without tracking = %+v", v)
	}
	for _, c := range []struct {
		h    any
		name string
	}{
		{th0, "stacksize-var"}, {as, "dyn-var"}, {th0, "levels-var"}, {as, "run-sched-var"}, {nil, "team-size-var"},
	} {
		_, err := icvByName(t, as, c.h, c.name)
		if !errors.Is(err, ompd.ErrBadInput) {
			t.Errorf("%s on %T: %v, want ErrBadInput", c.name, c.h, err)
		}
		wantErrContains(t, err, "reading "+c.name, "scope")
		_, err = icvInBatch(t, as, c.h, c.name)
		if !errors.Is(err, ompd.ErrBadInput) {
			t.Errorf("%s on %T in a batch: %v, want ErrBadInput", c.name, c.h, err)
		}
		wantErrContains(t, err, "reading "+c.name, "scope")
	}
	for _, id := range []ompd.ICVID{0, -1, 31, 1000} {
		if _, err := as.ICVValue(as, id); !errors.Is(err, ompd.ErrBadInput) {
			t.Errorf("ICV id %d: %v, want ErrBadInput", id, err)
		}
	}
	pool := try(as.ThreadHandle(ompd.ThreadIDPthread, ptPool)).must(t)
	if _, err := icvByName(t, as, pool, "dyn-var"); !errors.Is(err, ompd.ErrUnavailable) {
		t.Errorf("dyn-var of a thread without task: %v, want ErrUnavailable", err)
	}
	if _, err := icvByName(t, as, pool, "nthreads-var"); !errors.Is(err, ompd.ErrUnavailable) {
		t.Errorf("nthreads-var of a thread without task: %v, want ErrUnavailable", err)
	}
	for _, name := range []string{"dyn-var", "nthreads-var", "default-device-var"} {
		_, err := icvInBatch(t, as, pool, name)
		if !errors.Is(err, ompd.ErrUnavailable) {
			t.Errorf("%s of a thread without task in a batch: %v, want ErrUnavailable", name, err)
		}
		wantErrContains(t, err, "reading "+name, "no current task")
	}
	if v, err := icvInBatch(t, as, pool, "thread-num-var"); err != nil || v != num(0) {
		t.Errorf("thread-num-var of a thread without task in a batch: %+v, %v; want 0", v, err)
	}
	delete(s.b.tgt.syms, "__kmp_nested_nth")
	_, err := icvByName(t, as, th0, "nthreads-var")
	wantErrContains(t, err, "reading nthreads-var", "__kmp_nested_nth")
	_, err = icvInBatch(t, as, th0, "nthreads-var")
	wantErrContains(t, err, "reading nthreads-var", "__kmp_nested_nth")
	// Read before and after the failing nthreads-var in the batch.
	if v, err := icvInBatch(t, as, th0, "dyn-var"); err != nil || v != num(1) {
		t.Errorf("dyn-var beside a failing nthreads-var in a batch: %+v, %v; want 1", v, err)
	}
	if v, err := icvInBatch(t, as, th0, "default-device-var"); err != nil || v != num(-1) {
		t.Errorf("default-device-var after a failing nthreads-var in a batch: %+v, %v; want -1", v, err)
	}
}

func TestValueString(t *testing.T) {
	for _, c := range []struct {
		v    ompd.Value
		want string
	}{{num(-1), "-1"}, {num(201611), "201611"}, {text("guided,5"), "guided,5"}, {text(""), ""}} {
		if c.v.String() != c.want {
			t.Errorf("%+v.String() = %q, want %q", c.v, c.v.String(), c.want)
		}
	}
}

func TestDLLLocations(t *testing.T) {
	forLayouts(t, tracking, func(t *testing.T, s *scenario) {
		got := try(s.init(t).DLLLocations()).must(t)
		if want := []string{"libompd.so", dllPath}; !reflect.DeepEqual(got, want) {
			t.Errorf("DLLLocations() = %q, want %q", got, want)
		}
	})
	s := newScenario(t, layouts[0], tracking)
	s.b.ptr(s.b.tgt.syms["ompd_dll_locations"], 0)
	if got, err := s.init(t).DLLLocations(); got != nil || err != nil {
		t.Errorf("DLLLocations() before ompd_init = %q, %v; want nothing", got, err)
	}
	delete(s.b.tgt.syms, "ompd_dll_locations")
	_, err := s.init(t).DLLLocations()
	wantErrContains(t, err, "ompd_dll_locations")
}

func TestDisplayControlVars(t *testing.T) {
	forLayouts(t, tracking, func(t *testing.T, s *scenario) {
		got := try(s.init(t).DisplayControlVars()).must(t)
		want := []string{"OPENMP DISPLAY ENVIRONMENT BEGIN", "  _OPENMP='201611'", "  OMP_DYNAMIC='TRUE'",
			"  OMP_SCHEDULE='GUIDED,5'", "OPENMP DISPLAY ENVIRONMENT END"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("DisplayControlVars() = %q, want %q", got, want)
		}
	})
	// Read once until Refresh; each caller has its own slice.
	s := newScenario(t, layouts[0], tracking)
	as := s.init(t)
	first := try(as.DisplayControlVars()).must(t)
	first[1] = "changed by the caller"
	s.b.ptr(s.b.tgt.syms["ompd_env_block"], 0)
	want := []string{"OPENMP DISPLAY ENVIRONMENT BEGIN", "  _OPENMP='201611'", "  OMP_DYNAMIC='TRUE'",
		"  OMP_SCHEDULE='GUIDED,5'", "OPENMP DISPLAY ENVIRONMENT END"}
	if got := try(as.DisplayControlVars()).must(t); !reflect.DeepEqual(got, want) {
		t.Errorf("DisplayControlVars() again = %q, want the first answer, as read: %q", got, want)
	}
	as.Refresh()
	if _, err := as.DisplayControlVars(); !errors.Is(err, ompd.ErrUnavailable) {
		t.Errorf("DisplayControlVars() after Refresh, with no block: %v, want ErrUnavailable", err)
	}
	_, err := s.init(t).DisplayControlVars()
	if !errors.Is(err, ompd.ErrUnavailable) {
		t.Errorf("DisplayControlVars() with no block: %v, want ErrUnavailable", err)
	}
	wantErrContains(t, err, "ompd_get_display_control_vars")
	delete(s.b.tgt.syms, "ompd_env_block_size")
	_, err = s.init(t).DisplayControlVars()
	wantRC(t, err, ompd.RCError)
	wantErrContains(t, err, "ompd_env_block_size")
}

func TestErrors(t *testing.T) {
	e := &ompd.Error{Op: "ompd_get_state", RC: ompd.RCNeedsStateTracking}
	if got := e.Error(); got != "ompd_get_state: needs state tracking (start the program with OMP_DEBUG=enabled)" {
		t.Errorf("Error() = %q", got)
	}
	e = &ompd.Error{Op: "op", RC: ompd.RCBadInput, Err: errors.New("cause")}
	if got := e.Error(); got != "op: ompd_rc_bad_input: cause" {
		t.Errorf("Error() = %q", got)
	}
	if got := (&ompd.Error{Op: "op", RC: ompd.RCUnavailable}).Error(); got != "op: unavailable" {
		t.Errorf("Error() = %q", got)
	}
	wrapped := fmt.Errorf("outer: %w", e)
	if !errors.Is(wrapped, ompd.ErrBadInput) || errors.Is(wrapped, ompd.ErrUnavailable) {
		t.Error("errors.Is by return code")
	}
	if ompd.RCOf(nil) != ompd.RCOK || ompd.RCOf(errors.New("x")) != ompd.RCError || ompd.RCOf(wrapped) != ompd.RCBadInput {
		t.Error("RCOf")
	}
	if ompd.RC(99).String() != "ompd_rc(99)" || ompd.RCCallbackError.String() != "ompd_rc_callback_error" {
		t.Error("RC.String")
	}
	if errors.Unwrap(e).Error() != "cause" {
		t.Error("Unwrap")
	}
}

// run-sched-var formats every schedule kind of LLVM's enum sched_type.
func TestRunSchedKinds(t *testing.T) {
	for _, c := range []struct {
		kind, chunk int64
		want        string
	}{
		{33, 4, "static,4"}, {34, 9, "static,0"}, {40, 9, "static,0"}, {41, 9, "static,0"},
		{35, 1, "dynamic,1"}, {36, 5, "guided,5"}, {42, 5, "guided,5"}, {43, 2, "guided,2"},
		{38, 0, "auto,0"}, {39, 3, "trapezoidal,3"}, {44, 8, "static_steal,8"},
		{1<<29 | 35, 1, "monotonic:dynamic,1"}, {1<<30 | 36, 3, "nonmonotonic:guided,3"},
		{1<<30 | 34, 3, "nonmonotonic:static,0"}, {1<<29 | 1<<30 | 35, 2, "monotonic:dynamic,2"},
		{37, 1, ""}, {0, 0, ""}, {-1, 0, ""},
	} {
		s := newScenario(t, layouts[1], tracking)
		s.setTask("imp1.0", "td_icvs.sched.r_sched_type", uint64(c.kind))
		s.setTask("imp1.0", "td_icvs.sched.chunk", uint64(c.chunk))
		as := s.init(t)
		k := try(s.handle(t, as, ptTh0).CurrentTask()).must(t)
		if v, err := icvByName(t, as, k, "run-sched-var"); err != nil || v != text(c.want) {
			t.Errorf("kind %#x chunk %d: %+v, %v; want %q", c.kind, c.chunk, v, err, c.want)
		}
	}
}

// A task without a team has no region; an implicit task's function then
// cannot be found either.
func TestTaskWithoutTeam(t *testing.T) {
	s := newScenario(t, layouts[0], tracking)
	s.setTask("imp1.0", "td_team", 0)
	as := s.init(t)
	k := try(s.handle(t, as, ptTh0).CurrentTask()).must(t)
	_, err := k.Parallel()
	if !errors.Is(err, ompd.ErrUnavailable) {
		t.Errorf("Parallel() of a task without team: %v", err)
	}
	wantErrContains(t, err, "ompd_get_task_parallel_handle", "has no team")
	_, err = k.Function()
	wantErrContains(t, err, "ompd_get_task_function", "has no team")
	// Its nesting level counts as 0: nthreads-var is the list from level 1.
	if v := try(icvByName(t, as, s.handle(t, as, ptTh0), "nthreads-var")).must(t); v != text("2,2,1") {
		t.Errorf("nthreads-var = %+v", v)
	}
}

// layoutLookups returns the layout symbols (ompd_sizeof__*,
// ompd_access__*, ompd_bitfield__*) tgt was asked for.
func layoutLookups(asked map[string]int) []string {
	var names []string
	for name := range asked {
		if strings.HasPrefix(name, "ompd_sizeof__") || strings.HasPrefix(name, "ompd_access__") || strings.HasPrefix(name, "ompd_bitfield__") {
			names = append(names, name)
		}
	}
	return names
}

// TestLearned: an address space given the layout another one read
// (Learned) answers the same, looking up only the layout symbols whose
// value is 0 (which the runtime may not have written yet when they were
// read), and reads ompd_state anew; the layout of a runtime that lies
// elsewhere, or of a target with other sizes, is not used.
func TestLearned(t *testing.T) {
	s := newScenario(t, layouts[0], tracking)
	tgt := s.b.tgt
	// What a report reads of each thread: its number, state, region's
	// size and every ICV of it and of its task.
	answers := func(as *llvm.AddressSpace) string {
		t.Helper()
		var b strings.Builder
		for _, pt := range []uint64{ptTh0, ptTh1, ptTh2, ptTh3, ptPool} {
			th := try(as.ThreadHandle(ompd.ThreadIDPthread, pt)).must(t)
			n, err := th.ThreadNum()
			st, wait, serr := th.State()
			fmt.Fprintf(&b, "%#x: num %d %v state %v %#x %v;", pt, n, err, st, wait, serr)
			if p, err := th.CurrentParallel(); err == nil {
				size, err := p.TeamSize()
				fmt.Fprintf(&b, " team %d %v;", size, err)
			}
			for _, icv := range as.EnumerateICVs() {
				var h any = th
				switch icv.Scope {
				case ompd.ScopeTask:
					k, err := th.CurrentTask()
					if err != nil {
						continue
					}
					h = k
				case ompd.ScopeThread:
				default:
					continue
				}
				v, err := as.ICVValue(h, icv.ID)
				fmt.Fprintf(&b, " %s=%v %v", icv.Name, v, err)
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	as := s.init(t)
	want := answers(as)
	read := layoutLookups(tgt.asked)
	zero := map[string]bool{}
	for _, name := range read {
		var b [8]byte
		if err := tgt.ReadMemory(tgt.syms[name], b[:]); err != nil {
			t.Fatal(err)
		}
		zero[name] = binary.LittleEndian.Uint64(b[:]) == 0
	}
	k := as.Learned()
	if k == nil {
		t.Fatal("nothing learned of the layout")
	}
	clear(tgt.asked)
	again, err := llvm.ProcessInitialize(s.cb, hint, k)
	if err != nil {
		t.Fatal(err)
	}
	if got := answers(again); got != want {
		t.Errorf("with what was learned:\n%s\nwant\n%s", got, want)
	}
	// It read nothing it was not given but values 0: nothing to pass on.
	if again.Learned() != nil {
		t.Error("an address space given all it read but values 0 has something to pass on")
	}
	zeros := 0
	for _, name := range layoutLookups(tgt.asked) {
		if !zero[name] {
			t.Errorf("with what was learned, %s (not 0) was looked up", name)
		}
		zeros++
	}
	if zeros == 0 {
		t.Errorf("with what was learned, none of the layout symbols whose value is 0 was looked up again (%d read first)", len(read))
	}
	// ompd_state anew: the runtime no longer tracks states.
	s.b.put(tgt.syms["ompd_state"], 8, 0)
	if again, err = llvm.ProcessInitialize(s.cb, hint, k); err != nil || again.StateTracking() {
		t.Errorf("with what was learned and ompd_state 0: tracking %v, %v; want false", again != nil && again.StateTracking(), err)
	}
	// Other sizes: the knowledge of the ILP32 scenario, whose ompd_state
	// lies where this one's does.
	other := newScenario(t, layouts[2], tracking)
	if other.b.tgt.syms["ompd_state"] != tgt.syms["ompd_state"] {
		t.Fatalf("ompd_state at %#x in the ILP32 scenario, %#x here", other.b.tgt.syms["ompd_state"], tgt.syms["ompd_state"])
	}
	ko := other.init(t).Learned()
	clear(tgt.asked)
	if _, err := llvm.ProcessInitialize(s.cb, hint, ko); err != nil {
		t.Fatal(err)
	}
	// ProcessInitialize reads kmp_info_t's size: looked up unless learned.
	if tgt.asked["ompd_sizeof__kmp_info_t"] == 0 {
		t.Error("the layout learned of a target with other sizes was used")
	}
	// The runtime elsewhere (ompd_state at another address).
	s.b.symbol("ompd_state", 8, 1)
	clear(tgt.asked)
	if _, err := llvm.ProcessInitialize(s.cb, hint, k); err != nil {
		t.Fatal(err)
	}
	if tgt.asked["ompd_sizeof__kmp_info_t"] == 0 {
		t.Error("the layout learned of a runtime that lay elsewhere was used")
	}
}
