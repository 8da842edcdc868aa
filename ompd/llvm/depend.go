package llvm

import (
	"errors"
	"fmt"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// MaxDependenceNodes bounds how many dependence-graph nodes BlockedTasks
// visits, and how long one successor list may be.
const MaxDependenceNodes = 1 << 16

// BlockedTask is an explicit task that has been created but cannot be
// scheduled yet: it waits for tasks it depends on (depend clauses) to
// finish. Such a task is in no task deque.
type BlockedTask struct {
	// Task is the blocked task.
	Task *Task
	// Predecessors are the unfinished tasks, among those walked, whose
	// successor lists name Task.
	Predecessors []*Task
	// Pending is the runtime's count of Task's predecessors that have not
	// finished (npredecessors).
	Pending int
}

// BlockedTasks returns the explicit tasks that wait for dependences, found
// by following the dependence graph (each task's td_depnode and its
// successor list) from the given tasks, transitively: a blocked task's own
// successors are blocked too. Tasks in from are not returned. Not an OMPD
// 5.1 call: the graph's layout comes from TypeLayouts.
func (as *AddressSpace) BlockedTasks(from []*Task) ([]BlockedTask, error) {
	tl, err := as.typeLayouts()
	if err != nil {
		return nil, err
	}
	dnOff, _, err := tl.FieldLayout("kmp_depnode_t", "dn")
	if err != nil {
		return nil, err
	}
	tdSize, err := tl.TypeSize("kmp_taskdata_t")
	if err != nil {
		return nil, err
	}
	known := map[ompd.Address]bool{}
	queue := make([]ompd.Address, 0, len(from))
	for _, k := range from {
		if !known[k.td] {
			known[k.td] = true
			queue = append(queue, k.td)
		}
	}
	index := map[ompd.Address]int{} // blocked task -> index in out
	var out []BlockedTask
	var errs []error
	visited := 0
	for len(queue) > 0 {
		td := queue[0]
		queue = queue[1:]
		succ, err := as.successors(td, dnOff)
		if err != nil {
			errs = append(errs, fmt.Errorf("dependences of task %#x: %w", td, err))
			continue
		}
		for _, s := range succ {
			if visited++; visited > MaxDependenceNodes {
				errs = append(errs, fmt.Errorf("the dependence graph has more than %d edges: stopped there", MaxDependenceNodes))
				return out, errors.Join(errs...)
			}
			if s.task == 0 {
				continue // the successor has finished
			}
			sd := s.task - tdSize // kmp_task_t follows its kmp_taskdata_t
			pred := &Task{as: as, td: td}
			if i, ok := index[sd]; ok {
				out[i].Predecessors = append(out[i].Predecessors, pred)
				continue
			}
			if known[sd] {
				continue
			}
			known[sd] = true
			index[sd] = len(out)
			out = append(out, BlockedTask{Task: &Task{as: as, td: sd}, Predecessors: []*Task{pred}, Pending: s.pending})
			queue = append(queue, sd)
		}
	}
	return out, errors.Join(errs...)
}

// successor is one entry of a dependence node's successor list.
type successor struct {
	task    ompd.Address // kmp_task_t of the successor, 0 once it has finished
	pending int          // its npredecessors
}

// successors reads the successor list of the dependence node of the task
// whose kmp_taskdata_t is at td; a task without dependences has none.
func (as *AddressSpace) successors(td, dnOff ompd.Address) ([]successor, error) {
	node, err := as.readTyped(td, "kmp_taskdata_t", "td_depnode")
	if err != nil || node == 0 {
		return nil, err
	}
	item, err := as.readTyped(node+dnOff, "kmp_base_depnode_t", "successors")
	if err != nil {
		return nil, err
	}
	var out []successor
	seen := map[ompd.Address]bool{}
	for item != 0 {
		if seen[item] || len(out) >= MaxDependenceNodes {
			return out, fmt.Errorf("successor list of dependence node %#x does not end after %d entries (a cycle, or memory changing while read)", node, len(out))
		}
		seen[item] = true
		sn, err := as.readTyped(item, "kmp_depnode_list_t", "node")
		if err != nil {
			return out, err
		}
		next, err := as.readTyped(item, "kmp_depnode_list_t", "next")
		if err != nil {
			return out, err
		}
		item = next
		if sn == 0 {
			continue
		}
		task, err := as.readTyped(sn+dnOff, "kmp_base_depnode_t", "task")
		if err != nil {
			return out, err
		}
		n, err := as.readTyped(sn+dnOff, "kmp_base_depnode_t", "npredecessors")
		if err != nil {
			return out, err
		}
		out = append(out, successor{task: task, pending: int(int32(n))})
	}
	return out, nil
}
