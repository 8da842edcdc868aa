// Package backend defines the OMPD operations ompd-inspect's report is
// built from, as interfaces with two implementations: the native Go one
// (package ompd, wrapped by Native) and a runtime's own OMPD library loaded
// with dlopen (package ompd/dll).
//
// The methods mirror the OMPD 5.1 calls (ompd_get_curr_parallel_handle,
// ompd_get_icv_from_scope, ...). A few are not OMPD calls but extensions
// that only the native implementation can answer (construct locations,
// queued tasks, the dependence graph, ...); a backend that cannot answer
// one returns an error for which Unsupported is true, and the report says
// the field is not available from that backend.
package backend

import (
	"errors"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// Names of the two backends, as --backend takes them.
const (
	NameNative = "native"
	NameDLL    = "dll"
)

// AddressSpace is an OMPD address space handle: one OpenMP process or
// core file.
type AddressSpace interface {
	// Backend names the implementation: NameNative or NameDLL.
	Backend() string
	// StateTracking reports whether the runtime records thread states,
	// task frames and ids (OMP_DEBUG=enabled).
	StateTracking() bool
	// OMPVersion returns the runtime's _OPENMP value
	// (ompd_get_omp_version).
	OMPVersion() (int, error)
	// OMPVersionString returns the runtime's version text
	// (ompd_get_omp_version_string).
	OMPVersionString() (string, error)
	// CheckThreads reports a fault that would make every thread handle
	// fail (an unreadable thread table), so that it is said once.
	CheckThreads() error
	// ThreadHandle returns the handle of the OpenMP thread with native id
	// id of the given kind (ompd_get_thread_handle). A thread that is not
	// an OpenMP thread gives an error matching ompd.ErrUnavailable.
	ThreadHandle(kind ompd.ThreadIDKind, id uint64) (Thread, error)
	// ICVs lists the ICVs the backend can read (ompd_enumerate_icvs).
	ICVs() ([]ompd.ICV, error)
	// ICV reads one ICV from handle, which is this address space or one
	// of its Thread, Parallel or Task handles, of the ICV's scope
	// (ompd_get_icv_from_scope, ompd_get_icv_string_from_scope).
	ICV(handle any, icv ompd.ICV) (ompd.Value, error)
	// DisplayControlVars returns the runtime's display control variables
	// as NAME=VALUE lines (ompd_get_display_control_vars).
	DisplayControlVars() ([]string, error)
	// QueuedTasks returns the tasks waiting in the runtime's task deques
	// (extension).
	QueuedTasks() ([]Task, error)
	// BlockedTasks returns the explicit tasks that wait for dependences,
	// found from the given tasks (extension).
	BlockedTasks(from []Task) ([]BlockedTask, error)
	// Release releases the address space handle
	// (ompd_rel_address_space_handle); the handles obtained from it must
	// be released first.
	Release() error
}

// ICVBatch is implemented by an AddressSpace that reads several ICVs of
// one handle for less than one at a time: what they read alike (the
// handle's task, its ICV block, its flags) is read once.
type ICVBatch interface {
	// ICVValues reads icvs from handle into vals and errs (each at
	// least len(icvs) long): vals[i] and errs[i] are what ICV(handle,
	// icvs[i]) returns.
	ICVValues(handle any, icvs []ompd.ICV, vals []ompd.Value, errs []error)
}

// ReadICVs reads icvs from handle into vals and errs (each at least
// len(icvs) long), as ICVBatch does: with as's ICVValues when it has one,
// else one ICV at a time.
func ReadICVs(as AddressSpace, handle any, icvs []ompd.ICV, vals []ompd.Value, errs []error) {
	if b, ok := as.(ICVBatch); ok {
		b.ICVValues(handle, icvs, vals, errs)
		return
	}
	for i, icv := range icvs {
		vals[i], errs[i] = as.ICV(handle, icv)
	}
}

// BlockedTask is a task that waits for dependences, with the tasks it
// waits for and the runtime's count of unfinished predecessors. Task and
// Predecessors are new handles, which the caller releases.
type BlockedTask struct {
	Task         Task
	Predecessors []Task
	Pending      int
}

// Handle is what thread, parallel and task handles have in common.
type Handle interface {
	// Label names the runtime object in a report: its address for the
	// native backend; empty when the backend has no such name (the report
	// then numbers the objects).
	Label() string
	// Release releases the handle (ompd_rel_*_handle). Releasing twice is
	// an error.
	Release() error
}

// Thread is an OpenMP thread handle (ompd_thread_handle_t).
type Thread interface {
	Handle
	// Compare orders thread handles; 0 means the same thread
	// (ompd_thread_handle_compare).
	Compare(Thread) int
	// GTID returns the runtime's global thread id (extension).
	GTID() (int, error)
	// ID returns the thread's native id of the given kind
	// (ompd_get_thread_id).
	ID(kind ompd.ThreadIDKind) (uint64, error)
	// ThreadNum returns the thread's number in its team.
	ThreadNum() (int, error)
	// State returns the thread's state and wait id (ompd_get_state).
	State() (ompd.State, uint64, error)
	// CurrentParallel returns the innermost region the thread is in
	// (ompd_get_curr_parallel_handle).
	CurrentParallel() (Parallel, error)
	// CurrentTask returns the task the thread executes
	// (ompd_get_curr_task_handle).
	CurrentTask() (Task, error)
}

// Parallel is a parallel region handle (ompd_parallel_handle_t).
type Parallel interface {
	Handle
	// Compare orders parallel handles; 0 means the same region
	// (ompd_parallel_handle_compare).
	Compare(Parallel) int
	// Enclosing returns the enclosing region
	// (ompd_get_enclosing_parallel_handle).
	Enclosing() (Parallel, error)
	// Level returns the region's nesting level (levels-var).
	Level() (int, error)
	// ActiveLevel returns the number of active regions enclosing and
	// including it (active-levels-var).
	ActiveLevel() (int, error)
	// TeamSize returns the number of threads in its team (team-size-var).
	TeamSize() (int, error)
	// Serialized reports whether the region runs serialized, on the
	// encountering thread alone (extension).
	Serialized() (bool, error)
	// ThreadIn returns thread n of the team
	// (ompd_get_thread_in_parallel).
	ThreadIn(n int) (Thread, error)
	// TaskIn returns the implicit task of thread n
	// (ompd_get_task_in_parallel).
	TaskIn(n int) (Task, error)
	// Function returns the region's outlined function.
	Function() (ompd.Address, error)
	// Location returns the source location of the construct (extension).
	Location() (ompd.Location, error)
}

// Task is a task handle (ompd_task_handle_t).
type Task interface {
	Handle
	// Compare orders task handles; 0 means the same task
	// (ompd_task_handle_compare).
	Compare(Task) int
	// Generating returns the task that created it
	// (ompd_get_generating_task_handle).
	Generating() (Task, error)
	// Scheduling returns the task whose execution it interrupted
	// (ompd_get_scheduling_task_handle).
	Scheduling() (Task, error)
	// Parallel returns the region the task belongs to
	// (ompd_get_task_parallel_handle).
	Parallel() (Parallel, error)
	// Flags returns the task's flags. Known says which of them the
	// backend can tell.
	Flags() (flags ompd.Flags, known FlagSet, err error)
	// Function returns the task's entry point (ompd_get_task_function).
	Function() (ompd.Address, error)
	// Frame returns the task's exit and enter frame addresses
	// (ompd_get_task_frame).
	Frame() (exit, enter ompd.Address, err error)
	// Location returns the source location of the construct (extension).
	Location() (ompd.Location, error)
}

// FlagSet says which task flags a backend knows.
type FlagSet uint

// The task flags a backend may know.
const (
	FlagExplicit FlagSet = 1 << iota
	FlagFinal
	FlagUntied
	FlagUndeferred
	AllFlags = FlagExplicit | FlagFinal | FlagUntied | FlagUndeferred
)

// ErrUnsupported is the error of an operation that the backend does not
// have.
var ErrUnsupported = errors.New("not an operation of the OMPD library")

// Unsupported reports whether err says the backend has no such operation
// at all (as opposed to failing on this target, which a library's
// ompd_rc_unsupported may also mean).
func Unsupported(err error) bool { return errors.Is(err, ErrUnsupported) }
