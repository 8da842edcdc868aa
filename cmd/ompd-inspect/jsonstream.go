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
	// out is given the pieces.
	out jsonSink

	depth  int // of the value being emitted
	buf    bytes.Buffer
	enc    *json.Encoder
	types  map[reflect.Type]*typeInfo // info's answers
	scalar []byte                     // the text of the last scalar emitted
}

// jsonSink is what jsonStreamer gives its pieces to; a slice given is
// only valid during the call.
type jsonSink interface {
	// punct is given one of '{', '}', '[', ']', ',' and ':'.
	punct(c byte)
	// atom is given a number or a literal.
	atom(b []byte)
	// str is given a string, to be quoted and escaped (appendJSONString).
	str(v string)
	// text is given compact JSON as json.Marshal writes it.
	text(b []byte)
}

// structFields is fieldsOf's answer for one struct type.
type structFields struct {
	fields []jsonField
	ok     bool
}

// typeInfo is what jsonStreamer knows of one type, looked up once.
type typeInfo struct {
	// scalar: a predeclared string, integer or boolean type;
	// scalarPointer: a pointer to one. Neither has methods.
	scalar, scalarPointer bool
	// marshals: the type has its own marshaling (json.Marshaler or
	// encoding.TextMarshaler); addrMarshals: its pointer type has, and
	// it is not a pointer itself.
	marshals, addrMarshals bool
	// fields are a struct type's (fieldsOf), found when first needed.
	fields     structFields
	fieldsDone bool
}

// info returns what is known of t.
func (s *jsonStreamer) info(t reflect.Type) *typeInfo {
	if ti := s.types[t]; ti != nil {
		return ti
	}
	if s.types == nil {
		s.types = map[reflect.Type]*typeInfo{}
	}
	ti := &typeInfo{
		scalar:        predeclaredScalar(t),
		scalarPointer: t.Kind() == reflect.Pointer && predeclaredScalar(t.Elem()),
		marshals:      has(t),
	}
	ti.addrMarshals = t.Kind() != reflect.Pointer && has(reflect.PointerTo(t))
	s.types[t] = ti
	return ti
}

// value emits the JSON of v.
func (s *jsonStreamer) value(v reflect.Value) error {
	if !v.IsValid() {
		s.literal("null")
		return nil
	}
	return s.typedValue(v, s.info(v.Type()))
}

// typedValue emits the JSON of v, whose type ti describes.
func (s *jsonStreamer) typedValue(v reflect.Value, ti *typeInfo) error {
	switch {
	case ti.scalar:
		s.scalarValue(v)
		return nil
	case ti.scalarPointer:
		if v.IsNil() {
			s.literal("null")
		} else {
			s.scalarValue(v.Elem())
		}
		return nil
	}
	if x, ok := s.marshalsItself(v, ti); ok {
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
			s.literal("null")
			return nil
		}
		return s.value(v.Elem())
	case reflect.Slice:
		if v.IsNil() || v.Len() < s.split || v.Type().Elem().Kind() == reflect.Uint8 {
			return s.wholeValue(v)
		}
		elem := s.info(v.Type().Elem())
		s.out.punct('[')
		for i := range v.Len() {
			if i > 0 {
				s.out.punct(',')
			}
			if err := s.typedValue(v.Index(i), elem); err != nil {
				return err
			}
		}
		s.out.punct(']')
		return nil
	case reflect.Map:
		return s.mapValue(v)
	case reflect.Struct:
		return s.structValue(v, ti)
	}
	return s.wholeValue(v)
}

// literal emits null, true or false.
func (s *jsonStreamer) literal(t string) {
	s.scalar = append(s.scalar[:0], t...)
	s.out.atom(s.scalar)
}

// str emits a string, quoted and escaped.
func (s *jsonStreamer) str(v string) { s.out.str(v) }

// jsonNumber is json.Number, a string that json.Marshal writes bare.
var jsonNumber = reflect.TypeFor[json.Number]()

// scalarValue emits v when it is a string, an integer or a boolean, as
// json.Marshal writes them, and reports whether it was: most of a
// report's leaves, each a call of json.Encoder's otherwise. The caller
// has checked that v's type has no marshaling of its own.
func (s *jsonStreamer) scalarValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		if v.Type() == jsonNumber {
			return false
		}
		s.str(v.String())
		return true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		s.scalar = strconv.AppendInt(s.scalar[:0], v.Int(), 10)
		s.out.atom(s.scalar)
		return true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		s.scalar = strconv.AppendUint(s.scalar[:0], v.Uint(), 10)
		s.out.atom(s.scalar)
		return true
	case reflect.Bool:
		if v.Bool() {
			s.literal("true")
		} else {
			s.literal("false")
		}
		return true
	}
	return false
}

// predeclaredScalar reports whether t is one of the language's string,
// integer or boolean types, which have no methods.
func predeclaredScalar(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String:
		return t == stringType
	case reflect.Bool:
		return t == boolType
	case reflect.Int:
		return t == intType
	case reflect.Int8:
		return t == int8Type
	case reflect.Int16:
		return t == int16Type
	case reflect.Int32:
		return t == int32Type
	case reflect.Int64:
		return t == int64Type
	case reflect.Uint:
		return t == uintType
	case reflect.Uint8:
		return t == uint8Type
	case reflect.Uint16:
		return t == uint16Type
	case reflect.Uint32:
		return t == uint32Type
	case reflect.Uint64:
		return t == uint64Type
	case reflect.Uintptr:
		return t == uintptrType
	}
	return false
}

// The predeclared scalar types, compared by identity: asking a type for
// its name and package costs more than marshaling a small integer.
var (
	stringType  = reflect.TypeFor[string]()
	boolType    = reflect.TypeFor[bool]()
	intType     = reflect.TypeFor[int]()
	int8Type    = reflect.TypeFor[int8]()
	int16Type   = reflect.TypeFor[int16]()
	int32Type   = reflect.TypeFor[int32]()
	int64Type   = reflect.TypeFor[int64]()
	uintType    = reflect.TypeFor[uint]()
	uint8Type   = reflect.TypeFor[uint8]()
	uint16Type  = reflect.TypeFor[uint16]()
	uint32Type  = reflect.TypeFor[uint32]()
	uint64Type  = reflect.TypeFor[uint64]()
	uintptrType = reflect.TypeFor[uintptr]()
)

// marshalsItself reports whether v's type (ti), or for an addressable v
// its pointer type, has its own marshaling (json.Marshaler or
// encoding.TextMarshaler), and returns what json.Marshal is to be given.
func (s *jsonStreamer) marshalsItself(v reflect.Value, ti *typeInfo) (any, bool) {
	switch {
	case ti.marshals && v.Kind() == reflect.Interface:
		// An interface of a marshaling type (a json.Marshaler field, say):
		// json.Marshal calls its method even on a nil pointer it holds,
		// which it does only when given the interface by address.
		p := reflect.New(v.Type())
		p.Elem().Set(v)
		return p.Interface(), true
	case ti.marshals:
		return v.Interface(), true
	case ti.addrMarshals && v.CanAddr():
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
	s.out.punct('{')
	for i, k := range keys {
		if i > 0 {
			s.out.punct(',')
		}
		s.str(k.String())
		s.out.punct(':')
		if err := s.value(v.MapIndex(k)); err != nil {
			return err
		}
	}
	s.out.punct('}')
	return nil
}

// structValue emits a struct field by field, as json.Marshal encodes it,
// or whole when its fields use what fieldsOf does not model. ti
// describes its type.
func (s *jsonStreamer) structValue(v reflect.Value, ti *typeInfo) error {
	if !ti.fieldsDone {
		ti.fields.fields, ti.fields.ok = fieldsOf(v.Type())
		ti.fieldsDone = true
	}
	if !ti.fields.ok {
		return s.wholeValue(v)
	}
	fields := ti.fields.fields
	s.out.punct('{')
	first := true
	for i := range fields {
		f := &fields[i]
		fv := v.Field(f.index)
		if f.omitEmpty && isEmptyJSON(fv) {
			continue
		}
		if !first {
			s.out.punct(',')
		}
		first = false
		s.out.atom(f.key)
		s.out.punct(':')
		switch {
		case f.scalar:
			s.scalarValue(fv)
		case f.scalarPointer:
			if fv.IsNil() {
				s.literal("null")
			} else {
				s.scalarValue(fv.Elem())
			}
		default:
			if f.info == nil {
				f.info = s.info(f.typ)
			}
			if err := s.typedValue(fv, f.info); err != nil {
				return err
			}
		}
	}
	s.out.punct('}')
	return nil
}

// jsonField is a struct field json.Marshal encodes.
type jsonField struct {
	index     int
	key       []byte // `"name"`
	omitEmpty bool
	// scalar: the field is of a predeclared scalar type (value's first
	// case); scalarPointer: a pointer to one (its second).
	scalar, scalarPointer bool
	typ                   reflect.Type
	info                  *typeInfo // typ's, found when first needed
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
		out = append(out, jsonField{index: i, key: []byte(`"` + name + `"`), omitEmpty: opts == "omitempty",
			typ:           f.Type,
			scalar:        predeclaredScalar(f.Type),
			scalarPointer: f.Type.Kind() == reflect.Pointer && predeclaredScalar(f.Type.Elem())})
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
	s.out.text(b[:len(b)-1]) // Encode ends the text with a newline
	return nil
}

// jsonPlain says which ASCII bytes a JSON string holds as they are.
var jsonPlain = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

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
			if jsonPlain[c] {
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
