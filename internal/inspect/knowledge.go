package inspect

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ompd-inspect/ompd-inspect/ompd/llvm/recovery"
	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// Where the runtime's knowledge comes from (runtime.symbols_source and
// runtime.layout_source of the report).
const (
	// SourceSymbols: the runtime's own symbol table (symbols_source).
	SourceSymbols = "runtime-symbols"
	// SourceLayoutSymbols: the runtime's own OMPD layout symbols
	// (layout_source).
	SourceLayoutSymbols = "ompd-symbols"
	// SourceDebugFile: a separate debug file found for the runtime.
	SourceDebugFile = "debug-file"
	// SourceRecovered: recovered from the stripped runtime's code
	// (ompd/llvm/recovery).
	SourceRecovered = "recovered-from-code"
)

// Knowledge is what ompd-inspect knows about a runtime's symbols and OMPD
// layout, and where each comes from: the first source of the chain that
// has them (the runtime's symbols, a separate debug file, recovery from
// its code).
type Knowledge struct {
	// SymbolsSource and LayoutSource are one of the Source* constants.
	SymbolsSource, LayoutSource string
	// DebugFile is the separate debug file used, if any.
	DebugFile string
	// Recovered is what recovery found, when it was the source.
	Recovered *recovery.Knowledge

	fileOnce sync.Once
	fileSyms map[string]elf.FileSymbol
}

// KnowledgeOf returns where the symbols and layout of the runtime module
// rt come from. A runtime with no OMPD layout symbols in its file or a
// debug file is recovered from its code; when that fails too, the error
// says why.
func KnowledgeOf(rt *target.Module) (*Knowledge, error) {
	if rt.Image == nil {
		return nil, fmt.Errorf("the OpenMP runtime %s could not be opened (see warnings)", rt.Name)
	}
	if HasOMPDSymbols(rt) {
		k := &Knowledge{SymbolsSource: SourceSymbols, LayoutSource: SourceLayoutSymbols}
		if !rt.Image.HasSymtab() {
			// Image.Symbol read the debug file's .symtab.
			k.SymbolsSource, k.LayoutSource, k.DebugFile = SourceDebugFile, SourceDebugFile, rt.Image.DebugFile()
		}
		return k, nil
	}
	r := recovered(rt.Image)
	if r.err != nil {
		return nil, fmt.Errorf("the OpenMP runtime %s has no OMPD layout symbols (it is stripped, as Debian's libomp is), no debug file was found for it, and its code does not reveal them: %w", rt.Name, r.err)
	}
	return &Knowledge{SymbolsSource: SourceRecovered, LayoutSource: SourceRecovered, Recovered: r.k}, nil
}

// recoveredKey keys a runtime image's recovered knowledge (Image.Derived).
type recoveredKey struct{}

// recoveryResult is what recovery found in a runtime image's code.
type recoveryResult struct {
	k   *recovery.Knowledge
	err error
}

// recovered recovers the knowledge of a stripped runtime image once per
// image, and adds the functions it recovered to the image's symbols: they
// name frames in backtraces as the runtime's own symbols would.
func recovered(im *elf.Image) recoveryResult {
	return im.Derived(recoveredKey{}, func() any {
		rec, err := recovery.Recover(im)
		if err != nil {
			return recoveryResult{err: err}
		}
		var funcs []elf.Sym
		for _, s := range rec.FileSymbols(im) {
			if s.Func {
				funcs = append(funcs, elf.Sym{Name: s.Name, Value: s.Value, Size: s.Size, Func: true})
			}
		}
		im.AddSymbols(funcs)
		return recoveryResult{k: rec}
	}).(recoveryResult)
}

// typeLayoutsKey keys a stripped runtime image's release type layouts in
// the image's derived data (recoveredTypes).
type typeLayoutsKey struct{}

// typeLayoutsResult is recoveredTypes' answer.
type typeLayoutsResult struct {
	t   *recovery.TypeTable
	err error
}

// recoveredTypes returns the release type layouts of the stripped runtime
// im (recovery.Knowledge.TypeLayouts of rec, what recovered found), found
// once per image: parsing and checking the release's table took 0.6 to 1
// ms, which PrepareImage now spends before the stop.
func recoveredTypes(im *elf.Image, rec *recovery.Knowledge) (*recovery.TypeTable, error) {
	r := im.Derived(typeLayoutsKey{}, func() any {
		t, err := rec.TypeLayouts()
		return typeLayoutsResult{t, err}
	}).(typeLayoutsResult)
	return r.t, r.err
}

// LinkSymbol returns the link-time value and size of the runtime's symbol
// name: from its file's symbols (and debug file), else what recovery
// found (functions sized by their call frame information).
func (k *Knowledge) LinkSymbol(rt *target.Module, name string) (value, size uint64, ok bool) {
	if rt.Image != nil {
		if s, found := rt.Image.Symbol(name); found && !s.TLS {
			return s.Value, s.Size, true
		}
	}
	if k == nil || k.Recovered == nil || rt.Image == nil {
		return 0, 0, false
	}
	k.fileOnce.Do(func() {
		k.fileSyms = map[string]elf.FileSymbol{}
		for _, s := range k.Recovered.FileSymbols(rt.Image) {
			k.fileSyms[s.Name] = s
		}
	})
	s, found := k.fileSyms[name]
	if !found || s.TLS {
		return 0, 0, false
	}
	return s.Value, s.Size, true
}

// symbol returns the runtime address of a recovered symbol of rt.
func (k *Knowledge) symbol(rt *target.Module, name string) (uint64, bool) {
	if k == nil || k.Recovered == nil {
		return 0, false
	}
	a, ok := k.Recovered.Symbols[name]
	if !ok {
		return 0, false
	}
	return a + rt.Bias, true
}

// CheckMemory compares the layout block in the target's memory, which the
// runtime's ompd_init wrote, with the values recovered from its code. A
// runtime not initialized yet (all zero) or a block that differs gives an
// error naming the first differences: the layout cannot be trusted then.
func (k *Knowledge) CheckMemory(t target.Target, rt *target.Module) error {
	if k == nil || k.Recovered == nil || rt.Image == nil {
		return nil
	}
	lb := layoutBlockOf(rt.Image, k.Recovered)
	if len(lb.names) == 0 {
		return nil
	}
	if lb.err != nil {
		return fmt.Errorf("the recovered layout of %s is not one block: %w", rt.Name, lb.err)
	}
	first := lb.first + rt.Bias
	block := make([]byte, 8*len(lb.names))
	if err := t.ReadMemory(first, block); err != nil {
		return fmt.Errorf("reading the runtime's OMPD layout block at %#x: %w", first, err)
	}
	var diffs []string
	zero := true
	for i, n := range lb.names {
		got := binary.LittleEndian.Uint64(block[lb.offs[i]:])
		if got != 0 {
			zero = false
		}
		if want := lb.want[i]; got != want && len(diffs) < 3 {
			diffs = append(diffs, fmt.Sprintf("%s is %#x in memory, %#x in ompd_init's code", n, got, want))
		}
	}
	switch {
	case zero:
		return fmt.Errorf("the OpenMP runtime %s has not initialized its OMPD layout yet (the block ompd_init fills is all zero)", rt.Name)
	case len(diffs) > 0:
		return fmt.Errorf("the OMPD layout in the memory of %s differs from the values in its code (%s): its layout is not used", rt.Name, strings.Join(diffs, "; "))
	}
	return nil
}

// layoutBlockKey keys a stripped runtime image's layout block
// (Image.Derived).
type layoutBlockKey struct{}

// layoutBlock is the block of the OMPD layout variables that ompd_init
// fills, as recovery found them: their names in the order of their
// link-time addresses, each one's offset from the first and the value its
// code writes. It is derived once per image (before a stop, by
// PrepareImage): CheckMemory then only reads the block and compares.
type layoutBlock struct {
	first uint64 // the first variable's link-time address
	names []string
	offs  []uint64
	want  []uint64
	err   error // the variables do not lie in one block of 8 bytes each
}

// layoutBlockOf returns the layout block of im, whose knowledge rec
// recovered.
func layoutBlockOf(im *elf.Image, rec *recovery.Knowledge) *layoutBlock {
	return im.Derived(layoutBlockKey{}, func() any {
		lb := &layoutBlock{names: make([]string, 0, len(rec.Layout))}
		for n := range rec.Layout {
			lb.names = append(lb.names, n)
		}
		sort.Slice(lb.names, func(i, j int) bool { return rec.Symbols[lb.names[i]] < rec.Symbols[lb.names[j]] })
		if len(lb.names) == 0 {
			return lb
		}
		lb.first = rec.Symbols[lb.names[0]]
		last := 8 * uint64(len(lb.names)-1) // the last variable's offset
		for _, n := range lb.names {
			off := rec.Symbols[n] - lb.first
			if off > last {
				lb.err = fmt.Errorf("%s lies %#x bytes past the first variable, beyond %d variables of 8 bytes", n, off, len(lb.names))
			}
			lb.offs = append(lb.offs, off)
			lb.want = append(lb.want, rec.Layout[n])
		}
		return lb
	}).(*layoutBlock)
}

// kept keeps with a runtime's image what an address space of it learned
// from it (gomp.Learned, llvm.Learned) for the next one: that of the stop
// after a rehearsal. Safe for concurrent use; a nil *kept keeps nothing.
type kept[T any] struct {
	p atomic.Pointer[T]
}

// keptKey keys a kept[T] in an image's derived values.
type keptKey[T any] struct{}

// keptWith returns the holder of what is kept with rt's image, nil when
// rt has no image.
func keptWith[T any](rt *target.Module) *kept[T] {
	if rt.Image == nil {
		return nil
	}
	return rt.Image.Derived(keptKey[T]{}, func() any { return &kept[T]{} }).(*kept[T])
}

// get returns what is kept, nil for none.
func (k *kept[T]) get() *T {
	if k == nil {
		return nil
	}
	return k.p.Load()
}

// set keeps v, unless the reads of t that gave it may have been cut
// short (target.Ended: a rehearsal's reads end when its time is up).
func (k *kept[T]) set(t target.Target, v *T) {
	if k != nil && v != nil && !target.Ended(t) {
		k.p.Store(v)
	}
}
