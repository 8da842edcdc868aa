package target

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestReadyHeap: in a fresh process, 8 MiB of small objects allocated
// and written after ReadyHeap(16 MiB) take their pages from the memory it
// readied; without it they fault about once a page. The counts come from
// the kernel (minor faults), in child processes whose heap nothing else
// used.
func TestReadyHeap(t *testing.T) {
	probe := make([]byte, 2*PageSize)
	if err := unix.Madvise(alignedPage(probe), madvPopulateWrite); err != nil {
		t.Skipf("the kernel cannot populate a range (MADV_POPULATE_WRITE): %v", err)
	}
	faults := func(ready bool) int {
		cmd := exec.Command(os.Args[0], "-test.run=^TestReadyHeapChild$")
		cmd.Env = append(os.Environ(), "READY_HEAP_CHILD="+strconv.FormatBool(ready))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		var n int
		for _, l := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(l, "faults "); ok {
				n, err = strconv.Atoi(v)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatalf("child printed no count:\n%s", out)
		return 0
	}
	// The runtime's own structures fault too (and, under the race
	// detector, its shadow memory: thousands more), in both children:
	// what ReadyHeap saves is the difference.
	const pages = 8 << 20 / PageSize
	without, with := faults(false), faults(true)
	if without-with < pages*3/4 {
		t.Errorf("%d faults without ReadyHeap, %d with it, for %d pages of objects; want it to save at least %d", without, with, pages, pages*3/4)
	}
}

// TestReadyHeapChild is TestReadyHeap's child: it keeps 24 MiB alive (as
// ompd-inspect keeps its memory cache: the collector's goal is then above
// what ReadyHeap frees, and nothing returns it to the system), readies
// 16 MiB or not, then counts the faults of allocating and writing 8 MiB
// of 4 KiB objects.
func TestReadyHeapChild(t *testing.T) {
	ready, err := strconv.ParseBool(os.Getenv("READY_HEAP_CHILD"))
	if err != nil {
		t.Skip("run by TestReadyHeap")
	}
	live := make([]byte, 24<<20)
	populate(alignedPage(live))
	if ready {
		ReadyHeap(16 << 20)
	}
	before := minorFaults(t)
	objs := make([][]byte, 0, 8<<20/4096)
	for range cap(objs) {
		b := make([]byte, 4096)
		b[0] = 1
		objs = append(objs, b)
	}
	fmt.Printf("faults %d\n", minorFaults(t)-before)
	if len(objs) == 0 || len(live) == 0 {
		t.Fatal("nothing allocated")
	}
}

// alignedPage returns the page-aligned part of b.
func alignedPage(b []byte) []byte {
	off := 0
	if mis := int(uintptr(unsafe.Pointer(&b[0])) % PageSize); mis != 0 {
		off = PageSize - mis
	}
	return b[off : off+(len(b)-off)&^(PageSize-1)]
}

func minorFaults(t *testing.T) int {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return int(ru.Minflt)
}
