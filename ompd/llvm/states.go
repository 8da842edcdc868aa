package llvm

import "github.com/ompd-inspect/ompd-inspect/ompd"

// EnumerateStates lists the thread states the runtime can report, as
// ompd_enumerate_states walks them: every OMPT state.
func (as *AddressSpace) EnumerateStates() []ompd.StateInfo { return ompd.States() }
