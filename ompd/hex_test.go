package ompd

import (
	"fmt"
	"testing"
)

// TestHex: Hex writes what %#x writes, for the ends of the range and
// addresses between.
func TestHex(t *testing.T) {
	for _, a := range []Address{0, 1, 0xf, 0x10, 0x7f1234567890, 0xffffffffffffffff} {
		if got, want := Hex(a), fmt.Sprintf("%#x", a); got != want {
			t.Errorf("Hex(%d) = %q, want %q", a, got, want)
		}
	}
}
