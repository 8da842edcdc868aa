package ptrace

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// fakeImage is an ELF image whose first loadable segment is linked at
// address 0 with file offset 0, as in a PIE or shared library.
type fakeImage struct {
	path    string
	matches bool   // whether BiasFor finds a segment
	buildID string // empty: none
}

func (f *fakeImage) BuildID() string { return f.buildID }

func (f *fakeImage) BiasFor(mapStart, fileOffset uint64) (uint64, bool) {
	if !f.matches {
		return 0, false
	}
	return mapStart - fileOffset, true
}

// fakeFiles is a file system of fake ELF and non-ELF files.
type fakeFiles struct {
	images     map[string]*fakeImage // open succeeds
	notELF     map[string]bool       // open fails; no ELF magic
	broken     map[string]bool       // open fails; ELF magic
	nonRegular map[string]bool
	statErr    map[string]error
	inodes     map[string]uint64 // stat's inode; 0 (not known) when absent
	// memIDs are the build-ids in the process's memory, by the address
	// of the object's header; memBuildID fails for any other address.
	memIDs map[uint64]string
	opened []string
	ided   []string // the paths fileBuildID read
	closed []string
}

func (f *fakeFiles) stat(path string) (fileStat, error) {
	if err := f.statErr[path]; err != nil {
		return fileStat{}, err
	}
	return fileStat{regular: !f.nonRegular[path], inode: f.inodes[path]}, nil
}

func (f *fakeFiles) open(path string) (image, error) {
	f.opened = append(f.opened, path)
	if img := f.images[path]; img != nil {
		return img, nil
	}
	if f.notELF[path] {
		return nil, fmt.Errorf("%s: bad magic number", path)
	}
	if f.broken[path] {
		return nil, fmt.Errorf("%s: truncated section headers", path)
	}
	return nil, fmt.Errorf("%s: %w", path, fs.ErrNotExist)
}

func (f *fakeFiles) isELF(path string) (bool, error) {
	switch {
	case f.notELF[path]:
		return false, nil
	case f.broken[path]:
		return true, nil
	}
	return false, fmt.Errorf("%s: %w", path, fs.ErrNotExist)
}

func (f *fakeFiles) close(img image) { f.closed = append(f.closed, img.(*fakeImage).path) }

func (f *fakeFiles) fileBuildID(path string) (string, error) {
	f.ided = append(f.ided, path)
	if img := f.images[path]; img != nil {
		return img.buildID, nil
	}
	return "", fmt.Errorf("%s: not a valid ELF file", path)
}

func (f *fakeFiles) memBuildID(tid int, addr uint64) (string, error) {
	if id, ok := f.memIDs[addr]; ok {
		return id, nil
	}
	return "", fmt.Errorf("reading the ELF header at %#x: input/output error", addr)
}

const fakeMaps = `00400000-00401000 r--p 00000000 08:01 11         /usr/lib/preload.so
00401000-00402000 r-xp 00001000 08:01 11         /usr/lib/preload.so
555555554000-555555555000 r--p 00000000 08:01 100        /usr/bin/prog
555555555000-555555556000 r-xp 00001000 08:01 100        /usr/bin/prog
555555557000-555555559000 rw-p 00002000 08:01 100        /usr/bin/prog
555555559000-55555557a000 rw-p 00000000 00:00 0          [heap]
7f0000000000-7f0000100000 r--p 00000000 08:01 200        /usr/lib/locale/locale-archive
7f0000200000-7f0000228000 r--p 00000000 08:01 300        /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000228000-7f00003bd000 r-xp 00028000 08:01 300        /usr/lib/x86_64-linux-gnu/libc.so.6
7f00003bd000-7f00003c1000 r--p 001bc000 08:01 300        /usr/lib/x86_64-linux-gnu/libc.so.6
7f00003c1000-7f00003c3000 rw-p 001c0000 08:01 300        /usr/lib/x86_64-linux-gnu/libc.so.6
7f00003c3000-7f00003d0000 rw-p 00000000 00:00 0 
7f0000400000-7f0000401000 rw-s 00000000 00:01 400        /dev/zero (deleted)
7f0000402000-7f0000403000 r-xp 00000000 00:01 401        /memfd:jit (deleted)
7f0000404000-7f0000405000 r--p 00000000 08:01 500        /opt/app/libgone.so (deleted)
7f0000405000-7f0000406000 r-xp 00001000 08:01 500        /opt/app/libgone.so (deleted)
7f0000406000-7f0000407000 rw-s 00000000 00:05 600        /dev/nvidia0
7f0000408000-7f0000409000 r--p 00000000 08:01 700        /opt/app/data.fifo
7f000040a000-7f000040b000 r-xp 00000000 08:01 800        /opt/app/libbad.so
7f000040c000-7f000040d000 r-xp 00001000 08:01 900        /opt/app/libpartial.so
7f000040e000-7f000040f000 r--p 00000000 08:01 1000       /opt/other ns/lib space.so
7f0000410000-7f0000411000 r--p 00000000 08:01 1100       /opt/app/libmismatch.so
7f0000412000-7f0000413000 r--p 00000000 08:01 1200       /tmp/scratch (deleted)
7f0000414000-7f0000415000 rw-p 00000000 00:0f 1300       anon_inode:[perf_event]
7f0000416000-7f0000417000 r-xp 00000000 08:01 1400       /opt/ns/libother.so
7f0000418000-7f0000419000 r-xp 00000000 08:01 1500       /opt/ovl/libsame.so
7f000041a000-7f000041b000 r-xp 00000000 08:01 1600       /opt/ns/libnoaccess.so
7f000041c000-7f000041d000 r-xp 00000000 08:01 1700       /opt/ns/libbroken.so
7f000041e000-7f000041f000 r--p 00000000 08:01 1800       /opt/ns/data.bin
7f0000420000-7f0000421000 r--p 00000000 08:01 1900       /opt/ns/dev
7f0000422000-7f0000423000 r-xp 00000000 08:01 2000       /opt/ns/libsamebuild.so
7f0000424000-7f0000425000 r-xp 00000000 08:01 2100       /opt/ns/libotherbuild.so
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0          [stack]
7ffd000fe000-7ffd00100000 r-xp 00000000 00:00 0          [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0  [vsyscall]
`

func TestBuildModules(t *testing.T) {
	maps, err := parseMaps([]byte(fakeMaps))
	if err != nil {
		t.Fatal(err)
	}
	if len(maps) != 35 {
		t.Fatalf("parsed %d mappings, want 35", len(maps))
	}
	if m := maps[20]; m != (mapping{start: 0x7f000040e000, end: 0x7f000040f000, offset: 0, inode: 1000, path: "/opt/other ns/lib space.so"}) {
		t.Fatalf("mapping with a space: %+v", m)
	}
	if m := maps[11]; m.path != "" || m.start != 0x7f00003c3000 {
		t.Fatalf("anonymous mapping: %+v", m)
	}

	img := func(path string) *fakeImage { return &fakeImage{path: path, matches: true} }
	const tid = 42
	gone := "/proc/42/map_files/7f0000404000-7f0000405000"
	space := "/proc/42/map_files/7f000040e000-7f000040f000"
	scratch := "/proc/42/map_files/7f0000412000-7f0000413000"
	other := "/proc/42/map_files/7f0000416000-7f0000417000"
	same := "/proc/42/map_files/7f0000418000-7f0000419000"
	noaccess := "/proc/42/map_files/7f000041a000-7f000041b000"
	mfBroken := "/proc/42/map_files/7f000041c000-7f000041d000"
	mfData := "/proc/42/map_files/7f000041e000-7f000041f000"
	mfDev := "/proc/42/map_files/7f0000420000-7f0000421000"
	noaccessSame := "/proc/42/map_files/7f0000422000-7f0000423000"
	noaccessOther := "/proc/42/map_files/7f0000424000-7f0000425000"
	build := func(path, id string) *fakeImage { return &fakeImage{path: path, matches: true, buildID: id} }
	files := &fakeFiles{
		images: map[string]*fakeImage{
			"/usr/bin/prog":                       img("/usr/bin/prog"),
			"/usr/lib/preload.so":                 img("/usr/lib/preload.so"),
			"/usr/lib/x86_64-linux-gnu/libc.so.6": img("/usr/lib/x86_64-linux-gnu/libc.so.6"),
			gone:                                  img(gone),
			"/opt/app/libpartial.so":              img("/opt/app/libpartial.so"),
			space:                                 img(space),
			"/opt/app/libmismatch.so":             {path: "/opt/app/libmismatch.so"},
			// Another build lies at the path than the one mapped.
			other:                 build(other, "aa01"),
			"/opt/ns/libother.so": build("/opt/ns/libother.so", "bb02"),
			// The same build, shown with another inode (overlayfs).
			same:                  build(same, "cc03"),
			"/opt/ovl/libsame.so": build("/opt/ovl/libsame.so", "cc03"),
			// map_files cannot be read (not root), nor the build-id in
			// memory: the path, warned.
			"/opt/ns/libnoaccess.so": img("/opt/ns/libnoaccess.so"),
			// map_files cannot be read, but the memory's build-id says
			// the path holds the same build (used quietly) or another
			// (not used).
			"/opt/ns/libsamebuild.so":  build("/opt/ns/libsamebuild.so", "dd04"),
			"/opt/ns/libotherbuild.so": build("/opt/ns/libotherbuild.so", "ff06"),
			// At the paths of the next three: ELF files the process did
			// not map, never read.
			"/opt/ns/libbroken.so": img("/opt/ns/libbroken.so"),
			"/opt/ns/data.bin":     img("/opt/ns/data.bin"),
			"/opt/ns/dev":          img("/opt/ns/dev"),
		},
		inodes: map[string]uint64{
			"/usr/bin/prog":            100, // as mapped
			"/opt/ns/libother.so":      1401,
			"/opt/ovl/libsame.so":      9999,
			"/opt/ns/libnoaccess.so":   1601,
			"/opt/ns/libbroken.so":     1701,
			"/opt/ns/data.bin":         1801,
			"/opt/ns/dev":              1901,
			"/opt/ns/libsamebuild.so":  2001,
			"/opt/ns/libotherbuild.so": 2101,
		},
		memIDs:     map[uint64]string{0x7f0000422000: "dd04", 0x7f0000424000: "ee05"},
		notELF:     map[string]bool{"/usr/lib/locale/locale-archive": true, scratch: true, mfData: true},
		broken:     map[string]bool{"/opt/app/libbad.so": true, mfBroken: true},
		nonRegular: map[string]bool{"/opt/app/data.fifo": true, mfDev: true},
		statErr: map[string]error{
			"/opt/other ns/lib space.so": &fs.PathError{Op: "stat", Path: "/opt/other ns/lib space.so", Err: fs.ErrNotExist},
			noaccess:                     &fs.PathError{Op: "stat", Path: noaccess, Err: fs.ErrPermission},
			noaccessSame:                 &fs.PathError{Op: "stat", Path: noaccessSame, Err: fs.ErrPermission},
			noaccessOther:                &fs.PathError{Op: "stat", Path: noaccessOther, Err: fs.ErrPermission},
		},
	}
	mods, warns := buildModules(groupMappings(maps, "/usr/bin/prog"), tid, files)

	want := []moduleInfo{
		{name: "/usr/bin/prog", file: "/usr/bin/prog", start: 0x555555554000, end: 0x555555559000, bias: 0x555555554000, img: files.images["/usr/bin/prog"]},
		{name: "/usr/lib/preload.so", file: "/usr/lib/preload.so", start: 0x400000, end: 0x402000, bias: 0x400000, img: files.images["/usr/lib/preload.so"]},
		{name: "/usr/lib/x86_64-linux-gnu/libc.so.6", file: "/usr/lib/x86_64-linux-gnu/libc.so.6", start: 0x7f0000200000, end: 0x7f00003c3000, bias: 0x7f0000200000, img: files.images["/usr/lib/x86_64-linux-gnu/libc.so.6"]},
		{name: "/opt/app/libgone.so", file: gone, start: 0x7f0000404000, end: 0x7f0000406000, bias: 0x7f0000404000, img: files.images[gone]},
		{name: "/opt/app/libbad.so", start: 0x7f000040a000, end: 0x7f000040b000},
		{name: "/opt/app/libpartial.so", file: "/opt/app/libpartial.so", start: 0x7f000040c000, end: 0x7f000040d000, bias: 0x7f000040b000, img: files.images["/opt/app/libpartial.so"]},
		{name: "/opt/other ns/lib space.so", file: space, start: 0x7f000040e000, end: 0x7f000040f000, bias: 0x7f000040e000, img: files.images[space]},
		{name: "/opt/app/libmismatch.so", file: "/opt/app/libmismatch.so", start: 0x7f0000410000, end: 0x7f0000411000},
		{name: "/opt/ns/libother.so", file: other, start: 0x7f0000416000, end: 0x7f0000417000, bias: 0x7f0000416000, img: files.images[other]},
		{name: "/opt/ovl/libsame.so", file: "/opt/ovl/libsame.so", start: 0x7f0000418000, end: 0x7f0000419000, bias: 0x7f0000418000, img: files.images["/opt/ovl/libsame.so"]},
		{name: "/opt/ns/libnoaccess.so", file: "/opt/ns/libnoaccess.so", start: 0x7f000041a000, end: 0x7f000041b000, bias: 0x7f000041a000, img: files.images["/opt/ns/libnoaccess.so"]},
		{name: "/opt/ns/libbroken.so", start: 0x7f000041c000, end: 0x7f000041d000},
		{name: "/opt/ns/libsamebuild.so", file: "/opt/ns/libsamebuild.so", start: 0x7f0000422000, end: 0x7f0000423000, bias: 0x7f0000422000, img: files.images["/opt/ns/libsamebuild.so"]},
		{name: "/opt/ns/libotherbuild.so", start: 0x7f0000424000, end: 0x7f0000425000},
	}
	if !reflect.DeepEqual(mods, want) {
		t.Errorf("modules:\n%s\nwant:\n%s", dumpModules(mods), dumpModules(want))
	}
	wantWarns := []string{
		"module /opt/app/libgone.so: the file was deleted after it was mapped; reading it through /proc/42/map_files/7f0000404000-7f0000405000",
		"module /opt/app/libbad.so: cannot be read: /opt/app/libbad.so: truncated section headers",
		"module /opt/other ns/lib space.so: stat /opt/other ns/lib space.so: file does not exist; reading it through /proc/42/map_files/7f000040e000-7f000040f000",
		"module /opt/app/libmismatch.so: the mapping at 0x7f0000410000 (file offset 0x0) matches no loadable segment of /opt/app/libmismatch.so; its symbols are not used",
		"module /opt/ns/libother.so: the file at that path is not the one the process mapped (another mount namespace, or replaced on disk); reading it through /proc/42/map_files/7f0000416000-7f0000417000",
		"module /opt/ns/libnoaccess.so: the file at that path is not the one the process mapped (another inode), and /proc/42/map_files/7f000041a000-7f000041b000 cannot be read: stat /proc/42/map_files/7f000041a000-7f000041b000: permission denied; reading the path, whose symbols and code may not be the process's",
		"module /opt/ns/libbroken.so: the file at that path is not the one the process mapped (another inode), and /proc/42/map_files/7f000041c000-7f000041d000 cannot be read: /proc/42/map_files/7f000041c000-7f000041d000: truncated section headers",
		"module /opt/ns/libotherbuild.so: the file at that path is another build (build-id ff06) than the process mapped (build-id ee05, read from its memory); its symbols and code are not used",
	}
	if !reflect.DeepEqual(warns, wantWarns) {
		t.Errorf("warnings:\n%q\nwant:\n%q", warns, wantWarns)
	}
	wantOpened := []string{
		"/usr/bin/prog", "/usr/lib/preload.so", "/usr/lib/locale/locale-archive",
		"/usr/lib/x86_64-linux-gnu/libc.so.6", gone, "/opt/app/libbad.so",
		"/opt/app/libpartial.so", space, "/opt/app/libmismatch.so", scratch,
		other, "/opt/ns/libother.so", same, "/opt/ovl/libsame.so",
		"/opt/ns/libnoaccess.so", mfBroken, mfData,
		"/opt/ns/libsamebuild.so",
	}
	if !reflect.DeepEqual(files.opened, wantOpened) {
		t.Errorf("opened:\n%q\nwant:\n%q", files.opened, wantOpened)
	}
	if want := []string{"/opt/app/libmismatch.so", "/opt/ns/libother.so", same}; !reflect.DeepEqual(files.closed, want) {
		t.Errorf("closed %q, want %q", files.closed, want)
	}
	// Another build is told from its notes, not opened.
	if want := []string{"/opt/ns/libsamebuild.so", "/opt/ns/libotherbuild.so"}; !reflect.DeepEqual(files.ided, want) {
		t.Errorf("build-ids read of %q, want %q", files.ided, want)
	}
}

func dumpModules(mods []moduleInfo) string {
	var b strings.Builder
	for _, m := range mods {
		fmt.Fprintf(&b, "  %s file=%s %#x-%#x bias=%#x img=%v\n", m.name, m.file, m.start, m.end, m.bias, m.img)
	}
	return b.String()
}

func TestGroupMappingsDeletedExecutable(t *testing.T) {
	maps, err := parseMaps([]byte(`7f0000000000-7f0000001000 r--p 00000000 08:01 1 /usr/lib/libz.so.1
7f0000001000-7f0000002000 r-xp 00001000 08:01 1 /usr/lib/libz.so.1
7f0000010000-7f0000011000 r--p 00000000 08:01 2 /tmp/prog (deleted)
7f0000011000-7f0000012000 r-xp 00001000 08:01 2 /tmp/prog (deleted)
`))
	if err != nil {
		t.Fatal(err)
	}
	groups := groupMappings(maps, "/tmp/prog (deleted)")
	var got []string
	for _, g := range groups {
		got = append(got, fmt.Sprintf("%s deleted=%v %#x-%#x first=%#x@%#x", g.name, g.deleted, g.start, g.end, g.first.start, g.first.offset))
	}
	want := []string{
		"/tmp/prog deleted=true 0x7f0000010000-0x7f0000012000 first=0x7f0000010000@0x0",
		"/usr/lib/libz.so.1 deleted=false 0x7f0000000000-0x7f0000002000 first=0x7f0000000000@0x0",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("groups %q, want %q", got, want)
	}
}

func TestParseMapsErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"zzz\n", `line 1: "zzz": too few fields`},
		{"7f00-7f01 r--p 0 08:01\n", `line 1: "7f00-7f01 r--p 0 08:01": too few fields`},
		{"7f00 r--p 0 08:01 1 /x\n", `line 1: "7f00 r--p 0 08:01 1 /x": bad address range`},
		{"0-1 r--p 0 0:0 0\n7g00-7f01 r--p 0 08:01 1 /x\n", `line 2: "7g00-7f01 r--p 0 08:01 1 /x": start address: strconv.ParseUint: parsing "7g00": invalid syntax`},
		{"7f00-7f01 r--p zz 08:01 1 /x\n", `line 1: "7f00-7f01 r--p zz 08:01 1 /x": offset: strconv.ParseUint: parsing "zz": invalid syntax`},
	}
	for _, tc := range tests {
		_, err := parseMaps([]byte(tc.in))
		if err == nil || err.Error() != tc.want {
			t.Errorf("parseMaps(%q): %v, want %s", tc.in, err, tc.want)
		}
	}
}

// TestParseMapsLineFast: the fast parser takes every line of a real maps
// file, and whatever it takes (of those lines, and of random damage done
// to them) it reads as parseMapsLine does.
func TestParseMapsLineFast(t *testing.T) {
	self, err := readProcFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(self)+fakeMaps, "\n"), "\n")
	anon := 0
	for _, l := range lines {
		m, ok := parseMapsLineFast([]byte(l))
		if !ok {
			t.Fatalf("fast parser refused %q", l)
		}
		want, err := parseMapsLine(l)
		if err != nil || m != want {
			t.Fatalf("%q: fast %+v, parseMapsLine %+v, %v", l, m, want, err)
		}
		if m.path == "" {
			anon++
		}
	}
	if anon == 0 {
		t.Fatal("no anonymous mapping among the lines")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "0123456789abcdefABCDEFxg- \t/()r"
	took := 0
	for range 50000 {
		b := []byte(lines[rng.IntN(len(lines))])
		for range 1 + rng.IntN(3) {
			i := rng.IntN(len(b) + 1)
			switch rng.IntN(3) {
			case 0:
				b = slices.Insert(b, i, alphabet[rng.IntN(len(alphabet))])
			case 1:
				if i < len(b) {
					b = slices.Delete(b, i, i+1)
				}
			default:
				if i < len(b) {
					b[i] = alphabet[rng.IntN(len(alphabet))]
				}
			}
		}
		m, ok := parseMapsLineFast(b)
		if !ok {
			continue
		}
		took++
		want, err := parseMapsLine(string(b))
		if err != nil || m != want {
			t.Fatalf("%q: fast %+v, parseMapsLine %+v, %v", b, m, want, err)
		}
	}
	if took == 0 {
		t.Fatal("the fast parser took none of the damaged lines")
	}
}

// earlyFake is fakeFiles with images opened before the stop, which
// openMapped takes again (earlyTaker).
type earlyFake struct {
	*fakeFiles
	early map[string]image
	taken []string
}

// open takes an image from before the stop first, as earlyFiles does.
func (e *earlyFake) open(path string) (image, error) {
	if img, ok := e.take(path); ok {
		return img, nil
	}
	return e.fakeFiles.open(path)
}

func (e *earlyFake) take(path string) (image, bool) {
	img, ok := e.early[path]
	if ok {
		delete(e.early, path)
		e.taken = append(e.taken, path)
	}
	return img, ok
}

// TestOpenMappedTakesEarly: after the stop, openMapped takes the image the
// pass before the stop opened instead of opening a file again, and makes
// the same choice with the same warning: a path whose build could not be
// confirmed is warned about again (the pass before the stop says
// nothing, and taking its image quietly lost the warning), the same
// build confirmed through map_files or the memory's build-id is not.
// Without root, another build at the path (or a build-id on one side
// only) is not used, its image closed or, when none was opened before,
// told from its notes without opening it; a path that cannot be read
// leaves no image, with one warning.
func TestOpenMappedTakesEarly(t *testing.T) {
	maps, err := parseMaps([]byte(`7f0000000000-7f0000001000 r-xp 00000000 08:01 10         /opt/ns/librootsame.so
7f0000002000-7f0000003000 r-xp 00000000 08:01 20         /opt/ns/libunknown.so
7f0000004000-7f0000005000 r-xp 00000000 08:01 30         /opt/ns/libmemsame.so
7f0000006000-7f0000007000 r-xp 00000000 08:01 40         /opt/ns/libother.so
7f0000008000-7f0000009000 r-xp 00000000 08:01 50         /opt/ns/libearlyother.so
7f000000a000-7f000000b000 r-xp 00000000 08:01 60         /opt/ns/liblateother.so
7f000000c000-7f000000d000 r-xp 00000000 08:01 70         /opt/ns/libunreadable.so
7f000000e000-7f000000f000 r-xp 00000000 08:01 80         /opt/ns/libnoid.so
`))
	if err != nil {
		t.Fatal(err)
	}
	groups := groupMappings(maps, "")
	const tid = 42
	build := func(path, id string) *fakeImage { return &fakeImage{path: path, matches: true, buildID: id} }
	rootSame := build("/opt/ns/librootsame.so", "aa")
	unknown := build("/opt/ns/libunknown.so", "bb")
	memSame := build("/opt/ns/libmemsame.so", "cc")
	otherMF := "/proc/42/map_files/7f0000006000-7f0000007000"
	refused := func(path string) error { return &fs.PathError{Op: "stat", Path: path, Err: fs.ErrPermission} }
	statErr := map[string]error{}
	for _, start := range []string{"7f0000002000-7f0000003000", "7f0000004000-7f0000005000", "7f0000008000-7f0000009000",
		"7f000000a000-7f000000b000", "7f000000c000-7f000000d000", "7f000000e000-7f000000f000"} {
		mf := "/proc/42/map_files/" + start
		statErr[mf] = refused(mf)
	}
	files := &earlyFake{
		fakeFiles: &fakeFiles{
			// Opened after the stop only if asked for: never here.
			images:  map[string]*fakeImage{"/opt/ns/liblateother.so": build("/opt/ns/liblateother.so", "ff")},
			inodes:  map[string]uint64{},
			statErr: statErr,
			memIDs:  map[uint64]string{0x7f0000004000: "cc", 0x7f0000008000: "ee", 0x7f000000a000: "ee", 0x7f000000e000: ""},
		},
		early: map[string]image{
			"/opt/ns/librootsame.so":   rootSame,
			"/opt/ns/libunknown.so":    unknown,
			"/opt/ns/libmemsame.so":    memSame,
			otherMF:                    build(otherMF, "dd"),
			"/opt/ns/libearlyother.so": build("/opt/ns/libearlyother.so", "ff"),
			"/opt/ns/libnoid.so":       build("/opt/ns/libnoid.so", "99"),
		},
	}
	type result struct {
		img  image
		file string
		warn string
		out  mappedOutcome
	}
	var got []result
	for _, g := range groups {
		img, file, warn, out := openMapped(files, g, tid)
		got = append(got, result{img, file, warn, out})
	}
	want := []result{
		{rootSame, "/opt/ns/librootsame.so", "", readImage},
		{unknown, "/opt/ns/libunknown.so", "module /opt/ns/libunknown.so: the file at that path is not the one the process mapped (another inode), and /proc/42/map_files/7f0000002000-7f0000003000 cannot be read: stat /proc/42/map_files/7f0000002000-7f0000003000: permission denied; reading the path, whose symbols and code may not be the process's", readImage},
		{memSame, "/opt/ns/libmemsame.so", "", readImage},
		{files.images[otherMF], otherMF, "module /opt/ns/libother.so: the file at that path is not the one the process mapped (another mount namespace, or replaced on disk); reading it through " + otherMF, readImage},
		{nil, "", "module /opt/ns/libearlyother.so: the file at that path is another build (build-id ff) than the process mapped (build-id ee, read from its memory); its symbols and code are not used", noImage},
		{nil, "", "module /opt/ns/liblateother.so: the file at that path is another build (build-id ff) than the process mapped (build-id ee, read from its memory); its symbols and code are not used", noImage},
		{nil, "", "module /opt/ns/libunreadable.so: the file at that path is not the one the process mapped (another inode), and /proc/42/map_files/7f000000c000-7f000000d000 cannot be read: stat /proc/42/map_files/7f000000c000-7f000000d000: permission denied; the path cannot be read either: /opt/ns/libunreadable.so: file does not exist", noImage},
		{nil, "", "module /opt/ns/libnoid.so: the file at that path is another build (build-id 99) than the process mapped (no build-id, read from its memory); its symbols and code are not used", noImage},
	}
	want[3].img = got[3].img // the early image of the mapped file, checked by path below
	if !reflect.DeepEqual(got, want) {
		t.Errorf("openMapped:\n%+v\nwant\n%+v", got, want)
	}
	if fi, ok := got[3].img.(*fakeImage); !ok || fi.path != otherMF {
		t.Errorf("libother.so read from %v, want the image of %s opened before the stop", got[3].img, otherMF)
	}
	// Nothing opened again but the path that could not be read; another
	// build told from its notes; what was taken and not used, closed.
	if want := []string{"/opt/ns/libunreadable.so"}; !reflect.DeepEqual(files.opened, want) {
		t.Errorf("opened %q after the stop; want only %q", files.opened, want)
	}
	if want := []string{"/opt/ns/liblateother.so"}; !reflect.DeepEqual(files.ided, want) {
		t.Errorf("build-ids read of %q, want %q", files.ided, want)
	}
	if wantTaken := []string{"/opt/ns/librootsame.so", "/opt/ns/libunknown.so", "/opt/ns/libmemsame.so", otherMF, "/opt/ns/libearlyother.so", "/opt/ns/libnoid.so"}; !reflect.DeepEqual(files.taken, wantTaken) {
		t.Errorf("taken %q, want %q", files.taken, wantTaken)
	}
	if want := []string{"/opt/ns/libearlyother.so", "/opt/ns/libnoid.so"}; !reflect.DeepEqual(files.closed, want) {
		t.Errorf("closed %q, want %q", files.closed, want)
	}
}
