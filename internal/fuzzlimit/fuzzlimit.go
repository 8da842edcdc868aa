// Package fuzzlimit bounds what one fuzz input may cost, for the fuzz
// targets of ompd-inspect's readers: an input that runs too long ends the
// fuzzing worker (so the fuzzer keeps it as a crasher), one that allocates
// too much fails.
package fuzzlimit

import (
	"fmt"
	"runtime/metrics"
	"testing"
	"time"
)

// The limits of one input.
const (
	Time  = 30 * time.Second
	Alloc = 64 << 20
)

// Exec runs fn for one input within Time and Alloc.
func Exec(t *testing.T, fn func()) {
	t.Helper()
	timer := time.AfterFunc(Time, func() {
		panic(fmt.Sprintf("one input ran for more than %v: an unbounded loop?", Time))
	})
	defer timer.Stop()
	before := HeapAllocs()
	fn()
	if got := HeapAllocs() - before; got > Alloc {
		t.Errorf("one input allocated %d bytes, more than %d: an unbounded allocation?", got, Alloc)
	}
}

// HeapAllocs returns the bytes allocated on the heap so far.
func HeapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
