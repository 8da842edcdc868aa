package recovery

import (
	"fmt"
	"slices"
	"strings"
)

// anchor finds candidate addresses of one global.
type anchor struct {
	// what describes the anchor for the evidence and the warnings.
	what string
	find func(r *recoverer) ([]uint64, error)
}

// global is a runtime variable OMPD reads and the anchors that find it.
type global struct {
	name    string
	anchors []anchor
	// uses are exported functions whose code must use the global: a
	// confirmation, not a way to find it.
	uses []string
}

// globals lists what OMPD reads besides the layout, and how each is found.
var globals = []global{
	{name: "__kmp_threads", anchors: []anchor{firstLoad("omp_get_level", 8), firstLoad("omp_get_active_level", 8)}},
	{name: "__kmp_threads_capacity", anchors: []anchor{firstCmpReg("__kmpc_push_num_threads"), firstCmpReg("__kmpc_push_proc_bind"), firstCmpReg("__kmpc_end_single")}},
	{name: "__kmp_max_task_priority", anchors: []anchor{lastLoad("omp_get_max_task_priority", 4), setting("OMP_MAX_TASK_PRIORITY")}},
	{name: "__kmp_omp_cancellation", anchors: []anchor{lastLoad("omp_get_cancellation", 4), setting("OMP_CANCELLATION")}},
	{name: "__kmp_stksize", anchors: []anchor{lastLoad("kmp_get_stacksize_s", 8), setting("KMP_STACKSIZE")}, uses: []string{"kmp_get_stacksize"}},
	{name: "__kmp_avail_proc", anchors: []anchor{lastLoad("omp_get_num_procs", 4)}},
	{name: "__kmp_affinity_format", anchors: []anchor{setting("OMP_AFFINITY_FORMAT")}, uses: []string{"omp_get_affinity_format", "omp_set_affinity_format"}},
	{name: "__kmp_display_affinity", anchors: []anchor{setting("OMP_DISPLAY_AFFINITY")}, uses: []string{"__kmp_fork_call"}},
	{name: "__kmp_nested_nth", anchors: []anchor{setting("OMP_NUM_THREADS")}},
	{name: "__kmp_nested_proc_bind", anchors: []anchor{setting("OMP_PROC_BIND")}},
	{name: "__kmp_max_nth", anchors: []anchor{setting("KMP_DEVICE_THREAD_LIMIT")}},
	{name: "__kmp_tool", anchors: []anchor{setting("OMP_TOOL")}},
	{name: "__kmp_tool_libraries", anchors: []anchor{setting("OMP_TOOL_LIBRARIES")}},
	{name: "__kmp_tool_verbose_init", anchors: []anchor{setting("OMP_TOOL_VERBOSE_INIT")}},
	{name: "__kmp_openmp_version", anchors: []anchor{printedWith("   _OPENMP='%d'\n")}},
	// The table of indirect locks (how a thread's lock is found without
	// state tracking): destroying a lock looks it up in the table first.
	{name: "__kmp_i_lock_table", anchors: []anchor{firstAddr("__kmpc_destroy_lock"), firstAddr("__kmpc_destroy_nest_lock")}},
}

// globals finds every global of the list; one whose anchors disagree or
// find nothing is left out with a warning.
func (r *recoverer) globals() {
	for _, g := range globals {
		var found []uint64
		var how, failed []string
		for _, a := range g.anchors {
			c, err := a.find(r)
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", a.what, err))
				continue
			}
			if len(c) != 1 {
				failed = append(failed, fmt.Sprintf("%s: %d candidates %s", a.what, len(c), hexList(c)))
				continue
			}
			found = append(found, c[0])
			how = append(how, a.what)
		}
		switch {
		case len(found) == 0:
			r.warn("%s is not recovered: %s", g.name, strings.Join(failed, "; "))
			continue
		case slices.ContainsFunc(found, func(a uint64) bool { return a != found[0] }):
			var parts []string
			for i := range found {
				parts = append(parts, fmt.Sprintf("%s says %#x", how[i], found[i]))
			}
			r.warn("%s is not recovered: its anchors disagree (%s)", g.name, strings.Join(parts, ", "))
			continue
		}
		addr := found[0]
		ok := true
		for _, fn := range g.uses {
			f, err := r.exported(fn)
			if err != nil {
				r.warn("%s: not confirmed by %s: %v", g.name, fn, err)
				continue
			}
			if !slices.Contains(r.dataRefs(f), addr) {
				r.warn("%s is not recovered: %s says %#x, but %s does not use it", g.name, strings.Join(how, " and "), addr, fn)
				ok = false
				break
			}
			how = append(how, "used by "+fn)
		}
		if !ok {
			continue
		}
		if len(failed) > 0 {
			r.warn("%s: found by %s; %s", g.name, strings.Join(how, " and "), strings.Join(failed, "; "))
		}
		r.set(g.name, addr, strings.Join(how, "; "))
	}
}

// refAnchor finds the first global (the last, with last set) that a
// reference of exported function fn to data matches.
func refAnchor(fn string, last bool, match func(x ref) bool) anchor {
	return anchor{what: fn, find: func(r *recoverer) ([]uint64, error) {
		f, err := r.exported(fn)
		if err != nil {
			return nil, err
		}
		for k := range f.refs {
			x := f.refs[k]
			if last {
				x = f.refs[len(f.refs)-1-k]
			}
			if match(x) && r.isData(x.target) {
				return []uint64{x.target}, nil
			}
		}
		return nil, errNone
	}}
}

// firstLoad: the first global that exported function fn loads size bytes
// from.
func firstLoad(fn string, size int) anchor {
	return refAnchor(fn, false, func(x ref) bool { return x.kind == refLoad && x.size == size && x.disp == 0 })
}

// firstAddr: the first global whose address exported function fn
// computes (lea X(%rip)), to index it or to pass it on.
func firstAddr(fn string) anchor {
	return refAnchor(fn, false, func(x ref) bool { return x.kind == refAddr || x.via != 0 })
}

// lastLoad: the last global that exported function fn loads size bytes
// from (a getter returns it).
func lastLoad(fn string, size int) anchor {
	return refAnchor(fn, true, func(x ref) bool { return x.kind == refLoad && x.size == size && x.disp == 0 })
}

// firstCmpReg: the first 32-bit global that exported function fn compares
// with a register (a bound check of a gtid).
func firstCmpReg(fn string) anchor {
	return refAnchor(fn, false, func(x ref) bool {
		return x.kind == refCmp && x.size == 4 && !x.hasImm && x.fromReg != 0 && x.disp == 0
	})
}

// setting: the global that both the parse and the print function of the
// runtime's setting env use. The runtime's settings table holds, for each
// environment variable, a pointer to its name and pointers to its parse
// and print functions (R_X86_64_RELATIVE relocations in the file).
func setting(env string) anchor {
	return anchor{what: "the " + env + " setting", find: func(r *recoverer) ([]uint64, error) {
		name, err := r.findString(env)
		if err != nil {
			return nil, err
		}
		rel, err := r.relocations()
		if err != nil {
			return nil, err
		}
		var entries []uint64
		for off, add := range rel {
			if add == name {
				entries = append(entries, off)
			}
		}
		if len(entries) != 1 {
			return nil, fmt.Errorf("%d settings table entries name it", len(entries))
		}
		parse, print := rel[entries[0]+8], rel[entries[0]+16]
		if parse == 0 || print == 0 {
			return nil, fmt.Errorf("its settings table entry at %#x has no parse and print functions", entries[0])
		}
		pf, err := r.funcAt(parse)
		if err != nil {
			return nil, fmt.Errorf("its parse function: %w", err)
		}
		qf, err := r.funcAt(print)
		if err != nil {
			return nil, fmt.Errorf("its print function: %w", err)
		}
		printed := r.dataRefs(qf)
		var both []uint64
		for _, a := range r.dataRefs(pf) {
			if slices.Contains(printed, a) {
				both = append(both, a)
			}
		}
		return both, nil
	}}
}

// printedWith: the 32-bit global loaded just before the format string
// format is passed to a print function.
func printedWith(format string) anchor {
	return anchor{what: "the code that prints " + strings.TrimSpace(format), find: func(r *recoverer) ([]uint64, error) {
		s, err := r.findString(format)
		if err != nil {
			return nil, err
		}
		var out []uint64
		for _, at := range r.refsTo(s) {
			f, err := r.funcAt(at)
			if err != nil {
				continue
			}
			// The load through a register that holds a global's address,
			// right before the format is taken.
			var last *ref
			for i := range f.refs {
				x := &f.refs[i]
				if x.at >= at {
					break
				}
				if x.kind == refLoad && x.size == 4 && x.disp == 0 {
					last = x
				}
			}
			if last != nil && !slices.Contains(out, last.target) {
				out = append(out, last.target)
			}
		}
		return out, nil
	}}
}

// relocations returns the file's R_X86_64_RELATIVE relocations, by the
// address they write (read once).
func (r *recoverer) relocations() (map[uint64]uint64, error) {
	if !r.relDone {
		r.relDone = true
		rels, err := r.im.DynamicRelocations()
		if err != nil {
			r.relErr = err
		} else {
			r.relative = map[uint64]uint64{}
			for _, x := range rels {
				if x.Type == 8 { // R_X86_64_RELATIVE
					r.relative[x.Offset] = uint64(x.Addend)
				}
			}
		}
	}
	return r.relative, r.relErr
}
