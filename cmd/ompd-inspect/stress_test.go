package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
)

// inProcessCycles is how many times TestInProcessAttachCycles attaches.
const inProcessCycles = 200

// TestInProcessAttachCycles attaches to a busy fixture from this test
// process, which is also the fixture's parent, again and again. After every
// cycle the fixture must still be alive (a probe with WNOWAIT looks without
// reaping) and no thread of it stopped or traced; at the end it must still
// compute correct results. It guards against the tracing thread and the
// parent's own child handling getting in each other's way: the fixture is
// started with a parent-death signal, and the tracing thread of each attach
// exits on detach.
func TestInProcessAttachCycles(t *testing.T) {
	p := fixture.Start(t, "busy", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}})
	pid := strconv.Itoa(p.PID)
	for i := range inProcessCycles {
		if _, errs, code := cli("attach", pid, "regions", "--json"); code != 0 {
			t.Fatalf("cycle %d: exit %d: %s%s", i, code, errs, deathOf(p.PID))
		}
		if d := deathOf(p.PID); d != "" {
			t.Fatalf("cycle %d: %s", i, d)
		}
		if stopped := p.StoppedThreads(t); len(stopped) != 0 {
			t.Fatalf("cycle %d: threads %v left stopped or traced", i, stopped)
		}
	}
	from := len(p.Lines())
	_, line := p.WaitLine(t, from, "OK ")
	if strings.Contains(p.Stderr(), "FAIL") {
		t.Fatalf("busy wrote to stderr: %s (last line %q)", p.Stderr(), line)
	}
}

// deathOf describes how process pid, a child of this process, ended, or
// returns "" while it lives. It never reaps the child.
func deathOf(pid int) string {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if err != nil {
		return fmt.Sprintf("process %d: probing with waitid: %v (already reaped?)", pid, err)
	}
	if info.Signo == 0 {
		return ""
	}
	code, status := siginfoChild(&info)
	return fmt.Sprintf("process %d ended: si_code %d, status %d", pid, code, status)
}

// siginfoChild returns si_code and si_status of a SIGCHLD siginfo (si_status
// follows si_pid and si_uid in the union, 24 bytes into the structure).
func siginfoChild(info *unix.Siginfo) (code, status int32) {
	b := (*[128]byte)(unsafe.Pointer(info))
	return info.Code, *(*int32)(unsafe.Pointer(&b[24]))
}
