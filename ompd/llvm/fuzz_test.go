package llvm_test

import (
	"encoding/binary"
	"sync"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/ompd"
	"github.com/ompd-inspect/ompd-inspect/ompd/llvm"
)

// FuzzWalk corrupts the scenario's memory (its symbols, layout symbols
// included, and its heap) and asks everything a debugger would: nothing
// may panic or loop. Plain `go test` runs only the seeds; run
// `go test ./ompd -run '^$' -fuzz FuzzWalk` to fuzz.
//
// The input is a selector byte (the layout, and whether the callbacks
// give TypeLayouts), then 11-byte records: a 16-bit
// position (in 4-byte units, over the symbols then the heap), a width
// selector (1, 2, 4 or 8 bytes) and a little-endian 64-bit value.
func FuzzWalk(f *testing.F) {
	base := fuzzBases(f)
	s := base[0]
	for _, b := range base {
		if d, h := b.fuzzUnits(); d+h > 1<<16 {
			f.Fatalf("%s: %d fuzzed units do not fit a 16-bit position", b.lay.p.name, d+h)
		}
	}
	rec := func(addr uint64, width byte, v uint64) []byte {
		pos, ok := s.fuzzPos(addr)
		if !ok {
			f.Fatalf("address %#x is not in the fuzzed regions", addr)
		}
		out := binary.LittleEndian.AppendUint16(nil, uint16(pos))
		out = append(out, width)
		return binary.LittleEndian.AppendUint64(out, v)
	}
	teamField := func(tm, field string) uint64 { return s.b.addrOf(s.team[tm], "kmp_team_p", "t."+field) }
	taskField := func(tk, field string) uint64 { return s.b.addrOf(s.task[tk], "kmp_taskdata_t", field) }
	seeds := [][]byte{
		nil,
		rec(teamField("T1", "t_parent"), 3, s.team["T1"]),
		rec(teamField("T2", "t_nproc"), 2, 0x7fffffff),
		rec(teamField("T2", "t_nproc"), 2, 0xffffffff),
		rec(teamField("T1", "t_level"), 2, 0xfffffff0),
		rec(taskField("imp0.0", "td_parent"), 3, s.task["imp0.0"]),
		rec(taskField("E1", "td_flags"), 2, 0xffffffff),
		rec(s.lwt["L1"]+s.lay.types["ompt_lw_taskteam_t"].fields["parent"].off, 3, s.lwt["L2"]),
		rec(s.b.tgt.syms["__kmp_threads_capacity"], 2, 0x10000),
		rec(s.b.tgt.syms["ompd_sizeof__kmp_taskdata_t"], 3, 0),
		rec(s.b.tgt.syms["ompd_sizeof__kmp_desc_base_t__ds_thread"], 3, 9),
		rec(s.b.tgt.syms["ompd_access__kmp_info_t__th"], 3, 1<<63),
		rec(s.b.tgt.syms["ompd_env_block_size"], 3, 1<<20),
		rec(s.b.tgt.syms["__kmp_nested_nth"]+s.lay.types["kmp_nested_nthreads_t"].fields["used"].off, 2, 1024),
		rec(s.b.tgt.syms["ompd_state"], 3, 0),
	}
	for _, sd := range seeds {
		for sel := range 2 * len(layouts) {
			f.Add(append([]byte{byte(sel)}, sd...))
		}
	}
	// Two mutations together.
	f.Add(append(append([]byte{1}, seeds[1]...), seeds[5]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		sel := int(data[0])
		s := base[sel%len(base)]
		tgt := &fakeTarget{mem: s.b.tgt.mem.clone(), syms: s.b.tgt.syms, sizes: s.b.tgt.sizes,
			asked: map[string]int{}, hints: map[string]int{}}
		data = data[1:]
		for len(data) >= 11 {
			addr := s.fuzzAddr(uint64(binary.LittleEndian.Uint16(data)))
			width := uint64(1) << (data[2] & 3)
			v := binary.LittleEndian.Uint64(data[3:])
			tgt.mem.write(addr, le(width, v))
			data = data[11:]
		}
		var cb ompd.Callbacks = dwarfTarget{tgt, s.lay}
		if sel/len(base)%2 == 1 {
			cb = tgt // without DWARF
		}
		as, err := llvm.ProcessInitialize(cb, hint, nil)
		if err != nil {
			return
		}
		within(t, "walking a corrupt image", func() { transcript(as, hexs) })
	})
}

var (
	fuzzBaseOnce sync.Once
	fuzzBaseList []*scenario
)

// fuzzBases builds the scenario once per layout (with DWARF and state
// tracking), shared read-only by every fuzz input.
func fuzzBases(t testing.TB) []*scenario {
	fuzzBaseOnce.Do(func() {
		for _, p := range layouts {
			fuzzBaseList = append(fuzzBaseList, newScenario(t, p, full))
		}
	})
	return fuzzBaseList
}

// The fuzzed bytes: the symbols, then the heap, in 4-byte units.
func (s *scenario) fuzzUnits() (data, heap uint64) {
	return (s.b.data - dataBase + 3) / 4, (s.b.heap - heapBase + 3) / 4
}

func (s *scenario) fuzzAddr(pos uint64) uint64 {
	d, h := s.fuzzUnits()
	pos %= d + h
	if pos < d {
		return dataBase + 4*pos
	}
	return heapBase + 4*(pos-d)
}

func (s *scenario) fuzzPos(addr uint64) (uint64, bool) {
	d, h := s.fuzzUnits()
	switch {
	case addr%4 != 0:
		return 0, false
	case addr >= dataBase && (addr-dataBase)/4 < d:
		return (addr - dataBase) / 4, true
	case addr >= heapBase && (addr-heapBase)/4 < h:
		return d + (addr-heapBase)/4, true
	}
	return 0, false
}
