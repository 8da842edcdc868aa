package elf

import (
	"debug/dwarf"
	"fmt"
)

// Limits on the inlined subroutines indexed. An image that exceeds one
// gets an error (see DebugInfo) and FramesAt shows no inlined frames for
// the subroutines left out.
const (
	// MaxInlinedSubroutines is the largest number of
	// DW_TAG_inlined_subroutine entries indexed.
	MaxInlinedSubroutines = 1 << 23
	// MaxInlineRanges is the largest number of address ranges of
	// inlined subroutines indexed.
	MaxInlineRanges = 1 << 25
)

// maxInlineDepth bounds how many inlined subroutines nest inside one
// another; deeper ones are not indexed.
const maxInlineDepth = 256

// SourceFrame is one logical frame at an address: a function, inlined or
// not, and the source position reached in it.
type SourceFrame struct {
	// Function is the function's DW_AT_name ("" when unknown). For the
	// outermost frame it is what FuncAt returns.
	Function string
	// File is the full path of the source file and Line the line in it;
	// "" and 0 when unknown.
	File string
	Line int
	// Inlined is set when Function was inlined into the next frame of
	// the list; it is false for the last one, the concrete function.
	Inlined bool
}

// inlineNode is one DW_TAG_inlined_subroutine with code.
type inlineNode struct {
	name      string       // resolved after the walk
	origin    dwarf.Offset // DW_AT_abstract_origin
	hasOrigin bool
	parent    int32  // index of the enclosing inlined subroutine, or -1
	fn        int32  // funcs index of the concrete subprogram
	depth     int32  // 1 for one directly inside the subprogram
	callFile  uint32 // DW_AT_call_file, an index into files
	callLine  uint32 // DW_AT_call_line, 0 when unknown
}

// FramesAt returns the logical frames at the link-time address addr,
// innermost first: the functions inlined at addr, each inlined into the
// next one, then the concrete function that holds the code, as gdb's
// backtrace and addr2line -i show them. The first frame's position is
// the line-table row of addr (LineAt); every later frame's position is
// the call site (DW_AT_call_file, DW_AT_call_line) of the inlined
// subroutine that the frame before it is. The last frame names FuncAt's
// function. Without inlining at addr the result is the one frame
// {FuncAt(addr), LineAt(addr)}; it is nil when neither is known.
//
// For a caller's frame in a backtrace pass the return address minus
// one, so that the call, not the instruction after it, is looked up.
// At the first instruction of an inlined body the inlined frame is
// included (as addr2line does; gdb hides it when it has just stopped
// there at a breakpoint).
//
// Answers are kept in the section cache (see frameCache): a later run
// gets them without opening the DWARF.
func (im *Image) FramesAt(addr uint64) []SourceFrame {
	fc := im.frameCacheOf()
	if fc == nil {
		return im.framesAt(addr)
	}
	if sf, ok := fc.lookupFrames(addr); ok {
		return sf
	}
	sf := im.framesAt(addr)
	fc.addFrames(addr, sf)
	return sf
}

// framesAt is FramesAt without the cache.
func (im *Image) framesAt(addr uint64) []SourceFrame {
	name, fok := im.FuncAt(addr)
	file, line, lok := im.LineAt(addr)
	if !fok && !lok {
		return nil
	}
	var frames []SourceFrame
	if idx := im.indexAt(addr); idx != nil {
		chain := idx.inlineChain(addr)
		frames = make([]SourceFrame, 0, len(chain)+1)
		for _, n := range chain {
			frames = append(frames, SourceFrame{Function: n.name, File: file, Line: line, Inlined: true})
			file, line = idx.files[n.callFile], int(n.callLine)
		}
	}
	return append(frames, SourceFrame{Function: name, File: file, Line: line})
}

// inlineChain returns the inlined subroutines whose ranges contain addr,
// innermost first. It is empty unless the innermost one lies in the
// subprogram that FuncAt finds at addr.
func (idx *dwarfIndex) inlineChain(addr uint64) []*inlineNode {
	i, ok := findSpan(idx.inlSpans, addr)
	if !ok || i < 0 || i >= len(idx.inl) {
		return nil
	}
	fn, ok := findSpan(idx.spans, addr)
	if !ok || int(idx.inl[i].fn) != fn {
		return nil
	}
	var chain []*inlineNode
	for n := int32(i); n >= 0 && int(n) < len(idx.inl) && len(chain) <= maxInlineDepth; {
		node := &idx.inl[n]
		chain = append(chain, node)
		if node.parent >= n { // parents are recorded first
			break
		}
		n = node.parent
	}
	return chain
}

// inlined records a DW_TAG_inlined_subroutine found in scope cur and
// returns the inline index its children are inside of.
func (w *walker) inlined(e *dwarf.Entry, cur scope) int32 {
	if w.inlStopped {
		return noInline
	}
	w.inlCount++
	if w.base.inlines+w.inlCount > MaxInlinedSubroutines {
		w.stopInlines(fmt.Errorf("more than %d inlined subroutines (limit MaxInlinedSubroutines)", MaxInlinedSubroutines))
		return noInline
	}
	origin, hasOrigin := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
	if cur.fn < 0 || cur.inl == noInline {
		// Abstract (or otherwise without a concrete subprogram): kept
		// for the origin chains of concrete instances.
		if hasOrigin {
			w.inlOrigins[e.Offset] = origin
		}
		return noInline
	}
	depth := int32(1)
	if cur.inl >= 0 {
		depth = w.idx.inl[cur.inl].depth + 1
	}
	if depth > maxInlineDepth {
		if !w.chainErr {
			w.chainErr = true
			w.errs = append(w.errs, fmt.Errorf("inlined subroutines nested more than %d deep: the deeper ones are not indexed", maxInlineDepth))
		}
		return noInline
	}
	rs, err := w.d.Ranges(e)
	if err != nil {
		if hasOrigin {
			w.inlOrigins[e.Offset] = origin
		}
		return noInline
	}
	id := int32(len(w.idx.inl))
	start, n := len(w.inlIvs), 0
	for _, rg := range rs {
		if rg[0] >= rg[1] || !w.valid(rg[0]) {
			continue
		}
		if w.base.inlRanges+len(w.inlIvs) >= MaxInlineRanges {
			w.inlIvs = w.inlIvs[:start]
			w.stopInlines(fmt.Errorf("more than %d ranges of inlined subroutines (limit MaxInlineRanges)", MaxInlineRanges))
			return noInline
		}
		w.inlIvs = append(w.inlIvs, interval{lo: rg[0], hi: rg[1], id: int(id)})
		n++
	}
	if n == 0 {
		if hasOrigin {
			w.inlOrigins[e.Offset] = origin
		}
		return noInline
	}
	node := inlineNode{origin: origin, hasOrigin: hasOrigin, parent: cur.inl, fn: cur.fn, depth: depth}
	if i, ok := e.Val(dwarf.AttrCallFile).(int64); ok && i >= 0 && i < int64(len(w.files)) && w.files[i] != nil {
		node.callFile = w.fileID(w.files[i])
	}
	if l, ok := e.Val(dwarf.AttrCallLine).(int64); ok && l > 0 && l <= 1<<31 {
		node.callLine = uint32(l)
	}
	w.idx.inl = append(w.idx.inl, node)
	return id
}

// stopInlines records err and ends the indexing of inlined subroutines.
func (w *walker) stopInlines(err error) {
	w.inlStopped = true
	w.errs = append(w.errs, err)
}

// resolveName returns the name of the entry at off, following
// DW_AT_abstract_origin and DW_AT_specification links of subprograms and
// the abstract_origin links of abstract inlined subroutines.
func resolveName(subs map[dwarf.Offset]*subInfo, inl map[dwarf.Offset]dwarf.Offset, off dwarf.Offset) string {
	for depth := 0; depth <= maxOriginDepth; depth++ {
		if s := subs[off]; s != nil {
			if s.name != "" || !s.hasOrigin {
				return s.name
			}
			off = s.origin
			continue
		}
		o, ok := inl[off]
		if !ok {
			break
		}
		off = o
	}
	return ""
}
