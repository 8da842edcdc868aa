package elf

import (
	"bytes"
	"encoding/binary"
)

// KeptReader reads data kept across runs (KeepData's, and this
// package's own cache entries: type names and layouts, frames, symbols):
// LEB128 numbers and length-prefixed strings and bytes. A read past the
// data, or a malformed number, sets it bad (Bad); later reads then give
// zero values, and the caller refuses the entry, whose bytes are to be
// checked as any input is.
type KeptReader struct {
	b   []byte
	bad bool
}

// NewKeptReader reads b.
func NewKeptReader(b []byte) *KeptReader { return &KeptReader{b: b} }

// Uint reads an unsigned number.
func (r *KeptReader) Uint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 || r.bad {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Int reads a signed (zigzag) number.
func (r *KeptReader) Int() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 || r.bad {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Count reads a number of items that each take at least one byte: more
// than the bytes left is bad.
func (r *KeptReader) Count() uint64 {
	n := r.Uint()
	if n > uint64(len(r.b)) {
		r.bad = true
		return 0
	}
	return n
}

// Str reads a string.
func (r *KeptReader) Str() string {
	n := r.Count()
	if r.bad {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// Bytes reads bytes, at most max of them (a copy).
func (r *KeptReader) Bytes(max uint64) []byte {
	n := r.Count()
	if r.bad || n > max {
		r.bad = true
		return nil
	}
	out := bytes.Clone(r.b[:n])
	r.b = r.b[n:]
	return out
}

// Flag reads a byte that must be 0 or 1.
func (r *KeptReader) Flag() bool {
	if r.bad || len(r.b) == 0 || r.b[0] > 1 {
		r.bad = true
		return false
	}
	v := r.b[0] == 1
	r.b = r.b[1:]
	return v
}

// Fail marks the data bad: a value read is not one the caller accepts.
func (r *KeptReader) Fail() { r.bad = true }

// Bad reports whether a read failed (or Fail was called).
func (r *KeptReader) Bad() bool { return r.bad }

// Len is how many bytes are left to read.
func (r *KeptReader) Len() int { return len(r.b) }

// Done reports whether the data was read whole and well.
func (r *KeptReader) Done() bool { return !r.bad && len(r.b) == 0 }

// KeptWriter writes what KeptReader reads.
type KeptWriter struct{ b []byte }

// Uint writes an unsigned number.
func (w *KeptWriter) Uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

// Int writes a signed (zigzag) number.
func (w *KeptWriter) Int(v int64) { w.b = binary.AppendVarint(w.b, v) }

// Str writes a string.
func (w *KeptWriter) Str(s string) {
	w.Uint(uint64(len(s)))
	w.b = append(w.b, s...)
}

// Bytes writes bytes.
func (w *KeptWriter) Bytes(b []byte) {
	w.Uint(uint64(len(b)))
	w.b = append(w.b, b...)
}

// Flag writes a byte, 0 or 1.
func (w *KeptWriter) Flag(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

// Data is what was written.
func (w *KeptWriter) Data() []byte { return w.b }

// keptPrefix begins the section cache's names of what KeepData keeps.
const keptPrefix = ".ompdi_kept_"

// KeptData returns what KeepData kept for this file under name in an
// earlier run (in the section cache, keyed by the file's build-id and
// identity), nil when nothing is: no section cache, no build-id, or no
// entry. The bytes are a copy, the caller's; they come from a file and
// are to be checked as any input is.
func (im *Image) KeptData(name string) []byte {
	key, ok := im.cacheKey(keptPrefix+name, 0, 0)
	if !ok || im.sections == nil || !keptName(name) {
		return nil
	}
	var out []byte
	loadCached(im.sections, key, func(b []byte) bool {
		out = bytes.Clone(b)
		return true
	})
	return out
}

// KeepData keeps b for this file under name for later runs (KeptData):
// what is derived from the file alone, and costs time to derive again. A
// name is lowercase letters, digits and '_', at most 40 of them; under
// another, nothing is kept. A cache that cannot be written only costs
// that time.
func (im *Image) KeepData(name string, b []byte) {
	key, ok := im.cacheKey(keptPrefix+name, 0, 0)
	if !ok || im.sections == nil || !keptName(name) {
		return
	}
	_ = im.sections.Put(key, b)
}

// keptName reports whether name is one KeepData keeps under: 1 to 40
// lowercase letters, digits and '_'.
func keptName(name string) bool {
	if name == "" || len(name) > 40 {
		return false
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
