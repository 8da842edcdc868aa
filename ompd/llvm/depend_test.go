package llvm_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/ompd/llvm"
)

// blocked formats BlockedTasks' answer as "B1<-E1(1) ...".
func blocked(s *scenario, bs []llvm.BlockedTask) string {
	var out []string
	for _, b := range bs {
		var preds []string
		for _, p := range b.Predecessors {
			preds = append(preds, s.name(p.Addr()))
		}
		out = append(out, fmt.Sprintf("%s<-%s(%d)", s.name(b.Task.Addr()), strings.Join(preds, ","), b.Pending))
	}
	return strings.Join(out, " ")
}

func TestBlockedTasks(t *testing.T) {
	forLayouts(t, full, func(t *testing.T, s *scenario) {
		as := s.init(t)
		e1 := try(s.handle(t, as, ptTh1).CurrentTask()).must(t)
		bs := try(as.BlockedTasks([]*llvm.Task{e1})).must(t)
		if got, want := blocked(s, bs), "B1<-E1(1) B2<-E1(1) B3<-B1,B2(2)"; got != want {
			t.Errorf("BlockedTasks(E1) = %s, want %s", got, want)
		}
		for i, b := range bs {
			if fn := try(b.Task.Function()).must(t); fn != fnB+0x10*uint64(i) {
				t.Errorf("%s: Function() = %#x", s.name(b.Task.Addr()), fn)
			}
		}
		// Tasks given are not returned; the same start twice counts once.
		b1 := bs[0].Task
		bs = try(as.BlockedTasks([]*llvm.Task{b1, e1, b1})).must(t)
		if got, want := blocked(s, bs), "B3<-B1,B2(2) B2<-E1(1)"; got != want { // breadth first from B1
			t.Errorf("BlockedTasks(B1, E1) = %s, want %s", got, want)
		}
		// A task without dependences blocks nothing.
		if bs := try(as.BlockedTasks([]*llvm.Task{try(s.handle(t, as, ptTh0).CurrentTask()).must(t)})).must(t); len(bs) != 0 {
			t.Errorf("BlockedTasks(imp1.0) = %s", blocked(s, bs))
		}
	})
	s := newScenario(t, layouts[0], tracking)
	as := s.init(t)
	e1 := try(s.handle(t, as, ptTh1).CurrentTask()).must(t)
	if _, err := as.BlockedTasks([]*llvm.Task{e1}); !errors.Is(err, ompd.ErrNoTypeLayouts) {
		t.Errorf("BlockedTasks without TypeLayouts: %v", err)
	}
}

func TestBlockedTasksCycles(t *testing.T) {
	t.Run("successor list loops", func(t *testing.T) {
		s := newScenario(t, layouts[1], full)
		// E1's list: B1 -> done -> B2 -> back to B1's item.
		item := s.ptrAt(s.b.addrOf(s.depnode["E1"], "kmp_depnode_t", "dn.successors"))
		last := s.ptrAt(s.b.addrOf(s.ptrAt(s.b.addrOf(item, "kmp_depnode_list_t", "next")), "kmp_depnode_list_t", "next"))
		s.b.set(last, "kmp_depnode_list_t", "next", item)
		as := s.init(t)
		e1 := try(s.handle(t, as, ptTh1).CurrentTask()).must(t)
		var err error
		within(t, "BlockedTasks", func() { _, err = as.BlockedTasks([]*llvm.Task{e1}) })
		wantErrContains(t, err, "successor list of dependence node", "does not end after 3 entries")
	})
	t.Run("graph cycle", func(t *testing.T) {
		s := newScenario(t, layouts[2], full)
		s.succ("B3", "B1", "E1") // B3 -> B1 and B3 -> E1: a dependence cycle
		as := s.init(t)
		e1 := try(s.handle(t, as, ptTh1).CurrentTask()).must(t)
		var bs []llvm.BlockedTask
		var err error
		within(t, "BlockedTasks", func() { bs, err = as.BlockedTasks([]*llvm.Task{e1}) })
		if err != nil {
			t.Fatal(err)
		}
		if got, want := blocked(s, bs), "B1<-E1,B3(1) B2<-E1(1) B3<-B1,B2(2)"; got != want {
			t.Errorf("BlockedTasks = %s, want %s", got, want)
		}
	})
	t.Run("unreadable node", func(t *testing.T) {
		s := newScenario(t, layouts[0], full)
		s.denyField(s.depnode["B2"], "kmp_depnode_t", "dn.npredecessors")
		as := s.init(t)
		e1 := try(s.handle(t, as, ptTh1).CurrentTask()).must(t)
		_, err := as.BlockedTasks([]*llvm.Task{e1})
		wantErrContains(t, err, "dependences of task", "kmp_base_depnode_t.npredecessors at", "input/output error")
	})
}
