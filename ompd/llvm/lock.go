package llvm

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// What libomp records of the locks its threads wait for (LLVM 13 to 19,
// built with dynamic locks, as on Linux):
//
//   - Only the queuing lock's acquisition sets a thread's OMPT state: while
//     it waits in the queue its state is wait_lock and its wait id the
//     address of the kmp_queuing_lock_t (an adaptive or RTM queuing lock
//     starts with one). That is the lock behind omp_set_lock and
//     omp_set_nest_lock with libomp's default lock kind (an indirect lock:
//     the user's omp_lock_t holds an index into the runtime's table of
//     indirect locks, whose entry points to this object), behind critical
//     sections (the kmp_critical_name holds a pointer to the indirect lock)
//     and behind the locks of atomic constructs (__kmp_atomic_lock and its
//     siblings). __kmpc_critical sets wait_critical only in a copy of the
//     thread's OMPT record, so a thread waiting for a critical section
//     shows wait_lock too. Test-and-set, futex, ticket and DRDPA locks
//     change no state: their waiters show none, and have no wait id.
//   - The queuing lock tells its kind itself: initialized points to the
//     lock while it is initialized; depth_locked is -1 for a simple lock
//     and >= 0 for a nestable one; flags has kmp_lf_critical_section (1)
//     for a critical section's lock.
//   - owner_id is the owner's gtid+1, 0 when none is recorded. A nestable
//     lock records its owner always. A simple lock and a critical section
//     record it only when KMP_CONSISTENCY_CHECK=all (the acquisition
//     "with checks" writes it after taking the lock); otherwise owner_id
//     stays 0 while the lock is held, and nothing else in the runtime
//     names the holder (head_id and tail_id are the first and last
//     waiters, gtid+1, head_id -1 when held without waiters, 0 when free).
//     The locks of atomic constructs never record their owner.
//   - A test-and-set lock's poll word holds ((gtid+1) << 8) | tag and a
//     futex lock's ((gtid+1) << 9 | waiters) << 8 | tag: direct locks always
//     record the owner, but their waiters have no wait id that would lead
//     here; the lock is found from the waiter's call instead (userlock.go).

// kmpLfCriticalSection is the flag of a critical section's lock
// (kmp_lock_flags_t kmp_lf_critical_section).
const kmpLfCriticalSection = 1

// atomicLockNames are the runtime's locks of atomic constructs, globals of
// kmp_atomic.cpp (kmp_atomic_lock_t: a queuing lock).
var atomicLockNames = []string{
	"__kmp_atomic_lock", "__kmp_atomic_lock_1i", "__kmp_atomic_lock_2i",
	"__kmp_atomic_lock_4i", "__kmp_atomic_lock_4r", "__kmp_atomic_lock_8i",
	"__kmp_atomic_lock_8r", "__kmp_atomic_lock_8c", "__kmp_atomic_lock_10r",
	"__kmp_atomic_lock_16r", "__kmp_atomic_lock_16c", "__kmp_atomic_lock_20c",
	"__kmp_atomic_lock_32c",
}

// lockFacts are what BlockedOn reads once per address space.
type lockFacts struct {
	once sync.Once
	// atomic holds the addresses of the atomic constructs' locks; nil
	// when not every one of them could be found (a stripped runtime).
	atomic map[ompd.Address]bool
	// checks is KMP_CONSISTENCY_CHECK as the runtime shows it in its
	// environment block: "all", "none" or "" when unknown. It is read
	// (consistencyChecks) only to explain a lock that records no owner:
	// the block is the runtime's whole environment, which most reports
	// do not need.
	checksOnce sync.Once
	checks     string
	// entries are the runtime's entry points that take a lock, by
	// address; entryAddrs their addresses.
	entries    map[ompd.Address]lockEntry
	entryAddrs []ompd.Address
	// iLockTable is the address of the table of indirect locks, 0 when
	// the runtime's symbols do not give it.
	iLockTable ompd.Address
}

func (as *AddressSpace) lockFacts() *lockFacts {
	f := &as.locks
	f.once.Do(func() {
		atomic := map[ompd.Address]bool{}
		for _, name := range atomicLockNames {
			addr, err := as.cb.SymbolAddr(name, as.mem.lay.hint)
			if err != nil || addr == 0 {
				atomic = nil
				break
			}
			atomic[addr] = true
		}
		f.atomic = atomic
		f.lockEntryAddrs(as)
	})
	return f
}

// consistencyChecks is KMP_CONSISTENCY_CHECK as the runtime shows it
// (lockFacts.checks), read on first use.
func (as *AddressSpace) consistencyChecks() string {
	f := &as.locks
	f.checksOnce.Do(func() {
		if vars, err := as.DisplayControlVars(); err == nil {
			for _, v := range vars {
				if val, ok := strings.CutPrefix(v, "KMP_CONSISTENCY_CHECK="); ok {
					f.checks = strings.ToLower(strings.Trim(val, "'\""))
				}
			}
		}
	})
	return f.checks
}

// BlockedOn says what the thread waits for when it waits for a lock: its
// kind (lock, nest_lock, critical, atomic), its object and the thread that
// holds it, or why that is not known.
//
// With state tracking the thread waits for a lock when its OMPT state is a
// lock wait (wait_lock, and wait_mutex, wait_critical and wait_atomic,
// which libomp does not set today), and the wait id is the runtime's lock
// object. Without it, or to name the user's object, the call by which the
// thread entered the runtime (ompd.CallSiteReader: omp_set_lock,
// omp_set_nest_lock, __kmpc_critical and the like) gives the user's lock
// or critical section, which leads to the runtime's lock (userlock.go).
//
// Test-and-set, futex, ticket and DRDPA locks set no state: a thread in
// state work_parallel or work_serial is asked for its call too.
//
// nil for every other state: a barrier, taskwait, taskgroup, ordered or
// idle thread has no holder, and its state alone says what
// internal/waits needs (it derives those waits from the state, the same
// for every backend). nil too for a thread that holds the lock it is in
// the middle of taking. Not an OMPD 5.1 call: the lock's layout comes
// from TypeLayouts.
func (t *Thread) BlockedOn() (*ompd.Wait, error) {
	var w *ompd.Wait
	if t.as.StateTracking() {
		st, wid, err := t.State()
		if err != nil {
			return nil, err
		}
		switch st {
		case ompd.StateWaitLock, ompd.StateWaitMutex, ompd.StateWaitCritical, ompd.StateWaitAtomic:
			w = t.as.lockWait(st, wid)
		case ompd.StateWorkParallel, ompd.StateWorkSerial:
			// Test-and-set, futex, ticket and DRDPA locks set no
			// state: their waiters work, as far as the state shows.
		default:
			return nil, nil
		}
	}
	return t.userLockWait(w), nil
}

// queuingLock is what BlockedOn reads of a kmp_base_queuing_lock_t.
type queuingLock struct {
	initialized ompd.Address
	headID      int32
	ownerID     int32
	depth       int32
	flags       uint32
}

// queuingLockFields are the fields of kmp_base_queuing_lock_t it reads.
var queuingLockFields = []string{"initialized", "head_id", "owner_id", "depth_locked", "flags"}

// errLockLayout marks a lock read that failed for want of the lock's
// layout (not of its memory).
type errLockLayout struct{ err error }

func (e errLockLayout) Error() string { return e.err.Error() }
func (e errLockLayout) Unwrap() error { return e.err }

func (as *AddressSpace) readQueuingLock(addr ompd.Address) (queuingLock, error) {
	const typ = "kmp_base_queuing_lock_t"
	tl, err := as.typeLayouts()
	if err != nil {
		return queuingLock{}, errLockLayout{err}
	}
	for _, f := range queuingLockFields {
		if _, _, err := tl.FieldLayout(typ, f); err != nil {
			return queuingLock{}, errLockLayout{err}
		}
	}
	var v [5]uint64
	for i, f := range queuingLockFields {
		if v[i], err = as.readTyped(addr, typ, f); err != nil {
			return queuingLock{}, err
		}
	}
	return queuingLock{initialized: v[0], headID: int32(v[1]), ownerID: int32(v[2]), depth: int32(v[3]), flags: uint32(v[4])}, nil
}

// lockWait is the wait of a thread in state st on the lock whose wait id
// is wid.
func (as *AddressSpace) lockWait(st ompd.State, wid uint64) *ompd.Wait {
	w := &ompd.Wait{What: ompd.WaitLock, Object: wid}
	switch st {
	case ompd.StateWaitCritical:
		w.What = ompd.WaitCritical
	case ompd.StateWaitAtomic:
		w.What = ompd.WaitAtomic
	}
	if wid == 0 {
		w.HolderUnknown = fmt.Sprintf("the thread is in state %s with no wait id: the lock is not known", st)
		return w
	}
	as.queuingLockHolder(w, wid, fmt.Sprintf("the wait id %#x", wid), false)
	return w
}

// queuingLockHolder reads the queuing lock at addr and fills w's holder
// (and, unless userCall, its kind) from it; what names addr when it is no
// initialized queuing lock.
func (as *AddressSpace) queuingLockHolder(w *ompd.Wait, addr ompd.Address, what string, userCall bool) {
	q, err := as.readQueuingLock(addr)
	switch {
	case err != nil && errors.As(err, new(errLockLayout)):
		w.HolderUnknown = fmt.Sprintf("the layout of libomp's queuing lock is not known: %v", err)
	case err != nil:
		w.HolderUnknown = fmt.Sprintf("reading the lock at %#x: %v", addr, err)
	case q.initialized != addr:
		w.HolderUnknown = fmt.Sprintf("%s is not an initialized queuing lock (its first word is %#x, not its own address): its lock type and holder are not known", what, q.initialized)
	default:
		as.queuingHolder(w, addr, q, userCall)
	}
}

// queuingHolder fills w's holder from the queuing lock q at addr, and its
// kind from the lock's flags unless userCall says w's kind comes from the
// user's call (omp_set_lock, __kmpc_critical and the like).
func (as *AddressSpace) queuingHolder(w *ompd.Wait, addr ompd.Address, q queuingLock, userCall bool) {
	as.ownerHolder(w, addr, ownedLock{ownerID: q.ownerID, depth: q.depth, flags: q.flags, free: q.headID == 0}, "lock", userCall)
}

// ownedLock is what a lock that records its owner (queuing, ticket, DRDPA)
// says of it.
type ownedLock struct {
	ownerID int32 // gtid+1, 0 when none is recorded
	depth   int32 // -1 for a simple lock
	flags   uint32
	free    bool // the lock is known to be free
}

// ownerHolder fills w's holder from the lock q at addr (noun names its
// kind in messages), and its kind as queuingHolder says.
func (as *AddressSpace) ownerHolder(w *ompd.Wait, addr ompd.Address, q ownedLock, noun string, userCall bool) {
	wid := addr
	facts := as.lockFacts()
	atomicUnknown := false
	switch {
	case userCall:
		// The user's call says what it is.
	case q.flags&kmpLfCriticalSection != 0:
		w.What = ompd.WaitCritical
	case q.depth >= 0:
		w.What = ompd.WaitNestLock
	case facts.atomic != nil && facts.atomic[wid]:
		w.What = ompd.WaitAtomic
	case facts.atomic == nil && q.ownerID == 0:
		// A simple lock with no owner recorded: one of the runtime's
		// atomic locks looks the same, and their addresses are not known.
		atomicUnknown = true
	default:
		// A simple lock, not an atomic construct's (those never record
		// an owner).
		w.What = ompd.WaitLock
	}
	if q.ownerID != 0 {
		gtid := int(q.ownerID) - 1
		th, err := as.threadOfGTID(gtid)
		if err != nil {
			w.HolderUnknown = fmt.Sprintf("the %s at %#x names its owner gtid %d (owner_id %d): %v", noun, wid, gtid, q.ownerID, err)
			return
		}
		w.Holder = th.pthreadID
		return
	}
	if q.free {
		w.HolderUnknown = fmt.Sprintf("the %s at %#x is free at this instant (released as the thread came to take it)", noun, wid)
		return
	}
	switch {
	case w.What == ompd.WaitAtomic:
		w.HolderUnknown = "libomp records no owner of the locks of atomic constructs"
	case w.What == ompd.WaitNestLock:
		w.HolderUnknown = fmt.Sprintf("the nestable lock at %#x is held but records no owner at this instant (being released or handed over)", wid)
	case as.consistencyChecks() == "all":
		w.HolderUnknown = fmt.Sprintf("the %s at %#x is held but records no owner at this instant (being released or handed over)", lockNoun(w.What), wid)
	default:
		how := "this process runs without it"
		if as.consistencyChecks() == "" {
			how = "whether this process runs with it is not known"
		}
		w.HolderUnknown = fmt.Sprintf("libomp records the owner of a %s only with KMP_CONSISTENCY_CHECK=all; %s", lockNoun(w.What), how)
		if atomicUnknown {
			w.HolderUnknown += fmt.Sprintf("; the lock at %#x may also be one of libomp's locks of atomic constructs, whose addresses this runtime's symbols do not give", wid)
		}
	}
	return
}

func lockNoun(k ompd.WaitKind) string {
	switch k {
	case ompd.WaitCritical:
		return "critical section"
	case ompd.WaitNestLock:
		return "nestable lock"
	}
	return "simple lock"
}

// threadOfGTID returns the thread whose gtid is gtid.
func (as *AddressSpace) threadOfGTID(gtid int) (*Thread, error) {
	threads, err := as.Threads()
	if err != nil {
		return nil, err
	}
	for _, t := range threads {
		if t.gtid == gtid {
			return t, nil
		}
	}
	return nil, fmt.Errorf("gtid %d is not in the runtime's thread table", gtid)
}
