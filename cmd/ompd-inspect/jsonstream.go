package main

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
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
	// lastStruct and lastFields are the last struct type met and its
	// fields: a report's long slices are of one struct type.
	lastStruct reflect.Type
	lastFields structFields
	marshals   map[reflect.Type]bool // has's answers
	scalar     []byte                // the text of the last scalar emitted
}

// structFields is fieldsOf's answer for one struct type.
type structFields struct {
	fields []jsonField
	ok     bool
}

// value emits the JSON of v.
func (s *jsonStreamer) value(v reflect.Value) error {
	if !v.IsValid() {
		s.text("null")
		return nil
	}
	switch t := v.Type(); {
	case predeclaredScalar(t):
		s.scalarValue(v)
		return nil
	case t.Kind() == reflect.Pointer && predeclaredScalar(t.Elem()):
		// No methods either.
		if v.IsNil() {
			s.text("null")
		} else {
			s.scalarValue(v.Elem())
		}
		return nil
	}
	if x, ok := s.marshalsItself(v); ok {
		return s.whole(x)
	}
	if s.scalarValue(v) {
		return nil
	}
	if s.depth >= jsonMaxDepth {
		return s.wholeValue(v)
	}
	s.depth++
	defer func() { s.depth-- }()
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			s.text("null")
			return nil
		}
		return s.value(v.Elem())
	case reflect.Slice:
		if v.IsNil() || v.Len() < s.split || v.Type().Elem().Kind() == reflect.Uint8 {
			return s.wholeValue(v)
		}
		s.text("[")
		for i := range v.Len() {
			if i > 0 {
				s.text(",")
			}
			if err := s.value(v.Index(i)); err != nil {
				return err
			}
		}
		s.text("]")
		return nil
	case reflect.Map:
		return s.mapValue(v)
	case reflect.Struct:
		return s.structValue(v)
	}
	return s.wholeValue(v)
}

// text emits punctuation or a literal.
func (s *jsonStreamer) text(t string) {
	s.scalar = append(s.scalar[:0], t...)
	s.emit(s.scalar)
}

// str emits a string, quoted and escaped.
func (s *jsonStreamer) str(v string) {
	s.scalar = appendJSONString(s.scalar[:0], v)
	s.emit(s.scalar)
}

// jsonNumber is json.Number, a string that json.Marshal writes bare.
var jsonNumber = reflect.TypeFor[json.Number]()

// scalarValue emits v when it is a string, an integer or a boolean, as
// json.Marshal writes them, and reports whether it was: most of a
// report's leaves, each a call of json.Encoder's otherwise. The caller
// has checked that v's type has no marshaling of its own.
func (s *jsonStreamer) scalarValue(v reflect.Value) bool {
	if v.Type() == jsonNumber {
		return false
	}
	switch v.Kind() {
	case reflect.String:
		s.str(v.String())
		return true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		s.scalar = strconv.AppendInt(s.scalar[:0], v.Int(), 10)
		s.emit(s.scalar)
		return true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		s.scalar = strconv.AppendUint(s.scalar[:0], v.Uint(), 10)
		s.emit(s.scalar)
		return true
	case reflect.Bool:
		if v.Bool() {
			s.text("true")
		} else {
			s.text("false")
		}
		return true
	}
	return false
}

// predeclaredScalar reports whether t is one of the language's string,
// integer or boolean types, which have no methods.
func predeclaredScalar(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return t.PkgPath() == "" && t.Name() != ""
	}
	return false
}

// marshalsItself reports whether v's type, or for an addressable v its
// pointer type, has its own marshaling (json.Marshaler or
// encoding.TextMarshaler), and returns what json.Marshal is to be given.
func (s *jsonStreamer) marshalsItself(v reflect.Value) (any, bool) {
	t := v.Type()
	if v.Kind() == reflect.Interface && s.has(t) {
		// An interface of a marshaling type (a json.Marshaler field, say):
		// json.Marshal calls its method even on a nil pointer it holds,
		// which it does only when given the interface by address.
		p := reflect.New(t)
		p.Elem().Set(v)
		return p.Interface(), true
	}
	if s.has(t) {
		return v.Interface(), true
	}
	if v.Kind() != reflect.Pointer && v.CanAddr() && s.has(reflect.PointerTo(t)) {
		return v.Addr().Interface(), true
	}
	return nil, false
}

// has is the package's has, remembered by type.
func (s *jsonStreamer) has(t reflect.Type) bool {
	h, ok := s.marshals[t]
	if !ok {
		if s.marshals == nil {
			s.marshals = map[reflect.Type]bool{}
		}
		h = has(t)
		s.marshals[t] = h
	}
	return h
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
	s.text("{")
	for i, k := range keys {
		if i > 0 {
			s.text(",")
		}
		s.str(k.String())
		s.text(":")
		if err := s.value(v.MapIndex(k)); err != nil {
			return err
		}
	}
	s.text("}")
	return nil
}

// structValue emits a struct field by field, as json.Marshal encodes it,
// or whole when its fields use what fieldsOf does not model.
func (s *jsonStreamer) structValue(v reflect.Value) error {
	t := v.Type()
	sf, known := s.lastFields, t == s.lastStruct
	if !known {
		sf, known = s.fields[t]
	}
	if !known {
		if s.fields == nil {
			s.fields = map[reflect.Type]structFields{}
		}
		sf.fields, sf.ok = fieldsOf(t)
		s.fields[t] = sf
	}
	s.lastStruct, s.lastFields = t, sf
	fields := sf.fields
	if !sf.ok {
		return s.wholeValue(v)
	}
	s.text("{")
	first := true
	for _, f := range fields {
		fv := v.Field(f.index)
		if f.omitEmpty && isEmptyJSON(fv) {
			continue
		}
		if !first {
			s.text(",")
		}
		first = false
		s.emit(f.key)
		if err := s.value(fv); err != nil {
			return err
		}
	}
	s.text("}")
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

// appendJSONString appends str as json.Marshal writes a string: in
// quotes, with '"' and '\\' escaped by a backslash, \b, \f, \n, \r and
// \t by their letters, the other control characters and '<', '>' and '&'
// (HTML escaping, json.Marshal's default) as \u00XX, U+2028 and U+2029
// as \u2028 and \u2029, and each byte of invalid UTF-8 as \ufffd.
func appendJSONString(dst []byte, str string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0 // of the bytes not yet copied
	for i := 0; i < len(str); {
		c := str[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, str[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(str[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, str[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, str[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, str[start:]...)
	return append(dst, '"')
}
