package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
)

// TestDeadlockDiagnosis: deadlock.c run with KMP_CONSISTENCY_CHECK=all (so
// that libomp records who holds its simple locks and critical sections),
// live and from a gcore core, on the OMPD build and on Debian's stripped
// libomp 19: the first finding is the deadlock of dl_a and dl_b, and every
// waiter's blocked_on names its holder, as libomp records it.
func TestDeadlockDiagnosis(t *testing.T) {
	env := []string{"OMP_DEBUG=enabled", "KMP_CONSISTENCY_CHECK=all"}
	runtimes := []struct {
		name string
		opts fixture.StartOptions
	}{
		{"ompd", fixture.StartOptions{Env: env}},
		{"stock19", fixture.StartOptions{Env: env, Stripped: true, Runtime: fixture.StockLibomp(19)}},
	}
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			for _, src := range []source{live, gcore} {
				t.Run(string(src), func(t *testing.T) {
					args, ready := targetArgsWith(t, "deadlock", src, rt.opts)
					r := reportOf(t, args...)
					a, b := ready.Int(t, "dl_a"), ready.Int(t, "dl_b")
					if len(r.Diagnosis) == 0 {
						t.Fatalf("no diagnosis; warnings %q", r.Warnings)
					}
					d := r.Diagnosis[0]
					if want := []int{min(a, b), max(a, b)}; d.Kind != "deadlock" || !slices.Equal(d.Threads, want) {
						t.Errorf("diagnosis[0] = %s of %v (%s); want deadlock of %v", d.Kind, d.Threads, d.Text, want)
					}
					for _, w := range []struct{ waiter, what, holder string }{
						{"dl_a", "lock", "dl_b"}, {"dl_b", "lock", "dl_a"},
						{"nest_waiter", "nest_lock", "nest_holder"},
						{"crit_waiter", "critical", "crit_holder"},
						{"named_waiter", "critical", "named_holder"},
					} {
						th := threadOf(t, r, ready.Int(t, w.waiter))
						bo := th.BlockedOn
						if bo == nil {
							t.Errorf("%s: no blocked_on", w.waiter)
							continue
						}
						want := ready.Int(t, w.holder)
						if bo.What != w.what || bo.Holder == nil || *bo.Holder != want || bo.Source != "runtime" || bo.Object == "" {
							t.Errorf("%s: blocked_on %+v; want %s held by %s (%d), from the runtime", w.waiter, *bo, w.what, w.holder, want)
						}
					}
					// Each deadlocked thread holds what the other waits for:
					// the edges of the cycle.
					edges := map[[2]int]string{}
					for _, e := range r.WaitGraph {
						edges[[2]int{e.From, e.To}] = e.Object
					}
					ta, tb := threadOf(t, r, a), threadOf(t, r, b)
					if edges[[2]int{a, b}] != ta.BlockedOn.Object || edges[[2]int{b, a}] != tb.BlockedOn.Object {
						t.Errorf("wait graph %+v: want %d -> %d on %s and %d -> %d on %s", r.WaitGraph, a, b, ta.BlockedOn.Object, b, a, tb.BlockedOn.Object)
					}
				})
			}
		})
	}
}

// TestDeadlockWithoutOwners: without KMP_CONSISTENCY_CHECK libomp records
// no owner of a simple lock or a critical section: no deadlock is claimed,
// and blocked_on says why the holders are not known; the nestable lock
// still names its holder.
func TestDeadlockWithoutOwners(t *testing.T) {
	args, ready := targetArgs(t, "deadlock", live, []string{"OMP_DEBUG=enabled"})
	r := reportOf(t, args...)
	for _, d := range r.Diagnosis {
		if d.Kind == "deadlock" {
			t.Errorf("diagnosis claims a deadlock without recorded owners: %s", d.Text)
		}
	}
	for _, role := range []string{"dl_a", "dl_b", "crit_waiter", "named_waiter"} {
		bo := threadOf(t, r, ready.Int(t, role)).BlockedOn
		if bo == nil || bo.Holder != nil || !strings.Contains(bo.HolderUnknown, "KMP_CONSISTENCY_CHECK=all") {
			t.Errorf("%s: blocked_on %+v; want no holder, and why", role, bo)
		}
	}
	bo := threadOf(t, r, ready.Int(t, "nest_waiter")).BlockedOn
	if bo == nil || bo.What != "nest_lock" || bo.Holder == nil || *bo.Holder != ready.Int(t, "nest_holder") {
		t.Errorf("nest_waiter: blocked_on %+v; want nest_lock held by nest_holder", bo)
	}
}
