package ptrace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/ompd-inspect/ompd-inspect/target"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// mapping is one line of /proc/PID/maps.
type mapping struct {
	start, end, offset uint64
	// inode is the mapped file's inode number, 0 for anonymous memory
	// (and when the line did not give it as a number).
	inode uint64
	path  string // as printed, possibly ending in " (deleted)"
}

// parseMaps parses the lines of /proc/PID/maps.
func parseMaps(data []byte) ([]mapping, error) {
	maps := make([]mapping, 0, bytes.Count(data, []byte{'\n'})+1)
	for line := 1; len(data) > 0; line++ {
		var s []byte
		s, data, _ = bytes.Cut(data, []byte{'\n'})
		s = bytes.TrimSuffix(s, []byte{'\r'})
		m, ok := parseMapsLineFast(s)
		if !ok {
			var err error
			if m, err = parseMapsLine(string(s)); err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
		}
		maps = append(maps, m)
	}
	return maps, nil
}

// parseMapsLineFast parses a line as the kernel prints it (single spaces
// between the first fields, addresses of at most 16 hex digits) without
// allocating for an anonymous mapping; false for anything else, which
// parseMapsLine then parses or refuses. A thousand threads' stacks make a
// long file of anonymous mappings, read while the process is stopped.
func parseMapsLineFast(s []byte) (mapping, bool) {
	var m mapping
	var ok bool
	if m.start, s, ok = hexField(s, '-'); !ok {
		return mapping{}, false
	}
	if m.end, s, ok = hexField(s, ' '); !ok {
		return mapping{}, false
	}
	if s, ok = skipField(s); !ok { // perms
		return mapping{}, false
	}
	if m.offset, s, ok = hexField(s, ' '); !ok {
		return mapping{}, false
	}
	if s, ok = skipField(s); !ok { // device
		return mapping{}, false
	}
	// The inode, which may end the line.
	if len(s) == 0 || s[0] == ' ' {
		return mapping{}, false
	}
	i := bytes.IndexByte(s, ' ')
	ino := s
	if i >= 0 {
		ino = s[:i]
	}
	if m.inode, ok = decField(ino); !ok {
		return mapping{}, false
	}
	if i < 0 {
		return m, true
	}
	if path := bytes.TrimLeft(s[i:], " "); len(path) > 0 {
		m.path = string(path)
	}
	return m, true
}

// hexField parses the hex number that starts s and ends at sep, and
// returns what follows sep.
func hexField(s []byte, sep byte) (v uint64, rest []byte, ok bool) {
	i := 0
	for ; i < len(s) && s[i] != sep; i++ {
		c := s[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, nil, false
		}
		if i == 16 {
			return 0, nil, false
		}
		v = v<<4 | uint64(d)
	}
	if i == 0 || i == len(s) {
		return 0, nil, false
	}
	return v, s[i+1:], true
}

// decField parses s, a decimal number of at most 19 digits.
func decField(s []byte) (uint64, bool) {
	if len(s) == 0 || len(s) > 19 {
		return 0, false
	}
	var v uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, true
}

// skipField returns what follows the non-empty field that starts s and
// the single space after it.
func skipField(s []byte) (rest []byte, ok bool) {
	i := bytes.IndexByte(s, ' ')
	if i <= 0 {
		return nil, false
	}
	return s[i+1:], true
}

// parseMapsLine parses "start-end perms offset dev inode   path".
func parseMapsLine(s string) (mapping, error) {
	var fields [5]string
	rest := s
	for i := range fields {
		rest = strings.TrimLeft(rest, " ")
		j := strings.IndexByte(rest, ' ')
		if j < 0 {
			if i < len(fields)-1 {
				return mapping{}, fmt.Errorf("%q: too few fields", s)
			}
			j = len(rest)
		}
		fields[i], rest = rest[:j], rest[j:]
	}
	var m mapping
	lo, hi, ok := strings.Cut(fields[0], "-")
	if !ok {
		return mapping{}, fmt.Errorf("%q: bad address range", s)
	}
	var err error
	if m.start, err = strconv.ParseUint(lo, 16, 64); err != nil {
		return mapping{}, fmt.Errorf("%q: start address: %w", s, err)
	}
	if m.end, err = strconv.ParseUint(hi, 16, 64); err != nil {
		return mapping{}, fmt.Errorf("%q: end address: %w", s, err)
	}
	if m.offset, err = strconv.ParseUint(fields[2], 16, 64); err != nil {
		return mapping{}, fmt.Errorf("%q: offset: %w", s, err)
	}
	// An inode that is not a number is not known: the path still is.
	m.inode, _ = strconv.ParseUint(fields[4], 10, 64)
	m.path = strings.TrimLeft(rest, " ")
	return m, nil
}

// deletedSuffix marks a mapped file that was unlinked.
const deletedSuffix = " (deleted)"

// isPseudoDeleted reports whether name (a deleted mapping's path) is a
// kernel object that maps shows as a deleted file: a memfd, SysV shared
// memory, shared anonymous memory.
func isPseudoDeleted(name string) bool {
	for _, p := range [...]string{"/memfd:", "/SYSV", "/dev/zero", "/anon_hugepage", "/[aio]", "/dmabuf:"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// fileGroup gathers the mappings of one file.
type fileGroup struct {
	name       string // path without " (deleted)"
	deleted    bool
	start, end uint64
	first      mapping // the mapping with the lowest file offset
}

// groupMappings groups file-backed mappings by path, skipping anonymous
// memory and pseudo-files, and orders the groups: the executable first,
// then by address.
func groupMappings(maps []mapping, exe string) []*fileGroup {
	exe = strings.TrimSuffix(exe, deletedSuffix)
	var files []target.FileMapping
	var kept []mapping
	var deleted []bool
	for _, m := range maps {
		if !strings.HasPrefix(m.path, "/") || strings.HasPrefix(m.path, "/dev/") {
			// Anonymous memory, [heap], [stack], [vdso], [vvar],
			// anon_inode:..., and device mappings.
			continue
		}
		name, del := strings.CutSuffix(m.path, deletedSuffix)
		if del && isPseudoDeleted(name) {
			continue
		}
		files = append(files, target.FileMapping{Name: name, Start: m.start, End: m.end, Offset: m.offset})
		kept = append(kept, m)
		deleted = append(deleted, del)
	}
	var groups []*fileGroup
	for _, g := range target.GroupFileMappings(files) {
		groups = append(groups, &fileGroup{name: g.Name, deleted: deleted[g.Members[0]], start: g.Start, end: g.End, first: kept[g.First]})
	}
	sort.SliceStable(groups, func(i, j int) bool {
		if (groups[i].name == exe) != (groups[j].name == exe) {
			return groups[i].name == exe
		}
		return groups[i].start < groups[j].start
	})
	return groups
}

// image is what module listing needs of an opened ELF file; *elf.Image
// provides it. Tests substitute a fake.
type image interface {
	BiasFor(mapStart, fileOffset uint64) (bias uint64, ok bool)
}

// fileStat is what module listing needs of a file's status.
type fileStat struct {
	regular bool
	inode   uint64 // 0 when not known
}

// fileOps is the file access module listing needs, so that tests can
// substitute fakes.
type fileOps interface {
	// stat stats path (following links).
	stat(path string) (fileStat, error)
	// open opens an ELF file.
	open(path string) (image, error)
	// isELF reports whether the file at path starts with the ELF magic.
	isELF(path string) (bool, error)
	// close releases an image.
	close(img image)
	// memBuildID reads the build-id of the ELF object whose header thread
	// tid's process maps at addr ("" when it has none).
	memBuildID(tid int, addr uint64) (string, error)
	// fileBuildID reads the build-id of the ELF file at path from its
	// notes alone ("" when it has none).
	fileBuildID(path string) (string, error)
}

// moduleInfo is a module before it becomes a target.Module.
type moduleInfo struct {
	name, file       string
	start, end, bias uint64
	img              image // nil when not usable
}

// loadModules lists the ELF modules of a process from /proc/TID/maps of
// one of its live threads, and returns the mappings it read them from.
// It returns warnings for modules it could list but not read.
func loadModules(pid, tid int, exe string, files fileOps) ([]mapping, []moduleInfo, []string, error) {
	maps, err := readMaps(pid, tid)
	if err != nil {
		return nil, nil, nil, err
	}
	mods, warns := buildModules(groupMappings(maps, exe), tid, files)
	return maps, mods, warns, nil
}

// readMaps reads and parses /proc/TID/maps of thread tid of process pid.
func readMaps(pid, tid int) ([]mapping, error) {
	path := fmt.Sprintf("/proc/%d/maps", tid)
	data, err := readProcFile(path)
	if err != nil {
		return nil, fmt.Errorf("process %d: reading the mappings: %w", pid, err)
	}
	maps, err := parseMaps(data)
	if err != nil {
		return nil, fmt.Errorf("process %d: %s: %w", pid, path, err)
	}
	return maps, nil
}

// mapFilesPath names the /proc/TID/map_files entry of a mapping, which
// reads the mapped file even when it was deleted or lies in another mount
// namespace.
func mapFilesPath(tid int, m mapping) string {
	return fmt.Sprintf("/proc/%d/map_files/%x-%x", tid, m.start, m.end)
}

// buildModules opens each group's file once and computes its bias. Files
// that are not ELF are skipped quietly.
func buildModules(groups []*fileGroup, tid int, files fileOps) ([]moduleInfo, []string) {
	var mods []moduleInfo
	var warns []string
	for _, g := range groups {
		file := g.name
		var why string // why file is not g.name
		if g.deleted {
			file = mapFilesPath(tid, g.first)
			why = "the file was deleted after it was mapped"
		} else if st, err := files.stat(g.name); err != nil {
			file = mapFilesPath(tid, g.first)
			why = err.Error()
		} else if !st.regular {
			continue // a FIFO or device: never open it
		} else if g.first.inode != 0 && st.inode != 0 && st.inode != g.first.inode {
			// Another file than the one mapped lies at that path now.
			img, f, warn, out := openMapped(files, g, tid)
			if warn != "" {
				warns = append(warns, warn)
			}
			switch out {
			case readImage:
				mods = append(mods, moduleWith(g, f, img, files, &warns))
				continue
			case skipModule:
				continue
			case noImage:
				mods = append(mods, moduleInfo{name: g.name, start: g.start, end: g.end})
				continue
			}
		}
		img, err := files.open(file)
		if err != nil {
			if isELF, serr := files.isELF(file); serr == nil && !isELF {
				continue
			}
			if why != "" {
				warns = append(warns, fmt.Sprintf("module %s: %s, and %s cannot be read: %v", g.name, why, file, err))
			} else {
				warns = append(warns, fmt.Sprintf("module %s: cannot be read: %v", g.name, err))
			}
			mods = append(mods, moduleInfo{name: g.name, start: g.start, end: g.end})
			continue
		}
		if why != "" {
			warns = append(warns, fmt.Sprintf("module %s: %s; reading it through %s", g.name, why, file))
		}
		mods = append(mods, moduleWith(g, file, img, files, &warns))
	}
	return mods, warns
}

// moduleWith is the module of group g read from img, opened from file:
// with its bias, or without an image (closed, and a warning added to
// warns) when no loadable segment of img matches the mapping.
func moduleWith(g *fileGroup, file string, img image, files fileOps, warns *[]string) moduleInfo {
	mod := moduleInfo{name: g.name, file: file, start: g.start, end: g.end}
	bias, ok := img.BiasFor(g.first.start, g.first.offset)
	if !ok {
		*warns = append(*warns, fmt.Sprintf("module %s: the mapping at %#x (file offset %#x) matches no loadable segment of %s; its symbols are not used",
			g.name, g.first.start, g.first.offset, file))
		files.close(img)
		return mod
	}
	mod.bias = bias
	mod.img = img
	if sp, ok := img.(interface {
		LoadSpan(bias uint64) (lo, hi uint64, ok bool)
	}); ok {
		// The file mapped again elsewhere (a program reading its own
		// file) is not part of the module.
		if lo, hi, ok := sp.LoadSpan(bias); ok {
			mod.start, mod.end = max(mod.start, lo), min(mod.end, hi)
		}
	}
	return mod
}

// mappedOutcome is what openMapped decided for a module.
type mappedOutcome int

const (
	// readImage: the image it returns is the module's.
	readImage mappedOutcome = iota
	// skipModule: the mapped file is not a regular ELF file.
	skipModule
	// noImage: the mapped file cannot be read; the module has no image.
	noImage
)

// earlyTaker is a fileOps that holds images opened before the process
// was stopped (earlyFiles).
type earlyTaker interface {
	// take returns the image opened early from path, when it is still
	// the file there.
	take(path string) (image, bool)
}

// openMapped opens the module of group g when the file its path names
// now is not the one the process mapped (their inodes differ: the
// process sees another mount namespace, or the file was replaced on
// disk). It reads the mapped file, through map_files, with a warning;
// but when the file at the path is the same build (the same build-id:
// the same file seen through another file system layer, as overlayfs
// may show it), that one, quietly: its debug files are found next to it.
// When map_files cannot be read (not root), the build-id in the
// process's memory decides (byMemoryBuildID). An image the pass before
// the stop opened is taken again rather than opened twice, and the
// choice made again, so that it is warned about as it was then. warn,
// when not empty, goes with the outcome.
func openMapped(files fileOps, g *fileGroup, tid int) (img image, file, warn string, out mappedOutcome) {
	mf := mapFilesPath(tid, g.first)
	other := fmt.Sprintf("module %s: the file at that path is not the one the process mapped (another mount namespace, or replaced on disk); reading it through %s", g.name, mf)
	if img, ok := takeEarly(files, mf); ok {
		return img, mf, other, readImage
	}
	unreadable := func(err error) string {
		return fmt.Sprintf("module %s: the file at that path is not the one the process mapped (another inode), and %s cannot be read: %v", g.name, mf, err)
	}
	st, err := files.stat(mf)
	if errors.Is(err, fs.ErrPermission) {
		return byMemoryBuildID(files, g, tid, unreadable(err))
	}
	if err != nil {
		return nil, "", unreadable(err), noImage
	}
	if !st.regular {
		return nil, "", "", skipModule // a device: never open it
	}
	// Before the stop the same build was found at the path.
	if img, ok := takeEarly(files, g.name); ok {
		return img, g.name, "", readImage
	}
	mapped, err := files.open(mf)
	if err != nil {
		if isELF, serr := files.isELF(mf); serr == nil && !isELF {
			return nil, "", "", skipModule
		}
		return nil, "", unreadable(err), noImage
	}
	if id := buildIDOf(mapped); id != "" {
		if same, err := files.open(g.name); err == nil {
			if buildIDOf(same) == id {
				files.close(mapped)
				return same, g.name, "", readImage
			}
			files.close(same)
		}
	}
	return mapped, mf, other, readImage
}

// byMemoryBuildID decides for openMapped when the mapped file cannot be
// read (refused: warn says so) by the build-id the process's memory holds
// (in the object's notes, mapped with its header), against the path's,
// from the image opened before the stop (takeEarly) or from the file's notes
// alone: the file at the path when it is that build, quietly; no image,
// warned, when it is another build (or only one of the two has a
// build-id); and when it cannot tell (the header not mapped, the memory
// or the file's notes unreadable, neither with a build-id) the path, with
// warn and a word that its symbols and code may not be the process's. A
// path that cannot be opened leaves the module without an image.
func byMemoryBuildID(files fileOps, g *fileGroup, tid int, warn string) (image, string, string, mappedOutcome) {
	mem, memErr := "", errors.New("the object's header is not mapped")
	if g.first.offset == 0 {
		mem, memErr = files.memBuildID(tid, g.first.start)
	}
	img, early := takeEarly(files, g.name)
	var atPath string
	pathErr := memErr // the path's build matters only against the memory's
	switch {
	case early:
		atPath, pathErr = buildIDOf(img), nil
	case memErr == nil:
		atPath, pathErr = files.fileBuildID(g.name)
	}
	known := memErr == nil && pathErr == nil // "" is no build-id
	if known && atPath != mem {
		if early {
			files.close(img)
		}
		return nil, "", fmt.Sprintf("module %s: the file at that path is another build (%s) than the process mapped (%s, read from its memory); its symbols and code are not used",
			g.name, describeBuildID(atPath), describeBuildID(mem)), noImage
	}
	if !early {
		var err error
		if img, err = files.open(g.name); err != nil {
			return nil, "", fmt.Sprintf("%s; the path cannot be read either: %v", warn, err), noImage
		}
	}
	if known && mem != "" {
		return img, g.name, "", readImage
	}
	return img, g.name, warn + "; reading the path, whose symbols and code may not be the process's", readImage
}

// takeEarly returns the image files opened from path before the stop,
// when files holds such images (earlyTaker) and path is still that file.
func takeEarly(files fileOps, path string) (image, bool) {
	if e, ok := files.(earlyTaker); ok {
		return e.take(path)
	}
	return nil, false
}

// describeBuildID names a build by its build-id, for a warning.
func describeBuildID(id string) string {
	if id == "" {
		return "no build-id"
	}
	return "build-id " + id
}

// buildIDOf returns img's build-id, empty when it has none.
func buildIDOf(img image) string {
	if b, ok := img.(interface{ BuildID() string }); ok {
		return b.BuildID()
	}
	return ""
}

// realFiles is fileOps on the real file system, opening images with the
// elf package, their debug files looked for where opts says.
type realFiles struct{ opts elf.OpenOptions }

func (realFiles) stat(path string) (fileStat, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStat{}, err
	}
	st := fileStat{regular: fi.Mode().IsRegular()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.inode = sys.Ino
	}
	return st, nil
}

func (r realFiles) open(path string) (image, error) {
	img, err := elf.OpenWith(path, r.opts)
	if err != nil {
		return nil, err
	}
	return img, nil
}

func (realFiles) isELF(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return false, nil
		}
		return false, err
	}
	return string(magic[:]) == "\x7fELF", nil
}

func (realFiles) close(img image) { closeImage(img) }

func (realFiles) fileBuildID(path string) (string, error) {
	// Not blocking on a FIFO put there meanwhile; ReadBuildID reads only
	// a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return elf.ReadBuildID(f)
}

func (realFiles) memBuildID(tid int, addr uint64) (string, error) {
	r := newMemReader(tid, tid)
	defer r.close()
	return elf.MemoryBuildID(func(a uint64, buf []byte) error {
		_, err := r.ReadPages(a, buf)
		return err
	}, addr)
}

// closeImage closes an image opened by realFiles.
func closeImage(img image) {
	if im, ok := img.(*elf.Image); ok {
		im.Close()
	}
}

// elfImage returns the *elf.Image behind img, nil for a fake.
func elfImage(img image) *elf.Image {
	im, _ := img.(*elf.Image)
	return im
}

// earlyListing is what openEarly listed before the stop, for the
// rehearsal: the live thread the process was read through, the mappings,
// and the modules with the images opened then.
type earlyListing struct {
	tid     int
	maps    []mapping
	modules []*target.Module
}

// targetModule is m as a target.Module, with img's image.
func (m moduleInfo) targetModule(img image) *target.Module {
	return &target.Module{Name: m.name, File: m.file, Start: m.start, End: m.end, Bias: m.bias, Image: elfImage(img)}
}

// openEarly opens the files of the process's modules from its mappings,
// read through its live thread tid, before it is stopped, and starts
// prepare (when not nil) on each image. What cannot be read now is left
// for loadModules to find and report once the process is stopped:
// nothing here is warned about.
func (p *Process) openEarly(tid int, prepare func(*elf.Image)) earlyListing {
	listed := earlyListing{tid: tid}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", tid))
	if err != nil {
		return listed
	}
	var mods []moduleInfo
	if listed.maps, mods, _, err = loadModules(p.pid, tid, exe, realFiles{p.imageOpts}); err != nil {
		return listed
	}
	p.early = make(map[string]image)
	// As many at a time as there are CPUs: each may hold a module's
	// debug information.
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, m := range mods {
		img := m.img
		kept, dup := p.early[m.file]
		switch {
		case img == nil:
		case dup: // one file mapped as two modules: one image
			closeImage(img)
			img = kept
		default:
			p.early[m.file] = img
			p.startPrepare(elfImage(img), prepare, slots)
		}
		listed.modules = append(listed.modules, m.targetModule(img))
	}
	return listed
}

// startPrepare runs prepare (when not nil) on im (when not nil) on a
// goroutine of its own, counted in p.prepared, at most as many at a time
// as slots holds.
func (p *Process) startPrepare(im *elf.Image, prepare func(*elf.Image), slots chan struct{}) {
	if im != nil && prepare != nil {
		p.prepared.Add(1)
		go func() {
			defer p.prepared.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			// A panic on a hostile file is not Prepare's to
			// report: the same work, done again when the report
			// needs it, fails there with one line.
			defer func() { _ = recover() }()
			prepare(im)
		}()
	}
}

// waitPrepared waits for the Prepare calls to return, or for a signal on
// the interrupt channel: the signal then ends Attach at once (preparing
// may take long: a debug file fetched from a server), and the images
// opened early are closed once the calls return.
func (p *Process) waitPrepared() (syscall.Signal, bool) {
	done := make(chan struct{})
	go func() {
		p.prepared.Wait()
		close(done)
	}()
	select {
	case <-done:
		return 0, false
	case s := <-p.interrupt: // a nil channel never delivers
		go p.releaseEarly()
		return toSyscallSignal(s), true
	}
}

// releaseEarly waits for the Prepare calls and closes the images opened
// early that no module took.
func (p *Process) releaseEarly() {
	p.prepared.Wait()
	for _, img := range p.early {
		closeImage(img)
	}
	p.early = nil
}

// earlyFiles opens files through fileOps, except those opened before the
// process was stopped (early, by file name), which it takes from there
// while the file is still the one opened: same device, inode, size and
// times.
type earlyFiles struct {
	fileOps
	early map[string]image
}

func (f *earlyFiles) open(path string) (image, error) {
	if img, ok := f.take(path); ok {
		return img, nil
	}
	return f.fileOps.open(path)
}

func (f *earlyFiles) take(path string) (image, bool) {
	if img, ok := f.early[path]; ok {
		if im := elfImage(img); im != nil && im.SameFile(path) {
			delete(f.early, path)
			return img, true
		}
	}
	return nil, false
}
