package compare

import (
	"strings"

	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

// Known defects of LLVM's OMPD library (libompd of LLVM 19), each listed
// with its evidence in docs/compatibility.md.
const (
	// KnownEntryPoints: without state tracking, ompd_get_task_function
	// answers ompd_rc_needs_state_tracking, although the runtime stores a
	// task's entry point (kmp_task_t.routine, the team's t_pkfn) in every
	// mode; so regions, tasks and threads have no function.
	KnownEntryPoints = "LLVM's libompd gives no task entry point without state tracking (ompd_rc_needs_state_tracking); the runtime records it in every mode"
)

// known returns the documented defect of the library that explains d, or
// "" when none does.
func known(d Difference, a *inspect.Report) string {
	if !a.Runtime.StateTracking && (d.B == None || d.B == `""`) && d.A != None {
		for _, f := range []string{".function", ".entry_addr"} {
			if strings.HasSuffix(d.Path, f) && (strings.HasPrefix(d.Path, "regions[") || strings.HasPrefix(d.Path, "tasks[") || strings.HasPrefix(d.Path, "threads[")) {
				return KnownEntryPoints
			}
		}
	}
	return ""
}
