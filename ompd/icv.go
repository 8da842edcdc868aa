package ompd

import (
	"fmt"
	"strconv"
)

// Scope is the scope an ICV belongs to (ompd_scope_t).
type Scope int

// The OMPD scopes, with their OpenMP 5.1 values.
const (
	ScopeGlobal       Scope = 1
	ScopeAddressSpace Scope = 2
	ScopeThread       Scope = 3
	ScopeParallel     Scope = 4
	ScopeImplicitTask Scope = 5
	ScopeTask         Scope = 6
)

// String names the scope as ompd-inspect prints it.
func (s Scope) String() string {
	switch s {
	case ScopeGlobal:
		return "global"
	case ScopeAddressSpace:
		return "address_space"
	case ScopeThread:
		return "thread"
	case ScopeParallel:
		return "parallel"
	case ScopeImplicitTask:
		return "implicit_task"
	case ScopeTask:
		return "task"
	}
	return fmt.Sprintf("scope(%d)", int(s))
}

// ICVID identifies an ICV (ompd_icv_id_t). IDs start at 1, in the order
// EnumerateICVs gives.
type ICVID int

// ICV describes one internal control variable the library can read.
type ICV struct {
	ID    ICVID
	Name  string
	Scope Scope
	// String is true for ICVs whose value is text (run-sched-var,
	// affinity-format-var, ...), read with ICVString. nthreads-var and
	// bind-var are lists: a number when the list has one element.
	String bool
}

// Value is an ICV's value: a number, or text for string ICVs and for list
// ICVs with more than one element.
type Value struct {
	Num      int64
	Str      string
	IsString bool
}

// String formats the value.
func (v Value) String() string {
	if v.IsString {
		return v.Str
	}
	return strconv.FormatInt(v.Num, 10)
}
