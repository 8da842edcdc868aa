package unwind

import (
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/go-delve/delve/pkg/dwarf/frame"

	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// An image's rows (what its call frame information says at the pcs walks
// met) are kept across runs with the image (elf.Image.KeepData): a warm
// run finds them before the target is stopped, and parses the image's
// call frame information only for a pc none of them answers (the C
// library's takes about 10 ms). A row depends on the image's file, which
// KeepData's key names, and on the separate debug file whose .debug_frame
// the image's entries include, which the entry names (FrameSource).

// keptRowsName names the kept rows (elf.Image.KeepData); its digit is the
// encoding's version.
const keptRowsName = "unwind_rows1"

// maxKeptRows bounds the rows kept for one image; past it, the rows a run
// did not use make room for those it computed.
const maxKeptRows = 4096

// rowsKey keys an image's rows (elf.Image.Derived).
type rowsKey struct{}

// imageRows are the rows of one image's link-time pcs: those kept by an
// earlier run, and those computed in this one.
type imageRows struct {
	mu     sync.Mutex
	src    [5]uint64 // the image's FrameSource, zero when it has none
	hasSrc bool
	rows   map[uint64]*row
	fresh  map[uint64]bool // the rows computed in this run
	used   map[uint64]bool // the rows this run asked for
	loaded bool            // an earlier run's rows were read
	added  bool            // rows were computed in this run
}

// rowsOf returns im's rows, reading those kept on first use.
func rowsOf(im *elf.Image) *imageRows {
	return im.Derived(rowsKey{}, func() any {
		ir := &imageRows{rows: map[uint64]*row{}, fresh: map[uint64]bool{}, used: map[uint64]bool{}}
		ir.src, ir.hasSrc = im.FrameSource()
		if b := im.KeptData(keptRowsName); b != nil {
			if rows, ok := decodeRows(b, ir.src, ir.hasSrc); ok {
				ir.rows, ir.loaded = rows, true
			}
		}
		return ir
	}).(*imageRows)
}

// get returns the row of pc, and whether it was kept by an earlier run
// (not computed in this one).
func (ir *imageRows) get(pc uint64) (r *row, kept bool) {
	ir.mu.Lock()
	defer ir.mu.Unlock()
	r = ir.rows[pc]
	if r != nil {
		ir.used[pc] = true
	}
	return r, r != nil && !ir.fresh[pc]
}

func (ir *imageRows) add(pc uint64, r *row) {
	ir.mu.Lock()
	defer ir.mu.Unlock()
	if _, ok := ir.rows[pc]; !ok {
		ir.rows[pc] = r
		ir.fresh[pc] = true
		ir.used[pc] = true
		ir.added = true
	}
}

// keepable returns the rows to keep: at most maxKeptRows, those this run
// used first, and none that decodeRows would refuse. ir.mu is held.
func (ir *imageRows) keepable() map[uint64]*row {
	out := make(map[uint64]*row, min(len(ir.rows), maxKeptRows))
	for _, usedOnly := range []bool{true, false} {
		for _, pc := range slices.Sorted(maps.Keys(ir.rows)) {
			if len(out) == maxKeptRows {
				return out
			}
			if r := ir.rows[pc]; ir.used[pc] == usedOnly && keepableRow(r) {
				out[pc] = r
			}
		}
	}
	return out
}

// keepableRow reports whether decodeRows would read r back.
func keepableRow(r *row) bool {
	if r.err != nil && len(r.err.Error()) > maxRowError {
		return false
	}
	if len(r.cfa.expr) > maxExprBytes || uint64(r.cfa.kind) > uint64(maxRule) {
		return false
	}
	for _, rl := range r.regs {
		if len(rl.expr) > maxExprBytes || uint64(rl.kind) > uint64(maxRule) {
			return false
		}
	}
	return true
}

// PrepareRows reads, before a target is stopped, the rows an earlier run
// kept for im (KeepRows), and reports whether there were: a walk then
// needs im's call frame information only at a pc they do not answer, and
// parses it then (while the target is held, if it is: the bet is that a
// warm run meets the pcs an earlier one did).
func PrepareRows(im *elf.Image) bool {
	if im == nil {
		return false
	}
	ir := rowsOf(im)
	ir.mu.Lock()
	defer ir.mu.Unlock()
	return ir.loaded
}

// KeepRows keeps for later runs the rows walks computed for im, with those
// kept before, when some were computed and im's call frame information
// parsed without error. Call it once no walk runs any more (it writes a
// file): after the target is released.
func KeepRows(im *elf.Image) {
	if im == nil {
		return
	}
	ir := rowsOf(im)
	ir.mu.Lock()
	if !ir.added {
		ir.mu.Unlock()
		return
	}
	ir.added = false
	b := encodeRows(ir.keepable(), ir.src, ir.hasSrc)
	ir.mu.Unlock()
	// Rows were computed, so the information was parsed: this returns
	// at once.
	if _, err := im.FrameEntries(); err != nil {
		return
	}
	im.KeepData(keptRowsName, b)
}

// Row flags in the encoding.
const (
	rowFlagFDE = 1 << iota
	rowFlagErr
)

// maxRule is the largest frame.Rule a kept row may hold.
const maxRule = frame.RuleFramePointer

// encodeRows serializes rows: whether the image's entries include a
// separate debug file's, and that file's identity (FrameSource), then
// their count, then by pc each pc, its flags,
// its error's text (with rowFlagErr), its CFA rule, its return address
// column, and its register rules (a count, then each register's number
// and rule). A rule is its kind plus one (0: no rule), offset, register
// and expression. Numbers are LEB128 (the offset signed).
func encodeRows(rows map[uint64]*row, src [5]uint64, hasSrc bool) []byte {
	var w elf.KeptWriter
	w.Flag(hasSrc)
	if hasSrc {
		for _, v := range src {
			w.Uint(v)
		}
	}
	w.Uint(uint64(len(rows)))
	for _, pc := range slices.Sorted(maps.Keys(rows)) {
		r := rows[pc]
		w.Uint(pc)
		var flags uint64
		if r.fde {
			flags |= rowFlagFDE
		}
		if r.err != nil {
			flags |= rowFlagErr
		}
		w.Uint(flags)
		if r.err != nil {
			w.Str(r.err.Error())
		}
		writeRule(&w, r.cfa)
		w.Uint(r.ra)
		set := 0
		for _, rl := range r.regs {
			if rl.set {
				set++
			}
		}
		w.Uint(uint64(set))
		for n, rl := range r.regs {
			if rl.set {
				w.Uint(uint64(n))
				writeRule(&w, rl)
			}
		}
	}
	return w.Data()
}

func writeRule(w *elf.KeptWriter, rl rule) {
	kind := uint64(0)
	if rl.set {
		kind = uint64(rl.kind) + 1
	}
	w.Uint(kind)
	w.Int(rl.off)
	w.Uint(rl.reg)
	w.Bytes(rl.expr)
}

// readRule reads what writeRule wrote.
func readRule(r *elf.KeptReader) rule {
	kind := r.Uint()
	if kind > uint64(maxRule)+1 {
		r.Fail()
	}
	rl := rule{off: r.Int(), reg: r.Uint()}
	rl.expr = r.Bytes(maxExprBytes)
	if len(rl.expr) == 0 {
		rl.expr = nil
	}
	if kind > 0 {
		rl.set, rl.kind = true, frame.Rule(kind-1)
	} else if rl.off != 0 || rl.reg != 0 || rl.expr != nil {
		r.Fail() // a rule that is not set has nothing else
	}
	return rl
}

// maxRowError bounds the text of a kept row's error.
const maxRowError = 1024

// decodeRows reads what encodeRows wrote; ok is false for data made with
// another debug file than src (or with one, when hasSrc is false), or that
// does not parse whole, holds more than maxKeptRows rows, a rule kind
// delve does not give, a register number past NumRegs, an expression
// longer than maxExprBytes, or rows out of order.
func decodeRows(b []byte, src [5]uint64, hasSrc bool) (map[uint64]*row, bool) {
	r := elf.NewKeptReader(b)
	if r.Flag() != hasSrc || r.Bad() {
		return nil, false
	}
	if hasSrc {
		for _, v := range src {
			if r.Uint() != v || r.Bad() {
				return nil, false
			}
		}
	}
	n := r.Count()
	if r.Bad() || n > maxKeptRows {
		return nil, false
	}
	rows := make(map[uint64]*row, n)
	var last uint64
	for i := range n {
		pc := r.Uint()
		if i > 0 && pc <= last {
			return nil, false
		}
		last = pc
		flags := r.Uint()
		if flags&^(rowFlagFDE|rowFlagErr) != 0 {
			return nil, false
		}
		rw := &row{fde: flags&rowFlagFDE != 0}
		if flags&rowFlagErr != 0 {
			rw.err = errors.New(string(r.Bytes(maxRowError)))
		}
		rw.cfa = readRule(r)
		rw.ra = r.Uint()
		set := r.Uint()
		if set > NumRegs {
			return nil, false
		}
		prev := -1
		for range set {
			reg := r.Uint()
			if r.Bad() || reg >= NumRegs || int(reg) <= prev {
				return nil, false
			}
			prev = int(reg)
			rw.regs[reg] = readRule(r)
			if !rw.regs[reg].set {
				return nil, false
			}
		}
		if r.Bad() {
			return nil, false
		}
		rows[pc] = rw
	}
	if !r.Done() {
		return nil, false
	}
	return rows, true
}
