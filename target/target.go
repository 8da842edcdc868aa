// Package target describes what ompd-inspect reads from: a stopped live
// process or a core file. It knows processes, threads, registers, memory and
// loaded ELF modules, and nothing of OpenMP.
//
// Backends live in subpackages: target/ptrace reaches a live process,
// target/core reads an ELF core file. Both return a Target.
package target

import (
	"errors"
	"fmt"

	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// ErrUnmapped is returned (wrapped) by ReadMemory when an address is not
// mapped in the target, or its bytes are in neither the core nor a file.
var ErrUnmapped = errors.New("address not mapped")

// Registers holds the general purpose registers of an x86-64 thread, in the
// order of the kernel's user_regs_struct.
type Registers struct {
	R15, R14, R13, R12, Rbp, Rbx, R11, R10 uint64
	R9, R8, Rax, Rcx, Rdx, Rsi, Rdi        uint64
	OrigRax, Rip, Cs, Eflags, Rsp, Ss      uint64
	FSBase, GSBase                         uint64
	Ds, Es, Fs, Gs                         uint64
}

// Thread is one OS thread (light-weight process) of the target.
type Thread struct {
	// TID is the kernel's thread id (the LWP id).
	TID int
	// Regs are the thread's registers at the stop (or when the core was
	// written).
	Regs Registers
	// Signal is the signal the thread stopped with in a core (NT_PRSTATUS
	// pr_cursig), 0 when unknown or for live processes.
	Signal int
}

// ThreadPointer returns the x86-64 thread pointer (fs_base). With glibc and
// musl it is the address of the thread's TCB, which is also the thread's
// pthread_t value.
func (t *Thread) ThreadPointer() uint64 { return t.Regs.FSBase }

// Module is an ELF object mapped into the target.
type Module struct {
	// Name is the path the target itself recorded (from /proc/PID/maps or
	// the core's NT_FILE note).
	Name string
	// File is the path on disk that was opened to read the module, after
	// --exe, sysroot and search-path substitution; empty when none was found.
	File string
	// Start and End delimit the module's lowest and highest mapped address.
	Start, End uint64
	// Bias is the load bias: runtime address = link-time address + Bias.
	Bias uint64
	// Image is the parsed ELF file, nil when the file could not be opened
	// or did not match (see Warnings of the Target).
	Image *elf.Image
}

// Contains reports whether addr lies inside the module's mapped range.
func (m *Module) Contains(addr uint64) bool { return addr >= m.Start && addr < m.End }

// Ender is a Target whose reads can end before it is closed: the view of
// a running process that a rehearsal reads through, once its time is up,
// or a process once released. Ended reports whether they have; reads
// made while it reports false were not cut short by that end.
type Ender interface {
	Ended() bool
}

// Ended reports whether t's reads have ended (Ender); false for a target
// whose reads do not end.
func Ended(t Target) bool {
	e, ok := t.(Ender)
	return ok && e.Ended()
}

// Prefetcher is a Target that can read ahead, in one go, scattered
// memory its caller expects to read next: a live process, where one read
// of a thousand pages costs a third of a thousand reads of one. It is
// advice: what cannot be read is not reported.
type Prefetcher interface {
	Prefetch(addrs []uint64)
}

// Target is a process image stopped for inspection.
type Target interface {
	// PID is the process id (for a core, the one the core recorded).
	PID() int
	// Threads lists the target's threads; the first is the main thread when
	// it still exists.
	Threads() []Thread
	// ReadMemory fills buf from the target's memory at addr. It fails with
	// an error wrapping ErrUnmapped when any byte cannot be read. A live
	// process serves reads from a per-stop page cache (MemCache); a core
	// file reads its file, which the kernel's page cache keeps.
	ReadMemory(addr uint64, buf []byte) error
	// Modules lists the ELF objects mapped into the target, the executable
	// first.
	Modules() []*Module
	// Warnings lists what the backend noticed and worked around (a moved
	// binary, a build-id mismatch, a thread that vanished while attaching).
	Warnings() []string
	// Close releases the target. For a live process it detaches from every
	// thread and leaves the process running as it found it.
	Close() error
}

// Symbol is a resolved symbol in the target's address space.
type Symbol struct {
	Name   string
	Addr   uint64 // runtime address (link-time value + module bias)
	Size   uint64
	Module *Module
	TLS    bool // a thread-local symbol: Addr is the offset in the module's TLS block
}

// LookupSymbol finds a symbol by name, searching the modules in order and
// preferring a defined, non-local-import definition. When module is not
// nil, only that module is searched.
func LookupSymbol(t Target, name string, module *Module) (Symbol, error) {
	if module != nil {
		// Not t.Modules(), which a live process copies.
		if s, ok := symbolIn(module, name); ok {
			return s, nil
		}
	} else {
		for _, m := range t.Modules() {
			if s, ok := symbolIn(m, name); ok {
				return s, nil
			}
		}
	}
	return Symbol{}, fmt.Errorf("symbol %s: not found in any loaded module", name)
}

// symbolIn looks name up in module m's image.
func symbolIn(m *Module, name string) (Symbol, bool) {
	if m.Image == nil {
		return Symbol{}, false
	}
	s, ok := m.Image.Symbol(name)
	switch {
	case !ok:
		return Symbol{}, false
	case s.TLS:
		return Symbol{Name: name, Addr: s.Value, Size: s.Size, Module: m, TLS: true}, true
	}
	return Symbol{Name: name, Addr: s.Value + m.Bias, Size: s.Size, Module: m}, true
}

// CodeReader is a Target that reads its code itself (ReadCode): a core
// file, whose dumped bytes of a code page (code the process wrote) come
// before the module's file.
type CodeReader interface {
	ReadCode(addr uint64, buf []byte) error
}

// CodeFromFiles reports whether t's code in its modules' read-only code
// segments is their files' (ReadCode reads it there), so that what is
// learned from a file's code holds for t: false for a CodeReader.
func CodeFromFiles(t Target) bool {
	_, own := t.(CodeReader)
	return !own
}

// ModuleFinder is a Target that finds the module that maps an address
// without copying its list of modules, as Modules does.
type ModuleFinder interface {
	ModuleAt(addr uint64) *Module
}

// ModuleAt returns the module that maps addr, or nil.
func ModuleAt(t Target, addr uint64) *Module {
	if f, ok := t.(ModuleFinder); ok {
		return f.ModuleAt(addr)
	}
	return ModuleIn(t.Modules(), addr)
}

// ModuleIn returns the module of mods that maps addr, or nil.
func ModuleIn(mods []*Module, addr uint64) *Module {
	for _, m := range mods {
		if m.Contains(addr) {
			return m
		}
	}
	return nil
}

// ReadCode fills buf with the code at addr of t. Code that lies in a
// module's read-only code segment is read from the module's file
// (elf.Image.ReadCode): a file read costs a fraction of a read of a
// stopped process's memory, and the walks that read code already take
// the code's CFI from that file; what another tracer or a patch wrote
// into the process's code is not seen, as the CFI does not see it.
// Anything else, such as code in memory without a file or in a writable
// segment, is read from t's memory. A target that reads its code itself
// (CodeReader: a core file) is asked instead.
func ReadCode(t Target, addr uint64, buf []byte) error {
	if cr, own := t.(CodeReader); own {
		return cr.ReadCode(addr, buf)
	}
	if m := ModuleAt(t, addr); m != nil && m.Image != nil && addr >= m.Bias {
		if m.Image.ReadCode(addr-m.Bias, buf) == nil {
			return nil
		}
	}
	return t.ReadMemory(addr, buf)
}

// ReadUint64 reads a little-endian 64-bit value.
func ReadUint64(t Target, addr uint64) (uint64, error) {
	var b [8]byte
	if err := t.ReadMemory(addr, b[:]); err != nil {
		return 0, err
	}
	return le64(b[:]), nil
}

func le64(b []byte) uint64 {
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}
