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

// Table interns handles: one per runtime object. The zero Table is empty
// and ready to use. Lookups scan the table: reports hold hundreds of
// objects, not millions.
type Table[H Handle[H]] struct {
	items []H
	errs  []error
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
	return len(t.items) - 1, true
}

// Find returns the index of the object h names, if it was interned. It
// neither keeps nor releases h.
func (t *Table[H]) Find(h H) (int, bool) {
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
	t.items = nil
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
