package gomp

import (
	"fmt"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// Registers are the registers of a stopped thread that tell a futex wait.
type Registers struct {
	Rip, Rax, OrigRax, Rdi, FSBase uint64
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
	rr, ok := as.cb.(RegisterReader)
	if !ok {
		return Wait{}, fmt.Errorf("the callbacks give no registers")
	}
	ctx, err := as.cb.ThreadContext(ompd.ThreadIDPthread, tp)
	if err != nil {
		return Wait{}, err
	}
	r, err := rr.ThreadRegisters(ctx)
	if err != nil {
		return Wait{}, err
	}
	if r.OrigRax != sysFutex || r.Rip < 2 {
		return Wait{}, nil
	}
	var insn [2]byte
	if err := as.m.read(r.Rip-2, insn[:]); err != nil || insn != [2]byte{0x0f, 0x05} {
		return Wait{}, nil
	}
	w := Wait{Kind: WaitOther, Futex: r.Rdi}
	thr := as.ThreadAddr(tp)
	gen, _ := as.Layout.Get("gomp_barrier_t_probe.b.generation")
	if pool, err := as.field(thr, "gomp_thread.thread_pool"); err == nil && pool != 0 {
		if dock, ok := as.Layout.Get("gomp_thread_pool.threads_dock"); ok && r.Rdi == pool+uint64(dock+gen) {
			w.Kind = WaitDock
			return w, nil
		}
	}
	ts, _ := as.Layout.Get("gomp_thread.ts")
	if team, err := as.field(thr+uint64(ts), "gomp_team_state.team"); err == nil && team != 0 {
		if bar, ok := as.Layout.Get("gomp_team.barrier"); ok && r.Rdi == team+uint64(bar+gen) {
			w.Kind = WaitBarrier
		}
	}
	return w, nil
}
