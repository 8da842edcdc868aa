package llvm

import (
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/handles"
	"github.com/ompd-inspect/ompd-inspect/ompd/backend"
)

// Task and region handles' keys are equal exactly when Compare says they
// name the same object (internal/handles looks handles up by key).
func TestHandleKeysAgreeWithCompare(t *testing.T) {
	tasks := []nativeTask{
		{&Task{td: 0x1000}}, {&Task{td: 0x1000}}, {&Task{td: 0x1000, lwt: 0x2000}},
		{&Task{td: 0x1000, lwt: 0x2000}}, {&Task{td: 0x3000}}, {&Task{lwt: 0x1000}},
	}
	if bad := handles.KeyMismatches(tasks, func(a, b nativeTask) int { return a.Compare(backend.Task(b)) }); len(bad) != 0 {
		t.Errorf("tasks whose keys and Compare disagree (indexes): %v", bad)
	}
	regions := []nativeParallel{
		{&Parallel{team: 0x1000}}, {&Parallel{team: 0x1000}}, {&Parallel{team: 0x1000, lwt: 0x2000}},
		{&Parallel{team: 0x1000, lwt: 0x2000}}, {&Parallel{team: 0x3000}}, {&Parallel{lwt: 0x1000}},
	}
	if bad := handles.KeyMismatches(regions, func(a, b nativeParallel) int { return a.Compare(backend.Parallel(b)) }); len(bad) != 0 {
		t.Errorf("regions whose keys and Compare disagree (indexes): %v", bad)
	}
}
