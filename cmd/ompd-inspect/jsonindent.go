package main

import (
	"bytes"
	"encoding/json"
	"io"
)

// writeJSON writes v as indented JSON (two spaces, as json.Encoder with
// SetIndent("", "  ") writes it) followed by a newline. The indented text
// is written as it is made, 64 KiB at a time: a report of a thousand
// threads is several megabytes.
func writeJSON(w io.Writer, v any) error {
	compact, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var werr error
	buf := indentJSON(make([]byte, 0, 2*jsonChunk), compact, func(b []byte) []byte {
		if werr != nil {
			return b[:0] // the rest is lost: make no more of it
		}
		if len(b) < jsonChunk {
			return b
		}
		_, werr = w.Write(b)
		return b[:0]
	})
	if werr != nil {
		return werr
	}
	_, err = w.Write(append(buf, '\n'))
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
	depth := 0
	open := false // the last byte opened an object or array
	newline := func() {
		if flush != nil {
			dst = flush(dst)
		}
		dst = append(dst, '\n')
		for range depth {
			dst = append(dst, ' ', ' ')
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		if open && c != '}' && c != ']' {
			open = false
			depth++
			newline()
		}
		switch c {
		case '"':
			// Copy the string whole: its end is the first quote not
			// escaped by a backslash.
			j := i + 1
			for j < len(src) {
				k := bytes.IndexAny(src[j:], `"\`)
				if k < 0 {
					j = len(src)
					break
				}
				j += k
				if src[j] == '\\' {
					j += 2
					continue
				}
				break
			}
			end := min(j+1, len(src))
			dst = append(dst, src[i:end]...)
			i = end - 1
		case '{', '[':
			dst = append(dst, c)
			open = true
		case '}', ']':
			if open {
				open = false // empty: "{}" or "[]"
			} else {
				depth--
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
