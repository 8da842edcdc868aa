// Package trace follows a running OpenMP program through the runtime's
// OMPD breakpoint locations (ompd_bp_parallel_begin, ompd_bp_task_end,
// ...): at each one the OMPD layer describes the event (thread, region or
// task), the thread returns from the location and runs on. It also gathers
// the per-construct summary and stops the program at a chosen event for a
// full report.
//
// The process side (breakpoints, threads, forks, execs, signals) is
// target/ptrace's Tracee; the OpenMP side is package ompd; this package
// ties them together and renders nothing (see internal/render).
package trace

// Event kinds, as printed and in JSON.
const (
	KindRuntimeReady  = "runtime-ready" // ompd_dll_locations_valid
	KindParallelBegin = "parallel-begin"
	KindParallelEnd   = "parallel-end"
	KindTaskBegin     = "task-begin"
	KindTaskEnd       = "task-end"
	KindThreadBegin   = "thread-begin"
	KindThreadEnd     = "thread-end"
	KindDeviceBegin   = "device-begin"
	KindDeviceEnd     = "device-end"
)

// Event classes, as --events takes them.
const (
	ClassRuntime  = "runtime"
	ClassParallel = "parallel"
	ClassTask     = "task"
	ClassThread   = "thread"
	ClassDevice   = "device"
)

// Classes lists the event classes --events accepts.
var Classes = []string{ClassParallel, ClassTask, ClassThread, ClassDevice, ClassRuntime}

// Event is one pass of a thread through an OMPD breakpoint location. The
// JSON names are the documented schema (docs/json-schema.md).
type Event struct {
	// Time is the number of seconds since the trace began.
	Time  float64 `json:"time"`
	Kind  string  `json:"event"`
	OSTID int     `json:"os_tid"`
	// GTID is the runtime's global thread id; null when the thread is not
	// (yet) an OpenMP thread.
	GTID   *int    `json:"gtid"`
	Region *Region `json:"region,omitempty"`
	Task   *Task   `json:"task,omitempty"`
	// Duration is, for an end event, the seconds since the matching begin
	// event; null when the begin was not seen.
	Duration *float64 `json:"duration,omitempty"`
	// Warnings say what OMPD could not tell about the event.
	Warnings []string `json:"warnings,omitempty"`
}

// Region describes the parallel region of a parallel-begin or -end event.
type Region struct {
	// ID is the address of the runtime's team (or serialized-team record).
	ID       string `json:"id"`
	Function string `json:"function"`
	Location string `json:"location"`
	// TeamSize is the number of threads in the team (team-size-var).
	TeamSize int `json:"team_size"`
	// Requested is the number of threads the region asked for without a
	// num_threads clause: the first element of the encountering thread's
	// nthreads-var. Null when unknown.
	Requested *int `json:"requested_team_size"`
	Level     int  `json:"level"`
	// Serialized is true for a region the encountering thread runs alone.
	Serialized bool `json:"serialized"`
	// Parent is the id of the enclosing region, empty at level 1.
	Parent string `json:"parent,omitempty"`
	// Threads lists the gtids of the team (at parallel-end).
	Threads []int `json:"threads,omitempty"`
}

// Task describes the task of a task-begin or -end event.
type Task struct {
	// ID is the address of the runtime's task descriptor.
	ID       string `json:"id"`
	Function string `json:"function"`
	Location string `json:"location"`
	// Parent is the task that created it.
	Parent string   `json:"parent,omitempty"`
	Region string   `json:"region,omitempty"`
	Flags  []string `json:"flags"`
}

// SummaryRow sums up the events of one construct: one source location of
// a parallel region or a task.
type SummaryRow struct {
	Class    string `json:"class"` // "parallel" or "task"
	Location string `json:"location"`
	Function string `json:"function"`
	// Count is the number of begin events; Ended the number of end events
	// matched to one.
	Count int `json:"count"`
	Ended int `json:"ended"`
	// TeamTotal sums the team sizes of the regions (parallel only);
	// TeamMean is TeamTotal / Count.
	TeamTotal int     `json:"team_total"`
	TeamMean  float64 `json:"team_mean"`
	// Threads is the number of distinct OpenMP threads (gtids) seen in
	// the regions' teams, or running the tasks.
	Threads int `json:"threads"`
	// TimeTotal and TimeMean are the seconds between matched begin and end
	// events.
	TimeTotal float64 `json:"time_total"`
	TimeMean  float64 `json:"time_mean"`
}

// Summary is what --summary prints when the program ends.
type Summary struct {
	Rows []SummaryRow `json:"constructs"`
	// Events counts every event seen, by kind (also those not printed).
	Events map[string]int `json:"events"`
	// Threads counts the OS threads that passed any location.
	Threads int `json:"threads"`
	// Ignored counts task-end passes that end no task (LLVM's runtime
	// passes ompd_bp_task_end after a barrier's task loop too).
	Ignored  int      `json:"ignored_task_ends"`
	Warnings []string `json:"warnings"`
}

// Exit is how the traced program ended.
type Exit struct {
	// Code is the exit status, or 128 + the signal that killed it.
	Code   int `json:"code"`
	Signal int `json:"signal,omitempty"`
	// Detached is true when ompd-inspect let the program run on (--then
	// detach, or an interrupt); Code is then 0.
	Detached bool `json:"detached,omitempty"`
	Killed   bool `json:"killed,omitempty"`
	// Interrupted is true when the trace ended because Interrupt was
	// called on the Tracee (a signal to ompd-inspect).
	Interrupted bool `json:"interrupted,omitempty"`
}
