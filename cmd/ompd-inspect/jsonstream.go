package main

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// jsonSplit is the length from which jsonStreamer marshals a slice one
// element at a time.
const jsonSplit = 16

// jsonMaxDepth is how deep jsonStreamer follows values before it gives
// the rest to json.Marshal whole (a report is a few levels deep).
const jsonMaxDepth = 64

// jsonStreamer gives the compact JSON of a value in pieces whose
// concatenation is json.Marshal's: the elements of long slices, and the
// members of the objects and maps that hold them, are marshaled one at a
// time. json.Marshal builds the whole text in one buffer that grows by
// doubling; for a report of a thousand threads that is several megabytes
// of new memory, most of it touched for the first time, and then copied.
//
// A value is marshaled whole by json.Marshal wherever the pieces could
// differ from it: types with their own marshaling, maps without string
// keys, structs with embedded fields, tag options other than omitempty,
// or names that need escaping, and anything nested deeper than
// jsonMaxDepth (json.Marshal then finds a cycle, where following it here
// would never end).
type jsonStreamer struct {
	// split is the length from which slices are marshaled element by
	// element.
	split int
	// emit is given each piece; the slice is only valid during the call.
	emit func([]byte)

	depth  int // of the value being emitted
	buf    bytes.Buffer
	enc    *json.Encoder
	fields map[reflect.Type]structFields // fieldsOf's answers
}

// structFields is fieldsOf's answer for one struct type.
type structFields struct {
	fields []jsonField
	ok     bool
}

// value emits the JSON of v.
func (s *jsonStreamer) value(v reflect.Value) error {
	if !v.IsValid() {
		return s.whole(nil)
	}
	if x, ok := marshalsItself(v); ok {
		return s.whole(x)
	}
	if s.depth >= jsonMaxDepth {
		return s.wholeValue(v)
	}
	s.depth++
	defer func() { s.depth-- }()
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return s.whole(nil)
		}
		return s.value(v.Elem())
	case reflect.Slice:
		if v.IsNil() || v.Len() < s.split || v.Type().Elem().Kind() == reflect.Uint8 {
			return s.wholeValue(v)
		}
		s.emit([]byte{'['})
		for i := range v.Len() {
			if i > 0 {
				s.emit([]byte{','})
			}
			if err := s.value(v.Index(i)); err != nil {
				return err
			}
		}
		s.emit([]byte{']'})
		return nil
	case reflect.Map:
		return s.mapValue(v)
	case reflect.Struct:
		return s.structValue(v)
	}
	return s.wholeValue(v)
}

// marshalsItself reports whether v's type, or for an addressable v its
// pointer type, has its own marshaling (json.Marshaler or
// encoding.TextMarshaler), and returns what json.Marshal is to be given.
func marshalsItself(v reflect.Value) (any, bool) {
	if v.Kind() == reflect.Interface && has(v.Type()) {
		// An interface of a marshaling type (a json.Marshaler field, say):
		// json.Marshal calls its method even on a nil pointer it holds,
		// which it does only when given the interface by address.
		p := reflect.New(v.Type())
		p.Elem().Set(v)
		return p.Interface(), true
	}
	if has(v.Type()) {
		return v.Interface(), true
	}
	if v.Kind() != reflect.Pointer && v.CanAddr() && has(reflect.PointerTo(v.Type())) {
		return v.Addr().Interface(), true
	}
	return nil, false
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

func has(t reflect.Type) bool { return t.Implements(jsonMarshaler) || t.Implements(textMarshaler) }

// mapValue emits a map with string keys member by member, in
// json.Marshal's order (the keys sorted); other maps whole.
func (s *jsonStreamer) mapValue(v reflect.Value) error {
	kt := v.Type().Key()
	if v.IsNil() || kt.Kind() != reflect.String || has(kt) {
		return s.wholeValue(v)
	}
	keys := v.MapKeys()
	slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
	s.emit([]byte{'{'})
	for i, k := range keys {
		if i > 0 {
			s.emit([]byte{','})
		}
		if err := s.whole(k.String()); err != nil {
			return err
		}
		s.emit([]byte{':'})
		if err := s.value(v.MapIndex(k)); err != nil {
			return err
		}
	}
	s.emit([]byte{'}'})
	return nil
}

// structValue emits a struct field by field, as json.Marshal encodes it,
// or whole when its fields use what fieldsOf does not model.
func (s *jsonStreamer) structValue(v reflect.Value) error {
	sf, known := s.fields[v.Type()]
	if !known {
		if s.fields == nil {
			s.fields = map[reflect.Type]structFields{}
		}
		sf.fields, sf.ok = fieldsOf(v.Type())
		s.fields[v.Type()] = sf
	}
	fields := sf.fields
	if !sf.ok {
		return s.wholeValue(v)
	}
	s.emit([]byte{'{'})
	first := true
	for _, f := range fields {
		fv := v.Field(f.index)
		if f.omitEmpty && isEmptyJSON(fv) {
			continue
		}
		if !first {
			s.emit([]byte{','})
		}
		first = false
		s.emit(f.key)
		if err := s.value(fv); err != nil {
			return err
		}
	}
	s.emit([]byte{'}'})
	return nil
}

// jsonField is a struct field json.Marshal encodes.
type jsonField struct {
	index     int
	key       []byte // `"name":`
	omitEmpty bool
}

// fieldsOf returns the fields of struct type t that json.Marshal encodes,
// in its order, and false when t has what is not modeled here: embedded
// fields, tag options other than omitempty, names that are not plain
// (letters, digits, '_' and '-'), or two fields of one name.
func fieldsOf(t reflect.Type) ([]jsonField, bool) {
	var out []jsonField
	seen := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return nil, false
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if opts != "" && opts != "omitempty" {
			return nil, false
		}
		if name == "" {
			name = f.Name
		}
		if !plainJSONName(name) || seen[name] {
			return nil, false
		}
		seen[name] = true
		out = append(out, jsonField{index: i, key: []byte(`"` + name + `":`), omitEmpty: opts == "omitempty"})
	}
	return out, true
}

// plainJSONName reports whether name needs no escaping as a JSON key.
func plainJSONName(name string) bool {
	for _, c := range name {
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return name != ""
}

// isEmptyJSON reports whether omitempty leaves v out: false, 0, a nil
// pointer or interface, and an empty array, map, slice or string.
func isEmptyJSON(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}

// wholeValue emits json.Marshal's text of v as it is encoded where it
// lies: an addressable value is given by its address, so that what it
// holds is addressable too, as inside json.Marshal (methods of pointer
// receivers are then called).
func (s *jsonStreamer) wholeValue(v reflect.Value) error {
	if v.CanAddr() {
		return s.whole(v.Addr().Interface())
	}
	return s.whole(v.Interface())
}

// whole emits json.Marshal's text of x, made in a buffer used again for
// every piece.
func (s *jsonStreamer) whole(x any) error {
	if s.enc == nil {
		s.enc = json.NewEncoder(&s.buf)
	}
	s.buf.Reset()
	if err := s.enc.Encode(x); err != nil {
		return err
	}
	b := s.buf.Bytes()
	s.emit(b[:len(b)-1]) // Encode ends the text with a newline
	return nil
}
