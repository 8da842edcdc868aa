package unwind

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/go-delve/delve/pkg/dwarf/frame"
	"github.com/go-delve/delve/pkg/dwarf/op"
	"github.com/go-delve/delve/pkg/dwarf/regnum"

	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// frameEntries are the frame description entries of one image, sorted by
// link-time start address.
type frameEntries = frame.FrameDescriptionEntries

// maxRows bounds the per-pc rule cache of an Unwinder; when it is full it
// is emptied.
const maxRows = 1 << 16

// rowKey names the unwind rules of one link-time pc of one image (an
// *elf.Image or a *memImage).
type rowKey struct {
	src any
	pc  uint64
}

// cieKey names a CIE.
type cieKey = *frame.CommonInformationEntry

// rule is one column of a CFI row, copied out of delve's FrameContext.
type rule struct {
	set  bool // false: no rule (the register keeps its value)
	kind frame.Rule
	off  int64
	reg  uint64
	expr []byte
}

// row is what the call frame information says at one pc.
type row struct {
	fde  bool  // an FDE covers the pc; false: fall back to the frame pointer
	err  error // executing the CFI program failed
	cfa  rule
	regs [NumRegs]rule
	ra   uint64 // the return address column
}

// cieInit holds the rules a CIE's initial instructions set up.
type cieInit struct {
	regs map[uint64]rule
}

func toRule(r frame.DWRule) rule {
	return rule{set: true, kind: r.Rule, off: r.Offset, reg: r.Reg, expr: r.Expression}
}

// protect runs f, turning a panic (delve's CFI interpreter panics on some
// truncated programs) into an error.
func protect(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed call frame information: %v", r)
		}
	}()
	return f()
}

// rowAt returns the row of the link-time pc of the image src (an
// *elf.Image or a *memImage): from the Unwinder's rows, the image's rows
// (kept by an earlier run, or computed by another Unwinder), or computed
// now from its entries (fdesOf).
func (u *Unwinder) rowAt(src any, pc uint64) *row {
	key := rowKey{src, pc}
	u.mu.Lock()
	r := u.rows[key]
	u.mu.Unlock()
	if r != nil {
		return r
	}
	var ir *imageRows
	if im, ok := src.(*elf.Image); ok && im != nil {
		ir = rowsOf(im)
		var kept bool
		r, kept = ir.get(pc)
		if r != nil && !kept {
			// Computed in this run by another Unwinder: this one
			// warns too of what the parse found.
			u.fdesOf(src)
		}
	}
	if r == nil {
		r = u.computeRow(u.fdesOf(src), pc)
		if ir != nil {
			ir.add(pc, r)
		}
		u.mu.Lock()
		u.computed++
		u.mu.Unlock()
	}
	u.mu.Lock()
	if len(u.rows) >= maxRows {
		clear(u.rows)
	}
	u.rows[key] = r
	u.mu.Unlock()
	return r
}

// fdesOf returns the entries of the image src: a module's image's,
// parsed on first use (a problem found is warned about), or an in-memory
// image's.
func (u *Unwinder) fdesOf(src any) frameEntries {
	switch s := src.(type) {
	case *elf.Image:
		if s == nil {
			return nil
		}
		fdes, err := s.FrameEntries()
		if err != nil {
			u.warn(err.Error())
		}
		return fdes
	case *memImage:
		return s.fdes
	}
	return nil
}

func (u *Unwinder) computeRow(fdes frameEntries, pc uint64) *row {
	fde := elf.FindFDE(fdes, pc)
	if fde == nil || fde.CIE == nil {
		return &row{}
	}
	r := &row{fde: true}
	var ctx *frame.FrameContext
	if err := protect(func() error {
		var err error
		ctx, err = fde.EstablishFrame(pc)
		return err
	}); err != nil {
		r.err = err
		return r
	}
	if ctx == nil {
		r.err = errors.New("no CFI row")
		return r
	}
	r.cfa = toRule(ctx.CFA)
	r.ra = ctx.RetAddrReg
	for n, rl := range ctx.Regs {
		if n < NumRegs {
			r.regs[n] = toRule(rl)
		}
	}
	// delve's interpreter turns DW_CFA_restore into "undefined" when
	// restoring a register the CIE gave no rule (it does not record the
	// CIE's rules for restore at all). A register other than the return
	// address is therefore given back the CIE's rule, or no rule (its
	// value is kept), as restore means.
	init := u.cieRules(fde.CIE)
	for n := range uint64(NumRegs) {
		if n == r.ra || !r.regs[n].set || r.regs[n].kind != frame.RuleUndefined {
			continue
		}
		if ir, ok := init.regs[n]; ok && ir.kind != frame.RuleUndefined {
			r.regs[n] = ir
		} else {
			r.regs[n] = rule{}
		}
	}
	return r
}

// cieRules returns the register rules the CIE's initial instructions set.
func (u *Unwinder) cieRules(cie *frame.CommonInformationEntry) *cieInit {
	u.mu.Lock()
	ci := u.cies[cie]
	u.mu.Unlock()
	if ci != nil {
		return ci
	}
	ci = &cieInit{regs: map[uint64]rule{}}
	var ctx *frame.FrameContext
	if protect(func() error {
		var err error
		// An entry covering nothing executes only the CIE's
		// instructions.
		ctx, err = (&frame.FrameDescriptionEntry{CIE: cie}).EstablishFrame(0)
		return err
	}) == nil && ctx != nil {
		for n, rl := range ctx.Regs {
			if n < NumRegs {
				ci.regs[n] = toRule(rl)
			}
		}
	}
	u.mu.Lock()
	u.cies[cie] = ci
	u.mu.Unlock()
	return ci
}

// cfiCaller finds the caller of f with the call frame information of the
// image src (an *elf.Image or a *memImage) loaded with bias. It returns ok false with a zero Stop
// when no entry covers the pc (the caller should try the frame pointer).
func (u *Unwinder) cfiCaller(f *Frame, bias uint64, src any, name string) (Frame, Stop, bool) {
	lpc := f.LookupPC()
	if lpc < bias {
		return Frame{}, Stop{}, false
	}
	r := u.rowAt(src, lpc-bias)
	if !r.fde {
		return Frame{}, Stop{}, false
	}
	// where and what describe the rule for messages; they are built
	// only when a walk ends.
	where := func() string { return fmt.Sprintf("pc %#x (%s+%#x)", lpc, name, lpc-bias) }
	if r.err != nil {
		return Frame{}, Stop{Reason: ReasonBadCFI, Detail: where(), Err: r.err}, false
	}
	if r.ra >= NumRegs {
		return Frame{}, Stop{Reason: ReasonBadCFI, Detail: fmt.Sprintf("%s: return address column %d", where(), r.ra)}, false
	}

	var cfa uint64
	switch r.cfa.kind {
	case frame.RuleCFA:
		base, ok := f.regs.get(r.cfa.reg)
		if !ok {
			return Frame{}, Stop{Reason: ReasonBadCFI, Detail: fmt.Sprintf("%s: the CFA is based on register %d, which is unknown", where(), r.cfa.reg)}, false
		}
		cfa = base + uint64(r.cfa.off)
	case frame.RuleExpression:
		v, stop, ok := u.eval(f, r.cfa.expr, 0, false, func() string { return where() + ": CFA expression" })
		if !ok {
			return Frame{}, stop, false
		}
		cfa = v
	default:
		return Frame{}, Stop{Reason: ReasonBadCFI, Detail: fmt.Sprintf("%s: unsupported CFA rule %d", where(), r.cfa.kind)}, false
	}
	f.CFA = cfa

	if ra := r.regs[r.ra]; !ra.set || ra.kind == frame.RuleUndefined {
		return Frame{}, Stop{Reason: ReasonOutermost, Detail: fmt.Sprintf("the CFI at %s leaves the return address undefined", where())}, false
	}

	buf, _ := u.spans.Get().(*[maxSavedSpan]byte)
	if buf == nil {
		buf = new([maxSavedSpan]byte)
	}
	defer u.spans.Put(buf)
	saved := u.readSaved(r, cfa, buf)
	caller := Frame{How: MethodCFI, regs: f.regs}
	// By definition of the CFA on x86-64, the caller's rsp.
	caller.regs.set(regnum.AMD64_Rsp, cfa)
	for n := range uint64(NumRegs) {
		rl := r.regs[n]
		if !rl.set {
			continue
		}
		isRA := n == r.ra
		what := func() string {
			if isRA {
				return where() + ": the return address"
			}
			return fmt.Sprintf("%s: register %d", where(), n)
		}
		switch rl.kind {
		case frame.RuleUndefined:
			caller.regs.forget(n)
		case frame.RuleSameVal:
			if v, ok := f.regs.get(n); ok {
				caller.regs.set(n, v)
			} else {
				caller.regs.forget(n)
			}
		case frame.RuleOffset:
			addr := cfa + uint64(rl.off)
			v, err := saved.read(u.t, addr)
			if err != nil {
				if isRA {
					return Frame{}, Stop{Reason: ReasonUnreadable, Addr: addr, Detail: fmt.Sprintf("reading the return address at %#x", addr), Err: err}, false
				}
				caller.regs.forget(n)
				continue
			}
			caller.regs.set(n, v)
		case frame.RuleValOffset:
			caller.regs.set(n, cfa+uint64(rl.off))
		case frame.RuleRegister:
			if v, ok := f.regs.get(rl.reg); ok {
				caller.regs.set(n, v)
			} else if isRA {
				return Frame{}, Stop{Reason: ReasonBadCFI, Detail: fmt.Sprintf("%s is in register %d, which is unknown", what(), rl.reg)}, false
			} else {
				caller.regs.forget(n)
			}
		case frame.RuleExpression, frame.RuleValExpression:
			v, stop, ok := u.eval(f, rl.expr, cfa, true, what)
			if ok && rl.kind == frame.RuleExpression {
				addr := v
				var err error
				v, err = target.ReadUint64(u.t, addr)
				if err != nil {
					ok = false
					stop = Stop{Reason: ReasonUnreadable, Addr: addr, Detail: fmt.Sprintf("reading %s at %#x", what(), addr), Err: err}
				}
			}
			if !ok {
				if isRA {
					return Frame{}, stop, false
				}
				caller.regs.forget(n)
				continue
			}
			caller.regs.set(n, v)
		default:
			// Rules delve uses internally only; not produced by
			// parsing.
			if isRA {
				return Frame{}, Stop{Reason: ReasonBadCFI, Detail: fmt.Sprintf("%s: unsupported rule %d", what(), rl.kind)}, false
			}
			caller.regs.forget(n)
		}
	}
	if r.ra != regnum.AMD64_Rip {
		v, ok := caller.regs.get(r.ra)
		if !ok {
			return Frame{}, Stop{Reason: ReasonBadCFI, Detail: where() + ": the return address is unknown"}, false
		}
		caller.regs.set(regnum.AMD64_Rip, v)
	}
	return caller, Stop{}, true
}

// maxExprBytes bounds a DWARF expression that is evaluated.
const maxExprBytes = 1 << 12

// eval evaluates a DWARF expression of a CFI rule in frame f. With
// pushCFA, cfa is pushed first (as for DW_CFA_expression and
// DW_CFA_val_expression).
func (u *Unwinder) eval(f *Frame, expr []byte, cfa uint64, pushCFA bool, what func() string) (uint64, Stop, bool) {
	if len(expr) == 0 || len(expr) > maxExprBytes {
		return 0, Stop{Reason: ReasonBadCFI, Detail: fmt.Sprintf("%s: expression of %d bytes", what(), len(expr))}, false
	}
	prog := expr
	if pushCFA {
		prog = append([]byte{byte(op.DW_OP_call_frame_cfa)}, expr...)
	}
	list := make([]*op.DwarfRegister, NumRegs)
	for n := range uint64(NumRegs) {
		if v, ok := f.regs.get(n); ok {
			list[n] = op.DwarfRegisterFromUint64(v)
		}
	}
	regs := op.NewDwarfRegisters(0, list, binary.LittleEndian, regnum.AMD64_Rip, regnum.AMD64_Rsp, regnum.AMD64_Rbp, 0)
	regs.CFA = int64(cfa)
	var badAddr uint64
	var readErr error
	read := func(buf []byte, addr uint64) (int, error) {
		if err := u.t.ReadMemory(addr, buf); err != nil {
			badAddr, readErr = addr, err
			return 0, err
		}
		return len(buf), nil
	}
	var v int64
	var pieces []op.Piece
	err := protect(func() error {
		var err error
		v, pieces, err = op.ExecuteStackProgram(*regs, prog, 8, read)
		return err
	})
	if err == nil && pieces != nil && !(len(pieces) == 1 && pieces[0].Kind == op.RegPiece) {
		err = errors.New("the expression describes a composite location")
	}
	if err != nil {
		if readErr != nil {
			return 0, Stop{Reason: ReasonUnreadable, Addr: badAddr, Detail: fmt.Sprintf("%s: reading %#x", what(), badAddr), Err: readErr}, false
		}
		return 0, Stop{Reason: ReasonBadCFI, Detail: what(), Err: err}, false
	}
	return uint64(v), Stop{}, true
}

// maxSavedSpan bounds the stack span read at once for the registers a
// frame saved.
const maxSavedSpan = 512

// savedArea is the stack span holding the registers a frame saved at
// CFA-relative offsets, read with one ReadMemory (nil data: not read).
type savedArea struct {
	lo   uint64
	data []byte
}

// read returns the word at addr, from the area when it holds it.
func (a *savedArea) read(t target.Target, addr uint64) (uint64, error) {
	if a.data != nil && addr >= a.lo && addr-a.lo <= uint64(len(a.data))-8 {
		return binary.LittleEndian.Uint64(a.data[addr-a.lo:]), nil
	}
	return target.ReadUint64(t, addr)
}

// readSaved reads, in one go, the span of the stack where the row's
// offset rules say registers are saved, into buf. Any problem leaves the
// area empty and each register is then read alone (and its error
// reported).
func (u *Unwinder) readSaved(r *row, cfa uint64, buf *[maxSavedSpan]byte) savedArea {
	lo, hi, found := int64(0), int64(0), false
	for n := range uint64(NumRegs) {
		if rl := r.regs[n]; rl.set && rl.kind == frame.RuleOffset {
			if !found || rl.off < lo {
				lo = rl.off
			}
			if !found || rl.off+8 > hi {
				hi = rl.off + 8
			}
			found = true
		}
	}
	if !found || hi-lo > maxSavedSpan {
		return savedArea{}
	}
	start := cfa + uint64(lo)
	if start+uint64(hi-lo) < start {
		return savedArea{}
	}
	data := buf[:hi-lo]
	if u.t.ReadMemory(start, data) != nil {
		return savedArea{}
	}
	return savedArea{lo: start, data: data}
}
