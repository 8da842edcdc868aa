package llvm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// icvTable lists the ICVs, in the order and with the scopes of LLVM's own
// OMPD library, so that ids agree between the two. The ompd-* names are
// the aliases that library keeps for OpenMP 5.0.
var icvTable = []ompd.ICV{
	{Name: "dyn-var", Scope: ompd.ScopeThread},
	{Name: "run-sched-var", Scope: ompd.ScopeTask, String: true},
	{Name: "stacksize-var", Scope: ompd.ScopeAddressSpace},
	{Name: "cancel-var", Scope: ompd.ScopeAddressSpace},
	{Name: "max-task-priority-var", Scope: ompd.ScopeAddressSpace},
	{Name: "debug-var", Scope: ompd.ScopeAddressSpace},
	{Name: "nthreads-var", Scope: ompd.ScopeThread},
	{Name: "display-affinity-var", Scope: ompd.ScopeAddressSpace},
	{Name: "affinity-format-var", Scope: ompd.ScopeAddressSpace, String: true},
	{Name: "default-device-var", Scope: ompd.ScopeThread},
	{Name: "tool-var", Scope: ompd.ScopeAddressSpace},
	{Name: "tool-libraries-var", Scope: ompd.ScopeAddressSpace, String: true},
	{Name: "tool-verbose-init-var", Scope: ompd.ScopeAddressSpace, String: true},
	{Name: "levels-var", Scope: ompd.ScopeParallel},
	{Name: "active-levels-var", Scope: ompd.ScopeParallel},
	{Name: "thread-limit-var", Scope: ompd.ScopeTask},
	{Name: "max-active-levels-var", Scope: ompd.ScopeTask},
	{Name: "bind-var", Scope: ompd.ScopeTask},
	{Name: "num-procs-var", Scope: ompd.ScopeAddressSpace},
	{Name: "ompd-num-procs-var", Scope: ompd.ScopeAddressSpace},
	{Name: "thread-num-var", Scope: ompd.ScopeThread},
	{Name: "ompd-thread-num-var", Scope: ompd.ScopeThread},
	{Name: "final-task-var", Scope: ompd.ScopeTask},
	{Name: "ompd-final-var", Scope: ompd.ScopeTask},
	{Name: "ompd-final-task-var", Scope: ompd.ScopeTask},
	{Name: "implicit-task-var", Scope: ompd.ScopeTask},
	{Name: "ompd-implicit-var", Scope: ompd.ScopeTask},
	{Name: "ompd-implicit-task-var", Scope: ompd.ScopeTask},
	{Name: "team-size-var", Scope: ompd.ScopeParallel},
	{Name: "ompd-team-size-var", Scope: ompd.ScopeParallel},
}

// icvOps name the operation of reading each ICV of icvTable, for errors:
// made once, not at each of the tens of thousands of reads of a report.
var icvOps = func() []string {
	ops := make([]string, len(icvTable))
	for i, icv := range icvTable {
		ops[i] = "reading " + icv.Name
	}
	return ops
}()

// EnumerateICVs lists the ICVs (ompd_enumerate_icvs), IDs from 1.
func (as *AddressSpace) EnumerateICVs() []ompd.ICV {
	out := make([]ompd.ICV, len(icvTable))
	for i, icv := range icvTable {
		icv.ID = ompd.ICVID(i + 1)
		out[i] = icv
	}
	return out
}

func lookupICV(id ompd.ICVID) (ompd.ICV, error) {
	if id < 1 || int(id) > len(icvTable) {
		return ompd.ICV{}, fail("ompd_get_icv_from_scope", ompd.RCBadInput, fmt.Errorf("no ICV with id %d", id))
	}
	icv := icvTable[id-1]
	icv.ID = id
	return icv, nil
}

// ICVValue reads ICV id from handle, which must be the handle of the ICV's
// scope: *AddressSpace, *Thread, *Parallel or *Task (ompd_get_icv_from_scope
// and ompd_get_icv_string_from_scope in one).
func (as *AddressSpace) ICVValue(handle any, id ompd.ICVID) (ompd.Value, error) {
	r := icvReader{as: as, handle: handle}
	return r.value(id)
}

// ICVValues reads the ICVs icvs (by their IDs) from handle into vals and
// errs, each what ICVValue would return, reading what several of them
// read alike once: a report reads every ICV of a scope from each handle
// of that scope, ten of them from each of a thousand tasks.
func (as *AddressSpace) ICVValues(handle any, icvs []ompd.ICV, vals []ompd.Value, errs []error) {
	r := icvReader{as: as, handle: handle}
	for i, icv := range icvs {
		vals[i], errs[i] = r.value(icv.ID)
	}
}

// icvReader reads the ICVs of one handle, keeping for the next ICV what
// they read alike: the thread's number, the task's data and ICV block
// (a thread's current task's) and the task's flags.
// Its errors are kept as read and wrapped for each ICV as it fails.
type icvReader struct {
	as     *AddressSpace
	handle any

	numRead bool
	num     int
	numErr  error

	blockRead bool
	td, block ompd.Address // the task's kmp_taskdata_t and its td_icvs
	blockRC   ompd.RC
	blockErr  error

	flagsRead bool
	flags     ompd.Flags
	flagsErr  error
}

// value reads ICV id (ICVValue).
func (r *icvReader) value(id ompd.ICVID) (ompd.Value, error) {
	icv, err := lookupICV(id)
	if err != nil {
		return ompd.Value{}, err
	}
	op := icvOps[id-1]
	num := func(v int64, err error) (ompd.Value, error) {
		if err == nil {
			return ompd.Value{Num: v}, nil
		}
		if e := (*ompd.Error)(nil); errors.As(err, &e) {
			return ompd.Value{}, err // it says what was read already
		}
		return ompd.Value{}, fail(op, ompd.RCError, err)
	}
	str := func(s string, err error) (ompd.Value, error) {
		if err != nil {
			return ompd.Value{}, fail(op, ompd.RCError, err)
		}
		return ompd.Value{Str: s, IsString: true}, nil
	}
	as, m := r.as, r.as.mem
	switch icv.Scope {
	case ompd.ScopeAddressSpace:
		if _, ok := r.handle.(*AddressSpace); !ok {
			return ompd.Value{}, fail(op, ompd.RCBadInput, fmt.Errorf("%s has address_space scope; got %T", icv.Name, r.handle))
		}
		switch icv.Name {
		case "stacksize-var":
			return num(m.globalValue("__kmp_stksize"))
		case "cancel-var":
			return num(m.globalValue("__kmp_omp_cancellation"))
		case "max-task-priority-var":
			return num(m.globalValue("__kmp_max_task_priority"))
		case "debug-var":
			if as.state != 0 {
				return ompd.Value{Num: 1}, nil
			}
			return ompd.Value{Num: 0}, nil
		case "display-affinity-var":
			return num(m.globalValue("__kmp_display_affinity"))
		case "affinity-format-var":
			return str(m.globalString("__kmp_affinity_format"))
		case "tool-var":
			return num(m.globalValue("__kmp_tool"))
		case "tool-libraries-var":
			return str(m.globalString("__kmp_tool_libraries"))
		case "tool-verbose-init-var":
			return str(m.globalString("__kmp_tool_verbose_init"))
		case "num-procs-var", "ompd-num-procs-var":
			return num(m.globalValue("__kmp_avail_proc"))
		}
	case ompd.ScopeThread:
		t, ok := r.handle.(*Thread)
		if !ok {
			return ompd.Value{}, fail(op, ompd.RCBadInput, fmt.Errorf("%s has thread scope; got %T", icv.Name, r.handle))
		}
		switch icv.Name {
		case "thread-num-var", "ompd-thread-num-var":
			if !r.numRead {
				r.numRead = true
				r.num, r.numErr = t.ThreadNum()
			}
			return num(int64(r.num), r.numErr)
		}
		block, rc, err := r.icvBlock()
		if err != nil {
			return ompd.Value{}, fail(op, rc, err)
		}
		switch icv.Name {
		case "dyn-var":
			return num(m.readFieldInt(block, "kmp_internal_control_t", "dynamic"))
		case "default-device-var":
			return num(m.readFieldInt(block, "kmp_internal_control_t", "default_device"))
		case "nthreads-var":
			nproc, err := m.readFieldInt(block, "kmp_internal_control_t", "nproc")
			if err != nil {
				return ompd.Value{}, fail(op, ompd.RCError, err)
			}
			return r.nestedList(op, nproc, "__kmp_nested_nth", "kmp_nested_nthreads_t", "nth")
		}
	case ompd.ScopeParallel:
		p, ok := r.handle.(*Parallel)
		if !ok {
			return ompd.Value{}, fail(op, ompd.RCBadInput, fmt.Errorf("%s has parallel scope; got %T", icv.Name, r.handle))
		}
		switch icv.Name {
		case "levels-var":
			v, err := p.Level()
			return num(int64(v), err)
		case "active-levels-var":
			v, err := p.ActiveLevel()
			return num(int64(v), err)
		case "team-size-var", "ompd-team-size-var":
			v, err := p.TeamSize()
			return num(int64(v), err)
		}
	case ompd.ScopeTask:
		k, ok := r.handle.(*Task)
		if !ok {
			return ompd.Value{}, fail(op, ompd.RCBadInput, fmt.Errorf("%s has task scope; got %T", icv.Name, r.handle))
		}
		switch icv.Name {
		case "final-task-var", "ompd-final-var", "ompd-final-task-var":
			f, err := r.taskFlags(k)
			return num(b2i(f.Final), err)
		case "implicit-task-var", "ompd-implicit-var", "ompd-implicit-task-var":
			f, err := r.taskFlags(k)
			return num(b2i(!f.Explicit), err)
		}
		block, rc, err := r.icvBlock()
		if err != nil {
			return ompd.Value{}, fail(op, rc, err)
		}
		switch icv.Name {
		case "thread-limit-var":
			return num(m.readFieldInt(block, "kmp_internal_control_t", "thread_limit"))
		case "max-active-levels-var":
			return num(m.readFieldInt(block, "kmp_internal_control_t", "max_active_levels"))
		case "run-sched-var":
			return str(as.runSched(block))
		case "bind-var":
			bind, err := m.readFieldInt(block, "kmp_internal_control_t", "proc_bind")
			if err != nil {
				return ompd.Value{}, fail(op, ompd.RCError, err)
			}
			return r.nestedList(op, bind, "__kmp_nested_proc_bind", "kmp_nested_proc_bind_t", "bind_types")
		}
	}
	return ompd.Value{}, fail(op, ompd.RCUnsupported, nil)
}

// icvBlock returns the address of the ICV block (td_icvs) of the task
// whose ICVs the handle has, a thread's current task or the task, read
// once; or the return code and the error to fail with.
func (r *icvReader) icvBlock() (ompd.Address, ompd.RC, error) {
	if !r.blockRead {
		r.blockRead = true
		r.td, r.block, r.blockRC, r.blockErr = r.readBlock()
	}
	return r.block, r.blockRC, r.blockErr
}

// readBlock reads what icvBlock returns: the task's data, its ICV block,
// and what failed.
func (r *icvReader) readBlock() (td, block ompd.Address, rc ompd.RC, err error) {
	m := r.as.mem
	switch h := r.handle.(type) {
	case *Thread:
		if td, err = m.readField(h.th, "kmp_base_info_t", "th_current_task"); err != nil {
			return 0, 0, ompd.RCError, err
		}
		if td == 0 {
			return 0, 0, ompd.RCUnavailable, fmt.Errorf("thread at %#x has no current task", h.th)
		}
	case *Task:
		td = h.td
	}
	if block, err = m.field(td, "kmp_taskdata_t", "td_icvs"); err != nil {
		return 0, 0, ompd.RCError, err
	}
	return td, block, 0, nil
}

// taskFlags returns the flags of task k, read once.
func (r *icvReader) taskFlags(k *Task) (ompd.Flags, error) {
	if !r.flagsRead {
		r.flagsRead = true
		r.flags, r.flagsErr = k.Flags()
	}
	return r.flags, r.flagsErr
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// nestedList completes a list ICV (nthreads-var, bind-var): first, the
// value of the task icvBlock read (r.td, so icvBlock must have
// succeeded), then the runtime's nested list entries for the levels
// below the task's team level. One element gives a number, more give the
// comma-separated list LLVM's library prints.
func (r *icvReader) nestedList(op string, first int64, global, typ, arrField string) (ompd.Value, error) {
	as, m := r.as, r.as.mem
	gaddr, err := as.cb.SymbolAddr(global, m.lay.hint)
	if err != nil {
		return ompd.Value{}, fail(op, ompd.RCError, err)
	}
	used, err := m.readFieldInt(gaddr, typ, "used")
	if err != nil {
		return ompd.Value{}, fail(op, ompd.RCError, err)
	}
	teamPtr, err := m.readField(r.td, "kmp_taskdata_t", "td_team")
	if err != nil {
		return ompd.Value{}, fail(op, ompd.RCError, err)
	}
	var level int64
	if teamPtr != 0 {
		team, err := m.field(teamPtr, "kmp_team_p", "t")
		if err != nil {
			return ompd.Value{}, fail(op, ompd.RCError, err)
		}
		if level, err = m.readFieldInt(team, "kmp_base_team_t", "t_level"); err != nil {
			return ompd.Value{}, fail(op, ompd.RCError, err)
		}
	}
	if level < 0 {
		return ompd.Value{}, fail(op, ompd.RCError, fmt.Errorf("team level %d is negative", level))
	}
	if used <= 0 || level+1 >= used {
		return ompd.Value{Num: first}, nil
	}
	if used > 1024 {
		return ompd.Value{}, fail(op, ompd.RCError, fmt.Errorf("%s.used is %d, more than 1024 levels", global, used))
	}
	arr, err := m.readField(gaddr, typ, arrField)
	if err != nil {
		return ompd.Value{}, fail(op, ompd.RCError, err)
	}
	parts := []string{strconv.FormatInt(first, 10)}
	for l := level + 1; l < used; l++ {
		v, err := m.int(arr+uint64(l)*uint64(as.sizes.Int), uint64(as.sizes.Int))
		if err != nil {
			return ompd.Value{}, fail(op, ompd.RCError, fmt.Errorf("reading %s.%s[%d]: %w", global, arrField, l, err))
		}
		parts = append(parts, strconv.FormatInt(v, 10))
	}
	return ompd.Value{Str: strings.Join(parts, ","), IsString: true}, nil
}

// Schedule kinds of LLVM's runtime (enum sched_type) and its modifier bits.
const (
	schStaticChunked          = 33
	schStatic                 = 34
	schDynamicChunked         = 35
	schGuidedChunked          = 36
	schAuto                   = 38
	schTrapezoidal            = 39
	schStaticGreedy           = 40
	schStaticBalanced         = 41
	schGuidedIterativeChunked = 42
	schGuidedAnalyticalChunk  = 43
	schStaticSteal            = 44
	schModMonotonic           = 1 << 29
	schModNonmonotonic        = 1 << 30
)

// runSched formats run-sched-var as LLVM's library does: an optional
// "monotonic:" or "nonmonotonic:" modifier, the kind, and ",chunk" (0 for
// unchunked static); an unknown kind gives the empty string.
func (as *AddressSpace) runSched(icvs ompd.Address) (string, error) {
	m := as.mem
	sched, err := m.field(icvs, "kmp_internal_control_t", "sched")
	if err != nil {
		return "", err
	}
	kind, err := m.readFieldInt(sched, "kmp_r_sched_t", "r_sched_type")
	if err != nil {
		return "", err
	}
	chunk, err := m.readFieldInt(sched, "kmp_r_sched_t", "chunk")
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if kind&schModMonotonic != 0 {
		b.WriteString("monotonic:")
	} else if kind&schModNonmonotonic != 0 {
		b.WriteString("nonmonotonic:")
	}
	switch kind &^ (schModMonotonic | schModNonmonotonic) {
	case schStatic, schStaticGreedy, schStaticBalanced:
		b.WriteString("static")
		chunk = 0
	case schStaticChunked:
		b.WriteString("static")
	case schDynamicChunked:
		b.WriteString("dynamic")
	case schGuidedChunked, schGuidedIterativeChunked, schGuidedAnalyticalChunk:
		b.WriteString("guided")
	case schAuto:
		b.WriteString("auto")
	case schTrapezoidal:
		b.WriteString("trapezoidal")
	case schStaticSteal:
		b.WriteString("static_steal")
	default:
		return "", nil
	}
	fmt.Fprintf(&b, ",%d", int32(chunk))
	return b.String(), nil
}
