package main

import (
	"bytes"
	"encoding/json"
	"io"
)

// writeJSON writes v as indented JSON (two spaces, as json.Encoder with
// SetIndent("", "  ") writes it) followed by a newline.
func writeJSON(w io.Writer, v any) error {
	compact, err := json.Marshal(v)
	if err != nil {
		return err
	}
	out := indentJSON(make([]byte, 0, len(compact)*2), compact)
	out = append(out, '\n')
	_, err = w.Write(out)
	return err
}

// indentJSON appends to dst the compact JSON src (as json.Marshal writes
// it: no space outside strings) indented as json.Indent indents it with
// no prefix and two spaces: each element of an object or array on a line
// of its own, "{}" and "[]" for empty ones, ": " after a key. It is
// json.Indent without its validating scanner, several times faster on a
// report of a thousand threads; src must be Marshal's output.
func indentJSON(dst, src []byte) []byte {
	depth := 0
	open := false // the last byte opened an object or array
	newline := func() {
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
