// Package handles keeps the OMPD handles a report is built from.
//
// Walking a runtime meets the same object many times: every thread of a
// team leads to the same parallel region, every task chain ends in the same
// implicit tasks. A Table keeps one handle per runtime object, in the order
// the walk first met them, and gives each a stable index. Handles that hold
// resources of their backend (the runtime's own OMPD library hands out
// handles that must be released with ompd_rel_*_handle) are released
// exactly once: duplicates as soon as they are interned, the kept ones by
// Table.Release.
package handles

import (
	"errors"
	"fmt"
)

// Handle is an OMPD thread, parallel-region or task handle of any backend.
type Handle[H any] interface {
	// Compare is OMPD's ompd_*_handle_compare: 0 means both name the same
	// runtime object. Only equality is used: LLVM's library computes the
	// value as a difference of addresses truncated to int, so its sign is
	// no order.
	Compare(H) int
}

// Releaser is implemented by handles that must be given back to their
// backend when no longer used.
type Releaser interface {
	Release() error
}

// Keyed is implemented by handles that name their runtime object by a
// key (its addresses): two handles name the same object (Compare gives 0)
// exactly when their keys are equal. A native backend knows the object's
// addresses; the runtime's own OMPD library hands out opaque handles,
// which only Compare tells apart. The key is a plain array, so that a
// backend implements Keyed without importing this package.
type Keyed interface {
	HandleKey() [2]uint64
}

// KeyMismatches checks Keyed's contract on hs: it returns the pairs of
// indexes whose keys are equal while compare says they name different
// objects, or the reverse (none for a backend that keeps it).
func KeyMismatches[H Keyed](hs []H, compare func(a, b H) int) [][2]int {
	var bad [][2]int
	for i, a := range hs {
		for j, b := range hs {
			if (compare(a, b) == 0) != (a.HandleKey() == b.HandleKey()) {
				bad = append(bad, [2]int{i, j})
			}
		}
	}
	return bad
}

// Table interns handles: one per runtime object. The zero Table is empty
// and ready to use. Keyed handles are looked up by key; others by
// comparing with each handle kept (a thousand threads' tasks compared
// pairwise were 5 ms of a report).
type Table[H Handle[H]] struct {
	items []H
	errs  []error
	// byKey indexes items by key while each has one; once one has none,
	// unkeyed is set and lookups compare.
	byKey   map[[2]uint64]int
	unkeyed bool
}

// Intern returns the index of the runtime object h names and whether h is
// the first handle of it. A handle that duplicates one already kept is
// released at once: the caller must go on with At(i), not with h.
func (t *Table[H]) Intern(h H) (i int, first bool) {
	if i, ok := t.Find(h); ok {
		t.release(h)
		return i, false
	}
	t.items = append(t.items, h)
	i = len(t.items) - 1
	if k, ok := any(h).(Keyed); ok && !t.unkeyed {
		if t.byKey == nil {
			t.byKey = make(map[[2]uint64]int)
		}
		t.byKey[k.HandleKey()] = i
	} else {
		t.unkeyed, t.byKey = true, nil
	}
	return i, true
}

// Find returns the index of the object h names, if it was interned. It
// neither keeps nor releases h.
func (t *Table[H]) Find(h H) (int, bool) {
	if k, ok := any(h).(Keyed); ok && !t.unkeyed {
		i, found := t.byKey[k.HandleKey()]
		return i, found
	}
	for i, x := range t.items {
		if x.Compare(h) == 0 {
			return i, true
		}
	}
	return 0, false
}

// At returns the handle kept at index i.
func (t *Table[H]) At(i int) H { return t.items[i] }

// Len returns the number of objects interned.
func (t *Table[H]) Len() int { return len(t.items) }

// Release releases every kept handle and empties the table. It returns the
// errors of every release since the table was created (duplicates
// included), joined.
func (t *Table[H]) Release() error {
	for _, h := range t.items {
		t.release(h)
	}
	t.items, t.byKey, t.unkeyed = nil, nil, false
	errs := t.errs
	t.errs = nil
	return errors.Join(errs...)
}

// ReleaseOne releases a handle that was never interned; errors are kept
// for Release.
func (t *Table[H]) ReleaseOne(h H) { t.release(h) }

func (t *Table[H]) release(h H) {
	r, ok := any(h).(Releaser)
	if !ok {
		return
	}
	if err := r.Release(); err != nil {
		t.errs = append(t.errs, fmt.Errorf("releasing a handle: %w", err))
	}
}
