package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/target/ptrace"
)

// statsLine is the line --stats prints: the stopped time and peak RSS.
var statsLine = regexp.MustCompile(`stopped ([0-9.]+) ms .*peak RSS ([0-9.]+) MiB`)

// floorLine is the line a floor process prints (floorProcess).
var floorLine = regexp.MustCompile(`(?m)^held ([0-9]+) us$`)

// medianMS is the median of runs, in milliseconds (of an even number, the
// mean of the middle two): on a host whose speed varies, a mean of a few
// runs often carries one slow run, and the median says what a run
// usually takes.
func medianMS(runs []time.Duration) float64 {
	if len(runs) == 0 {
		return 0
	}
	s := slices.Clone(runs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + m) / 2
	}
	return float64(m.Microseconds()) / 1000
}

// reportHeld reports the mean (stopped-ms/op) and the median
// (stopped-median-ms) of the times a target was held stopped.
func reportHeld(b *testing.B, held []time.Duration) {
	var sum time.Duration
	for _, d := range held {
		sum += d
	}
	if len(held) > 0 {
		b.ReportMetric(float64(sum.Microseconds())/1000/float64(len(held)), "stopped-ms/op")
	}
	b.ReportMetric(medianMS(held), "stopped-median-ms")
}

// BenchmarkSnapshot measures issue 15's goals side by side on one process
// (testdata/wide.c: one team, all but one thread in a barrier), each tool
// run as a separate process from start to exit:
//
//   - 4 threads: `ompd-inspect attach PID` (the summary) against gdb's
//     `thread apply all bt`;
//   - 1024 threads: `ompd-inspect attach PID all --json` (every section and
//     every backtrace) against gdb with LLVM's OMPD plugin doing `ompd
//     init`, `ompd threads`, `ompd icvs`, `ompd parallel` and `thread apply
//     all bt` (withPlugin: the plugin must load and show the team);
//   - the floor: stopping and resuming every thread with nothing read
//     (ptrace.Attach and Detach, in this process; stopped-ms/op is from
//     the first stop to the last detach, as --stats measures it), and
//     the same from a fresh process each time (floor-process: this test
//     binary run again, see TestMain), as a command-line tool does it;
//   - paired: the goals' ratios run by run, each run of ompd-inspect
//     beside one of gdb and one of the fresh floor, in an order that
//     rotates (vs-gdb-median: its time over gdb's; held-vs-floor-median
//     and -max: the time it held the target over the floor's);
//   - held: the time held over the fresh floor's alone, five pairs an
//     iteration, the order alternating (held-vs-floor-median and -p90,
//     and pairs-over-2: the fraction of pairs over the goal's 2);
//   - ompd-inspect-idle, at 1024 threads: ompd-inspect's runs each
//     idlePause after the last, as a person's come (back to back, the
//     memory a run frees is still the guest's when the next asks for it;
//     docs/benchmarks.md, the thirteenth round).
//
// ompd-inspect's runs also report, from --stats, the time the target was
// stopped (stopped-ms/op) and the peak RSS (peak-MiB); its runs and gdb's
// report their median time besides the mean (median-ms), and its runs and
// the floors the median time stopped (stopped-median-ms). Each runs on the
// OMPD build (OMP_DEBUG=enabled), on Debian's stripped libomp 19 (its
// knowledge recovered from its code) and on GNU libgomp (wide.c built
// with gcc-12; at 1024 threads against gdb alone, as LLVM's plugin reads
// no libgomp). Figures: docs/benchmarks.md.
//
//	go test -run '^$' -bench Snapshot -benchtime 3x ./cmd/ompd-inspect
func BenchmarkSnapshot(b *testing.B) {
	cliPath := builtCLI(b)
	for _, c := range []struct {
		name    string
		threads int
		runtime string // "ompd", "stock19" or "gomp"
	}{
		{"ompd/4", 4, "ompd"},
		{"ompd/1024", 1024, "ompd"},
		{"stock19/4", 4, "stock19"},
		{"stock19/1024", 1024, "stock19"},
		{"gomp/4", 4, "gomp"},
		{"gomp/1024", 1024, "gomp"},
	} {
		b.Run(c.name, func(b *testing.B) {
			opts := fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled", "FX_WIDE=" + strconv.Itoa(c.threads)}}
			switch c.runtime {
			case "stock19":
				opts.Stripped, opts.Runtime = true, fixture.StockLibomp(19)
			case "gomp":
				// Asleep in the barrier, not spinning first.
				opts.Exe = gompWide(b)
				opts.Env = append(opts.Env, "OMP_WAIT_POLICY=passive")
			}
			p := fixture.Start(b, "wide", opts)
			pid := strconv.Itoa(p.PID)
			view := []string{"attach", pid}
			ref := gdbRun{args: []string{"-batch", "-nx", "-p", pid}, threads: c.threads}
			if c.threads > 4 {
				view = append(view, "all", "--json")
				// LLVM's plugin reads no libgomp: gdb alone there.
				if c.runtime != "gomp" {
					ref = withPlugin(b, ref, c.runtime, cliPath)
				}
			}
			ref.args = append(ref.args, "-ex", "thread apply all bt")
			b.Run("ompd-inspect", func(b *testing.B) { inspectRuns(b, cliPath, view, 0) })
			// A person's run comes seconds after anything else ran,
			// not right after another: memory freed meanwhile may have
			// gone back to the host of a virtual machine (free page
			// reporting), and a run that asks for it again pays. At
			// 1024 threads, each run here comes idlePause after the
			// last.
			if c.threads > 4 {
				b.Run("ompd-inspect-idle", func(b *testing.B) { inspectRuns(b, cliPath, view, idlePause) })
			}
			b.Run("gdb", func(b *testing.B) {
				var runs []time.Duration
				for b.Loop() {
					runs = append(runs, ref.once(b))
				}
				b.ReportMetric(medianMS(runs), "median-ms")
			})
			b.Run("floor", func(b *testing.B) {
				var held []time.Duration
				for b.Loop() {
					proc, err := ptrace.Attach(p.PID, ptrace.Options{})
					if err != nil {
						b.Fatal(err)
					}
					err = proc.Detach()
					held = append(held, proc.Released().Sub(proc.StopBegan()))
					if err != nil {
						b.Fatal(err)
					}
					if err := proc.Close(); err != nil {
						b.Fatal(err)
					}
				}
				reportHeld(b, held)
			})
			// The same from a fresh process, as a command-line tool
			// stops a target: this test binary, run again as a floor
			// process (TestMain).
			b.Run("floor-process", func(b *testing.B) {
				var held []time.Duration
				for b.Loop() {
					held = append(held, floorProcessOnce(b, pid))
				}
				reportHeld(b, held)
			})
			// The ratios the goals are stated in, run by run: each run
			// of ompd-inspect beside a run of gdb and one of the fresh
			// floor, so that the host's slow and fast minutes, which
			// move all three, do not move the ratios as they move the
			// means of sub-benchmarks run minutes apart. Which of the
			// three comes after which rotates from run to run: what one
			// leaves behind (memory freed, a target just released)
			// weighs on each in turn.
			b.Run("paired", func(b *testing.B) {
				// One of each first, untimed.
				inspectOnce(b, cliPath, view)
				ref.once(b)
				floorProcessOnce(b, pid)
				var speed, hold []float64
				for k := 0; b.Loop(); k++ {
					var run, held, gdb, floor time.Duration
					steps := []func(){
						func() { run, held, _ = inspectOnce(b, cliPath, view) },
						func() { gdb = ref.once(b) },
						func() { floor = floorProcessOnce(b, pid) },
					}
					for i := range steps {
						steps[(i+k)%len(steps)]()
					}
					if floor <= 0 || gdb <= 0 {
						b.Fatalf("a floor of %v, gdb's run %v: no ratio", floor, gdb)
					}
					speed = append(speed, run.Seconds()/gdb.Seconds())
					hold = append(hold, held.Seconds()/floor.Seconds())
				}
				b.ReportMetric(median(speed), "vs-gdb-median")
				b.ReportMetric(median(hold), "held-vs-floor-median")
				b.ReportMetric(slices.Max(hold), "held-vs-floor-max")
			})
			// The time held against the floor alone, in more pairs than
			// paired makes (gdb's runs take seconds): heldPairs pairs
			// an iteration, each run of ompd-inspect beside one of the
			// fresh floor, which goes first in every other pair.
			b.Run("held", func(b *testing.B) {
				inspectOnce(b, cliPath, view)
				floorProcessOnce(b, pid)
				var hold []float64
				for b.Loop() {
					for range heldPairs {
						var held, floor time.Duration
						if len(hold)%2 == 0 {
							_, held, _ = inspectOnce(b, cliPath, view)
							floor = floorProcessOnce(b, pid)
						} else {
							floor = floorProcessOnce(b, pid)
							_, held, _ = inspectOnce(b, cliPath, view)
						}
						if floor <= 0 {
							b.Fatalf("a floor of %v: no ratio", floor)
						}
						hold = append(hold, held.Seconds()/floor.Seconds())
					}
				}
				b.ReportMetric(median(hold), "held-vs-floor-median")
				b.ReportMetric(quantile(hold, 0.9), "held-vs-floor-p90")
				b.ReportMetric(fractionOver(hold, 2), "pairs-over-2")
			})
			if stopped := p.StoppedThreads(b); len(stopped) != 0 {
				b.Fatalf("threads %v left stopped", stopped)
			}
		})
	}
}

// gompWide builds testdata/wide.c with gcc-12 -fopenmp, on GNU libgomp,
// and returns the program's path.
func gompWide(b *testing.B) string {
	b.Helper()
	exe := filepath.Join(b.TempDir(), "wide")
	src := filepath.Join(fixture.TestdataDir(b), "wide.c")
	if out, err := exec.Command("gcc-12", "-g", "-O1", "-fopenmp", "-o", exe, src).CombinedOutput(); err != nil {
		b.Fatalf("gcc-12 %s: %v\n%s", src, err, out)
	}
	return exe
}

// inspectRuns runs ompd-inspect with view once untimed (the caches warm
// up for the timed runs), then once an iteration, each pause after the
// last (0: back to back), and reports the time held (reportHeld), the
// peak RSS and the median run.
func inspectRuns(b *testing.B, cliPath string, view []string, pause time.Duration) {
	if out, err := exec.Command(cliPath, view...).CombinedOutput(); err != nil {
		b.Fatalf("ompd-inspect: %v\n%s", err, tail(string(out), 2000))
	}
	var rss float64
	var runs, held []time.Duration
	for b.Loop() {
		if pause > 0 {
			b.StopTimer()
			time.Sleep(pause)
			b.StartTimer()
		}
		run, h, r := inspectOnce(b, cliPath, view)
		runs, held = append(runs, run), append(held, h)
		rss = max(rss, r)
	}
	reportHeld(b, held)
	b.ReportMetric(rss, "peak-MiB")
	b.ReportMetric(medianMS(runs), "median-ms")
}

// inspectOnce runs ompd-inspect with --stats and returns how long it ran
// (start to exit), how long it held the target stopped and its peak RSS
// in MiB.
func inspectOnce(b *testing.B, cliPath string, view []string) (run, held time.Duration, rss float64) {
	cmd := exec.Command(cliPath, append(view, "--stats")...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	run = time.Since(start)
	if err != nil {
		b.Fatalf("ompd-inspect: %v\n%s", err, stderr.String())
	}
	m := statsLine.FindStringSubmatch(stderr.String())
	if m == nil {
		b.Fatalf("no stats line in %q", stderr.String())
	}
	s, _ := strconv.ParseFloat(m[1], 64)
	rss, _ = strconv.ParseFloat(m[2], 64)
	return run, time.Duration(s * float64(time.Millisecond)), rss
}

// btHeader is the line that opens a thread's backtrace in gdb's `thread
// apply all bt`.
var btHeader = regexp.MustCompile(`(?m)^Thread [0-9]+ \(Thread 0x[0-9a-f]+ \(LWP [0-9]+\)`)

// gdbRun is how the reference runs: gdb's arguments and what it needs in
// its environment, and what its output must show.
type gdbRun struct {
	args    []string
	env     []string // added to this process's environment
	threads int      // how many threads the backtraces must show
	want    []string // lines the output must hold
	// plugin: the output must also list every thread once in `ompd
	// threads`, and hold no Python traceback (the plugin catches its
	// errors, prints them and goes on).
	plugin bool
}

// pluginThread is the line of `ompd threads` for one thread.
var pluginThread = regexp.MustCompile(`(?m)^Thread [0-9]+ \([0-9]+\) is (an|no) OpenMP thread`)

// withPlugin returns run with LLVM's OMPD plugin loaded first and its
// `ompd init`, `ompd threads`, `ompd icvs` and `ompd parallel` run on a
// process of run.threads threads on runtime "ompd" or "stock19". The plugin
// opens the OMPD library the runtime names: the OMPD build's is found
// through LD_LIBRARY_PATH; Debian's stripped runtime names the libompd.so
// set-up placed next to it, and the plugin finds the runtime's symbols in
// the debug file `ompd-inspect debug-file` writes (TestGDBPluginOnStock).
// The run must show that the plugin loaded and read the team; without
// the check a plugin that failed to load would leave gdb alone as the
// reference, unseen.
func withPlugin(b *testing.B, run gdbRun, runtime, cliPath string) gdbRun {
	b.Helper()
	switch runtime {
	case "ompd":
		run.env = append(run.env, "LD_LIBRARY_PATH="+filepath.Dir(fixture.LibompdPath()))
	case "stock19":
		dir := b.TempDir()
		if out, err := exec.Command(cliPath, "debug-file", fixture.StockLibomp(19), dir).CombinedOutput(); err != nil {
			b.Fatalf("ompd-inspect debug-file: %v\n%s", err, out)
		}
		// gdb's default directory first: it holds the C library's
		// debug information, which gdb reads on the other runtimes.
		run.args = append(run.args, "-iex", "set debug-file-directory "+systemDebugDir+":"+dir)
	default:
		b.Fatalf("LLVM's plugin does not read runtime %q", runtime)
	}
	run.args = append(run.args, "-ex", "source "+pluginDir+"/__init__.py",
		"-ex", "ompd init", "-ex", "ompd threads", "-ex", "ompd icvs", "-ex", "ompd parallel")
	run.want = append(run.want, "Loaded OMPD lib successfully!", "ICV Name",
		fmt.Sprintf("Parallel Region: Nesting Level 1: Team Size: %d", run.threads))
	run.plugin = true
	return run
}

// once runs gdb and returns how long it ran; it fails b unless gdb showed
// every thread and every line run.want names.
func (run gdbRun) once(b *testing.B) time.Duration {
	cmd := exec.Command("gdb", run.args...)
	cmd.Env = append(os.Environ(), run.env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	elapsed := time.Since(start)
	text := string(out)
	if shown := len(btHeader.FindAllStringIndex(text, -1)); err != nil || shown != run.threads {
		b.Fatalf("gdb: %v (%d threads' backtraces shown, want %d)\n%s", err, shown, run.threads, tail(text, 2000))
	}
	for _, w := range run.want {
		if !strings.Contains(text, w) {
			b.Fatalf("gdb's output does not say %q:\n%s", w, tail(text, 4000))
		}
	}
	if run.plugin {
		if listed := len(pluginThread.FindAllStringIndex(text, -1)); listed != run.threads {
			b.Fatalf("the plugin's ompd threads listed %d threads, want %d:\n%s", listed, run.threads, tail(text, 4000))
		}
		if i := strings.Index(text, "Traceback (most recent call last)"); i >= 0 {
			b.Fatalf("the plugin failed:\n%s", tail(text[i:], 4000))
		}
	}
	return elapsed
}

// floorProcessOnce runs this test binary as a floor process on process
// pid (TestMain) and returns how long it held the process stopped.
func floorProcessOnce(b *testing.B, pid string) time.Duration {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), floorPIDEnv+"="+pid)
	out, err := cmd.CombinedOutput()
	m := floorLine.FindStringSubmatch(string(out))
	if err != nil || m == nil {
		b.Fatalf("floor process: %v\n%s", err, tail(string(out), 2000))
	}
	us, _ := strconv.ParseFloat(m[1], 64)
	return time.Duration(us) * time.Microsecond
}

// median is the median of xs (of an even number, the mean of the middle
// two), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// idlePause is how long the ompd-inspect-idle sub-benchmark waits before
// each run: longer than the 2 s after which Linux reports freed memory
// to the host of a virtual machine.
const idlePause = 4 * time.Second

// heldPairs is how many pairs of runs an iteration of the held
// sub-benchmark makes.
const heldPairs = 5

// quantile is the q-quantile of xs (the element at rank q*(len-1),
// rounded down), 0 for none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// fractionOver is the fraction of xs greater than limit, 0 for none.
func fractionOver(xs []float64, limit float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	n := 0
	for _, x := range xs {
		if x > limit {
			n++
		}
	}
	return float64(n) / float64(len(xs))
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// coreStatsLine is the line --stats prints for a core file.
var coreStatsLine = regexp.MustCompile(`read ([0-9.]+) ms; total .*peak RSS ([0-9.]+) MiB`)

// BenchmarkLargeCore measures issue 15's bound on memory for a large core:
// `ompd-inspect core FILE all --json` on a gcore of the wide fixture (4
// threads, OMPD build) that first wrote 2100 MiB (FX_BALLAST), a core of
// more than 2 GiB. It reports the peak RSS (peak-MiB, from --stats) and
// the core's size (core-GiB).
//
//	go test -run '^$' -bench LargeCore -benchtime 3x ./cmd/ompd-inspect
func BenchmarkLargeCore(b *testing.B) {
	cliPath := builtCLI(b)
	p := fixture.Start(b, "wide", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled", "FX_WIDE=4", "FX_BALLAST=2100"}})
	core := p.Gcore(b)
	fi, err := os.Stat(core)
	if err != nil {
		b.Fatal(err)
	}
	if fi.Size() < 2<<30 {
		b.Fatalf("the core has %d bytes, less than 2 GiB", fi.Size())
	}
	if out, err := exec.Command(cliPath, "core", core, "all", "--json").CombinedOutput(); err != nil {
		b.Fatalf("ompd-inspect: %v\n%s", err, tail(string(out), 2000)) // untimed: the caches warm up
	}
	var rss float64
	for b.Loop() {
		cmd := exec.Command(cliPath, "core", core, "all", "--json", "--stats")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("ompd-inspect: %v\n%s", err, stderr.String())
		}
		if n := strings.Count(stdout.String(), `"os_tid"`); n < 4 {
			b.Fatalf("the report shows %d threads' ids, want the 4 threads'", n)
		}
		m := coreStatsLine.FindStringSubmatch(stderr.String())
		if m == nil {
			b.Fatalf("no stats line in %q", stderr.String())
		}
		r, _ := strconv.ParseFloat(m[2], 64)
		rss = max(rss, r)
	}
	b.ReportMetric(rss, "peak-MiB")
	b.ReportMetric(float64(fi.Size())/(1<<30), "core-GiB")
}

// TestMedianMS: the median of an odd number of runs is the middle one,
// of an even number the mean of the middle two, whatever their order.
func TestMedianMS(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		runs []time.Duration
		want float64
	}{
		{nil, 0},
		{[]time.Duration{7 * ms}, 7},
		{[]time.Duration{900 * ms, 150 * ms, 160 * ms, 155 * ms, 148 * ms}, 155},
		{[]time.Duration{4 * ms, 1 * ms, 3 * ms, 2 * ms}, 2.5},
	} {
		if got := medianMS(c.runs); got != c.want {
			t.Errorf("medianMS(%v) = %v, want %v", c.runs, got, c.want)
		}
	}
}
