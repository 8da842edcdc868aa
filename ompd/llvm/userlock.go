package llvm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// How a user's lock leads to libomp's lock object (LLVM 13 to 19, dynamic
// locks, x86-64 Linux):
//
//   - An omp_lock_t's first 32 bits are a kmp_dyna_lock_t. When its low
//     bit is set the lock is direct: the word is the lock, its low 8 bits
//     the tag (test-and-set 3, futex 5, HLE 7, RTM spin 9). Otherwise it
//     is the index, shifted left by one, of the lock's entry in the table
//     of indirect locks (__kmp_i_lock_table: a pointer to rows of 1024
//     kmp_indirect_lock_t at offset 0, the number of entries in use at
//     offset 12).
//   - An omp_nest_lock_t is always indirect, an index like an omp_lock_t's
//     (libomp looks up both kinds by index, as omp_lock_t is only 4 bytes
//     under gcc). A critical section's kmp_critical_name holds a pointer
//     to its kmp_indirect_lock_t, or the direct lock word with a direct
//     lock kind.
//   - A kmp_indirect_lock_t is the lock object's address (offset 0) and
//     its indirect tag (offset 8): ticket 0, queuing 1, adaptive 2, DRDPA
//     3, RTM queuing 4, nested test-and-set 5, nested futex 6, nested
//     ticket 7, nested queuing 8, nested DRDPA 9. Queuing, adaptive, RTM
//     queuing and nested queuing locks start with a queuing lock.
//   - A test-and-set lock's word is ((gtid+1) << 8) | tag when held, a
//     futex lock's (((gtid+1) << 1 | waiters) << 8) | tag: they always
//     name their owner. HLE and RTM spin locks do not.

// Direct lock tags (kmp_direct_locktag_t) and indirect ones
// (kmp_indirect_locktag_t).
const (
	dtagTAS     = 3
	dtagFutex   = 5
	dtagHLE     = 7
	dtagRTMSpin = 9

	itagTicket        = 0
	itagQueuing       = 1
	itagAdaptive      = 2
	itagDRDPA         = 3
	itagRTMQueuing    = 4
	itagNestedTAS     = 5
	itagNestedFutex   = 6
	itagNestedTicket  = 7
	itagNestedQueuing = 8
	itagNestedDRDPA   = 9
)

// iLockChunk is the number of entries in a row of the indirect lock table
// (KMP_I_LOCK_CHUNK); iLockEntry the size of an entry.
const (
	iLockChunk = 1024
	iLockEntry = 16
)

// lockEntry is a runtime entry point through which a user's code waits for
// a lock, and which of its arguments names the lock.
type lockEntry struct {
	name string
	kind ompd.WaitKind
	arg  int
}

// lockEntries are libomp's entry points that take a lock.
var lockEntries = []lockEntry{
	{"omp_set_lock", ompd.WaitLock, 0},
	{"omp_set_lock_", ompd.WaitLock, 0}, // Fortran: the lock variable by reference
	{"omp_set_nest_lock", ompd.WaitNestLock, 0},
	{"omp_set_nest_lock_", ompd.WaitNestLock, 0},
	{"__kmpc_set_lock", ompd.WaitLock, 2},
	{"__kmpc_set_nest_lock", ompd.WaitNestLock, 2},
	{"__kmpc_critical", ompd.WaitCritical, 2},
	{"__kmpc_critical_with_hint", ompd.WaitCritical, 2},
}

// criticalPrefix and criticalSuffix frame the name of a critical section
// in the symbol of its kmp_critical_name, as clang names it.
const (
	criticalPrefix = ".gomp_critical_user_"
	criticalSuffix = ".var"
)

// lockEntryAddrs finds the entry points' addresses once; missing ones are
// left out.
func (f *lockFacts) lockEntryAddrs(as *AddressSpace) {
	f.entries = map[ompd.Address]lockEntry{}
	for _, e := range lockEntries {
		if addr, err := as.cb.SymbolAddr(e.name, as.mem.lay.hint); err == nil && addr != 0 {
			f.entries[addr] = e
			f.entryAddrs = append(f.entryAddrs, addr)
		}
	}
	if addr, err := as.cb.SymbolAddr("__kmp_i_lock_table", as.mem.lay.hint); err == nil {
		f.iLockTable = addr
	}
}

// symbolNamer is an optional extension of the callbacks: the symbol at an
// address of any module.
type symbolNamer interface {
	SymbolAt(addr uint64) (name string, ok bool)
}

// userLockWait completes w (the wait the thread's state shows; nil when
// the runtime records none) from the call by which the thread entered the
// runtime: the user's lock or critical section it passed becomes the
// wait's object, and, without a state, that lock's runtime object gives
// the holder. It returns nil when the thread is not waiting for a lock.
func (t *Thread) userLockWait(w *ompd.Wait) *ompd.Wait {
	as := t.as
	facts := as.lockFacts()
	csr, ok := as.cb.(ompd.CallSiteReader)
	if !ok || len(facts.entryAddrs) == 0 {
		return w
	}
	ctx := t.ctx
	if ctx == nil {
		var err error
		if ctx, err = as.cb.ThreadContext(ompd.ThreadIDPthread, t.pthreadID); err != nil {
			return w
		}
	}
	site, ok := csr.CallSite(ctx, facts.entryAddrs)
	if !ok {
		return w
	}
	e := facts.entries[site.Callee]
	if !site.Known[e.arg] || site.Args[e.arg] == 0 {
		if w != nil {
			return w
		}
		return &ompd.Wait{What: e.kind, FromCall: true, HolderUnknown: fmt.Sprintf("the thread is in %s, but its caller's code does not show which %s it passed", e.name, lockNoun(e.kind))}
	}
	user := site.Args[e.arg]
	name := ""
	if e.kind == ompd.WaitCritical {
		if sn, ok := as.cb.(symbolNamer); ok {
			if sym, ok := sn.SymbolAt(user); ok && strings.HasPrefix(sym, criticalPrefix) {
				name = strings.TrimSuffix(strings.TrimPrefix(sym, criticalPrefix), criticalSuffix)
			}
		}
	}
	lk := as.userLock(e.kind, user)
	if w != nil {
		// The state's wait id is the runtime's lock: the user's object
		// names it better, unless the two disagree.
		if lk.obj != 0 && lk.obj != w.Object {
			return w
		}
		w.What, w.Object, w.Name = e.kind, user, name
		return w
	}
	w = &ompd.Wait{What: e.kind, Object: user, Name: name, FromCall: true}
	switch {
	case lk.unknown != "":
		w.HolderUnknown = lk.unknown
	case lk.direct || lk.itag == itagNestedTAS || lk.itag == itagNestedFutex:
		as.pollHolder(w, lk)
	case lk.itag == itagQueuing || lk.itag == itagAdaptive || lk.itag == itagRTMQueuing || lk.itag == itagNestedQueuing:
		as.queuingLockHolder(w, lk.obj, fmt.Sprintf("the lock object %#x of the user's lock %#x", lk.obj, user), true)
	case lk.itag == itagTicket || lk.itag == itagNestedTicket || lk.itag == itagDRDPA || lk.itag == itagNestedDRDPA:
		as.ticketHolder(w, lk)
	default:
		w.HolderUnknown = fmt.Sprintf("the user's lock %#x has the indirect lock tag %d, which is none of libomp's lock kinds", user, lk.itag)
	}
	if w.Holder != 0 && w.Holder == t.pthreadID {
		return nil // it holds the lock: it is taking it, or has just taken it
	}
	return w
}

// ticketHolder fills w's holder from a ticket or DRDPA lock, which record
// their owner as the queuing lock does (owner_id: always for a nestable
// lock, with KMP_CONSISTENCY_CHECK=all for a simple one). Their layout
// comes from TypeLayouts.
func (as *AddressSpace) ticketHolder(w *ompd.Wait, lk userLockObject) {
	typ, self, noun := "kmp_base_ticket_lock_t", "self", "ticket lock"
	if lk.itag == itagDRDPA || lk.itag == itagNestedDRDPA {
		typ, self, noun = "kmp_base_drdpa_lock_t", "initialized", "DRDPA lock"
	}
	fields := []string{self, "owner_id", "depth_locked", "flags", "next_ticket", "now_serving"}
	tl, err := as.typeLayouts()
	if err == nil {
		for _, f := range fields {
			if _, _, err = tl.FieldLayout(typ, f); err != nil {
				break
			}
		}
	}
	if err != nil {
		w.HolderUnknown = fmt.Sprintf("the layout of libomp's %s is not known: %v", noun, err)
		return
	}
	v := make([]uint64, len(fields))
	for i, f := range fields {
		if v[i], err = as.readTyped(lk.obj, typ, f); err != nil {
			w.HolderUnknown = fmt.Sprintf("reading the %s at %#x: %v", noun, lk.obj, err)
			return
		}
	}
	if v[0] != lk.obj {
		w.HolderUnknown = fmt.Sprintf("the lock object %#x of the user's lock %#x is not an initialized %s: its holder is not known", lk.obj, w.Object, noun)
		return
	}
	as.ownerHolder(w, lk.obj, ownedLock{ownerID: int32(v[1]), depth: int32(v[2]), flags: uint32(v[3]), free: v[4] == v[5]}, noun, true)
}

// userLockObject is what a user's lock leads to in the runtime.
type userLockObject struct {
	direct bool   // the user's word is the lock
	poll   uint32 // a direct lock's word, or a nested TAS/futex lock's
	itag   uint32 // an indirect lock's tag
	obj    ompd.Address
	// unknown says why the runtime's lock is not known.
	unknown string
}

// userLock follows the user's lock (or critical section's name) at user
// to the runtime's lock.
func (as *AddressSpace) userLock(kind ompd.WaitKind, user ompd.Address) userLockObject {
	var b [8]byte
	if err := as.cb.ReadMemory(user, b[:]); err != nil {
		return userLockObject{unknown: fmt.Sprintf("reading the user's %s at %#x: %v", lockNoun(kind), user, err)}
	}
	word := binary.LittleEndian.Uint64(b[:])
	var ilk ompd.Address
	switch {
	case word&1 == 1 && kind == ompd.WaitNestLock:
		return userLockObject{unknown: fmt.Sprintf("the nestable lock at %#x holds %#x, a direct lock's word: libomp's nestable locks are always indirect, so it is not one of them", user, uint32(word))}
	case word&1 == 1:
		return userLockObject{direct: true, poll: uint32(word)}
	case kind == ompd.WaitLock || kind == ompd.WaitNestLock:
		idx := uint32(word) >> 1
		var err error
		if ilk, err = as.indirectLockEntry(idx); err != nil {
			return userLockObject{unknown: fmt.Sprintf("the user's %s %#x is entry %d of libomp's table of indirect locks: %v", lockNoun(kind), user, idx, err)}
		}
	default:
		if word == 0 {
			return userLockObject{unknown: fmt.Sprintf("the %s at %#x has no runtime lock yet", lockNoun(kind), user)}
		}
		ilk = word
	}
	var e [16]byte
	if err := as.cb.ReadMemory(ilk, e[:]); err != nil {
		return userLockObject{unknown: fmt.Sprintf("reading the indirect lock at %#x of the user's %s %#x: %v", ilk, lockNoun(kind), user, err)}
	}
	lk := userLockObject{obj: binary.LittleEndian.Uint64(e[:8]), itag: binary.LittleEndian.Uint32(e[8:12])}
	if lk.itag == itagNestedTAS || lk.itag == itagNestedFutex {
		var p [4]byte
		if err := as.cb.ReadMemory(lk.obj, p[:]); err != nil {
			return userLockObject{unknown: fmt.Sprintf("reading the lock at %#x: %v", lk.obj, err)}
		}
		lk.poll = binary.LittleEndian.Uint32(p[:])
	}
	return lk
}

// indirectLockEntry is the address of entry idx of the runtime's table of
// indirect locks.
func (as *AddressSpace) indirectLockEntry(idx uint32) (ompd.Address, error) {
	tbl := as.lockFacts().iLockTable
	if tbl == 0 {
		return 0, errors.New("this runtime's symbols do not give that table, so the lock object is not known")
	}
	var h [16]byte
	if err := as.cb.ReadMemory(tbl, h[:]); err != nil {
		return 0, fmt.Errorf("reading the table at %#x: %w", tbl, err)
	}
	rows, next := binary.LittleEndian.Uint64(h[:8]), binary.LittleEndian.Uint32(h[12:16])
	if idx >= next {
		return 0, fmt.Errorf("the table holds %d locks", next)
	}
	var r [8]byte
	if err := as.cb.ReadMemory(rows+uint64(idx/iLockChunk)*8, r[:]); err != nil {
		return 0, fmt.Errorf("reading row %d of the table: %w", idx/iLockChunk, err)
	}
	row := binary.LittleEndian.Uint64(r[:])
	if row == 0 {
		return 0, fmt.Errorf("row %d of the table is empty", idx/iLockChunk)
	}
	return row + uint64(idx%iLockChunk)*iLockEntry, nil
}

// pollHolder fills w's holder from a test-and-set or futex lock's word.
func (as *AddressSpace) pollHolder(w *ompd.Wait, lk userLockObject) {
	tag := lk.poll & 0xff
	if !lk.direct {
		// A nested test-and-set or futex lock's word carries its
		// kind's direct tag too.
		want := uint32(dtagTAS)
		if lk.itag == itagNestedFutex {
			want = dtagFutex
		}
		if tag != want {
			w.HolderUnknown = fmt.Sprintf("the lock word %#x of the nestable lock at %#x does not have the tag %d of its kind", lk.poll, w.Object, want)
			return
		}
	}
	var owner uint32
	switch tag {
	case dtagTAS:
		owner = lk.poll >> 8
	case dtagFutex:
		owner = lk.poll >> 9
	case dtagHLE, dtagRTMSpin:
		w.HolderUnknown = "libomp's HLE and RTM spin locks record no owner"
		return
	default:
		w.HolderUnknown = fmt.Sprintf("the lock word %#x has no tag libomp gives a direct lock", lk.poll)
		return
	}
	if owner == 0 {
		w.HolderUnknown = fmt.Sprintf("the %s at %#x is free at this instant (released as the thread came to take it)", lockNoun(w.What), w.Object)
		return
	}
	th, err := as.threadOfGTID(int(owner) - 1)
	if err != nil {
		w.HolderUnknown = fmt.Sprintf("the %s at %#x names its owner gtid %d: %v", lockNoun(w.What), w.Object, owner-1, err)
		return
	}
	w.Holder = th.pthreadID
}
