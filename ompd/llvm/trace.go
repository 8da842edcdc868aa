package llvm

import (
	"sync"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// Refresh forgets what the address space read from the runtime's thread
// table, the source locations and the display control variables it read,
// so that the next call reads them again. A tool that follows a running
// process (ompd-inspect's trace) keeps one address space handle for the
// process and refreshes it at every stop; the layout the runtime
// describes in its ompd_* symbols is fixed and kept. Refresh must not run
// while other methods of the address space or its handles do.
func (as *AddressSpace) Refresh() {
	as.once = sync.Once{}
	as.threads, as.byPthread, as.byInfo, as.walkErr = nil, nil, nil, nil
	as.identMu.Lock()
	as.idents = nil
	as.identMu.Unlock()
	as.envOnce, as.env, as.envErr = sync.Once{}, nil, nil
}

// TeamFieldAddr returns the address of the field of the thread's
// descriptor that holds its current team (kmp_base_info_t.th_team). A tool
// that stops a thread at ompd_bp_parallel_begin can watch it: LLVM's
// runtime reaches that location before it makes the new team the
// encountering thread's current one when the region is nested, so
// ompd_get_curr_parallel_handle still gives the enclosing region there;
// the write to this field is where the new region becomes current
// (extension).
func (t *Thread) TeamFieldAddr() (ompd.Address, error) {
	off, err := t.as.mem.lay.offset("kmp_base_info_t", "th_team")
	if err != nil {
		return 0, fail("locating the team of a thread", ompd.RCError, err)
	}
	return t.th + off, nil
}
