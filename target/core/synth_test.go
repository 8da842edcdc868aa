package core

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ompd-inspect/ompd-inspect/target"
)

// A synthetic core, built byte by byte, for exact checks of the parser
// and for corrupting.
type synthThread struct {
	tid, sig int
	regs     [27]uint64
}

type synthLoad struct {
	vaddr, memsz uint64
	data         []byte // dumped bytes (p_filesz = len(data))
	flags        elf.ProgFlag
}

type synthFile struct {
	start, end, pgoff uint64
	name              string
}

type synthCore struct {
	typ     elf.Type
	machine elf.Machine
	class   elf.Class
	xnum    bool // count program headers through section header 0
	pid     int
	fname   string
	threads []synthThread
	files   []synthFile
	auxv    [][2]uint64
	loads   []synthLoad
}

func (s synthCore) bytes() []byte {
	le := binary.LittleEndian
	var notes []byte
	note := func(name string, typ uint32, desc []byte) {
		notes = le.AppendUint32(notes, uint32(len(name)+1))
		notes = le.AppendUint32(notes, uint32(len(desc)))
		notes = le.AppendUint32(notes, typ)
		notes = append(notes, name...)
		notes = append(notes, 0)
		for len(notes)%4 != 0 {
			notes = append(notes, 0)
		}
		notes = append(notes, desc...)
		for len(notes)%4 != 0 {
			notes = append(notes, 0)
		}
	}
	if s.fname != "" || s.pid != 0 {
		d := make([]byte, 136)
		le.PutUint32(d[prpsinfoPid:], uint32(s.pid))
		copy(d[prpsinfoFname:prpsinfoFname+15], s.fname)
		note("CORE", ntPRPSINFO, d)
	}
	for _, th := range s.threads {
		d := make([]byte, 336)
		le.PutUint16(d[prstatusCursig:], uint16(th.sig))
		le.PutUint32(d[prstatusPid:], uint32(th.tid))
		for i, r := range th.regs {
			le.PutUint64(d[prstatusReg+8*i:], r)
		}
		note("CORE", ntPRSTATUS, d)
		note("LINUX", 0x202, make([]byte, 40)) // an NT_X86_XSTATE stand-in, skipped
	}
	if len(s.auxv) > 0 {
		var d []byte
		for _, kv := range append(s.auxv, [2]uint64{0, 0}) {
			d = le.AppendUint64(d, kv[0])
			d = le.AppendUint64(d, kv[1])
		}
		note("CORE", ntAUXV, d)
	}
	if len(s.files) > 0 {
		var d []byte
		d = le.AppendUint64(d, uint64(len(s.files)))
		d = le.AppendUint64(d, 4096)
		for _, f := range s.files {
			d = le.AppendUint64(d, f.start)
			d = le.AppendUint64(d, f.end)
			d = le.AppendUint64(d, f.pgoff)
		}
		for _, f := range s.files {
			d = append(d, f.name...)
			d = append(d, 0)
		}
		note("CORE", ntFILE, d)
	}

	phnum := 1 + len(s.loads)
	phoff := uint64(64)
	notesOff := phoff + uint64(phnum)*56
	dataOff := notesOff + uint64(len(notes))
	var out []byte
	h := make([]byte, 64)
	copy(h, elf.ELFMAG)
	h[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	if s.class != 0 {
		h[elf.EI_CLASS] = byte(s.class)
	}
	h[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	h[elf.EI_VERSION] = 1
	typ, machine := elf.ET_CORE, elf.EM_X86_64
	if s.typ != 0 {
		typ = s.typ
	}
	if s.machine != 0 {
		machine = s.machine
	}
	le.PutUint16(h[16:], uint16(typ))
	le.PutUint16(h[18:], uint16(machine))
	le.PutUint32(h[20:], 1)
	le.PutUint64(h[32:], phoff)
	le.PutUint16(h[52:], 64)
	le.PutUint16(h[54:], 56)
	le.PutUint16(h[56:], uint16(phnum))
	out = append(out, h...)
	ph := func(typ elf.ProgType, flags elf.ProgFlag, off, vaddr, filesz, memsz uint64) {
		out = le.AppendUint32(out, uint32(typ))
		out = le.AppendUint32(out, uint32(flags))
		out = le.AppendUint64(out, off)
		out = le.AppendUint64(out, vaddr)
		out = le.AppendUint64(out, 0)
		out = le.AppendUint64(out, filesz)
		out = le.AppendUint64(out, memsz)
		out = le.AppendUint64(out, 4096)
	}
	ph(elf.PT_NOTE, 0, notesOff, 0, uint64(len(notes)), 0)
	off := dataOff
	for _, l := range s.loads {
		ph(elf.PT_LOAD, l.flags, off, l.vaddr, uint64(len(l.data)), l.memsz)
		off += uint64(len(l.data))
	}
	out = append(out, notes...)
	for _, l := range s.loads {
		out = append(out, l.data...)
	}
	if s.xnum {
		// PN_XNUM: e_phnum 0xffff, the count in sh_info of section 0.
		le.PutUint16(out[56:], 0xffff)
		le.PutUint64(out[40:], uint64(len(out)))
		le.PutUint16(out[58:], 64)
		le.PutUint16(out[60:], 1)
		sh := make([]byte, 64)
		le.PutUint32(sh[44:], uint32(phnum))
		out = append(out, sh...)
	}
	return out
}

func writeSynth(t *testing.T, s synthCore) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "core")
	if err := os.WriteFile(p, s.bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func fill(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

// elfPage is a first page that starts with the ELF magic but has no
// program headers.
func elfPage() []byte {
	p := make([]byte, 4096)
	copy(p, elf.ELFMAG)
	return p
}

func standardSynth() synthCore {
	var regs [3][27]uint64
	for i := range regs {
		for j := range regs[i] {
			regs[i][j] = uint64(100*i + j + 1)
		}
	}
	return synthCore{
		pid:   100,
		fname: "synthetic-program-name", // truncated to 15 bytes by the kernel
		threads: []synthThread{
			{tid: 102, sig: 11, regs: regs[0]},
			{tid: 100, sig: 11, regs: regs[1]},
			{tid: 101, sig: 11, regs: regs[2]},
		},
		auxv: [][2]uint64{{atPHDR, 0x40040}, {atENTRY, 0x40100}},
		files: []synthFile{
			{0x30000, 0x31000, 0, "/nonexistent/data.bin"},
			{0x40000, 0x41000, 0, "/nonexistent/libbar.so"},
			{0x50000, 0x51000, 0, "/nonexistent/libelf.so"},
			{0x51000, 0x53000, 1, "/nonexistent/libelf.so"},
		},
		loads: []synthLoad{
			{vaddr: 0x10000, memsz: 0x1000, data: fill('A', 0x1000), flags: elf.PF_R | elf.PF_W},
			{vaddr: 0x11000, memsz: 0x1000, data: fill('B', 0x1000), flags: elf.PF_R | elf.PF_W},
			{vaddr: 0x20000, memsz: 0x2000, data: fill('C', 0x1000), flags: elf.PF_R},
			{vaddr: 0x40000, memsz: 0x1000, flags: elf.PF_R | elf.PF_X},
			{vaddr: 0x50000, memsz: 0x1000, data: elfPage(), flags: elf.PF_R},
			{vaddr: 0x51000, memsz: 0x2000, flags: elf.PF_R | elf.PF_X},
		},
	}
}

func TestSynthetic(t *testing.T) {
	for _, xnum := range []bool{false, true} {
		t.Run(fmt.Sprintf("xnum=%v", xnum), func(t *testing.T) {
			s := standardSynth()
			s.xnum = xnum
			c := mustOpenCore(t, writeSynth(t, s), Options{})
			if c.PID() != 100 || c.CrashTID() != 102 {
				t.Errorf("PID %d CrashTID %d, want 100 and 102", c.PID(), c.CrashTID())
			}
			th := c.Threads()
			if len(th) != 3 || th[0].TID != 100 || th[1].TID != 102 || th[2].TID != 101 {
				t.Fatalf("threads %+v, want 100 (main) then 102, 101", th)
			}
			r := th[1].Regs // thread 102: registers 1..27 in user_regs_struct order
			got := []uint64{r.R15, r.R14, r.R13, r.R12, r.Rbp, r.Rbx, r.R11, r.R10, r.R9, r.R8, r.Rax, r.Rcx, r.Rdx, r.Rsi, r.Rdi,
				r.OrigRax, r.Rip, r.Cs, r.Eflags, r.Rsp, r.Ss, r.FSBase, r.GSBase, r.Ds, r.Es, r.Fs, r.Gs}
			for i, v := range got {
				if v != uint64(i+1) {
					t.Errorf("register %d = %d, want %d", i, v, i+1)
				}
			}
			if th[0].Regs.FSBase != 122 || th[0].Signal != 11 {
				t.Errorf("main thread fs_base %d signal %d, want 122 and 11", th[0].Regs.FSBase, th[0].Signal)
			}

			buf := make([]byte, 16)
			if err := c.ReadMemory(0x10ff8, buf); err != nil || string(buf) != "AAAAAAAABBBBBBBB" {
				t.Errorf("read across two segments = %q, %v", buf, err)
			}
			if err := c.ReadMemory(0x20ff8, buf); !errors.Is(err, target.ErrUnmapped) {
				t.Errorf("read past a segment's file size without a file: %v, want ErrUnmapped", err)
			}
			if err := c.ReadMemory(0x12000, buf); !errors.Is(err, target.ErrUnmapped) {
				t.Errorf("read between segments: %v, want ErrUnmapped", err)
			}
			if err := c.ReadMemory(^uint64(0)-4, buf); !errors.Is(err, target.ErrUnmapped) {
				t.Errorf("read wrapping the address space: %v, want ErrUnmapped", err)
			}
			if err := c.ReadMemory(0x10000, nil); err != nil {
				t.Errorf("empty read: %v", err)
			}

			// data.bin: no page in the core, no file, not executable: not
			// a module. libbar.so: executable mapping (AT_ENTRY points
			// there, so it is the executable). libelf.so: ELF magic in
			// the core.
			mods := c.Modules()
			var names []string
			for _, m := range mods {
				names = append(names, fmt.Sprintf("%s %#x-%#x", m.Name, m.Start, m.End))
			}
			want := []string{"/nonexistent/libbar.so 0x40000-0x41000", "/nonexistent/libelf.so 0x50000-0x53000"}
			if strings.Join(names, ", ") != strings.Join(want, ", ") {
				t.Errorf("modules %q, want %q", names, want)
			}
			wantWarn := []string{
				"libbar.so: file not found (tried /nonexistent/libbar.so); its code and read-only data are unavailable",
				"libelf.so: file not found (tried /nonexistent/libelf.so); its code and read-only data are unavailable",
			}
			if w := c.Warnings(); strings.Join(w, "\n") != strings.Join(wantWarn, "\n") {
				t.Errorf("Warnings = %q, want %q", w, wantWarn)
			}
		})
	}
}

func TestSyntheticErrors(t *testing.T) {
	for _, c := range []struct {
		s    synthCore
		want string
	}{
		{synthCore{typ: elf.ET_EXEC}, ": not a core file (ELF type ET_EXEC)"},
		{synthCore{machine: elf.EM_AARCH64}, ": core is for machine EM_AARCH64; only EM_X86_64 is supported"},
		{synthCore{class: elf.ELFCLASS32}, ": x86-64 core with class ELFCLASS32 and data encoding ELFDATA2LSB; want ELFCLASS64, ELFDATA2LSB"},
	} {
		p := writeSynth(t, c.s)
		if _, err := Open(p, Options{}); err == nil || err.Error() != p+c.want {
			t.Errorf("Open = %v, want %s%s", err, p, c.want)
		}
	}

	// Program headers cut off.
	data := standardSynth().bytes()
	p := filepath.Join(t.TempDir(), "core")
	if err := os.WriteFile(p, data[:100], 0o644); err != nil {
		t.Fatal(err)
	}
	want := p + ": core is truncated: 7 program headers at offset 0x40 lie beyond the end of the file (100 bytes)"
	if _, err := Open(p, Options{}); err == nil || err.Error() != want {
		t.Errorf("Open(cut in the program headers) = %v, want %s", err, want)
	}
}

// TestSyntheticTruncatedNotes cuts the core inside its notes.
func TestSyntheticTruncatedNotes(t *testing.T) {
	s := standardSynth()
	data := s.bytes()
	notesOff := binary.LittleEndian.Uint64(data[64+8:])
	notesSize := binary.LittleEndian.Uint64(data[64+32:])
	// Cut inside the second NT_PRSTATUS: prpsinfo (12+8+136) and one
	// thread (12+8+336, 12+8+40) are complete.
	cut := notesOff + 156 + 356 + 60 + 100
	p := filepath.Join(t.TempDir(), "core")
	if err := os.WriteFile(p, data[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	c := mustOpenCore(t, p, Options{})
	var loadWarn []string
	want := []string{
		fmt.Sprintf("core is truncated: %d of %d bytes of the note segment at offset %#x present", cut-notesOff, notesSize, notesOff),
		"core is truncated: notes end inside the note at segment offset 0x23c",
	}
	for _, w := range c.Warnings() {
		if strings.Contains(w, "of segment at") || strings.Contains(w, "more segments") {
			loadWarn = append(loadWarn, w)
		}
	}
	if len(loadWarn) != 4 { // six loads, four of them with data
		t.Errorf("segment warnings %q, want one per load with data", loadWarn)
	}
	if w := c.Warnings(); len(w) < 3 || w[0] != want[0] || w[1] != want[1] {
		t.Errorf("Warnings = %q, want to start with %q", w, want)
	}
	if th := c.Threads(); len(th) != 1 || th[0].TID != 102 || c.PID() != 100 {
		t.Errorf("threads %+v pid %d, want thread 102 of process 100", th, c.PID())
	}
	if w := c.Warnings(); w[len(w)-1] != "core has no NT_FILE note: no modules" {
		t.Errorf("last warning %q", w[len(w)-1])
	}
}

// TestSyntheticNTFile checks that malformed NT_FILE notes become
// warnings.
func TestSyntheticNTFile(t *testing.T) {
	s := standardSynth()
	data := s.bytes()
	// Find the NT_FILE descriptor and make its count exceed the limit.
	i := bytes.Index(data, []byte("CORE\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x10"))
	if i < 0 {
		t.Fatal("NT_FILE descriptor not found")
	}
	desc := i + 8
	binary.LittleEndian.PutUint64(data[desc:], MaxMappings+1)
	p := filepath.Join(t.TempDir(), "core")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	c := mustOpenCore(t, p, Options{})
	want := fmt.Sprintf("reading NT_FILE note at offset %#x of %s: %d mappings, more than %d (limit MaxMappings); no modules from it", desc-20, p, MaxMappings+1, MaxMappings)
	if w := c.Warnings(); len(w) != 2 || w[0] != want || w[1] != "core has no NT_FILE note: no modules" {
		t.Errorf("Warnings = %q, want [%q, no modules]", w, want)
	}
	binary.LittleEndian.PutUint64(data[desc:], 5) // more than the 4 names
	// (the longer table also swallows the first name and a half)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	c2 := mustOpenCore(t, p, Options{})
	if w := c2.Warnings(); len(w) != 2 || !strings.HasSuffix(w[0], ": names end after 3 of 5 mappings; no modules from it") {
		t.Errorf("Warnings = %q", w)
	}
	binary.LittleEndian.PutUint64(data[desc:], 8) // the table overruns the note
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	c3 := mustOpenCore(t, p, Options{})
	if w := c3.Warnings(); len(w) != 2 || !strings.HasSuffix(w[0], ": 8 mappings need 208 bytes, note has 203; no modules from it") {
		t.Errorf("Warnings = %q", w)
	}
}

// TestSyntheticHostile corrupts every byte of the headers and notes of a
// synthetic core in turn: Open may fail, but must not panic, and what it
// returns must be usable.
func TestSyntheticHostile(t *testing.T) {
	for _, xnum := range []bool{false, true} {
		s := standardSynth()
		s.xnum = xnum
		orig := s.bytes()
		notesEnd := int(binary.LittleEndian.Uint64(orig[64+8:]) + binary.LittleEndian.Uint64(orig[64+32:]))
		positions := make([]int, 0, notesEnd+64)
		for i := 0; i < notesEnd; i++ {
			positions = append(positions, i)
		}
		if xnum {
			for i := len(orig) - 64; i < len(orig); i++ {
				positions = append(positions, i)
			}
		}
		p := filepath.Join(t.TempDir(), "core")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(orig); err != nil {
			t.Fatal(err)
		}
		for _, i := range positions {
			for _, v := range []byte{0x00, 0xff, 0x80, orig[i] ^ 0x01} {
				f.WriteAt([]byte{v}, int64(i))
				c, err := Open(p, Options{})
				if err == nil {
					for _, th := range c.Threads() {
						c.ReadMemory(th.Regs.Rsp, make([]byte, 32))
					}
					for _, m := range c.Modules() {
						c.ReadMemory(m.Start, make([]byte, 32))
					}
					c.ReadMemory(0x10ff8, make([]byte, 4096))
					c.Close()
				}
			}
			f.WriteAt(orig[i:i+1], int64(i))
		}
		f.Close()
	}
}
