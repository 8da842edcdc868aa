package ptrace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// procStatus holds the fields of /proc/PID/status that attaching needs.
type procStatus struct {
	Name      string
	State     string // as printed, e.g. "S (sleeping)"
	Tgid      int
	TracerPid int
	Threads   int
}

// maxStatusBytes bounds a /proc/.../status file (about 1.5 KiB).
const maxStatusBytes = 64 << 10

// readStatus parses a /proc/.../status file. It is read for every thread
// of a process, sometimes several times, so it is read into one buffer
// and parsed in place.
func readStatus(path string) (procStatus, error) {
	f, err := os.Open(path)
	if err != nil {
		return procStatus{}, err
	}
	defer f.Close()
	data := make([]byte, 0, 4096)
	for len(data) < maxStatusBytes {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := f.Read(data[len(data):min(cap(data), maxStatusBytes)])
		data = data[:len(data)+n]
		if err == io.EOF || (err == nil && n == 0) {
			break
		}
		if err != nil {
			return procStatus{}, err
		}
	}
	var st procStatus
	for rest := data; len(rest) > 0; {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte{'\n'})
		k, v, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		val := func() string { return string(bytes.TrimSpace(v)) }
		switch string(k) {
		case "Name":
			st.Name = val()
		case "State":
			st.State = val()
		case "Tgid":
			st.Tgid, err = strconv.Atoi(val())
		case "TracerPid":
			st.TracerPid, err = strconv.Atoi(val())
		case "Threads":
			st.Threads, err = strconv.Atoi(val())
		}
		if err != nil {
			return procStatus{}, fmt.Errorf("%s: field %s: %w", path, k, err)
		}
	}
	if st.State == "" {
		return procStatus{}, fmt.Errorf("%s: no State field", path)
	}
	return st, nil
}

// stateLetter is the one-letter code of a State field ("S (sleeping)" → 'S').
func (st procStatus) stateLetter() byte {
	if st.State == "" {
		return 0
	}
	return st.State[0]
}

// pfKthread is the kernel's PF_KTHREAD task flag, field 9 of /proc/PID/stat.
const pfKthread = 0x00200000

// isKernelThread reports whether /proc/PID/stat marks pid as a kernel thread.
func isKernelThread(pid int) (bool, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false, err
	}
	// The command name is in parentheses and may itself contain spaces and
	// parentheses: the fields start after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return false, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state); flags is field 9.
	if len(f) < 7 {
		return false, fmt.Errorf("/proc/%d/stat: %d fields, want at least 9", pid, len(f)+2)
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	if err != nil {
		return false, fmt.Errorf("/proc/%d/stat: flags: %w", pid, err)
	}
	return flags&pfKthread != 0, nil
}

// listTasks returns the thread ids in /proc/PID/task, ascending.
func listTasks(pid int) ([]int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		tids = append(tids, tid)
	}
	sort.Ints(tids)
	return tids, nil
}

// tracerOf describes the process that owns the tracing thread tracerTID
// (TracerPid in /proc names a thread): its process id and command name.
func tracerOf(tracerTID int) (pid int, name string) {
	st, err := readStatus(fmt.Sprintf("/proc/%d/status", tracerTID))
	if err != nil {
		return tracerTID, ""
	}
	pid = st.Tgid
	if pid == 0 {
		pid = tracerTID
	}
	if pid != tracerTID {
		if pst, err := readStatus(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
			return pid, pst.Name
		}
	}
	return pid, st.Name
}

// capSysPtrace is the capability number of CAP_SYS_PTRACE.
const capSysPtrace = 19

// haveCapSysPtrace reports whether this process's effective capabilities
// include CAP_SYS_PTRACE; ok is false when that cannot be read.
func haveCapSysPtrace() (have, ok bool) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		val, found := strings.CutPrefix(line, "CapEff:")
		if !found {
			continue
		}
		caps, err := strconv.ParseUint(strings.TrimSpace(val), 16, 64)
		if err != nil {
			return false, false
		}
		return caps&(1<<capSysPtrace) != 0, true
	}
	return false, false
}

// yamaScopeFile is where the Yama LSM publishes kernel.yama.ptrace_scope.
const yamaScopeFile = "/proc/sys/kernel/yama/ptrace_scope"

// permissionHint explains why attaching may have been refused with EPERM
// when no other tracer is present.
func permissionHint() string {
	var b strings.Builder
	scope := ""
	if data, err := os.ReadFile(yamaScopeFile); err == nil {
		scope = strings.TrimSpace(string(data))
	}
	switch scope {
	case "":
		b.WriteString("there is no kernel.yama.ptrace_scope on this system, so the process probably belongs to another user, has changed its credentials or is not dumpable")
	case "0":
		b.WriteString("kernel.yama.ptrace_scope is 0, so the process probably belongs to another user, has changed its credentials or is not dumpable")
	case "1":
		b.WriteString("kernel.yama.ptrace_scope is 1, so only an ancestor of the process, or a process it allowed with prctl(PR_SET_PTRACER), may attach without CAP_SYS_PTRACE")
	case "2":
		b.WriteString("kernel.yama.ptrace_scope is 2, so only a process with CAP_SYS_PTRACE may attach")
	case "3":
		b.WriteString("kernel.yama.ptrace_scope is 3, so no process may attach until the next reboot")
		return b.String()
	default:
		fmt.Fprintf(&b, "kernel.yama.ptrace_scope is %s", scope)
	}
	switch have, ok := haveCapSysPtrace(); {
	case ok && have:
		b.WriteString("; ompd-inspect has CAP_SYS_PTRACE, so a security module (SELinux, AppArmor) or a user namespace boundary may be refusing it")
	case ok:
		b.WriteString("; attaching needs CAP_SYS_PTRACE (for example running as root), which ompd-inspect does not have")
	default:
		b.WriteString("; attaching may need CAP_SYS_PTRACE (for example running as root)")
	}
	return b.String()
}

// ErrGone is wrapped by Alive's error: the process ended while attached.
var ErrGone = errors.New("the process ended")

// Alive returns nil while some thread of the process still lives (not a
// zombie), and an error wrapping ErrGone once all have exited: a process
// killed or ending while it was read, whose memory may have been torn down
// under the reader.
func (p *Process) Alive() error {
	// The memory of a killed process is torn down before its threads
	// become zombies: a byte of the stack of the thread memory is read
	// through, read in one system call, answers for a live process what
	// the files below answer in 30 to 80 µs (a tenth of the read of 4
	// threads). What it cannot answer, they do.
	if len(p.threads) > 0 && p.mem.readable(p.threads[0].Regs.Rsp) {
		return nil
	}
	return p.aliveInProc()
}

// aliveInProc is Alive's answer from the process's files in /proc.
func (p *Process) aliveInProc() error {
	dir := fmt.Sprintf("/proc/%d/task", p.pid)
	// A killed process loses its memory before its threads become
	// zombies: no mappings left for the thread memory was read through
	// means it is gone too. Its first line is enough to tell: a thousand
	// threads' stacks make the whole file long.
	if !hasMappings(filepath.Join(dir, strconv.Itoa(p.mem.tid), "maps")) {
		return p.goneError()
	}
	// That thread is looked at first, the others only when it has ended.
	if alive(filepath.Join(dir, strconv.Itoa(p.mem.tid), "status")) {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return p.goneError()
	}
	if err != nil {
		return fmt.Errorf("process %d: listing its threads: %w", p.pid, err)
	}
	for _, e := range ents {
		if alive(filepath.Join(dir, e.Name(), "status")) {
			return nil
		}
	}
	return p.goneError()
}

// hasMappings reports whether the maps file at path can be read and
// lists at least one mapping.
func hasMappings(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [64]byte
	n, _ := f.Read(b[:])
	return n > 0
}

// firstLiveThread returns the first thread of process pid, by id, that
// is neither a zombie nor dead; 0 when there is none.
func firstLiveThread(pid int) int {
	tids, err := listTasks(pid)
	if err != nil {
		return 0
	}
	for _, tid := range tids {
		if alive(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid)) {
			return tid
		}
	}
	return 0
}

// alive reports whether the thread whose status file is at path is
// neither a zombie nor dead; false when it cannot be read (it went).
func alive(path string) bool {
	st, err := readStatus(path)
	if err != nil {
		return false
	}
	l := st.stateLetter()
	return l != 'Z' && l != 'X'
}

// readProcFile reads a whole /proc file, whose size stat does not give,
// in as few reads as its length allows: os.ReadFile starts from 512
// bytes, and a thousand threads make /proc/PID/maps 100 KiB.
func readProcFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data := make([]byte, 0, 128<<10)
	for {
		if len(data) == cap(data) {
			data = slices.Grow(data, len(data))
		}
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF || (err == nil && n == 0) {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
