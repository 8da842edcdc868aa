package unwind

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
	"github.com/ompd-inspect/ompd-inspect/target/sectioncache"
)

// rowWalks runs, with a new Unwinder, walks of libcfi.so's functions that
// meet rules of every kind, an FDE whose program fails, and a function
// without an FDE (the frame-pointer fallback), on a target mapping im. It
// returns what they found and the Unwinder.
func rowWalks(t *testing.T, im *elf.Image) (string, *Unwinder) {
	t.Helper()
	f := &fakeTarget{mods: []*target.Module{{Name: "libcfi.so", File: im.Path, Start: libBias, End: libBias + libSize, Bias: libBias, Image: im}},
		stack: make([]byte, stackBytes)}
	sp := uint64(stackBase + 0x1000)
	outer := f.sym(t, "fn_outer_ret")
	f.put(sp+8, outer)
	f.put(sp, 0x1313)
	u := New(f)
	var out bytes.Buffer
	for _, regs := range []target.Registers{
		{Rip: f.sym(t, "fn_expr_pc"), Rsp: sp, Rbp: 0xbbbb, Rbx: 0xb, R12: 0x1212, R13: 0xd, R14: 0x1414, R15: 0x1515, Rax: 0xa},
		{Rip: f.sym(t, "fn_badcfi_pc"), Rsp: sp},
		{Rip: f.sym(t, "fn_fp"), Rsp: sp, Rbp: sp + 0x100},
		{Rip: f.sym(t, "fn_restore_pc"), Rsp: sp + 8, Rbp: 0xbeef},
	} {
		frames, stop := u.UnwindRegisters(regs)
		for _, fr := range frames {
			fmt.Fprintf(&out, "pc %#x cfa %#x sp %#x bp %#x %v regs %v; ", fr.PC, fr.CFA, fr.SP, fr.BP, fr.How, fr.regs)
		}
		fmt.Fprintf(&out, "stop %s\n", stop)
	}
	return out.String(), u
}

// TestKeptRows: the rows one run computed are kept (KeepRows); a later
// run's image reads them before any walk (PrepareRows), and its walks then
// find the same frames, registers and stops without computing a row.
func TestKeptRows(t *testing.T) {
	path := cfiLib(t)
	cache, err := sectioncache.Open(filepath.Join(t.TempDir(), "cache"), 0)
	if err != nil {
		t.Fatal(err)
	}
	open := func() *elf.Image {
		im, err := elf.OpenWith(path, elf.OpenOptions{Sections: cache})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { im.Close() })
		return im
	}
	first := open()
	if PrepareRows(first) {
		t.Fatal("rows kept before any run")
	}
	want, u := rowWalks(t, first)
	if u.computed == 0 {
		t.Fatal("the first run computed no row")
	}
	KeepRows(first)

	second := open()
	if !PrepareRows(second) {
		t.Fatal("the rows kept were not read")
	}
	got, u := rowWalks(t, second)
	if got != want {
		t.Fatalf("walks with kept rows:\n%s\nwith rows computed:\n%s", got, want)
	}
	if u.computed != 0 {
		t.Fatalf("%d rows computed with every row kept", u.computed)
	}
}

// rowsText shows rows by pc, their errors by their text.
func rowsText(rows map[uint64]*row) string {
	var b bytes.Buffer
	for _, pc := range slices.Sorted(maps.Keys(rows)) {
		r := *rows[pc]
		msg := ""
		if r.err != nil {
			msg = r.err.Error()
		}
		r.err = nil
		fmt.Fprintf(&b, "%#x: %+v err %q\n", pc, r, msg)
	}
	return b.String()
}

// TestDecodeRows: encodeRows' data decodes to what was encoded; damaged
// data is refused or decodes to rows that encode again to it, never a
// panic; and data breaking one of the decoder's rules is refused.
func TestDecodeRows(t *testing.T) {
	rows := map[uint64]*row{
		0x10: {fde: true, cfa: rule{set: true, kind: 7, reg: 7, off: 16}, ra: 16},
		0x20: {fde: true, err: fmt.Errorf("unexpected opcode"), ra: 16},
		0x30: {},
	}
	rows[0x10].regs[16] = rule{set: true, kind: 1, off: -8}
	rows[0x10].regs[3] = rule{set: true, kind: 5, expr: []byte{0x77, 0x08}}
	src := [5]uint64{1, 2, 3, 4, 5}
	b := encodeRows(rows, src, true)
	got, ok := decodeRows(b, src, true)
	if !ok || rowsText(got) != rowsText(rows) {
		t.Fatalf("decoded %v:\n%s\nwant\n%s", ok, rowsText(got), rowsText(rows))
	}
	// Made with another debug file, with one where there is none now, or
	// without one where there is one now: refused.
	for _, c := range []struct {
		b      []byte
		src    [5]uint64
		hasSrc bool
	}{
		{b, [5]uint64{1, 2, 3, 4, 6}, true},
		{b, [5]uint64{}, false},
		{encodeRows(rows, [5]uint64{}, false), src, true},
	} {
		if rs, ok := decodeRows(c.b, c.src, c.hasSrc); ok {
			t.Errorf("debug file %v (%v): decoded %v", c.src, c.hasSrc, rs)
		}
	}
	rng := rand.New(rand.NewPCG(4, 4))
	for range 20000 {
		d := bytes.Clone(b)
		for range 1 + rng.IntN(3) {
			d[rng.IntN(len(d))] = byte(rng.IntN(256))
		}
		if rng.IntN(4) == 0 {
			d = d[:rng.IntN(len(d))]
		}
		if rs, ok := decodeRows(d, src, true); ok && !bytes.Equal(encodeRows(rs, src, true), d) {
			t.Fatalf("%x decoded to %v, which encodes to %x", d, rs, encodeRows(rs, src, true))
		}
	}
	bad := func(edit func(map[uint64]*row)) []byte {
		rs := map[uint64]*row{0x10: {fde: true, cfa: rule{set: true, kind: 7, reg: 7, off: 16}, ra: 16}}
		edit(rs)
		return encodeRows(rs, [5]uint64{}, false)
	}
	if _, ok := decodeRows([]byte{0, 1, 0x10, 0, 0, 0, 0, 0, 16, 1, 5, 2, 0, 0, 0}, [5]uint64{}, false); !ok {
		t.Fatal("the rows the cases below break are refused whole")
	}
	for name, d := range map[string][]byte{
		"a rule kind delve does not give": bad(func(rs map[uint64]*row) { rs[0x10].cfa.kind = maxRule + 1 }),
		"an expression too long":          bad(func(rs map[uint64]*row) { rs[0x10].cfa.expr = make([]byte, maxExprBytes+1) }),
		"bytes after the rows":            append(encodeRows(rows, [5]uint64{}, false), 0),
		"too many rows": func() []byte {
			many := map[uint64]*row{}
			for pc := range uint64(maxKeptRows + 1) {
				many[pc+1] = &row{}
			}
			return encodeRows(many, [5]uint64{}, false)
		}(),
		// No debug file; one row: pc 0x10, no flags, no CFA rule,
		// return address column 16, one register rule, for register
		// NumRegs.
		"a register past NumRegs": {0, 1, 0x10, 0, 0, 0, 0, 0, 16, 1, NumRegs, 2, 0, 0, 0},
		"registers out of order":  {0, 1, 0x10, 0, 0, 0, 0, 0, 16, 2, 5, 2, 0, 0, 0, 4, 2, 0, 0, 0},
		"pcs out of order":        {0, 2, 0x20, 0, 0, 0, 0, 0, 16, 0, 0x10, 0, 0, 0, 0, 0, 16, 0},
	} {
		if rs, ok := decodeRows(d, [5]uint64{}, false); ok {
			t.Errorf("%s: decoded %d rows", name, len(rs))
		}
	}
}

// TestKeepableRows: past maxKeptRows, the rows a run used are kept first;
// a row decodeRows would refuse is never kept.
func TestKeepableRows(t *testing.T) {
	ir := &imageRows{rows: map[uint64]*row{}, fresh: map[uint64]bool{}, used: map[uint64]bool{}}
	n := uint64(maxKeptRows + 100)
	for pc := uint64(1); pc <= n; pc++ {
		ir.rows[pc] = &row{fde: true}
		if pc > n-200 {
			ir.used[pc] = true
		}
	}
	long := &row{fde: true, cfa: rule{set: true, kind: 7, expr: make([]byte, maxExprBytes+1)}}
	ir.rows[n+1], ir.used[n+1] = long, true
	got := ir.keepable()
	if len(got) != maxKeptRows {
		t.Fatalf("%d rows kept; want %d", len(got), maxKeptRows)
	}
	for pc := n - 199; pc <= n; pc++ {
		if got[pc] == nil {
			t.Fatalf("row %d, used by the run, not kept", pc)
		}
	}
	if got[n+1] != nil {
		t.Fatal("a row with an expression too long kept")
	}
}
