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
	in := indenter{flush: func(b []byte) []byte {
		if werr != nil {
			return b[:0] // the rest is lost: make no more of it
		}
		if len(b) < jsonChunk {
			return b
		}
		_, werr = w.Write(b)
		return b[:0]
	}}
	buf := make([]byte, 0, 2*jsonChunk)
	st := jsonStreamer{split: split, emit: func(piece []byte) {
		if werr == nil {
			buf = in.indent(buf, piece)
		}
	}}
	if err := st.value(reflect.ValueOf(v)); err != nil {
		return err
	}
	if werr != nil {
		return werr
	}
	_, err := w.Write(append(buf, '\n'))
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
	in := indenter{flush: flush}
	return in.indent(dst, src)
}

// indenter is indentJSON over a text given in pieces: any split that
// does not cut a string indents as the whole text does.
type indenter struct {
	flush func([]byte) []byte // as indentJSON's
	depth int
	open  bool // the last byte opened an object or array
}

// indent appends to dst the next piece of the text, src, indented.
func (in *indenter) indent(dst, src []byte) []byte {
	newline := func() {
		if in.flush != nil {
			dst = in.flush(dst)
		}
		dst = append(dst, '\n')
		for range in.depth {
			dst = append(dst, ' ', ' ')
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		if in.open && c != '}' && c != ']' {
			in.open = false
			in.depth++
			newline()
		}
		switch c {
		case '"':
			// Copy the string whole: its end is the first quote not
			// escaped by a backslash.
			j := i + 1
			for j < len(src) && src[j] != '"' {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			end := min(j+1, len(src))
			dst = append(dst, src[i:end]...)
			i = end - 1
		case '{', '[':
			dst = append(dst, c)
			in.open = true
		case '}', ']':
			if in.open {
				in.open = false // empty: "{}" or "[]"
			} else {
				in.depth--
				newline()
			}
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			newline()
		case ':':
			dst = append(dst, c, ' ')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}
