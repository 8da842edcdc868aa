package recovery

import (
	"debug/dwarf"
	delf "debug/elf"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// A TypeTable serves the OMPD layer's type layouts.
var _ ompd.TypeLayouts = (*TypeTable)(nil)

// readFields are the fields the OMPD layer reads through TypeLayouts
// (ompd/llvm/debuginfo.go, ompd/llvm/depend.go, ompd/llvm/lock.go); it reads each as an
// integer or pointer of 1 to 8 bytes, except kmp_depnode_t.dn, whose
// offset only it uses.
var readFields = [][2]string{
	{"ident_t", "psource"},
	{"kmp_base_team_t", "t_ident"},
	{"kmp_taskdata_t", "td_ident"},
	{"kmp_taskdata_t", "td_task_id"},
	{"kmp_taskdata_t", "td_depnode"},
	{"kmp_base_info_t", "th_task_team"},
	{"kmp_base_task_team_t", "tt_threads_data"},
	{"kmp_base_task_team_t", "tt_nproc"},
	{"kmp_base_thread_data_t", "td_deque"},
	{"kmp_base_thread_data_t", "td_deque_ntasks"},
	{"kmp_base_thread_data_t", "td_deque_size"},
	{"kmp_base_thread_data_t", "td_deque_head"},
	{"kmp_base_depnode_t", "successors"},
	{"kmp_base_depnode_t", "task"},
	{"kmp_base_depnode_t", "npredecessors"},
	{"kmp_depnode_list_t", "node"},
	{"kmp_depnode_list_t", "next"},
	{"kmp_base_queuing_lock_t", "initialized"},
	{"kmp_base_queuing_lock_t", "head_id"},
	{"kmp_base_queuing_lock_t", "owner_id"},
	{"kmp_base_queuing_lock_t", "depth_locked"},
	{"kmp_base_queuing_lock_t", "flags"},
}

// sizedTypes are the types whose size the OMPD layer uses.
var sizedTypes = []string{"kmp_thread_data_t", "kmp_taskdata_t"}

// TestTypeTablesServeOMPD: every release's table gives everything the
// OMPD layer asks TypeLayouts for, in sizes it can read.
func TestTypeTablesServeOMPD(t *testing.T) {
	for _, v := range fixture.StockVersions {
		tt, err := typeTable(v)
		if err != nil {
			t.Fatal(err)
		}
		if len(tt.entries) != 87 {
			t.Errorf("libomp %d: %d quantities; want 87", v, len(tt.entries))
		}
		for _, f := range readFields {
			_, size, err := tt.FieldLayout(f[0], f[1])
			if err != nil {
				t.Errorf("libomp %d: %v", v, err)
			} else if size == 0 || size > 8 {
				t.Errorf("libomp %d: %s.%s has size %d", v, f[0], f[1], size)
			}
		}
		if _, _, err := tt.FieldLayout("kmp_depnode_t", "dn"); err != nil {
			t.Errorf("libomp %d: %v", v, err)
		}
		for _, typ := range sizedTypes {
			if _, err := tt.TypeSize(typ); err != nil {
				t.Errorf("libomp %d: %v", v, err)
			}
		}
	}
}

// TestTypeTable19IsDWARF: libomp 19's table, generated from the headers,
// says what the DWARF of the OMPD build of the same source says, for every
// quantity; what the OMPD layer reads, target/elf's TypeIndex (which
// serves TypeLayouts from DWARF) finds the same.
func TestTypeTable19IsDWARF(t *testing.T) {
	tt, err := typeTable(19)
	if err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(fixture.OMPDLibDir(), "libomp.so")
	ti, err := elf.NewTypeIndex(mustOpen(t, lib))
	if err != nil {
		t.Fatal(err)
	}
	dt := readDWARFTypes(t, lib, tt)
	for _, e := range tt.entries {
		if e.field == "" {
			if n, err := dt.size(e.typ); err != nil || n != e.size {
				t.Errorf("%s: size %d in the table; DWARF says %d (%v)", e.typ, e.size, n, err)
			}
			continue
		}
		if off, size, err := dt.field(e.typ, e.field); err != nil || off != e.offset || size != e.size {
			t.Errorf("%s.%s: offset %d size %d in the table; DWARF says %d %d (%v)", e.typ, e.field, e.offset, e.size, off, size, err)
		}
	}
	for _, f := range append(readFields, [2]string{"kmp_depnode_t", "dn"}) {
		off, size, err := ti.Field(f[0], f[1])
		toff, tsize, _ := tt.FieldLayout(f[0], f[1])
		if err != nil || off != toff || size != tsize {
			t.Errorf("%s.%s: TypeIndex says offset %d size %d (%v), the table %d %d", f[0], f[1], off, size, err, toff, tsize)
		}
	}
	for _, typ := range sizedTypes {
		n, err := ti.Size(typ)
		if tn, _ := tt.TypeSize(typ); err != nil || n != tn {
			t.Errorf("%s: TypeIndex says size %d (%v), the table %d", typ, n, err, tn)
		}
	}
	// What the OMPD layer reads, as the table and DWARF agree it is.
	want := map[[2]string][2]uint64{
		{"ident_t", "psource"}: {16, 8}, {"kmp_base_team_t", "t_ident"}: {392, 8},
		{"kmp_taskdata_t", "td_ident"}: {40, 8}, {"kmp_taskdata_t", "td_task_id"}: {0, 4},
		{"kmp_taskdata_t", "td_depnode"}: {152, 8}, {"kmp_base_info_t", "th_task_team"}: {568, 8},
		{"kmp_base_task_team_t", "tt_threads_data"}: {144, 8}, {"kmp_base_task_team_t", "tt_nproc"}: {156, 4},
		{"kmp_base_thread_data_t", "td_deque"}: {128, 8}, {"kmp_base_thread_data_t", "td_deque_ntasks"}: {148, 4},
		{"kmp_base_thread_data_t", "td_deque_size"}: {136, 4}, {"kmp_base_thread_data_t", "td_deque_head"}: {140, 4},
		{"kmp_base_depnode_t", "successors"}: {0, 8}, {"kmp_base_depnode_t", "task"}: {8, 8},
		{"kmp_base_depnode_t", "npredecessors"}: {128, 4}, {"kmp_depnode_list_t", "node"}: {0, 8},
		{"kmp_depnode_list_t", "next"}: {8, 8}, {"kmp_depnode_t", "dn"}: {0, 192},
	}
	for f, w := range want {
		if off, size, err := tt.FieldLayout(f[0], f[1]); err != nil || off != w[0] || size != w[1] {
			t.Errorf("%s.%s: offset %d size %d (%v); want %d %d", f[0], f[1], off, size, err, w[0], w[1])
		}
	}
	for typ, w := range map[string]uint64{"kmp_thread_data_t": 192, "kmp_taskdata_t": 320} {
		if n, err := tt.TypeSize(typ); err != nil || n != w {
			t.Errorf("size of %s: %d (%v); want %d", typ, n, err, w)
		}
	}
}

// dwarfTypes are the types a table names, as DWARF defines them.
type dwarfTypes map[string]dwarf.Type

// readDWARFTypes reads from the DWARF of the file at path the complete
// definition of every type tt names (a struct, union or typedef by that
// name with a size; a struct and its typedef may share a name, and a unit
// may only declare the struct).
func readDWARFTypes(t *testing.T, path string, tt *TypeTable) dwarfTypes {
	t.Helper()
	ef, err := delf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	d, err := ef.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, e := range tt.entries {
		want[e.typ] = true
	}
	out := dwarfTypes{}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			break
		}
		name, _ := e.Val(dwarf.AttrName).(string)
		if (e.Tag == dwarf.TagTypedef || e.Tag == dwarf.TagStructType || e.Tag == dwarf.TagUnionType) && want[name] && out[name] == nil {
			if typ, err := d.Type(e.Offset); err == nil && typ.Size() > 0 {
				out[name] = typ
			}
		}
	}
	return out
}

func (dt dwarfTypes) size(typ string) (uint64, error) {
	x, ok := dt[typ]
	if !ok {
		return 0, fmt.Errorf("no complete type %s", typ)
	}
	return uint64(x.Size()), nil
}

// field finds a field, also as a member of an anonymous struct or union
// member.
func (dt dwarfTypes) field(typ, field string) (uint64, uint64, error) {
	x, ok := dt[typ]
	if !ok {
		return 0, 0, fmt.Errorf("no complete type %s", typ)
	}
	var find func(x dwarf.Type, base int64) (uint64, uint64, bool)
	find = func(x dwarf.Type, base int64) (uint64, uint64, bool) {
		for {
			td, ok := x.(*dwarf.TypedefType)
			if !ok {
				break
			}
			x = td.Type
		}
		st, ok := x.(*dwarf.StructType)
		if !ok {
			return 0, 0, false
		}
		for _, f := range st.Field {
			if f.Name == field {
				return uint64(base + f.ByteOffset), uint64(f.Type.Size()), true
			}
			if f.Name == "" {
				if off, size, ok := find(f.Type, base+f.ByteOffset); ok {
					return off, size, true
				}
			}
		}
		return 0, 0, false
	}
	off, size, ok := find(x, 0)
	if !ok {
		return 0, 0, fmt.Errorf("%s has no field %s", typ, field)
	}
	return off, size, nil
}

// typeValues counts the OMPD layout values of a runtime that describe a
// runtime type: every field's offset and size, and the size of each type
// (not of a global variable or a primitive type; bit masks are not
// counted).
func typeValues(layout map[string]uint64) int {
	n := 0
	for name := range layout {
		switch {
		case strings.HasPrefix(name, "ompd_access__"):
			n++
		case strings.HasPrefix(name, "ompd_sizeof__"):
			rest := strings.TrimPrefix(name, "ompd_sizeof__")
			if strings.Contains(rest, "__") && !strings.HasPrefix(rest, "__") || strings.HasSuffix(rest, "_t") {
				n++
			}
		}
	}
	return n
}

// TestTypeLayoutsStock: Debian's libomp of every release gets its type
// layouts, every quantity shared with its recovered layout agreeing; that
// is every layout value that describes a type (each field's offset and
// size, each type's size).
func TestTypeLayoutsStock(t *testing.T) {
	for _, v := range fixture.StockVersions {
		t.Run(strconv.Itoa(v), func(t *testing.T) {
			k, err := Recover(mustOpen(t, fixture.StockLibomp(v)))
			if err != nil {
				t.Fatal(err)
			}
			tt, err := k.TypeLayouts()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("libomp %d: %d quantities of the type table checked against the recovered layout", v, tt.Checked)
			if n := typeValues(k.Layout); tt.Version != v || tt.Checked != 117 || n != 117 {
				t.Errorf("version %d, %d quantities checked, %d layout values describe types; want %d, 117, 117", tt.Version, tt.Checked, n, v)
			}
		})
	}
}

// withTables makes the type tables those given, by release, for the
// test's duration.
func withTables(t *testing.T, tables map[int]string) {
	t.Helper()
	old := typesFS
	m := fstest.MapFS{}
	for v, text := range tables {
		m["types/"+strconv.Itoa(v)+".txt"] = &fstest.MapFile{Data: []byte(text)}
	}
	typesFS = m
	t.Cleanup(func() { typesFS = old })
}

// TestTypeLayoutsDisagree: a table and a runtime that disagree in one
// quantity give no type layouts, and the error names the first
// disagreement.
func TestTypeLayoutsDisagree(t *testing.T) {
	k, err := Recover(mustOpen(t, fixture.StockLibomp(19)))
	if err != nil {
		t.Fatal(err)
	}
	data, err := typesEmbed.ReadFile("types/19.txt")
	if err != nil {
		t.Fatal(err)
	}
	orig := string(data)
	const prefix = "Debian libomp5-19 1:19.1.7-3~deb12u1: the type table of libomp 19 disagrees with the runtime's OMPD layout: "
	for _, c := range []struct {
		edits [][2]string // old line, new line
		want  string
	}{
		{[][2]string{{"kmp_taskdata_t td_flags 4 4", "kmp_taskdata_t td_flags 8 4"}},
			"the offset of kmp_taskdata_t.td_flags is 8 in the table, ompd_access__kmp_taskdata_t__td_flags is 4: no type layouts are used"},
		{[][2]string{{"kmp_base_team_t t_level 848 4", "kmp_base_team_t t_level 848 8"}},
			"the size of kmp_base_team_t.t_level is 8 in the table, ompd_sizeof__kmp_base_team_t__t_level is 4: no type layouts are used"},
		{[][2]string{{"kmp_taskdata_t - 320", "kmp_taskdata_t - 328"}},
			"the size of kmp_taskdata_t is 328 in the table, ompd_sizeof__kmp_taskdata_t is 320: no type layouts are used"},
		// Two changes: the first in the table's order is named.
		{[][2]string{{"kmp_taskdata_t - 320", "kmp_taskdata_t - 328"}, {"kmp_base_info_t th_team 64 8", "kmp_base_info_t th_team 72 8"}},
			"the offset of kmp_base_info_t.th_team is 72 in the table, ompd_access__kmp_base_info_t__th_team is 64: no type layouts are used"},
	} {
		text := orig
		for _, e := range c.edits {
			if !strings.Contains(text, "\n"+e[0]+"\n") {
				t.Fatalf("the table has no line %q", e[0])
			}
			text = strings.Replace(text, "\n"+e[0]+"\n", "\n"+e[1]+"\n", 1)
		}
		withTables(t, map[int]string{19: text})
		tt, err := k.TypeLayouts()
		if tt != nil || err == nil || err.Error() != prefix+c.want {
			t.Errorf("%q: %v, %v; want no table and %q", c.edits, tt, err, prefix+c.want)
		}
	}

	// The unchanged table, against a runtime whose layout says another
	// size of kmp_info_t.
	withTables(t, map[int]string{19: orig})
	if _, err := k.TypeLayouts(); err != nil {
		t.Fatal(err)
	}
	k.Layout["ompd_sizeof__kmp_info_t"] += 64
	tt, err := k.TypeLayouts()
	if want := prefix + "the size of kmp_info_t is 1536 in the table, ompd_sizeof__kmp_info_t is 1600: no type layouts are used"; tt != nil || err == nil || err.Error() != want {
		t.Errorf("%v, %v; want no table and %q", tt, err, want)
	}
	// No quantity in common: nothing is served unchecked.
	withTables(t, map[int]string{19: "ident_t psource 16 8\n"})
	tt, err = k.TypeLayouts()
	if want := "Debian libomp5-19 1:19.1.7-3~deb12u1: the type table of libomp 19 shares no quantity with the runtime's OMPD layout: nothing to check it against"; tt != nil || err == nil || err.Error() != want {
		t.Errorf("%v, %v; want no table and %q", tt, err, want)
	}
}

// TestTypeLayoutsUnknown: a build the project does not know, even one
// whose layout values were named, gets no type layouts.
func TestTypeLayoutsUnknown(t *testing.T) {
	k, err := Recover(mustOpen(t, fixture.StockLibomp(19)))
	if err != nil {
		t.Fatal(err)
	}
	k.BuildID, k.Release = "0123456789abcdef0123", ""
	tt, err := k.TypeLayouts()
	if want := "libomp build 0123456789ab is not a release ompd-inspect knows: it has no type layouts for it"; tt != nil || err == nil || err.Error() != want {
		t.Errorf("%v, %v; want no table and %q", tt, err, want)
	}
	tt, err = (&Knowledge{}).TypeLayouts()
	if want := "libomp build (no build-id) is not a release ompd-inspect knows: it has no type layouts for it"; tt != nil || err == nil || err.Error() != want {
		t.Errorf("%v, %v; want no table and %q", tt, err, want)
	}
	// A known release whose table is missing.
	withTables(t, map[int]string{13: "ident_t - 24\n"})
	k, err = Recover(mustOpen(t, fixture.StockLibomp(19)))
	if err != nil {
		t.Fatal(err)
	}
	tt, err = k.TypeLayouts()
	if want := "Debian libomp5-19 1:19.1.7-3~deb12u1: no type table for libomp 19: open types/19.txt: file does not exist"; tt != nil || err == nil || err.Error() != want {
		t.Errorf("%v, %v; want no table and %q", tt, err, want)
	}
}

// TestTypeTableSyntax: malformed tables are refused, naming the line.
func TestTypeTableSyntax(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"# only a comment\n\n", "no layouts"},
		{"ident_t psource 16\n", `line 1: "ident_t psource 16" is neither TYPE FIELD OFFSET SIZE nor TYPE - SIZE`},
		{"# c\nident_t - 24 8\n", `line 2: "ident_t - 24 8" is neither TYPE FIELD OFFSET SIZE nor TYPE - SIZE`},
		{"ident_t psource 0x10 8\n", `line 1: "0x10" is not a number`},
		{"ident_t - -1\n", `line 1: "-1" is not a number`},
		{"ident_t psource 16 8\nident_t psource 16 8\n", "line 2: field ident_t.psource again"},
		{"ident_t - 24\nident_t - 24 # again\n", "line 2: the size of ident_t again"},
	} {
		if _, err := parseTypeTable(19, c.text); err == nil || err.Error() != c.want {
			t.Errorf("%q: %v; want %q", c.text, err, c.want)
		}
	}
	tt, err := parseTypeTable(19, "ident_t - 24 # sizeof\nident_t psource 16 8\n")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := tt.TypeSize("ident_t"); err != nil || n != 24 {
		t.Errorf("TypeSize(ident_t) = %d, %v; want 24", n, err)
	}
	if off, size, err := tt.FieldLayout("ident_t", "psource"); err != nil || off != 16 || size != 8 {
		t.Errorf("FieldLayout(ident_t, psource) = %d, %d, %v; want 16, 8", off, size, err)
	}
	if _, err := tt.TypeSize("kmp_info_t"); err == nil || err.Error() != "the type table of libomp 19 has no size of type kmp_info_t" {
		t.Errorf("TypeSize(kmp_info_t): %v", err)
	}
	if _, _, err := tt.FieldLayout("ident_t", "flags"); err == nil || err.Error() != "the type table of libomp 19 has no field ident_t.flags" {
		t.Errorf("FieldLayout(ident_t, flags): %v", err)
	}
}
