package llvm

import (
	"fmt"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// Thread is an OMPD thread handle (ompd_thread_handle_t): one OpenMP
// thread, identified by its kmp_base_info_t in the runtime.
type Thread struct {
	as        *AddressSpace
	th        ompd.Address // the thread's kmp_base_info_t
	gtid      int          // index in __kmp_threads; -1 when reached through a team
	pthreadID uint64
	ctx       ompd.ThreadContext
}

// AddressSpace returns the handle's address space.
func (t *Thread) AddressSpace() *AddressSpace { return t.as }

// Addr is the address of the thread's runtime descriptor; it identifies
// the thread for as long as the runtime keeps it.
func (t *Thread) Addr() ompd.Address { return t.th }

// GTID is the runtime's global thread id (the index in __kmp_threads), or
// -1 when unknown.
func (t *Thread) GTID() int { return t.gtid }

// Context returns the debugger's thread context given to ThreadHandle, nil
// for handles obtained otherwise.
func (t *Thread) Context() ompd.ThreadContext { return t.ctx }

func (t *Thread) pthread() (uint64, error) {
	ds, err := t.desc()
	if err != nil {
		return 0, err
	}
	return t.as.mem.readField(ds, "kmp_desc_base_t", "ds_thread")
}

// pthreadAddr returns the address of the field pthread reads.
func (t *Thread) pthreadAddr() (ompd.Address, error) {
	ds, err := t.desc()
	if err != nil {
		return 0, err
	}
	return t.as.mem.field(ds, "kmp_desc_base_t", "ds_thread")
}

// desc returns the address of the thread's descriptor (th_info.ds, a
// kmp_desc_base_t).
func (t *Thread) desc() (ompd.Address, error) {
	m := t.as.mem
	info, err := m.field(t.th, "kmp_base_info_t", "th_info")
	if err != nil {
		return 0, err
	}
	return m.field(info, "kmp_desc_t", "ds")
}

// ID returns the native id of the thread (ompd_get_thread_id); only
// ThreadIDPthread is supported.
func (t *Thread) ID(kind ompd.ThreadIDKind) (uint64, error) {
	if kind != ompd.ThreadIDPthread {
		return 0, fail("ompd_get_thread_id", ompd.RCUnsupported, fmt.Errorf("thread id kind %d", kind))
	}
	if t.pthreadID != 0 {
		return t.pthreadID, nil
	}
	v, err := t.pthread()
	if err != nil {
		return 0, fail("ompd_get_thread_id", ompd.RCError, err)
	}
	return v, nil
}

// Compare orders thread handles: 0 when both name the same thread
// (ompd_thread_handle_compare).
func (t *Thread) Compare(o *Thread) int { return cmpAddr(t.th, o.th) }

func cmpAddr(a, b ompd.Address) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ThreadNum returns the thread's number in its current team (the
// thread-num-var ICV, ds_tid).
func (t *Thread) ThreadNum() (int, error) {
	ds, err := t.desc()
	if err != nil {
		return 0, err
	}
	v, err := t.as.mem.readFieldInt(ds, "kmp_desc_base_t", "ds_tid")
	if err != nil {
		return 0, fmt.Errorf("reading thread number: %w", err)
	}
	return int(v), nil
}

// State returns the thread's OMPT state and wait id (ompd_get_state). It
// needs state tracking.
func (t *Thread) State() (ompd.State, uint64, error) {
	const op = "ompd_get_state"
	if !t.as.StateTracking() {
		return 0, 0, fail(op, ompd.RCNeedsStateTracking, nil)
	}
	m := t.as.mem
	info, err := m.field(t.th, "kmp_base_info_t", "ompt_thread_info")
	if err != nil {
		return 0, 0, fail(op, ompd.RCError, err)
	}
	st, err := m.readField(info, "ompt_thread_info_t", "state")
	if err != nil {
		return 0, 0, fail(op, ompd.RCError, err)
	}
	wait, err := m.readField(info, "ompt_thread_info_t", "wait_id")
	if err != nil {
		return 0, 0, fail(op, ompd.RCError, err)
	}
	return ompd.State(st), wait, nil
}

// CurrentParallel returns the innermost parallel region the thread is in
// (ompd_get_curr_parallel_handle).
func (t *Thread) CurrentParallel() (*Parallel, error) {
	const op = "ompd_get_curr_parallel_handle"
	teamPtr, err := t.pointerField(op, "th_team", "team")
	if err != nil {
		return nil, err
	}
	return t.as.parallelOfTeam(op, teamPtr)
}

// pointerField reads a pointer field of the thread's kmp_base_info_t; a
// NULL pointer is ErrUnavailable ("thread at X has no what").
func (t *Thread) pointerField(op, field, what string) (ompd.Address, error) {
	p, err := t.as.mem.readField(t.th, "kmp_base_info_t", field)
	if err != nil {
		return 0, fail(op, ompd.RCError, err)
	}
	if p == 0 {
		return 0, fail(op, ompd.RCUnavailable, fmt.Errorf("thread at %#x has no %s", t.th, what))
	}
	return p, nil
}

// parallelOfTeam builds the parallel handle of the team at teamPtr (a
// kmp_team_p): the team itself, or the serialized region inside it.
func (as *AddressSpace) parallelOfTeam(op string, teamPtr ompd.Address) (*Parallel, error) {
	team, lwt, err := as.teamAndLWT(teamPtr)
	if err != nil {
		return nil, fail(op, ompd.RCError, err)
	}
	return &Parallel{as: as, team: team, lwt: lwt}, nil
}

// teamAndLWT returns the kmp_base_team_t of the team at teamPtr and the
// light-weight team record of the serialized region inside it (0: none).
func (as *AddressSpace) teamAndLWT(teamPtr ompd.Address) (team, lwt ompd.Address, err error) {
	m := as.mem
	if team, err = m.field(teamPtr, "kmp_team_p", "t"); err != nil {
		return 0, 0, err
	}
	lwt, err = m.readField(team, "kmp_base_team_t", "ompt_serialized_team_info")
	return team, lwt, err
}

// CurrentTask returns the task the thread is executing
// (ompd_get_curr_task_handle).
func (t *Thread) CurrentTask() (*Task, error) {
	const op = "ompd_get_curr_task_handle"
	td, err := t.pointerField(op, "th_current_task", "current task")
	if err != nil {
		return nil, err
	}
	return t.as.taskOf(op, td)
}

// taskOf builds the task handle of the kmp_taskdata_t at td.
func (as *AddressSpace) taskOf(op string, td ompd.Address) (*Task, error) {
	m := as.mem
	teamPtr, err := m.readField(td, "kmp_taskdata_t", "td_team")
	if err != nil {
		return nil, fail(op, ompd.RCError, err)
	}
	var lwt ompd.Address
	if teamPtr != 0 {
		if _, lwt, err = as.teamAndLWT(teamPtr); err != nil {
			return nil, fail(op, ompd.RCError, err)
		}
	}
	return &Task{as: as, td: td, lwt: lwt}, nil
}

// ToolData returns the OMPT thread_data of the thread
// (ompd_get_tool_data at thread scope).
func (t *Thread) ToolData() (value uint64, ptr ompd.Address, err error) {
	m := t.as.mem
	info, err := m.field(t.th, "kmp_base_info_t", "ompt_thread_info")
	if err != nil {
		return 0, 0, err
	}
	data, err := m.field(info, "ompt_thread_info_t", "thread_data")
	if err != nil {
		return 0, 0, err
	}
	return toolData(m, data)
}

func toolData(m *memory, data ompd.Address) (uint64, ompd.Address, error) {
	v, err := m.readField(data, "ompt_data_t", "value")
	if err != nil {
		return 0, 0, err
	}
	p, err := m.readField(data, "ompt_data_t", "ptr")
	if err != nil {
		return 0, 0, err
	}
	return v, p, nil
}
