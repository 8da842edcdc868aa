package gomp

import "testing"

// Task and region handles' keys are equal exactly when Compare says they
// name the same object (internal/handles looks handles up by key).
func TestHandleKeysAgreeWithCompare(t *testing.T) {
	tasks := []*gtask{
		{addr: 0x1000}, {addr: 0x1000, team: 0x9000}, {initialOf: 0x1000}, {initialOf: 0x1000},
		{addr: 0x1000, initialOf: 0x2000}, {addr: 0x3000},
	}
	regions := []*gparallel{{addr: 0}, {addr: 0}, {addr: 0x1000}, {addr: 0x1000}, {addr: 0x2000}}
	for i := range max(len(tasks), len(regions)) {
		for j := range max(len(tasks), len(regions)) {
			if i < len(tasks) && j < len(tasks) {
				a, b := tasks[i], tasks[j]
				if same, keys := a.Compare(b) == 0, a.HandleKey() == b.HandleKey(); same != keys {
					t.Errorf("tasks %d and %d: Compare gives same %v, keys %v and %v", i, j, same, a.HandleKey(), b.HandleKey())
				}
			}
			if i < len(regions) && j < len(regions) {
				a, b := regions[i], regions[j]
				if same, keys := a.Compare(b) == 0, a.HandleKey() == b.HandleKey(); same != keys {
					t.Errorf("regions %d and %d: Compare gives same %v, keys %v and %v", i, j, same, a.HandleKey(), b.HandleKey())
				}
			}
		}
	}
}
