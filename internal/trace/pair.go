package trace

// open is a begin event waiting for its end: a parallel region or a part
// of a task that a thread began.
type open struct {
	id   string  // region or task id
	time float64 // of the begin event
	key  string  // the summary row (summer.begin)
}

// opens pairs begin events with end events, by OS thread: what a thread
// began it also ends, and what it begins in between (a nested region, a
// task run at a task scheduling point, the next part of an untied task
// run from inside its current part) it ends first.
//
// Tasks are paired this way rather than by id alone because LLVM runs an
// untied task in parts (clang's task entry runs one part per call; its
// first part only queues the task again), and each part is one call of
// __kmp_invoke_task, which passes ompd_bp_task_begin and ompd_bp_task_end
// on the thread that runs it. Two parts of one task can run at the same
// time on two threads: the queued part may be taken by another thread
// before the first thread has passed the end of its part
// (begin(A) begin(B) end(A) end(B)). The task and the thread running it
// identify a part; on one thread, parts of one task are nested.
type opens map[int][]open

// begin records that thread tid began o.
func (p opens) begin(tid int, o open) {
	p[tid] = append(p[tid], o)
}

// end finds the innermost region or task part with id that thread tid
// began and has not ended, and removes it. ok is false when there is
// none (the begin came before the trace did).
func (p opens) end(tid int, id string) (o open, ok bool) {
	stack := p[tid]
	for i := len(stack) - 1; i >= 0; i-- {
		if stack[i].id != id {
			continue
		}
		o = stack[i]
		if len(stack) == 1 {
			delete(p, tid)
		} else {
			p[tid] = append(stack[:i:i], stack[i+1:]...)
		}
		return o, true
	}
	return open{}, false
}

// forget drops what thread tid began and has not ended: the thread has
// ended (an OS thread id can be reused by a later thread).
func (p opens) forget(tid int) { delete(p, tid) }
