package llvm

import (
	"fmt"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// Parallel is an OMPD parallel handle (ompd_parallel_handle_t): a team
// (kmp_base_team_t) and, for a serialized region inside it, the runtime's
// light-weight team record.
type Parallel struct {
	as   *AddressSpace
	team ompd.Address // kmp_base_team_t
	lwt  ompd.Address // ompt_lw_taskteam_t of a serialized region, or 0
}

// Addr identifies the region: the address of the light-weight team record
// of a serialized region, else the team's.
func (p *Parallel) Addr() ompd.Address {
	if p.lwt != 0 {
		return p.lwt
	}
	return p.team
}

// Team is the address of the runtime team that holds the region.
func (p *Parallel) Team() ompd.Address { return p.team }

// Serialized reports whether the region is a serialized (team of one)
// region recorded in a light-weight team.
func (p *Parallel) Serialized() bool { return p.lwt != 0 }

// Compare orders parallel handles: 0 when both name the same region
// (ompd_parallel_handle_compare).
func (p *Parallel) Compare(o *Parallel) int {
	if c := cmpAddr(p.team, o.team); c != 0 {
		return c
	}
	return cmpAddr(p.lwt, o.lwt)
}

// Enclosing returns the parallel region that encloses p
// (ompd_get_enclosing_parallel_handle).
func (p *Parallel) Enclosing() (*Parallel, error) {
	const op = "ompd_get_enclosing_parallel_handle"
	m := p.as.mem
	if p.lwt != 0 {
		parent, err := m.readField(p.lwt, "ompt_lw_taskteam_t", "parent")
		if err != nil {
			return nil, fail(op, ompd.RCError, err)
		}
		if parent != 0 {
			return &Parallel{as: p.as, team: p.team, lwt: parent}, nil
		}
	}
	parentTeam, err := m.readField(p.team, "kmp_base_team_t", "t_parent")
	if err != nil {
		return nil, fail(op, ompd.RCError, err)
	}
	if parentTeam == 0 {
		return nil, fail(op, ompd.RCUnavailable, fmt.Errorf("team at %#x has no parent team", p.team))
	}
	return p.as.parallelOfTeam(op, parentTeam)
}

// Level returns the nesting level of the region's team (levels-var,
// t_level): 0 for the implicit region of the initial thread.
func (p *Parallel) Level() (int, error) {
	v, err := p.as.mem.readFieldInt(p.team, "kmp_base_team_t", "t_level")
	if err != nil {
		return 0, fail("reading levels-var", ompd.RCError, err)
	}
	return int(v), nil
}

// ActiveLevel returns the number of enclosing active regions
// (active-levels-var, t_active_level).
func (p *Parallel) ActiveLevel() (int, error) {
	v, err := p.as.mem.readFieldInt(p.team, "kmp_base_team_t", "t_active_level")
	if err != nil {
		return 0, fail("reading active-levels-var", ompd.RCError, err)
	}
	return int(v), nil
}

// TeamSize returns the number of threads in the region (team-size-var):
// 1 for a serialized region.
func (p *Parallel) TeamSize() (int, error) {
	if p.lwt != 0 {
		return 1, nil
	}
	v, err := p.as.mem.readFieldInt(p.team, "kmp_base_team_t", "t_nproc")
	if err != nil {
		return 0, fail("reading team-size-var", ompd.RCError, err)
	}
	if v < 0 || v > MaxThreads {
		return 0, fail("reading team-size-var", ompd.RCError, fmt.Errorf("team at %#x has t_nproc %d, outside 0..%d", p.team, v, MaxThreads))
	}
	return int(v), nil
}

// checkThreadNum fails with RCBadInput unless n is a thread number of the
// region's team.
func (p *Parallel) checkThreadNum(op string, n int) error {
	size, err := p.TeamSize()
	if err != nil {
		return err
	}
	if n < 0 || n >= size {
		return fail(op, ompd.RCBadInput, fmt.Errorf("thread number %d outside team of %d", n, size))
	}
	return nil
}

// ThreadIn returns the handle of thread number n of the region's team
// (ompd_get_thread_in_parallel).
func (p *Parallel) ThreadIn(n int) (*Thread, error) {
	const op = "ompd_get_thread_in_parallel"
	if err := p.checkThreadNum(op, n); err != nil {
		return nil, err
	}
	m := p.as.mem
	arr, err := m.readField(p.team, "kmp_base_team_t", "t_threads")
	if err != nil {
		return nil, fail(op, ompd.RCError, err)
	}
	info, err := m.pointer(arr + uint64(n*m.ptr))
	if err != nil {
		return nil, fail(op, ompd.RCError, fmt.Errorf("reading t_threads[%d]: %w", n, err))
	}
	if info == 0 {
		return nil, fail(op, ompd.RCUnavailable, fmt.Errorf("t_threads[%d] of team %#x is NULL", n, p.team))
	}
	thOff, err := p.as.mem.lay.offset("kmp_info_t", "th")
	if err != nil {
		return nil, fail(op, ompd.RCError, err)
	}
	th := info + thOff
	if err := p.as.walkThreads(); err == nil {
		if k, ok := p.as.byInfo[th]; ok {
			c := *k
			return &c, nil
		}
	}
	return &Thread{as: p.as, th: th, gtid: -1}, nil
}

// TaskIn returns the implicit task of thread number n of the region's team
// (ompd_get_task_in_parallel).
func (p *Parallel) TaskIn(n int) (*Task, error) {
	const op = "ompd_get_task_in_parallel"
	if err := p.checkThreadNum(op, n); err != nil {
		return nil, err
	}
	m := p.as.mem
	arr, err := m.readField(p.team, "kmp_base_team_t", "t_implicit_task_taskdata")
	if err != nil {
		return nil, fail(op, ompd.RCError, err)
	}
	tdSize, err := m.lay.sizeof("kmp_taskdata_t")
	if err != nil {
		return nil, fail(op, ompd.RCError, err)
	}
	return &Task{as: p.as, td: arr + uint64(n)*tdSize}, nil
}

// Function returns the entry point of the region's outlined function
// (t_pkfn; what ompd_get_task_function gives for its implicit tasks).
func (p *Parallel) Function() (ompd.Address, error) {
	v, err := p.as.mem.readField(p.team, "kmp_base_team_t", "t_pkfn")
	if err != nil {
		return 0, fail("reading parallel entry function", ompd.RCError, err)
	}
	return v, nil
}

// ToolData returns the OMPT parallel_data of the region
// (ompd_get_tool_data at parallel scope).
func (p *Parallel) ToolData() (uint64, ompd.Address, error) {
	m := p.as.mem
	var info ompd.Address
	var err error
	if p.lwt != 0 {
		info, err = m.field(p.lwt, "ompt_lw_taskteam_t", "ompt_team_info")
	} else {
		info, err = m.field(p.team, "kmp_base_team_t", "ompt_team_info")
	}
	if err != nil {
		return 0, 0, err
	}
	data, err := m.field(info, "ompt_team_info_t", "parallel_data")
	if err != nil {
		return 0, 0, err
	}
	return toolData(m, data)
}
