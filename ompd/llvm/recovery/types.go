package recovery

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

//go:embed types/*.txt
var typesEmbed embed.FS

// typesFS holds the type tables, types/NN.txt (tests replace it).
var typesFS fs.FS = typesEmbed

// TypeTable gives the layouts of the runtime types of one libomp release
// that OMPD's layout values do not describe (ident_t, the task deques, the
// dependence graph, task ids), as Debian builds that release for x86-64.
// The tables (types/NN.txt) are generated from each release's headers by
// scripts/gen-libomp-type-layouts.sh. Its method set is that of
// ompd.TypeLayouts, which it implements; a stripped runtime, having no
// DWARF, gets these layouts from Knowledge.TypeLayouts.
type TypeTable struct {
	// Version is the release (LLVM major version) the table describes.
	Version int
	// Checked counts the table's quantities (a field's offset or size, a
	// type's size) that the runtime's OMPD layout values also give and
	// that were found equal; 0 for a table not checked against a runtime.
	Checked int

	entries []typeEntry // in file order
	sizes   map[string]uint64
	fields  map[[2]string]typeEntry
}

// typeEntry is one line of a table: a field's offset and size, or a
// type's size (field "").
type typeEntry struct {
	typ, field   string
	offset, size uint64
}

// TypeSize returns the size of the runtime type typ.
func (t *TypeTable) TypeSize(typ string) (uint64, error) {
	n, ok := t.sizes[typ]
	if !ok {
		return 0, fmt.Errorf("the type table of libomp %d has no size of type %s", t.Version, typ)
	}
	return n, nil
}

// FieldLayout returns the offset and size of field in the runtime type
// typ.
func (t *TypeTable) FieldLayout(typ, field string) (uint64, uint64, error) {
	e, ok := t.fields[[2]string{typ, field}]
	if !ok {
		return 0, 0, fmt.Errorf("the type table of libomp %d has no field %s.%s", t.Version, typ, field)
	}
	return e.offset, e.size, nil
}

// TypeLayouts returns the layouts of the runtime types for the release k
// recognized the runtime as (by its build-id), once every quantity that
// both the release's type table and the layout recovered from the
// runtime's code give (ompd_sizeof__T, ompd_access__T__F,
// ompd_sizeof__T__F) has been found equal. An unknown build gets none, and
// so does a runtime that disagrees with its release's table in any
// quantity: the error names the first disagreement.
func (k *Knowledge) TypeLayouts() (*TypeTable, error) {
	rel, ok := knownReleases[k.BuildID]
	if !ok || k.Release == "" {
		return nil, fmt.Errorf("libomp build %s is not a release ompd-inspect knows: it has no type layouts for it", shortID(k.BuildID))
	}
	t, err := typeTable(rel.version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel.name, err)
	}
	if err := t.check(k.Layout); err != nil {
		return nil, fmt.Errorf("%s: %w", rel.name, err)
	}
	return t, nil
}

// check compares the table with the OMPD layout values of a runtime, in
// the table's order, and counts the quantities compared in t.Checked.
func (t *TypeTable) check(layout map[string]uint64) error {
	n := 0
	mismatch := func(what string, table uint64, name string, value uint64) error {
		return fmt.Errorf("the type table of libomp %d disagrees with the runtime's OMPD layout: %s is %d in the table, %s is %d: no type layouts are used", t.Version, what, table, name, value)
	}
	for _, e := range t.entries {
		if e.field == "" {
			name := "ompd_sizeof__" + e.typ
			if v, ok := layout[name]; ok {
				if v != e.size {
					return mismatch("the size of "+e.typ, e.size, name, v)
				}
				n++
			}
			continue
		}
		name := "ompd_access__" + e.typ + "__" + e.field
		if v, ok := layout[name]; ok {
			if v != e.offset {
				return mismatch("the offset of "+e.typ+"."+e.field, e.offset, name, v)
			}
			n++
		}
		name = "ompd_sizeof__" + e.typ + "__" + e.field
		if v, ok := layout[name]; ok {
			if v != e.size {
				return mismatch("the size of "+e.typ+"."+e.field, e.size, name, v)
			}
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("the type table of libomp %d shares no quantity with the runtime's OMPD layout: nothing to check it against", t.Version)
	}
	t.Checked = n
	return nil
}

// typeTable reads the committed table of release version.
func typeTable(version int) (*TypeTable, error) {
	name := fmt.Sprintf("types/%d.txt", version)
	data, err := fs.ReadFile(typesFS, name)
	if err != nil {
		return nil, fmt.Errorf("no type table for libomp %d: %w", version, err)
	}
	t, err := parseTypeTable(version, string(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return t, nil
}

// parseTypeTable parses a table: "TYPE FIELD OFFSET SIZE" and
// "TYPE - SIZE" lines, comments after #.
func parseTypeTable(version int, text string) (*TypeTable, error) {
	t := &TypeTable{Version: version, sizes: map[string]uint64{}, fields: map[[2]string]typeEntry{}}
	for i, line := range strings.Split(text, "\n") {
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		e, err := parseTypeEntry(f)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		if e.field == "" {
			if _, dup := t.sizes[e.typ]; dup {
				return nil, fmt.Errorf("line %d: the size of %s again", i+1, e.typ)
			}
			t.sizes[e.typ] = e.size
		} else {
			k := [2]string{e.typ, e.field}
			if _, dup := t.fields[k]; dup {
				return nil, fmt.Errorf("line %d: field %s.%s again", i+1, e.typ, e.field)
			}
			t.fields[k] = e
		}
		t.entries = append(t.entries, e)
	}
	if len(t.entries) == 0 {
		return nil, errors.New("no layouts")
	}
	return t, nil
}

func parseTypeEntry(f []string) (typeEntry, error) {
	num := func(s string) (uint64, error) {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", s)
		}
		return v, nil
	}
	switch {
	case len(f) == 3 && f[1] == "-":
		size, err := num(f[2])
		return typeEntry{typ: f[0], size: size}, err
	case len(f) == 4 && f[1] != "-":
		off, err := num(f[2])
		if err != nil {
			return typeEntry{}, err
		}
		size, err := num(f[3])
		return typeEntry{typ: f[0], field: f[1], offset: off, size: size}, err
	}
	return typeEntry{}, fmt.Errorf("%q is neither TYPE FIELD OFFSET SIZE nor TYPE - SIZE", strings.Join(f, " "))
}
