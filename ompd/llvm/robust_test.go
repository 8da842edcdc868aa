package llvm_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/ompd/llvm"
)

// Robustness: a corrupt or changing target must give errors or bounded
// answers, never a loop or a panic.

func (s *scenario) deny(addr, n uint64) {
	s.b.tgt.mem.denied = append(s.b.tgt.mem.denied, span{addr, n})
}

// denyField makes one member of the object at base unreadable.
func (s *scenario) denyField(base uint64, typ, path string) {
	off, size := s.lay.path(typ, path)
	s.deny(base+off, size)
}

// ptrAt reads a pointer the scenario wrote (a failure is a harness bug).
func (s *scenario) ptrAt(addr uint64) uint64 {
	v, err := s.b.tgt.mem.readPtr(s, addr)
	if err != nil {
		panic(err)
	}
	return v
}

func (s *scenario) handle(t testing.TB, as *llvm.AddressSpace, pt uint64) *llvm.Thread {
	t.Helper()
	return try(as.ThreadHandle(ompd.ThreadIDPthread, pt)).must(t)
}

// Cycles in the parent chains: each call returns, and the handle it
// returns compares equal to one already seen, so a caller's bounded walk
// can tell a cycle (internal/inspect bounds its walks by MaxNesting).
func TestCycles(t *testing.T) {
	forLayouts(t, full, func(t *testing.T, s *scenario) {
		s.setTeam("T1", "t_parent", s.team["T1"])          // T1 encloses itself
		s.setLwt("L1", "parent", s.lwt["L2"])              // L2 -> L1 -> L2
		s.setTask("imp0.0", "td_parent", s.task["imp0.0"]) // the initial task generates itself
		s.setTask("E1", "ompt_task_info.scheduling_parent", s.task["E1"])
		as := s.init(t)

		regions, err := walkRegions(t, try(s.handle(t, as, ptTh1).CurrentParallel()).must(t), 50)
		if err != nil || len(regions) != 50 {
			t.Fatalf("walk: %d regions, %v", len(regions), err)
		}
		if s.name(regions[1].Addr()) != "T1" || regions[2].Compare(regions[1]) != 0 || regions[49].Compare(regions[1]) != 0 {
			t.Errorf("T1 enclosing itself: %s, %s", s.name(regions[1].Addr()), s.name(regions[2].Addr()))
		}

		regions, err = walkRegions(t, try(s.handle(t, as, ptTh2).CurrentParallel()).must(t), 50)
		if err != nil || len(regions) != 50 {
			t.Fatalf("walk: %d regions, %v", len(regions), err)
		}
		if regions[2].Compare(regions[0]) != 0 || s.name(regions[1].Addr()) != "L1" {
			t.Errorf("L2 -> L1 -> L2: %s %s %s", s.name(regions[0].Addr()), s.name(regions[1].Addr()), s.name(regions[2].Addr()))
		}

		tasks, err := walkTasks(t, try(s.handle(t, as, ptTh0).CurrentTask()).must(t), 50)
		if err != nil || len(tasks) != 50 {
			t.Fatalf("walk: %d tasks, %v", len(tasks), err)
		}
		if s.name(tasks[1].Addr()) != "imp0.0" || tasks[2].Compare(tasks[1]) != 0 {
			t.Errorf("imp0.0 generating itself: %s %s", s.name(tasks[1].Addr()), s.name(tasks[2].Addr()))
		}

		e1 := try(s.handle(t, as, ptTh1).CurrentTask()).must(t)
		if sp := try(e1.Scheduling()).must(t); sp.Compare(e1) != 0 {
			t.Errorf("E1 scheduled by itself: Scheduling() = %s", s.name(sp.Addr()))
		}
		// The full walk (bounded by its own depth limits) still ends.
		within(t, "transcript", func() { transcript(as, s.name) })
	})
}

func TestAbsurdTeamSize(t *testing.T) {
	for _, n := range []int64{llvm.MaxThreads + 1, 1 << 31, -1, -(1 << 31)} {
		s := newScenario(t, layouts[0], tracking)
		s.setTeam("T2", "t_nproc", uint64(n))
		as := s.init(t)
		p := try(s.handle(t, as, ptTh1).CurrentParallel()).must(t)
		_, err := p.TeamSize()
		wantRC(t, err, ompd.RCError)
		want := fmt.Sprintf("reading team-size-var: ompd_rc_error: team at %#x has t_nproc %d, outside 0..65536", p.Team(), int32(n)) // a 4-byte int
		if err.Error() != want {
			t.Errorf("TeamSize(): %v, want %s", err, want)
		}
		if _, err := p.ThreadIn(0); ompd.RCOf(err) != ompd.RCError {
			t.Errorf("t_nproc %d: ThreadIn(0): %v", n, err)
		}
		if _, err := p.TaskIn(0); ompd.RCOf(err) != ompd.RCError {
			t.Errorf("t_nproc %d: TaskIn(0): %v", n, err)
		}
		// The ICV says it once, not wrapped in a second "reading".
		for _, name := range []string{"team-size-var", "ompd-team-size-var"} {
			if _, err := icvByName(t, as, p, name); ompd.RCOf(err) != ompd.RCError || err.Error() != want {
				t.Errorf("t_nproc %d: %s: %v, want %s", n, name, err, want)
			}
		}
	}
	// The bound itself is accepted; the members past the real array are
	// then unreadable and said so.
	s := newScenario(t, layouts[0], tracking)
	s.setTeam("T2", "t_nproc", llvm.MaxThreads)
	p := try(s.handle(t, s.init(t), ptTh1).CurrentParallel()).must(t)
	if n := try(p.TeamSize()).must(t); n != llvm.MaxThreads {
		t.Errorf("TeamSize() = %d", n)
	}
	_, err := p.ThreadIn(llvm.MaxThreads - 1)
	wantErrContains(t, err, "ompd_get_thread_in_parallel", "reading t_threads[65535]")
}

func TestAbsurdThreadsCapacity(t *testing.T) {
	for _, n := range []int64{llvm.MaxThreads + 1, 1<<31 - 1, -1} {
		s := newScenario(t, layouts[0], tracking)
		s.b.put(s.b.tgt.syms["__kmp_threads_capacity"], 4, uint64(n))
		as := s.init(t)
		_, err := as.Threads()
		wantRC(t, err, ompd.RCError)
		want := fmt.Sprintf("enumerating OpenMP threads: ompd_rc_error: __kmp_threads_capacity at %#x is %d, outside 0..65536: the runtime's thread table looks corrupt", s.b.tgt.syms["__kmp_threads_capacity"], n)
		if err.Error() != want {
			t.Errorf("Threads(): %v, want %s", err, want)
		}
		_, err = as.ThreadHandle(ompd.ThreadIDPthread, ptTh0)
		wantRC(t, err, ompd.RCError)
		wantErrContains(t, err, "ompd_get_thread_handle", "__kmp_threads_capacity")
	}
	// Exactly MaxThreads entries are walked.
	s := newScenario(t, layouts[0], tracking)
	table := make([]uint64, llvm.MaxThreads)
	old := s.ptrAt(s.b.tgt.syms["__kmp_threads"])
	for i := range threadsCapacity {
		table[i] = s.ptrAt(old + uint64(8*i))
	}
	table[llvm.MaxThreads-1], table[5] = table[5], 0 // the pool thread is the last gtid
	s.b.ptr(s.b.tgt.syms["__kmp_threads"], s.b.ptrArray(table...))
	s.b.put(s.b.tgt.syms["__kmp_threads_capacity"], 4, llvm.MaxThreads)
	ths := try(s.init(t).Threads()).must(t)
	if len(ths) != 5 || ths[4].GTID() != llvm.MaxThreads-1 {
		t.Errorf("%d threads, last gtid %d", len(ths), ths[len(ths)-1].GTID())
	}
	// A NULL table: no threads yet.
	s = newScenario(t, layouts[0], tracking)
	s.b.ptr(s.b.tgt.syms["__kmp_threads"], 0)
	if ths, err := s.init(t).Threads(); err != nil || len(ths) != 0 {
		t.Errorf("NULL __kmp_threads: %d threads, %v", len(ths), err)
	}
}

// Unreadable memory gives an error that names what was being read.
func TestUnreadable(t *testing.T) {
	type asScenario = func(t *testing.T, s *scenario, as *llvm.AddressSpace) error
	th := func(t *testing.T, s *scenario, as *llvm.AddressSpace, pt uint64) *llvm.Thread {
		return s.handle(t, as, pt)
	}
	region := func(t *testing.T, s *scenario, as *llvm.AddressSpace, pt uint64) *llvm.Parallel {
		return try(th(t, s, as, pt).CurrentParallel()).must(t)
	}
	task := func(t *testing.T, s *scenario, as *llvm.AddressSpace, pt uint64) *llvm.Task {
		return try(th(t, s, as, pt).CurrentTask()).must(t)
	}
	cases := []struct {
		name string
		deny func(s *scenario)
		call asScenario
		want []string
	}{
		{"thread table", func(s *scenario) { s.deny(s.ptrAt(s.b.tgt.syms["__kmp_threads"]), 8) },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error { return second(as.Threads()) },
			[]string{"enumerating OpenMP threads", "reading __kmp_threads[0..8] at"}},
		{"thread capacity", func(s *scenario) { s.deny(s.b.tgt.syms["__kmp_threads_capacity"], 4) },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error { return second(as.Threads()) },
			[]string{"reading __kmp_threads_capacity"}},
		{"thread descriptor", func(s *scenario) { s.denyField(s.info["th1"], "kmp_info_t", "th.th_info.ds.ds_thread") },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error { return second(as.Threads()) },
			[]string{"reading thread of gtid 1", "kmp_desc_base_t.ds_thread at"}},
		{"thread number", func(s *scenario) { s.denyField(s.info["th3"], "kmp_info_t", "th.th_info.ds.ds_tid") },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				return second(th(t, s, as, ptTh3).ThreadNum())
			}, []string{"reading thread number", "kmp_desc_base_t.ds_tid at"}},
		{"state", func(s *scenario) { s.denyField(s.info["th2"], "kmp_info_t", "th.ompt_thread_info.state") },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				_, _, err := th(t, s, as, ptTh2).State()
				return err
			}, []string{"ompd_get_state", "ompt_thread_info_t.state at"}},
		{"current team", func(s *scenario) { s.denyField(s.info["th1"], "kmp_info_t", "th.th_team") },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				return second(th(t, s, as, ptTh1).CurrentParallel())
			}, []string{"ompd_get_curr_parallel_handle", "kmp_base_info_t.th_team at"}},
		{"serialized team info", func(s *scenario) { s.denyField(s.team["T2"], "kmp_team_p", "t.ompt_serialized_team_info") },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				return second(th(t, s, as, ptTh1).CurrentParallel())
			}, []string{"ompd_get_curr_parallel_handle", "kmp_base_team_t.ompt_serialized_team_info at"}},
		{"team size", func(s *scenario) { s.denyField(s.team["T2"], "kmp_team_p", "t.t_nproc") },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				return second(region(t, s, as, ptTh1).TeamSize())
			}, []string{"team-size-var", "kmp_base_team_t.t_nproc at"}},
		{"team level", func(s *scenario) { s.denyField(s.team["T2"], "kmp_team_p", "t.t_level") },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				return second(region(t, s, as, ptTh1).Level())
			}, []string{"levels-var", "kmp_base_team_t.t_level at"}},
		{"parent team", func(s *scenario) { s.denyField(s.team["T2"], "kmp_team_p", "t.t_parent") },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				return second(region(t, s, as, ptTh1).Enclosing())
			}, []string{"ompd_get_enclosing_parallel_handle", "kmp_base_team_t.t_parent at"}},
		{"light-weight team parent", func(s *scenario) { s.denyField(s.lwt["L2"], "ompt_lw_taskteam_t", "parent") },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				return second(region(t, s, as, ptTh2).Enclosing())
			}, []string{"ompd_get_enclosing_parallel_handle", "ompt_lw_taskteam_t.parent at"}},
		{"team member", func(s *scenario) {
			s.deny(s.ptrAt(s.b.addrOf(s.team["T1"], "kmp_team_p", "t.t_threads"))+8, 8)
		}, func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
			return second(region(t, s, as, ptTh0).ThreadIn(1))
		}, []string{"ompd_get_thread_in_parallel", "reading t_threads[1]"}},
		{"task flags", func(s *scenario) { s.denyField(s.task["E1"], "kmp_taskdata_t", "td_flags") },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				return second(task(t, s, as, ptTh1).Flags())
			}, []string{"reading flags of task at"}},
		{"task parent", func(s *scenario) { s.denyField(s.task["E1"], "kmp_taskdata_t", "td_parent") },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				return second(task(t, s, as, ptTh1).Generating())
			}, []string{"ompd_get_generating_task_handle", "kmp_taskdata_t.td_parent at"}},
		{"task frame", func(s *scenario) { s.denyField(s.task["E1"], "kmp_taskdata_t", "ompt_task_info.frame.enter_frame") },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				_, _, err := task(t, s, as, ptTh1).Frame()
				return err
			}, []string{"ompd_get_task_frame", "ompt_frame_t.enter_frame at"}},
		{"task routine", func(s *scenario) {
			s.deny(s.task["E1"]+s.lay.sizeof("kmp_taskdata_t")+s.lay.types["kmp_task_t"].fields["routine"].off, 1)
		}, func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
			return second(task(t, s, as, ptTh1).Function())
		}, []string{"ompd_get_task_function", "kmp_task_t.routine at"}},
		{"schedule ICV", func(s *scenario) { s.denyField(s.task["imp1.0"], "kmp_taskdata_t", "td_icvs.sched.r_sched_type") },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				return second(icvByName(t, as, task(t, s, as, ptTh0), "run-sched-var"))
			}, []string{"reading run-sched-var", "kmp_r_sched_t.r_sched_type at"}},
		{"nested nthreads list", func(s *scenario) {
			s.deny(s.ptrAt(s.b.tgt.syms["__kmp_nested_nth"])+8, 4)
		}, func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
			return second(icvByName(t, as, th(t, s, as, ptTh0), "nthreads-var"))
		}, []string{"reading nthreads-var", "reading __kmp_nested_nth.nth[2]"}},
		{"global ICV", func(s *scenario) { s.deny(s.b.tgt.syms["__kmp_stksize"], 1) },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				return second(icvByName(t, as, as, "stacksize-var"))
			}, []string{"reading stacksize-var", "reading __kmp_stksize at"}},
		{"global string", func(s *scenario) { s.deny(s.ptrAt(s.b.tgt.syms["__kmp_affinity_format"])+10, 1) },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				return second(icvByName(t, as, as, "affinity-format-var"))
			}, []string{"reading affinity-format-var", "reading string __kmp_affinity_format at"}},
		{"layout symbol", func(s *scenario) { s.deny(s.b.tgt.syms["ompd_access__kmp_base_team_t__t_level"], 8) },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				return second(region(t, s, as, ptTh1).Level())
			}, []string{"levels-var", "reading layout symbol ompd_access__kmp_base_team_t__t_level at"}},
		{"ident", func(s *scenario) {
			s.denyField(s.ptrAt(s.b.addrOf(s.team["T2"], "kmp_team_p", "t.t_ident")), "ident_t", "psource")
		}, func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
			return second(region(t, s, as, ptTh1).Location())
		}, []string{"ident_t.psource at"}},
		{"psource", func(s *scenario) {
			id := s.ptrAt(s.b.addrOf(s.team["T2"], "kmp_team_p", "t.t_ident"))
			s.deny(s.ptrAt(s.b.addrOf(id, "ident_t", "psource"))+3, 1)
		}, func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
			return second(region(t, s, as, ptTh1).Location())
		}, []string{"reading source location string at"}},
		{"task team", func(s *scenario) { s.denyField(s.info["th0"], "kmp_info_t", "th.th_task_team") },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error { return second(as.QueuedTasks()) },
			[]string{"task team of gtid 0", "kmp_base_info_t.th_task_team at"}},
		{"dll location", func(s *scenario) {
			s.deny(s.ptrAt(s.ptrAt(s.b.tgt.syms["ompd_dll_locations"])+8), 1)
		}, func(t *testing.T, s *scenario, as *llvm.AddressSpace) error { return second(as.DLLLocations()) },
			[]string{"reading ompd_dll_locations[1]"}},
		{"env block", func(s *scenario) { s.deny(s.ptrAt(s.b.tgt.syms["ompd_env_block"])+5, 1) },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error { return second(as.DisplayControlVars()) },
			[]string{"ompd_get_display_control_vars"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newScenario(t, layouts[0], full)
			c.deny(s)
			var err error
			within(t, c.name, func() { err = c.call(t, s, s.init(t)) })
			wantErrContains(t, err, c.want...)
			if err != nil && !strings.Contains(err.Error(), "input/output error") {
				t.Errorf("error %q lost the callback's cause", err)
			}
		})
	}
}

// Strings without a terminator are read with a bound and fail.
func TestUnterminatedStrings(t *testing.T) {
	long := strings.Repeat("x", 3*pageSize)
	for _, c := range []struct {
		name string
		set  func(s *scenario, p uint64)
		call func(t *testing.T, s *scenario, as *llvm.AddressSpace) error
		want string
	}{
		{"psource", func(s *scenario, p uint64) {
			id := s.b.obj("ident_t")
			s.b.set(id, "ident_t", "psource", p)
			s.setTeam("T2", "t_ident", id)
		}, func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
			return second(try(s.handle(t, as, ptTh1).CurrentParallel()).must(t).Location())
		}, "reading source location string at"},
		{"affinity format", func(s *scenario, p uint64) { s.b.ptr(s.b.tgt.syms["__kmp_affinity_format"], p) },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				return second(icvByName(t, as, as, "affinity-format-var"))
			}, "reading string __kmp_affinity_format"},
		{"dll location", func(s *scenario, p uint64) { s.b.ptr(s.ptrAt(s.b.tgt.syms["ompd_dll_locations"]), p) },
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error { return second(as.DLLLocations()) },
			"reading ompd_dll_locations[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newScenario(t, layouts[0], full)
			p := s.b.alloc(uint64(len(long)))
			s.b.tgt.mem.write(p, []byte(long))
			c.set(s, p)
			var err error
			within(t, c.name, func() { err = c.call(t, s, s.init(t)) })
			wantErrContains(t, err, c.want, "no terminating NUL")
			for _, m := range s.b.tgt.maxStrings {
				if m > 4096 {
					t.Errorf("ReadString with max %d", m)
				}
			}
		})
	}
}

func TestDLLLocationsUnterminated(t *testing.T) {
	s := newScenario(t, layouts[0], tracking)
	str := s.b.cstring("libompd.so")
	ptrs := make([]uint64, 100)
	for i := range ptrs {
		ptrs[i] = str
	}
	arr := s.b.ptrArray(ptrs...)
	s.b.ptr(s.b.tgt.syms["ompd_dll_locations"], arr)
	got, err := s.init(t).DLLLocations()
	if want := fmt.Sprintf("ompd_dll_locations[] at %#x: no terminating NULL within 64 entries", arr); err == nil || err.Error() != want {
		t.Errorf("DLLLocations(): %v, want %s", err, want)
	}
	if len(got) != 64 {
		t.Errorf("%d locations returned with the error", len(got))
	}
}

func TestEnvBlockTooLarge(t *testing.T) {
	s := newScenario(t, layouts[0], tracking)
	s.b.put(s.b.tgt.syms["ompd_env_block_size"], 8, 1<<40)
	_, err := s.init(t).DisplayControlVars()
	wantRC(t, err, ompd.RCError)
	wantErrContains(t, err, "larger than 1 MiB")
}

func TestNestedListTooLong(t *testing.T) {
	s := newScenario(t, layouts[0], tracking)
	s.b.set(s.b.tgt.syms["__kmp_nested_nth"], "kmp_nested_nthreads_t", "used", 5000)
	as := s.init(t)
	_, err := icvByName(t, as, s.handle(t, as, ptTh0), "nthreads-var")
	wantErrContains(t, err, "reading nthreads-var", "__kmp_nested_nth.used is 5000, more than 1024 levels")
}

// TestNestedListNegativeLevel: a negative team level (t_level is never
// negative in a sane runtime) must give an error, not a walk of the nested
// list from far below its start.
func TestNestedListNegativeLevel(t *testing.T) {
	s := newScenario(t, layouts[0], tracking)
	s.setTeam("T1", "t_level", uint64(0xfffe7960)) // -100000
	// Make the memory before the list readable, as it would be in a real
	// process with the list inside a large heap mapping.
	arr := s.ptrAt(s.b.tgt.syms["__kmp_nested_nth"])
	s.b.tgt.mem.mapZero(arr-500000, 500000)
	as := s.init(t)
	var v ompd.Value
	var err error
	within(t, "nthreads-var", func() { v, err = icvByName(t, as, s.handle(t, as, ptTh0), "nthreads-var") })
	if n := strings.Count(v.Str, ","); err == nil {
		t.Fatalf("nthreads-var of a team with t_level -100000 gave %d levels (%.40q...); want an error", n+1, v.Str)
	}
	wantRC(t, err, ompd.RCError)
	wantErrContains(t, err, "reading nthreads-var", "-100000")
}

// Layout symbols with impossible values give errors, not panics.
func TestAbsurdLayoutValues(t *testing.T) {
	for _, c := range []struct {
		sym  string
		v    uint64
		call func(t *testing.T, s *scenario, as *llvm.AddressSpace) error
		want string
	}{
		{"ompd_sizeof__kmp_desc_base_t__ds_thread", 0,
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error { return second(as.Threads()) }, "unsupported size"},
		{"ompd_sizeof__kmp_desc_base_t__ds_thread", 16,
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error { return second(as.Threads()) }, "unsupported size"},
		{"ompd_sizeof__kmp_tasking_flags_t", 0,
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				return second(try(s.handle(t, as, ptTh1).CurrentTask()).must(t).Flags())
			}, "unsupported size"},
		{"ompd_access__kmp_base_team_t__t_level", 1 << 62,
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				return second(try(s.handle(t, as, ptTh1).CurrentParallel()).must(t).Level())
			}, "kmp_base_team_t.t_level"},
		{"ompd_access__kmp_base_team_t__t_level", 1 << 63,
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				return second(try(s.handle(t, as, ptTh1).CurrentParallel()).must(t).Level())
			}, "kmp_base_team_t.t_level"},
		{"ompd_sizeof__kmp_taskdata_t", 1 << 62,
			func(t *testing.T, s *scenario, as *llvm.AddressSpace) error {
				return second(try(s.handle(t, as, ptTh1).CurrentTask()).must(t).Function())
			}, "kmp_task_t.routine"},
	} {
		t.Run(c.sym, func(t *testing.T) {
			s := newScenario(t, layouts[0], full)
			s.b.put(s.b.tgt.syms[c.sym], 8, c.v)
			var err error
			within(t, c.sym, func() { err = c.call(t, s, s.init(t)) })
			wantErrContains(t, err, c.want)
		})
	}
	// A flags word wider than 8 bytes is read as its first 8.
	s := newScenario(t, layouts[0], full)
	s.b.put(s.b.tgt.syms["ompd_sizeof__kmp_tasking_flags_t"], 8, 64)
	f := try(try(s.handle(t, s.init(t), ptTh1).CurrentTask()).must(t).Flags()).must(t)
	if !f.Explicit || !f.Final {
		t.Errorf("Flags() with a 64-byte flags type = %+v", f)
	}
}

// Errors from the callbacks are wrapped, not replaced.
func TestCallbackErrorsWrapped(t *testing.T) {
	s := newScenario(t, layouts[0], tracking)
	s.deny(s.b.tgt.syms["__kmp_openmp_version"], 4)
	_, err := s.init(t).OMPVersion()
	wantRC(t, err, ompd.RCError)
	wantErrContains(t, err, "ompd_get_omp_version", "reading __kmp_openmp_version at", "input/output error")
}

// A task team whose size no runtime has is an error naming it, whichever
// side of the range it is on; the other task teams' deques are still read.
func TestAbsurdTaskTeamSize(t *testing.T) {
	for _, n := range []int64{llvm.MaxThreads + 1, -1} {
		s := newScenario(t, layouts[0], full)
		s.b.set(s.tt["TT1"], "kmp_task_team_t", "tt.tt_nproc", uint64(n))
		qs, err := s.init(t).QueuedTasks()
		want := fmt.Sprintf("task team at %#x has tt_nproc %d, outside 0..65536", s.tt["TT1"], n)
		if err == nil || err.Error() != want {
			t.Errorf("tt_nproc %d: QueuedTasks(): %v, want %s", n, err, want)
		}
		if len(qs) != 2 || s.name(qs[0].Addr()) != "Q5" || s.name(qs[1].Addr()) != "Q2" {
			t.Errorf("tt_nproc %d: QueuedTasks() = %d tasks", n, len(qs))
		}
	}
}

// TestFlagMasksRetried: a task's flags are decoded with masks looked up
// once per address space, but a lookup that failed (the mask's symbol
// unreadable, as in one stop of a trace) is not kept: once it can be read
// again, Flags answers in full, as the layout's own lookups do.
func TestFlagMasksRetried(t *testing.T) {
	forLayouts(t, full, func(t *testing.T, s *scenario) {
		sym := "ompd_bitfield__kmp_tasking_flags_t__final"
		addr, ok := s.b.tgt.syms[sym]
		if !ok {
			t.Fatalf("the scenario has no %s", sym)
		}
		s.deny(addr, 8)
		as := s.init(t)
		k := try(s.handle(t, as, ptTh1).CurrentTask()).must(t)
		if _, err := k.Flags(); err == nil || !strings.Contains(err.Error(), sym) {
			t.Fatalf("Flags with %s unreadable: %v; want an error naming it", sym, err)
		}
		s.b.tgt.mem.denied = nil
		f, err := k.Flags()
		if err != nil || f != taskE1.flags {
			t.Errorf("Flags once %s is readable: %+v, %v; want %+v", sym, f, err, taskE1.flags)
		}
	})
}
