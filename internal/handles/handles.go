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
type Handle interface {
	// Addr identifies the runtime object the handle names; two handles
	// with the same Addr name the same object (OMPD's handle compare).
	Addr() uint64
}

// Releaser is implemented by handles that must be given back to their
// backend when no longer used.
type Releaser interface {
	Release() error
}

// Table interns handles of one kind. The zero value is ready to use.
type Table[H Handle] struct {
	index map[uint64]int
	items []H
	errs  []error
}

// Intern records h and returns its index. When a handle for the same
// object was interned before, h is released and the earlier handle's index
// is returned with first false.
func (t *Table[H]) Intern(h H) (i int, first bool) {
	if t.index == nil {
		t.index = make(map[uint64]int)
	}
	if i, ok := t.index[h.Addr()]; ok {
		t.release(h)
		return i, false
	}
	t.index[h.Addr()] = len(t.items)
	t.items = append(t.items, h)
	return len(t.items) - 1, true
}

// Lookup returns the index of the handle interned for the object at addr.
func (t *Table[H]) Lookup(addr uint64) (int, bool) {
	i, ok := t.index[addr]
	return i, ok
}

// At returns the handle with index i.
func (t *Table[H]) At(i int) H { return t.items[i] }

// Len returns how many handles are interned.
func (t *Table[H]) Len() int { return len(t.items) }

// Release gives every interned handle back to its backend and empties the
// table. It returns the errors of this and of earlier releases of
// duplicates.
func (t *Table[H]) Release() error {
	for _, h := range t.items {
		t.release(h)
	}
	t.items, t.index = nil, nil
	errs := t.errs
	t.errs = nil
	return errors.Join(errs...)
}

func (t *Table[H]) release(h H) {
	r, ok := any(h).(Releaser)
	if !ok {
		return
	}
	if err := r.Release(); err != nil {
		t.errs = append(t.errs, fmt.Errorf("releasing handle of %#x: %w", h.Addr(), err))
	}
}
