// Command ompd-inspect shows the OpenMP state of a live process or a core
// file: threads and what they wait for, the tree of parallel regions, the
// tasks, the ICVs and the runtime's control variables.
//
//	ompd-inspect attach <pid> [summary|threads|regions|tasks|icvs|env] [--json] [--retry[=N]]
//	ompd-inspect core <corefile> [view] [--exe PATH] [--sysroot DIR] [--search-path DIR] [--json]
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ompd-inspect/ompd-inspect/internal/compare"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/internal/render"
	"github.com/ompd-inspect/ompd-inspect/internal/stacks"
	"github.com/ompd-inspect/ompd-inspect/internal/waits"
	"github.com/ompd-inspect/ompd-inspect/ompd/backend"
	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/core"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
	"github.com/ompd-inspect/ompd-inspect/target/ptrace"
)

// views lists the views every target command accepts.
var views = []string{"summary", "threads", "regions", "tasks", "icvs", "env", "bt", "all"}

// viewFlags are the flags shared by attach and core.
type viewFlags struct {
	json      bool
	thread    int
	allFrames bool
	noCont    bool
	group     bool
	backend   string
	library   string
	// images says where the modules' debug files are looked for (set
	// after the flags are checked).
	images *elf.OpenOptions
	// stats asks for the figures of the inspection on stderr; times
	// records them (set after the flags are checked).
	stats bool
	times *phaseTimes
}

func main() {
	collectByLimit()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// readLimit is the soft limit of the Go heap until the target is read
// (collectByLimit).
const readLimit = 128 << 20

// collectByLimit has the collector run, until boundHeap, only as the heap
// nears readLimit, unless GOGC or GOMEMLIMIT says otherwise: a warm
// report of a thousand threads allocates about 40 MiB before the target
// is read, and the cycles its growth paced ran while the target was held
// and cost a tenth of the run. A cold run (debug information parsed for
// the first time) may fill the limit, and is then collected as it goes.
func collectByLimit() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(readLimit)
}

// memoryLimit is the Go heap ompd-inspect asks the runtime to stay near
// once the target is read (a soft limit: the collector works harder as
// the heap nears it), unless GOMEMLIMIT says otherwise. A report of a
// thousand threads then peaks under 64 MiB; see docs/benchmarks.md.
const memoryLimit = 48 << 20

// memoryHeadroom is how far above the live heap the limit stays at least:
// a limit at the live heap would keep the collector running.
const memoryHeadroom = 16 << 20

// boundHeap collects the heap once, on every CPU, and sets the soft
// memory limit for the rest of the run: the larger of memoryLimit and the
// live heap plus memoryHeadroom (a program with large uncompressed debug
// information keeps more alive). It runs only after the target is read,
// so that the collector never lengthens a stop.
//
// The read leaves most of the heap garbage (the memory cache's pages, the
// walks). Collected now, in 5 to 10 ms at a thousand threads, it makes
// room for naming the frames and writing the report, which then take 8
// ms; left to a concurrent cycle beside them, they took 12 to 50 ms. The
// collector then runs as the heap nears the limit, not as GOGC's default
// pacing would: with the default pacing, a second collection ran during
// the naming, and the peak RSS was the same. The collection also says
// what is live: with collectByLimit there may have been none for long,
// and a limit set below the live heap would keep the collector running.
func boundHeap() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	runtime.GC()
	// Right after the collection, what is allocated is what it found live
	// (runtime/metrics says it too, but its package's initialization cost
	// every run about 0.5 ms).
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	debug.SetMemoryLimit(max(int64(memoryLimit), int64(ms.HeapAlloc)+memoryHeadroom))
}

// run executes the command line and returns the exit code. A panic is
// turned into one line on stderr; the targets' own deferred Close calls
// have run by then. An attach interrupted by SIGINT, SIGTERM or SIGHUP
// exits with 128+signal.
func run(args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(stderr, "ompd-inspect: internal error: %v\n", p)
			if os.Getenv("OMPD_INSPECT_DEBUG") != "" {
				stderr.Write(debug.Stack())
			}
			code = 2
		}
	}()
	var exitCode int // the traced program's, for run and attach --trace
	root := newRoot(stdout, stderr, &exitCode)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.Execute(); err != nil {
		if err != errSilentFailure {
			fmt.Fprintf(stderr, "ompd-inspect: %s\n", oneLine(err.Error()))
		}
		if ie := (*ptrace.InterruptedError)(nil); errors.As(err, &ie) {
			return ie.ExitCode()
		}
		return 1
	}
	return exitCode
}

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ") }

func newRoot(stdout, stderr io.Writer, exitCode *int) *cobra.Command {
	root := &cobra.Command{
		Use:           "ompd-inspect",
		Short:         "Show the OpenMP state of a live process or a core file",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true

	var vf viewFlags
	var debugDirs []string
	addViewFlags := func(c *cobra.Command) {
		addDebugDirFlag(c, &debugDirs)
		c.Flags().BoolVar(&vf.json, "json", false, "print JSON (the schema is in docs/json-schema.md)")
		c.Flags().IntVar(&vf.thread, "thread", 0, "icvs: only the ICVs of this OS thread id; bt: only this thread (OS thread id or gtid)")
		c.Flags().BoolVar(&vf.allFrames, "all-frames", false, "bt: show the OpenMP runtime's and the system's frames too")
		c.Flags().BoolVar(&vf.noCont, "no-continue", false, "bt: do not continue a worker's stack on the thread that encountered its region")
		c.Flags().BoolVar(&vf.group, "group", false, "bt: print threads with the same stack once, with their count and ids")
		c.Flags().StringVar(&vf.backend, "backend", "native", "the OMPD implementation: native (ompd-inspect's own), dll (the runtime's OMPD library), or both (print where they differ; exit code 1 if they do)")
		c.Flags().StringVar(&vf.library, "ompd-library", "", "the OMPD library for --backend dll|both (default: the one the runtime names in ompd_dll_locations)")
		c.Flags().BoolVar(&vf.stats, "stats", false, "print on stderr how long the target was stopped (attach, read, detach), the total time and the peak memory")
	}
	viewHelp := "VIEW is one of " + strings.Join(views, ", ") + " (default summary)"

	var traceAttached bool
	var tf traceFlags
	var retries int
	attach := &cobra.Command{
		Use:   "attach PID [VIEW]",
		Short: "Attach to a running process, report, and detach",
		Long:  "Attach to every thread of a running process, read its OpenMP state, detach (leaving it running as it was), and print a view.\n" + viewHelp,
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			retry := cmd.Flags().Changed("retry")
			if err := checkRetry(retry, retries, args, traceAttached); err != nil {
				return err
			}
			view, err := viewArg(args)
			if err != nil {
				return err
			}
			if err := checkFlags(view, vf); err != nil {
				return err
			}
			pid, err := strconv.Atoi(args[0])
			if err != nil || pid <= 0 {
				return fmt.Errorf("%q is not a process id", args[0])
			}
			if !traceAttached && tracing(cmd) {
				return errors.New("--events, --summary, --stop-at, --then and --output go with --trace")
			}
			if traceAttached {
				if len(args) > 1 || vf != (viewFlags{json: vf.json, backend: backend.NameNative}) {
					return errors.New("--trace takes no view and no view flags")
				}
				tf.json = vf.json
				images, prefetch := liveImageOptions(debugDirs, stderr)
				prefetch(pid)
				tf.images = &images
				return attachTrace(pid, tf, stderr, exitCode)
			}
			images, prefetch := liveImageOptions(debugDirs, stderr)
			prefetch(pid)
			vf.images = &images
			// From before the first ptrace request until the output is
			// written, SIGINT, SIGTERM and SIGHUP end ompd-inspect with
			// one line and 128+signal, the target released.
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
			defer signal.Stop(sigs)
			var reps []*inspect.Report
			note := ""
			if vf.stats {
				vf.times = &phaseTimes{}
			}
			if retry {
				reps, note, err = inspectRetrying(pid, view, vf, retries, sigs)
			} else {
				reps, err = inspectProcess(pid, view, vf, sigs)
			}
			if err != nil {
				return err
			}
			defer ptrace.ExitOnSignals(pid, sigs)()
			err = showAll(stdout, reps, view, vf)
			if note != "" {
				fmt.Fprintln(stderr, note)
			}
			if vf.times != nil {
				vf.times.print(stderr, true, time.Now())
			}
			return err
		},
	}
	addViewFlags(attach)
	attach.Flags().IntVar(&retries, "retry", 0, retryHelp)
	attach.Flags().Lookup("retry").NoOptDefVal = strconv.Itoa(defaultRetries)
	attach.Flags().BoolVar(&traceAttached, "trace", false, "follow the process's OpenMP events instead of printing a view (its runtime must run with OMP_DEBUG=enabled); see run for the trace flags")
	addTraceFlags(attach, &tf, false)

	var copts core.Options
	coreCmd := &cobra.Command{
		Use:   "core COREFILE [VIEW]",
		Short: "Report the OpenMP state recorded in a core file",
		Long:  "Read a core file written by the kernel or by gcore, with the binaries it names, and print a view.\n" + viewHelp,
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			view, err := viewArg(args)
			if err != nil {
				return err
			}
			if err := checkFlags(view, vf); err != nil {
				return err
			}
			copts.Images = imageOptions(debugDirs, stderr)
			var times *phaseTimes
			if vf.stats {
				times = &phaseTimes{start: time.Now()}
			}
			c, err := core.Open(args[0], copts)
			if err != nil {
				return err
			}
			defer c.Close()
			reps, err := buildReports(c, inspect.Source{Kind: "core", Core: args[0]}, view, vf)
			if err != nil {
				return err
			}
			if times != nil {
				times.built, times.threads = time.Now(), len(c.Threads())
			}
			err = showAll(stdout, reps, view, vf)
			if times != nil {
				times.print(stderr, false, time.Now())
			}
			return err
		},
	}
	addViewFlags(coreCmd)
	coreCmd.Flags().StringVar(&copts.Exe, "exe", "", "the executable, when it is not where the core says")
	coreCmd.Flags().StringVar(&copts.Sysroot, "sysroot", "", "look up every path the core names under this directory, as under a chroot (links inside it stay inside it)")
	coreCmd.Flags().StringSliceVar(&copts.SearchPath, "search-path", nil, "directories to look in (by file name) for binaries that moved; repeatable")

	root.AddCommand(attach, coreCmd, newRunCommand(stderr, exitCode), newDebugFileCommand(stdout, stderr))
	return root
}

func viewArg(args []string) (string, error) {
	if len(args) < 2 {
		return "summary", nil
	}
	for _, v := range views {
		if args[1] == v {
			return v, nil
		}
	}
	return "", fmt.Errorf("unknown view %q (views: %s)", args[1], strings.Join(views, ", "))
}

// inspectProcess attaches, reads the report and the threads' stacks,
// detaches, and only then names the frames and prints, so the target is
// stopped for as short a time as possible.
// sigs are the signals caught for the attach: one that arrives while
// attaching or attached ends ompd-inspect with one line, the target
// released.
func inspectProcess(pid int, view string, vf viewFlags, sigs <-chan os.Signal) ([]*inspect.Report, error) {
	popts := attachOptions(view, vf, sigs)
	pt := vf.times
	if pt != nil {
		*pt = phaseTimes{start: time.Now()}
	}
	p, err := ptrace.Attach(pid, popts)
	if err != nil {
		return nil, err
	}
	if pt != nil {
		pt.stopping, pt.attached, pt.threads = p.StopBegan(), time.Now(), len(p.Threads())
	}
	stop := p.DetachOnSignals()
	defer stop()
	defer p.Close()
	if afterAttach != nil {
		afterAttach(pid)
	}
	if os.Getenv("OMPD_INSPECT_PAUSE_ATTACHED") != "" {
		// For tests: hold the target stopped until a signal arrives.
		fmt.Fprintf(os.Stderr, "ompd-inspect: attached to process %d; waiting for a signal\n", pid)
		select {}
	}
	read, err := readReports(p, inspect.Source{Kind: "process"}, view, vf)
	// A process killed (or ending) while it was read leaves a report of
	// torn-down memory: say that instead.
	if aerr := p.Alive(); aerr != nil {
		read, err = nil, aerr
	}
	if pt != nil {
		pt.built = time.Now()
	}
	// The process runs again while the frames are named: only the
	// modules' files are read from here on.
	if derr := p.Detach(); derr != nil && err == nil {
		err = fmt.Errorf("detaching from process %d: %w", pid, derr)
	}
	if pt != nil {
		pt.detached = p.Released() // not the wait for the tracing thread's exit
		if pt.detached.IsZero() {
			pt.detached = time.Now()
		}
	}
	if err != nil {
		return nil, err
	}
	// The process is released: a signal now ends ompd-inspect without
	// closing the images the frames are being named from.
	stop()
	defer ptrace.ExitOnSignals(pid, sigs)()
	return finishReports(read), nil
}

// attachOptions are the options inspectProcess attaches with: the files'
// work is done before the process is stopped (what Build needs, and what
// unwinding needs: some views unwind too, to infer states; the debug
// information that names frames only for the views that show them), the
// memory cache and the heap are readied, and the read is rehearsed
// (rehearse) but for the dll backend.
func attachOptions(view string, vf viewFlags, sigs <-chan os.Signal) ptrace.Options {
	prepStacks := stacks.PrepareUnwind
	if stackViews[view] {
		prepStacks = stacks.PrepareImage
	}
	popts := ptrace.Options{Interrupt: sigs, CachePagesPerThread: cachePagesPerThread, HeapPerThread: heapPerThread, Prepare: func(im *elf.Image) {
		// One image at a time here: Attach prepares as many images at
		// once as there are CPUs.
		inspect.PrepareImage(im)
		prepStacks(im)
	}}
	if vf.images != nil {
		popts.Images = *vf.images
	}
	if vf.backend != backend.NameDLL {
		popts.Rehearse = func(r *ptrace.Running) { _ = rehearse(r, view, vf) }
	}
	return popts
}

// rehearse reads the report of the running process r, with its stacks,
// as it will be read once the process is stopped, and drops it: the
// first-time costs of reading (code paged in, the runtime's layout looked
// up, the unwinder's tables and the caches of the modules' images
// filled) are paid before the stop, and the pages it read are read
// again once stopped (ptrace.Options.Rehearse). The threads r shows that
// were blocked have the thread pointers found at the top of their
// stacks; those without one (the main thread, threads that ran) are
// given in order those the runtime lists that no other has, the main
// thread the initial thread's, so that the threads' paths of the report
// run too. Only the native backend is rehearsed: the dll backend's
// library is not run over a process that runs. It returns what it read,
// for tests; nil when the report could not be built.
func rehearse(r *ptrace.Running, view string, vf viewFlags) []readReport {
	r.SetThreadPointers(inspect.RuntimeThreadPointers(r, len(r.Threads())))
	vf.backend = backend.NameNative
	read, _ := readReports(r, inspect.Source{Kind: "process"}, view, vf)
	return read
}

// cachePagesPerThread is how many pages of target memory a report reads
// per thread: its thread, task and team structures and its stack (the
// views that show stacks unwind, and the others do too when states must
// be inferred or waits explained), 4.6 pages a thread as measured on
// LLVM's libomp, with and without OMPD, with 1024 threads in a barrier.
// ptrace.Attach readies that much memory cache before the stop.
const cachePagesPerThread = 5

// heapPerThread is how much Go heap per thread ptrace.Attach readies
// before the stop, besides the memory cache: reading a report of 1024
// threads (LLVM's libomp, all views) allocates 8 to 12 MiB, whose first
// use of fresh pages was a fifth of the time the target was held
// stopped. The heap it takes is larger than what it allocates (each
// size of object has pages of its own): with 16 KiB a thread (readied
// with the cache then), the read at 1024 threads on stock libomp 19 ran
// past the readied pages (450 faults while held); with 24 KiB it did
// not, and the peak RSS was 58 to 59 MiB. What the read leaves free
// serves the naming after the release.
const heapPerThread = 24 << 10

// afterAttach, when set (by tests), runs right after Attach, before the
// report is built.
var afterAttach func(pid int)

// showsSettings reports whether a view shows the ICVs or the runtime's
// control variables: the icvs, env and all views, and the summary's JSON,
// which is the whole report. The others' reports leave them out
// (inspect.Options.NoSettings).
func showsSettings(view string, json bool) bool {
	switch view {
	case "icvs", "env", "all":
		return true
	case "summary":
		return json
	}
	return false
}

// stackViews are the views that show stacks or top user frames.
var stackViews = map[string]bool{"summary": true, "threads": true, "bt": true, "all": true}

// buildReports builds the report of a stopped target with the backend
// --backend names (with both, the native one first), with backtraces for
// the views that need them.
func buildReports(t target.Target, src inspect.Source, view string, vf viewFlags) ([]*inspect.Report, error) {
	read, err := readReports(t, src, view, vf)
	if err != nil {
		return nil, err
	}
	return finishReports(read), nil
}

// readReport is a report read from a stopped target, with its threads'
// stacks when the view needs them (nil otherwise), before the frames are
// named.
type readReport struct {
	rep   *inspect.Report
	walks *stacks.Walks
}

// readReports reads from a stopped target everything buildReports needs
// from its memory: the reports and the threads' stacks. For a view that
// shows stacks, the stacks are unwound while the first report is built:
// the target is held stopped for the longer of the two, not their sum.
func readReports(t target.Target, src inspect.Source, view string, vf viewFlags) ([]readReport, error) {
	names := []string{vf.backend}
	if vf.backend == "both" {
		names = []string{backend.NameNative, backend.NameDLL}
	}
	var out []readReport
	for i, name := range names {
		build := func(opts inspect.Options) (*inspect.Report, error) {
			opts.Backend, opts.Library = name, vf.library
			// --backend both compares the whole reports, settings too.
			opts.NoSettings = !showsSettings(view, vf.json) && vf.backend != "both"
			return inspect.Build(t, src, opts)
		}
		var walks *stacks.Walks
		var rep *inspect.Report
		var err error
		if i == 0 && stackViews[view] {
			walks, rep, err = unwindWhileBuilding(t, build)
		} else {
			rep, err = build(inspect.Options{})
		}
		if err != nil {
			return nil, err
		}
		r := readReport{rep: rep}
		switch {
		case walks != nil && walks.Runtime() == rep.Runtime.Library:
			r.walks = walks
		case stackViews[view] || rep.NeedsStacks():
			r.walks = stacks.Unwind(t, rep.Runtime.Library)
		}
		out = append(out, r)
	}
	return out, nil
}

// unwindWhileBuilding unwinds t's threads on other goroutines while build
// runs on this one, and returns both results once both are done. The
// unwinding has one CPU fewer than there are: the report's walk is one
// sequence of calls, as long as the unwinding, and had two thirds of a
// CPU when the unwinding had as many goroutines as CPUs; once it is
// built, this goroutine helps unwind what is left. The runtime the walks
// are made for is the module inspect.FindRuntime finds (none when it
// finds none), as Build's; its image is prepared first
// (inspect.PrepareImage, done already for a live process), so that the
// symbols Build would add to it meanwhile (a stripped runtime's recovered
// functions) are there for every walk. build is given the walks
// (Options.Stacks), so that the report reads a thread's call into the
// runtime from them. A panic of the unwinding is raised again here, after
// build returned: the caller's recover then releases a target nothing
// reads any more.
func unwindWhileBuilding(t target.Target, build func(inspect.Options) (*inspect.Report, error)) (*stacks.Walks, *inspect.Report, error) {
	var lib string
	if rt, err := inspect.FindRuntime(t); err == nil {
		lib = rt.Name
		inspect.PrepareImage(rt.Image)
	}
	u := stacks.StartUnwind(t, lib, runtime.GOMAXPROCS(0)-1)
	rep, err := func() (*inspect.Report, error) {
		defer func() {
			if p := recover(); p != nil {
				// The build's panic is raised once the walks are
				// done; a walk's own is dropped.
				func() {
					defer func() { _ = recover() }()
					u.Wait()
				}()
				panic(p)
			}
		}()
		return build(inspect.Options{Stacks: u.Frames})
	}()
	return u.Wait(), rep, err
}

// finishReports bounds the heap (boundHeap), names and places the frames
// of the stacks read and analyzes the waits. The target may have resumed; its modules' images
// must still be open.
func finishReports(read []readReport) []*inspect.Report {
	boundHeap()
	var reps []*inspect.Report
	for _, r := range read {
		if r.walks != nil {
			stacks.Add(r.rep, r.walks)
			stacks.KeepRows(r.walks)
		}
		waits.Analyze(r.rep)
		reps = append(reps, r.rep)
	}
	return reps
}

// showAll prints the view of one report, or with --backend both the
// differences between the two.
func showAll(w io.Writer, reps []*inspect.Report, view string, vf viewFlags) error {
	if len(reps) == 1 {
		return show(w, reps[0], view, vf)
	}
	res := compare.Reports(reps[0], reps[1], compare.View(view))
	if vf.json {
		if err := writeJSON(w, map[string]any{"target": reps[0].Target, "native": reps[0].Runtime, "dll": reps[1].Runtime,
			"compared": res.Compared, "differences": res.Differences,
			"warnings": map[string][]string{"native": reps[0].Warnings, "dll": reps[1].Warnings}}); err != nil {
			return err
		}
	} else {
		render.Differences(w, reps[0], reps[1], res)
	}
	if compare.Unexpected(res.Differences) > 0 {
		return errSilentFailure
	}
	return nil
}

// errSilentFailure makes the command exit with code 1 without a message:
// the output said why.
var errSilentFailure = errors.New("")

// backtraces selects and filters the backtraces the bt view shows.
func backtraces(rep *inspect.Report, vf viewFlags) ([]inspect.Backtrace, error) {
	var out []inspect.Backtrace
	for _, bt := range rep.Backtraces {
		if vf.thread != 0 && bt.OSTID != vf.thread && (bt.GTID == nil || *bt.GTID != vf.thread) {
			continue
		}
		out = append(out, stacks.Filter(bt, vf.allFrames, !vf.noCont))
	}
	if vf.thread != 0 && len(out) == 0 {
		if slices.Contains(rep.Runtime.Unavailable, "threads[].gtid") {
			return nil, fmt.Errorf("%d is not an OS thread id of process %d (the %s backend gives no gtids)", vf.thread, rep.Target.PID, rep.Runtime.Backend)
		}
		return nil, fmt.Errorf("%d is neither an OS thread id nor a gtid of process %d", vf.thread, rep.Target.PID)
	}
	if vf.thread != 0 && len(out) > 1 {
		// A number that is one thread's os_tid and another's gtid: the
		// os_tid wins.
		for _, bt := range out {
			if bt.OSTID == vf.thread {
				out = []inspect.Backtrace{bt}
				break
			}
		}
	}
	return out, nil
}

// groups gathers backtraces with the same GroupKey, in order of first
// appearance.
func groups(bts []inspect.Backtrace) []render.BacktraceGroup {
	var out []render.BacktraceGroup
	index := map[string]int{}
	for _, bt := range bts {
		k := stacks.GroupKey(bt)
		if i, ok := index[k]; ok {
			out[i].Threads = append(out[i].Threads, bt.OSTID)
			continue
		}
		index[k] = len(out)
		out = append(out, render.BacktraceGroup{Threads: []int{bt.OSTID}, Backtrace: bt})
	}
	return out
}

// checkFlags refuses flags that do not go with the view or the backend,
// before the target is touched.
func checkFlags(view string, vf viewFlags) error {
	switch vf.backend {
	case backend.NameNative, backend.NameDLL, "both":
	default:
		return fmt.Errorf("unknown --backend %q: want native, dll or both", vf.backend)
	}
	if vf.library != "" && vf.backend == backend.NameNative {
		return errors.New("--ompd-library goes with --backend dll or both")
	}
	if view != "bt" && view != "all" && (vf.allFrames || vf.noCont || vf.group) {
		return errors.New("--all-frames, --no-continue and --group go with the bt view")
	}
	if view == "all" && vf.group {
		return errors.New("--group goes with the bt view")
	}
	if vf.thread != 0 && view != "icvs" && view != "bt" {
		return errors.New("--thread goes with the icvs and bt views")
	}
	if vf.backend == "both" && (vf.thread != 0 || vf.allFrames || vf.noCont || vf.group) {
		return errors.New("--backend both compares whole views: --thread, --all-frames, --no-continue and --group do not go with it")
	}
	return nil
}

func show(w io.Writer, rep *inspect.Report, view string, vf viewFlags) error {
	if view == "all" {
		bts, err := backtraces(rep, vf)
		if err != nil {
			return err
		}
		if vf.json {
			r := *rep
			r.Backtraces = bts
			return writeJSON(w, &r)
		}
		render.All(w, rep, bts)
		return nil
	}
	if view == "bt" {
		bts, err := backtraces(rep, vf)
		if err != nil {
			return err
		}
		switch {
		case vf.json && vf.group:
			return writeJSON(w, map[string]any{"target": rep.Target, "runtime": rep.Runtime, "warnings": rep.Warnings, "groups": groups(bts)})
		case vf.json:
			return writeJSON(w, map[string]any{"target": rep.Target, "runtime": rep.Runtime, "warnings": rep.Warnings, "backtraces": bts})
		case vf.group:
			render.BacktraceGroups(w, rep, groups(bts))
		default:
			render.Backtraces(w, rep, bts)
		}
		return nil
	}
	r := *rep
	r.Backtraces = nil // only their top user frames are shown
	rep = &r
	icvs := rep.ICVs
	if vf.thread != 0 {
		var ok bool
		if icvs, ok = rep.ThreadICVs(vf.thread); !ok {
			return fmt.Errorf("thread %d is not a thread of process %d", vf.thread, rep.Target.PID)
		}
	}
	if vf.json {
		var v any = rep
		common := func(key string, val any) map[string]any {
			return map[string]any{"target": rep.Target, "runtime": rep.Runtime, "warnings": rep.Warnings, key: val}
		}
		switch view {
		case "threads":
			v = common("threads", rep.Threads)
		case "regions":
			v = common("regions", rep.Regions)
		case "tasks":
			v = common("tasks", rep.Tasks)
		case "icvs":
			v = common("icvs", icvs)
		case "env":
			v = common("control_vars", rep.ControlVars)
		}
		return writeJSON(w, v)
	}
	switch view {
	case "threads":
		render.Threads(w, rep)
	case "regions":
		render.Regions(w, rep)
	case "tasks":
		render.Tasks(w, rep)
	case "icvs":
		render.ICVs(w, rep, icvs)
	case "env":
		render.Env(w, rep)
	default:
		render.Summary(w, rep)
	}
	return nil
}
