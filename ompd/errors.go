package ompd

import (
	"errors"
	"fmt"
)

// RC is an OMPD return code (ompd_rc_t). The values are the ones of the
// OpenMP 5.1 API.
type RC int

// The OMPD return codes.
const (
	RCOK                 RC = 0
	RCUnavailable        RC = 1
	RCStaleHandle        RC = 2
	RCBadInput           RC = 3
	RCError              RC = 4
	RCUnsupported        RC = 5
	RCNeedsStateTracking RC = 6
	RCIncompatible       RC = 7
	RCDeviceReadError    RC = 8
	RCDeviceWriteError   RC = 9
	RCNoMem              RC = 10
	RCIncomplete         RC = 11
	RCCallbackError      RC = 12
)

var rcNames = map[RC]string{
	RCOK: "ompd_rc_ok", RCUnavailable: "ompd_rc_unavailable", RCStaleHandle: "ompd_rc_stale_handle",
	RCBadInput: "ompd_rc_bad_input", RCError: "ompd_rc_error", RCUnsupported: "ompd_rc_unsupported",
	RCNeedsStateTracking: "ompd_rc_needs_state_tracking", RCIncompatible: "ompd_rc_incompatible",
	RCDeviceReadError: "ompd_rc_device_read_error", RCDeviceWriteError: "ompd_rc_device_write_error",
	RCNoMem: "ompd_rc_nomem", RCIncomplete: "ompd_rc_incomplete", RCCallbackError: "ompd_rc_callback_error",
}

// String returns the OMPD name of the code.
func (rc RC) String() string {
	if s, ok := rcNames[rc]; ok {
		return s
	}
	return fmt.Sprintf("ompd_rc(%d)", int(rc))
}

// Error is an OMPD failure: which operation, its return code, and the
// underlying cause when there is one.
type Error struct {
	Op  string
	RC  RC
	Err error
}

// Error says the operation, when there is one, the return code and the
// cause: a sentinel (no operation) wrapped by fmt.Errorf("...: %w") reads
// "...: ompd_rc_bad_input", not "...: : ompd_rc_bad_input".
func (e *Error) Error() string {
	msg := e.RC.String()
	switch e.RC {
	case RCNeedsStateTracking:
		msg = "needs state tracking (start the program with OMP_DEBUG=enabled)"
	case RCUnavailable:
		msg = "unavailable"
	}
	if e.Op != "" {
		msg = e.Op + ": " + msg
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is matches errors by return code, so errors.Is(err, ErrNeedsStateTracking)
// works whatever the operation.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Op == "" && t.RC == e.RC
}

// Sentinel errors for errors.Is.
var (
	ErrUnavailable        = &Error{RC: RCUnavailable}
	ErrStaleHandle        = &Error{RC: RCStaleHandle}
	ErrBadInput           = &Error{RC: RCBadInput}
	ErrUnsupported        = &Error{RC: RCUnsupported}
	ErrNeedsStateTracking = &Error{RC: RCNeedsStateTracking}
	ErrIncompatible       = &Error{RC: RCIncompatible}
	ErrIncomplete         = &Error{RC: RCIncomplete}
)

// RCOf returns the OMPD return code an error stands for: the code of an
// *Error in its chain, RCOK for nil, RCError otherwise.
func RCOf(err error) RC {
	if err == nil {
		return RCOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.RC
	}
	return RCError
}
