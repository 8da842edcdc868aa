package stacks

import (
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// Activities a stack can show (ompd.Activity's values, as the report
// spells them). They are what the frames say, independent of the OMPD
// state, so they are known without state tracking.
const (
	ActivityUser             = string(ompd.ActivityUser)
	ActivityBarrierExplicit  = string(ompd.ActivityBarrierExplicit)
	ActivityBarrierImplicit  = string(ompd.ActivityBarrierImplicit)
	ActivityLock             = string(ompd.ActivityLock)
	ActivityCritical         = string(ompd.ActivityCritical)
	ActivityTaskwait         = string(ompd.ActivityTaskwait)
	ActivityTaskgroup        = string(ompd.ActivityTaskgroup)
	ActivityOrdered          = string(ompd.ActivityOrdered)
	ActivityIdle             = string(ompd.ActivityIdle)
	ActivityRuntime          = string(ompd.ActivityRuntime)
	ActivitySystem           = string(ompd.ActivitySystem)
	ActivityNotOpenMP        = string(ompd.ActivityNotOpenMP)
	activityUnknownUnwinding = "unknown (no frames)"
)

// activity says what a thread does from its native frames alone (what
// the runtime's family says of its functions), and
// whether it has a current parallel region (OMPD knows that without state
// tracking): a worker waiting for work in the runtime's fork barrier is
// still at the end of its region until the whole team has arrived.
func activity(frames []phys, inRegion bool, fam ompd.Family) string {
	if len(frames) == 0 {
		return activityUnknownUnwinding
	}
	sawRuntime, sawSystem := false, false
	for _, f := range frames {
		switch f.kind {
		case inspect.KindUser:
			// The entry point the user code called, when it left no
			// frame of its own (libgomp's omp_set_lock, GOMP_barrier
			// and GOMP_critical_start jump on to internal functions).
			if fam != nil && f.calls != "" && (sawRuntime || sawSystem) {
				if a, ok := fam.Activity(f.calls); ok {
					if a == ompd.ActivityIdle && inRegion {
						return ActivityBarrierImplicit
					}
					return string(a)
				}
			}
			if sawRuntime {
				return ActivityRuntime
			}
			return ActivityUser
		case inspect.KindSystem:
			sawSystem = true
		case inspect.KindRuntime:
			sawRuntime = true
			if fam == nil {
				continue
			}
			if a, ok := fam.Activity(f.function); ok {
				if a == ompd.ActivityIdle && inRegion {
					return ActivityBarrierImplicit
				}
				return string(a)
			}
		}
	}
	if sawRuntime {
		return ActivityRuntime
	}
	return ActivityNotOpenMP
}
