// Package compare finds the differences between two reports of the same
// stopped target built by different OMPD backends (ompd-inspect's native
// implementation and the runtime's own OMPD library).
//
// The backends name regions and tasks differently (the native one by
// runtime address, the library by handle only), so objects are matched by
// where the walk meets them: threads by OS thread id, regions and tasks by
// the order in which the threads' region chains, task chains and task
// stacks first reach them. Every field is then compared, except those the
// second report says its backend cannot fill (Runtime.Unavailable).
package compare

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

// View selects the part of the reports to compare: a view's name
// ("summary" compares everything but the backtraces, "bt" adds them).
type View string

// Difference is one field whose values differ.
type Difference struct {
	// Path names the field: "threads[os_tid=123].state",
	// "regions[R2].team_size", "icvs[nthreads-var thread 123]".
	Path string `json:"path"`
	// A and B are the two values as JSON text; "(none)" where the report
	// has no such field or object.
	A string `json:"native"`
	B string `json:"dll"`
	// Known is set when the difference is a documented defect of the
	// library (docs/compatibility.md): what it is and the evidence.
	Known string `json:"known,omitempty"`
}

// None stands for a value one report does not have.
const None = "(none)"

// Unexpected counts the differences that are not known defects.
func Unexpected(ds []Difference) int {
	n := 0
	for _, d := range ds {
		if d.Known == "" {
			n++
		}
	}
	return n
}

// Result is the outcome of a comparison.
type Result struct {
	// Compared counts the fields compared (those of either report).
	Compared int `json:"compared"`
	// Differences lists the fields whose values differ, by path.
	Differences []Difference `json:"differences"`
}

// Reports compares report a (native backend) with b (dll backend).
func Reports(a, b *inspect.Report, v View) Result {
	skip := map[string]bool{}
	for _, f := range a.Runtime.Unavailable {
		skip[f] = true
	}
	for _, f := range b.Runtime.Unavailable {
		skip[f] = true
	}
	fa, fb := flatten(a, v, skip), flatten(b, v, skip)
	out := []Difference{}
	keys := map[string]bool{}
	for k := range fa {
		keys[k] = true
	}
	for k := range fb {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		va, oka := fa[k]
		vb, okb := fb[k]
		if oka && okb && va == vb {
			continue
		}
		if !oka {
			va = None
		}
		if !okb {
			vb = None
		}
		d := Difference{Path: k, A: va, B: vb}
		d.Known = known(d, a)
		out = append(out, d)
	}
	return Result{Compared: len(sorted), Differences: out}
}

// ids gives canonical names to the regions and tasks of a report, in the
// order the threads reach them.
type ids struct {
	regions map[string]string
	tasks   map[string]string
	renamer *strings.Replacer // built on first use by rename
}

func canonical(r *inspect.Report, skip map[string]bool) *ids {
	c := &ids{regions: map[string]string{}, tasks: map[string]string{}}
	regionByID := map[string]*inspect.Region{}
	for i := range r.Regions {
		regionByID[r.Regions[i].ID] = &r.Regions[i]
	}
	taskByID := map[string]*inspect.Task{}
	for i := range r.Tasks {
		taskByID[r.Tasks[i].ID] = &r.Tasks[i]
	}
	region := func(id string) {
		for n := 0; id != "" && n < inspect.MaxNesting; n++ {
			if _, ok := c.regions[id]; ok {
				return
			}
			c.regions[id] = fmt.Sprintf("R%d", len(c.regions)+1)
			reg := regionByID[id]
			if reg == nil || reg.Parent == nil {
				return
			}
			id = *reg.Parent
		}
	}
	task := func(id string) {
		for n := 0; id != "" && n < inspect.MaxNesting; n++ {
			if _, ok := c.tasks[id]; ok {
				return
			}
			c.tasks[id] = fmt.Sprintf("T%d", len(c.tasks)+1)
			t := taskByID[id]
			if t == nil || t.Parent == nil {
				return
			}
			id = *t.Parent
		}
	}
	threads := append([]inspect.Thread(nil), r.Threads...)
	sort.Slice(threads, func(i, j int) bool { return threads[i].OSTID < threads[j].OSTID })
	for _, th := range threads {
		if th.Region != nil {
			region(*th.Region)
		}
		if th.Task != nil {
			task(*th.Task)
		}
		for _, id := range th.TaskStack {
			task(id)
		}
	}
	// Objects no thread reaches (queued and blocked tasks, regions only
	// tasks name), in report order.
	for _, t := range r.Tasks {
		if skip["tasks[status="+t.Status+"]"] {
			continue // left out of the comparison: numbering it would shift the rest
		}
		task(t.ID)
		if t.Region != nil {
			region(*t.Region)
		}
	}
	for _, reg := range r.Regions {
		region(reg.ID)
	}
	return c
}

func (c *ids) region(id string) string {
	if n, ok := c.regions[id]; ok {
		return n
	}
	return "?" + id
}

func (c *ids) task(id string) string {
	if n, ok := c.tasks[id]; ok {
		return n
	}
	return "?" + id
}

// rename replaces the region and task ids in a text with their canonical
// names, longest ids first so that no id is replaced inside another.
func (c *ids) rename(text string) string {
	if text == "" {
		return text
	}
	if c.renamer == nil {
		var old []string
		for id := range c.regions {
			old = append(old, id)
		}
		for id := range c.tasks {
			old = append(old, id)
		}
		sort.Slice(old, func(i, j int) bool { return len(old[i]) > len(old[j]) || len(old[i]) == len(old[j]) && old[i] < old[j] })
		var pairs []string
		for _, id := range old {
			n, ok := c.regions[id]
			if !ok {
				n = c.tasks[id]
			}
			pairs = append(pairs, id, n)
		}
		c.renamer = strings.NewReplacer(pairs...)
	}
	return c.renamer.Replace(text)
}

func (c *ids) regionp(p *string) *string {
	if p == nil {
		return nil
	}
	s := c.region(*p)
	return &s
}

func (c *ids) taskp(p *string) *string {
	if p == nil {
		return nil
	}
	s := c.task(*p)
	return &s
}

// flatten turns the compared part of a report into path -> JSON text.
func flatten(r *inspect.Report, v View, skip map[string]bool) map[string]string {
	c := canonical(r, skip)
	out := map[string]string{}
	all := v == "" || v == "summary" || v == "bt"
	if all {
		rt := r.Runtime
		put(out, "runtime", map[string]any{
			"library": rt.Library, "version": rt.Version, "openmp_version": rt.OpenMPVersion,
			"ompd_dll_locations": rt.OMPDDLLLocations, "state_tracking": rt.StateTracking,
		}, skip, "runtime")
	}
	if all || v == "threads" {
		for _, th := range r.Threads {
			th.Region = c.regionp(th.Region)
			th.Task = c.taskp(th.Task)
			stack := make([]string, len(th.TaskStack))
			for i, id := range th.TaskStack {
				stack[i] = c.task(id)
			}
			th.TaskStack = stack
			if th.BlockedOn != nil {
				// A barrier is named by its region, a taskwait by its
				// task: ids that differ between backends.
				bo := *th.BlockedOn
				switch bo.What {
				case "barrier":
					bo.Object = c.region(bo.Object)
				case "taskwait":
					bo.Object = c.task(bo.Object)
				}
				th.BlockedOn = &bo
			}
			put(out, fmt.Sprintf("threads[os_tid=%d]", th.OSTID), th, skip, "threads[]")
		}
	}
	if all || v == "regions" {
		for _, reg := range r.Regions {
			id := c.region(reg.ID)
			reg.ID = id
			reg.Parent = c.regionp(reg.Parent)
			put(out, "regions["+id+"]", reg, skip, "regions[]")
		}
	}
	skipped := map[string]bool{} // tasks left out, by id
	for _, t := range r.Tasks {
		if skip["tasks[status="+t.Status+"]"] {
			skipped[t.ID] = true
		}
	}
	if all || v == "tasks" {
		for _, t := range r.Tasks {
			if skipped[t.ID] {
				continue
			}
			id := c.task(t.ID)
			t.ID = id
			t.Parent = c.taskp(t.Parent)
			t.Region = c.regionp(t.Region)
			if t.WaitsFor != nil {
				w := make([]string, len(t.WaitsFor))
				for i, x := range t.WaitsFor {
					w[i] = c.task(x)
				}
				t.WaitsFor = w
			}
			put(out, "tasks["+id+"]", t, skip, "tasks[]")
		}
	}
	if all || v == "icvs" {
		for _, icv := range r.ICVs {
			owner := ""
			switch o := icv.Owner.(type) {
			case nil:
			case string:
				if skipped[o] {
					continue
				}
				if icv.Scope == "parallel" {
					owner = " " + c.region(o)
				} else {
					owner = " " + c.task(o)
				}
			default:
				owner = fmt.Sprintf(" %v", o)
			}
			out[fmt.Sprintf("icvs[%s %s%s]", icv.Name, icv.Scope, owner)] = text(icv.Value)
		}
	}
	if all || v == "env" {
		for _, cv := range r.ControlVars {
			out["control_vars["+cv.Name+"]"] = text(cv.Value)
		}
	}
	if v == "bt" {
		for _, bt := range r.Backtraces {
			base := fmt.Sprintf("backtraces[os_tid=%d]", bt.OSTID)
			out[base+".activity"] = text(bt.Activity)
			for i, f := range bt.Frames {
				f.Region = c.regionp(f.Region)
				f.Task = c.taskp(f.Task)
				f.Text = c.rename(f.Text)
				put(out, fmt.Sprintf("%s.frames[%d]", base, i), f, skip, "backtraces[].frames[]")
			}
		}
	}
	return out
}

// put flattens one object into out under path: one entry per field, the
// field's value as JSON text. Fields named in skip as kind.field are left
// out.
func put(out map[string]string, path string, obj any, skip map[string]bool, kind string) {
	b, err := json.Marshal(obj)
	if err != nil {
		out[path] = "(unencodable: " + err.Error() + ")"
		return
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		out[path] = string(b)
		return
	}
	for k, raw := range m {
		if skip[kind+"."+k] {
			continue
		}
		out[path+"."+k] = string(raw)
	}
}

func text(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Format renders a difference as one line.
func (d Difference) Format() string {
	s := fmt.Sprintf("%s: native %s, dll %s", d.Path, d.A, d.B)
	if d.Known != "" {
		s += " — known: " + d.Known
	}
	return strings.TrimSpace(s)
}
