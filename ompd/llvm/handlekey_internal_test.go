package llvm

import "testing"

// Task and region handles' keys are equal exactly when Compare says they
// name the same object (internal/handles looks handles up by key).
func TestHandleKeysAgreeWithCompare(t *testing.T) {
	tasks := []nativeTask{
		{&Task{td: 0x1000}}, {&Task{td: 0x1000}}, {&Task{td: 0x1000, lwt: 0x2000}},
		{&Task{td: 0x1000, lwt: 0x2000}}, {&Task{td: 0x3000}}, {&Task{lwt: 0x1000}},
	}
	for i, a := range tasks {
		for j, b := range tasks {
			if same, keys := a.Compare(b) == 0, a.HandleKey() == b.HandleKey(); same != keys {
				t.Errorf("tasks %d and %d: Compare gives same %v, keys %v and %v", i, j, same, a.HandleKey(), b.HandleKey())
			}
		}
	}
	regions := []nativeParallel{
		{&Parallel{team: 0x1000}}, {&Parallel{team: 0x1000}}, {&Parallel{team: 0x1000, lwt: 0x2000}},
		{&Parallel{team: 0x1000, lwt: 0x2000}}, {&Parallel{team: 0x3000}}, {&Parallel{lwt: 0x1000}},
	}
	for i, a := range regions {
		for j, b := range regions {
			if same, keys := a.Compare(b) == 0, a.HandleKey() == b.HandleKey(); same != keys {
				t.Errorf("regions %d and %d: Compare gives same %v, keys %v and %v", i, j, same, a.HandleKey(), b.HandleKey())
			}
		}
	}
}
