package ptrace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ompd-inspect/ompd-inspect/target"
)

func TestSyscallSPPC(t *testing.T) {
	for _, c := range []struct {
		line   string
		sp, pc uint64
	}{
		{"202 0x55d0c2a9c8e8 0x189 0x0 0x0 0x0 0x0 0x7ffd5e1a6b40 0x7f3a1c09df16\n", 0x7ffd5e1a6b40, 0x7f3a1c09df16},
		{"-1 0x7ffd5e1a6b40 0x7f3a1c09df16\n", 0x7ffd5e1a6b40, 0x7f3a1c09df16},
		{"running\n", 0, 0},
		{"", 0, 0},
		{"202 0x1 0x2 0x3 0x4 0x5 0x6 0x7\n", 0, 0},      // a field short
		{"202 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0xzz\n", 0, 0}, // not hexadecimal
		{"-1 0x10000000000000000 0x1\n", 0, 0},           // past 64 bits
	} {
		sp, pc := syscallSPPC([]byte(c.line))
		if sp != c.sp || pc != c.pc {
			t.Errorf("syscallSPPC(%q) = %#x, %#x; want %#x, %#x", c.line, sp, pc, c.sp, c.pc)
		}
	}
}

// waitBlocked polls until every thread of tt but the spinner is blocked
// in a system call (as /proc/PID/task/TID/syscall shows): right after the
// fixture says it is ready, a thread may still be on its way there.
func waitBlocked(t *testing.T, tt *threadsTarget) {
	t.Helper()
	spinner := tt.tids[1]
	var bad string
	for range pollTries {
		bad = ""
		for _, tid := range tt.tids {
			if tid == spinner {
				continue
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", tt.pid, tid))
			if sp, _ := syscallSPPC(b); err != nil || sp == 0 {
				bad = fmt.Sprintf("thread %d: %q, %v", tid, b, err)
				break
			}
		}
		if bad == "" {
			return
		}
		time.Sleep(pollInterval)
	}
	t.Fatalf("process %d: not every thread but the spinner is blocked: %s", tt.pid, bad)
}

// TestRehearse: Attach calls Options.Rehearse before the stop with a view
// of the running process: its first threads, the main thread first, each
// blocked one with the stack and instruction pointers the stop then
// shows (ptrace's registers are the oracle) and the spinning one with
// none; the modules the stop then lists; its memory (the value the
// program printed). The page it read is in the stop's cache when Attach
// returns, read again once stopped. A Rehearse that panics, or that runs
// past its time (its reads then fail), changes nothing; a signal during
// it ends Attach before anything is stopped.
func TestRehearse(t *testing.T) {
	tt := startThreads(t)
	waitBlocked(t, tt)
	spinner := tt.tids[1]
	type seen struct {
		pid     int
		threads []target.Thread
		mods    []string
		global  uint64
		err     error
	}
	modules := func(ms []*target.Module) []string {
		var out []string
		for _, m := range ms {
			out = append(out, fmt.Sprintf("%s %s %#x-%#x bias %#x image %v", m.Name, m.File, m.Start, m.End, m.Bias, m.Image != nil))
		}
		return out
	}
	t.Run("view", func(t *testing.T) {
		var s seen
		calls := 0
		p := attach(t, tt.pid, Options{RehearsalBudget: time.Minute, Rehearse: func(r *Running) {
			calls++
			s.pid, s.threads, s.mods = r.PID(), r.Threads(), modules(r.Modules())
			s.global, s.err = target.ReadUint64(r, tt.global)
		}})
		if calls != 1 || s.pid != tt.pid {
			t.Fatalf("Rehearse called %d times, with pid %d; want once with %d", calls, s.pid, tt.pid)
		}
		if s.err != nil || s.global != tt.globalVal {
			t.Fatalf("the_global read in the rehearsal: %#x, %v; want %#x", s.global, s.err, tt.globalVal)
		}
		if got, want := modules(p.Modules()), s.mods; !slices.Equal(got, want) {
			t.Fatalf("modules in the rehearsal:\n%v\nonce stopped:\n%v", want, got)
		}
		var tids []int
		for _, th := range s.threads {
			tids = append(tids, th.TID)
		}
		if want := expectedTIDs(tt.tids)[:rehearsalThreads]; !slices.Equal(tids, want) {
			t.Fatalf("rehearsal threads %v, want %v", tids, want)
		}
		stopped := make(map[int]target.Registers)
		for _, th := range p.Threads() {
			stopped[th.TID] = th.Regs
		}
		for _, th := range s.threads {
			r := stopped[th.TID]
			switch {
			case th.TID == spinner:
				if th.Regs.Rsp != 0 || th.Regs.Rip != 0 {
					t.Errorf("spinning thread %d: rsp %#x rip %#x in the rehearsal, want none", th.TID, th.Regs.Rsp, th.Regs.Rip)
				}
			case th.Regs.Rsp == 0 || th.Regs.Rsp != r.Rsp || th.Regs.Rip != r.Rip:
				t.Errorf("blocked thread %d: rsp %#x rip %#x in the rehearsal, %#x %#x once stopped", th.TID, th.Regs.Rsp, th.Regs.Rip, r.Rsp, r.Rip)
			}
			// The main thread's block is not on its stack; the blocked
			// threads' are at its top (the spinner's stack pointer is
			// not known).
			want := r.FSBase
			if th.TID == tt.pid || th.TID == spinner {
				want = 0
			}
			if th.Regs.FSBase != want {
				t.Errorf("thread %d: thread pointer %#x in the rehearsal, want %#x (fs_base %#x once stopped)", th.TID, th.Regs.FSBase, want, r.FSBase)
			}
		}
		page := tt.global &^ (target.PageSize - 1)
		if !slices.Contains(p.cache.Pages(), page) {
			t.Fatalf("the page the rehearsal read (%#x) is not in the stop's cache: %#x", page, p.cache.Pages())
		}
		checkThreads(t, p, tt)
	})
	t.Run("panics", func(t *testing.T) {
		called := false
		p := attach(t, tt.pid, Options{RehearsalBudget: time.Minute, Rehearse: func(r *Running) {
			called = true
			_, _ = target.ReadUint64(r, tt.global)
			panic("rehearsal")
		}})
		if !called {
			t.Fatal("Rehearse was not called")
		}
		checkThreads(t, p, tt)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		waitRunning(t, tt.pid)
	})
	t.Run("pointers", func(t *testing.T) {
		// The threads that have none (the main thread, the spinner) take
		// in order the pointers no thread has: not a blocked thread's,
		// not zero. The previous attach's threads may still be on their
		// way back into their system calls.
		waitBlocked(t, tt)
		var got []target.Thread
		held := uint64(0)
		p := attach(t, tt.pid, Options{RehearsalBudget: time.Minute, Rehearse: func(r *Running) {
			for _, th := range r.Threads() {
				if th.TID != spinner && th.TID != tt.pid {
					held = th.Regs.FSBase
					break
				}
			}
			r.SetThreadPointers([]uint64{held, 0, 0x1000, 0x2000})
			got = r.Threads()
		}})
		if held == 0 {
			t.Fatal("no blocked thread of the rehearsal had a thread pointer")
		}
		stopped := make(map[int]uint64)
		for _, th := range p.Threads() {
			stopped[th.TID] = th.Regs.FSBase
		}
		for i, th := range got {
			want := stopped[th.TID]
			switch {
			case i == 0:
				want = 0x1000
			case th.TID == spinner:
				want = 0x2000
			}
			if th.ThreadPointer() != want {
				t.Errorf("thread %d: thread pointer %#x, want %#x", th.TID, th.ThreadPointer(), want)
			}
		}
		checkThreads(t, p, tt)
	})
	t.Run("over time", func(t *testing.T) {
		// A rehearsal that would read for ever, until its reads say its
		// time is up: they do, and Attach goes on. (A read that began
		// just before may fail otherwise: the page it was fetching is
		// then not read.)
		reads := 0
		endedBefore := true
		var failedUnended error // a read that failed while Ended said false
		p := attach(t, tt.pid, Options{RehearsalBudget: 20 * time.Millisecond, Rehearse: func(r *Running) {
			endedBefore = target.Ended(r)
			for {
				reads++
				_, err := target.ReadUint64(r, tt.global)
				if err != nil && !target.Ended(r) && failedUnended == nil {
					failedUnended = err
				}
				if errors.Is(err, errRehearsalOver) {
					return
				}
			}
		}})
		if reads == 0 {
			t.Fatal("Rehearse was not called")
		}
		// Ended says false before the time is up, and true once any read
		// fails: what was read while it said false was read whole (what
		// callers keep relies on it).
		if endedBefore || failedUnended != nil {
			t.Errorf("the rehearsal's reads ended before it read: %v; a read failed while they had not: %v", endedBefore, failedUnended)
		}
		checkThreads(t, p, tt)
	})
	t.Run("interrupted", func(t *testing.T) {
		sigs := make(chan os.Signal, 1)
		release := make(chan struct{})
		defer close(release)
		p, err := Attach(tt.pid, Options{Interrupt: sigs, RehearsalBudget: time.Minute, Rehearse: func(r *Running) {
			sigs <- unix.SIGINT
			<-release
		}})
		if p != nil {
			_ = p.Close()
		}
		var ie *InterruptedError
		if !errors.As(err, &ie) || ie.Signal != unix.SIGINT || ie.PID != tt.pid || ie.Attached {
			t.Fatalf("Attach: %v, want an interrupt by SIGINT before the stop", err)
		}
		waitRunning(t, tt.pid)
	})
}

// TestTCBAtStackTop: the thread block is found in the top two pages of
// the anonymous mapping that holds the stack pointer, by its first word
// and the word 16 bytes on, both its own address; nothing is found in a
// file mapping, a mapping of less than two pages, one whose top cannot be
// read, or one without such a block, nor for a pointer outside every
// mapping.
func TestTCBAtStackTop(t *testing.T) {
	const lo, hi = 0x7000_0000_0000, 0x7000_0001_0000 // 16 pages
	tcb := uint64(hi - 0x900)
	mem := make(map[uint64]uint64) // word address -> value
	mem[tcb], mem[tcb+16] = tcb, tcb
	mem[hi-0x1800] = hi - 0x1800 // its first word only: not a block
	read := func(addr uint64, buf []byte) (int, error) {
		if addr < lo || addr+uint64(len(buf)) > hi {
			return 0, errors.New("unmapped")
		}
		for i := 0; i+8 <= len(buf); i += 8 {
			binary.LittleEndian.PutUint64(buf[i:], mem[addr+uint64(i)])
		}
		return len(buf), nil
	}
	stack := mapping{start: lo, end: hi}
	for _, c := range []struct {
		name string
		maps []mapping
		sp   uint64
		want uint64
	}{
		{"found", []mapping{{start: 0x1000, end: 0x2000}, stack}, lo + 0x100, tcb},
		{"sp in the top page", []mapping{stack}, hi - 8, tcb},
		{"sp at the end", []mapping{stack}, hi, 0},
		{"no mapping", []mapping{{start: 0x1000, end: 0x2000}}, lo + 0x100, 0},
		{"file mapping", []mapping{{start: lo, end: hi, inode: 42, path: "/lib/x.so"}}, lo + 0x100, 0},
		{"one page", []mapping{{start: hi - 0x1000, end: hi}}, hi - 0x100, 0},
		{"top unreadable", []mapping{{start: lo, end: hi + 0x1000}}, lo + 0x100, 0},
		{"a first word alone", []mapping{{start: lo, end: hi - 0x1000}}, lo + 0x100, 0},
	} {
		if got := tcbAtStackTop(read, c.maps, c.sp); got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
}
