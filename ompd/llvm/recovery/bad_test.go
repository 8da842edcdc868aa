package recovery

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/internal/fixture"
	telf "github.com/ompd-inspect/ompd-inspect/target/elf"
)

// patched copies Debian's libomp 19 and lets edit change the copy's bytes;
// at maps a link-time address to its file offset.
func patched(t *testing.T, edit func(data []byte, at func(vaddr uint64) int)) string {
	t.Helper()
	src := fixture.StockLibomp(19)
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatalf("%v (scripts/setup.sh extracts it)", err)
	}
	ef, err := elf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	at := func(vaddr uint64) int {
		for _, s := range ef.Sections {
			if s.Type != elf.SHT_NOBITS && s.Flags&elf.SHF_ALLOC != 0 && vaddr >= s.Addr && vaddr < s.Addr+s.Size {
				return int(vaddr - s.Addr + s.Offset)
			}
		}
		t.Fatalf("no file bytes at %#x", vaddr)
		return 0
	}
	edit(data, at)
	dst := filepath.Join(t.TempDir(), "libomp.so.5")
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// stock19 is the recovery of the unchanged file.
func stock19(t *testing.T) (*Knowledge, *recoverer) {
	t.Helper()
	im := mustOpen(t, fixture.StockLibomp(19))
	k, err := Recover(im)
	if err != nil {
		t.Fatal(err)
	}
	r := &recoverer{im: im, k: &Knowledge{}}
	if r.text, err = im.SectionData(".text"); err != nil {
		t.Fatal(err)
	}
	return k, r
}

// TestLayoutDisagreesWithCode: ompd_init storing another th_team offset
// than omp_get_level uses means the names do not fit the values: no
// layout at all, and an error that says what disagreed.
func TestLayoutDisagreesWithCode(t *testing.T) {
	k, r := stock19(t)
	init, err := r.funcAt(k.Symbols["ompd_init"])
	if err != nil {
		t.Fatal(err)
	}
	target := k.Symbols["ompd_access__kmp_base_info_t__th_team"]
	var store *ref
	for i := range init.refs {
		if x := &init.refs[i]; x.kind == refStore && x.target == target {
			store = x
		}
	}
	if store == nil || store.imm != 0x40 {
		t.Fatalf("no store of 0x40 to th_team's variable: %+v", store)
	}
	var length int
	for _, in := range init.insts {
		if in.addr == store.at {
			length = in.Len
		}
	}
	path := patched(t, func(data []byte, at func(uint64) int) {
		binary.LittleEndian.PutUint32(data[at(store.at)+length-4:], 0x48)
	})
	_, err = Recover(mustOpen(t, path))
	want := path + ": the recovered layout failed its checks: the recovered layout disagrees with omp_get_level, which reads ompd_access__kmp_info_t__th+ompd_access__kmp_base_info_t__th_team at [+40 +350], not 0x48: the layout values are not used"
	if err == nil || err.Error() != want {
		t.Errorf("Recover = %v\nwant %s", err, want)
	}
}

// TestAnchorsDisagree: a getter that reads another variable than the
// settings table names leaves that global out, with a warning naming both.
func TestAnchorsDisagree(t *testing.T) {
	k, r := stock19(t)
	f, err := r.exported("omp_get_cancellation")
	if err != nil {
		t.Fatal(err)
	}
	want := k.Symbols["__kmp_omp_cancellation"]
	var lea *inst
	for i := range f.insts {
		in := &f.insts[i]
		if hasRIPMem(in.Inst, int64(in.addr)+int64(in.Len), want) {
			lea = in
		}
	}
	if lea == nil {
		t.Fatal("omp_get_cancellation does not take __kmp_omp_cancellation's address")
	}
	path := patched(t, func(data []byte, at func(uint64) int) {
		off := at(lea.addr) + lea.Len - 4
		binary.LittleEndian.PutUint32(data[off:], binary.LittleEndian.Uint32(data[off:])+4)
	})
	got, err := Recover(mustOpen(t, path))
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := got.Symbols["__kmp_omp_cancellation"]; ok {
		t.Errorf("__kmp_omp_cancellation recovered at %#x despite disagreeing anchors", a)
	}
	wantWarn := fmt.Sprintf("__kmp_omp_cancellation is not recovered: its anchors disagree (omp_get_cancellation says %#x, the OMP_CANCELLATION setting says %#x)", want+4, want)
	if len(got.Warnings) != 1 || got.Warnings[0] != wantWarn {
		t.Errorf("warnings %q\nwant [%q]", got.Warnings, wantWarn)
	}
	for n, a := range k.Symbols {
		if n != "__kmp_omp_cancellation" && got.Symbols[n] != a {
			t.Errorf("%s: %#x after the change, %#x before", n, got.Symbols[n], a)
		}
	}
}

// TestNoOMPDInit: a runtime without the OMP_DEBUG string (built without
// OMPD) is refused with the reason.
func TestNoOMPDInit(t *testing.T) {
	path := patched(t, func(data []byte, at func(uint64) int) {
		i := bytes.Index(data, []byte("\x00OMP_DEBUG\x00"))
		data[i+1] = 'X'
	})
	_, err := Recover(mustOpen(t, path))
	want := path + `: no ompd_init (the runtime may be built without OMPD support): no string "OMP_DEBUG" in .rodata`
	if err == nil || err.Error() != want {
		t.Errorf("Recover = %v\nwant %s", err, want)
	}
}

// TestNotARuntime: a library that is no OpenMP runtime gives an error,
// never a panic.
func TestNotARuntime(t *testing.T) {
	im, err := telf.Open("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	_, err = Recover(im)
	if err == nil || !strings.Contains(err.Error(), `no string "OMP_DEBUG" in .rodata`) {
		t.Errorf("Recover(libc) = %v", err)
	}
}
