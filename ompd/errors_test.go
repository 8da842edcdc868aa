package ompd

import (
	"errors"
	"fmt"
	"testing"
)

// TestErrorText: an error names its operation when it has one, its
// return code and its cause; a sentinel wrapped with context reads as
// the context and the code, with no empty operation between.
func TestErrorText(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("ICV dyn-var: %w", ErrBadInput), "ICV dyn-var: ompd_rc_bad_input"},
		{fmt.Errorf("thread 7: %w", ErrUnavailable), "thread 7: unavailable"},
		{ErrNeedsStateTracking, "needs state tracking (start the program with OMP_DEBUG=enabled)"},
		{&Error{Op: "ompd_get_icv_from_scope", RC: RCBadInput, Err: errors.New("no ICV with id 99")},
			"ompd_get_icv_from_scope: ompd_rc_bad_input: no ICV with id 99"},
		{&Error{Op: "ompd_get_thread_handle", RC: RCUnavailable}, "ompd_get_thread_handle: unavailable"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
	if !errors.Is(fmt.Errorf("x: %w", &Error{Op: "op", RC: RCBadInput}), ErrBadInput) {
		t.Error("an error with an operation is not ErrBadInput by its code")
	}
}
