package llvm

import (
	"fmt"

	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/ompd/backend"
)

// Backend returns the address space as the report builder sees it
// (backend.AddressSpace): ompd-inspect's native OMPD for LLVM's runtime.
func Backend(as *AddressSpace) backend.AddressSpace { return nativeAS{as} }

type nativeAS struct{ as *AddressSpace }

var _ backend.ICVBatch = nativeAS{}

func (n nativeAS) Backend() string                   { return backend.NameNative }
func (n nativeAS) StateTracking() bool               { return n.as.StateTracking() }
func (n nativeAS) OMPVersion() (int, error)          { return n.as.OMPVersion() }
func (n nativeAS) OMPVersionString() (string, error) { return n.as.OMPVersionString() }
func (n nativeAS) DisplayControlVars() ([]string, error) {
	return n.as.DisplayControlVars()
}
func (n nativeAS) ICVs() ([]ompd.ICV, error) { return n.as.EnumerateICVs(), nil }
func (n nativeAS) Release() error            { return nil }

func (n nativeAS) CheckThreads() error {
	_, err := n.as.Threads()
	return err
}

func (n nativeAS) ThreadHandle(kind ompd.ThreadIDKind, id uint64) (backend.Thread, error) {
	return wrapThread(n.as.ThreadHandle(kind, id))
}

func (n nativeAS) ICV(handle any, icv ompd.ICV) (ompd.Value, error) {
	h, err := n.icvHandle(handle)
	if err != nil {
		return ompd.Value{}, fmt.Errorf("ICV %s: %w", icv.Name, err)
	}
	return n.as.ICVValue(h, icv.ID)
}

// ICVValues reads icvs from handle (backend.ICVBatch).
func (n nativeAS) ICVValues(handle any, icvs []ompd.ICV, vals []ompd.Value, errs []error) {
	h, err := n.icvHandle(handle)
	if err != nil {
		for i, icv := range icvs {
			vals[i], errs[i] = ompd.Value{}, fmt.Errorf("ICV %s: %w", icv.Name, err)
		}
		return
	}
	n.as.ICVValues(h, icvs, vals, errs)
}

// icvHandle is the package's own handle of one of the backend's handles.
func (n nativeAS) icvHandle(handle any) (any, error) {
	switch v := handle.(type) {
	case nativeAS:
		return v.as, nil
	case nativeThread:
		return v.t, nil
	case nativeParallel:
		return v.p, nil
	case nativeTask:
		return v.k, nil
	}
	return nil, fmt.Errorf("%T is no handle of the native backend", handle)
}

func (n nativeAS) QueuedTasks() ([]backend.Task, error) {
	ks, err := n.as.QueuedTasks()
	out := make([]backend.Task, len(ks))
	for i, k := range ks {
		out[i] = nativeTask{k}
	}
	return out, err
}

func (n nativeAS) BlockedTasks(from []backend.Task) ([]backend.BlockedTask, error) {
	in := make([]*Task, 0, len(from))
	for _, k := range from {
		if nk, ok := k.(nativeTask); ok {
			in = append(in, nk.k)
		}
	}
	bs, err := n.as.BlockedTasks(in)
	out := make([]backend.BlockedTask, len(bs))
	for i, b := range bs {
		out[i] = backend.BlockedTask{Task: nativeTask{b.Task}, Pending: b.Pending}
		for _, p := range b.Predecessors {
			out[i].Predecessors = append(out[i].Predecessors, nativeTask{p})
		}
	}
	return out, err
}

type nativeThread struct{ t *Thread }

func (n nativeThread) Label() string      { return ompd.Hex(n.t.Addr()) }
func (n nativeThread) Release() error     { return nil }
func (n nativeThread) GTID() (int, error) { return n.t.GTID(), nil }
func (n nativeThread) Compare(o backend.Thread) int {
	return n.t.Compare(o.(nativeThread).t)
}
func (n nativeThread) ID(kind ompd.ThreadIDKind) (uint64, error) { return n.t.ID(kind) }
func (n nativeThread) ThreadNum() (int, error)                   { return n.t.ThreadNum() }
func (n nativeThread) State() (ompd.State, uint64, error)        { return n.t.State() }
func (n nativeThread) BlockedOn() (*ompd.Wait, error)            { return n.t.BlockedOn() }
func (n nativeThread) CurrentParallel() (backend.Parallel, error) {
	return wrapParallel(n.t.CurrentParallel())
}
func (n nativeThread) CurrentTask() (backend.Task, error) {
	return wrapTask(n.t.CurrentTask())
}

type nativeParallel struct{ p *Parallel }

func (n nativeParallel) Label() string  { return ompd.Hex(n.p.Addr()) }
func (n nativeParallel) Release() error { return nil }
func (n nativeParallel) Compare(o backend.Parallel) int {
	return n.p.Compare(o.(nativeParallel).p)
}

// HandleKey is the region's team and light-weight team addresses, which
// Compare compares (internal/handles.Keyed).
func (n nativeParallel) HandleKey() [2]uint64 { return [2]uint64{n.p.team, n.p.lwt} }
func (n nativeParallel) Enclosing() (backend.Parallel, error) {
	return wrapParallel(n.p.Enclosing())
}
func (n nativeParallel) Level() (int, error)       { return n.p.Level() }
func (n nativeParallel) ActiveLevel() (int, error) { return n.p.ActiveLevel() }
func (n nativeParallel) TeamSize() (int, error)    { return n.p.TeamSize() }
func (n nativeParallel) Serialized() (bool, error) { return n.p.Serialized(), nil }
func (n nativeParallel) ThreadIn(i int) (backend.Thread, error) {
	return wrapThread(n.p.ThreadIn(i))
}
func (n nativeParallel) TaskIn(i int) (backend.Task, error) {
	return wrapTask(n.p.TaskIn(i))
}
func (n nativeParallel) Function() (ompd.Address, error)  { return n.p.Function() }
func (n nativeParallel) Location() (ompd.Location, error) { return n.p.Location() }

type nativeTask struct{ k *Task }

func (n nativeTask) Label() string  { return ompd.Hex(n.k.Addr()) }
func (n nativeTask) Release() error { return nil }
func (n nativeTask) Compare(o backend.Task) int {
	return n.k.Compare(o.(nativeTask).k)
}

// HandleKey is the task's data and light-weight team addresses, which
// Compare compares (internal/handles.Keyed).
func (n nativeTask) HandleKey() [2]uint64 { return [2]uint64{n.k.td, n.k.lwt} }

func (n nativeTask) Generating() (backend.Task, error) { return wrapTask(n.k.Generating()) }
func (n nativeTask) Scheduling() (backend.Task, error) { return wrapTask(n.k.Scheduling()) }
func (n nativeTask) Parallel() (backend.Parallel, error) {
	return wrapParallel(n.k.Parallel())
}
func (n nativeTask) Flags() (ompd.Flags, backend.FlagSet, error) {
	f, err := n.k.Flags()
	return f, backend.AllFlags, err
}
func (n nativeTask) Function() (ompd.Address, error) { return n.k.Function() }
func (n nativeTask) Frame() (exit, enter ompd.Address, err error) {
	return n.k.Frame()
}
func (n nativeTask) Location() (ompd.Location, error) { return n.k.Location() }

// wrapThread, wrapParallel and wrapTask wrap a native call's handle.
func wrapThread(t *Thread, err error) (backend.Thread, error) {
	if err != nil {
		return nil, err
	}
	return nativeThread{t}, nil
}

func wrapParallel(p *Parallel, err error) (backend.Parallel, error) {
	if err != nil {
		return nil, err
	}
	return nativeParallel{p}, nil
}

func wrapTask(k *Task, err error) (backend.Task, error) {
	if err != nil {
		return nil, err
	}
	return nativeTask{k}, nil
}
