package unwind

import (
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/target/core"
)

// BenchmarkUnwindAllThreads unwinds every thread of a gcore core of the
// nested fixture (9 threads): "fresh" with a new Unwinder each time (the
// images' call frame information stays parsed), "reused" with one.
func BenchmarkUnwindAllThreads(b *testing.B) {
	p := fixture.Start(b, "nested", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}})
	c, err := core.Open(p.Gcore(b), core.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	threads := c.Threads()
	walk := func(b *testing.B, u *Unwinder) {
		for _, th := range threads {
			if _, stop := u.Unwind(th); !stop.Complete() {
				b.Fatalf("thread %d: %s", th.TID, stop)
			}
		}
	}
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			walk(b, New(c))
		}
	})
	b.Run("reused", func(b *testing.B) {
		u := New(c)
		for b.Loop() {
			walk(b, u)
		}
	})
}
