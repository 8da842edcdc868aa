package ompd

import (
	"fmt"
	"strings"
)

// State is an OMPT thread state (ompt_state_t).
type State uint64

// The OMPT thread states, with their OpenMP 5.1 values.
const (
	StateWorkSerial                   State = 0x000
	StateWorkParallel                 State = 0x001
	StateWorkReduction                State = 0x002
	StateWaitBarrier                  State = 0x010
	StateWaitBarrierImplicitParallel  State = 0x011
	StateWaitBarrierImplicitWorkshare State = 0x012
	StateWaitBarrierImplicit          State = 0x013
	StateWaitBarrierExplicit          State = 0x014
	StateWaitTaskwait                 State = 0x020
	StateWaitTaskgroup                State = 0x021
	StateWaitMutex                    State = 0x040
	StateWaitLock                     State = 0x041
	StateWaitCritical                 State = 0x042
	StateWaitAtomic                   State = 0x043
	StateWaitOrdered                  State = 0x044
	StateWaitTarget                   State = 0x080
	StateWaitTargetMap                State = 0x081
	StateWaitTargetUpdate             State = 0x082
	StateIdle                         State = 0x100
	StateOverhead                     State = 0x101
	StateUndefined                    State = 0x102
)

// stateNames lists the states in the order ompd_enumerate_states gives.
var stateNames = []struct {
	s    State
	name string
}{
	{StateWorkSerial, "ompt_state_work_serial"},
	{StateWorkParallel, "ompt_state_work_parallel"},
	{StateWorkReduction, "ompt_state_work_reduction"},
	{StateWaitBarrier, "ompt_state_wait_barrier"},
	{StateWaitBarrierImplicitParallel, "ompt_state_wait_barrier_implicit_parallel"},
	{StateWaitBarrierImplicitWorkshare, "ompt_state_wait_barrier_implicit_workshare"},
	{StateWaitBarrierImplicit, "ompt_state_wait_barrier_implicit"},
	{StateWaitBarrierExplicit, "ompt_state_wait_barrier_explicit"},
	{StateWaitTaskwait, "ompt_state_wait_taskwait"},
	{StateWaitTaskgroup, "ompt_state_wait_taskgroup"},
	{StateWaitMutex, "ompt_state_wait_mutex"},
	{StateWaitLock, "ompt_state_wait_lock"},
	{StateWaitCritical, "ompt_state_wait_critical"},
	{StateWaitAtomic, "ompt_state_wait_atomic"},
	{StateWaitOrdered, "ompt_state_wait_ordered"},
	{StateWaitTarget, "ompt_state_wait_target"},
	{StateWaitTargetMap, "ompt_state_wait_target_map"},
	{StateWaitTargetUpdate, "ompt_state_wait_target_update"},
	{StateIdle, "ompt_state_idle"},
	{StateOverhead, "ompt_state_overhead"},
	{StateUndefined, "ompt_state_undefined"},
}

// FullName returns the OMPT name of the state (ompt_state_wait_lock).
func (s State) FullName() string {
	for _, n := range stateNames {
		if n.s == s {
			return n.name
		}
	}
	return fmt.Sprintf("ompt_state_%#x", uint64(s))
}

// String returns the state's name without the ompt_state_ prefix
// (wait_lock), as ompd-inspect prints it.
func (s State) String() string { return strings.TrimPrefix(s.FullName(), "ompt_state_") }

// Waiting reports whether the state is one of the wait states.
func (s State) Waiting() bool { return s >= 0x010 && s < 0x100 }

// StateInfo is one entry of the state enumeration.
type StateInfo struct {
	Value State
	Name  string
}

// States lists the OMPT thread states (all but undefined), in the order
// ompd_enumerate_states walks them.
func States() []StateInfo {
	out := make([]StateInfo, 0, len(stateNames))
	for _, n := range stateNames {
		if n.s == StateUndefined {
			continue
		}
		out = append(out, StateInfo{Value: n.s, Name: n.name})
	}
	return out
}
