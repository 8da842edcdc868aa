package elf

import (
	"bytes"
	"encoding/binary"
)

// cacheReader reads what this package keeps in the section cache (type
// names and layouts, frames): LEB128 numbers and length-prefixed strings.
// A read past the data, or a malformed number, sets bad; later reads then
// give zero values, and the caller refuses the entry.
type cacheReader struct {
	b   []byte
	bad bool
}

// uint reads an unsigned number.
func (r *cacheReader) uint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

// int reads a signed (zigzag) number.
func (r *cacheReader) int() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a number of items that each take at least one byte: more
// than the bytes left is bad.
func (r *cacheReader) count() uint64 {
	n := r.uint()
	if n > uint64(len(r.b)) {
		r.bad = true
		return 0
	}
	return n
}

// str reads a string.
func (r *cacheReader) str() string {
	n := r.count()
	if r.bad {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// flag reads a byte that must be 0 or 1.
func (r *cacheReader) flag() bool {
	if r.bad || len(r.b) == 0 || r.b[0] > 1 {
		r.bad = true
		return false
	}
	v := r.b[0] == 1
	r.b = r.b[1:]
	return v
}

// done reports whether the data was read whole and well.
func (r *cacheReader) done() bool { return !r.bad && len(r.b) == 0 }

// cacheWriter writes what cacheReader reads.
type cacheWriter struct{ b []byte }

// uint writes an unsigned number.
func (w *cacheWriter) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

// int writes a signed (zigzag) number.
func (w *cacheWriter) int(v int64) { w.b = binary.AppendVarint(w.b, v) }

// str writes a string.
func (w *cacheWriter) str(s string) {
	w.uint(uint64(len(s)))
	w.b = append(w.b, s...)
}

// flag writes a byte, 0 or 1.
func (w *cacheWriter) flag(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

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
