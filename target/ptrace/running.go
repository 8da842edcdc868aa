package ptrace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/ompd-inspect/ompd-inspect/target"
)

// Running is a view of a process that runs, which Attach gives
// Options.Rehearse before it stops the process: its memory is read as it
// changes (through a cache of its own, which Attach drops), its modules
// are those Attach listed and opened before the stop, and of its threads
// only a few are shown, whose registers cannot be read: only the stack
// and instruction pointers of those blocked in the kernel, and, but for
// the main thread, the thread pointer found at the top of their stacks.
// Once the rehearsal's time is up, every read fails. It implements
// target.Target (and target.ModuleFinder, target.PageReader,
// target.PageListReader and target.Prefetcher, as a Process does), so
// that the code that reads a stopped Process runs the same way over it.
// What is read through it may be torn: what is kept of it must be what
// the process cannot change as it runs, and must not be kept once the
// view has ended (target.Ender), when its reads may have been cut short.
type Running struct {
	// memView reads the process's memory until cancel ends it (the
	// rehearsal ran out of time, or a signal ended Attach).
	memView
	modules []*target.Module
	threads []target.Thread
}

// errRehearsalOver is wrapped by the reads of a Running whose rehearsal
// was ended.
var errRehearsalOver = errors.New("the rehearsal before the stop was ended")

// cancel makes every later read of the view fail.
func (r *Running) cancel() { r.ended.Store(true) }

// rehearsalThreads is how many of the process's threads a Running shows:
// enough to run every per-thread path once.
const rehearsalThreads = 4

// rehearsalMaxThreads is the most threads a process may have for Attach
// to rehearse: with more, the first-time costs a rehearsal moves out of
// the stop are a small part of reading it, and the memory the rehearsal
// reads (the runtime's table of every thread) would add to the peak.
const rehearsalMaxThreads = 64

// newRunning returns the view of process pid over what openEarly listed
// before the stop: read through the live thread it was listed through,
// with its modules. Its threads other than the main one whose stack
// pointer is known are given the thread pointer found at the top of their
// stacks (tcbAtStackTop, in the mappings listed); one found for two
// threads (stacks in one mapping) is given to neither.
func newRunning(pid int, early earlyListing) *Running {
	r := &Running{memView: memView{pid: pid, mem: newMemReader(pid, early.tid), endErr: errRehearsalOver}, modules: early.modules}
	r.cache = target.NewMemCache(r)
	r.threads = runningThreads(pid, rehearsalThreads)
	maps := early.maps
	seen := make(map[uint64]int)
	for i := range r.threads {
		th := &r.threads[i]
		if th.TID != pid && th.Regs.Rsp != 0 {
			th.Regs.FSBase = tcbAtStackTop(r.mem.ReadPages, maps, th.Regs.Rsp)
			seen[th.Regs.FSBase]++
		}
	}
	for i := range r.threads {
		if seen[r.threads[i].Regs.FSBase] > 1 {
			r.threads[i].Regs.FSBase = 0
		}
	}
	return r
}

// tcbAtStackTop returns the thread pointer of the thread whose stack
// pointer is sp, from the top of the anonymous mapping that holds sp: the
// C library (glibc) places a thread's control block at the top of the
// stack it makes for the thread, and on x86-64 that block's first word,
// and its word 16 bytes in, are its own address, which is the thread
// pointer. It returns 0 when the top two pages hold no such block (the
// main thread's block lies elsewhere; another C library lays it out
// otherwise) or cannot be read. A guess for a rehearsal only: a word
// that happened to look like the block would name another address.
func tcbAtStackTop(read func(addr uint64, buf []byte) (int, error), maps []mapping, sp uint64) uint64 {
	i := slices.IndexFunc(maps, func(m mapping) bool { return sp >= m.start && sp < m.end })
	if i < 0 || maps[i].inode != 0 || maps[i].end-maps[i].start < tcbSearch {
		return 0
	}
	lo := maps[i].end - tcbSearch
	buf := make([]byte, tcbSearch)
	if n, _ := read(lo, buf); n != len(buf) {
		return 0
	}
	for off := len(buf) - 24; off >= 0; off -= 8 {
		x := lo + uint64(off)
		if binary.LittleEndian.Uint64(buf[off:]) == x && binary.LittleEndian.Uint64(buf[off+16:]) == x {
			return x
		}
	}
	return 0
}

// tcbSearch is how much of the top of a thread's stack mapping
// tcbAtStackTop reads: glibc's thread block is 2.3 KiB, under it only
// alignment.
const tcbSearch = 2 * target.PageSize

// runningThreads returns at most n threads of process pid, the main
// thread first, each with the stack pointer and instruction pointer
// /proc/PID/task/TID/syscall shows for a thread blocked in a system call
// (none for one that runs).
func runningThreads(pid, n int) []target.Thread {
	tids, err := listTasks(pid)
	if err != nil {
		return nil
	}
	sortMainFirst(pid, tids)
	var out []target.Thread
	for _, tid := range tids {
		if len(out) == n {
			break
		}
		th := target.Thread{TID: tid}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, tid)); err == nil {
			th.Regs.Rsp, th.Regs.Rip = syscallSPPC(b)
		}
		out = append(out, th)
	}
	return out
}

// syscallSPPC returns the stack pointer and instruction pointer that a
// /proc/PID/task/TID/syscall line ends with ("NR ARG1 ... ARG6 SP PC", or
// "-1 SP PC" for a thread blocked outside a system call); zero for a
// thread that runs or a line of another form.
func syscallSPPC(line []byte) (sp, pc uint64) {
	f := bytes.Fields(line)
	if len(f) != 9 && len(f) != 3 {
		return 0, 0
	}
	sp, err1 := strconv.ParseUint(string(bytes.TrimPrefix(f[len(f)-2], []byte("0x"))), 16, 64)
	pc, err2 := strconv.ParseUint(string(bytes.TrimPrefix(f[len(f)-1], []byte("0x"))), 16, 64)
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	return sp, pc
}

// SetThreadPointers gives the view's threads that have no thread pointer
// (the main thread, whose block is not on its stack, and the threads that
// run, whose stack pointer is not known), in order, those of ptrs that no
// thread has: pointers the caller found elsewhere (the runtime's own list
// of its threads, the initial thread's first), since a running thread's
// registers cannot be read. Only the main thread's is sure to be its own
// (when the initial thread is the main thread, as it usually is).
func (r *Running) SetThreadPointers(ptrs []uint64) {
	have := make(map[uint64]bool, len(r.threads))
	for _, th := range r.threads {
		have[th.Regs.FSBase] = true
	}
	for i := range r.threads {
		if r.threads[i].Regs.FSBase != 0 {
			continue
		}
		for len(ptrs) > 0 && (ptrs[0] == 0 || have[ptrs[0]]) {
			ptrs = ptrs[1:]
		}
		if len(ptrs) == 0 {
			return
		}
		r.threads[i].Regs.FSBase = ptrs[0]
		have[ptrs[0]] = true
		ptrs = ptrs[1:]
	}
}

// PID returns the process id.
func (r *Running) PID() int { return r.pid }

// Threads lists the threads the view shows.
func (r *Running) Threads() []target.Thread { return append([]target.Thread(nil), r.threads...) }

// Modules lists the modules Attach opened before the stop.
func (r *Running) Modules() []*target.Module { return append([]*target.Module(nil), r.modules...) }

// ModuleAt implements target.ModuleFinder.
func (r *Running) ModuleAt(addr uint64) *target.Module { return target.ModuleIn(r.modules, addr) }

// Warnings returns nothing: what a rehearsal meets is not reported.
func (r *Running) Warnings() []string { return nil }

// Close does nothing: the modules' images are Attach's.
func (r *Running) Close() error { return nil }

// pages lists the pages the view read.
func (r *Running) pages() []uint64 { return r.cache.Pages() }
