package ptrace

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/ompd-inspect/ompd-inspect/target"
)

// Running is a view of a process that runs, which Attach gives
// Options.Rehearse before it stops the process: its memory is read as it
// changes (through a cache of its own, which Attach drops), its modules
// are those Attach listed and opened before the stop, and of its threads
// only a few are shown, whose registers cannot be read. Once the
// rehearsal's time is up, every read fails. It implements
// target.Target (and target.ModuleFinder, target.PageReader,
// target.PageListReader and target.Prefetcher, as a Process does), so
// that the code that reads a stopped Process runs the same way over it.
// What is read through it may be torn and must not be kept.
type Running struct {
	pid     int
	mem     *memReader
	cache   *target.MemCache
	modules []*target.Module
	threads []target.Thread
	// cancelled makes every read fail (the rehearsal ran out of time,
	// or a signal ended Attach).
	cancelled atomic.Bool
}

// errRehearsalOver is wrapped by the reads of a Running whose rehearsal
// was ended.
var errRehearsalOver = errors.New("the rehearsal before the stop was ended")

// cancel makes every later read of the view fail.
func (r *Running) cancel() { r.cancelled.Store(true) }

// rehearsalThreads is how many of the process's threads a Running shows:
// enough to run every per-thread path once.
const rehearsalThreads = 4

// rehearsalMaxThreads is the most threads a process may have for Attach
// to rehearse: with more, the first-time costs a rehearsal moves out of
// the stop are a small part of reading it, and the memory the rehearsal
// reads (the runtime's table of every thread) would add to the peak.
const rehearsalMaxThreads = 64

// newRunning returns the view of process pid with the modules Attach
// opened before the stop.
func newRunning(pid int, modules []*target.Module) *Running {
	r := &Running{pid: pid, mem: newMemReader(pid, pid), modules: modules}
	r.cache = target.NewMemCache(r)
	r.threads = runningThreads(pid, rehearsalThreads)
	return r
}

// runningThreads returns at most n threads of process pid, the main
// thread first, each with the stack pointer and instruction pointer
// /proc/PID/task/TID/syscall shows for a thread blocked in a system call
// (none for one that runs).
func runningThreads(pid, n int) []target.Thread {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil
	}
	tids := make(map[int]bool, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil && tid > 0 {
			tids[tid] = true
		}
	}
	var out []target.Thread
	for _, tid := range mainFirst(pid, tids) {
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

// SetThreadPointers gives the view's threads, in order, the thread
// pointers the caller found elsewhere (the runtime's own list of its
// threads): a running thread's registers cannot be read. The threads
// past the last pointer keep none.
func (r *Running) SetThreadPointers(ptrs []uint64) {
	for i := range r.threads {
		if i < len(ptrs) {
			r.threads[i].Regs.FSBase = ptrs[i]
		}
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

// ReadMemory reads the running process's memory through the view's cache.
func (r *Running) ReadMemory(addr uint64, buf []byte) error {
	if r.cancelled.Load() {
		return fmt.Errorf("process %d: reading %d bytes at %#x: %w", r.pid, len(buf), addr, errRehearsalOver)
	}
	if err := r.cache.ReadMemory(addr, buf); err != nil {
		return fmt.Errorf("process %d: %w", r.pid, err)
	}
	return nil
}

// ReadPages implements target.PageReader.
func (r *Running) ReadPages(addr uint64, buf []byte) (int, error) {
	if r.cancelled.Load() {
		return 0, fmt.Errorf("process %d: reading %d bytes at %#x: %w", r.pid, len(buf), addr, errRehearsalOver)
	}
	return r.mem.ReadPages(addr, buf)
}

// ReadPageList implements target.PageListReader.
func (r *Running) ReadPageList(addrs []uint64, buf []byte) (int, error) {
	if r.cancelled.Load() {
		return 0, errRehearsalOver
	}
	return r.mem.ReadPageList(addrs, buf)
}

// Prefetch implements target.Prefetcher.
func (r *Running) Prefetch(addrs []uint64) { r.cache.Prefetch(addrs) }

// Close does nothing: the modules' images are Attach's.
func (r *Running) Close() error { return nil }

// pages lists the pages the view read.
func (r *Running) pages() []uint64 { return r.cache.Pages() }
