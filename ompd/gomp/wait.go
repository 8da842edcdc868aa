package gomp

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/ompd-inspect/ompd-inspect/ompd"
	"golang.org/x/arch/x86/x86asm"
)

// Registers are the registers of a stopped thread that tell a futex wait.
type Registers struct {
	Rip, Rax, OrigRax, Rdi, FSBase uint64
	// Rsp is the stack pointer: BlockedOn reads the return address of
	// libgomp's mutex wait from the stack to tell a nest lock and a
	// user's lock from libgomp's internal mutexes. 0 when not given:
	// those waits are then left to the stack.
	Rsp uint64
}

// RegisterReader is an optional extension of ompd.Callbacks: the registers
// of a thread context (from Callbacks.ThreadContext). Without it threads
// waiting in the kernel are not classified (WaitOf fails) and idle pool
// workers are told only by their team state.
type RegisterReader interface {
	ThreadRegisters(ctx ompd.ThreadContext) (Registers, error)
}

// WaitKind is what a thread asleep in a futex wait waits for.
type WaitKind string

// The waits told by the futex address.
const (
	WaitNone    WaitKind = ""             // not in a futex wait
	WaitBarrier WaitKind = "team barrier" // its team's barrier generation
	WaitDock    WaitKind = "pool dock"    // idle in the thread pool
	WaitOther   WaitKind = "other futex"  // a lock, a critical section, a taskwait ...
)

// Wait is a thread's futex wait. Inferred from registers, not recorded by
// libgomp.
type Wait struct {
	Kind  WaitKind
	Futex uint64
}

const sysFutex = 202

// WaitOf classifies the futex wait of the thread whose thread pointer is
// tp: asleep in futex(2) (orig_rax 202, rip after a syscall instruction)
// on its team's barrier generation, on its pool's dock, or elsewhere.
func (as *AddressSpace) WaitOf(tp uint64) (Wait, error) {
	w, _, err := as.waitRegs(tp)
	return w, err
}

// waitRegs is WaitOf with the registers it read.
func (as *AddressSpace) waitRegs(tp uint64) (Wait, Registers, error) {
	rr, ok := as.cb.(RegisterReader)
	if !ok {
		return Wait{}, Registers{}, fmt.Errorf("the callbacks give no registers")
	}
	ctx, err := as.cb.ThreadContext(ompd.ThreadIDPthread, tp)
	if err != nil {
		return Wait{}, Registers{}, err
	}
	r, err := rr.ThreadRegisters(ctx)
	if err != nil {
		return Wait{}, Registers{}, err
	}
	w := as.classify(tp, r)
	return w, r, nil
}

// classify tells the futex wait of the thread tp from its registers.
func (as *AddressSpace) classify(tp uint64, r Registers) Wait {
	if r.OrigRax != sysFutex || r.Rip < 2 {
		return Wait{}
	}
	var insn [2]byte
	if err := as.m.read(r.Rip-2, insn[:]); err != nil || insn != [2]byte{0x0f, 0x05} {
		return Wait{}
	}
	w := Wait{Kind: WaitOther, Futex: r.Rdi}
	thr := as.ThreadAddr(tp)
	gen, _ := as.Layout.Get("gomp_barrier_t_probe.b.generation")
	if pool, err := as.field(thr, "gomp_thread.thread_pool"); err == nil && pool != 0 {
		if dock, ok := as.Layout.Get("gomp_thread_pool.threads_dock"); ok && r.Rdi == pool+uint64(dock+gen) {
			w.Kind = WaitDock
			return w
		}
	}
	ts, _ := as.Layout.Get("gomp_thread.ts")
	if team, err := as.field(thr+uint64(ts), "gomp_team_state.team"); err == nil && team != 0 {
		if bar, ok := as.Layout.Get("gomp_team.barrier"); ok && r.Rdi == team+uint64(bar+gen) {
			w.Kind = WaitBarrier
		}
	}
	return w
}

// ThreadLister is an optional extension of ompd.Callbacks: the thread
// pointers of all the target's threads. BlockedOn needs it to find the
// thread that holds a nest lock (the lock records a task, not a thread).
type ThreadLister interface {
	ThreadPointers() []uint64
}

// SymbolNamer is an optional extension of ompd.Callbacks: the name of the
// ELF symbol (function or data object, of any module; without a version
// suffix) whose range [value, value+size) holds addr. BlockedOn names a
// named critical section by its lock's symbol (.gomp_critical_user_NAME)
// and tells a nest lock's wait by the function that waits
// (omp_set_nest_lock).
type SymbolNamer interface {
	SymbolAt(addr uint64) (name string, ok bool)
}

// Why a holder is not known.
const (
	noOwnerLock     = "libgomp's simple locks record no owner"
	noOwnerCritical = "libgomp's critical sections record no owner"
	noOwnerAtomic   = "libgomp's atomic lock records no owner"
)

// criticalPrefix starts the name of the symbol that holds a named critical
// section's lock: the compiler's common symbol .gomp_critical_user_NAME,
// whose pointer-sized storage is the mutex itself (critical.c: a
// gomp_mutex_t fits in a pointer).
const criticalPrefix = ".gomp_critical_user_"

// BlockedOn says what thread t waits for, from the futex it sleeps on (see
// WaitOf): its team's barrier, its pool's dock (idle), libgomp's mutex of
// the unnamed critical section or of atomic constructs, a named critical
// section's lock (with a SymbolNamer), its task's taskwait or taskgroup
// semaphore, its ordered semaphore, a user's omp_lock_t or
// omp_nest_lock_t (told by where libgomp's mutex wait returns to: needs
// Registers.Rsp, and a SymbolNamer for nest locks). nil when the thread is
// not asleep in a futex wait, or sleeps on a futex these do not explain
// (the stack tells then).
func (as *AddressSpace) BlockedOn(t *Thread) (*ompd.Wait, error) {
	w, r, err := as.waitRegs(t.TP)
	if err != nil {
		return nil, err
	}
	f := w.Futex
	switch w.Kind {
	case WaitNone:
		return nil, nil
	case WaitDock:
		return &ompd.Wait{What: ompd.WaitIdle}, nil
	case WaitBarrier:
		bar, _ := as.Layout.Get("gomp_team.barrier")
		gen, _ := as.Layout.Get("gomp_barrier_t_probe.b.generation")
		team := f - uint64(bar+gen)
		return &ompd.Wait{What: ompd.WaitBarrier, Object: team, Team: team}, nil
	}
	switch {
	case f == as.CriticalLock && f != 0:
		return &ompd.Wait{What: ompd.WaitCritical, Object: f, HolderUnknown: noOwnerCritical}, nil
	case f == as.AtomicLock && f != 0:
		return &ompd.Wait{What: ompd.WaitAtomic, Object: f, HolderUnknown: noOwnerAtomic}, nil
	}
	if !t.Idle {
		if w := as.taskWait(t, f); w != nil {
			return w, nil
		}
	}
	depth, mutex := as.mutexSites[r.Rip-2]
	if !mutex {
		return nil, nil
	}
	if sn, ok := as.cb.(SymbolNamer); ok {
		if name, ok := sn.SymbolAt(f); ok && strings.HasPrefix(name, criticalPrefix) {
			return &ompd.Wait{What: ompd.WaitCritical, Object: f, Name: strings.TrimPrefix(name, criticalPrefix),
				HolderUnknown: noOwnerCritical}, nil
		}
	}
	// A user's lock: omp_set_lock jumps to the mutex wait, which returns
	// to the user's code; omp_set_nest_lock calls it. libgomp's own
	// mutexes are waited for from libgomp's code.
	if r.Rsp == 0 || depth < 0 || as.imageEnd == 0 {
		return nil, nil
	}
	ret, err := as.m.u64(r.Rsp + uint64(depth))
	if err != nil {
		return nil, fmt.Errorf("the return address of libgomp's mutex wait at %#x: %w", r.Rsp+uint64(depth), err)
	}
	if ret < as.Image.Base || ret >= as.imageEnd {
		return &ompd.Wait{What: ompd.WaitLock, Object: f, HolderUnknown: noOwnerLock}, nil
	}
	sn, ok := as.cb.(SymbolNamer)
	if !ok {
		return nil, nil
	}
	if name, ok := sn.SymbolAt(ret); !ok || (name != "omp_set_nest_lock" && name != "omp_set_nest_lock_") {
		return nil, nil
	}
	off, err := as.Layout.off("omp_nest_lock_t.lock")
	if err != nil || f < off {
		return nil, err
	}
	lock := f - off
	nw := &ompd.Wait{What: ompd.WaitNestLock, Object: lock}
	nw.Holder, nw.HolderUnknown = as.nestLockHolder(lock)
	return nw, nil
}

// taskWait tells a wait on one of t's own semaphores: its current task's
// taskwait (GOMP_taskwait sleeps on task->taskwait->taskwait_sem), its
// current taskgroup's (GOMP_taskgroup_end: task->taskgroup->taskgroup_sem),
// its ordered semaphore (GOMP_ordered_start: team->ordered_release[its
// number]).
func (as *AddressSpace) taskWait(t *Thread, f uint64) *ompd.Wait {
	if t.Task != 0 {
		if tw, err := as.field(t.Task, "gomp_task.taskwait"); err == nil && tw != 0 {
			if off, err := as.Layout.off("gomp_taskwait.taskwait_sem"); err == nil && f == tw+off {
				return &ompd.Wait{What: ompd.WaitTaskwait, Object: t.Task}
			}
		}
		if tg, err := as.field(t.Task, "gomp_task.taskgroup"); err == nil && tg != 0 {
			if off, err := as.Layout.off("gomp_taskgroup.taskgroup_sem"); err == nil && f == tg+off {
				return &ompd.Wait{What: ompd.WaitTaskgroup, Object: tg}
			}
		}
	}
	if t.Team != 0 && t.TeamID >= 0 && t.TeamID < MaxThreads {
		rel, err := as.field(t.Team, "gomp_team.ordered_release")
		if err != nil || rel == 0 {
			return nil
		}
		if sem, err := as.m.u64(rel + uint64(t.TeamID)*8); err == nil && sem == f {
			ts, _ := as.Layout.Get("gomp_thread.ts")
			ws, _ := as.field(t.Addr+uint64(ts), "gomp_team_state.work_share")
			return &ompd.Wait{What: ompd.WaitOrdered, Object: ws}
		}
	}
	return nil
}

// nestLockHolder finds the thread that holds the nest lock at lock. The
// lock records its owner as the ICVs of the task that acquired it
// (gomp_icv(true): &task->icv), so the holder is the thread that runs that
// task: its current task, the tasks it runs undeferred tasks for (their
// parents, up to the first deferred one), or its implicit tasks (its own,
// and, as thread 0 of its team, the encountering thread's in the
// enclosing team, and so on up).
func (as *AddressSpace) nestLockHolder(lock uint64) (uint64, string) {
	owner, err := as.field(lock, "omp_nest_lock_t.owner")
	if err != nil {
		return 0, fmt.Sprintf("the nest lock's owner cannot be read: %v", err)
	}
	if owner == 0 {
		return 0, "the nest lock records no owner (it is being acquired or released)"
	}
	icv, err := as.Layout.off("gomp_task.icv")
	if err != nil {
		return 0, err.Error()
	}
	if owner < icv {
		return 0, fmt.Sprintf("the owner the nest lock records (%#x) is no task's ICVs", owner)
	}
	task := owner - icv
	tl, ok := as.cb.(ThreadLister)
	if !ok {
		return 0, fmt.Sprintf("the owner the nest lock records (the ICVs of task %#x) cannot be matched: the callbacks list no threads", task)
	}
	var holders []uint64
	for _, tp := range tl.ThreadPointers() {
		t, err := as.Thread(tp)
		if err != nil || t.Idle {
			continue
		}
		if as.runs(t, task) {
			holders = append(holders, tp)
		}
	}
	switch len(holders) {
	case 0:
		return 0, fmt.Sprintf("the owner the nest lock records (the ICVs of task %#x) matches no thread", task)
	case 1:
		return holders[0], ""
	}
	s := make([]string, len(holders))
	for i, h := range holders {
		s[i] = fmt.Sprintf("%#x", h)
	}
	return 0, fmt.Sprintf("the owner the nest lock records (the ICVs of task %#x) matches several threads (%s)", task, strings.Join(s, ", "))
}

// runs reports whether thread t runs task (see nestLockHolder).
func (as *AddressSpace) runs(t *Thread, task uint64) bool {
	k := t.Task
	for i := 0; k != 0 && i < MaxNesting; i++ {
		if k == task {
			return true
		}
		kt, err := as.Task(k)
		if err != nil || kt.Kind != TaskUndeferred {
			break
		}
		k = kt.Parent
	}
	prev, err := as.Layout.off("gomp_team.prev_ts")
	if err != nil {
		return false
	}
	team, id := t.Team, t.TeamID
	for i := 0; team != 0 && i < MaxNesting; i++ {
		if impl, err := as.ImplicitTask(team, id); err == nil && impl == task {
			return true
		}
		if id != 0 {
			break
		}
		parent, num, _, _, err := as.state(team + prev)
		if err != nil || parent == team {
			break
		}
		team, id = parent, num
	}
	return false
}

// ripOperand is the address of the first rip-relative memory operand
// (lock cmpxchg %edx,X(%rip): a static mutex).
func ripOperand(code []inst) (uint64, bool) {
	for _, in := range code {
		if m, _, ok := memArg(in); ok && m.Base == x86asm.RIP {
			return uint64(int64(in.next()) + m.Disp), true
		}
	}
	return 0, false
}

// Bounds of the walk over libgomp's mutex wait.
const (
	maxWaitCode  = 4096 // bytes from its entry
	maxWaitInsts = 2048 // instructions decoded
)

// findMutexWait finds libgomp's mutex wait (gomp_mutex_lock_slow, where
// omp_set_lock jumps when the lock is taken), its syscall instructions
// and what the function has pushed at each (so that the return address
// is at rsp plus that), and the end of libgomp's image. Nothing is
// warned: without them BlockedOn leaves mutex waits to the stack.
func (as *AddressSpace) findMutexWait() {
	addr, err := as.cb.SymbolAddr("omp_set_lock", runtimeHint)
	if err != nil {
		return
	}
	slow, ok := as.m.tailJump(addr)
	if !ok {
		return
	}
	as.mutexSites = as.m.syscallSites(slow)
	if as.Image != nil && as.Image.Base != 0 {
		as.imageEnd = as.m.imageEnd(as.Image.Base)
	}
}

// tailJump is the target of the first direct jmp in the code at addr,
// read straight on past its fast path's ret (omp_set_lock: lock cmpxchg,
// jne, ret, then the jump to the mutex wait), within maxCodeBytes.
func (m *mem) tailJump(addr uint64) (uint64, bool) {
	buf := make([]byte, maxCodeBytes)
	if m.read(addr, buf) != nil {
		return 0, false
	}
	for off := 0; off < len(buf); {
		if off+4 <= len(buf) && buf[off] == 0xf3 && buf[off+1] == 0x0f && buf[off+2] == 0x1e && buf[off+3] == 0xfa {
			off += 4
			continue
		}
		in, err := x86asm.Decode(buf[off:], 64)
		if err != nil || in.Len == 0 {
			return 0, false
		}
		off += in.Len
		if rel, ok := in.Args[0].(x86asm.Rel); ok && in.Op == x86asm.JMP {
			return uint64(int64(addr) + int64(off) + int64(rel)), true
		}
	}
	return 0, false
}

// syscallSites walks the code of the function at entry along its branches
// (within maxWaitCode bytes; calls return, jumps out of it are tail
// calls) and returns its syscall instructions with the bytes pushed at
// each since its entry (push, pop, sub and add of rsp), -1 when the paths
// that reach one disagree or the walk loses track of rsp.
func (m *mem) syscallSites(entry uint64) map[uint64]int64 {
	sites := map[uint64]int64{}
	depth := map[uint64]int64{}
	type item struct {
		addr uint64
		d    int64
	}
	work := []item{{entry, 0}}
	n := 0
	for len(work) > 0 && n < maxWaitInsts {
		it := work[len(work)-1]
		work = work[:len(work)-1]
		for n < maxWaitInsts {
			if it.addr < entry || it.addr >= entry+maxWaitCode {
				break
			}
			if d, seen := depth[it.addr]; seen {
				if d != it.d {
					depth[it.addr] = -1
				}
				break
			}
			depth[it.addr] = it.d
			n++
			var buf [16]byte
			if m.read(it.addr, buf[:]) != nil {
				break
			}
			if buf[0] == 0xf3 && buf[1] == 0x0f && buf[2] == 0x1e && buf[3] == 0xfa { // endbr64
				it.addr += 4
				continue
			}
			in, err := x86asm.Decode(buf[:], 64)
			if err != nil || in.Len == 0 {
				break
			}
			next := it.addr + uint64(in.Len)
			d := it.d
			switch in.Op {
			case x86asm.RET, x86asm.UD2, x86asm.HLT:
				goto done
			case x86asm.SYSCALL:
				sites[it.addr] = it.d
			case x86asm.PUSH:
				d += 8
			case x86asm.POP:
				d -= 8
			case x86asm.SUB, x86asm.ADD:
				if r, ok := in.Args[0].(x86asm.Reg); ok && r == x86asm.RSP {
					if imm, ok := in.Args[1].(x86asm.Imm); ok && in.Op == x86asm.SUB {
						d += int64(imm)
					} else if ok {
						d -= int64(imm)
					} else {
						d = -1 << 40
					}
				}
			case x86asm.JMP:
				if rel, ok := in.Args[0].(x86asm.Rel); ok {
					it.addr = uint64(int64(next) + int64(rel))
					continue
				}
				goto done
			default:
				if condJumps[in.Op] {
					if rel, ok := in.Args[0].(x86asm.Rel); ok {
						work = append(work, item{uint64(int64(next) + int64(rel)), d})
					}
				} else if r, ok := in.Args[0].(x86asm.Reg); ok && r == x86asm.RSP && in.Op != x86asm.CMP && in.Op != x86asm.TEST {
					d = -1 << 40 // rsp changed some other way
				}
			}
			if d < 0 {
				d = -1 << 40
			}
			it = item{next, d}
		}
	done:
	}
	for a := range sites {
		if d := depth[a]; d < 0 {
			sites[a] = -1
		} else {
			sites[a] = d
		}
	}
	return sites
}

// condJumps are the conditional jumps.
var condJumps = map[x86asm.Op]bool{
	x86asm.JA: true, x86asm.JAE: true, x86asm.JB: true, x86asm.JBE: true, x86asm.JCXZ: true,
	x86asm.JE: true, x86asm.JECXZ: true, x86asm.JG: true, x86asm.JGE: true, x86asm.JL: true,
	x86asm.JLE: true, x86asm.JNE: true, x86asm.JNO: true, x86asm.JNP: true, x86asm.JNS: true,
	x86asm.JO: true, x86asm.JP: true, x86asm.JRCXZ: true, x86asm.JS: true,
}

// imageEnd is the end of the loaded image whose ELF header is at base:
// the highest end of its PT_LOAD segments, 0 when they cannot be read.
func (m *mem) imageEnd(base uint64) uint64 {
	var hdr [64]byte
	if m.read(base, hdr[:]) != nil || string(hdr[:4]) != "\x7fELF" {
		return 0
	}
	le := binary.LittleEndian
	phoff, phentsize, phnum := le.Uint64(hdr[32:]), uint64(le.Uint16(hdr[54:])), int(le.Uint16(hdr[56:]))
	if phentsize < 56 || phnum > maxPhdrs {
		return 0
	}
	var end uint64
	for i := 0; i < phnum; i++ {
		var ph [56]byte
		if m.read(base+phoff+uint64(i)*phentsize, ph[:]) != nil {
			return 0
		}
		if le.Uint32(ph[0:]) == 1 { // PT_LOAD
			end = max(end, base+le.Uint64(ph[16:])+le.Uint64(ph[40:]))
		}
	}
	return end
}
