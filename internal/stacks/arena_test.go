package stacks

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/unwind"
)

// chainTarget is a target whose threads' stacks are frame-pointer chains
// of chosen depths, every return address in one module without an image
// (so that the frame pointer is what unwinds them).
type chainTarget struct {
	mod     *target.Module
	threads []target.Thread
	mem     map[uint64]uint64 // 8-byte words by address
}

func (c *chainTarget) PID() int                  { return 1 }
func (c *chainTarget) Threads() []target.Thread  { return c.threads }
func (c *chainTarget) Modules() []*target.Module { return []*target.Module{c.mod} }
func (c *chainTarget) Warnings() []string        { return nil }
func (c *chainTarget) Close() error              { return nil }

func (c *chainTarget) ReadMemory(addr uint64, buf []byte) error {
	if addr%8 != 0 || len(buf) != 8 {
		return fmt.Errorf("reading %d bytes at %#x: %w", len(buf), addr, target.ErrUnmapped)
	}
	v, ok := c.mem[addr]
	if !ok {
		return fmt.Errorf("reading %#x: %w", addr, target.ErrUnmapped)
	}
	binary.LittleEndian.PutUint64(buf, v)
	return nil
}

// chainPC is the pc of frame j of thread k.
func chainPC(k, j int) uint64 { return 0x400000 + uint64(k)<<16 + uint64(j)*4 + 1 }

// newChainTarget makes one thread per depth: thread k's frame j (0
// innermost) has pc chainPC(k, j), and its outermost frame returns to 0.
func newChainTarget(depths []int) *chainTarget {
	c := &chainTarget{
		mod: &target.Module{Name: "/chain", Start: 0x400000, End: 0x400000 + uint64(len(depths))<<16},
		mem: map[uint64]uint64{},
	}
	for k, d := range depths {
		sp := 0x7f0000000000 + uint64(k)<<24
		bp := sp + 16
		c.threads = append(c.threads, target.Thread{TID: 100 + k, Regs: target.Registers{Rip: chainPC(k, 0), Rsp: sp, Rbp: bp}})
		for j := 1; j <= d; j++ {
			next := bp + 32
			ra := uint64(0)
			if j < d {
				ra = chainPC(k, j)
			}
			c.mem[bp], c.mem[bp+8] = next, ra
			bp = next
		}
	}
	return c
}

// Threads whose walks share Help's arrays keep their own frames: walks
// shorter than the room left, and walks that outgrow the array (and move
// to one of their own) beside them.
func TestUnwindingArenas(t *testing.T) {
	depths := []int{3, 1000, 5, arenaRoom + 7, 1, 900, 40} // 168 frames an array (arenaSize(7))
	c := newChainTarget(depths)
	for _, workers := range []int{0, 1, 3} {
		t.Run(fmt.Sprint(workers, " workers"), func(t *testing.T) {
			w := StartUnwind(c, "", workers).Wait()
			if len(w.threads) != len(depths) {
				t.Fatalf("%d walks, want %d", len(w.threads), len(depths))
			}
			for k, d := range depths {
				wk := w.threads[k]
				if wk.tid != 100+k {
					t.Errorf("walk %d is of thread %d, want %d", k, wk.tid, 100+k)
				}
				if len(wk.frames) != d {
					t.Errorf("thread %d: %d frames, want %d (stop %v)", wk.tid, len(wk.frames), d, wk.stop)
					continue
				}
				if cap(wk.frames) != len(wk.frames) {
					t.Errorf("thread %d: frames of capacity %d, want %d (appending would reach other frames)", wk.tid, cap(wk.frames), len(wk.frames))
				}
				for j, f := range wk.frames {
					if f.PC != chainPC(k, j) {
						t.Errorf("thread %d frame %d: pc %#x, want %#x", wk.tid, j, f.PC, chainPC(k, j))
						break
					}
				}
			}
		})
	}
}

// A walk that outgrows the array it was given moves its own frames to an
// array of their own, which it returns: the frames of the walks before it
// stay where they were and are not copied.
func TestWalkMovesOnlyItsFrames(t *testing.T) {
	c := newChainTarget([]int{3, 100})
	u := StartUnwind(c, "", 0)
	arena := u.walk(0, make([]unwind.Frame, 0, 16))
	first := &arena[0]
	arena = u.walk(1, arena)
	w := u.Wait()
	if len(arena) != 100 || &arena[0] != &w.threads[1].frames[0] {
		t.Errorf("after the long walk the array holds %d frames (its own first: %v); want its 100 frames alone", len(arena), len(arena) > 0 && &arena[0] == &w.threads[1].frames[0])
	}
	if len(w.threads[0].frames) != 3 || &w.threads[0].frames[0] != first {
		t.Errorf("the short walk's frames moved: %d of them, first at %p, was %p", len(w.threads[0].frames), &w.threads[0].frames[0], first)
	}
}

func TestArenaSize(t *testing.T) {
	for _, c := range []struct{ left, want int }{
		{1, arenaRoom},
		{4, 4 * framesPerThread},
		{1024, arenaFrames},
	} {
		if got := arenaSize(c.left); got != c.want {
			t.Errorf("arenaSize(%d) = %d, want %d", c.left, got, c.want)
		}
	}
}

// prefetchTarget is a chainTarget that reads ahead: it records what it is
// asked for, and how many walks' reads came before.
type prefetchTarget struct {
	*chainTarget
	mu      sync.Mutex
	asked   [][]uint64
	readsBy []int // reads made before each Prefetch
	reads   int
}

func (p *prefetchTarget) Prefetch(addrs []uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, slices.Clone(addrs))
	p.readsBy = append(p.readsBy, p.reads)
}

func (p *prefetchTarget) ReadMemory(addr uint64, buf []byte) error {
	p.mu.Lock()
	p.reads++
	p.mu.Unlock()
	return p.chainTarget.ReadMemory(addr, buf)
}

// An unwinding asks a target that reads ahead for every thread's stack
// pointer once, before the walks read anything; its walks are the same.
func TestUnwindingReadsStacksAhead(t *testing.T) {
	depths := []int{3, 7, 1, 12}
	for _, workers := range []int{0, 1, 3} {
		p := &prefetchTarget{chainTarget: newChainTarget(depths)}
		w := StartUnwind(p, "", workers).Wait()
		var want []uint64
		for _, th := range p.threads {
			want = append(want, th.Regs.Rsp)
		}
		if len(p.asked) != 1 || !slices.Equal(p.asked[0], want) || p.readsBy[0] != 0 {
			t.Errorf("%d workers: asked ahead for %#x after %v reads, want %#x once, before any", workers, p.asked, p.readsBy, want)
		}
		for k, d := range depths {
			if got := len(w.threads[k].frames); got != d {
				t.Errorf("%d workers: thread %d: %d frames, want %d", workers, k, got, d)
			}
		}
	}
}
