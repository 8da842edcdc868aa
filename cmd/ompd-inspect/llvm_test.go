package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
)

// gdbOMPD runs LLVM's own OMPD library, through its gdb plugin, on process
// pid with the given plugin commands, and returns gdb's output.
func gdbOMPD(t *testing.T, pid int, cmds ...string) string {
	t.Helper()
	libompd := fixture.LibompdPath()
	plugin := filepath.Join(filepath.Dir(filepath.Dir(libompd)), "gdb-plugin", "python-module", "ompd", "__init__.py")
	if _, err := os.Stat(plugin); err != nil {
		t.Fatalf("LLVM's OMPD gdb plugin is missing (%v): run scripts/setup.sh", err)
	}
	args := []string{"-batch", "-nx", "-p", strconv.Itoa(pid), "-ex", "source " + plugin, "-ex", "ompd init"}
	for _, c := range cmds {
		args = append(args, "-ex", c)
	}
	cmd := exec.Command("gdb", args...)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+filepath.Dir(libompd))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, out)
	}
	return string(out)
}

var icvLine = regexp.MustCompile(`^(\S+-var)\s+(address_space|thread|parallel|task)\s*(.*)$`)

// Every ICV that LLVM's library gives for the initial thread (gdb's
// current thread) equals ompd-inspect's, at the same scope.
func TestICVsAgreeWithLLVMLibrary(t *testing.T) {
	p := fixture.Start(t, "icvs", fixture.StartOptions{Env: icvEnv})
	r := reportOfProcess(t, "attach", strconv.Itoa(p.PID), "icvs", "--thread", strconv.Itoa(p.PID))
	assertRunning(t, p)
	ours := map[string]string{}
	for _, v := range r.ICVs {
		if f, ok := v.Value.(float64); ok {
			ours[v.Name+" "+v.Scope] = strconv.FormatFloat(f, 'f', -1, 64)
		} else {
			ours[v.Name+" "+v.Scope] = fmt.Sprint(v.Value)
		}
	}
	out := gdbOMPD(t, p.PID, "ompd icvs")
	assertRunning(t, p)
	n := 0
	for _, line := range strings.Split(out, "\n") {
		m := icvLine.FindStringSubmatch(strings.TrimRight(line, " "))
		if m == nil {
			continue
		}
		n++
		key := m[1] + " " + m[2]
		got, ok := ours[key]
		if !ok {
			t.Errorf("LLVM's library gives %s at %s scope; ompd-inspect does not", m[1], m[2])
			continue
		}
		if got != strings.TrimSpace(m[3]) {
			t.Errorf("%s (%s): ompd-inspect %q, LLVM's library %q", m[1], m[2], got, m[3])
		}
	}
	if n != 30 || len(r.ICVs) != 30 {
		t.Errorf("LLVM's library printed %d ICVs, ompd-inspect %d; want 30 each\n%s", n, len(r.ICVs), out)
	}
}

var parallelHeader = regexp.MustCompile(`Parallel Region: Nesting Level (\d+): Team Size: (\d+)`)

// The chain of regions LLVM's library walks from the innermost thread
// (gdb's thread 1 is the initial thread, in middle_a) has the same levels
// and team sizes as ompd-inspect's.
func TestRegionsAgreeWithLLVMLibrary(t *testing.T) {
	p := fixture.Start(t, "nested", fixture.StartOptions{Env: []string{"OMP_DEBUG=enabled"}})
	r := reportOfProcess(t, "attach", strconv.Itoa(p.PID))
	out := gdbOMPD(t, p.PID, "ompd parallel")
	assertRunning(t, p)
	var llvm []string
	for _, m := range parallelHeader.FindAllStringSubmatch(out, -1) {
		llvm = append(llvm, m[1]+":"+m[2])
	}
	var ours []string
	id := str(threadOf(t, r, p.PID).Region)
	for id != "<null>" {
		reg := regionByID(t, r, id)
		ours = append(ours, fmt.Sprintf("%d:%d", reg.Level, reg.TeamSize))
		id = str(reg.Parent)
	}
	if strings.Join(llvm, " ") != strings.Join(ours, " ") || strings.Join(ours, " ") != "2:3 1:2" {
		t.Errorf("region chain of the initial thread: LLVM's library %v, ompd-inspect %v; want [2:3 1:2]\n%s", llvm, ours, out)
	}
}
