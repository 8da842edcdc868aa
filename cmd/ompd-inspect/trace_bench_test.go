package main

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
)

// traceBenchRegions is the number of parallel regions (teams of 2) one run
// of the region-heavy program forks.
const traceBenchRegions = 2000

// BenchmarkTraceRegions measures the slowdown of a region-heavy program
// (trace.c's regions mode: nothing but parallel regions of 2 threads)
// under `ompd-inspect run --summary` against the same program run alone
// with OMP_DEBUG=enabled. It reports the time per region of both and the
// overhead per region; figures go in docs/benchmarks.md.
//
//	go test -run '^$' -bench TraceRegions -benchtime 5x ./cmd/ompd-inspect
func BenchmarkTraceRegions(b *testing.B) {
	fixture.Build(b)
	exe := fixture.Exe(b, "trace")
	n := strconv.Itoa(traceBenchRegions)
	want := "regions=" + n + "\n"
	run := func(b *testing.B, args ...string) time.Duration {
		var total time.Duration
		for b.Loop() {
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Env = append(os.Environ(), "OMP_DEBUG=enabled")
			start := time.Now()
			out, err := cmd.Output()
			total += time.Since(start)
			if err != nil || string(out) != want {
				b.Fatalf("%v: %v, output %q", args, err, out)
			}
		}
		per := total / time.Duration(b.N*traceBenchRegions)
		b.ReportMetric(float64(per.Nanoseconds()), "ns/region")
		return per
	}
	var alone, traced time.Duration
	b.Run("alone", func(b *testing.B) { alone = run(b, exe, "regions", n) })
	b.Run("traced", func(b *testing.B) {
		traced = run(b, builtCLI(b), "run", "--summary", "-o", os.DevNull, "--", exe, "regions", n)
	})
	if alone > 0 && traced > 0 {
		b.Logf("per region: alone %v, traced %v, overhead %v (%.1fx)", alone, traced, traced-alone, float64(traced)/float64(alone))
	}
}
