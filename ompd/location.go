package ompd

import (
	"errors"
	"strconv"
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
