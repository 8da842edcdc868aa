package inspect_test

// Every bound of the OMPD walk, tripped in a real core and seen where the
// user sees it: the report's warnings. Each case rewrites one runtime
// structure of a fixture's core (see fake_test.go), builds the report as
// the CLI does, and asserts the report's warnings exactly and that the
// rest of the report is the unchanged core's.

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/ompd/llvm"
	"github.com/ompd-inspect/ompd-inspect/target"
)

// A bound case rewrites the core and says what the report must show.
type boundCase struct {
	name string
	// trip rewrites p so that the bound trips and returns the report's
	// expected warnings, exactly and in order, and what else changes.
	trip func(t *testing.T, s *snapshot, p *patched) ([]string, changes)
}

// changes says which parts of the unchanged core's report a case may
// change; everything else must be exactly as it was.
type changes struct {
	regions []string // ids of regions that differ or are gone
	tasks   []string // ids of tasks that differ or are gone
	threads []int    // threads that differ
	// icvs selects the ICVs that may differ or be gone (nil: none).
	icvs        func(inspect.ICV) bool
	controlVars bool // the display control variables may differ
	runtime     bool // the runtime section may differ
	// check asserts what the case changes, and that it changes nothing
	// else: entries the unchanged report does not have.
	check func(t *testing.T, r *inspect.Report)
}

func runBounds(t *testing.T, fixtureName string, cases []boundCase) {
	s := snapshotOf(t, fixtureName)
	if len(s.base.Warnings) != 0 {
		t.Fatalf("the unchanged core of %s has warnings: %q", fixtureName, s.base.Warnings)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPatched(s.core)
			want, ch := c.trip(t, s, p)
			r := build(t, p)
			if !slices.Equal(r.Warnings, want) {
				t.Errorf("warnings:\n  %s\nwant:\n  %s", strings.Join(r.Warnings, "\n  "), strings.Join(want, "\n  "))
			}
			wantRest(t, s.base, r, ch)
			if ch.check != nil {
				ch.check(t, r)
			}
		})
	}
}

// wantRest fails unless every part of r that ch does not name is as in
// base.
func wantRest(t *testing.T, base, r *inspect.Report, ch changes) {
	t.Helper()
	if !ch.runtime && !reflect.DeepEqual(r.Runtime, base.Runtime) {
		t.Errorf("runtime: %+v, want %+v", r.Runtime, base.Runtime)
	}
	if !ch.controlVars && !reflect.DeepEqual(r.ControlVars, base.ControlVars) {
		t.Errorf("control variables: %d, want %d as before", len(r.ControlVars), len(base.ControlVars))
	}
	if len(r.Threads) != len(base.Threads) {
		t.Errorf("%d threads, want %d", len(r.Threads), len(base.Threads))
	}
	for _, th := range base.Threads {
		if slices.Contains(ch.threads, th.OSTID) {
			continue
		}
		got, ok := find(r.Threads, func(x inspect.Thread) bool { return x.OSTID == th.OSTID })
		if !ok || !reflect.DeepEqual(got, th) {
			t.Errorf("thread %d: %s, want %s as before", th.OSTID, show(got), show(th))
		}
	}
	for _, reg := range base.Regions {
		if slices.Contains(ch.regions, reg.ID) {
			continue
		}
		got, ok := find(r.Regions, func(x inspect.Region) bool { return x.ID == reg.ID })
		if !ok || !reflect.DeepEqual(got, reg) {
			t.Errorf("region %s: %s, want %s as before", reg.ID, show(got), show(reg))
		}
	}
	for _, k := range base.Tasks {
		if slices.Contains(ch.tasks, k.ID) {
			continue
		}
		got, ok := find(r.Tasks, func(x inspect.Task) bool { return x.ID == k.ID })
		if !ok || !reflect.DeepEqual(got, k) {
			t.Errorf("task %s: %s, want %s as before", k.ID, show(got), show(k))
		}
	}
	for _, v := range base.ICVs {
		if ch.icvs != nil && ch.icvs(v) {
			continue
		}
		got, ok := find(r.ICVs, func(x inspect.ICV) bool {
			return x.Name == v.Name && x.Scope == v.Scope && x.Owner == v.Owner
		})
		if !ok || got.Value != v.Value {
			t.Errorf("ICV %s (%s %v): %v (found %v), want %v as before", v.Name, v.Scope, v.Owner, got.Value, ok, v.Value)
		}
	}
}

func find[T any](items []T, match func(T) bool) (T, bool) {
	for _, x := range items {
		if match(x) {
			return x, true
		}
	}
	var zero T
	return zero, false
}

// show formats a report entry with its pointers followed.
func show(v any) string {
	rv := reflect.ValueOf(v)
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < rv.NumField(); i++ {
		f := rv.Field(i)
		if f.Kind() == reflect.Pointer {
			if f.IsNil() {
				fmt.Fprintf(&b, "%s:nil ", rv.Type().Field(i).Name)
				continue
			}
			f = f.Elem()
		}
		fmt.Fprintf(&b, "%s:%v ", rv.Type().Field(i).Name, f.Interface())
	}
	return strings.TrimSpace(b.String()) + "}"
}

// ---------------------------------------------------------------------------
// Finding the runtime's structures in a core.

func hexID(a uint64) string { return fmt.Sprintf("%#x", a) }

func addrOf(t *testing.T, id string) uint64 {
	t.Helper()
	a, err := strconv.ParseUint(id, 0, 64)
	if err != nil {
		t.Fatalf("id %q: %v", id, err)
	}
	return a
}

// unmapped is the overlay's error for a read of n bytes at addr of its
// own memory that it never wrote.
func unmapped(addr, n uint64) string {
	return fmt.Sprintf("reading %d bytes at %#x: %#x is not mapped: address not mapped", n, addr, addr)
}

// info returns the kmp_base_info_t of the thread with global id gtid.
func (s *snapshot) info(t *testing.T, gtid int) uint64 {
	t.Helper()
	table := s.u64(t, s.sym(t, "__kmp_threads"))
	return s.u64(t, table+8*uint64(gtid)) + s.layoutValue(t, "ompd_access__kmp_info_t__th")
}

// teamPtr returns the kmp_team_p* of the region with id (the address of
// its kmp_base_team_t).
func (s *snapshot) teamPtr(t *testing.T, id string) uint64 {
	t.Helper()
	return addrOf(t, id) - s.layoutValue(t, "ompd_access__kmp_team_p__t")
}

// setField rewrites typ.field of the object at base, with the layout the
// runtime publishes.
func (s *snapshot) setField(t *testing.T, p *patched, base uint64, typ, field string, v uint64) {
	t.Helper()
	off, size := s.field(t, typ, field)
	p.put(base+off, size, v)
}

// setDWARFField rewrites typ.field of the object at base, with the layout
// of the runtime's DWARF.
func (s *snapshot) setDWARFField(t *testing.T, p *patched, base uint64, typ, field string, v uint64) {
	t.Helper()
	off, size := s.dwarfField(t, typ, field)
	p.put(base+off, size, v)
}

func (s *snapshot) dwarfRead(t *testing.T, base uint64, typ, field string) uint64 {
	t.Helper()
	off, size := s.dwarfField(t, typ, field)
	return s.read(t, base+off, size)
}

// schedulingParent returns the address of the scheduling_parent of the
// task whose kmp_taskdata_t is at td.
func (s *snapshot) schedulingParent(t *testing.T, td uint64) uint64 {
	t.Helper()
	info, _ := s.field(t, "kmp_taskdata_t", "ompt_task_info")
	sp, _ := s.field(t, "ompt_task_info_t", "scheduling_parent")
	return td + info + sp
}

// fakeIdent makes an ident_t whose psource has no terminator within
// 2048 bytes, and returns it and the string's address.
func (s *snapshot) fakeIdent(t *testing.T, p *patched) (ident, str uint64) {
	t.Helper()
	str = p.fill('x', 2048)
	ident = p.alloc(s.dwarfSize(t, "ident_t"))
	s.setDWARFField(t, p, ident, "ident_t", "psource", str)
	return ident, str
}

// entryLine is the DWARF line of the function at the runtime address
// entry (an id string), as the report names a location.
func (s *snapshot) entryLine(t *testing.T, entry string) string {
	t.Helper()
	a := addrOf(t, entry)
	m := target.ModuleAt(s.core, a)
	if m == nil || m.Image == nil {
		t.Fatalf("no module at %s", entry)
	}
	file, line, ok := m.Image.LineAt(a - m.Bias)
	if !ok {
		t.Fatalf("no line at %s", entry)
	}
	return fmt.Sprintf("%s:%d", file, line)
}

func regionWith(t *testing.T, r *inspect.Report, match func(inspect.Region) bool, what string) inspect.Region {
	t.Helper()
	reg, ok := find(r.Regions, match)
	if !ok {
		t.Fatalf("no %s in the report", what)
	}
	return reg
}

func taskWith(t *testing.T, r *inspect.Report, match func(inspect.Task) bool, what string) inspect.Task {
	t.Helper()
	k, ok := find(r.Tasks, match)
	if !ok {
		t.Fatalf("no %s in the report", what)
	}
	return k
}

func threadWith(t *testing.T, r *inspect.Report, tid int) inspect.Thread {
	t.Helper()
	th, ok := find(r.Threads, func(x inspect.Thread) bool { return x.OSTID == tid })
	if !ok {
		t.Fatalf("no thread %d in the report", tid)
	}
	return th
}

// firstIn returns the first thread of the report (the order the builder
// walks them) whose current region is id.
func firstIn(t *testing.T, r *inspect.Report, id string) int {
	t.Helper()
	th, ok := find(r.Threads, func(x inspect.Thread) bool { return x.Region != nil && *x.Region == id })
	if !ok {
		t.Fatalf("no thread in region %s", id)
	}
	return th.OSTID
}

func isInnermost(reg inspect.Region) bool { return reg.Level == 3 }

func ownedBy(ids ...string) func(inspect.ICV) bool {
	return func(v inspect.ICV) bool {
		s, ok := v.Owner.(string)
		return ok && slices.Contains(ids, s)
	}
}

func named(names ...string) func(inspect.ICV) bool {
	return func(v inspect.ICV) bool { return slices.Contains(names, v.Name) }
}

func parentOf(k inspect.Task) string {
	if k.Parent == nil {
		return ""
	}
	return *k.Parent
}

func regionParent(reg inspect.Region) string {
	if reg.Parent == nil {
		return ""
	}
	return *reg.Parent
}

// ---------------------------------------------------------------------------
// nested: nine threads, four regions three levels deep.

func TestBoundsNested(t *testing.T) {
	capacity := func(v int64, want string) boundCase {
		return boundCase{"thread table capacity " + strconv.FormatInt(v, 10), func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			addr := s.sym(t, "__kmp_threads_capacity")
			p.put(addr, 4, uint64(v))
			return []string{
					fmt.Sprintf("enumerating OpenMP threads: ompd_rc_error: __kmp_threads_capacity at %#x is %s, outside 0..65536: the runtime's thread table looks corrupt", addr, want),
				}, changes{
					threads: osTIDs(s.base), regions: regionIDs(s.base), tasks: taskIDs(s.base),
					icvs: func(v inspect.ICV) bool { return v.Scope != "address_space" },
					check: func(t *testing.T, r *inspect.Report) {
						// Every thread is still listed, without OpenMP
						// identity; the address space's ICVs are there.
						for i, th := range r.Threads {
							want := inspect.Thread{OSTID: s.base.Threads[i].OSTID, TaskStack: []string{}}
							if !reflect.DeepEqual(th, want) {
								t.Errorf("thread %d: %s, want %s", i, show(th), show(want))
							}
						}
						if len(r.Regions) != 0 || len(r.Tasks) != 0 {
							t.Errorf("%d regions, %d tasks from a corrupt thread table", len(r.Regions), len(r.Tasks))
						}
						if n := len(r.ICVs); n != asICVs(s.base) {
							t.Errorf("%d ICVs, want the %d of the address space", n, asICVs(s.base))
						}
					},
				}
		}}
	}
	teamSize := func(v int64) boundCase {
		return boundCase{"team size " + strconv.FormatInt(v, 10), func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			in := regionWith(t, s.base, isInnermost, "innermost region")
			s.setField(t, p, addrOf(t, in.ID), "kmp_base_team_t", "t_nproc", uint64(v))
			bad := fmt.Sprintf("ompd_rc_error: team at %s has t_nproc %d, outside 0..65536", in.ID, v)
			return []string{
					fmt.Sprintf("region %s: reading team-size-var: %s", in.ID, bad),
					fmt.Sprintf("ICV team-size-var (parallel %s): reading team-size-var: %s", in.ID, bad),
					fmt.Sprintf("ICV ompd-team-size-var (parallel %s): reading team-size-var: %s", in.ID, bad),
				}, changes{
					regions: []string{in.ID},
					icvs:    func(v inspect.ICV) bool { return v.Owner == in.ID && strings.HasSuffix(v.Name, "team-size-var") },
					check: func(t *testing.T, r *inspect.Report) {
						want := in
						want.TeamSize, want.Threads = 0, []int{}
						if got := regionWith(t, r, isInnermost, "innermost region"); !reflect.DeepEqual(got, want) {
							t.Errorf("innermost region: %s, want %s", show(got), show(want))
						}
						wantCounts(t, r, s.base, 0, 0)
					},
				}
		}}
	}
	cases := []boundCase{
		capacity(llvm.MaxThreads+1, "65537"),
		capacity(-1, "-1"),
		{"thread table unmapped", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			p.put(s.sym(t, "__kmp_threads"), 8, hole)
			n := s.read(t, s.sym(t, "__kmp_threads_capacity"), 4)
			return []string{
					fmt.Sprintf("enumerating OpenMP threads: ompd_rc_error: reading __kmp_threads[0..%d] at %#x: %s", n, uint64(hole), unmapped(hole, 8*n)),
				}, changes{
					threads: osTIDs(s.base), regions: regionIDs(s.base), tasks: taskIDs(s.base),
					icvs: func(v inspect.ICV) bool { return v.Scope != "address_space" },
					check: func(t *testing.T, r *inspect.Report) {
						if len(r.Threads) != len(s.base.Threads) || len(r.Regions) != 0 || len(r.Tasks) != 0 {
							t.Errorf("%d threads, %d regions, %d tasks", len(r.Threads), len(r.Regions), len(r.Tasks))
						}
					},
				}
		}},
		teamSize(llvm.MaxThreads + 1),
		teamSize(-1),
		{"team members unmapped", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			in := regionWith(t, s.base, isInnermost, "innermost region")
			s.setField(t, p, addrOf(t, in.ID), "kmp_base_team_t", "t_threads", hole)
			var want []string
			for i := range in.TeamSize {
				a := uint64(hole + 8*i)
				want = append(want, fmt.Sprintf("region %s: thread %d: ompd_get_thread_in_parallel: ompd_rc_error: reading t_threads[%d]: %s", in.ID, i, i, unmapped(a, 8)))
			}
			return want, changes{regions: []string{in.ID}, check: func(t *testing.T, r *inspect.Report) {
				want := in
				want.Threads = []int{}
				if got := regionWith(t, r, isInnermost, "innermost region"); !reflect.DeepEqual(got, want) {
					t.Errorf("innermost region: %s, want %s", show(got), show(want))
				}
				wantCounts(t, r, s.base, 0, 0)
			}}
		}},
		{"team member NULL", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			// A team caught half set up: the runtime has not stored
			// thread 1 yet.
			in := regionWith(t, s.base, isInnermost, "innermost region")
			team := addrOf(t, in.ID)
			off, _ := s.field(t, "kmp_base_team_t", "t_threads")
			p.put(s.u64(t, team+off)+8, 8, 0)
			return []string{
					fmt.Sprintf("region %s: thread 1: ompd_get_thread_in_parallel: unavailable: t_threads[1] of team %s is NULL", in.ID, in.ID),
				}, changes{regions: []string{in.ID}, check: func(t *testing.T, r *inspect.Report) {
					want := in
					want.Threads = slices.Delete(slices.Clone(in.Threads), 1, 2)
					if got := regionWith(t, r, isInnermost, "innermost region"); !reflect.DeepEqual(got, want) {
						t.Errorf("innermost region: %s, want %s", show(got), show(want))
					}
					wantCounts(t, r, s.base, 0, 0)
				}}
		}},
		{"region chain cycle", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			in := regionWith(t, s.base, isInnermost, "innermost region")
			s.setField(t, p, addrOf(t, in.ID), "kmp_base_team_t", "t_parent", s.teamPtr(t, in.ID))
			return []string{
					fmt.Sprintf("region %s: the chain of enclosing parallel regions repeats region %s: stopped there (a cycle, or memory changing while read)", in.ID, in.ID),
				}, changes{regions: []string{in.ID}, check: func(t *testing.T, r *inspect.Report) {
					want := in
					want.Parent = nil
					if got := regionWith(t, r, isInnermost, "innermost region"); !reflect.DeepEqual(got, want) {
						t.Errorf("innermost region: %s, want %s", show(got), show(want))
					}
					wantCounts(t, r, s.base, 0, 0)
				}}
		}},
		{"region chain longer than MaxNesting", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			in := regionWith(t, s.base, isInnermost, "innermost region")
			// 300 teams, each the parent of the one before.
			tOff := s.layoutValue(t, "ompd_access__kmp_team_p__t")
			size := tOff + s.dwarfSize(t, "kmp_base_team_t")
			fakes := make([]uint64, 300) // kmp_base_team_t addresses
			for i := range fakes {
				fakes[i] = p.alloc(size) + tOff
				s.setField(t, p, fakes[i], "kmp_base_team_t", "t_level", 1)
			}
			for i := 0; i+1 < len(fakes); i++ {
				s.setField(t, p, fakes[i], "kmp_base_team_t", "t_parent", fakes[i+1]-tOff)
			}
			s.setField(t, p, addrOf(t, in.ID), "kmp_base_team_t", "t_parent", fakes[0]-tOff)
			return []string{
					fmt.Sprintf("region %s: the chain of enclosing parallel regions is longer than %d: stopped there (a cycle, or memory changing while read)", in.ID, inspect.MaxNesting),
				}, changes{regions: []string{in.ID}, check: func(t *testing.T, r *inspect.Report) {
					// The innermost region and the first 255 teams of
					// the chain are listed, each the parent of the one
					// before; the last one listed has no parent.
					want := in
					want.Parent = strp(hexID(fakes[0]))
					if got := regionWith(t, r, isInnermost, "innermost region"); !reflect.DeepEqual(got, want) {
						t.Errorf("innermost region: %s, want %s", show(got), show(want))
					}
					kept := inspect.MaxNesting - 1
					for i, a := range fakes[:kept] {
						got := regionWith(t, r, func(x inspect.Region) bool { return x.ID == hexID(a) }, "team "+hexID(a))
						parent := ""
						if i+1 < kept {
							parent = hexID(fakes[i+1])
						}
						if regionParent(got) != parent || got.Level != 1 || got.TeamSize != 0 {
							t.Errorf("team %d of the chain: %s, want parent %q", i, show(got), parent)
						}
					}
					wantCounts(t, r, s.base, kept, 0)
				}}
		}},
		{"task chain cycle", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			initial := taskWith(t, s.base, func(k inspect.Task) bool { return k.Parent == nil }, "initial task")
			s.setField(t, p, addrOf(t, initial.ID), "kmp_taskdata_t", "td_parent", addrOf(t, initial.ID))
			// The first thread's current task is where the walk that
			// meets the cycle begins.
			first := *s.base.Threads[0].Task
			return []string{
				fmt.Sprintf("task %s: the chain of generating tasks repeats task %s: stopped there (a cycle, or memory changing while read)", first, initial.ID),
			}, changes{check: func(t *testing.T, r *inspect.Report) { wantCounts(t, r, s.base, 0, 0) }}
		}},
		{"task chain longer than MaxNesting", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			initial := taskWith(t, s.base, func(k inspect.Task) bool { return k.Parent == nil }, "initial task")
			size := s.layoutValue(t, "ompd_sizeof__kmp_taskdata_t")
			fakes := make([]uint64, 300)
			for i := range fakes {
				fakes[i] = p.alloc(size)
			}
			for i := 0; i+1 < len(fakes); i++ {
				s.setField(t, p, fakes[i], "kmp_taskdata_t", "td_parent", fakes[i+1])
			}
			s.setField(t, p, addrOf(t, initial.ID), "kmp_taskdata_t", "td_parent", fakes[0])
			first := taskWith(t, s.base, func(k inspect.Task) bool { return k.ID == *s.base.Threads[0].Task }, "first thread's task")
			// The walk from the first thread's current task to the
			// initial task is three tasks deep.
			if parentOf(first) == "" || parentOf(taskWith(t, s.base, func(k inspect.Task) bool { return k.ID == parentOf(first) }, "parent")) != initial.ID {
				t.Fatalf("the first thread's task is not two generations below the initial task")
			}
			kept := inspect.MaxNesting - 3
			return []string{
					fmt.Sprintf("task %s: the chain of generating tasks is longer than %d: stopped there (a cycle, or memory changing while read)", first.ID, inspect.MaxNesting),
				}, changes{tasks: []string{initial.ID}, check: func(t *testing.T, r *inspect.Report) {
					want := initial
					want.Parent = strp(hexID(fakes[0]))
					if got := taskWith(t, r, func(k inspect.Task) bool { return k.ID == initial.ID }, "initial task"); !reflect.DeepEqual(got, want) {
						t.Errorf("initial task: %s, want %s", show(got), show(want))
					}
					for i, a := range fakes[:kept] {
						got := taskWith(t, r, func(k inspect.Task) bool { return k.ID == hexID(a) }, "task "+hexID(a))
						parent := ""
						if i+1 < kept {
							parent = hexID(fakes[i+1])
						}
						if parentOf(got) != parent || got.Status != "suspended" {
							t.Errorf("task %d of the chain: %s, want parent %q", i, show(got), parent)
						}
					}
					wantCounts(t, r, s.base, 0, kept)
				}}
		}},
		{"team pointer unmapped", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			th := s.base.Threads[len(s.base.Threads)-1]
			s.setField(t, p, s.info(t, *th.GTID), "kmp_base_info_t", "th_team", hole)
			tOff := s.layoutValue(t, "ompd_access__kmp_team_p__t")
			off, size := s.field(t, "kmp_base_team_t", "ompt_serialized_team_info")
			a := hole + tOff + off
			return []string{
					fmt.Sprintf("thread %d: current parallel region: ompd_get_curr_parallel_handle: ompd_rc_error: reading kmp_base_team_t.ompt_serialized_team_info at %#x: %s", th.OSTID, a, unmapped(a, size)),
				}, changes{threads: []int{th.OSTID}, check: func(t *testing.T, r *inspect.Report) {
					want := th
					want.Region = nil
					if got := threadWith(t, r, th.OSTID); !reflect.DeepEqual(got, want) {
						t.Errorf("thread %d: %s, want %s", th.OSTID, show(got), show(want))
					}
					wantCounts(t, r, s.base, 0, 0)
				}}
		}},
		{"generating task unmapped", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			in := regionWith(t, s.base, isInnermost, "innermost region")
			k := taskWith(t, s.base, func(k inspect.Task) bool { return k.ID == *threadWith(t, s.base, in.Threads[0]).Task }, "innermost thread 0's task")
			s.setField(t, p, addrOf(t, k.ID), "kmp_taskdata_t", "td_parent", hole)
			off, size := s.field(t, "kmp_taskdata_t", "td_team")
			a := hole + off
			return []string{
					fmt.Sprintf("task %s: generating task: ompd_get_generating_task_handle: ompd_rc_error: reading kmp_taskdata_t.td_team at %#x: %s", k.ID, a, unmapped(a, size)),
				}, changes{tasks: []string{k.ID}, check: func(t *testing.T, r *inspect.Report) {
					want := k
					want.Parent = nil
					if got := taskWith(t, r, func(x inspect.Task) bool { return x.ID == k.ID }, "task "+k.ID); !reflect.DeepEqual(got, want) {
						t.Errorf("task %s: %s, want %s", k.ID, show(got), show(want))
					}
					wantCounts(t, r, s.base, 0, 0)
				}}
		}},
		{"construct location of a region without terminator", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			in := regionWith(t, s.base, isInnermost, "innermost region")
			ident, str := s.fakeIdent(t, p)
			s.setDWARFField(t, p, addrOf(t, in.ID), "kmp_base_team_t", "t_ident", ident)
			return []string{
					fmt.Sprintf("region %s: source location: reading source location string at %#x: string at %#x has no terminating NUL within 1024 bytes", in.ID, str, str),
				}, changes{regions: []string{in.ID}, check: func(t *testing.T, r *inspect.Report) {
					// The outlined function's line stands in.
					want := in
					want.Location, want.ConstructFunction = s.entryLine(t, in.EntryAddr), ""
					if got := regionWith(t, r, isInnermost, "innermost region"); !reflect.DeepEqual(got, want) {
						t.Errorf("innermost region: %s, want %s", show(got), show(want))
					}
					wantCounts(t, r, s.base, 0, 0)
				}}
		}},
		{"affinity format without terminator", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			str := p.fill('x', 8192)
			p.put(s.sym(t, "__kmp_affinity_format"), 8, str)
			return []string{
					fmt.Sprintf("ICV affinity-format-var (address_space): reading affinity-format-var: ompd_rc_error: reading string __kmp_affinity_format at %#x: string at %#x has no terminating NUL within 4096 bytes", str, str),
				}, changes{icvs: named("affinity-format-var"), check: func(t *testing.T, r *inspect.Report) {
					if _, ok := find(r.ICVs, func(v inspect.ICV) bool { return v.Name == "affinity-format-var" }); ok {
						t.Errorf("affinity-format-var has a value")
					}
					if len(r.ICVs) != len(s.base.ICVs)-1 {
						t.Errorf("%d ICVs, want %d", len(r.ICVs), len(s.base.ICVs)-1)
					}
				}}
		}},
		{"nested nthreads list longer than 1024", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			s.setField(t, p, s.sym(t, "__kmp_nested_nth"), "kmp_nested_nthreads_t", "used", 1025)
			var want []string
			for _, th := range s.base.Threads {
				want = append(want, fmt.Sprintf("ICV nthreads-var (thread %d): reading nthreads-var: ompd_rc_error: __kmp_nested_nth.used is 1025, more than 1024 levels", th.OSTID))
			}
			return want, changes{icvs: named("nthreads-var"), check: func(t *testing.T, r *inspect.Report) {
				if len(r.ICVs) != len(s.base.ICVs)-len(s.base.Threads) {
					t.Errorf("%d ICVs, want %d", len(r.ICVs), len(s.base.ICVs)-len(s.base.Threads))
				}
			}}
		}},
		{"ompd_dll_locations without NULL", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			name := p.alloc(16)
			p.write(name, []byte("libompd.so\x00"))
			arr := p.alloc(8 * 65)
			for i := range uint64(65) {
				p.put(arr+8*i, 8, name)
			}
			p.put(s.sym(t, "ompd_dll_locations"), 8, arr)
			return []string{
					fmt.Sprintf("ompd_dll_locations[] at %#x: no terminating NULL within 64 entries", arr),
				}, changes{runtime: true, check: func(t *testing.T, r *inspect.Report) {
					want := s.base.Runtime
					want.OMPDDLLLocations = slices.Repeat([]string{"libompd.so"}, 64)
					if !reflect.DeepEqual(r.Runtime, want) {
						t.Errorf("runtime: %+v, want %+v", r.Runtime, want)
					}
				}}
		}},
		{"ompd_dll_locations string without terminator", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			str := p.fill('x', 8192)
			arr := p.alloc(16)
			p.put(arr, 8, str)
			p.put(s.sym(t, "ompd_dll_locations"), 8, arr)
			return []string{
					fmt.Sprintf("reading ompd_dll_locations[0]: string at %#x has no terminating NUL within 4096 bytes", str),
				}, changes{runtime: true, check: func(t *testing.T, r *inspect.Report) {
					want := s.base.Runtime
					want.OMPDDLLLocations = []string{}
					if !reflect.DeepEqual(r.Runtime, want) {
						t.Errorf("runtime: %+v, want %+v", r.Runtime, want)
					}
				}}
		}},
		{"display control variables larger than 1 MiB", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			p.put(s.sym(t, "ompd_env_block_size"), 8, 1<<20+1)
			return []string{
					"display control variables: ompd_get_display_control_vars: ompd_rc_error: ompd_env_block_size 1048577 is larger than 1 MiB",
				}, changes{controlVars: true, check: func(t *testing.T, r *inspect.Report) {
					if len(r.ControlVars) != 0 {
						t.Errorf("%d control variables", len(r.ControlVars))
					}
				}}
		}},
	}
	runBounds(t, "nested", cases)
}

// ---------------------------------------------------------------------------
// tasks: three threads; running, suspended, queued and blocked tasks.

func TestBoundsTasks(t *testing.T) {
	// taskTeam returns the producer's task team and its thread data
	// (one kmp_thread_data_t per thread of the team).
	taskTeam := func(t *testing.T, s *snapshot) (tt, data uint64) {
		producer := threadWith(t, s.base, s.ready.Int(t, "producer"))
		tt = s.dwarfRead(t, s.info(t, *producer.GTID), "kmp_base_info_t", "th_task_team")
		return tt, s.dwarfRead(t, tt, "kmp_base_task_team_t", "tt_threads_data")
	}
	// queued returns the ids of the queued tasks whose construct is in
	// function construct (any, when empty).
	queued := func(s *snapshot, construct string) []string {
		var ids []string
		for _, k := range s.base.Tasks {
			if k.Status == "queued" && (construct == "" || k.ConstructFunction == construct) {
				ids = append(ids, k.ID)
			}
		}
		return ids
	}
	ttNproc := func(v int64) boundCase {
		return boundCase{"task team size " + strconv.FormatInt(v, 10), func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			tt, _ := taskTeam(t, s)
			s.setDWARFField(t, p, tt, "kmp_base_task_team_t", "tt_nproc", uint64(v))
			gone := queued(s, "")
			if len(gone) != s.ready.Int(t, "queued_ready") {
				t.Fatalf("%d queued tasks in the unchanged report, want %d", len(gone), s.ready.Int(t, "queued_ready"))
			}
			return []string{
					fmt.Sprintf("queued tasks: task team at %#x has tt_nproc %d, outside 0..65536", tt, v),
				}, changes{tasks: gone, icvs: ownedBy(gone...), check: func(t *testing.T, r *inspect.Report) {
					// No queued task; the blocked one is still found.
					wantCounts(t, r, s.base, 0, -len(gone))
				}}
		}}
	}
	depOut := func(t *testing.T, s *snapshot) inspect.Task {
		return taskWith(t, s.base, func(k inspect.Task) bool { return k.Thread != nil && *k.Thread == s.ready.Int(t, "dep_out") }, "dep_out task")
	}
	depIn := func(t *testing.T, s *snapshot) inspect.Task {
		return taskWith(t, s.base, func(k inspect.Task) bool { return k.Status == "blocked" }, "blocked task")
	}
	cases := []boundCase{
		{"deque size", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			tt, data := taskTeam(t, s)
			num := uint64(s.ready.Int(t, "producer_num"))
			hd := data + num*s.dwarfSize(t, "kmp_thread_data_t")
			deque := s.dwarfRead(t, hd, "kmp_base_thread_data_t", "td_deque")
			n := s.dwarfRead(t, hd, "kmp_base_thread_data_t", "td_deque_ntasks")
			s.setDWARFField(t, p, hd, "kmp_base_thread_data_t", "td_deque_size", 2*llvm.MaxQueued)
			gone := queued(s, "produce")
			if uint64(len(gone)) != n {
				t.Fatalf("%d tasks queued by the producer in the unchanged report, %d in its deque", len(gone), n)
			}
			return []string{
					fmt.Sprintf("queued tasks: task deque %d of task team %#x: deque at %#x has %d tasks in %d slots: inconsistent", num, tt, deque, n, 2*llvm.MaxQueued),
				}, changes{tasks: gone, icvs: ownedBy(gone...), check: func(t *testing.T, r *inspect.Report) {
					// The task queued by dep_out is still listed.
					wantCounts(t, r, s.base, 0, -len(gone))
				}}
		}},
		ttNproc(llvm.MaxThreads + 1),
		ttNproc(-1),
		{"scheduling chain cycle", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			final := threadWith(t, s.base, s.ready.Int(t, "final"))
			child := *final.Task
			p.put(s.schedulingParent(t, addrOf(t, child)), 8, addrOf(t, child))
			// The thread's implicit task was reached only through its
			// stack.
			implicit := final.TaskStack[len(final.TaskStack)-1]
			return []string{
					fmt.Sprintf("thread %d: the chain of scheduling tasks repeats task %s: stopped there (a cycle, or memory changing while read)", final.OSTID, child),
				}, changes{threads: []int{final.OSTID}, tasks: []string{implicit}, icvs: ownedBy(implicit), check: func(t *testing.T, r *inspect.Report) {
					want := final
					want.TaskStack = []string{child}
					if got := threadWith(t, r, final.OSTID); !reflect.DeepEqual(got, want) {
						t.Errorf("final thread: %s, want %s", show(got), show(want))
					}
					wantCounts(t, r, s.base, 0, -1)
				}}
		}},
		{"scheduling chain longer than MaxNesting", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			final := threadWith(t, s.base, s.ready.Int(t, "final"))
			child := *final.Task
			size := s.layoutValue(t, "ompd_sizeof__kmp_taskdata_t") + s.layoutValue(t, "ompd_sizeof__kmp_task_t")
			flagsOff, _ := s.field(t, "kmp_taskdata_t", "td_flags")
			flagsSize := s.layoutValue(t, "ompd_sizeof__kmp_tasking_flags_t")
			explicit := s.layoutValue(t, "ompd_bitfield__kmp_tasking_flags_t__tasktype") | s.layoutValue(t, "ompd_bitfield__kmp_tasking_flags_t__tiedness")
			fakes := make([]uint64, 300)
			for i := range fakes {
				fakes[i] = p.alloc(size)
				p.put(fakes[i]+flagsOff, flagsSize, explicit)
			}
			for i := 0; i+1 < len(fakes); i++ {
				p.put(s.schedulingParent(t, fakes[i]), 8, fakes[i+1])
			}
			p.put(s.schedulingParent(t, addrOf(t, child)), 8, fakes[0])
			implicit := final.TaskStack[len(final.TaskStack)-1]
			kept := fakes[:inspect.MaxNesting]
			return []string{
					fmt.Sprintf("thread %d: the chain of scheduling tasks is longer than %d: stopped there (a cycle, or memory changing while read)", final.OSTID, inspect.MaxNesting),
				}, changes{threads: []int{final.OSTID}, tasks: []string{implicit}, icvs: ownedBy(implicit), check: func(t *testing.T, r *inspect.Report) {
					want := final
					want.TaskStack = []string{child}
					for _, a := range kept {
						want.TaskStack = append(want.TaskStack, hexID(a))
					}
					if got := threadWith(t, r, final.OSTID); !reflect.DeepEqual(got, want) {
						t.Errorf("final thread: %s, want %s", show(got), show(want))
					}
					for _, a := range kept {
						got := taskWith(t, r, func(k inspect.Task) bool { return k.ID == hexID(a) }, "task "+hexID(a))
						if got.Kind != "explicit" || got.Status != "suspended" || got.Parent != nil {
							t.Errorf("task %s of the chain: %s", hexID(a), show(got))
						}
					}
					wantCounts(t, r, s.base, 0, len(kept)-1)
				}}
		}},
		{"construct location of a task without terminator", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			k := depOut(t, s)
			th := threadWith(t, s.base, *k.Thread)
			ident, str := s.fakeIdent(t, p)
			s.setDWARFField(t, p, addrOf(t, k.ID), "kmp_taskdata_t", "td_ident", ident)
			return []string{
					fmt.Sprintf("task %s: source location: reading source location string at %#x: string at %#x has no terminating NUL within 1024 bytes", k.ID, str, str),
				}, changes{tasks: []string{k.ID}, threads: []int{th.OSTID}, check: func(t *testing.T, r *inspect.Report) {
					// The task function's line stands in, for the task
					// and the thread that runs it.
					want := k
					want.Location, want.ConstructFunction = s.entryLine(t, k.EntryAddr), ""
					if got := taskWith(t, r, func(x inspect.Task) bool { return x.ID == k.ID }, "dep_out task"); !reflect.DeepEqual(got, want) {
						t.Errorf("dep_out task: %s, want %s", show(got), show(want))
					}
					wantTh := th
					wantTh.Location = want.Location
					if got := threadWith(t, r, th.OSTID); !reflect.DeepEqual(got, wantTh) {
						t.Errorf("dep_out thread: %s, want %s", show(got), show(wantTh))
					}
					wantCounts(t, r, s.base, 0, 0)
				}}
		}},
		{"successor list cycle", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			k, blocked := depOut(t, s), depIn(t, s)
			node := s.dwarfRead(t, addrOf(t, k.ID), "kmp_taskdata_t", "td_depnode")
			dn, _ := s.dwarfField(t, "kmp_depnode_t", "dn")
			item := s.dwarfRead(t, node+dn, "kmp_base_depnode_t", "successors")
			if item == 0 {
				t.Fatalf("dep_out has no successors")
			}
			s.setDWARFField(t, p, item, "kmp_depnode_list_t", "next", item)
			return []string{
					fmt.Sprintf("tasks waiting for dependences: dependences of task %s: successor list of dependence node %#x does not end after 1 entries (a cycle, or memory changing while read)", k.ID, node),
				}, changes{tasks: []string{blocked.ID}, icvs: ownedBy(blocked.ID), check: func(t *testing.T, r *inspect.Report) {
					wantCounts(t, r, s.base, 0, -1)
				}}
		}},
		{"successor list longer than MaxDependenceNodes", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			k, blocked := depOut(t, s), depIn(t, s)
			node := s.dwarfRead(t, addrOf(t, k.ID), "kmp_taskdata_t", "td_depnode")
			dn, _ := s.dwarfField(t, "kmp_depnode_t", "dn")
			done := p.alloc(s.dwarfSize(t, "kmp_depnode_t")) // finished: task NULL
			items := fakeList(t, s, p, llvm.MaxDependenceNodes+1, done)
			s.setDWARFField(t, p, node+dn, "kmp_base_depnode_t", "successors", items)
			return []string{
					fmt.Sprintf("tasks waiting for dependences: dependences of task %s: successor list of dependence node %#x does not end after %d entries (a cycle, or memory changing while read)", k.ID, node, llvm.MaxDependenceNodes),
				}, changes{tasks: []string{blocked.ID}, icvs: ownedBy(blocked.ID), check: func(t *testing.T, r *inspect.Report) {
					wantCounts(t, r, s.base, 0, -1)
				}}
		}},
		{"dependence graph larger than MaxDependenceNodes", func(t *testing.T, s *snapshot, p *patched) ([]string, changes) {
			// Two queued tasks (walked after dep_out) get successor
			// lists of 40000 finished tasks each.
			q := queued(s, "")
			dn, _ := s.dwarfField(t, "kmp_depnode_t", "dn")
			nodeSize := s.dwarfSize(t, "kmp_depnode_t")
			done := p.alloc(nodeSize) // a successor that has finished: task NULL
			for _, id := range q[len(q)-2:] {
				items := fakeList(t, s, p, 40000, done)
				node := p.alloc(nodeSize)
				s.setDWARFField(t, p, node+dn, "kmp_base_depnode_t", "successors", items)
				s.setDWARFField(t, p, addrOf(t, id), "kmp_taskdata_t", "td_depnode", node)
			}
			return []string{
				fmt.Sprintf("tasks waiting for dependences: the dependence graph has more than %d edges: stopped there", llvm.MaxDependenceNodes),
			}, changes{check: func(t *testing.T, r *inspect.Report) { wantCounts(t, r, s.base, 0, 0) }}
		}},
	}
	runBounds(t, "tasks", cases)
}

// fakeList makes a successor list (kmp_depnode_list_t) of n entries, each
// naming the dependence node node, and returns its first entry.
func fakeList(t *testing.T, s *snapshot, p *patched, n, node uint64) uint64 {
	t.Helper()
	size := s.dwarfSize(t, "kmp_depnode_list_t")
	nodeOff, nodeSize := s.dwarfField(t, "kmp_depnode_list_t", "node")
	nextOff, nextSize := s.dwarfField(t, "kmp_depnode_list_t", "next")
	items := p.alloc(n * size)
	for i := range n {
		p.put(items+i*size+nodeOff, nodeSize, node)
		if i+1 < n {
			p.put(items+i*size+nextOff, nextSize, items+(i+1)*size)
		}
	}
	return items
}

// wantCounts checks that r has as many regions and tasks as base plus
// the given numbers: nothing more is listed than the case accounts for.
func wantCounts(t *testing.T, r, base *inspect.Report, regions, tasks int) {
	t.Helper()
	if len(r.Regions) != len(base.Regions)+regions {
		t.Errorf("%d regions, want %d", len(r.Regions), len(base.Regions)+regions)
	}
	if len(r.Tasks) != len(base.Tasks)+tasks {
		t.Errorf("%d tasks, want %d", len(r.Tasks), len(base.Tasks)+tasks)
	}
}

func osTIDs(r *inspect.Report) []int {
	var out []int
	for _, th := range r.Threads {
		out = append(out, th.OSTID)
	}
	return out
}

func regionIDs(r *inspect.Report) []string {
	var out []string
	for _, reg := range r.Regions {
		out = append(out, reg.ID)
	}
	return out
}

func taskIDs(r *inspect.Report) []string {
	var out []string
	for _, k := range r.Tasks {
		out = append(out, k.ID)
	}
	return out
}

// asICVs counts the address space's ICVs of r.
func asICVs(r *inspect.Report) int {
	n := 0
	for _, v := range r.ICVs {
		if v.Scope == "address_space" {
			n++
		}
	}
	return n
}

func strp(s string) *string { return &s }
