package elf

import (
	"encoding/binary"
	"fmt"
)

// checkLineHeader checks the directory and file name counts of the DWARF 5
// line table header at offset off of .debug_line (data, in byte order
// order).
// debug/dwarf's LineReader sizes a slice by each count and loops over it
// without checking it against the header, so a few bytes of count can
// make it allocate gigabytes or loop for ever. Every entry must take at
// least one byte of the header; the lists of earlier versions end with a
// NUL byte and need no check.
func checkLineHeader(data []byte, order binary.ByteOrder, off uint64) error {
	if off >= uint64(len(data)) {
		return nil // debug/dwarf reports it
	}
	b := lineBuf{data: data[off:], order: order}
	end := uint64(b.u32())
	dwarf64 := end == 0xffffffff
	if dwarf64 {
		end = b.u64()
	}
	end = min(end, uint64(len(b.data))-b.off) + b.off
	if v := b.u16(); b.bad || v != 5 {
		return nil
	}
	b.skip(2) // address_size, segment_selector_size
	hlen := uint64(b.u32())
	if dwarf64 {
		hlen = b.u64()
	}
	hend := min(hlen, end-min(end, b.off)) + b.off // end of the header
	b.skip(5)                                      // minimum_instruction_length ... line_range
	b.skip(uint64(max(b.u8(), 1)) - 1)             // standard_opcode_lengths
	for _, list := range []string{"directories", "file names"} {
		format := b.format()
		n := b.uleb()
		if b.bad {
			return nil // debug/dwarf reports it
		}
		if left := hend - min(hend, b.off); n > left {
			return fmt.Errorf("line table at offset %#x of .debug_line: %d %s, more than the %d bytes left in its header", off, n, list, left)
		}
		for range n {
			b.entry(format, dwarf64)
		}
	}
	return nil
}

// lineBuf reads a DWARF 5 line table header; reading past its end sets
// bad and returns zeros.
type lineBuf struct {
	data  []byte
	order binary.ByteOrder
	off   uint64
	bad   bool
}

func (b *lineBuf) bytes(n uint64) []byte {
	if b.bad || n > uint64(len(b.data))-b.off {
		b.bad = true
		return make([]byte, 8)
	}
	p := b.data[b.off : b.off+n]
	b.off += n
	return p
}

func (b *lineBuf) skip(n uint64) { b.bytes(n) }
func (b *lineBuf) u8() uint8     { return b.bytes(1)[0] }
func (b *lineBuf) u16() uint16   { return b.order.Uint16(b.bytes(2)) }
func (b *lineBuf) u32() uint32   { return b.order.Uint32(b.bytes(4)) }
func (b *lineBuf) u64() uint64   { return b.order.Uint64(b.bytes(8)) }

func (b *lineBuf) uleb() uint64 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		c := b.u8()
		if b.bad {
			return 0
		}
		if shift < 64 {
			v |= uint64(c&0x7f) << shift
		}
		if c&0x80 == 0 {
			return v
		}
	}
}

// format reads an entry format: a count, then (content type, form) pairs;
// it returns the forms.
func (b *lineBuf) format() []uint64 {
	n := b.u8()
	forms := make([]uint64, 0, n)
	for range n {
		b.uleb() // DW_LNCT_*
		forms = append(forms, b.uleb())
	}
	return forms
}

// entry skips one directory or file name entry, reading its forms as
// debug/dwarf does (a form it does not know takes no bytes).
func (b *lineBuf) entry(forms []uint64, dwarf64 bool) {
	offSize := uint64(4)
	if dwarf64 {
		offSize = 8
	}
	for _, f := range forms {
		switch f {
		case 0x08: // DW_FORM_string
			for !b.bad && b.u8() != 0 {
			}
		case 0x0e, 0x1f, 0x1d: // DW_FORM_strp, DW_FORM_line_strp, DW_FORM_strp_sup
			b.skip(offSize)
		case 0x1a, 0x0f: // DW_FORM_strx, DW_FORM_udata
			b.uleb()
		case 0x25, 0x0b: // DW_FORM_strx1, DW_FORM_data1
			b.skip(1)
		case 0x26, 0x05: // DW_FORM_strx2, DW_FORM_data2
			b.skip(2)
		case 0x27: // DW_FORM_strx3
			b.skip(3)
		case 0x28, 0x06: // DW_FORM_strx4, DW_FORM_data4
			b.skip(4)
		case 0x07: // DW_FORM_data8
			b.skip(8)
		case 0x1e: // DW_FORM_data16
			b.skip(16)
		case 0x09: // DW_FORM_block
			b.skip(b.uleb())
		}
	}
}
