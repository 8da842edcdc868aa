//go:build cgo

package dll

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/ompd/backend"
)

// BuiltIn reports whether this build can load OMPD libraries.
const BuiltIn = true

// maxMessages bounds the library's printed messages that are kept.
const maxMessages = 256

// registry holds the libraries this process has loaded and the sessions
// open on them. dlopen and each library's ompd_initialize are process-wide,
// so this is too: one entry per path, initialized once, never unloaded.
var registry = &libraries{libs: map[string]*library{}, sessions: map[uintptr]*session{}}

// libraries is the type of registry.
type libraries struct {
	mu       sync.Mutex // libs, sessions and nextID
	libs     map[string]*library
	sessions map[uintptr]*session // by the id their C contexts carry
	nextID   uintptr

	// msgMu guards messages on its own: a library may print while
	// mu is held around its ompd_initialize.
	msgMu    sync.Mutex
	messages []string
}

func (r *libraries) print(s string) {
	r.msgMu.Lock()
	defer r.msgMu.Unlock()
	if len(r.messages) < maxMessages {
		r.messages = append(r.messages, strings.TrimRight(s, "\n"))
	}
}

// session returns the open session with the given id, or nil: a context of
// a closed session is stale.
func (r *libraries) session(id uintptr) *session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sessions[id]
}

// library is one loaded, initialized OMPD library.
type library struct {
	path    string
	lib     *C.oi_lib // C memory: the entry points
	version string    // ompd_get_version_string

	// session serializes the library's address spaces: LLVM's library
	// keeps per-process facts (ompd_state, type sizes) in globals, so one
	// address space at a time is all it can serve correctly.
	session sync.Mutex
}

// load returns the library at path, loading and initializing it on first
// use.
func load(path string) (*library, error) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if l, ok := registry.libs[path]; ok {
		return l, nil
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	lib := (*C.oi_lib)(C.calloc(1, C.sizeof_oi_lib))
	var errbuf [512]C.char
	if C.oi_load(cpath, lib, &errbuf[0], C.size_t(len(errbuf))) != 0 {
		C.free(unsafe.Pointer(lib))
		return nil, fmt.Errorf("loading OMPD library %s: %s", path, C.GoString(&errbuf[0]))
	}
	l := &library{path: path, lib: lib}
	var v C.ompd_word_t
	if rc := C.oi_get_api_version(lib, &v); rc != C.OI_RC_OK {
		C.oi_unload(lib)
		C.free(unsafe.Pointer(lib))
		return nil, fmt.Errorf("loading OMPD library %s: ompd_get_api_version: %v", path, ompd.RC(rc))
	}
	var vs *C.char
	if C.oi_get_version_string(lib, &vs) == C.OI_RC_OK && vs != nil {
		l.version = C.GoString(vs)
	}
	if rc := C.oi_initialize(lib, v); rc != C.OI_RC_OK {
		C.oi_unload(lib)
		C.free(unsafe.Pointer(lib))
		return nil, fmt.Errorf("loading OMPD library %s: ompd_initialize(%d): %v", path, int64(v), ompd.RC(rc))
	}
	registry.libs[path] = l
	return l, nil
}

// session is the Go side of one address space context.
type session struct {
	lib  *library
	cb   Callbacks
	hint string
	id   uintptr // the key in registry.sessions, carried by its C contexts
	ctx  *C.ompd_address_space_context_t
	live atomic.Int64 // thread, parallel and task handles not yet released

	mu       sync.Mutex
	lastErr  error
	threads  []ompd.ThreadContext // thread contexts by index-1
	tctx     []*C.ompd_thread_context_t
	byID     map[[2]uint64]int // (kind, id) -> index-1
	messages int               // registry.messages before the session
}

func (s *session) noteErr(err error) {
	s.mu.Lock()
	s.lastErr = err
	s.mu.Unlock()
}

// takeErr returns and clears the last callback error.
func (s *session) takeErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.lastErr
	s.lastErr = nil
	return err
}

func (s *session) threadContext(index uintptr) (ompd.ThreadContext, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index == 0 || int(index) > len(s.threads) {
		return nil, false
	}
	return s.threads[index-1], true
}

func (s *session) newThreadContext(kind ompd.ThreadIDKind, id uint64) (*C.ompd_thread_context_t, error) {
	key := [2]uint64{uint64(kind), id}
	s.mu.Lock()
	if i, ok := s.byID[key]; ok {
		p := s.tctx[i]
		s.mu.Unlock()
		return p, nil
	}
	s.mu.Unlock()
	ctx, err := s.cb.ThreadContext(kind, id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.threads = append(s.threads, ctx)
	p := C.oi_new_thread_context(C.uintptr_t(s.id), C.uintptr_t(len(s.threads)))
	if p == nil {
		s.threads = s.threads[:len(s.threads)-1]
		return nil, &ompd.Error{Op: "get_thread_context_for_thread_id", RC: ompd.RCNoMem}
	}
	s.tctx = append(s.tctx, p)
	s.byID[key] = len(s.tctx) - 1
	return p, nil
}

// fail turns a library return code into an error naming the call and,
// when a callback failed underneath, why.
func (s *session) fail(op string, rc C.ompd_rc_t) error {
	return &ompd.Error{Op: op, RC: ompd.RC(rc), Err: s.takeErr()}
}

// call makes one call into the library and turns its return code into an
// error naming op and, when a callback failed during this call, why. A
// callback error from an earlier call that the library tolerated is not
// blamed.
func (s *session) call(op string, f func() C.ompd_rc_t) error {
	s.takeErr()
	if rc := f(); rc != C.OI_RC_OK {
		return s.fail(op, rc)
	}
	return nil
}

// callOrNone is call for the calls that follow a pointer to another task.
// LLVM's library answers ompd_rc_unsupported when that pointer is NULL
// (there is no such task), where OMPD's code for "no such object" is
// ompd_rc_unavailable; the answer is reported as the latter, with the
// library's own code kept in the message.
func (s *session) callOrNone(op string, f func() C.ompd_rc_t) error {
	err := s.call(op, f)
	if ompd.RCOf(err) == ompd.RCUnsupported {
		return &ompd.Error{Op: op, RC: ompd.RCUnavailable, Err: fmt.Errorf("the library answered %v", ompd.RCUnsupported)}
	}
	return err
}

// Open loads the OMPD library at path (once per process) and creates an
// address space handle for the process cb reaches (ompd_process_initialize).
// runtimeHint names the runtime's module for symbol lookups. The library
// serves one address space at a time: Open waits until the previous one
// is released.
func Open(path string, cb Callbacks, runtimeHint string) (backend.AddressSpace, error) {
	l, err := load(path)
	if err != nil {
		return nil, err
	}
	l.session.Lock()
	s := &session{lib: l, cb: cb, hint: runtimeHint, byID: map[[2]uint64]int{}}
	registry.mu.Lock()
	registry.nextID++
	s.id = registry.nextID
	registry.sessions[s.id] = s
	registry.mu.Unlock()
	registry.msgMu.Lock()
	s.messages = len(registry.messages)
	registry.msgMu.Unlock()
	s.ctx = C.oi_new_as_context(C.uintptr_t(s.id))
	if s.ctx == nil {
		s.close()
		return nil, fmt.Errorf("OMPD library %s: out of memory", path)
	}
	var h *C.ompd_address_space_handle_t
	if rc := C.oi_process_initialize(l.lib, s.ctx, &h); rc != C.OI_RC_OK {
		err := s.fail("ompd_process_initialize", rc)
		s.close()
		return nil, fmt.Errorf("OMPD library %s: %w", path, err)
	}
	as := &AddressSpace{s: s, h: h}
	as.tracking = as.readStateTracking()
	if err := as.enumerateICVs(); err != nil {
		as.Release()
		return nil, fmt.Errorf("OMPD library %s: %w", path, err)
	}
	return as, nil
}

// close ends a session: its contexts become stale and the library is free
// for the next one. The address space context itself is not freed, since a
// library may keep caches keyed by its address.
func (s *session) close() {
	registry.mu.Lock()
	_, open := registry.sessions[s.id]
	delete(registry.sessions, s.id)
	registry.mu.Unlock()
	if !open {
		return
	}
	s.mu.Lock()
	for _, p := range s.tctx {
		C.oi_free(unsafe.Pointer(p))
	}
	s.tctx, s.threads = nil, nil
	s.mu.Unlock()
	s.lib.session.Unlock()
}

// AddressSpace is an address space handle of a loaded OMPD library.
type AddressSpace struct {
	s        *session
	h        *C.ompd_address_space_handle_t
	icvs     []ompd.ICV
	byName   map[string]ompd.ICV
	tracking bool // the runtime's ompd_state is nonzero
	released bool
}

// Library returns the loaded library's path and version string.
func (as *AddressSpace) Library() (path, version string) { return as.s.lib.path, as.s.lib.version }

// Messages returns what the library printed (print_string) during this
// session.
func (as *AddressSpace) Messages() []string {
	registry.msgMu.Lock()
	defer registry.msgMu.Unlock()
	return append([]string(nil), registry.messages[min(as.s.messages, len(registry.messages)):]...)
}

// Backend implements backend.AddressSpace.
func (as *AddressSpace) Backend() string { return backend.NameDLL }

// StateTracking implements backend.AddressSpace: the runtime's
// ompd_state, read once when the address space was created, as the library
// itself does.
func (as *AddressSpace) StateTracking() bool { return as.tracking }

// readStateTracking reads the runtime's ompd_state.
func (as *AddressSpace) readStateTracking() bool {
	addr, err := as.s.cb.SymbolAddr("ompd_state", as.s.hint)
	if err != nil {
		return false
	}
	var b [8]byte
	if err := as.s.cb.ReadMemory(addr, b[:]); err != nil {
		return false
	}
	return b != [8]byte{}
}

// OMPVersion implements backend.AddressSpace.
func (as *AddressSpace) OMPVersion() (int, error) {
	var v C.ompd_word_t
	if err := as.s.call("ompd_get_omp_version", func() C.ompd_rc_t { return C.oi_get_omp_version(as.s.lib.lib, as.h, &v) }); err != nil {
		return 0, err
	}
	return int(v), nil
}

// OMPVersionString implements backend.AddressSpace. LLVM's library
// allocates the string with alloc_memory; it is released here.
func (as *AddressSpace) OMPVersionString() (string, error) {
	var p *C.char
	if err := as.s.call("ompd_get_omp_version_string", func() C.ompd_rc_t { return C.oi_get_omp_version_string(as.s.lib.lib, as.h, &p) }); err != nil {
		return "", err
	}
	if p == nil {
		return "", nil
	}
	defer C.free(unsafe.Pointer(p))
	return C.GoString(p), nil
}

// CheckThreads implements backend.AddressSpace: the library has no such
// check, each thread handle reports its own failure.
func (as *AddressSpace) CheckThreads() error { return nil }

// ThreadHandle implements backend.AddressSpace.
func (as *AddressSpace) ThreadHandle(kind ompd.ThreadIDKind, id uint64) (backend.Thread, error) {
	var th *C.ompd_thread_handle_t
	cid := C.uint64_t(id)
	if err := as.s.call("ompd_get_thread_handle", func() C.ompd_rc_t {
		return C.oi_get_thread_handle(as.s.lib.lib, as.h, C.ompd_thread_id_t(kind), 8, unsafe.Pointer(&cid), &th)
	}); err != nil {
		return nil, err
	}
	return as.thread(th), nil
}

func (as *AddressSpace) enumerateICVs() error {
	as.byName = map[string]ompd.ICV{}
	cur := C.ompd_icv_id_t(0) // ompd_icv_undefined
	for i := 0; i < 1024; i++ {
		var next C.ompd_icv_id_t
		var name *C.char
		var scope C.ompd_scope_t
		var more C.int
		if err := as.s.call("ompd_enumerate_icvs", func() C.ompd_rc_t {
			return C.oi_enumerate_icvs(as.s.lib.lib, as.h, cur, &next, &name, &scope, &more)
		}); err != nil {
			return err
		}
		icv := ompd.ICV{ID: ompd.ICVID(next), Name: C.GoString(name), Scope: ompd.Scope(scope)}
		as.icvs = append(as.icvs, icv)
		as.byName[icv.Name] = icv
		if more == 0 {
			return nil
		}
		cur = next
	}
	return errors.New("ompd_enumerate_icvs: more than 1024 ICVs")
}

// ICVs implements backend.AddressSpace.
func (as *AddressSpace) ICVs() ([]ompd.ICV, error) { return as.icvs, nil }

// ICV implements backend.AddressSpace. A value the library gives only as
// text or only in part (ompd_rc_incompatible or ompd_rc_incomplete from
// ompd_get_icv_from_scope) is read with ompd_get_icv_string_from_scope.
func (as *AddressSpace) ICV(handle any, icv ompd.ICV) (ompd.Value, error) {
	var p unsafe.Pointer
	switch h := handle.(type) {
	case *AddressSpace:
		p = unsafe.Pointer(h.h)
	case *Thread:
		p = unsafe.Pointer(h.h)
	case *Parallel:
		p = unsafe.Pointer(h.h)
	case *Task:
		p = unsafe.Pointer(h.h)
	default:
		return ompd.Value{}, fmt.Errorf("ICV %s: %T is no handle of the dll backend", icv.Name, handle)
	}
	lib := as.s.lib.lib
	var v C.ompd_word_t
	as.s.takeErr()
	rc := C.oi_get_icv_from_scope(lib, p, C.ompd_scope_t(icv.Scope), C.ompd_icv_id_t(icv.ID), &v)
	if rc == C.OI_RC_OK {
		return ompd.Value{Num: int64(v)}, nil
	}
	// ompd_rc_incompatible: the value is text; ompd_rc_incomplete: it is
	// a list, of which only the first element was returned. Either way
	// the whole value is the string form.
	if rc != C.OI_RC_INCOMPATIBLE && rc != C.OI_RC_INCOMPLETE {
		return ompd.Value{}, as.s.fail("ompd_get_icv_from_scope", rc)
	}
	var str *C.char
	if err := as.s.call("ompd_get_icv_string_from_scope", func() C.ompd_rc_t {
		return C.oi_get_icv_string_from_scope(lib, p, C.ompd_scope_t(icv.Scope), C.ompd_icv_id_t(icv.ID), &str)
	}); err != nil {
		return ompd.Value{}, err
	}
	if str == nil {
		return ompd.Value{IsString: true}, nil
	}
	defer C.free(unsafe.Pointer(str))
	text := C.GoString(str)
	if n, err := strconv.ParseInt(text, 10, 64); rc == C.OI_RC_INCOMPLETE && err == nil {
		// LLVM's library says incomplete for an nthreads-var list that has
		// one element left from the thread's level (its text shows just
		// that one): one element is a number, as with the native backend.
		return ompd.Value{Num: n}, nil
	}
	return ompd.Value{Str: text, IsString: true}, nil
}

// icvNum reads a numeric ICV by name from handle.
func (as *AddressSpace) icvNum(handle any, name string) (int64, error) {
	icv, ok := as.byName[name]
	if !ok {
		return 0, fmt.Errorf("the OMPD library has no ICV %s: %w", name, backend.ErrUnsupported)
	}
	v, err := as.ICV(handle, icv)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	if v.IsString {
		return 0, fmt.Errorf("%s: the library gives text %q, not a number", name, v.Str)
	}
	return v.Num, nil
}

// DisplayControlVars implements backend.AddressSpace.
func (as *AddressSpace) DisplayControlVars() ([]string, error) {
	var vars **C.char
	lib := as.s.lib.lib
	if err := as.s.call("ompd_get_display_control_vars", func() C.ompd_rc_t {
		return C.oi_get_display_control_vars(lib, as.h, (***C.char)(unsafe.Pointer(&vars)))
	}); err != nil {
		return nil, err
	}
	if vars == nil {
		return nil, nil
	}
	var out []string
	for _, p := range unsafe.Slice(vars, 4096) {
		if p == nil {
			break
		}
		out = append(out, C.GoString(p))
	}
	if err := as.s.call("ompd_rel_display_control_vars", func() C.ompd_rc_t { return C.oi_rel_display_control_vars(lib, (***C.char)(unsafe.Pointer(&vars))) }); err != nil {
		return out, err
	}
	return out, nil
}

// QueuedTasks implements backend.AddressSpace: no OMPD call lists them.
func (as *AddressSpace) QueuedTasks() ([]backend.Task, error) {
	return nil, fmt.Errorf("queued tasks: %w", backend.ErrUnsupported)
}

// BlockedTasks implements backend.AddressSpace: no OMPD call walks the
// dependence graph.
func (as *AddressSpace) BlockedTasks([]backend.Task) ([]backend.BlockedTask, error) {
	return nil, fmt.Errorf("tasks waiting for dependences: %w", backend.ErrUnsupported)
}

// Release implements backend.AddressSpace.
func (as *AddressSpace) Release() error {
	if as.released {
		return errors.New("ompd_rel_address_space_handle: released twice")
	}
	// The library's handles must go before its address space: the
	// builder releases them first, and a leak is reported.
	as.released = true
	var err error
	if n := as.s.live.Load(); n != 0 {
		err = fmt.Errorf("ompd_rel_address_space_handle: %d thread, parallel or task handles were not released", n)
	}
	if as.h != nil {
		err = errors.Join(err, as.s.call("ompd_rel_address_space_handle", func() C.ompd_rc_t {
			return C.oi_rel_address_space_handle(as.s.lib.lib, as.h)
		}))
	}
	as.s.close()
	return err
}

// handle is what the three handle kinds share.
type handle struct {
	as       *AddressSpace
	released bool
}

func (h *handle) Label() string { return "" }

func (h *handle) release(op string, rel func() C.ompd_rc_t) error {
	if h.released {
		return fmt.Errorf("%s: released twice", op)
	}
	h.released = true
	h.as.s.live.Add(-1)
	return h.as.s.call(op, rel)
}

// Thread is a thread handle of a loaded OMPD library.
type Thread struct {
	h *C.ompd_thread_handle_t
	handle
}

func (as *AddressSpace) thread(h *C.ompd_thread_handle_t) *Thread {
	as.s.live.Add(1)
	return &Thread{h: h, handle: handle{as: as}}
}

// Release implements backend.Handle.
func (t *Thread) Release() error {
	return t.release("ompd_rel_thread_handle", func() C.ompd_rc_t { return C.oi_rel_thread_handle(t.as.s.lib.lib, t.h) })
}

// Compare implements backend.Thread.
func (t *Thread) Compare(o backend.Thread) int {
	var c C.int
	if rc := C.oi_thread_handle_compare(t.as.s.lib.lib, t.h, o.(*Thread).h, &c); rc != C.OI_RC_OK {
		return 1 // not known to be the same object
	}
	return int(c)
}

// GTID implements backend.Thread: no OMPD call gives it.
func (t *Thread) GTID() (int, error) {
	return 0, fmt.Errorf("global thread id: %w", backend.ErrUnsupported)
}

// ID implements backend.Thread.
func (t *Thread) ID(kind ompd.ThreadIDKind) (uint64, error) {
	var v C.uint64_t
	if err := t.as.s.call("ompd_get_thread_id", func() C.ompd_rc_t {
		return C.oi_get_thread_id(t.as.s.lib.lib, t.h, C.ompd_thread_id_t(kind), 8, unsafe.Pointer(&v))
	}); err != nil {
		return 0, err
	}
	return uint64(v), nil
}

// ThreadNum implements backend.Thread (thread-num-var).
func (t *Thread) ThreadNum() (int, error) {
	v, err := t.as.icvNum(t, "thread-num-var")
	return int(v), err
}

// State implements backend.Thread.
func (t *Thread) State() (ompd.State, uint64, error) {
	var st C.ompd_word_t
	var wait C.ompd_wait_id_t
	if err := t.as.s.call("ompd_get_state", func() C.ompd_rc_t { return C.oi_get_state(t.as.s.lib.lib, t.h, &st, &wait) }); err != nil {
		return 0, 0, err
	}
	return ompd.State(st), uint64(wait), nil
}

// CurrentParallel implements backend.Thread.
func (t *Thread) CurrentParallel() (backend.Parallel, error) {
	var p *C.ompd_parallel_handle_t
	if err := t.as.s.call("ompd_get_curr_parallel_handle", func() C.ompd_rc_t { return C.oi_get_curr_parallel_handle(t.as.s.lib.lib, t.h, &p) }); err != nil {
		return nil, err
	}
	return t.as.parallel(p), nil
}

// CurrentTask implements backend.Thread.
func (t *Thread) CurrentTask() (backend.Task, error) {
	var k *C.ompd_task_handle_t
	if err := t.as.s.call("ompd_get_curr_task_handle", func() C.ompd_rc_t { return C.oi_get_curr_task_handle(t.as.s.lib.lib, t.h, &k) }); err != nil {
		return nil, err
	}
	return t.as.task(k), nil
}

// Parallel is a parallel handle of a loaded OMPD library.
type Parallel struct {
	h *C.ompd_parallel_handle_t
	handle
}

func (as *AddressSpace) parallel(h *C.ompd_parallel_handle_t) *Parallel {
	as.s.live.Add(1)
	return &Parallel{h: h, handle: handle{as: as}}
}

// Release implements backend.Handle.
func (p *Parallel) Release() error {
	return p.release("ompd_rel_parallel_handle", func() C.ompd_rc_t { return C.oi_rel_parallel_handle(p.as.s.lib.lib, p.h) })
}

// Compare implements backend.Parallel.
func (p *Parallel) Compare(o backend.Parallel) int {
	var c C.int
	if rc := C.oi_parallel_handle_compare(p.as.s.lib.lib, p.h, o.(*Parallel).h, &c); rc != C.OI_RC_OK {
		return 1 // not known to be the same object
	}
	return int(c)
}

// Enclosing implements backend.Parallel.
func (p *Parallel) Enclosing() (backend.Parallel, error) {
	var e *C.ompd_parallel_handle_t
	if err := p.as.s.call("ompd_get_enclosing_parallel_handle", func() C.ompd_rc_t { return C.oi_get_enclosing_parallel_handle(p.as.s.lib.lib, p.h, &e) }); err != nil {
		return nil, err
	}
	return p.as.parallel(e), nil
}

// Level implements backend.Parallel (levels-var).
func (p *Parallel) Level() (int, error) {
	v, err := p.as.icvNum(p, "levels-var")
	return int(v), err
}

// ActiveLevel implements backend.Parallel (active-levels-var).
func (p *Parallel) ActiveLevel() (int, error) {
	v, err := p.as.icvNum(p, "active-levels-var")
	return int(v), err
}

// TeamSize implements backend.Parallel (team-size-var).
func (p *Parallel) TeamSize() (int, error) {
	v, err := p.as.icvNum(p, "team-size-var")
	return int(v), err
}

// Serialized implements backend.Parallel: no OMPD call tells.
func (p *Parallel) Serialized() (bool, error) {
	return false, fmt.Errorf("serialized: %w", backend.ErrUnsupported)
}

// ThreadIn implements backend.Parallel.
func (p *Parallel) ThreadIn(n int) (backend.Thread, error) {
	var t *C.ompd_thread_handle_t
	if err := p.as.s.call("ompd_get_thread_in_parallel", func() C.ompd_rc_t { return C.oi_get_thread_in_parallel(p.as.s.lib.lib, p.h, C.int(n), &t) }); err != nil {
		return nil, err
	}
	return p.as.thread(t), nil
}

// TaskIn implements backend.Parallel.
func (p *Parallel) TaskIn(n int) (backend.Task, error) {
	var k *C.ompd_task_handle_t
	if err := p.as.s.call("ompd_get_task_in_parallel", func() C.ompd_rc_t { return C.oi_get_task_in_parallel(p.as.s.lib.lib, p.h, C.int(n), &k) }); err != nil {
		return nil, err
	}
	return p.as.task(k), nil
}

// Function implements backend.Parallel: OMPD has no call for a region's
// function, so it is the entry point of the implicit task of thread 0.
func (p *Parallel) Function() (ompd.Address, error) {
	k, err := p.TaskIn(0)
	if err != nil {
		return 0, err
	}
	defer k.Release()
	return k.Function()
}

// Location implements backend.Parallel: no OMPD call gives it.
func (p *Parallel) Location() (ompd.Location, error) {
	return ompd.Location{}, fmt.Errorf("construct location: %w", backend.ErrUnsupported)
}

// Task is a task handle of a loaded OMPD library.
type Task struct {
	h *C.ompd_task_handle_t
	handle
}

func (as *AddressSpace) task(h *C.ompd_task_handle_t) *Task {
	as.s.live.Add(1)
	return &Task{h: h, handle: handle{as: as}}
}

// Release implements backend.Handle.
func (k *Task) Release() error {
	return k.release("ompd_rel_task_handle", func() C.ompd_rc_t { return C.oi_rel_task_handle(k.as.s.lib.lib, k.h) })
}

// Compare implements backend.Task.
func (k *Task) Compare(o backend.Task) int {
	var c C.int
	if rc := C.oi_task_handle_compare(k.as.s.lib.lib, k.h, o.(*Task).h, &c); rc != C.OI_RC_OK {
		return 1 // not known to be the same object
	}
	return int(c)
}

// Generating implements backend.Task.
func (k *Task) Generating() (backend.Task, error) {
	var g *C.ompd_task_handle_t
	if err := k.as.s.callOrNone("ompd_get_generating_task_handle", func() C.ompd_rc_t { return C.oi_get_generating_task_handle(k.as.s.lib.lib, k.h, &g) }); err != nil {
		return nil, err
	}
	return k.as.task(g), nil
}

// Scheduling implements backend.Task.
func (k *Task) Scheduling() (backend.Task, error) {
	var s *C.ompd_task_handle_t
	if err := k.as.s.callOrNone("ompd_get_scheduling_task_handle", func() C.ompd_rc_t { return C.oi_get_scheduling_task_handle(k.as.s.lib.lib, k.h, &s) }); err != nil {
		return nil, err
	}
	return k.as.task(s), nil
}

// Parallel implements backend.Task.
func (k *Task) Parallel() (backend.Parallel, error) {
	var p *C.ompd_parallel_handle_t
	if err := k.as.s.call("ompd_get_task_parallel_handle", func() C.ompd_rc_t { return C.oi_get_task_parallel_handle(k.as.s.lib.lib, k.h, &p) }); err != nil {
		return nil, err
	}
	return k.as.parallel(p), nil
}

// Flags implements backend.Task: explicit and final come from the task
// ICVs implicit-task-var and final-task-var; OMPD gives no others.
func (k *Task) Flags() (ompd.Flags, backend.FlagSet, error) {
	var f ompd.Flags
	imp, err := k.as.icvNum(k, "implicit-task-var")
	if err != nil {
		return f, 0, err
	}
	f.Explicit = imp == 0
	fin, err := k.as.icvNum(k, "final-task-var")
	if err != nil {
		return f, backend.FlagExplicit, err
	}
	f.Final = fin != 0
	return f, backend.FlagExplicit | backend.FlagFinal, nil
}

// Function implements backend.Task.
func (k *Task) Function() (ompd.Address, error) {
	var a C.ompd_address_t
	if err := k.as.s.call("ompd_get_task_function", func() C.ompd_rc_t { return C.oi_get_task_function(k.as.s.lib.lib, k.h, &a) }); err != nil {
		return 0, err
	}
	return ompd.Address(a.address), nil
}

// Frame implements backend.Task.
func (k *Task) Frame() (exit, enter ompd.Address, err error) {
	var x, e C.ompd_frame_info_t
	if err := k.as.s.call("ompd_get_task_frame", func() C.ompd_rc_t { return C.oi_get_task_frame(k.as.s.lib.lib, k.h, &x, &e) }); err != nil {
		return 0, 0, err
	}
	return ompd.Address(x.frame_address.address), ompd.Address(e.frame_address.address), nil
}

// Location implements backend.Task: no OMPD call gives it.
func (k *Task) Location() (ompd.Location, error) {
	return ompd.Location{}, fmt.Errorf("construct location: %w", backend.ErrUnsupported)
}
