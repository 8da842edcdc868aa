package llvm

import (
	"testing"

	"github.com/ompd-inspect/ompd-inspect/ompd/backend"
)

// keysAgree checks that, for every pair of hs, the keys are equal exactly
// when Compare says both name the same object.
func keysAgree[H interface{ HandleKey() [2]uint64 }](t *testing.T, what string, hs []H, compare func(a, b H) int) {
	t.Helper()
	for i, a := range hs {
		for j, b := range hs {
			if same, keys := compare(a, b) == 0, a.HandleKey() == b.HandleKey(); same != keys {
				t.Errorf("%s %d and %d: Compare gives same %v, keys %v and %v", what, i, j, same, a.HandleKey(), b.HandleKey())
			}
		}
	}
}

// Task and region handles' keys are equal exactly when Compare says they
// name the same object (internal/handles looks handles up by key).
func TestHandleKeysAgreeWithCompare(t *testing.T) {
	keysAgree(t, "tasks", []nativeTask{
		{&Task{td: 0x1000}}, {&Task{td: 0x1000}}, {&Task{td: 0x1000, lwt: 0x2000}},
		{&Task{td: 0x1000, lwt: 0x2000}}, {&Task{td: 0x3000}}, {&Task{lwt: 0x1000}},
	}, func(a, b nativeTask) int { return a.Compare(backend.Task(b)) })
	keysAgree(t, "regions", []nativeParallel{
		{&Parallel{team: 0x1000}}, {&Parallel{team: 0x1000}}, {&Parallel{team: 0x1000, lwt: 0x2000}},
		{&Parallel{team: 0x1000, lwt: 0x2000}}, {&Parallel{team: 0x3000}}, {&Parallel{lwt: 0x1000}},
	}, func(a, b nativeParallel) int { return a.Compare(backend.Parallel(b)) })
}
