package elf

import (
	"debug/dwarf"
	"encoding/binary"
	"fmt"
	"sort"
)

// Call sites (DWARF 5 §3.4: DW_TAG_call_site; DWARF 4's GNU extension:
// DW_TAG_GNU_call_site) say, for a call instruction, where it returns to
// and which function it calls. A call that is a function's last action
// can be a jump (a tail call): the function's frame is gone when the
// callee runs, and no return address on the stack names it. TailCalls
// rebuilds such functions from the call sites, as gdb does with its tail
// call frames.

// MaxCallSites is the largest number of call-site entries indexed. An
// image that has more gets an error (see DebugInfo) and TailCalls finds
// no tail calls in it.
const MaxCallSites = 1 << 23

// maxCallSites is MaxCallSites; a test lowers it.
var maxCallSites = MaxCallSites

// MaxTailCallChain is the longest chain of tail calls TailCalls returns.
const MaxTailCallChain = 8

// Bounds on the search of TailCalls: how many functions and tail call
// sites it looks at. A search that would need more finds nothing.
const (
	maxTailSearchFuncs = 256
	maxTailSearchSites = 4096
)

// maxSameReturnPC bounds how many call sites with one return pc callAt
// compares (one call instruction has one; only malformed DWARF has many).
const maxSameReturnPC = 16

// DWARF 4 GNU extension codes debug/dwarf has no names for.
const (
	tagGNUCallSite          dwarf.Tag  = 0x4109
	attrGNUCallSiteTarget   dwarf.Attr = 0x2113
	attrGNUTailCall         dwarf.Attr = 0x2115
	attrMIPSLinkageName     dwarf.Attr = 0x2007 // DW_AT_MIPS_linkage_name, DWARF 4's linkage name
	opAddr                  byte       = 0x03   // DW_OP_addr
	callTargetExprAddrBytes            = 9      // DW_OP_addr and an 8-byte address
)

// TailCallFrame is a function that called the next frame's function by a
// tail call (a jump), between a frame and its caller: the function the
// caller's call instruction called, or one it jumped to.
type TailCallFrame struct {
	// PC is the link-time address right after the function's jump
	// instruction (the call site's DW_AT_call_return_pc), as gdb shows
	// the pc of a tail call frame. Look it up, like a return address,
	// at PC-1.
	PC uint64
	// Function is the name of the function (FuncAt(PC-1)); File and
	// Line are the source position of the jump (LineAt(PC-1)), "" and 0
	// when unknown.
	Function string
	File     string
	Line     int
}

// Status of a call site's target.
const (
	targetUnknown  uint8 = iota // no target, or one that cannot be told without running
	targetResolved              // the function at entry address target
	targetOutside               // a function this image does not define
)

// callSite is an indexed call site with its target resolved.
type callSite struct {
	ret    uint64 // the return pc (the address after the call or jump)
	target uint64 // entry address of the called function (targetResolved)
	from   uint64 // entry address of the function that holds the call
	fn     int32  // funcs index of the function that holds the call
	status uint8
	hasRet bool
	tail   bool
}

// rawSite is a call site as read, before its target is resolved.
type rawSite struct {
	ret    uint64
	fn     int32
	hasRet bool
	tail   bool
	// byDIE: target is the offset of the DW_TAG_subprogram called;
	// else byAddr: target is an address; else the target is unknown.
	byDIE, byAddr bool
	target        uint64
}

// callSite records a DW_TAG_call_site or DW_TAG_GNU_call_site found in
// scope cur.
func (w *walker) callSite(e *dwarf.Entry, cur scope) {
	if w.sitesIncomplete {
		return
	}
	if cur.fn < 0 {
		if w.deep > 0 {
			// Too deep to know its function: the index would miss
			// a call site.
			w.sitesIncomplete = true
		}
		return // in an abstract instance: no code
	}
	gnu := e.Tag == tagGNUCallSite
	s := rawSite{fn: cur.fn}
	retAttr := dwarf.AttrCallReturnPC
	if gnu {
		retAttr = dwarf.AttrLowpc
	}
	if r, ok := e.Val(retAttr).(uint64); ok {
		if r == 0 || !w.valid(r-1) {
			return // code the linker discarded
		}
		s.ret, s.hasRet = r, true
	}
	s.tail, _ = e.Val(dwarf.AttrCallTailCall).(bool)
	if t, ok := e.Val(attrGNUTailCall).(bool); ok && t {
		s.tail = true
	}
	if !s.hasRet && !s.tail {
		// A call that returns somewhere unknown: no caller's frame
		// can be matched with it.
		return
	}
	if o, ok := e.Val(dwarf.AttrCallOrigin).(dwarf.Offset); ok {
		s.byDIE, s.target = true, uint64(o)
	} else if o, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset); ok {
		s.byDIE, s.target = true, uint64(o)
	} else if a, ok := constantTarget(e, w.line.order); ok {
		s.byAddr, s.target = true, a
	}
	if w.base.sites+len(w.sites) >= maxCallSites {
		w.sitesIncomplete = true
		w.sites = nil
		w.errs = append(w.errs, fmt.Errorf("more than %d call sites (limit MaxCallSites)", maxCallSites))
		return
	}
	w.sites = append(w.sites, s)
}

// constantTarget returns the address of a call site's DW_AT_call_target
// (DW_AT_GNU_call_site_target) when it is a constant: a DW_OP_addr
// expression. Any other expression depends on the registers of the
// caller.
func constantTarget(e *dwarf.Entry, order binary.ByteOrder) (uint64, bool) {
	for _, a := range []dwarf.Attr{dwarf.AttrCallTarget, attrGNUCallSiteTarget} {
		b, ok := e.Val(a).([]byte)
		if !ok {
			continue
		}
		if len(b) == callTargetExprAddrBytes && b[0] == opAddr {
			return order.Uint64(b[1:]), true
		}
		return 0, false
	}
	return 0, false
}

// finishCallSites resolves the targets of the call sites read and
// indexes them: idx.sites by return pc, idx.tails by the function that
// holds them. sym finds a function symbol of the image by name.
func (w *walker) finishCallSites(sym func(string) (uint64, bool)) {
	idx := w.idx
	if w.sitesIncomplete {
		idx.callsIncomplete = true
		return
	}
	r := &targetResolver{w: w, sym: sym, memo: make(map[dwarf.Offset]resolved)}
	r.prepare()
	for _, s := range w.sites {
		if s.fn < 0 || int(s.fn) >= len(idx.funcs) {
			continue
		}
		cs := callSite{ret: s.ret, hasRet: s.hasRet, tail: s.tail, fn: s.fn, from: idx.funcs[s.fn].entry}
		switch {
		case s.byDIE:
			res := r.die(dwarf.Offset(s.target))
			cs.status, cs.target = res.status, res.entry
		case s.byAddr && w.valid(s.target):
			cs.status, cs.target = targetResolved, s.target
		case s.byAddr:
			cs.status = targetOutside
		default:
			cs.status = targetUnknown
		}
		if cs.hasRet && !cs.tail {
			idx.sites = append(idx.sites, cs)
		}
		if cs.tail {
			idx.tails = append(idx.tails, cs)
		}
	}
	sort.Slice(idx.sites, func(i, j int) bool { return idx.sites[i].ret < idx.sites[j].ret })
	sortTails(idx.tails)
}

// sortTails sorts tail call sites by the function that holds them, then
// by return pc.
func sortTails(tails []callSite) {
	sort.Slice(tails, func(i, j int) bool {
		a, b := tails[i], tails[j]
		if a.from != b.from {
			return a.from < b.from
		}
		return a.ret < b.ret
	})
}

// resolved is a call-site target DIE's resolution.
type resolved struct {
	entry  uint64
	status uint8
}

// targetResolver resolves the DW_TAG_subprogram entries call sites name
// to the entry addresses of functions.
type targetResolver struct {
	w    *walker
	sym  func(string) (uint64, bool)
	memo map[dwarf.Offset]resolved
	// instances maps a subprogram entry without code that some call
	// site names to the entries of the concrete subprograms that refer
	// to it (through DW_AT_abstract_origin or DW_AT_specification).
	instances map[dwarf.Offset][]uint64
	// byName maps a symbol name that some call site's target (without
	// code and without instances) has to the entries of the external
	// concrete subprograms of that name.
	byName map[string][]uint64
}

// prepare fills instances and byName for the targets the call sites
// name, in one pass over the concrete subprograms each.
func (r *targetResolver) prepare() {
	w, idx := r.w, r.w.idx
	r.instances = make(map[dwarf.Offset][]uint64)
	for _, s := range w.sites {
		if !s.byDIE {
			continue
		}
		if sub := w.subs[dwarf.Offset(s.target)]; sub != nil && sub.fn < 0 {
			r.instances[dwarf.Offset(s.target)] = nil
		}
	}
	if len(r.instances) == 0 {
		return
	}
	for i, off := range w.concrete {
		entry := idx.funcs[i].entry
		s := w.subs[off]
		for depth := 0; s != nil && s.hasOrigin && depth < maxOriginDepth; depth++ {
			if list, ok := r.instances[s.origin]; ok {
				r.instances[s.origin] = appendUnique(list, entry)
			}
			s = w.subs[s.origin]
		}
	}
	r.byName = make(map[string][]uint64)
	for off, list := range r.instances {
		if len(list) == 0 {
			if n, _ := r.w.symbolName(off); n != "" {
				r.byName[n] = nil
			}
		}
	}
	if len(r.byName) == 0 {
		return
	}
	for i, off := range w.concrete {
		n, ext := w.symbolName(off)
		if list, ok := r.byName[n]; ok && ext {
			r.byName[n] = appendUnique(list, idx.funcs[i].entry)
		}
	}
}

// die resolves the target named by the entry at off.
func (r *targetResolver) die(off dwarf.Offset) resolved {
	if res, ok := r.memo[off]; ok {
		return res
	}
	res := r.resolve(off)
	r.memo[off] = res
	return res
}

func (r *targetResolver) resolve(off dwarf.Offset) resolved {
	w := r.w
	s := w.subs[off]
	if s == nil {
		return resolved{status: targetUnknown} // not a subprogram
	}
	if s.fn >= 0 && int(s.fn) < len(w.idx.funcs) {
		return resolved{entry: w.idx.funcs[s.fn].entry, status: targetResolved}
	}
	// An abstract instance or a declaration: the one concrete instance
	// of it, else the one external definition of its symbol name.
	switch list := r.instances[off]; len(list) {
	case 0:
	case 1:
		return resolved{entry: list[0], status: targetResolved}
	default:
		return resolved{status: targetUnknown} // out-of-line copies (clones)
	}
	name, _ := w.symbolName(off)
	if name == "" {
		return resolved{status: targetUnknown}
	}
	switch list := r.byName[name]; len(list) {
	case 0:
	case 1:
		return resolved{entry: list[0], status: targetResolved}
	default:
		return resolved{status: targetUnknown}
	}
	if r.sym != nil {
		if a, ok := r.sym(name); ok && w.valid(a) {
			return resolved{entry: a, status: targetResolved}
		}
	}
	return resolved{status: targetOutside}
}

// symbolName returns the symbol name of the subprogram entry at off (its
// DW_AT_linkage_name, else its DW_AT_name, found along its origin and
// specification chain) and whether it is external.
func (w *walker) symbolName(off dwarf.Offset) (name string, external bool) {
	plain := ""
	for depth := 0; depth <= maxOriginDepth; depth++ {
		s := w.subs[off]
		if s == nil {
			break
		}
		external = external || s.external
		if name == "" {
			name = s.linkage
		}
		if plain == "" {
			plain = s.name
		}
		if !s.hasOrigin {
			break
		}
		off = s.origin
	}
	if name == "" {
		name = plain
	}
	return name, external
}

// appendUnique adds v to list unless it holds it. Only whether a list
// holds none, one or several addresses matters, so it stops at two.
func appendUnique(list []uint64, v uint64) []uint64 {
	if len(list) >= 2 {
		return list
	}
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}

// TailCalls returns the functions that tail calls left no frame of
// between a frame and its caller, innermost first: returnPC is the
// caller's return address and calleePC an address in the frame's
// function (its pc, or its return address minus one), both link-time
// addresses of this image. The caller's call site (the one whose return
// pc is returnPC) calls a function t; when t is not the frame's function
// f, t reached f by a chain of tail calls (call sites with
// DW_AT_call_tail_call) through zero or more other functions, and each
// function of that chain is returned with the pc after its jump.
//
// It returns nil unless exactly one chain of at most MaxTailCallChain
// jumps leads from t to f: when t is f, when the caller's call site or a
// jump on the way has no known target (an indirect call), when two
// chains (or a cycle) could lead there, when a jump of the chain has no
// return pc (clang's DW_AT_call_pc), when the search is too large, and
// when the image's call sites could not all be indexed. Calls into other
// images (through the PLT) are not followed.
func (im *Image) TailCalls(returnPC, calleePC uint64) []TailCallFrame {
	fc := im.frameCacheOf()
	if fc == nil {
		return im.tailCalls(returnPC, calleePC)
	}
	if t, ok := fc.lookupTails(returnPC, calleePC); ok {
		return t
	}
	t := im.tailCalls(returnPC, calleePC)
	fc.addTails(returnPC, calleePC, t)
	return t
}

// tailCalls is TailCalls without the cache.
func (im *Image) tailCalls(returnPC, calleePC uint64) []TailCallFrame {
	idx := im.indexAt(returnPC - 1)
	if idx == nil || idx.callsIncomplete {
		return nil
	}
	caller, ok := idx.callAt(returnPC)
	if !ok || caller.status != targetResolved {
		return nil
	}
	callee, ok := im.funcEntry(im.indexAt(calleePC), calleePC)
	if !ok || callee == caller.target {
		return nil
	}
	// Each function's tail calls are in the index of the unit that
	// holds it; an incomplete one could hide a chain.
	incomplete := false
	tailsFrom := func(fn uint64) []callSite {
		fi := im.indexAt(fn)
		if fi == nil {
			// No unit covers fn, or the one that does was left
			// out when a limit tripped: its jumps are not known.
			if dd := im.openDWARF(); dd != nil && dd.isExhausted() {
				incomplete = true
			}
			return nil
		}
		if fi.callsIncomplete {
			incomplete = true
		}
		return fi.tailsFrom(fn)
	}
	chain := tailChain(tailsFrom, caller.target, callee)
	if incomplete {
		return nil
	}
	if chain == nil {
		return nil
	}
	frames := make([]TailCallFrame, 0, len(chain))
	for i := len(chain) - 1; i >= 0; i-- {
		s := chain[i]
		if !s.hasRet {
			return nil
		}
		f := TailCallFrame{PC: s.ret}
		f.Function, _ = im.FuncAt(s.ret - 1)
		f.File, f.Line, _ = im.LineAt(s.ret - 1)
		frames = append(frames, f)
	}
	return frames
}

// callAt returns the call site (not a tail call) whose return pc is ret.
// Several with different targets are no answer.
func (idx *dwarfIndex) callAt(ret uint64) (callSite, bool) {
	i := sort.Search(len(idx.sites), func(i int) bool { return idx.sites[i].ret >= ret })
	if i >= len(idx.sites) || idx.sites[i].ret != ret {
		return callSite{}, false
	}
	s := idx.sites[i]
	for j := i + 1; j < len(idx.sites) && idx.sites[j].ret == ret; j++ {
		if o := idx.sites[j]; o.status != s.status || o.target != s.target || j-i >= maxSameReturnPC {
			return callSite{}, false
		}
	}
	return s, true
}

// funcEntry returns the entry address of the function that contains the
// link-time address pc: the DW_TAG_subprogram's, else the function
// symbol's.
func (im *Image) funcEntry(idx *dwarfIndex, pc uint64) (uint64, bool) {
	if idx != nil {
		if i, ok := findSpan(idx.spans, pc); ok && i >= 0 && i < len(idx.funcs) {
			return idx.funcs[i].entry, true
		}
	}
	if s, ok := im.SymbolAt(pc); ok {
		return s.Value, true
	}
	return 0, false
}

// tailsFrom returns the tail call sites of the function whose entry is
// from.
func (idx *dwarfIndex) tailsFrom(from uint64) []callSite {
	i := sort.Search(len(idx.tails), func(i int) bool { return idx.tails[i].from >= from })
	j := i
	for j < len(idx.tails) && idx.tails[j].from == from {
		j++
	}
	return idx.tails[i:j]
}

// tailChain returns the one chain of tail call sites that leads from the
// function whose entry is from to the function whose entry is to, in
// call order, or nil when there is none, more than one, or it cannot be
// told (see TailCalls).
//
// It explores every function tail calls can reach from from, then keeps
// those on some path to to. Among them a cycle means endless paths;
// otherwise the paths are counted from to backwards.
func tailChain(tailsFrom func(uint64) []callSite, from, to uint64) []callSite {
	// Explore: every function reachable from from by tail calls, and
	// its outgoing sites.
	out := map[uint64][]callSite{}
	queue := []uint64{from}
	seen := map[uint64]bool{from: true}
	sites := 0
	for len(queue) > 0 {
		fn := queue[0]
		queue = queue[1:]
		ss := tailsFrom(fn)
		sites += len(ss)
		if sites > maxTailSearchSites {
			return nil
		}
		for _, s := range ss {
			switch s.status {
			case targetUnknown:
				return nil // a jump that could go anywhere
			case targetOutside:
				continue
			}
			out[fn] = append(out[fn], s)
			if !seen[s.target] {
				if len(seen) >= maxTailSearchFuncs {
					return nil
				}
				seen[s.target] = true
				queue = append(queue, s.target)
			}
		}
	}
	if !seen[to] {
		return nil
	}
	// Keep the functions from which to can be reached.
	in := map[uint64][]uint64{}
	for fn, ss := range out {
		for _, s := range ss {
			in[s.target] = append(in[s.target], fn)
		}
	}
	useful := map[uint64]bool{to: true}
	stack := []uint64{to}
	for len(stack) > 0 {
		fn := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, p := range in[fn] {
			if !useful[p] {
				useful[p] = true
				stack = append(stack, p)
			}
		}
	}
	if !useful[from] {
		return nil
	}
	// Count the paths to to from every useful function (at most 2 are
	// told apart), finding cycles on the way.
	const (
		unvisited = iota
		active
		done
	)
	state := map[uint64]int{}
	paths := map[uint64]int{}
	cycle := false
	var count func(fn uint64) int
	count = func(fn uint64) int {
		if fn == to {
			// A path ends at the first arrival at to; a cycle through
			// to is found from the functions after it.
			switch state[to] {
			case active:
				cycle = true
			case unvisited:
				state[to] = active
				for _, s := range out[to] {
					if useful[s.target] {
						count(s.target)
					}
				}
				state[to] = done
			}
			return 1
		}
		switch state[fn] {
		case active:
			cycle = true
			return 0
		case done:
			return paths[fn]
		}
		state[fn] = active
		n := 0
		for _, s := range out[fn] {
			if useful[s.target] {
				n = min(n+count(s.target), 2)
			}
		}
		state[fn] = done
		paths[fn] = n
		return n
	}
	if count(from) != 1 || cycle {
		return nil
	}
	// Follow the one path.
	var chain []callSite
	for fn := from; fn != to; {
		if len(chain) >= MaxTailCallChain {
			return nil
		}
		next := false
		for _, s := range out[fn] {
			if useful[s.target] && (s.target == to || paths[s.target] == 1) {
				chain = append(chain, s)
				fn, next = s.target, true
				break
			}
		}
		if !next {
			return nil
		}
	}
	return chain
}
