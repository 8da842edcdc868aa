package main

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/target/ptrace"
)

// TestMain runs the tests without the developer's or the machine's
// debuginfod servers: a test that wants one names it itself. Run with
// floorPIDEnv set, the test binary is instead BenchmarkSnapshot's fresh
// process that stops and releases every thread of that process.
func TestMain(m *testing.M) {
	if pid := os.Getenv(floorPIDEnv); pid != "" {
		os.Exit(floorProcess(pid))
	}
	os.Unsetenv("DEBUGINFOD_URLS")
	os.Exit(m.Run())
}

// floorPIDEnv names the process a floor process attaches to.
const floorPIDEnv = "OMPD_INSPECT_TEST_FLOOR_PID"

// floorProcess stops and releases every thread of process pid, reading
// nothing, and prints the microseconds they were held (from the first
// stop to the last detach); it returns the exit code.
func floorProcess(pid string) int {
	n, err := strconv.Atoi(pid)
	if err != nil {
		fmt.Fprintf(os.Stderr, "floor: bad pid %q\n", pid)
		return 2
	}
	p, err := ptrace.Attach(n, ptrace.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "floor: %v\n", err)
		return 1
	}
	err = p.Detach()
	held := p.Released().Sub(p.StopBegan())
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "floor: %v\n", err)
		return 1
	}
	fmt.Printf("held %d us\n", held.Microseconds())
	return 0
}
