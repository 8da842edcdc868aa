package recovery

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/ompd/llvm"
)

// liveTarget serves the OMPD layer from a running process on a stripped
// runtime: symbols from what recovery found, memory from /proc/PID/mem,
// type layouts from the release's table (the embedded *TypeTable is the
// ompd.TypeLayouts extension, as the debugger's callbacks would give it).
type liveTarget struct {
	*TypeTable
	f    *os.File
	bias uint64
	k    *Knowledge
}

func (l *liveTarget) SymbolAddr(name, fileHint string) (ompd.Address, error) {
	a, ok := l.k.Symbols[name]
	if !ok {
		return 0, fmt.Errorf("symbol %s not recovered", name)
	}
	return l.bias + a, nil
}

func (l *liveTarget) ReadMemory(addr ompd.Address, buf []byte) error {
	_, err := l.f.ReadAt(buf, int64(addr))
	return err
}

func (l *liveTarget) ReadString(addr ompd.Address, max int) (string, error) {
	var out []byte
	for len(out) < max {
		b := make([]byte, 1)
		if err := l.ReadMemory(addr+uint64(len(out)), b); err != nil {
			return "", err
		}
		if b[0] == 0 {
			return string(out), nil
		}
		out = append(out, b[0])
	}
	return "", fmt.Errorf("no NUL within %d bytes at %#x", max, addr)
}

func (l *liveTarget) Sizes() (ompd.TypeSizes, error) {
	return ompd.TypeSizes{Char: 1, Short: 2, Int: 4, Long: 8, LongLong: 8, Pointer: 8}, nil
}

func (l *liveTarget) ThreadContext(ompd.ThreadIDKind, uint64) (ompd.ThreadContext, error) {
	return nil, errors.New("no thread contexts")
}

// TestTypeLayoutsLive: on Debian's libomp of every release, the OMPD layer
// given the release's type table finds what tasks.c set up: the source
// lines of the region and of every task construct (ident_t.psource through
// t_ident and td_ident), the five tasks queued in the deques (th_task_team,
// tt_threads_data, tt_nproc, sizeof kmp_thread_data_t, td_deque*), the task
// blocked on its dependence with its predecessor and count (td_depnode,
// the dependence node and its successor list, sizeof kmp_taskdata_t), and
// the runtime's task ids (td_task_id; -1 in Debian's builds, which
// generate ids only with LIBOMP_USE_DEBUGGER).
func TestTypeLayoutsLive(t *testing.T) {
	for _, v := range fixture.StockVersions {
		t.Run(strconv.Itoa(v), func(t *testing.T) {
			lib := fixture.StockLibomp(v)
			k, err := Recover(mustOpen(t, lib))
			if err != nil {
				t.Fatal(err)
			}
			tt, err := k.TypeLayouts()
			if err != nil {
				t.Fatal(err)
			}
			p := fixture.Start(t, "tasks", fixture.StartOptions{Stripped: true, Runtime: lib, Env: []string{"OMP_DEBUG=enabled"}})
			m := openProc(t, p.PID, lib)
			as, err := llvm.ProcessInitialize(&liveTarget{TypeTable: tt, f: m.f, bias: m.bias, k: k}, lib, nil)
			if err != nil {
				t.Fatal(err)
			}
			line := func(key string) string { return "tasks.c:" + p.Ready.Get(t, key) }
			where := func(l ompd.Location, err error) string {
				if err != nil {
					return err.Error()
				}
				return filepath.Base(l.File) + ":" + strconv.Itoa(l.Line)
			}

			threads, err := as.Threads()
			if err != nil {
				t.Fatal(err)
			}
			var current, regions []string
			var tasks []*llvm.Task // every task met
			for _, th := range threads {
				k, err := th.CurrentTask()
				if err != nil {
					t.Fatal(err)
				}
				tasks = append(tasks, k)
				current = append(current, where(k.Location()))
				par, err := th.CurrentParallel()
				if err != nil {
					t.Fatal(err)
				}
				regions = append(regions, where(par.Location()))
				// The explicit task that generated an explicit one (final,
				// suspended under child).
				if g, err := k.Generating(); err == nil {
					if imp, err := g.Implicit(); err == nil && !imp {
						tasks = append(tasks, g)
						current = append(current, "generating "+where(g.Location()))
					}
				}
			}
			slices.Sort(current)
			want := []string{"generating " + line("line_final"), line("line_child"), line("line_dep_out"), line("line_parallel")}
			slices.Sort(want)
			if !slices.Equal(current, want) {
				t.Errorf("current tasks at %q; want %q", current, want)
			}
			if want := []string{line("line_parallel"), line("line_parallel"), line("line_parallel")}; !slices.Equal(regions, want) {
				t.Errorf("the threads' regions at %q; want %q", regions, want)
			}

			queued, err := as.QueuedTasks()
			if err != nil {
				t.Fatal(err)
			}
			var qs []string
			for _, q := range queued {
				qs = append(qs, where(q.Location()))
			}
			slices.Sort(qs)
			want = []string{line("line_queued_child"), line("line_queued"), line("line_queued"), line("line_queued"), line("line_queued_untied")}
			slices.Sort(want)
			if !slices.Equal(qs, want) {
				t.Errorf("queued tasks at %q; want %q", qs, want)
			}

			blocked, err := as.BlockedTasks(append(tasks, queued...))
			if err != nil {
				t.Fatal(err)
			}
			var bs []string
			for _, b := range blocked {
				s := where(b.Task.Location()) + " after"
				for _, pr := range b.Predecessors {
					s += " " + where(pr.Location())
				}
				bs = append(bs, s+" pending "+strconv.Itoa(b.Pending))
				tasks = append(tasks, b.Task)
			}
			if want := []string{line("line_dep_in") + " after " + line("line_dep_out") + " pending 1"}; !slices.Equal(bs, want) {
				t.Errorf("blocked tasks %q; want %q", bs, want)
			}

			var ids bytes.Buffer
			for _, k := range append(tasks, queued...) {
				id, err := k.RuntimeID()
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&ids, "%d ", id)
			}
			if got, want := ids.String(), strings.Repeat("-1 ", len(tasks)+len(queued)); got != want {
				t.Errorf("task ids %s; want %s", got, want)
			}
		})
	}
}
