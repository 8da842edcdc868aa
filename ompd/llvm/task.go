package llvm

import (
	"errors"
	"fmt"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// Task is an OMPD task handle (ompd_task_handle_t): a task's
// kmp_taskdata_t and, for the implicit task of a serialized region, the
// runtime's light-weight team record.
type Task struct {
	as  *AddressSpace
	td  ompd.Address // kmp_taskdata_t
	lwt ompd.Address // ompt_lw_taskteam_t, or 0
}

// Addr identifies the task: the light-weight record of a serialized
// region's implicit task, else the kmp_taskdata_t.
func (k *Task) Addr() ompd.Address {
	if k.lwt != 0 {
		return k.lwt
	}
	return k.td
}

// TaskData is the address of the task's kmp_taskdata_t.
func (k *Task) TaskData() ompd.Address { return k.td }

// Compare orders task handles: 0 when both name the same task
// (ompd_task_handle_compare).
func (k *Task) Compare(o *Task) int {
	if c := cmpAddr(k.td, o.td); c != 0 {
		return c
	}
	return cmpAddr(k.lwt, o.lwt)
}

// Generating returns the task that created k (ompd_get_generating_task_handle).
func (k *Task) Generating() (*Task, error) {
	const op = "ompd_get_generating_task_handle"
	m := k.as.mem
	if k.lwt != 0 {
		parent, err := m.readField(k.lwt, "ompt_lw_taskteam_t", "parent")
		if err != nil {
			return nil, fail(op, ompd.RCError, err)
		}
		if parent != 0 {
			return &Task{as: k.as, td: k.td, lwt: parent}, nil
		}
	}
	parent, err := m.readField(k.td, "kmp_taskdata_t", "td_parent")
	if err != nil {
		return nil, fail(op, ompd.RCError, err)
	}
	if parent == 0 {
		return nil, fail(op, ompd.RCUnavailable, fmt.Errorf("task at %#x has no parent", k.td))
	}
	return k.as.taskOf(op, parent)
}

// Scheduling returns the task that was running when the runtime scheduled
// k (ompd_get_scheduling_task_handle). The runtime records it only with
// state tracking on; otherwise, or when none is recorded, ErrUnavailable.
func (k *Task) Scheduling() (*Task, error) {
	const op = "ompd_get_scheduling_task_handle"
	m := k.as.mem
	info, err := m.field(k.td, "kmp_taskdata_t", "ompt_task_info")
	if err != nil {
		return nil, fail(op, ompd.RCError, err)
	}
	sp, err := m.readField(info, "ompt_task_info_t", "scheduling_parent")
	if err != nil {
		return nil, fail(op, ompd.RCError, err)
	}
	if sp == 0 {
		return nil, fail(op, ompd.RCUnavailable, nil)
	}
	return &Task{as: k.as, td: sp}, nil
}

// Parallel returns the parallel region the task belongs to
// (ompd_get_task_parallel_handle).
func (k *Task) Parallel() (*Parallel, error) {
	const op = "ompd_get_task_parallel_handle"
	m := k.as.mem
	teamPtr, err := m.readField(k.td, "kmp_taskdata_t", "td_team")
	if err != nil {
		return nil, fail(op, ompd.RCError, err)
	}
	if teamPtr == 0 {
		return nil, fail(op, ompd.RCUnavailable, fmt.Errorf("task at %#x has no team", k.td))
	}
	team, err := m.field(teamPtr, "kmp_team_p", "t")
	if err != nil {
		return nil, fail(op, ompd.RCError, err)
	}
	return &Parallel{as: k.as, team: team, lwt: k.lwt}, nil
}

// Flags reads the task's flags (td_flags), decoded with the runtime's
// ompd_bitfield__kmp_tasking_flags_t__* masks.
func (k *Task) Flags() (ompd.Flags, error) {
	m := k.as.mem
	addr, err := m.field(k.td, "kmp_taskdata_t", "td_flags")
	if err != nil {
		return ompd.Flags{}, err
	}
	bits := k.as.taskFlagBits()
	if bits.sizeErr != nil {
		return ompd.Flags{}, bits.sizeErr
	}
	raw, err := m.uint(addr, bits.size)
	if err != nil {
		return ompd.Flags{}, fmt.Errorf("reading flags of task at %#x: %w", k.td, err)
	}
	bit := func(i int) bool { return raw&bits.masks[i] != 0 }
	return ompd.Flags{
		Explicit:   bit(0),
		Final:      bit(1),
		Untied:     !bit(2),
		Serial:     bit(3),
		TeamSerial: bit(4),
		Started:    bit(5),
		Executing:  bit(6),
		Complete:   bit(7),
		Freed:      bit(8),
		Native:     bit(9),
	}, bits.maskErr
}

// taskFlagNames are the fields of kmp_tasking_flags_t Flags decodes, in
// the order of taskFlagBits.masks.
var taskFlagNames = [...]string{"tasktype", "final", "tiedness", "task_serial", "team_serial", "started", "executing", "complete", "freed", "native"}

// taskFlagBits is what Flags decodes td_flags with: the flags' size (at
// most 8 bytes) and the mask of each of taskFlagNames (0 for one the
// runtime does not give, which maskErr then names).
type taskFlagBits struct {
	size    uint64
	sizeErr error
	masks   [len(taskFlagNames)]uint64
	maskErr error
}

// taskFlagBits looks up the flags' size and masks once: they are
// constants of the runtime, and a report of a thousand threads decodes
// the flags of each task several times (ten lookups by name each). An
// answer with an error is not kept (as the layout keeps no error): a
// lookup that failed in one stop is made again in the next.
func (as *AddressSpace) taskFlagBits() *taskFlagBits {
	if b := as.flagBits.Load(); b != nil {
		return b
	}
	b := &taskFlagBits{}
	size, err := as.mem.lay.sizeof("kmp_tasking_flags_t")
	b.size, b.sizeErr = min(size, 8), err
	for i, name := range taskFlagNames {
		mask, err := as.mem.lay.mask("kmp_tasking_flags_t", name)
		b.masks[i] = mask
		b.maskErr = errors.Join(b.maskErr, err)
	}
	if b.sizeErr == nil && b.maskErr == nil {
		as.flagBits.Store(b)
	}
	return b
}

// Implicit reports whether k is an implicit task.
func (k *Task) Implicit() (bool, error) {
	f, err := k.Flags()
	return !f.Explicit, err
}

// Frame returns the task's exit and enter frame addresses
// (ompd_get_task_frame). It needs state tracking.
func (k *Task) Frame() (exit, enter ompd.Address, err error) {
	const op = "ompd_get_task_frame"
	if !k.as.StateTracking() {
		return 0, 0, fail(op, ompd.RCNeedsStateTracking, nil)
	}
	m := k.as.mem
	var info ompd.Address
	if k.lwt != 0 {
		info, err = m.field(k.lwt, "ompt_lw_taskteam_t", "ompt_task_info")
	} else {
		info, err = m.field(k.td, "kmp_taskdata_t", "ompt_task_info")
	}
	if err != nil {
		return 0, 0, fail(op, ompd.RCError, err)
	}
	frame, err := m.field(info, "ompt_task_info_t", "frame")
	if err != nil {
		return 0, 0, fail(op, ompd.RCError, err)
	}
	if enter, err = m.readField(frame, "ompt_frame_t", "enter_frame"); err != nil {
		return 0, 0, fail(op, ompd.RCError, err)
	}
	if exit, err = m.readField(frame, "ompt_frame_t", "exit_frame"); err != nil {
		return 0, 0, fail(op, ompd.RCError, err)
	}
	return exit, enter, nil
}

// Function returns the entry point of the code the task runs
// (ompd_get_task_function): the task routine of an explicit task, the
// outlined function of the region for an implicit task.
//
// Unlike LLVM's library this does not need state tracking: the routine
// and the team's entry point are kept by the runtime either way.
func (k *Task) Function() (ompd.Address, error) {
	const op = "ompd_get_task_function"
	f, err := k.Flags()
	if err != nil {
		return 0, fail(op, ompd.RCError, err)
	}
	m := k.as.mem
	if f.Explicit {
		tdSize, err := m.lay.sizeof("kmp_taskdata_t")
		if err != nil {
			return 0, fail(op, ompd.RCError, err)
		}
		v, err := m.readField(k.td+tdSize, "kmp_task_t", "routine")
		if err != nil {
			return 0, fail(op, ompd.RCError, err)
		}
		return v, nil
	}
	p, err := k.Parallel()
	if err != nil {
		return 0, fail(op, ompd.RCError, err)
	}
	return p.Function()
}

// ToolData returns the OMPT task_data of the task (ompd_get_tool_data at
// task scope).
func (k *Task) ToolData() (uint64, ompd.Address, error) {
	m := k.as.mem
	var info ompd.Address
	var err error
	if k.lwt != 0 {
		info, err = m.field(k.lwt, "ompt_lw_taskteam_t", "ompt_task_info")
	} else {
		info, err = m.field(k.td, "kmp_taskdata_t", "ompt_task_info")
	}
	if err != nil {
		return 0, 0, err
	}
	data, err := m.field(info, "ompt_task_info_t", "task_data")
	if err != nil {
		return 0, 0, err
	}
	return toolData(m, data)
}
