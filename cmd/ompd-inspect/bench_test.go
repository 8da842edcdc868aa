package main

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
)

// BenchmarkBacktraceWide compares `ompd-inspect attach PID bt` (attach,
// unwind and symbolize all 256 threads, OpenMP markers and hops, detach,
// render) with gdb's `thread apply all bt` on the same process: both are
// run as separate processes, from start to exit. Figures: docs/benchmarks.md.
//
//	go test -run '^$' -bench BacktraceWide -benchtime 5x ./cmd/ompd-inspect
func BenchmarkBacktraceWide(b *testing.B) {
	p := fixture.Start(b, "wide", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}})
	pid := strconv.Itoa(p.PID)
	cliPath := builtCLI(b)
	b.Run("ompd-inspect", func(b *testing.B) {
		for b.Loop() {
			out, err := exec.Command(cliPath, "attach", pid, "bt").Output()
			if err != nil || strings.Count(string(out), "\nthread ") != 256 {
				b.Fatalf("ompd-inspect bt: %v (%d threads shown)", err, strings.Count(string(out), "\nthread "))
			}
		}
	})
	b.Run("gdb", func(b *testing.B) {
		for b.Loop() {
			out, err := exec.Command("gdb", "-batch", "-nx", "-p", pid, "-ex", "thread apply all bt").Output()
			if err != nil || strings.Count(string(out), "\nThread ") < 256 {
				b.Fatalf("gdb: %v (%d threads shown)", err, strings.Count(string(out), "\nThread "))
			}
		}
	})
	if stopped := p.StoppedThreads(b); len(stopped) != 0 {
		b.Fatalf("threads %v left stopped", stopped)
	}
}
