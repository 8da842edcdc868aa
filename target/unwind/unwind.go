// Package unwind walks the native call stack of an x86-64 thread of a
// stopped target (a live process or a core file).
//
// The walk starts from the thread's registers and finds each caller with,
// in order of preference:
//
//   - the signal frame, when the pc is at the sigreturn trampoline that
//     glibc and musl install as a handler's return address (__restore_rt:
//     mov $15,%rax; syscall): the interrupted registers are read from the
//     ucontext_t on the stack;
//   - the call frame information (.eh_frame, .debug_frame) of the module
//     that maps the pc, executed with delve's DWARF frame package;
//   - the frame-pointer chain (caller pc at [rbp+8], caller rbp at [rbp])
//     for code without call frame information, with a look at the
//     function's first instructions when the pc is exact.
//
// Frames are machine frames: a function inlined into another, or reached
// by a tail call (a jump), has no frame of its own (gdb shows both from
// DWARF; naming inlined calls is left to the caller, with the frame's
// LookupPC).
//
// Every loop is bounded, every address is read through the target's
// ReadMemory, and garbage on the stack ends the walk with a Stop that says
// why; it never panics.
package unwind

import (
	"fmt"
	"slices"
	"sync"

	"github.com/go-delve/delve/pkg/dwarf/regnum"

	"github.com/ompd-inspect/ompd-inspect/target"
)

// DefaultMaxFrames is the frame limit New gives an Unwinder.
const DefaultMaxFrames = 1024

// Method says how a frame's registers were found.
type Method int

const (
	// MethodRegisters: the innermost frame, whose registers are the
	// thread's.
	MethodRegisters Method = iota
	// MethodCFI: the frame is the caller of the previous frame, found by
	// executing the previous frame's call frame information.
	MethodCFI
	// MethodFramePointer: the frame is the caller of the previous frame,
	// found by following the previous frame's frame pointer (rbp), or,
	// when the previous frame's pc was at its function's entry or at a
	// return instruction, by reading the return address at its rsp.
	MethodFramePointer
	// MethodSignal: the frame was interrupted by a signal; its registers
	// come from the ucontext_t that the kernel saved on the stack of the
	// previous frame, a sigreturn trampoline. Its PC is exact.
	MethodSignal
)

func (m Method) String() string {
	switch m {
	case MethodRegisters:
		return "registers"
	case MethodCFI:
		return "cfi"
	case MethodFramePointer:
		return "frame pointer"
	case MethodSignal:
		return "signal frame"
	}
	return fmt.Sprintf("Method(%d)", int(m))
}

// NumRegs is the number of general purpose registers a Frame tracks: the
// DWARF registers 0 to 16 of x86-64 (rax, rdx, rcx, rbx, rsi, rdi, rbp,
// rsp, r8 to r15, and rip as the return address column); see
// github.com/go-delve/delve/pkg/dwarf/regnum.
const NumRegs = regnum.AMD64_Rip + 1

// regSet holds DWARF registers 0..16 and which of them are known.
type regSet struct {
	v     [NumRegs]uint64
	known uint32
}

func (r *regSet) get(n uint64) (uint64, bool) {
	if n >= NumRegs || r.known&(1<<n) == 0 {
		return 0, false
	}
	return r.v[n], true
}

func (r *regSet) set(n uint64, v uint64) {
	if n < NumRegs {
		r.v[n] = v
		r.known |= 1 << n
	}
}

func (r *regSet) forget(n uint64) {
	if n < NumRegs {
		r.v[n] = 0
		r.known &^= 1 << n
	}
}

// fromRegisters converts a thread's registers.
func fromRegisters(g *target.Registers) regSet {
	var r regSet
	for n, v := range [NumRegs]uint64{
		regnum.AMD64_Rax: g.Rax, regnum.AMD64_Rdx: g.Rdx, regnum.AMD64_Rcx: g.Rcx,
		regnum.AMD64_Rbx: g.Rbx, regnum.AMD64_Rsi: g.Rsi, regnum.AMD64_Rdi: g.Rdi,
		regnum.AMD64_Rbp: g.Rbp, regnum.AMD64_Rsp: g.Rsp, regnum.AMD64_R8: g.R8,
		regnum.AMD64_R9: g.R9, regnum.AMD64_R10: g.R10, regnum.AMD64_R11: g.R11,
		regnum.AMD64_R12: g.R12, regnum.AMD64_R13: g.R13, regnum.AMD64_R14: g.R14,
		regnum.AMD64_R15: g.R15, regnum.AMD64_Rip: g.Rip,
	} {
		r.set(uint64(n), v)
	}
	return r
}

// Frame is one frame of a thread's stack.
type Frame struct {
	// PC is the frame's program counter. For the innermost frame and
	// for a frame interrupted by a signal (How is MethodRegisters or
	// MethodSignal) it is the address of the next instruction to run;
	// for the other frames it is the return address, which follows the
	// call instruction (LookupPC corrects for that).
	PC uint64
	// CFA is the frame's canonical frame address: the value rsp had in
	// the caller just before its call instruction, that is the address
	// just above the return address. For a frame with a standard
	// prologue (push %rbp; mov %rsp,%rbp) it is BP+16 once the prologue
	// has run. For a sigreturn trampoline it is the interrupted frame's
	// rsp. 0 when it could not be determined (the walk then stops at
	// this frame).
	CFA uint64
	// SP and BP are the frame's rsp and rbp. For the innermost frame
	// they are the thread's registers; for a caller they are the values
	// at the return address. BP is 0 when unknown (see Reg).
	SP, BP uint64
	// Module is the module that maps LookupPC, nil when none does.
	Module *target.Module
	// How says how this frame was found.
	How Method
	// Trampoline is set for a frame whose pc is in a sigreturn
	// trampoline (__restore_rt); the frame after it is the interrupted
	// one.
	Trampoline bool

	regs regSet
	mem  *memImage // the in-memory image (vDSO) mapping the pc, when no module does
}

// Reg returns the value of DWARF register n (0 to NumRegs-1, numbered as
// in github.com/go-delve/delve/pkg/dwarf/regnum) in this frame, and
// whether it is known. The registers of callers are those the callee's
// unwind rules recover; registers without a rule keep the callee's value,
// as debuggers assume.
func (f *Frame) Reg(n int) (uint64, bool) {
	if n < 0 {
		return 0, false
	}
	return f.regs.get(uint64(n))
}

// ExactPC reports whether PC is the address of the next instruction to
// run (the innermost frame, a frame interrupted by a signal, or a
// sigreturn trampoline, which is entered by a return, not a call) rather
// than a return address.
func (f *Frame) ExactPC() bool {
	return f.How == MethodRegisters || f.How == MethodSignal || f.Trampoline
}

// LookupPC returns the address to look the frame up by (its function, its
// source line, its unwind rules): PC for an exact pc, PC-1 for a return
// address, which may be the first byte of the next function when the call
// was a function's last instruction.
func (f *Frame) LookupPC() uint64 {
	if f.ExactPC() || f.PC == 0 {
		return f.PC
	}
	return f.PC - 1
}

// Function returns the name of the function at LookupPC: from the DWARF of
// the frame's module when it has some, else from its ELF symbols (for the
// vDSO, which is no module, from its dynamic symbols). Call it while the
// target is open: a closed target's images cannot be read.
func (f *Frame) Function() (string, bool) {
	if f.Module == nil && f.mem != nil {
		return f.mem.funcAt(f.LookupPC())
	}
	if f.Module == nil || f.Module.Image == nil {
		return "", false
	}
	return f.Module.Image.FuncAt(f.LookupPC() - f.Module.Bias)
}

// Reason says why a walk ended.
type Reason int

const (
	// ReasonOutermost: the call frame information of the last frame
	// marks its return address undefined (_start, clone3 and the like):
	// the walk is complete.
	ReasonOutermost Reason = iota + 1
	// ReasonPCZero: the last frame's pc is 0 (the innermost frame), or
	// its caller's would be.
	ReasonPCZero
	// ReasonNoModule: the last frame's pc is in no module, so there is
	// no unwind information for it.
	ReasonNoModule
	// ReasonNoUnwindInfo: the last frame's module has no call frame
	// information for its pc and its frame pointer is not usable.
	ReasonNoUnwindInfo
	// ReasonUnreadable: memory needed to find the caller could not be
	// read (Stop.Addr).
	ReasonUnreadable
	// ReasonNoProgress: the caller's stack address would not be above
	// the last frame's (a corrupt stack or a loop).
	ReasonNoProgress
	// ReasonLimit: the Unwinder's MaxFrames was reached.
	ReasonLimit
	// ReasonBadCFI: the call frame information for the last frame's pc
	// could not be executed or evaluated.
	ReasonBadCFI
)

func (r Reason) String() string {
	switch r {
	case ReasonOutermost:
		return "outermost frame"
	case ReasonPCZero:
		return "pc 0"
	case ReasonNoModule:
		return "pc not in any module"
	case ReasonNoUnwindInfo:
		return "no unwind information"
	case ReasonUnreadable:
		return "memory unreadable"
	case ReasonNoProgress:
		return "stack did not grow toward the caller"
	case ReasonLimit:
		return "frame limit reached"
	case ReasonBadCFI:
		return "bad call frame information"
	}
	return fmt.Sprintf("Reason(%d)", int(r))
}

// Stop says why a walk ended after its last frame.
type Stop struct {
	Reason Reason
	// PC is the pc of the last frame (the one whose caller was not
	// found).
	PC uint64
	// Addr is the address that could not be read (ReasonUnreadable), the
	// pc outside every module (ReasonNoModule), or the address that did
	// not increase (ReasonNoProgress); 0 otherwise.
	Addr uint64
	// Detail is a human-readable explanation, without the reason.
	Detail string
	// Err is the underlying error, if any.
	Err error
}

// Complete reports whether the walk reached the outermost frame.
func (s Stop) Complete() bool { return s.Reason == ReasonOutermost }

// String returns a one-line, human-readable reason, for example
// "memory unreadable: reading the return address at 0x7ffd0000fff8".
func (s Stop) String() string {
	msg := s.Reason.String()
	if s.Detail != "" {
		msg += ": " + s.Detail
	}
	if s.Err != nil {
		msg += ": " + s.Err.Error()
	}
	return msg
}

// Unwinder walks the stacks of the threads of one stopped target. It
// caches what it learns about the modules (their call frame information
// is parsed once per image, by target/elf) and about each pc's unwind
// rules, so that walking every thread of a process costs no repeated
// parsing. Its methods may be called from several goroutines at once.
// An Unwinder is valid for one stop of its target: it also caches what
// does not change while the target is stopped (whether the code at a pc is
// a sigreturn trampoline, the vDSO's image), while stack memory is read
// through the target, which caches it per stop.
type Unwinder struct {
	// MaxFrames bounds the number of frames of one walk. New sets it to
	// DefaultMaxFrames; change it before the first walk.
	MaxFrames int

	t    target.Target
	mods []*target.Module

	mu       sync.Mutex
	computed int // rows computed from call frame information (tests)
	rows     map[rowKey]*row
	cies     map[cieKey]*cieInit
	warned   map[string]bool
	warnings []string
	mems     map[uint64]*memImage // in-memory images (the vDSO) by base address
	tramps   map[trampKey]bool

	// scratch holds *[]Frame slices a walk grows its frames in; the
	// frames returned are a copy of the right size.
	scratch sync.Pool
	// spans holds the *[maxSavedSpan]byte buffers readSaved reads into
	// (one on the stack escapes through the target's interface: an
	// allocation for every frame of every thread).
	spans sync.Pool
}

// New returns an Unwinder for target t.
func New(t target.Target) *Unwinder {
	return &Unwinder{
		MaxFrames: DefaultMaxFrames,
		t:         t,
		mods:      t.Modules(),
		rows:      make(map[rowKey]*row),
		cies:      make(map[cieKey]*cieInit),
		warned:    make(map[string]bool),
		mems:      make(map[uint64]*memImage),
		tramps:    make(map[trampKey]bool),
	}
}

// Stack unwinds one thread of t with a new Unwinder; use an Unwinder to
// walk several threads.
func Stack(t target.Target, th target.Thread) ([]Frame, Stop) {
	return New(t).Unwind(th)
}

// Warnings lists problems met with the modules' unwind information (a
// section that could not be parsed), once each.
func (u *Unwinder) Warnings() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.warnings...)
}

func (u *Unwinder) warn(msg string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.warned[msg] {
		u.warned[msg] = true
		u.warnings = append(u.warnings, msg)
	}
}

// moduleAt returns the module mapping addr, or nil.
func (u *Unwinder) moduleAt(addr uint64) *target.Module { return target.ModuleIn(u.mods, addr) }

// Unwind returns the frames of thread th, innermost first, and why the walk
// ended. There is always at least one frame, the thread's registers.
func (u *Unwinder) Unwind(th target.Thread) ([]Frame, Stop) {
	return u.UnwindRegisters(th.Regs)
}

// UnwindRegisters is Unwind for a thread whose registers are regs.
func (u *Unwinder) UnwindRegisters(regs target.Registers) ([]Frame, Stop) {
	scratch, _ := u.scratch.Get().(*[]Frame)
	if scratch == nil {
		scratch = new([]Frame)
	}
	frames, stop := u.walk((*scratch)[:0], regs)
	out := slices.Clone(frames)
	*scratch = frames[:0]
	u.scratch.Put(scratch)
	return out, stop
}

// UnwindAppend is Unwind appending the frames to dst: it returns dst
// with the thread's frames after what it held. A caller that walks many
// threads keeps their frames in a few large arrays this way, where
// Unwind makes an array for each.
func (u *Unwinder) UnwindAppend(dst []Frame, th target.Thread) ([]Frame, Stop) {
	return u.walk(dst, th.Regs)
}

// walk appends to frames those of the thread whose registers are regs.
func (u *Unwinder) walk(frames []Frame, regs target.Registers) ([]Frame, Stop) {
	limit := u.MaxFrames
	if limit <= 0 {
		limit = DefaultMaxFrames
	}
	start := len(frames)
	cur := Frame{How: MethodRegisters, regs: fromRegisters(&regs)}
	for {
		cur.PC, _ = cur.regs.get(regnum.AMD64_Rip)
		cur.SP, _ = cur.regs.get(regnum.AMD64_Rsp)
		cur.BP, _ = cur.regs.get(regnum.AMD64_Rbp)
		cur.Module = u.moduleAt(cur.LookupPC())
		if cur.Module == nil {
			cur.mem = u.memImageAt(cur.LookupPC())
		}
		frames = append(frames, cur)
		f := &frames[len(frames)-1]
		caller, stop, ok := u.step(f)
		if !ok {
			stop.PC = f.PC
			return frames, stop
		}
		if len(frames)-start >= limit {
			return frames, Stop{Reason: ReasonLimit, PC: f.PC, Detail: fmt.Sprintf("%d frames (limit MaxFrames)", limit)}
		}
		cur = caller
	}
}

// step finds the caller of f, filling in f.CFA (and f.Trampoline). It
// returns ok false and why when there is no caller.
func (u *Unwinder) step(f *Frame) (Frame, Stop, bool) {
	if f.PC == 0 {
		return Frame{}, Stop{Reason: ReasonPCZero}, false
	}
	if _, ok := f.regs.get(regnum.AMD64_Rsp); !ok {
		return Frame{}, Stop{Reason: ReasonNoUnwindInfo, Detail: "rsp unknown"}, false
	}
	var (
		caller Frame
		stop   Stop
		ok     bool
	)
	signal := u.isTrampoline(f)
	switch {
	case signal:
		// The trampoline's pc is a handler's return address but no
		// call precedes it: look it up as is.
		f.Trampoline = true
		f.Module, f.mem = u.moduleAt(f.PC), nil
		if f.Module == nil {
			f.mem = u.memImageAt(f.PC)
		}
		caller, stop, ok = u.signalCaller(f)
	case f.Module == nil:
		mi := f.mem
		if mi == nil {
			return Frame{}, Stop{Reason: ReasonNoModule, Addr: f.LookupPC(), Detail: fmt.Sprintf("pc %#x", f.LookupPC())}, false
		}
		caller, stop, ok = u.cfiCaller(f, mi.bias, mi, mi.name)
		if !ok && stop.Reason == 0 {
			caller, stop, ok = u.fpCaller(f)
		}
	default:
		caller, stop, ok = u.cfiCaller(f, f.Module.Bias, f.Module.Image, f.Module.Name)
		if !ok && stop.Reason == 0 {
			caller, stop, ok = u.fpCaller(f)
		}
	}
	if !ok {
		return Frame{}, stop, false
	}
	cpc, csp := caller.regs.v[regnum.AMD64_Rip], caller.regs.v[regnum.AMD64_Rsp]
	if cpc == 0 {
		if signal {
			return Frame{}, Stop{Reason: ReasonPCZero, Detail: "the interrupted pc saved in the signal frame is 0"}, false
		}
		return Frame{}, Stop{Reason: ReasonPCZero, Detail: "the return address is 0"}, false
	}
	// The caller's stack pointer must be above this frame's; as the
	// caller's SP is this frame's CFA, CFAs increase too. A signal may
	// have run its handler on another stack (sigaltstack), so across a
	// trampoline only a frame identical to it is refused.
	if signal && cpc == f.PC && csp == f.SP {
		return Frame{}, Stop{Reason: ReasonNoProgress, Addr: csp,
			Detail: fmt.Sprintf("the signal frame at rsp %#x interrupted itself (corrupt stack)", csp)}, false
	}
	if !signal && csp <= f.SP {
		return Frame{}, Stop{Reason: ReasonNoProgress, Addr: csp,
			Detail: fmt.Sprintf("caller rsp %#x is not above rsp %#x (corrupt stack or a loop)", csp, f.SP)}, false
	}
	return caller, Stop{}, true
}
