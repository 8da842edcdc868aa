package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// encoderJSON is what json.Encoder with SetIndent("", "  ") writes: the
// oracle writeJSON must match byte for byte.
func encoderJSON(t testing.TB, v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestWriteJSON compares writeJSON with json.Encoder on values with empty
// and nested objects and arrays, and strings holding quotes, backslashes,
// brackets, commas, colons, HTML and non-ASCII characters; then on random
// values built from them.
func TestWriteJSON(t *testing.T) {
	strs := []string{"", `"`, `\`, `\"`, `a\\"b`, "{[,:]}", "<a&b>", "ü\u2028\x01\t\n", `"\"\\"`, "plain"}
	type frame struct {
		Function string            `json:"function"`
		Line     int               `json:"line,omitempty"`
		Inlined  []string          `json:"inlined"`
		Extra    map[string]any    `json:"extra,omitempty"`
		Empty    struct{}          `json:"empty"`
		Labels   map[string]string `json:"labels"`
	}
	values := []any{
		nil, 0, -1.5, true, "x", []int{}, []int(nil), map[string]int{}, struct{}{},
		[]any{[]any{}, map[string]any{}, []any{[]any{}}}, strs,
		map[string]any{"a": []any{}, "b": map[string]any{"c": []any{1, "2", nil}}, `k"ey`: "v"},
		[]frame{{Function: "main", Line: 3, Inlined: []string{"f", "g"}, Labels: map[string]string{"[": "]"}}, {}},
	}
	rng := rand.New(rand.NewPCG(15, 1024))
	var random func(depth int) any
	random = func(depth int) any {
		switch n := rng.IntN(8); {
		case depth > 4 || n < 3:
			return strs[rng.IntN(len(strs))]
		case n == 3:
			return rng.IntN(1000) - 500
		case n == 4:
			return nil
		case n == 5:
			return []any{}
		case n == 6:
			var a []any
			for range rng.IntN(4) {
				a = append(a, random(depth+1))
			}
			return a
		default:
			m := map[string]any{}
			for range rng.IntN(4) {
				m[strs[rng.IntN(len(strs))]+"k"] = random(depth + 1)
			}
			return m
		}
	}
	for range 2000 {
		values = append(values, random(0))
	}
	// Larger than writeJSON's chunk: written in several pieces.
	var big []any
	for range 2000 {
		big = append(big, random(0), strs)
	}
	values = append(values, big)
	for i, v := range values {
		var got countingWriter
		if err := writeJSON(&got, v); err != nil {
			t.Fatal(err)
		}
		if want := encoderJSON(t, v); got.String() != want {
			t.Fatalf("value %d: writeJSON wrote\n%s\njson.Encoder writes\n%s", i, got.String(), want)
		}
		if i == len(values)-1 && (got.writes < 2 || got.Len() < 2*jsonChunk) {
			t.Errorf("the large value: %d bytes in %d writes; want more than %d bytes in pieces", got.Len(), got.writes, 2*jsonChunk)
		}
	}
}

// countingWriter is a bytes.Buffer that counts its Write calls.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

// FuzzIndentJSON: for any valid JSON, indentJSON of its compact form is
// json.Indent's.
func FuzzIndentJSON(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":[1,{},[]],"b\"":"\\"}`, `[[[]],{"x":{"y":[]}}]`, `"\u00fc"`, `1e3`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		var compact, want bytes.Buffer
		if err := json.Compact(&compact, []byte(s)); err != nil {
			t.Fatal(err)
		}
		if err := json.Indent(&want, compact.Bytes(), "", "  "); err != nil {
			t.Fatal(err)
		}
		got := indentJSON(nil, compact.Bytes(), nil)
		if string(got) != want.String() {
			t.Fatalf("indentJSON(%s):\n%s\njson.Indent:\n%s", compact.String(), got, strings.TrimSpace(want.String()))
		}
	})
}

// failingWriter fails every write after the first n bytes.
type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		return 0, errors.New("disk full")
	}
	w.n -= len(p)
	return len(p), nil
}

// TestWriteJSONError: a write that fails, in the middle of a large
// value or at its end, is writeJSON's error.
func TestWriteJSONError(t *testing.T) {
	big := make([]string, 20000)
	for i := range big {
		big[i] = "frame"
	}
	for _, n := range []int{0, jsonChunk + 10} {
		if err := writeJSON(&failingWriter{n: n}, big); err == nil || err.Error() != "disk full" {
			t.Errorf("failing after %d bytes: %v, want disk full", n, err)
		}
	}
}
