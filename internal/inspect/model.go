package inspect

import "strings"

// Report is everything ompd-inspect knows about one stopped target. Every
// view renders a part of it; --json prints it (or the part) as is. The
// JSON names are the documented schema (docs/json-schema.md).
type Report struct {
	Target      TargetInfo   `json:"target"`
	Runtime     Runtime      `json:"runtime"`
	Threads     []Thread     `json:"threads"`
	Regions     []Region     `json:"regions"`
	Tasks       []Task       `json:"tasks"`
	ICVs        []ICV        `json:"icvs"`
	ControlVars []ControlVar `json:"control_vars"`
	// WaitGraph is who waits for whom: an edge for each thread a waiting
	// thread waits for (a lock's holder, a barrier's stragglers, the
	// threads running a taskwait's children); filled by internal/waits.
	WaitGraph []WaitEdge `json:"wait_graph"`
	// Diagnosis says what the wait graph proves: deadlocks, barriers
	// that cannot complete, lock holders that are themselves blocked;
	// filled by internal/waits, most severe first.
	Diagnosis []Diagnosis `json:"diagnosis"`
	// Backtraces holds each thread's OpenMP-aware stack; filled by
	// internal/stacks, only for the views that show stacks.
	Backtraces []Backtrace `json:"backtraces,omitempty"`
	Warnings   []string    `json:"warnings"`
}

// TargetInfo says what was inspected.
type TargetInfo struct {
	Kind       string `json:"kind"` // "process" or "core"
	PID        int    `json:"pid"`
	Executable string `json:"executable"`
	Core       string `json:"core,omitempty"`
	// Crash is the thread whose fatal signal wrote the core, when the
	// core says so; absent otherwise.
	Crash *Crash `json:"crash,omitempty"`
}

// Crash is the fatal signal that made the kernel write a core, and the
// thread that received it.
type Crash struct {
	OSTID  int    `json:"os_tid"`
	Signal string `json:"signal"` // e.g. "SIGSEGV"
	Number int    `json:"number"`
}

// Runtime describes the OpenMP runtime found in the target.
type Runtime struct {
	Library          string   `json:"library"`
	Version          string   `json:"version"`
	OpenMPVersion    int      `json:"openmp_version"`
	OMPDDLLLocations []string `json:"ompd_dll_locations"`
	// LayoutSource and SymbolsSource say where the OMPD layout values and
	// the runtime's symbols come from: its own layout symbols
	// ("ompd-symbols") and symbol table ("runtime-symbols"), a separate
	// debug file ("debug-file", DebugFile), or its code
	// ("recovered-from-code").
	LayoutSource  string `json:"layout_source"`
	SymbolsSource string `json:"symbols_source"`
	DebugFile     string `json:"debug_file,omitempty"`
	// Release names the runtime's build when ompd-inspect knows it by its
	// build-id (a distribution's package), else "".
	Release string `json:"release,omitempty"`
	// TypeInfo says where the layouts OMPD does not cover (construct
	// locations, task deques) come from: "dwarf" (the runtime's debug
	// information), "release-table" (the table of a known stripped
	// release), or empty.
	TypeInfo      string `json:"type_info"`
	StateTracking bool   `json:"state_tracking"`
	// StateSource says where threads[].state comes from: "runtime" (the
	// runtime's OMPT state tracking), "inferred" (the runtime records
	// none: each thread's state is derived from its stack and the futex
	// it sleeps on), or "" when there are no states.
	StateSource string `json:"state_source"`
	// Family names the runtime's family: "llvm" (LLVM's libomp) or "gnu"
	// (GNU libgomp).
	Family string `json:"family"`
	// NeedsStateTracking names the report fields left empty because the
	// program runs without state tracking, and Hint says how to turn it on.
	NeedsStateTracking []string `json:"needs_state_tracking"`
	Hint               string   `json:"hint,omitempty"`
	// Backend is the OMPD implementation the report comes from: "native",
	// or "dll" for the runtime's own OMPD library.
	Backend string `json:"backend"`
	// OMPDLibrary is the library the dll backend loaded, with its version
	// string; nil for the native backend.
	OMPDLibrary *OMPDLibrary `json:"ompd_library,omitempty"`
	// Unavailable names the report fields the backend cannot fill: no
	// OMPD call gives them. Empty for the native backend.
	Unavailable []string `json:"unavailable"`
}

// OMPDLibrary is the OMPD library the dll backend hosts.
type OMPDLibrary struct {
	Path    string `json:"path"`
	Version string `json:"version"`
	// Messages holds what the library printed (its print_string
	// callback) while the report was built.
	Messages []string `json:"messages"`
}

// Thread is one OS thread of the target.
type Thread struct {
	OSTID int `json:"os_tid"`
	// GTID is the runtime's global thread id: null for a thread that is
	// not an OpenMP thread, and for every thread when the backend cannot
	// tell gtids (the dll backend: no OMPD call gives one).
	GTID *int `json:"gtid"`
	// OpenMP is true for an OpenMP thread: one the runtime knows, to
	// which the backend gave an OMPD thread handle.
	OpenMP    bool    `json:"openmp"`
	ThreadNum *int    `json:"thread_num"` // number in the current team
	State     *string `json:"state"`      // OpenMP state name; null without state tracking
	WaitID    *uint64 `json:"wait_id"`
	// Futex is the futex address the thread sleeps on, when its state is
	// inferred (runtime.state_source "inferred") and it is in a futex
	// wait.
	Futex *string `json:"futex,omitempty"`
	// Idle says why the thread is an idle pool worker between regions
	// (its stale team state is not a region), when the runtime keeps such
	// state (libgomp).
	Idle   *string `json:"idle,omitempty"`
	Region *string `json:"region"` // id of the innermost parallel region (level >= 1)
	Task   *string `json:"task"`   // id of the current task
	// TaskStack lists the tasks the thread is in the middle of, innermost
	// first: its current task, the tasks it was running when it started
	// each of them (OMPD's scheduling task), down to its implicit task.
	TaskStack []string `json:"task_stack"`
	// Location is where the thread's current task comes from: the task
	// construct of an explicit task, or the parallel construct.
	Location string `json:"location,omitempty"`
	Function string `json:"function,omitempty"`
	// UserFrame is the innermost frame of the thread's stack in user
	// code, when its stack was unwound.
	UserFrame *FrameRef `json:"user_frame,omitempty"`
	// BlockedOn says what the thread waits for, when it waits; nil
	// otherwise.
	BlockedOn *BlockedOn `json:"blocked_on,omitempty"`
}

// BlockedOn is what one thread waits for.
type BlockedOn struct {
	// What is "lock", "nest_lock", "critical", "atomic", "ordered",
	// "barrier", "taskwait", "taskgroup" or "idle" (ompd.WaitKind).
	What string `json:"what"`
	// Object is the address that identifies it ("0x…"): the user's lock,
	// the critical section's lock, the team (region id) of a barrier,
	// the waiting task of a taskwait; "" when unknown.
	Object string `json:"object,omitempty"`
	// Name is the object's name (a named critical section), if any.
	Name string `json:"name,omitempty"`
	// Location is where in user code the thread asked for it: its
	// innermost user frame, "file:line".
	Location string `json:"location,omitempty"`
	// Holder is the os_tid of the thread that holds the lock or critical
	// section, null when it is not known (HolderUnknown says why) or the
	// object has no holder (a barrier, a taskwait).
	Holder        *int   `json:"holder"`
	HolderUnknown string `json:"holder_unknown,omitempty"`
	// WaitingFor are the threads it waits for: the holder; a barrier's
	// team members that have not arrived; the threads running a
	// taskwait's children. QueuedChildren counts a taskwait's children
	// that no thread runs yet.
	WaitingFor     []WaitTarget `json:"waiting_for"`
	QueuedChildren int          `json:"queued_children,omitempty"`
	// Source says where the facts come from: "runtime" (the runtime's
	// objects or OMPT wait id), "state" (the thread's state only) or
	// "stack" (what its stack shows).
	Source string `json:"source"`
}

// WaitTarget is a thread another thread waits for, and where it is.
type WaitTarget struct {
	OSTID int `json:"os_tid"`
	// Location is its innermost user frame ("file:line"), Doing its state
	// or what it waits for itself.
	Location string `json:"location,omitempty"`
	Doing    string `json:"doing"`
}

// WaitEdge is one edge of the wait graph: thread From waits for thread
// To, because of What (the object's kind) at Object.
type WaitEdge struct {
	From   int    `json:"from"`
	To     int    `json:"to"`
	What   string `json:"what"`
	Object string `json:"object,omitempty"`
}

// Diagnosis is one conclusion drawn from the wait graph.
type Diagnosis struct {
	// Kind is "deadlock" (a cycle of threads each waiting for the next),
	// "barrier_blocked" (a barrier a member cannot reach: it waits for
	// something else), "holder_blocked" (a lock or critical section held
	// by a thread that waits itself), "lock_held_at_barrier" (a thread
	// holds a lock while it waits at a barrier), or "holder_unknown"
	// (threads wait for objects whose holder the runtime does not record).
	Kind string `json:"kind"`
	// Threads are the threads involved, Objects the objects ("0x…").
	Threads []int    `json:"threads"`
	Objects []string `json:"objects"`
	// Text says it in one sentence, with the locations.
	Text string `json:"text"`
}

// FrameRef names a source position: a function and its file and line.
type FrameRef struct {
	Function string `json:"function"`
	File     string `json:"file"`
	Line     int    `json:"line"`
}

// Backtrace is one thread's stack, OpenMP-aware: its frames, markers where
// parallel regions and tasks begin, and the frames of the threads that
// encountered its regions.
type Backtrace struct {
	OSTID int `json:"os_tid"`
	// GTID and OpenMP are the thread's (Thread.GTID, Thread.OpenMP).
	GTID   *int `json:"gtid"`
	OpenMP bool `json:"openmp"`
	// State is the OMPD state (null without state tracking); Activity is
	// what the stack itself shows the thread doing.
	State    *string `json:"state"`
	Activity string  `json:"activity"`
	Frames   []Frame `json:"frames"`
	// Stop says why unwinding of the thread's own stack ended; Complete
	// is true when it reached the outermost frame.
	Stop     string `json:"stop"`
	Complete bool   `json:"complete"`
}

// Frame kinds.
const (
	KindUser         = "user"
	KindRuntime      = "runtime"
	KindSystem       = "system"
	KindRegionMarker = "region-marker"
	KindTaskMarker   = "task-marker"
	KindHop          = "hop"
)

// Frame is one entry of a backtrace: a native frame (user, runtime or
// system code), a marker where a parallel region or task begins, or a hop
// to the stack of the thread that encountered the region.
type Frame struct {
	Kind string `json:"kind"`
	// Thread is the os_tid whose stack holds the frame (after a hop, the
	// encountering thread's).
	Thread   int     `json:"thread"`
	PC       *string `json:"pc"`
	Function string  `json:"function,omitempty"`
	// UserFunction is, for a compiler-outlined function (a parallel
	// region's or a task's body), the user function that contains the
	// construct.
	UserFunction string `json:"user_function,omitempty"`
	File         string `json:"file,omitempty"`
	Line         int    `json:"line,omitempty"`
	Inlined      bool   `json:"inlined,omitempty"`
	// TailCall is set for a function that called the frame before it by
	// a tail call (a jump), so that no frame of its own is on the stack:
	// rebuilt from the DWARF call-site information between a frame and
	// its caller, as gdb shows it; PC is the address after its jump.
	TailCall bool `json:"tail_call,omitempty"`
	// Region and Task identify the construct of a marker; Text is the
	// marker's or hop's description.
	Region *string `json:"region,omitempty"`
	Task   *string `json:"task,omitempty"`
	Text   string  `json:"text,omitempty"`
	// Boundary says how a marker was placed: "ompd-frame" (the OMPD task
	// frame matched the runtime frame that called the construct's code)
	// or "entry-point" (the construct's function called by the runtime).
	Boundary string `json:"boundary,omitempty"`
}

// Region is one parallel region (a team, or a serialized region).
type Region struct {
	ID          string  `json:"id"`
	Parent      *string `json:"parent"`
	Level       int     `json:"level"` // 1 for the outermost parallel region
	ActiveLevel int     `json:"active_level"`
	TeamSize    int     `json:"team_size"`
	Serialized  bool    `json:"serialized"`
	Function    string  `json:"function"`
	EntryAddr   string  `json:"entry_addr"`
	Location    string  `json:"location"`
	// ConstructFunction is the user function that contains the parallel
	// construct, as the compiler recorded it; "" when unknown.
	ConstructFunction string `json:"construct_function"`
	Threads           []int  `json:"threads"` // os_tids, in thread-number order
}

// Task is one task: the current task of a thread, an ancestor of one, or
// an explicit task still queued.
type Task struct {
	ID       string `json:"id"`
	Kind     string `json:"kind"` // "implicit" or "explicit"
	Function string `json:"function"`
	Location string `json:"location"`
	// ConstructFunction is the user function that contains the task
	// construct (for an implicit task, the parallel construct), as the
	// compiler recorded it; "" when unknown.
	ConstructFunction string  `json:"construct_function"`
	Parent            *string `json:"parent"`
	// Taskgroup is the taskgroup the task belongs to (its address), when
	// the runtime records one (libgomp).
	Taskgroup *string `json:"taskgroup,omitempty"`
	Region    *string `json:"region"`
	Thread    *int    `json:"thread"` // os_tid running it; null when queued or suspended
	// Status is "running", "suspended", "queued" (in a task deque, ready
	// to start) or "blocked" (created, waiting for the tasks it depends on).
	Status string `json:"status"`
	// EntryAddr is the address of the code the task runs (explicit: the
	// compiler's task entry; implicit: the region's outlined function).
	EntryAddr string   `json:"entry_addr"`
	Flags     []string `json:"flags"` // final, untied, undeferred
	// WaitsFor lists, for a blocked task, the ids of the unfinished tasks
	// it depends on that were found; omitted for other tasks.
	WaitsFor []string `json:"waits_for,omitempty"`
	// PendingDependences is, for a blocked task, the runtime's count of
	// predecessors that have not finished; omitted for other tasks.
	PendingDependences *int `json:"pending_dependences,omitempty"`
	// Frames are the OMPT exit/enter frame addresses; null without state
	// tracking.
	ExitFrame  *string `json:"exit_frame"`
	EnterFrame *string `json:"enter_frame"`
}

// ICV is one internal control variable's value at one scope.
type ICV struct {
	Name  string `json:"name"`
	Scope string `json:"scope"`
	// Owner is the os_tid (thread scope), region id (parallel) or task id
	// (task); null at address_space scope.
	Owner any `json:"owner"`
	// Value is a number, or a string for string ICVs and list ICVs with
	// more than one element.
	Value any `json:"value"`
}

// ControlVar is one of the runtime's display control variables.
type ControlVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// ThreadICVs returns the ICVs that apply to the OS thread tid: the address
// space's, the thread's own, its innermost region's and its current
// task's. ok is false when tid is not a thread of the report.
func (r *Report) ThreadICVs(tid int) (icvs []ICV, ok bool) {
	var th *Thread
	for i := range r.Threads {
		if r.Threads[i].OSTID == tid {
			th = &r.Threads[i]
		}
	}
	if th == nil {
		return nil, false
	}
	icvs = []ICV{}
	for _, v := range r.ICVs {
		switch v.Scope {
		case "address_space":
			icvs = append(icvs, v)
		case "thread":
			if v.Owner == tid {
				icvs = append(icvs, v)
			}
		case "parallel":
			if th.Region != nil && v.Owner == *th.Region {
				icvs = append(icvs, v)
			}
		case "task":
			if th.Task != nil && v.Owner == *th.Task {
				icvs = append(icvs, v)
			}
		}
	}
	return icvs, true
}

// NeedsStacks reports whether part of the report comes from the threads'
// stacks (stacks.Add) in every view: states inferred from them, or
// libgomp regions, whose outlined function the runtime does not record.
func (r *Report) NeedsStacks() bool {
	if r.Runtime.StateSource == "inferred" {
		return true
	}
	for _, t := range r.Threads {
		if t.BlockedOn != nil || (t.State != nil && strings.HasPrefix(*t.State, "wait_")) {
			return true // where it waits is its innermost user frame
		}
	}
	for _, reg := range r.Regions {
		if r.Runtime.Family == "gnu" && reg.Function == "" && reg.EntryAddr == "" {
			return true
		}
	}
	return false
}
