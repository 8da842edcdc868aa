package inspect

import (
	"testing"

	"github.com/ompd-inspect/ompd-inspect/target"
)

// crashTarget is a target with threads and a first-written thread, as a
// core has.
type crashTarget struct {
	target.Target
	threads []target.Thread
	first   int
}

func (c crashTarget) Threads() []target.Thread { return c.threads }
func (c crashTarget) CrashTID() int            { return c.first }

func TestCrashOf(t *testing.T) {
	threads := []target.Thread{{TID: 10, Signal: 11}, {TID: 12, Signal: 11}, {TID: 13, Signal: 19}}
	core := Source{Kind: "core"}
	cases := []struct {
		name string
		t    target.Target
		src  Source
		want *Crash
	}{
		{"kernel core: the first-written thread took SIGSEGV", crashTarget{threads: threads, first: 12}, core, &Crash{OSTID: 12, Signal: "SIGSEGV", Number: 11}},
		{"a stop signal is no crash (gcore)", crashTarget{threads: threads, first: 13}, core, nil},
		{"first-written thread not among the threads", crashTarget{threads: threads, first: 99}, core, nil},
		{"a live process has no crash", crashTarget{threads: threads, first: 12}, Source{Kind: "process"}, nil},
	}
	for _, c := range cases {
		got := crashOf(c.t, c.src)
		switch {
		case (got == nil) != (c.want == nil):
			t.Errorf("%s: crashOf = %+v, want %+v", c.name, got, c.want)
		case got != nil && *got != *c.want:
			t.Errorf("%s: crashOf = %+v, want %+v", c.name, *got, *c.want)
		}
	}
}
