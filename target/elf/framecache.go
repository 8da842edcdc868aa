package elf

import (
	"maps"
	"slices"
	"sync"

	"github.com/ompd-inspect/ompd-inspect/target/sectioncache"
)

// The frame cache keeps what FramesAt and TailCalls answered for an image
// with DWARF across runs, in the section cache: a warm run names the
// frames it saw before without opening the DWARF (libc's debug file takes
// most of a small report's time to open). An answer depends only on the
// image's file and its DWARF's file, which the entry's key and header
// name; answers are kept only from runs whose DWARF gave no error.

// framesSection names the section cache's entry of an image's answers.
const framesSection = ".ompdi_frames1"

// maxCachedAnswers bounds the answers kept for one image (a test lowers
// it). When more would be kept, those the run did not use are dropped.
var maxCachedAnswers = 1 << 14

// frameCache is an image's cached answers.
type frameCache struct {
	mu     sync.Mutex
	im     *Image
	store  SectionCache
	key    sectioncache.Key
	src    fileIdentity // the DWARF's file, checked against the entry's
	frames map[uint64][]SourceFrame
	tails  map[[2]uint64][]TailCallFrame
	loaded bool // the section cache held answers for the image
	added  bool // answers were added in this run
	// usedFrames and usedTails are the answers this run asked for:
	// those kept when the cache is full.
	usedFrames map[uint64]bool
	usedTails  map[[2]uint64]bool
}

// fileIdentity names a file's contents: device, inode, size, modification
// and change times.
type fileIdentity [5]uint64

func (im *Image) identity() fileIdentity {
	return fileIdentity{im.dev, im.ino, uint64(im.size), uint64(im.mtime), uint64(im.ctime)}
}

// framesKey keys an image's frame cache (Derived).
type framesKey struct{}

// frameCacheOf returns the image's frame cache, loaded on first use; nil
// when the image has no section cache, no build-id or no DWARF, or when
// symbols were added to it (AddSymbols: answers then depend on them).
func (im *Image) frameCacheOf() *frameCache {
	if im.symsAdded.Load() {
		return nil
	}
	fc, _ := im.Derived(framesKey{}, func() any {
		key, keyed := im.cacheKey(framesSection, 0, 0)
		if im.sections == nil || !keyed {
			return (*frameCache)(nil)
		}
		src, err := im.dwarfSource()
		if err != nil || src.ino == 0 {
			return (*frameCache)(nil)
		}
		fc := &frameCache{im: im, store: im.sections, key: key, src: src.identity(),
			frames: map[uint64][]SourceFrame{}, tails: map[[2]uint64][]TailCallFrame{},
			usedFrames: map[uint64]bool{}, usedTails: map[[2]uint64]bool{}}
		loadCached(fc.store, fc.key, func(b []byte) bool {
			frames, tails, ok := decodeAnswers(b, fc.src)
			if ok {
				fc.frames, fc.tails, fc.loaded = frames, tails, true
			}
			return ok
		})
		return fc
	}).(*frameCache)
	return fc
}

// FramesCachedAt reports whether the frame cache holds FramesAt's answer
// for the link-time address addr.
func (im *Image) FramesCachedAt(addr uint64) bool {
	fc := im.frameCacheOf()
	if fc == nil {
		return false
	}
	_, ok := fc.lookupFrames(addr)
	return ok
}

// FramesCached reports whether the section cache held answers for the
// image: frames seen before may then be named without its DWARF.
func (im *Image) FramesCached() bool {
	fc := im.frameCacheOf()
	if fc == nil {
		return false
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.loaded
}

func (fc *frameCache) lookupFrames(addr uint64) ([]SourceFrame, bool) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	sf, ok := fc.frames[addr]
	if ok {
		fc.usedFrames[addr] = true
	}
	return sf, ok
}

// room reports whether this run may add an answer: it keeps at most
// maxCachedAnswers of them; fc.mu is held.
func (fc *frameCache) room() bool {
	return len(fc.usedFrames)+len(fc.usedTails) < maxCachedAnswers
}

func (fc *frameCache) addFrames(addr uint64, sf []SourceFrame) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.room() {
		fc.frames[addr] = sf
		fc.usedFrames[addr] = true
		fc.added = true
	}
}

func (fc *frameCache) lookupTails(ret, callee uint64) ([]TailCallFrame, bool) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	k := [2]uint64{ret, callee}
	t, ok := fc.tails[k]
	if ok {
		fc.usedTails[k] = true
	}
	return t, ok
}

func (fc *frameCache) addTails(ret, callee uint64, t []TailCallFrame) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.room() {
		k := [2]uint64{ret, callee}
		fc.tails[k] = t
		fc.usedTails[k] = true
		fc.added = true
	}
}

// trim drops the answers this run did not use while more than
// maxCachedAnswers are kept; fc.mu is held.
func (fc *frameCache) trim() {
	for a := range fc.frames {
		if len(fc.frames)+len(fc.tails) <= maxCachedAnswers {
			return
		}
		if !fc.usedFrames[a] {
			delete(fc.frames, a)
		}
	}
	for k := range fc.tails {
		if len(fc.frames)+len(fc.tails) <= maxCachedAnswers {
			return
		}
		if !fc.usedTails[k] {
			delete(fc.tails, k)
		}
	}
}

// onClose keeps the answers in the section cache when some were added and
// the image's DWARF gave no error (a budget that tripped, a malformed
// unit: answers that a clean run would give otherwise).
func (fc *frameCache) onClose() {
	if fc == nil {
		return // the image has no cache of answers
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if !fc.added || !fc.im.dwarfClean() || fc.im.symsAdded.Load() {
		return
	}
	fc.added = false
	fc.trim()
	_ = fc.store.Put(fc.key, encodeAnswers(fc.src, fc.frames, fc.tails)) // a cache that cannot be written only costs time
}

// dwarfClean reports whether the image's DWARF, if opened, and its
// symbols, if read, gave no error. Call it when no lookup runs any more
// (Close): it stops a later open.
func (im *Image) dwarfClean() bool {
	if im.LoadSymbols() != nil { // read already, whenever answers were added
		return false
	}
	im.dwOnce.Do(func() {}) // waits for an open in progress
	dd := im.dw
	if dd == nil {
		return im.dwErr == nil
	}
	dd.mu.Lock()
	defer dd.mu.Unlock()
	return dd.openErr == nil && !dd.exhausted && len(dd.errs) == 0
}

// encodeAnswers serializes answers: the DWARF file's identity, then the
// frames by address and the tail calls by address pair, in address
// order; numbers and lengths as LEB128.
func encodeAnswers(src fileIdentity, frames map[uint64][]SourceFrame, tails map[[2]uint64][]TailCallFrame) []byte {
	var w KeptWriter
	for _, v := range src {
		w.Uint(v)
	}
	addrs := slices.Sorted(maps.Keys(frames))
	w.Uint(uint64(len(addrs)))
	for _, a := range addrs {
		w.Uint(a)
		w.Uint(uint64(len(frames[a])))
		for _, f := range frames[a] {
			w.Str(f.Function)
			w.Str(f.File)
			w.Uint(uint64(f.Line))
			w.Flag(f.Inlined)
		}
	}
	pairs := slices.SortedFunc(maps.Keys(tails), func(x, y [2]uint64) int { return slices.Compare(x[:], y[:]) })
	w.Uint(uint64(len(pairs)))
	for _, p := range pairs {
		w.Uint(p[0])
		w.Uint(p[1])
		w.Uint(uint64(len(tails[p])))
		for _, t := range tails[p] {
			w.Uint(t.PC)
			w.Str(t.Function)
			w.Str(t.File)
			w.Uint(uint64(t.Line))
		}
	}
	return w.Data()
}

// decodeAnswers reads what encodeAnswers wrote; ok is false for data that
// does not parse whole or describes another DWARF file than src.
func decodeAnswers(b []byte, src fileIdentity) (frames map[uint64][]SourceFrame, tails map[[2]uint64][]TailCallFrame, ok bool) {
	r := NewKeptReader(b)
	line := func() int {
		v := r.Uint()
		if v > 1<<31 {
			r.Fail()
		}
		return int(v)
	}
	for _, v := range src {
		if r.Uint() != v {
			return nil, nil, false
		}
	}
	frames = map[uint64][]SourceFrame{}
	for n := r.Count(); n > 0 && !r.Bad(); n-- {
		a := r.Uint()
		var sf []SourceFrame
		for k := r.Count(); k > 0 && !r.Bad(); k-- {
			sf = append(sf, SourceFrame{Function: r.Str(), File: r.Str(), Line: line(), Inlined: r.Flag()})
		}
		frames[a] = sf
	}
	tails = map[[2]uint64][]TailCallFrame{}
	for n := r.Count(); n > 0 && !r.Bad(); n-- {
		p := [2]uint64{r.Uint(), r.Uint()}
		var ts []TailCallFrame
		for k := r.Count(); k > 0 && !r.Bad(); k-- {
			ts = append(ts, TailCallFrame{PC: r.Uint(), Function: r.Str(), File: r.Str(), Line: line()})
		}
		tails[p] = ts
	}
	if !r.Done() {
		return nil, nil, false
	}
	return frames, tails, true
}
