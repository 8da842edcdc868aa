package target

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReadyHeap: in a fresh process, ReadyHeap(16 MiB) leaves the Go heap
// with 16 MiB more of free memory that is backed (the runtime counts it
// free and not released, and the process's resident set grew by as
// much), which what is allocated next takes without page faults; without
// it the heap has next to none. The figures come from the runtime's
// metrics and the kernel (RssAnon), in child processes whose heap nothing
// else used.
func TestReadyHeap(t *testing.T) {
	probe := make([]byte, 2*PageSize)
	if err := unix.Madvise(alignedPart(probe, PageSize), madvPopulateWrite); err != nil {
		t.Skipf("the kernel cannot populate a range (MADV_POPULATE_WRITE): %v", err)
	}
	measure := func(ready bool) (free, resident int64, huge bool) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestReadyHeapChild$")
		// The collector's settings are the defaults whatever the
		// caller's: a memory limit returns freed memory at once.
		cmd.Env = append(os.Environ(), "READY_HEAP_CHILD="+strconv.FormatBool(ready), "GOGC=100", "GOMEMLIMIT=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if _, err := fmt.Sscanf(l, "free %d resident %d huge %t", &free, &resident, &huge); err == nil {
				return free, resident, huge
			}
		}
		t.Fatalf("child printed no figures:\n%s", out)
		return 0, 0, false
	}
	const n = 16 << 20
	free, resident, huge := measure(true)
	if free < n*15/16 || resident < n*15/16 {
		t.Errorf("after ReadyHeap(%d): %d bytes of the heap free and backed, resident set grown by %d; want at least %d of each", n, free, resident, n*15/16)
	}
	// The readied memory is not advised to be made of huge pages (see
	// pageArena: a host that took free 2 MiB blocks back makes them slow).
	if huge {
		t.Errorf("after ReadyHeap(%d): the readied memory's mapping was advised to hold huge pages (\"hg\" in its VmFlags)", n)
	}
	if free, _, _ := measure(false); free >= n/2 {
		t.Errorf("without ReadyHeap: %d bytes free and backed; the measure cannot tell", free)
	}
}

// TestReadyHeapChild is TestReadyHeap's child: it keeps 24 MiB alive (as
// ompd-inspect keeps its memory cache: the collector's goal is then above
// what ReadyHeap frees, so that, with no memory limit, nothing returns it
// to the system), readies
// 16 MiB or not, and prints how much of the heap is free and backed and
// how much the resident set grew.
func TestReadyHeapChild(t *testing.T) {
	ready, err := strconv.ParseBool(os.Getenv("READY_HEAP_CHILD"))
	if err != nil {
		t.Skip("run by TestReadyHeap")
	}
	live := make([]byte, 24<<20)
	populate(alignedPart(live, PageSize))
	before := residentBytes(t)
	huge := false
	if ready {
		start, end := readyHeap(16 << 20)
		if start == end {
			t.Fatal("readyHeap readied nothing")
		}
		huge = adviseHuge(t, start, end)
	}
	free := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(free)
	fmt.Printf("free %d resident %d huge %t\n", free[0].Value.Uint64(), residentBytes(t)-before, huge)
	runtime.KeepAlive(live)
}

// residentBytes is the anonymous part of the process's resident set
// (RssAnon: not the pages of its files, which come and go).
func residentBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no RssAnon in /proc/self/status")
	return 0
}

// adviseHuge reports whether a mapping of the calling process that
// overlaps [lo, hi) was advised to hold huge pages: its VmFlags have "hg",
// which only MADV_HUGEPAGE sets, whatever the system's huge page mode. The
// whole range is looked at: advice given to a 2 MiB-aligned part inside
// it splits the mapping.
func adviseHuge(t *testing.T, lo, hi uintptr) bool {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in, seen := false, false
	for _, l := range strings.Split(string(b), "\n") {
		var mlo, mhi uint64
		if n, _ := fmt.Sscanf(l, "%x-%x ", &mlo, &mhi); n == 2 {
			in = mlo < uint64(hi) && uint64(lo) < mhi
			seen = seen || in
			continue
		}
		if v, ok := strings.CutPrefix(l, "VmFlags:"); ok && in && slices.Contains(strings.Fields(v), "hg") {
			return true
		}
	}
	if !seen {
		t.Fatalf("no mapping holds %#x-%#x", lo, hi)
	}
	return false
}
