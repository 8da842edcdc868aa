package llvm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

func (as *AddressSpace) typeLayouts() (ompd.TypeLayouts, error) {
	tl, ok := as.cb.(ompd.TypeLayouts)
	if !ok {
		return nil, ompd.ErrNoTypeLayouts
	}
	return tl, nil
}

// readTyped reads field of the runtime type typ in the object at base,
// with the layout TypeLayouts gives.
func (as *AddressSpace) readTyped(base ompd.Address, typ, field string) (uint64, error) {
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

// identLocation reads and parses the psource string of the ident_t at
// ident.
func (as *AddressSpace) identLocation(ident ompd.Address) (ompd.Location, error) {
	if ident == 0 {
		return ompd.Location{}, ompd.ErrNoLocation
	}
	// A thousand tasks of one region share its ident_t: read once.
	as.identMu.Lock()
	r, ok := as.idents[ident]
	as.identMu.Unlock()
	if ok {
		return r.loc, r.err
	}
	r.loc, r.err = as.readIdentLocation(ident)
	as.identMu.Lock()
	if as.idents == nil {
		as.idents = map[ompd.Address]identLocation{}
	}
	as.idents[ident] = r
	as.identMu.Unlock()
	return r.loc, r.err
}

// readIdentLocation reads what identLocation returns.
func (as *AddressSpace) readIdentLocation(ident ompd.Address) (ompd.Location, error) {
	ps, err := as.readTyped(ident, "ident_t", "psource")
	if err != nil {
		return ompd.Location{}, err
	}
	if ps == 0 {
		return ompd.Location{}, ompd.ErrNoLocation
	}
	s, err := as.cb.ReadString(ps, 1024)
	if err != nil {
		return ompd.Location{}, fmt.Errorf("reading source location string at %#x: %w", ps, err)
	}
	return parsePsource(s)
}

// parsePsource parses ";file;function;line;column;;".
func parsePsource(s string) (ompd.Location, error) {
	parts := strings.Split(s, ";")
	if len(parts) < 5 || parts[0] != "" {
		return ompd.Location{}, fmt.Errorf("malformed source location %q", s)
	}
	line, err1 := strconv.Atoi(parts[3])
	col, err2 := strconv.Atoi(parts[4])
	if err1 != nil || err2 != nil {
		return ompd.Location{}, fmt.Errorf("malformed source location %q", s)
	}
	if parts[1] == "unknown" && line == 0 {
		return ompd.Location{}, ompd.ErrNoLocation
	}
	return ompd.Location{File: parts[1], Function: parts[2], Line: line, Column: col}, nil
}

// Location returns the source location of the parallel construct that
// created the region's team (t_ident). Not an OMPD 5.1 call.
func (p *Parallel) Location() (ompd.Location, error) {
	ident, err := p.as.readTyped(p.team, "kmp_base_team_t", "t_ident")
	if err != nil {
		return ompd.Location{}, err
	}
	return p.as.identLocation(ident)
}

// Location returns the source location of the task construct that created
// an explicit task, or of the region of an implicit one (td_ident). Not an
// OMPD 5.1 call.
func (k *Task) Location() (ompd.Location, error) {
	ident, err := k.as.readTyped(k.td, "kmp_taskdata_t", "td_ident")
	if err != nil {
		return ompd.Location{}, err
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
	seenTT := map[ompd.Address]bool{}
	seenTask := map[ompd.Address]bool{}
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
func (as *AddressSpace) dequeTasks(hd ompd.Address) ([]ompd.Address, error) {
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
	out := make([]ompd.Address, 0, n)
	for i := int64(0); i < n; i++ {
		idx := (int64(head) + i) & (sz - 1)
		if td := leUint(slots[uint64(idx)*ps:], ps); td != 0 {
			out = append(out, td)
		}
	}
	return out, nil
}
