package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
)

// TestBoundHeap: after a long time without a collection (collectByLimit),
// a heap larger than memoryLimit is collected once so that the limit is
// set above what is live: 80 MiB live gives a limit of at least 96 MiB,
// not 48 (below what is live, the collector would never stop). Once they
// are dropped, the limit falls back.
func TestBoundHeap(t *testing.T) {
	if os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOMEMLIMIT is set: boundHeap leaves the limit alone")
	}
	oldLimit := debug.SetMemoryLimit(-1)
	oldPercent := debug.SetGCPercent(-1) // as collectByLimit leaves it
	t.Cleanup(func() {
		debug.SetMemoryLimit(oldLimit)
		debug.SetGCPercent(oldPercent)
	})
	runtime.GC() // what earlier tests left live is marked: a small heap
	debug.SetMemoryLimit(readLimit)
	live := make([][]byte, 80)
	for i := range live {
		live[i] = make([]byte, 1<<20)
		live[i][0] = 1
	}
	boundHeap()
	if got := debug.SetMemoryLimit(-1); got < 96<<20 {
		t.Errorf("with 80 MiB live the limit is %d MiB; want at least 96", got>>20)
	}
	runtime.KeepAlive(live)
	live = nil
	runtime.GC()
	boundHeap()
	if got := debug.SetMemoryLimit(-1); got >= 96<<20 {
		t.Errorf("with the 80 MiB dropped the limit is still %d MiB", got>>20)
	}
}
