package main

import (
	"io"
	"reflect"
)

// writeJSON writes v as indented JSON (two spaces, as json.Encoder with
// SetIndent("", "  ") writes it) followed by a newline. The text is made
// in pieces (jsonStreamer), indented as they come and written 64 KiB at a
// time: a report of a thousand threads is several megabytes. An error
// marshaling a value (none of a report's can fail) leaves what was
// written before it.
func writeJSON(w io.Writer, v any) error {
	return writeJSONSplit(w, v, jsonSplit)
}

// writeJSONSplit is writeJSON with jsonStreamer's split (tests make it
// split everything).
func writeJSONSplit(w io.Writer, v any, split int) error {
	var werr error
	in := &indenter{dst: make([]byte, 0, 2*jsonChunk), flush: func(b []byte) []byte {
		if werr != nil {
			return b[:0] // the rest is lost: make no more of it
		}
		if len(b) < jsonChunk {
			return b
		}
		_, werr = w.Write(b)
		return b[:0]
	}}
	st := jsonStreamer{split: split, out: in}
	if err := st.value(reflect.ValueOf(v)); err != nil {
		return err
	}
	if werr != nil {
		return werr
	}
	_, err := w.Write(append(in.dst, '\n'))
	return err
}

// jsonChunk is how much indented JSON writeJSON gathers before it writes.
const jsonChunk = 64 << 10

// indentJSON appends to dst the compact JSON src (as json.Marshal writes
// it: no space outside strings) indented as json.Indent indents it with
// no prefix and two spaces: each element of an object or array on a line
// of its own, "{}" and "[]" for empty ones, ": " after a key. It is
// json.Indent without its validating scanner, several times faster on a
// report of a thousand threads; src must be Marshal's output.
//
// flush, when not nil, is given dst after each line and returns what dst
// goes on from (dst itself, or dst[:0] once it has written it).
func indentJSON(dst, src []byte, flush func([]byte) []byte) []byte {
	in := indenter{dst: dst, flush: flush}
	in.text(src)
	return in.dst
}

// indenter is indentJSON over a text given in pieces: any split that
// does not cut a string indents as the whole text does. It is the
// jsonSink writeJSON gives jsonStreamer: punctuation and scalars, most of
// the text, are placed without being scanned.
type indenter struct {
	dst   []byte              // the indented text
	flush func([]byte) []byte // as indentJSON's
	depth int
	open  bool // the last byte opened an object or array
}

// indentSpaces serves the indentation of lines up to len/2 deep.
const indentSpaces = "                                                                "

// newline ends a line and indents the next.
func (in *indenter) newline() {
	if in.flush != nil {
		in.dst = in.flush(in.dst)
	}
	in.dst = append(in.dst, '\n')
	if n := 2 * in.depth; n <= len(indentSpaces) {
		in.dst = append(in.dst, indentSpaces[:n]...)
		return
	}
	for range in.depth {
		in.dst = append(in.dst, ' ', ' ')
	}
}

// opened begins the first element of the object or array just opened:
// c is the element's first byte.
func (in *indenter) opened(c byte) {
	if in.open && c != '}' && c != ']' {
		in.open = false
		in.depth++
		in.newline()
	}
}

// punct places one of '{', '}', '[', ']', ',' and ':'.
func (in *indenter) punct(c byte) {
	in.opened(c)
	switch c {
	case '{', '[':
		in.dst = append(in.dst, c)
		in.open = true
	case '}', ']':
		if in.open {
			in.open = false // empty: "{}" or "[]"
		} else {
			in.depth--
			in.newline()
		}
		in.dst = append(in.dst, c)
	case ',':
		in.dst = append(in.dst, c)
		in.newline()
	case ':':
		in.dst = append(in.dst, c, ' ')
	default:
		in.dst = append(in.dst, c)
	}
}

// atom places a string, number or literal whole.
func (in *indenter) atom(b []byte) {
	in.opened(b[0])
	in.dst = append(in.dst, b...)
}

// str places a string, quoted and escaped.
func (in *indenter) str(v string) {
	in.opened('"')
	in.dst = appendJSONString(in.dst, v)
}

// text places the next piece of compact JSON, src.
func (in *indenter) text(src []byte) {
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case '"':
			// Copy the string whole: its end is the first quote not
			// escaped by a backslash.
			in.opened(c)
			j := i + 1
			for j < len(src) && src[j] != '"' {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			end := min(j+1, len(src))
			in.dst = append(in.dst, src[i:end]...)
			i = end - 1
		case '{', '[', '}', ']', ',', ':':
			in.punct(c)
		default:
			in.opened(c)
			in.dst = append(in.dst, c)
		}
	}
}
