package ptrace

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadStatus: a status file is parsed from one buffer, grown for a
// long file and bounded; a missing State or a bad number is an error that
// names the file and field. The process's own status agrees with its pid.
func TestReadStatus(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	long := strings.Repeat("Padding:\tx\n", 1000) // 11 000 bytes before the fields
	for _, c := range []struct {
		name, body string
		want       procStatus
		err        string
	}{
		{"plain", "Name:\tprog\nState:\tS (sleeping)\nTgid:\t42\nTracerPid:\t0\n", procStatus{Name: "prog", State: "S (sleeping)", Tgid: 42}, ""},
		{"long", long + "Name:\tp\nState:\tt (tracing stop)\nTgid:\t7\nTracerPid:\t9", procStatus{Name: "p", State: "t (tracing stop)", Tgid: 7, TracerPid: 9}, ""},
		{"no state", "Name:\tprog\nTgid:\t42\n", procStatus{}, "no State field"},
		{"bad tgid", "State:\tR\nTgid:\tforty\n", procStatus{}, "field Tgid: strconv.Atoi"},
		{"past the bound", strings.Repeat("x", maxStatusBytes+10) + "\nState:\tR\n", procStatus{}, "no State field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := write(c.name, c.body)
			got, err := readStatus(p)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), p) {
					t.Errorf("readStatus = %+v, %v; want an error naming %s and saying %q", got, err, p, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("readStatus = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
	self, err := readStatus(fmt.Sprintf("/proc/%d/status", os.Getpid()))
	if err != nil || self.Tgid != os.Getpid() {
		t.Errorf("own status: %+v, %v; want Tgid %d", self, err, os.Getpid())
	}
}
