package ompd

// WaitKind is what a waiting thread waits for, as a debugger names it.
type WaitKind string

// The kinds of waits.
const (
	WaitLock      WaitKind = "lock"      // omp_set_lock
	WaitNestLock  WaitKind = "nest_lock" // omp_set_nest_lock
	WaitCritical  WaitKind = "critical"  // a critical construct
	WaitAtomic    WaitKind = "atomic"    // an atomic construct the runtime implements with a lock
	WaitOrdered   WaitKind = "ordered"   // an ordered construct
	WaitBarrier   WaitKind = "barrier"   // a barrier (explicit, worksharing's or the region's end)
	WaitTaskwait  WaitKind = "taskwait"  // its child tasks
	WaitTaskgroup WaitKind = "taskgroup" // the end of a taskgroup
	WaitIdle      WaitKind = "idle"      // parked between regions (waits for work, not for a thread)
)

// Wait is what one thread waits for, as the runtime's objects show it.
// Every field but What may be unknown.
type Wait struct {
	What WaitKind
	// Object is the address that identifies what it waits for: the
	// user's lock (omp_lock_t, omp_nest_lock_t), the critical section's
	// lock, the team for a barrier; 0 when unknown.
	Object Address
	// Name names the object when it has a name (a named critical
	// section: its name).
	Name string
	// Holder is the thread (its pthread id: thread pointer) that holds
	// the lock or critical section; 0 when nobody holds it or it is not
	// known. HolderUnknown says why it is not known ("" when Holder is
	// known, or the object has no holder: a barrier).
	Holder        uint64
	HolderUnknown string
	// Team is the team (its parallel region's address) a barrier
	// belongs to, 0 otherwise.
	Team Address
	// FromCall says the wait was found from the thread's call into the
	// runtime (its stack and the arguments its caller passed), not from
	// a wait the runtime records for the thread.
	FromCall bool
}

// Waiter is an optional extension of a backend's thread handle: what the
// thread waits for, nil when it does not wait (or the runtime cannot
// tell).
type Waiter interface {
	BlockedOn() (*Wait, error)
}

// CallSite is what a thread's call into the runtime passed: the function
// it called and the integer arguments it passed in registers (System V
// x86-64 order: rdi, rsi, rdx, rcx, r8, r9), as far as the caller's code
// shows them.
type CallSite struct {
	// Callee is the address of the function called.
	Callee Address
	// Args holds the arguments; Known says which were recovered.
	Args  [6]uint64
	Known [6]bool
}

// CallSiteReader is an optional extension of Callbacks: the call by which
// a thread, now inside the runtime, entered it. A backend uses it to learn
// which lock or critical section a thread waits for when the runtime does
// not record it (the lock's address is the argument the user's code
// passed).
type CallSiteReader interface {
	// CallSite returns the call by which the thread entered the runtime
	// (its innermost frame outside the runtime, below the runtime's
	// frames), when that call is to one of callees. ok is false when the
	// thread is not inside the runtime or entered it by another call.
	CallSite(ctx ThreadContext, callees []Address) (site CallSite, ok bool)
}

// TaskgroupMember is an optional extension of a backend's task handle:
// the taskgroup the task belongs to (the address of the runtime's
// taskgroup object; 0 when it belongs to none), so that a thread waiting
// at the end of a taskgroup is known to wait for the threads running its
// member tasks.
type TaskgroupMember interface {
	Taskgroup() (Address, error)
}
