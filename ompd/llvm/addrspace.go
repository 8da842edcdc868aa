package llvm

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// MaxThreads bounds the runtime's thread table: a __kmp_threads_capacity
// above it is treated as corrupt rather than walked.
const MaxThreads = 1 << 16

// AddressSpace is the OMPD address space handle of one OpenMP process
// (ompd_address_space_handle_t).
type AddressSpace struct {
	cb    ompd.Callbacks
	mem   *memory
	sizes ompd.TypeSizes
	state uint64 // ompd_state: nonzero when OMP_DEBUG=enabled turned tracking on
	// stateAt is ompd_state's address: where the runtime lies (Learned).
	stateAt ompd.Address

	once      sync.Once
	threads   []*Thread // every OpenMP thread, by gtid
	byPthread map[uint64]*Thread
	byInfo    map[ompd.Address]*Thread // by kmp_base_info_t address
	walkErr   error

	locks lockFacts // what BlockedOn reads once

	envOnce sync.Once
	env     []string // DisplayControlVars' answer, read once (until Refresh)
	envErr  error

	identMu sync.Mutex
	idents  map[ompd.Address]identLocation // identLocation's answers, by ident_t address

	flagBits atomic.Pointer[taskFlagBits] // taskFlagBits' answer, once it has one without error
}

// identLocation is one answer of AddressSpace.identLocation.
type identLocation struct {
	loc ompd.Location
	err error
}

// ProcessInitialize creates the address space handle of a process whose
// OpenMP runtime is reachable through cb (ompd_process_initialize).
// runtimeHint names the module that holds the runtime; it is passed back
// to cb.SymbolAddr.
//
// It fails with RCIncompatible when the runtime has no OMPD support or its
// layout symbols are missing (a stripped runtime), and with RCUnavailable
// when the runtime has not initialized yet. learned, when not nil, is the
// layout an address space of the same runtime read (AddressSpace.Learned):
// when the runtime lies where it did then, the values it holds are not
// read again.
func ProcessInitialize(cb ompd.Callbacks, runtimeHint string, learned *Learned) (*AddressSpace, error) {
	const op = "ompd_process_initialize"
	sizes, err := cb.Sizes()
	if err != nil {
		return nil, fail(op, ompd.RCCallbackError, err)
	}
	if sizes.Pointer != 8 && sizes.Pointer != 4 {
		return nil, fail(op, ompd.RCUnsupported, fmt.Errorf("pointer size %d", sizes.Pointer))
	}
	lay := newLayout(cb, runtimeHint)
	// Where the runtime lies: also where the state is read just below,
	// whose failure says why there is none.
	stateAt, err := cb.SymbolAddr(stateSymbol, runtimeHint)
	if err == nil && learned != nil && learned.sizes == sizes && stateAt == learned.stateAt {
		maps.Copy(lay.vals, learned.vals)
		maps.Copy(lay.fields, learned.fields)
	}
	as := &AddressSpace{cb: cb, sizes: sizes, stateAt: stateAt, mem: &memory{cb: cb, lay: lay, ptr: sizes.Pointer}}
	st, err := lay.value(layoutKey{prefix: stateSymbol}) // a symbol of its own
	if err != nil {
		return nil, fail(op, ompd.RCIncompatible, err)
	}
	as.state = st
	ki, err := lay.sizeof("kmp_info_t")
	if err != nil {
		return nil, fail(op, ompd.RCIncompatible, err)
	}
	if ki == 0 {
		return nil, fail(op, ompd.RCUnavailable, errors.New("the OpenMP runtime has not initialized its OMPD support yet"))
	}
	return as, nil
}

// stateSymbol is the runtime's OMPD state (ompd_state): whether it tracks
// states, and where the runtime lies for Learned.
const stateSymbol = "ompd_state"

// Learned is the layout an address space read (its layout symbols'
// values, ompd_state's apart), for the next address space of the same
// runtime (ProcessInitialize): the runtime writes them once, as it starts,
// so the same runtime at the same address gives them again. A value still
// 0 is left out, as one the runtime may not have written yet when it was
// read (a rehearsal over a process that was starting): the next address
// space reads it again. Given to the address space of the stop after a
// rehearsal, it spares looking up and reading the values the rehearsal
// read: a third of the read of 4 threads.
type Learned struct {
	sizes   ompd.TypeSizes
	stateAt ompd.Address // ompd_state's address: where the runtime lies
	vals    map[layoutKey]uint64
	fields  map[[2]string][2]uint64
}

// Learned returns the layout as read so far, for ProcessInitialize; nil
// when the address space read no value it was not given (the one of the
// stop after a rehearsal, usually), so that it is not copied again while
// the target is held.
func (as *AddressSpace) Learned() *Learned {
	lay := as.mem.lay
	lay.mu.Lock()
	defer lay.mu.Unlock()
	if lay.learned == 0 {
		return nil
	}
	l := &Learned{sizes: as.sizes, stateAt: as.stateAt, vals: map[layoutKey]uint64{}, fields: map[[2]string][2]uint64{}}
	for k, v := range lay.vals {
		// ompd_state is read anew by each address space.
		if v != 0 && k.prefix != stateSymbol {
			l.vals[k] = v
		}
	}
	for k, v := range lay.fields {
		if v[0] != 0 && v[1] != 0 {
			l.fields[k] = v
		}
	}
	return l
}

// StateTracking reports whether the runtime tracks thread states, task
// frames and ids (it does when the program was started with
// OMP_DEBUG=enabled).
func (as *AddressSpace) StateTracking() bool { return as.state != 0 }

// Sizes returns the target's primitive type sizes.
func (as *AddressSpace) Sizes() ompd.TypeSizes { return as.sizes }

// OMPVersion returns the OpenMP version the runtime implements, e.g. 201611
// for 5.0 (ompd_get_omp_version).
func (as *AddressSpace) OMPVersion() (int, error) {
	v, err := as.mem.globalSized("__kmp_openmp_version", uint64(as.sizes.Int))
	if err != nil {
		return 0, fail("ompd_get_omp_version", ompd.RCError, err)
	}
	return int(v), nil
}

// OMPVersionString returns OMPVersion as a decimal string
// (ompd_get_omp_version_string).
func (as *AddressSpace) OMPVersionString() (string, error) {
	v, err := as.OMPVersion()
	if err != nil {
		return "", err
	}
	return fmt.Sprint(v), nil
}

// DLLLocations returns the names the runtime gives in ompd_dll_locations
// (where its own OMPD library is).
func (as *AddressSpace) DLLLocations() ([]string, error) {
	addr, err := as.cb.SymbolAddr("ompd_dll_locations", as.mem.lay.hint)
	if err != nil {
		return nil, err
	}
	arr, err := as.mem.pointer(addr)
	if err != nil {
		return nil, fmt.Errorf("reading ompd_dll_locations: %w", err)
	}
	if arr == 0 {
		return nil, nil
	}
	var out []string
	for i := 0; i < 64; i++ {
		p, err := as.mem.pointer(arr + uint64(i*as.sizes.Pointer))
		if err != nil {
			return out, fmt.Errorf("reading ompd_dll_locations[%d]: %w", i, err)
		}
		if p == 0 {
			return out, nil
		}
		s, err := as.cb.ReadString(p, maxString)
		if err != nil {
			return out, fmt.Errorf("reading ompd_dll_locations[%d]: %w", i, err)
		}
		out = append(out, s)
	}
	return out, fmt.Errorf("ompd_dll_locations[] at %#x: no terminating NULL within 64 entries", arr)
}

// DisplayControlVars returns the runtime's display control variables as
// NAME=VALUE strings (ompd_get_display_control_vars). They are read once
// (a report asks twice: for the variables and for the lock checks) until
// Refresh; each caller gets its own slice.
func (as *AddressSpace) DisplayControlVars() ([]string, error) {
	as.envOnce.Do(func() { as.env, as.envErr = as.readControlVars() })
	return slices.Clone(as.env), as.envErr
}

// readControlVars reads the display control variables from the runtime's
// ompd_env_block.
func (as *AddressSpace) readControlVars() ([]string, error) {
	const op = "ompd_get_display_control_vars"
	addr, err := as.cb.SymbolAddr("ompd_env_block", as.mem.lay.hint)
	if err != nil {
		return nil, fail(op, ompd.RCError, err)
	}
	block, err := as.mem.pointer(addr)
	if err != nil {
		return nil, fail(op, ompd.RCError, err)
	}
	sizeAddr, err := as.cb.SymbolAddr("ompd_env_block_size", as.mem.lay.hint)
	if err != nil {
		return nil, fail(op, ompd.RCError, err)
	}
	size, err := as.mem.uint(sizeAddr, 8)
	if err != nil {
		return nil, fail(op, ompd.RCError, err)
	}
	if block == 0 || size == 0 {
		return nil, fail(op, ompd.RCUnavailable, errors.New("the runtime has not filled in ompd_env_block"))
	}
	if size > 1<<20 {
		return nil, fail(op, ompd.RCError, fmt.Errorf("ompd_env_block_size %d is larger than 1 MiB", size))
	}
	buf := make([]byte, size)
	if err := as.cb.ReadMemory(block, buf); err != nil {
		return nil, fail(op, ompd.RCError, err)
	}
	var out []string
	for _, line := range strings.Split(string(buf), "\n") {
		line = strings.TrimRight(line, "\x00")
		if line != "" {
			out = append(out, line)
		}
	}
	return out, nil
}

// walkThreads reads the runtime's thread table once.
func (as *AddressSpace) walkThreads() error {
	as.once.Do(func() {
		as.byPthread = make(map[uint64]*Thread)
		as.byInfo = make(map[ompd.Address]*Thread)
		capAddr, err := as.cb.SymbolAddr("__kmp_threads_capacity", as.mem.lay.hint)
		if err != nil {
			as.walkErr = err
			return
		}
		capacity, err := as.mem.int(capAddr, uint64(as.sizes.Int))
		if err != nil {
			as.walkErr = fmt.Errorf("reading __kmp_threads_capacity: %w", err)
			return
		}
		if capacity < 0 || capacity > MaxThreads {
			as.walkErr = fmt.Errorf("__kmp_threads_capacity at %#x is %d, outside 0..%d: the runtime's thread table looks corrupt", capAddr, capacity, MaxThreads)
			return
		}
		tabAddr, err := as.cb.SymbolAddr("__kmp_threads", as.mem.lay.hint)
		if err != nil {
			as.walkErr = err
			return
		}
		tab, err := as.mem.pointer(tabAddr)
		if err != nil {
			as.walkErr = fmt.Errorf("reading __kmp_threads: %w", err)
			return
		}
		if tab == 0 {
			return
		}
		ps := uint64(as.sizes.Pointer)
		entries := make([]byte, uint64(capacity)*ps)
		if err := as.cb.ReadMemory(tab, entries); err != nil {
			as.walkErr = fmt.Errorf("reading __kmp_threads[0..%d] at %#x: %w", capacity, tab, err)
			return
		}
		thOff, err := as.mem.lay.offset("kmp_info_t", "th")
		if err != nil {
			as.walkErr = err
			return
		}
		// Each thread's descriptor lies apart from the others': the
		// field read below is read ahead for all of them at once.
		var ahead []ompd.Address
		for gtid := 0; gtid < int(capacity); gtid++ {
			if info := leUint(entries[uint64(gtid)*ps:], ps); info != 0 {
				t := Thread{as: as, th: info + thOff}
				if a, err := t.pthreadAddr(); err == nil {
					ahead = append(ahead, a)
				}
			}
		}
		ompd.Prefetch(as.cb, ahead)
		for gtid := 0; gtid < int(capacity); gtid++ {
			info := leUint(entries[uint64(gtid)*ps:], ps)
			if info == 0 {
				continue
			}
			t := &Thread{as: as, th: info + thOff, gtid: gtid}
			pt, err := t.pthread()
			if err != nil {
				as.walkErr = fmt.Errorf("reading thread of gtid %d: %w", gtid, err)
				return
			}
			t.pthreadID = pt
			as.threads = append(as.threads, t)
			as.byPthread[pt] = t
			as.byInfo[t.th] = t
		}
	})
	return as.walkErr
}

func leUint(b []byte, n uint64) uint64 {
	var v uint64
	for i := uint64(0); i < n; i++ {
		v |= uint64(b[i]) << (8 * i)
	}
	return v
}

// Threads returns a handle for every thread the runtime knows, in gtid
// order. It is not an OMPD 5.1 call; debuggers otherwise ask per native
// thread with ThreadHandle.
func (as *AddressSpace) Threads() ([]*Thread, error) {
	if err := as.walkThreads(); err != nil {
		return nil, fail("enumerating OpenMP threads", ompd.RCError, err)
	}
	return as.threads, nil
}

// ThreadHandle returns the OpenMP thread handle of a native thread
// (ompd_get_thread_handle). Only ThreadIDPthread ids are understood; a
// native thread that is not an OpenMP thread gives ErrUnavailable.
func (as *AddressSpace) ThreadHandle(kind ompd.ThreadIDKind, id uint64) (*Thread, error) {
	const op = "ompd_get_thread_handle"
	if kind != ompd.ThreadIDPthread {
		return nil, fail(op, ompd.RCUnsupported, fmt.Errorf("thread id kind %d", kind))
	}
	if err := as.walkThreads(); err != nil {
		return nil, fail(op, ompd.RCError, err)
	}
	t, ok := as.byPthread[id]
	if !ok {
		return nil, fail(op, ompd.RCUnavailable, fmt.Errorf("pthread %#x is not an OpenMP thread", id))
	}
	ctx, err := as.cb.ThreadContext(kind, id)
	if err != nil {
		return nil, fail(op, ompd.RCCallbackError, err)
	}
	c := *t
	c.ctx = ctx
	return &c, nil
}
