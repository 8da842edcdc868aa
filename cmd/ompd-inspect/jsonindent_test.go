package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
	"github.com/ompd-inspect/ompd-inspect/target/core"
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
	strs := []string{"", `"`, `\`, `\"`, `a\\"b`, "{[,:]}", "<a&b>", "ü\u2028\x01\t\n", `"\"\\"`, "plain",
		"\x00\x1f\x7f\b\f\r\u2029", "\xff\xfe", "\xe2\x80", "日本\U0001F600"}
	type frame struct {
		Function string            `json:"function"`
		Line     int               `json:"line,omitempty"`
		Inlined  []string          `json:"inlined"`
		Extra    map[string]any    `json:"extra,omitempty"`
		Empty    struct{}          `json:"empty"`
		Labels   map[string]string `json:"labels"`
	}
	type name string
	values := []any{
		nil, 0, -1.5, true, false, "x", []int{}, []int(nil), map[string]int{}, struct{}{},
		int8(-128), int16(-32768), int32(-1 << 31), int64(-1 << 63), uint8(255), uint16(65535), uint32(1<<32 - 1), uint64(1<<64 - 1), uintptr(7),
		name("<named>"), []name{"a", "\u2028"}, map[name]int{"k<": 1}, []bool{true, false},
		json.Number("12"), []json.Number{"1.5e3", "-7"}, map[string]json.Number{"n": "0"},
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
	values = append(values, streamerCases()...)
	for i, v := range values {
		want := encoderJSON(t, v)
		for _, split := range []int{jsonSplit, 0} {
			var got countingWriter
			if err := writeJSONSplit(&got, v, split); err != nil {
				t.Fatal(err)
			}
			if got.String() != want {
				t.Fatalf("value %d, split %d: writeJSON wrote\n%s\njson.Encoder writes\n%s", i, split, got.String(), want)
			}
			if v, ok := v.([]any); ok && len(v) == 4000 && (got.writes < 2 || got.Len() < 2*jsonChunk) {
				t.Errorf("the large value: %d bytes in %d writes; want more than %d bytes in pieces", got.Len(), got.writes, 2*jsonChunk)
			}
		}
	}
}

// Types for streamerCases: what jsonStreamer must marshal as json.Marshal
// does, piece by piece or whole.
type (
	selfMarshaled struct{ N int }
	ptrMarshaled  struct{ N int }
	textKey       string
	inner         struct {
		A string `json:"a"`
	}
	tagged struct {
		Name     string         `json:"name"`
		Skip     string         `json:"-"`
		Dash     string         `json:"-,"`
		hidden   string         //nolint:unused // unexported: never encoded
		Plain    int            // no tag: its Go name
		Empty    []int          `json:"empty,omitempty"`
		Zero     int            `json:"zero,omitempty"`
		False    bool           `json:"false,omitempty"`
		NilPtr   *inner         `json:"nil_ptr,omitempty"`
		NilAny   any            `json:"nil_any,omitempty"`
		EmptyMap map[string]int `json:"empty_map,omitempty"`
		Ptr      *inner         `json:"ptr"`
		Any      any            `json:"any"`
		Self     selfMarshaled  `json:"self"`
		ByPtr    ptrMarshaled   `json:"by_ptr"`
		Keys     map[textKey]int
		Ints     map[int]string `json:"ints"`
		Bytes    []byte         `json:"bytes"`
		Array    [3]inner       `json:"array"`
		Quoted   int            `json:"quoted,string"`
		Odd      string         `json:"odd<name>"`
		List     []inner        `json:"list"`
	}
	embedding struct {
		inner
		B int `json:"b"`
	}
	twins struct {
		X int `json:"Y"`
		Y int
	}
	marshalerFields struct {
		NilPtr  json.Marshaler `json:"nil_ptr"`
		NilIfc  json.Marshaler `json:"nil_ifc"`
		Value   json.Marshaler `json:"value"`
		Omitted json.Marshaler `json:"omitted,omitempty"`
	}
	node struct {
		Name string `json:"name"`
		Next *node  `json:"next"`
	}
)

func (selfMarshaled) MarshalJSON() ([]byte, error) { return []byte(`{ "self" : true }`), nil }
func (*ptrMarshaled) MarshalJSON() ([]byte, error) { return []byte(`"by pointer"`), nil }
func (k textKey) MarshalText() ([]byte, error)     { return []byte("key-" + string(k)), nil }

// streamerCases are values that take each of jsonStreamer's ways: struct
// fields with every tag form, omitempty, embedded and duplicate fields,
// types with their own marshaling (by value and by pointer, addressable or
// not), maps with text and integer keys, byte slices and arrays.
func streamerCases() []any {
	full := tagged{
		Name: "n", Skip: "s", Dash: "d", hidden: "h", Plain: 7, Ptr: &inner{A: "<&>"}, Any: []any{1, "x"},
		Keys: map[textKey]int{"b": 2, "a": 1}, Ints: map[int]string{10: "ten", 2: "two"},
		Bytes: []byte("bytes"), Quoted: 42, Odd: "o", List: []inner{{"1"}, {"2"}},
	}
	return []any{
		full, &full, []tagged{full, {}}, []*tagged{&full, nil},
		map[string]any{"t": full, "p": &full, "list": []tagged{full}},
		tagged{}, embedding{inner{"e"}, 1}, twins{1, 2},
		selfMarshaled{}, &ptrMarshaled{}, ptrMarshaled{}, []ptrMarshaled{{}, {}}, map[string]ptrMarshaled{"k": {}},
		[]byte{}, [2]int{1, 2}, map[textKey]any{"z": nil}, (*tagged)(nil), []any{nil, (*inner)(nil)},
		marshalerFields{NilPtr: (*ptrMarshaled)(nil), Value: selfMarshaled{}},
		[]marshalerFields{{NilPtr: (*ptrMarshaled)(nil)}},
		deepList(3 * jsonMaxDepth),
	}
}

// deepList is a list of n nodes: deeper than jsonStreamer follows.
func deepList(n int) *node {
	var head *node
	for i := range n {
		head = &node{Name: strconv.Itoa(i), Next: head}
	}
	return head
}

// TestWriteJSONCycle checks that a value that refers to itself is an
// error, as for json.Marshal, not a stack overflow.
func TestWriteJSONCycle(t *testing.T) {
	n := &node{Name: "loop"}
	n.Next = n
	if _, err := json.Marshal(n); err == nil {
		t.Fatal("json.Marshal of a cycle: no error")
	}
	var b bytes.Buffer
	if err := writeJSONSplit(&b, []any{n}, 0); err == nil {
		t.Fatal("writeJSON of a cycle: no error")
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

// corpusCore decompresses the corpus's core name into a temporary file,
// and returns the corpus's directory and the core's path.
func corpusCore(tb testing.TB, name string) (dir, path string) {
	tb.Helper()
	dir = filepath.Join(fixture.RepoRoot(tb), "testdata", "cores")
	path = filepath.Join(tb.TempDir(), "core")
	out, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command("xz", "-dc", filepath.Join(dir, name))
	cmd.Stdout = out
	if err := cmd.Run(); err != nil {
		tb.Fatalf("xz -dc %s: %v", name, err)
	}
	return dir, path
}

// barrierCoreReport builds the all view's report of the corpus's gcore of
// the barrier fixture on the OMPD build.
func barrierCoreReport(tb testing.TB) *inspect.Report {
	tb.Helper()
	dir, path := corpusCore(tb, "barrier-ompd-gcore.core.xz")
	c, err := core.Open(path, core.Options{Exe: filepath.Join(dir, "barrier-ompd"), SearchPath: []string{fixture.OMPDLibDir()}})
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	reps, err := buildReports(c, inspect.Source{Kind: "core", Core: path}, "all", viewFlags{})
	if err != nil {
		tb.Fatal(err)
	}
	return reps[0]
}

// TestWriteJSONReport compares writeJSON with json.Encoder on what the
// all and bt views write for a real report (the corpus's gcore of the
// barrier fixture on the OMPD build), split as writeJSON splits and with
// everything split.
func TestWriteJSONReport(t *testing.T) {
	rep := barrierCoreReport(t)
	bts, err := backtraces(rep, viewFlags{})
	if err != nil {
		t.Fatal(err)
	}
	if len(bts) != 4 || len(rep.ICVs) == 0 {
		t.Fatalf("the report has %d backtraces and %d ICVs; want the fixture's 4 threads and their ICVs", len(bts), len(rep.ICVs))
	}
	all := *rep
	all.Backtraces = bts
	values := map[string]any{
		"all":        &all,
		"bt":         map[string]any{"target": rep.Target, "runtime": rep.Runtime, "warnings": rep.Warnings, "backtraces": bts},
		"bt --group": map[string]any{"target": rep.Target, "runtime": rep.Runtime, "warnings": rep.Warnings, "groups": groups(bts)},
	}
	// The report is made in pieces, none of them large: its structs
	// field by field, its long slices element by element.
	for _, split := range []int{jsonSplit, 0} {
		var c countingSink
		st := jsonStreamer{split: split, out: &c}
		if err := st.value(reflect.ValueOf(&all)); err != nil {
			t.Fatal(err)
		}
		if c.pieces < 50 || c.largest > c.total/4 {
			t.Errorf("split %d: the all view's %d bytes in %d pieces, the largest %d bytes; want it in many small pieces", split, c.total, c.pieces, c.largest)
		}
	}
	for name, v := range values {
		want := encoderJSON(t, v)
		for _, split := range []int{jsonSplit, 0} {
			var got bytes.Buffer
			if err := writeJSONSplit(&got, v, split); err != nil {
				t.Fatal(err)
			}
			if got.String() != want {
				t.Errorf("%s, split %d: writeJSON differs from json.Encoder", name, split)
			}
		}
	}
}

// countingSink counts the pieces a jsonStreamer gives.
type countingSink struct{ pieces, largest, total int }

func (c *countingSink) punct(byte)    { c.add(1) }
func (c *countingSink) atom(b []byte) { c.add(len(b)) }
func (c *countingSink) text(b []byte) { c.add(len(b)) }
func (c *countingSink) str(v string)  { c.add(len(appendJSONString(nil, v))) }
func (c *countingSink) add(n int) {
	c.pieces, c.largest, c.total = c.pieces+1, max(c.largest, n), c.total+n
}

// TestAppendJSONString: strings of random bytes (control characters,
// HTML's, invalid and valid UTF-8 among them) are written as json.Marshal
// writes them.
func TestAppendJSONString(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 11))
	pieces := []string{"\u2028", "\u2029", "ü", "\U0001F600", "\xed\xa0\x80", "\xf4\x90\x80\x80"}
	for range 20000 {
		var b []byte
		for range rng.IntN(12) {
			if rng.IntN(5) == 0 {
				b = append(b, pieces[rng.IntN(len(pieces))]...)
			} else {
				b = append(b, byte(rng.IntN(256)))
			}
		}
		want, err := json.Marshal(string(b))
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, string(b)); string(got) != string(want) {
			t.Fatalf("%q: wrote %s, json.Marshal %s", b, got, want)
		}
	}
}

// BenchmarkWriteJSON writes the all view of the corpus's barrier core
// with its threads, tasks, ICVs and backtraces repeated for 1024
// threads, split as writeJSON splits (split16) and everything split
// (split0).
func BenchmarkWriteJSON(b *testing.B) {
	rep := barrierCoreReport(b)
	all := *rep
	if len(all.Backtraces) == 0 {
		b.Fatal("the core's report has no backtraces")
	}
	for len(all.Backtraces) < 1024 {
		all.Backtraces = append(all.Backtraces, rep.Backtraces...)
		all.Threads = append(all.Threads, rep.Threads...)
		all.Tasks = append(all.Tasks, rep.Tasks...)
		all.ICVs = append(all.ICVs, rep.ICVs...)
	}
	for _, split := range []int{jsonSplit, 0} {
		b.Run(fmt.Sprintf("split%d", split), func(b *testing.B) {
			for b.Loop() {
				if err := writeJSONSplit(io.Discard, &all, split); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
