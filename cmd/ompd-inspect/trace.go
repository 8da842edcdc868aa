package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/internal/render"
	"github.com/ompd-inspect/ompd-inspect/internal/stacks"
	"github.com/ompd-inspect/ompd-inspect/internal/trace"
	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
	"github.com/ompd-inspect/ompd-inspect/target/ptrace"
)

// traceFlags are the flags of run and attach --trace.
type traceFlags struct {
	json    bool
	summary bool
	events  string
	stopAt  string
	then    string
	output  string
	// images says where the modules' debug files are looked for.
	images *elf.OpenOptions
}

// addTraceFlags declares the trace flags on c; withJSON adds --json (attach
// has it already, as a view flag).
func addTraceFlags(c *cobra.Command, tf *traceFlags, withJSON bool) {
	if withJSON {
		c.Flags().BoolVar(&tf.json, "json", false, "print the events, warnings, summary and exit as JSON lines (the schema is in docs/json-schema.md)")
	}
	c.Flags().StringVar(&tf.events, "events", "parallel,task,thread", "the events to print: a comma-separated list of "+strings.Join(trace.Classes, ", ")+", or all")
	c.Flags().BoolVar(&tf.summary, "summary", false, "print only a table at the end: per construct location, count, team sizes, threads seen and time from begin to end")
	c.Flags().StringVar(&tf.stopAt, "stop-at", "", "stop the program at the first EVENT[:FILE:LINE] (e.g. parallel-begin:nested.c:42, or a class: task) and print the full report with backtraces")
	c.Flags().StringVar(&tf.then, "then", trace.ThenContinue, "after --stop-at: continue (trace on), detach (let the program run untraced) or kill")
	c.Flags().StringVarP(&tf.output, "output", "o", "", "write the trace to this file instead of standard error")
}

// tracing reports whether a trace flag was given.
func tracing(c *cobra.Command) bool {
	for _, f := range []string{"events", "summary", "stop-at", "then", "output"} {
		if c.Flags().Changed(f) {
			return true
		}
	}
	return false
}

// traceOptions checks the trace flags and turns them into options.
func (tf *traceFlags) options() (trace.Options, error) {
	var opts trace.Options
	opts.Classes = map[string]bool{}
	for _, c := range strings.Split(tf.events, ",") {
		c = strings.TrimSpace(c)
		switch {
		case c == "all":
			for _, k := range trace.Classes {
				opts.Classes[k] = true
			}
		case slices.Contains(trace.Classes, c):
			opts.Classes[c] = true
		default:
			return opts, fmt.Errorf("--events: %q is not an event class; want %s or all", c, strings.Join(trace.Classes, ", "))
		}
	}
	switch tf.then {
	case trace.ThenContinue, trace.ThenDetach, trace.ThenKill:
	default:
		return opts, fmt.Errorf("--then %q: want continue, detach or kill", tf.then)
	}
	if tf.stopAt != "" {
		st, err := trace.ParseStopAt(tf.stopAt)
		if err != nil {
			return opts, err
		}
		opts.StopAt = st
	} else if tf.then != trace.ThenContinue {
		return opts, errors.New("--then goes with --stop-at")
	}
	return opts, nil
}

// newRunCommand is `ompd-inspect run -- PROGRAM ARGS...`.
func newRunCommand(stderr io.Writer, code *int) *cobra.Command {
	var tf traceFlags
	var debugDirs []string
	c := &cobra.Command{
		Use:   "run [flags] -- PROGRAM [ARGS...]",
		Short: "Start a program and trace its OpenMP events",
		Long: "Start PROGRAM under ompd-inspect with OMPD data collection on (OMP_DEBUG=enabled, unless its environment sets OMP_DEBUG) and print its OpenMP events " +
			"(parallel regions, tasks, threads) as they happen, through the runtime's OMPD breakpoint locations. The program's input, output, signals and exit code are its own; " +
			"ompd-inspect exits with the program's exit code (128+N if signal N killed it). The trace goes to standard error (or --output).",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := tf.options()
			if err != nil {
				return err
			}
			path, err := exec.LookPath(args[0])
			if err != nil {
				return fmt.Errorf("program %s: %w", args[0], err)
			}
			out, closeOut, err := traceOutput(tf.output, stderr)
			if err != nil {
				return err
			}
			defer closeOut()
			env := os.Environ()
			if _, set := os.LookupEnv("OMP_DEBUG"); !set {
				env = append(env, "OMP_DEBUG=enabled")
			}
			stop := interruptOnSignals()
			defer stop.release()
			images, _ := liveImageOptions(debugDirs, stderr) // the program is not started yet: nothing to prefetch
			tc, err := ptrace.Launch(path, args, ptrace.LaunchOptions{Env: env, Images: images})
			if err != nil {
				return err
			}
			stop.set(tc)
			defer tc.Close()
			return runTrace(tc, out, stderr, tf, opts, stop, code)
		},
	}
	addTraceFlags(c, &tf, true)
	addDebugDirFlag(c, &debugDirs)
	c.Flags().SetInterspersed(false)
	return c
}

// attachTrace is `ompd-inspect attach PID --trace`.
func attachTrace(pid int, tf traceFlags, stderr io.Writer, code *int) error {
	opts, err := tf.options()
	if err != nil {
		return err
	}
	out, closeOut, err := traceOutput(tf.output, stderr)
	if err != nil {
		return err
	}
	defer closeOut()
	stop := interruptOnSignals()
	defer stop.release()
	popts := ptrace.Options{Interrupt: stop.early}
	if tf.images != nil {
		popts.Images = *tf.images
	}
	p, err := ptrace.Attach(pid, popts)
	if err != nil {
		return err // an InterruptedError gives 128+signal
	}
	if err := checkCollection(p); err != nil {
		p.Close()
		return err
	}
	tc, err := p.Trace()
	if err != nil {
		p.Close()
		return err
	}
	stop.set(tc)
	defer tc.Close()
	return runTrace(tc, out, stderr, tf, opts, stop, code)
}

// checkCollection refuses a process whose runtime does not pass its OMPD
// breakpoint locations.
func checkCollection(p *ptrace.Process) error {
	rt, err := inspect.FindRuntime(p)
	if err != nil {
		return nil // not loaded yet: the trace waits for it
	}
	if fam := inspect.FamilyOf(rt); fam != nil && !fam.Traceable() {
		return fmt.Errorf("process %d: its OpenMP runtime %s is the %s, whose OpenMP events cannot be traced yet; `ompd-inspect attach %d` shows its state", p.PID(), rt.Name, fam.Name(), p.PID())
	}
	know, err := inspect.KnowledgeOf(rt)
	if err != nil {
		return fmt.Errorf("process %d: %w; there is nothing to trace", p.PID(), err)
	}
	state, _, ok := know.LinkSymbol(rt, "ompd_state")
	if !ok {
		return fmt.Errorf("process %d: the OpenMP runtime %s has no ompd_state: it was built without OMPD support; there is nothing to trace", p.PID(), rt.Name)
	}
	v, err := target.ReadUint64(p, state+rt.Bias)
	if err != nil {
		return fmt.Errorf("process %d: reading ompd_state: %w", p.PID(), err)
	}
	if v == 0 {
		return fmt.Errorf("process %d runs without OMPD data collection, so its runtime passes no breakpoint location: restart it with OMP_DEBUG=enabled in its environment (or start it with `ompd-inspect run`)", p.PID())
	}
	return nil
}

// traceOutput opens the --output file, or returns stderr.
func traceOutput(path string, stderr io.Writer) (io.Writer, func(), error) {
	if path == "" {
		return stderr, func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--output: %w", err)
	}
	return f, func() { f.Close() }, nil
}

// runTrace follows the program and prints as flags say; it sets *code to
// the program's exit code.
func runTrace(tc *ptrace.Tracee, out, stderr io.Writer, tf traceFlags, opts trace.Options, stop *signalStop, code *int) error {
	enc := json.NewEncoder(out)
	if !tf.summary {
		opts.OnEvent = func(ev trace.Event) {
			if tf.json {
				enc.Encode(ev)
				return
			}
			fmt.Fprintln(out, render.EventLine(ev))
		}
	}
	opts.OnWarning = func(msg string) {
		if tf.json {
			enc.Encode(map[string]string{"warning": msg})
			return
		}
		fmt.Fprintf(out, "ompd-inspect: warning: %s\n", msg)
	}
	opts.Then = tf.then
	opts.OnStop = func(t target.Target, ev trace.Event) error {
		rep, err := inspect.Build(t, inspect.Source{Kind: "process"}, inspect.Options{})
		if err != nil {
			return fmt.Errorf("report at %s: %w", ev.Kind, err)
		}
		stacks.Add(rep, stacks.Unwind(t, rep.Runtime.Library))
		if tf.json {
			return enc.Encode(map[string]any{"stop": ev, "report": rep})
		}
		fmt.Fprintf(out, "--- stopped at %s\n", render.EventLine(ev))
		if err := show(out, rep, "summary", viewFlags{}); err != nil {
			return err
		}
		fmt.Fprintln(out)
		return show(out, rep, "bt", viewFlags{})
	}
	exit, sum, err := trace.Run(tc, opts)
	// From here a signal no longer interrupts anything: the trace is over.
	sig := stop.received()
	if tf.summary {
		if tf.json {
			enc.Encode(map[string]any{"summary": sum})
		} else {
			render.TraceSummary(out, sum)
		}
	}
	if err != nil {
		return err
	}
	if exit.Interrupted {
		exit.Code = 128 + int(sig)
	}
	if tf.json {
		enc.Encode(map[string]any{"exit": exit})
	}
	switch {
	case exit.Interrupted:
		fmt.Fprintf(stderr, "ompd-inspect: %s: removed the breakpoints and detached from process %d\n", unix.SignalName(sig), tc.PID())
	case exit.Killed:
		fmt.Fprintf(stderr, "ompd-inspect: killed process %d\n", tc.PID())
	case exit.Detached:
		fmt.Fprintf(stderr, "ompd-inspect: detached from process %d; it runs on untraced\n", tc.PID())
	case exit.Signal != 0:
		fmt.Fprintf(stderr, "ompd-inspect: process %d was killed by %s\n", tc.PID(), unix.SignalName(syscall.Signal(exit.Signal)))
	}
	*code = exit.Code
	return nil
}

// signalStop turns SIGINT, SIGTERM and SIGHUP into an interrupt of the
// trace, which then removes its breakpoints and detaches. SIGPIPE (the
// reader of the trace went away) does the same: by default it would kill
// ompd-inspect and leave the breakpoints behind, and the program would
// die of SIGTRAP at the next one. A signal that
// arrives before the Tracee exists is remembered and interrupts it as soon
// as it is set.
type signalStop struct {
	sigs  chan os.Signal
	early chan os.Signal // signals before the Tracee exists, for ptrace.Attach
	quit  chan struct{}
	done  chan struct{}
	tc    chan *ptrace.Tracee
	sig   syscall.Signal
}

func interruptOnSignals() *signalStop {
	s := &signalStop{sigs: make(chan os.Signal, 1), early: make(chan os.Signal, 1), quit: make(chan struct{}), done: make(chan struct{}), tc: make(chan *ptrace.Tracee, 1)}
	signal.Notify(s.sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGPIPE)
	go func() {
		defer close(s.done)
		var tc *ptrace.Tracee
		for {
			select {
			case t := <-s.tc:
				tc = t
				if s.sig != 0 {
					tc.Interrupt()
				}
			case sig := <-s.sigs:
				if s.sig == 0 {
					s.sig = sig.(syscall.Signal)
				}
				if tc != nil {
					tc.Interrupt()
				} else {
					select {
					case s.early <- sig:
					default:
					}
				}
			case <-s.quit:
				return
			}
		}
	}()
	return s
}

// set hands the Tracee to interrupt over.
func (s *signalStop) set(tc *ptrace.Tracee) { s.tc <- tc }

// received returns the first signal received, 0 if none.
func (s *signalStop) received() syscall.Signal {
	s.release()
	return s.sig
}

// release stops the signal handling; more calls do nothing.
func (s *signalStop) release() {
	select {
	case <-s.quit:
	default:
		signal.Stop(s.sigs)
		close(s.quit)
	}
	<-s.done
}
