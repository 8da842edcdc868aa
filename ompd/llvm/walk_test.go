package llvm_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/ompd/llvm"
)

// transcript asks the address space everything a debugger would and
// writes the answers, with addresses named by name. Errors appear as their
// return code only (their text holds layout-dependent addresses). Every
// walk is bounded, so a corrupt image cannot make it loop.
func transcript(as *llvm.AddressSpace, name func(uint64) string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	e := func(err error) string {
		if err == nil {
			return "ok"
		}
		return ompd.RCOf(err).String()
	}
	icvs := func(indent string, scope ompd.Scope, h any) {
		for _, icv := range as.EnumerateICVs() {
			if icv.Scope == scope {
				v, err := as.ICVValue(h, icv.ID)
				w("%s%s = %q %s", indent, icv.Name, v.String(), e(err))
			}
		}
	}
	loc := func(l ompd.Location, err error) string {
		if err != nil {
			return "-"
		}
		return fmt.Sprintf("%s:%s:%d:%d", l.File, l.Function, l.Line, l.Column)
	}
	task := func(indent string, k *llvm.Task) {
		f, ferr := k.Flags()
		fn, fnErr := k.Function()
		exit, enter, frErr := k.Frame()
		w("%stask %s (td %s) flags %+v %s fn %#x %s frame %#x %#x %s", indent, name(k.Addr()), name(k.TaskData()),
			f, e(ferr), fn, e(fnErr), exit, enter, e(frErr))
		if sp, err := k.Scheduling(); err == nil {
			w("%s  scheduled by %s", indent, name(sp.Addr()))
		} else {
			w("%s  scheduled by - %s", indent, e(err))
		}
		if p, err := k.Parallel(); err == nil {
			w("%s  in region %s", indent, name(p.Addr()))
		} else {
			w("%s  in region - %s", indent, e(err))
		}
		id, idErr := k.RuntimeID()
		tv, _, tdErr := k.ToolData()
		w("%s  at %s id %d %s tool data %#x %s", indent, loc(k.Location()), id, e(idErr), tv, e(tdErr))
		icvs(indent+"  ", ompd.ScopeTask, k)
	}

	w("state tracking %v", as.StateTracking())
	v, err := as.OMPVersion()
	w("version %d %s", v, e(err))
	dll, err := as.DLLLocations()
	w("dll locations %q %s", dll, e(err))
	env, err := as.DisplayControlVars()
	w("control vars %q %s", env, e(err))
	icvs("", ompd.ScopeAddressSpace, as)

	var current []*llvm.Task
	threads, err := as.Threads()
	w("threads %d %s", len(threads), e(err))
	for _, th := range threads {
		id, idErr := th.ID(ompd.ThreadIDPthread)
		n, nErr := th.ThreadNum()
		st, wait, stErr := th.State()
		tv, _, tdErr := th.ToolData()
		w("thread gtid %d %s id %#x %s num %d %s state %v wait %#x %s tool data %#x %s", th.GTID(), name(th.Addr()),
			id, e(idErr), n, e(nErr), st, wait, e(stErr), tv, e(tdErr))
		if h, err := as.ThreadHandle(ompd.ThreadIDPthread, id); err == nil {
			w("  handle %s compare %d", name(h.Addr()), h.Compare(th))
		} else {
			w("  handle - %s", e(err))
		}
		icvs("  ", ompd.ScopeThread, th)
		p, err := th.CurrentParallel()
		for depth := 0; err == nil && depth < 16; depth++ {
			lv, lvErr := p.Level()
			al, alErr := p.ActiveLevel()
			sz, szErr := p.TeamSize()
			fn, fnErr := p.Function()
			tv, _, tdErr := p.ToolData()
			w("  region %s team %s serialized %v level %d %s active %d %s size %d %s fn %#x %s tool data %#x %s at %s",
				name(p.Addr()), name(p.Team()), p.Serialized(), lv, e(lvErr), al, e(alErr), sz, e(szErr), fn, e(fnErr),
				tv, e(tdErr), loc(p.Location()))
			for i := 0; i < min(sz, 8); i++ {
				if m, err := p.ThreadIn(i); err == nil {
					w("    member %d %s gtid %d", i, name(m.Addr()), m.GTID())
				} else {
					w("    member %d - %s", i, e(err))
				}
				if k, err := p.TaskIn(i); err == nil {
					w("    implicit task %d %s", i, name(k.Addr()))
				} else {
					w("    implicit task %d - %s", i, e(err))
				}
			}
			icvs("    ", ompd.ScopeParallel, p)
			p, err = p.Enclosing()
		}
		w("  regions end %s", e(err))
		k, err := th.CurrentTask()
		if err == nil {
			current = append(current, k)
		}
		for depth := 0; err == nil && depth < 16; depth++ {
			task("  ", k)
			k, err = k.Generating()
		}
		w("  tasks end %s", e(err))
	}
	queued, err := as.QueuedTasks()
	w("queued %d %s", len(queued), e(err))
	for _, k := range queued {
		task("  ", k)
	}
	blocked, err := as.BlockedTasks(append(current, queued...))
	w("blocked %d %s", len(blocked), e(err))
	for _, bt := range blocked {
		w("  blocked %s pending %d, after %d tasks", name(bt.Task.Addr()), bt.Pending, len(bt.Predecessors))
		for _, p := range bt.Predecessors {
			w("    after %s", name(p.Addr()))
		}
		task("  ", bt.Task)
	}
	return b.String()
}

func walkEverything(as *llvm.AddressSpace) string { return transcript(as, hexs) }

// The same scenario laid out three ways gives the same answers.
func TestSameAnswersAcrossLayouts(t *testing.T) {
	for _, o := range []scenarioOpts{full, {}} {
		var first, firstName string
		for _, p := range layouts {
			s := newScenario(t, p, o)
			var got string
			within(t, "transcript", func() { got = transcript(s.init(t), s.name) })
			if first == "" {
				first, firstName = got, p.name
				if testing.Verbose() {
					t.Logf("transcript (%s, %+v):\n%s", p.name, o, got)
				}
				continue
			}
			if got != first {
				t.Errorf("layout %s answers differently from %s:\n%s", p.name, firstName, diff(first, got))
			}
		}
	}
}

// diff shows the first differing lines.
func diff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := 0; i < max(len(al), len(bl)) && len(out) < 20; i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out = append(out, fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, x, y))
		}
	}
	return strings.Join(out, "\n")
}

// One address space handle may be used from several goroutines (the
// layout cache and the thread table are shared): run with -race.
func TestConcurrentUse(t *testing.T) {
	s := newScenario(t, layouts[0], full)
	want := transcript(s.init(t), s.name)
	as := s.init(t)
	const n = 8
	got := make([]string, n)
	done := make(chan int, n)
	for i := range n {
		go func() {
			got[i] = transcript(as, s.name)
			done <- i
		}()
	}
	within(t, "concurrent transcripts", func() {
		for range n {
			<-done
		}
	})
	for i, g := range got {
		if g != want {
			t.Errorf("goroutine %d:\n%s", i, diff(want, g))
		}
	}
}
