package stacks

import "github.com/ompd-inspect/ompd-inspect/internal/inspect"

// Activities a stack can show. They are what the frames say, independent
// of the OMPD state, so they are known without state tracking.
const (
	ActivityUser             = "user code"
	ActivityBarrierExplicit  = "barrier (explicit or end of worksharing)"
	ActivityBarrierImplicit  = "implicit barrier at the end of a parallel region"
	ActivityLock             = "lock"
	ActivityCritical         = "critical"
	ActivityTaskwait         = "taskwait"
	ActivityTaskgroup        = "end of taskgroup"
	ActivityOrdered          = "ordered"
	ActivityIdle             = "idle in the thread pool"
	ActivityRuntime          = "OpenMP runtime"
	ActivitySystem           = "system code"
	ActivityNotOpenMP        = "no OpenMP frames"
	activityUnknownUnwinding = "unknown (no frames)"
)

// runtimeEntries maps the runtime's entry points (and its internal
// waits) to the activity a thread inside them is in. The first match from
// the innermost frame outwards, up to the first user frame, decides.
var runtimeEntries = map[string]string{
	"__kmpc_barrier":            ActivityBarrierExplicit,
	"__kmp_join_barrier":        ActivityBarrierImplicit,
	"__kmp_join_call":           ActivityBarrierImplicit,
	"__kmpc_set_lock":           ActivityLock,
	"__kmpc_set_nest_lock":      ActivityLock,
	"omp_set_lock":              ActivityLock,
	"omp_set_nest_lock":         ActivityLock,
	"__kmpc_critical":           ActivityCritical,
	"__kmpc_critical_with_hint": ActivityCritical,
	"__kmpc_omp_taskwait":       ActivityTaskwait,
	"__kmpc_end_taskgroup":      ActivityTaskgroup,
	"__kmpc_ordered":            ActivityOrdered,
	"__kmp_fork_barrier":        ActivityIdle,
	"GOMP_barrier":              ActivityBarrierExplicit,
	"GOMP_critical_start":       ActivityCritical,
	"GOMP_critical_name_start":  ActivityCritical,
	"GOMP_taskwait":             ActivityTaskwait,
	"GOMP_taskgroup_end":        ActivityTaskgroup,
	"GOMP_ordered_start":        ActivityOrdered,
	"GOMP_parallel_end":         ActivityBarrierImplicit,
}

// activity says what a thread does from its native frames alone, and
// whether it has a current parallel region (OMPD knows that without state
// tracking): a worker waiting for work in the runtime's fork barrier is
// still at the end of its region until the whole team has arrived.
func activity(frames []phys, inRegion bool) string {
	if len(frames) == 0 {
		return activityUnknownUnwinding
	}
	sawRuntime := false
	for _, f := range frames {
		switch f.kind {
		case inspect.KindUser:
			if sawRuntime {
				return ActivityRuntime
			}
			return ActivityUser
		case inspect.KindRuntime:
			sawRuntime = true
			if a := runtimeEntries[f.function]; a != "" {
				if a == ActivityIdle && inRegion {
					return ActivityBarrierImplicit
				}
				return a
			}
		}
	}
	if sawRuntime {
		return ActivityRuntime
	}
	return ActivityNotOpenMP
}
