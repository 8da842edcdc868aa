package ompd

// Family is one family of OpenMP runtimes (LLVM's libomp, GNU libgomp):
// what recognizes its runtime library and what its functions mean to a
// debugger. The rest of ompd-inspect asks a family; only the family knows
// its runtime's function and symbol names.
type Family interface {
	// Name is the family's name, for messages ("LLVM OpenMP runtime").
	Name() string
	// Recognizes reports whether a library is the family's runtime; has
	// reports whether the library defines a symbol.
	Recognizes(has func(symbol string) bool) bool
	// MaybeRuntime reports whether a library's file name looks like the
	// family's runtime (to say so when its file cannot be read).
	MaybeRuntime(fileName string) bool
	// Activity says what a thread does when fn is the innermost runtime
	// function on its stack that tells (a barrier, a lock wait ...).
	Activity(fn string) (Activity, bool)
	// ForkEntry reports whether fn is an entry point user code calls to
	// start a parallel region (the thread stays in it until the region's
	// end).
	ForkEntry(fn string) bool
	// ForkFunction is the runtime function that forks a team, whose
	// callers pass ompd_bp_parallel_begin before the new region is
	// current; "" when the family has none.
	ForkFunction() string
	// Traceable reports whether the family's runtimes pass OMPD
	// breakpoint locations (ompd_bp_*) that a trace can stop at.
	Traceable() bool
	// GTIDSymbol is the thread-local variable holding a thread's global
	// thread id, "" when the family has none.
	GTIDSymbol() string
}

// Activity is what a thread's stack shows it doing, known from its
// frames alone (without state tracking).
type Activity string

// The activities a stack can show.
const (
	ActivityUser            Activity = "user code"
	ActivityBarrierExplicit Activity = "barrier (explicit or end of worksharing)"
	ActivityBarrierImplicit Activity = "implicit barrier at the end of a parallel region"
	ActivityLock            Activity = "lock"
	ActivityCritical        Activity = "critical"
	ActivityTaskwait        Activity = "taskwait"
	ActivityTaskgroup       Activity = "end of taskgroup"
	ActivityOrdered         Activity = "ordered"
	ActivityIdle            Activity = "idle in the thread pool"
	ActivityRuntime         Activity = "OpenMP runtime"
	ActivitySystem          Activity = "system code"
	ActivityNotOpenMP       Activity = "no OpenMP frames"
)
