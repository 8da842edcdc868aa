package gomp

import (
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/handles"
	"github.com/ompd-inspect/ompd-inspect/ompd/backend"
)

// Task and region handles' keys are equal exactly when Compare says they
// name the same object (internal/handles looks handles up by key).
func TestHandleKeysAgreeWithCompare(t *testing.T) {
	tasks := []*gtask{
		{addr: 0x1000}, {addr: 0x1000, team: 0x9000}, {initialOf: 0x1000}, {initialOf: 0x1000},
		{addr: 0x1000, initialOf: 0x2000}, {addr: 0x3000},
	}
	if bad := handles.KeyMismatches(tasks, func(a, b *gtask) int { return a.Compare(backend.Task(b)) }); len(bad) != 0 {
		t.Errorf("tasks whose keys and Compare disagree (indexes): %v", bad)
	}
	regions := []*gparallel{{addr: 0}, {addr: 0}, {addr: 0x1000}, {addr: 0x1000}, {addr: 0x2000}}
	if bad := handles.KeyMismatches(regions, func(a, b *gparallel) int { return a.Compare(backend.Parallel(b)) }); len(bad) != 0 {
		t.Errorf("regions whose keys and Compare disagree (indexes): %v", bad)
	}
}
