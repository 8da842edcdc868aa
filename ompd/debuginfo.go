package ompd

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// TypeLayouts is an optional extension of Callbacks: the layouts of
// runtime types that the OMPD layout symbols do not describe, which the
// debugger learns from the runtime's own debug information (DWARF). With
// it the OMPD layer also reports construct source locations (ident_t),
// runtime task ids and the explicit tasks still queued in the task deques.
// Without it those answers are unavailable; everything else works.
type TypeLayouts interface {
	// TypeSize returns the size of the runtime type typ.
	TypeSize(typ string) (uint64, error)
	// FieldLayout returns the offset and size of field in the runtime
	// type typ.
	FieldLayout(typ, field string) (offset, size uint64, err error)
}

// ErrNoTypeLayouts is returned by the calls that need TypeLayouts when the
// callbacks do not provide it.
var ErrNoTypeLayouts = errors.New("the runtime's debug information (DWARF types) is not available")

func (as *AddressSpace) typeLayouts() (TypeLayouts, error) {
	tl, ok := as.cb.(TypeLayouts)
	if !ok {
		return nil, ErrNoTypeLayouts
	}
	return tl, nil
}

// readTyped reads field of the runtime type typ in the object at base,
// with the layout TypeLayouts gives.
func (as *AddressSpace) readTyped(base Address, typ, field string) (uint64, error) {
	tl, err := as.typeLayouts()
	if err != nil {
		return 0, err
	}
	off, size, err := tl.FieldLayout(typ, field)
	if err != nil {
		return 0, err
	}
	if size == 0 || size > 8 {
		return 0, fmt.Errorf("%s.%s has size %d", typ, field, size)
	}
	v, err := as.mem.uint(base+off, size)
	if err != nil {
		return 0, fmt.Errorf("reading %s.%s at %#x: %w", typ, field, base+off, err)
	}
	return v, nil
}

// Location is a source location the compiler recorded for a construct
// (ident_t psource, ";file;function;line;column;;").
type Location struct {
	File     string
	Function string
	Line     int
	Column   int
}

// String formats the location as file:line.
func (l Location) String() string {
	if l.File == "" {
		return ""
	}
	return l.File + ":" + strconv.Itoa(l.Line)
}

// ErrNoLocation is returned when the compiler recorded no source location
// (code compiled without -g gives ";unknown;unknown;0;0;;").
var ErrNoLocation = errors.New("no source location recorded (compile with -g)")

// identLocation reads and parses the psource string of the ident_t at
// ident.
func (as *AddressSpace) identLocation(ident Address) (Location, error) {
	if ident == 0 {
		return Location{}, ErrNoLocation
	}
	ps, err := as.readTyped(ident, "ident_t", "psource")
	if err != nil {
		return Location{}, err
	}
	if ps == 0 {
		return Location{}, ErrNoLocation
	}
	s, err := as.cb.ReadString(ps, 1024)
	if err != nil {
		return Location{}, fmt.Errorf("reading source location string at %#x: %w", ps, err)
	}
	return parsePsource(s)
}

// parsePsource parses ";file;function;line;column;;".
func parsePsource(s string) (Location, error) {
	parts := strings.Split(s, ";")
	if len(parts) < 5 || parts[0] != "" {
		return Location{}, fmt.Errorf("malformed source location %q", s)
	}
	line, err1 := strconv.Atoi(parts[3])
	col, err2 := strconv.Atoi(parts[4])
	if err1 != nil || err2 != nil {
		return Location{}, fmt.Errorf("malformed source location %q", s)
	}
	if parts[1] == "unknown" && line == 0 {
		return Location{}, ErrNoLocation
	}
	return Location{File: parts[1], Function: parts[2], Line: line, Column: col}, nil
}

// Location returns the source location of the parallel construct that
// created the region's team (t_ident). Not an OMPD 5.1 call.
func (p *Parallel) Location() (Location, error) {
	ident, err := p.as.readTyped(p.team, "kmp_base_team_t", "t_ident")
	if err != nil {
		return Location{}, err
	}
	return p.as.identLocation(ident)
}

// Location returns the source location of the task construct that created
// an explicit task, or of the region of an implicit one (td_ident). Not an
// OMPD 5.1 call.
func (k *Task) Location() (Location, error) {
	ident, err := k.as.readTyped(k.td, "kmp_taskdata_t", "td_ident")
	if err != nil {
		return Location{}, err
	}
	return k.as.identLocation(ident)
}

// RuntimeID returns the runtime's own id of the task (td_task_id). Not an
// OMPD 5.1 call.
func (k *Task) RuntimeID() (int64, error) {
	v, err := k.as.readTyped(k.td, "kmp_taskdata_t", "td_task_id")
	return int64(int32(v)), err
}

// MaxQueued bounds how many queued tasks are read from one deque.
const MaxQueued = 1 << 16

// QueuedTasks returns the explicit tasks waiting in the runtime's task
// deques: created, not yet started. Not an OMPD 5.1 call: it reads the
// deques, whose layout comes from TypeLayouts. Each task is returned once.
func (as *AddressSpace) QueuedTasks() ([]*Task, error) {
	tl, err := as.typeLayouts()
	if err != nil {
		return nil, err
	}
	threads, err := as.Threads()
	if err != nil {
		return nil, err
	}
	hdSize, err := tl.TypeSize("kmp_thread_data_t")
	if err != nil {
		return nil, err
	}
	seenTT := map[Address]bool{}
	seenTask := map[Address]bool{}
	var out []*Task
	var errs []error
	for _, t := range threads {
		info := t.th // kmp_base_info_t at offset 0 of kmp_info_t's th
		tt, err := as.readTyped(info, "kmp_base_info_t", "th_task_team")
		if err != nil {
			errs = append(errs, fmt.Errorf("task team of gtid %d: %w", t.gtid, err))
			continue
		}
		if tt == 0 || seenTT[tt] {
			continue
		}
		seenTT[tt] = true
		data, err := as.readTyped(tt, "kmp_base_task_team_t", "tt_threads_data")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		nproc, err := as.readTyped(tt, "kmp_base_task_team_t", "tt_nproc")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n := int(int32(nproc))
		if data == 0 || n == 0 {
			continue
		}
		if n < 0 || n > MaxThreads {
			errs = append(errs, fmt.Errorf("task team at %#x has tt_nproc %d, outside 0..%d", tt, n, MaxThreads))
			continue
		}
		for i := 0; i < n; i++ {
			hd := data + uint64(i)*hdSize
			tasks, err := as.dequeTasks(hd)
			if err != nil {
				errs = append(errs, fmt.Errorf("task deque %d of task team %#x: %w", i, tt, err))
				continue
			}
			for _, td := range tasks {
				if !seenTask[td] {
					seenTask[td] = true
					out = append(out, &Task{as: as, td: td})
				}
			}
		}
	}
	return out, errors.Join(errs...)
}

// dequeTasks lists the tasks in one thread's deque, from head to tail.
func (as *AddressSpace) dequeTasks(hd Address) ([]Address, error) {
	deque, err := as.readTyped(hd, "kmp_base_thread_data_t", "td_deque")
	if err != nil {
		return nil, err
	}
	ntasks, err := as.readTyped(hd, "kmp_base_thread_data_t", "td_deque_ntasks")
	if err != nil {
		return nil, err
	}
	size, err := as.readTyped(hd, "kmp_base_thread_data_t", "td_deque_size")
	if err != nil {
		return nil, err
	}
	head, err := as.readTyped(hd, "kmp_base_thread_data_t", "td_deque_head")
	if err != nil {
		return nil, err
	}
	n, sz := int64(int32(ntasks)), int64(int32(size))
	if deque == 0 || n <= 0 {
		return nil, nil
	}
	if sz <= 0 || sz > MaxQueued || sz&(sz-1) != 0 || n > sz {
		return nil, fmt.Errorf("deque at %#x has %d tasks in %d slots: inconsistent", deque, n, sz)
	}
	ps := uint64(as.sizes.Pointer)
	slots := make([]byte, uint64(sz)*ps)
	if err := as.cb.ReadMemory(deque, slots); err != nil {
		return nil, fmt.Errorf("reading deque at %#x: %w", deque, err)
	}
	out := make([]Address, 0, n)
	for i := int64(0); i < n; i++ {
		idx := (int64(head) + i) & (sz - 1)
		if td := leUint(slots[uint64(idx)*ps:], ps); td != 0 {
			out = append(out, td)
		}
	}
	return out, nil
}
