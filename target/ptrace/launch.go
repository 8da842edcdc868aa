package ptrace

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// launchStops bounds the stops Launch goes through before the new process
// is held by PTRACE_SEIZE.
const launchStops = 16

// LaunchOptions says how Launch starts a program.
type LaunchOptions struct {
	// Env is the program's environment.
	Env []string
	// Dir is its working directory; empty means ompd-inspect's.
	Dir string
	// Files are its standard input, output and error; nil entries mean
	// ompd-inspect's own.
	Files [3]*os.File
	// Images says where the separate debug files of the program's
	// modules are looked for besides the default places.
	Images elf.OpenOptions
}

// Launch starts the program at path with arguments argv (argv[0]
// included) under ptrace and returns it stopped before its first
// instruction (the dynamic linker's entry), traced as a Tracee.
//
// The program is started traced, then released into a job-control stop and
// seized, so that it is traced the same way as an attached process
// (PTRACE_SEIZE, no SIGSTOP left behind). If ompd-inspect dies, the kernel
// kills the program (PTRACE_O_EXITKILL): a program left with breakpoints
// in its memory and no tracer would die at the next one anyway.
func Launch(path string, argv []string, opts LaunchOptions) (*Tracee, error) {
	tr := startTracer()
	var pid int
	var err error
	tr.do(func() { pid, err = launch(path, argv, opts) })
	if err != nil {
		if serr := tr.stop(); serr != nil {
			err = errors.Join(err, serr)
		}
		return nil, err
	}
	t := newTracee(pid, pid, tr)
	t.imageOpts = opts.Images
	t.launched = true
	t.threads[pid] = &tthread{tid: pid, stopped: true}
	return t, nil
}

// launch runs on the tracing thread.
func launch(path string, argv []string, opts LaunchOptions) (int, error) {
	files := []*os.File{os.Stdin, os.Stdout, os.Stderr}
	for i, f := range opts.Files {
		if f != nil {
			files[i] = f
		}
	}
	proc, err := os.StartProcess(path, argv, &os.ProcAttr{
		Dir:   opts.Dir,
		Env:   opts.Env,
		Files: files,
		Sys:   &syscall.SysProcAttr{Ptrace: true},
	})
	if err != nil {
		return 0, fmt.Errorf("starting %s: %w", path, err)
	}
	pid := proc.Pid
	_ = proc.Release()
	fail := func(err error) (int, error) {
		_ = unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		for {
			if _, e := unix.Wait4(pid, &ws, unix.WALL, nil); !errors.Is(e, unix.EINTR) {
				break
			}
		}
		return 0, fmt.Errorf("starting %s (process %d): %w", path, pid, err)
	}
	// The stop after exec (PTRACE_TRACEME).
	ws, err := waitPid(pid, unix.WALL)
	if err != nil {
		return fail(err)
	}
	if !ws.Stopped() || ws.StopSignal() != unix.SIGTRAP {
		return fail(fmt.Errorf("unexpected first stop (status %#x)", uint32(ws)))
	}
	// Hand it over to a job-control stop, then seize it.
	if err := ptraceDetach(pid, int(unix.SIGSTOP)); err != nil {
		return fail(fmt.Errorf("releasing it: %w", err))
	}
	ws, err = waitPid(pid, unix.WUNTRACED)
	if err != nil {
		return fail(err)
	}
	if !ws.Stopped() {
		return fail(fmt.Errorf("it did not stop (status %#x)", uint32(ws)))
	}
	if err := ptraceSeize(pid, traceOptions|unix.PTRACE_O_EXITKILL); err != nil {
		return fail(fmt.Errorf("seizing it: %w", err))
	}
	if err := unix.PtraceInterrupt(pid); err != nil {
		return fail(fmt.Errorf("interrupting it: %w", err))
	}
	if err := unix.Kill(pid, unix.SIGCONT); err != nil {
		return fail(fmt.Errorf("continuing it: %w", err))
	}
	for range launchStops {
		ws, err := waitPid(pid, unix.WALL)
		if err != nil {
			return fail(err)
		}
		if !ws.Stopped() {
			return fail(fmt.Errorf("it ended before it started (status %#x)", uint32(ws)))
		}
		event := int(ws>>16) & 0xff
		switch {
		case event == unix.PTRACE_EVENT_STOP && ws.StopSignal() == unix.SIGTRAP:
			return pid, nil // held by the interrupt
		default:
			// The group stop, seen by its new tracer (the pending
			// interrupt stops it again at once), or the SIGCONT we sent:
			// neither is for the program.
			if err := unix.PtraceCont(pid, 0); err != nil {
				return fail(err)
			}
		}
	}
	return fail(errors.New("it did not stop for ompd-inspect"))
}

// waitPid waits for one status change of pid.
func waitPid(pid, options int) (unix.WaitStatus, error) {
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, options, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return ws, err
	}
}
