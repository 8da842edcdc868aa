package ptrace

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// TestDetachKeepsModules checks that after Detach the process runs again
// and its memory can no longer be read, while its modules' images still
// answer (the stacks read while stopped are named after Detach), and that
// Released is when Detach released it.
func TestDetachKeepsModules(t *testing.T) {
	tt := startThreads(t)
	p := attach(t, tt.pid, Options{})
	c1 := readMemFile(t, tt.pid, tt.counter)
	checkStoppedByUs(t, tt.pid)
	if r := p.Released(); !r.IsZero() {
		t.Fatalf("Released before Detach: %v, want the zero time", r)
	}
	if target.Ended(p) {
		t.Fatal("the reads of a held process have ended")
	}
	detaching := time.Now()
	if err := p.Detach(); err != nil {
		t.Fatalf("Detach: %v", err)
	}
	if !target.Ended(p) {
		t.Fatal("the reads of a released process have not ended")
	}
	if r, now := p.Released(), time.Now(); r.Before(detaching) || r.After(now) || !r.After(p.StopBegan()) {
		t.Errorf("Released %v: want it during Detach (%v to %v), after StopBegan %v", r, detaching, now, p.StopBegan())
	}
	waitRunning(t, tt.pid)
	waitCounterAbove(t, tt.pid, tt.counter, c1)

	var buf [8]byte
	if err := p.ReadMemory(tt.global, buf[:]); !errors.Is(err, errClosed) {
		t.Fatalf("ReadMemory after Detach: %v, want an error wrapping %v", err, errClosed)
	}
	// Nor straight from the process (the cache's sources), nor ahead.
	page := tt.global &^ (target.PageSize - 1)
	if n, err := p.ReadPages(page, make([]byte, target.PageSize)); n != 0 || !errors.Is(err, errClosed) {
		t.Fatalf("ReadPages after Detach: %d, %v; want 0 and an error wrapping %v", n, err, errClosed)
	}
	if n, err := p.ReadPageList([]uint64{page}, make([]byte, target.PageSize)); n != 0 || !errors.Is(err, errClosed) {
		t.Fatalf("ReadPageList after Detach: %d, %v; want 0 and an error wrapping %v", n, err, errClosed)
	}
	_, before := p.cache.Stats()
	p.Prefetch([]uint64{page})
	if _, after := p.cache.Stats(); after != before {
		t.Fatalf("Prefetch after Detach fetched %d times, want none", after-before)
	}
	exe := p.Modules()[0]
	if exe.Image == nil || exe.Name != tt.exe {
		t.Fatalf("first module %q (image %v), want %q with its image", exe.Name, exe.Image != nil, tt.exe)
	}
	sym, ok := exe.Image.Symbol("the_global")
	if !ok || sym.Value+exe.Bias != tt.global {
		t.Fatalf("the_global after Detach: %#x + bias %#x (found %v), want %#x", sym.Value, exe.Bias, ok, tt.global)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close after Detach: %v", err)
	}
	if err := p.Detach(); err != nil {
		t.Fatalf("Detach after Close: %v", err)
	}
}

// TestStopBegan checks that StopBegan is the first interrupt, as the time
// the target is held is defined (the first stop to the last detach): after
// the first thread was seized (which stops nothing) and before Attach
// returned, not when Attach handed the tracing thread its work.
func TestStopBegan(t *testing.T) {
	tt := startThreads(t)
	var firstSeized time.Time
	attaching := time.Now()
	p := attach(t, tt.pid, Options{afterSeize: func(int) {
		if firstSeized.IsZero() {
			firstSeized = time.Now()
		}
	}})
	attached := time.Now()
	if b := p.StopBegan(); firstSeized.IsZero() || b.Before(firstSeized) || b.After(attached) {
		t.Errorf("StopBegan %v: want it after the first thread was seized (%v) and before Attach returned (%v); Attach began %v",
			b, firstSeized, attached, attaching)
	}
}

// TestPrepareBeforeStop checks that Options.Prepare runs on every module's
// image while the process still runs (no thread traced), that the modules
// then hold those very images, and that Attach waited for it.
func TestPrepareBeforeStop(t *testing.T) {
	tt := startThreads(t)
	var mu sync.Mutex
	prepared := map[*elf.Image]string{} // image -> TracerPid of the main thread then
	done := 0
	p := attach(t, tt.pid, Options{Prepare: func(im *elf.Image) {
		st := taskStatus(tt.pid, tt.pid)
		time.Sleep(20 * time.Millisecond) // Attach must wait for this
		mu.Lock()
		defer mu.Unlock()
		prepared[im] = st["TracerPid"]
		done++
	}})
	mu.Lock()
	defer mu.Unlock()
	if done != len(prepared) || done == 0 {
		t.Fatalf("%d Prepare calls returned for %d images", done, len(prepared))
	}
	withImage := 0
	for _, m := range p.Modules() {
		if m.Image == nil {
			continue
		}
		withImage++
		tracer, ok := prepared[m.Image]
		if !ok {
			t.Errorf("module %s: its image was not the one prepared", m.Name)
		} else if tracer != "0" {
			t.Errorf("module %s: prepared while traced by %s", m.Name, tracer)
		}
	}
	if withImage < 2 || withImage != len(prepared) {
		t.Fatalf("%d modules with images, %d images prepared", withImage, len(prepared))
	}
}

// TestEarlyFilesSameFile checks that an image opened early is used only
// while its file is unchanged.
func TestEarlyFilesSameFile(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, f := range []string{a, b} {
		if err := os.WriteFile(f, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	early := map[string]image{}
	for _, f := range []string{a, b} {
		im, err := elf.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { im.Close() })
		early[f] = im
	}
	oldA, oldB := early[a], early[b]
	// b is replaced by another build of the program (one byte longer: a
	// new file may get the freed inode number and the same times).
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, append(data, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	files := &earlyFiles{fileOps: realFiles{}, early: early}
	gotA, err := files.open(a)
	if err != nil || gotA != oldA {
		t.Fatalf("open(a): %v, %v; want the image opened early", gotA, err)
	}
	gotB, err := files.open(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeImage(gotB) })
	if gotB == oldB {
		t.Fatal("open(b) gave the image of the file b replaced")
	}
	if _, left := early[a]; left {
		t.Fatal("a's early image is still offered after it was taken")
	}
	if early[b] != oldB {
		t.Fatal("b's early image should stay to be closed by releaseEarly")
	}
}

// TestInterruptWhilePreparing checks that a signal that arrives while
// Attach waits for Options.Prepare ends Attach at once, with no thread
// stopped or traced.
func TestInterruptWhilePreparing(t *testing.T) {
	tt := startThreads(t)
	sigs := make(chan os.Signal, 1)
	started := make(chan struct{}, 64)
	release := make(chan struct{})
	defer close(release)
	type result struct {
		p   *Process
		err error
	}
	res := make(chan result, 1)
	go func() {
		p, err := Attach(tt.pid, Options{Interrupt: sigs, Prepare: func(*elf.Image) {
			started <- struct{}{}
			<-release
		}})
		res <- result{p, err}
	}()
	<-started
	sigs <- unix.SIGINT
	r := <-res
	if r.p != nil {
		r.p.Close()
		t.Fatal("Attach attached although interrupted while preparing")
	}
	var ie *InterruptedError
	if !errors.As(r.err, &ie) || ie.Signal != unix.SIGINT || ie.Attached {
		t.Fatalf("Attach: %v, want an InterruptedError for SIGINT before attaching", r.err)
	}
	if tracer := taskStatus(tt.pid, tt.pid)["TracerPid"]; tracer != "0" {
		t.Fatalf("TracerPid %s after an interrupted Attach", tracer)
	}
	waitRunning(t, tt.pid)
}

// TestSeizeWatch: the reaper is told the tracing thread is stuck only
// when it is in a PTRACE_SEIZE and none returned since the reaper's
// previous look (the exec deadlock keeps one seize from returning).
func TestSeizeWatch(t *testing.T) {
	w := newSeizeWatch()
	if w.stuck() {
		t.Fatal("stuck before any seize")
	}
	w.in.Store(true)
	if !w.stuck() {
		t.Fatal("not stuck in a seize, none having returned since the last look")
	}
	w.done.Add(1) // it returned, and another began
	if w.stuck() {
		t.Fatal("stuck although a seize returned since the last look")
	}
	if !w.stuck() {
		t.Fatal("not stuck in the same seize at the next look")
	}
	w.in.Store(false)
	if w.stuck() {
		t.Fatal("stuck outside any seize")
	}
}

// TestCachePagesPerThread checks that Attach readies the memory cache for
// Options.CachePagesPerThread pages a thread of the process, and that
// reads go into that memory without readying more.
func TestCachePagesPerThread(t *testing.T) {
	tt := startThreads(t)
	const perThread = 300
	p := attach(t, tt.pid, Options{CachePagesPerThread: perThread})
	threads := len(p.Threads())
	readied := p.cache.Readied()
	if want := perThread * threads; readied != want {
		t.Fatalf("%d pages readied for %d threads; want %d", readied, threads, want)
	}
	var buf [8]byte
	if err := p.ReadMemory(tt.global, buf[:]); err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint64(buf[:]); got != tt.globalVal {
		t.Fatalf("the_global = %#x, want %#x", got, tt.globalVal)
	}
	if after := p.cache.Readied(); after != readied {
		t.Fatalf("%d pages readied after a read, %d before: the read did not use the readied memory", after, readied)
	}
}

// Attach readies a thread's share of heap (at most maxReadyHeap, the
// memory cache's pages apart), at least minReadyHeap for a few threads,
// and nothing when no heap a thread is asked for.
func TestReadyHeapSize(t *testing.T) {
	if minReadyHeap < target.MinReadyHeap {
		t.Fatalf("minReadyHeap %d is under target.MinReadyHeap %d: ReadyHeap would do nothing", minReadyHeap, target.MinReadyHeap)
	}
	const perThread = 24 << 10
	for _, c := range []struct {
		threads, perThread, want int
	}{
		{4, perThread, minReadyHeap},
		{0, perThread, minReadyHeap},
		{1024, perThread, 24 << 20},
		{2048, perThread, maxReadyHeap},
		{1 << 40, 1 << 30, maxReadyHeap},
		{1024, 0, 0},
		{1024, -1, 0},
		{-1, perThread, 0},
	} {
		if got := readyHeapSize(c.threads, c.perThread); got != c.want {
			t.Errorf("readyHeapSize(%d threads, %d bytes a thread) = %d, want %d", c.threads, c.perThread, got, c.want)
		}
	}
}
