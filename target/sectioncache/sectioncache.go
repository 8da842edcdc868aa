// Package sectioncache keeps the decompressed debug sections of ELF files
// across runs, by build-id, in a directory private to the invoking user
// (privdir). Opening the compressed DWARF of a debug file (Debian's are
// compressed) is mostly inflating it; a cached section is read instead.
//
// An entry is one file, named after the build-id and the section, that
// holds a header and the section's bytes. The header names what it
// describes (build-id, section, the size and modification time of the
// file it came from, the compressed section's offset and size) and the
// data's length and CRC-32C: an entry that does not describe the file
// asked about, or whose data does not match, is not used and is removed,
// so that the next run writes it again. Entries are written to a
// temporary file and renamed into place, so that concurrent runs never
// see a partial one; the directory is kept under MaxBytes by removing the
// least recently used entries.
//
// On a local file system Get maps an entry rather than reading it: the
// data costs no copy and no Go heap, and the kernel shares its pages with
// other runs. The mapping is read-only and is never unmapped. No entry is
// ever written in place (they are renamed into place, and removed by
// unlinking), so a mapping stays valid; only a process of the same user
// that truncated an entry could make a read of it fault (target/elf reads
// debug sections with faults turned into errors). On a network file
// system, where an entry another node replaced may fault, entries are
// read.
//
// Besides sections, an entry may hold what was derived from a file (an
// index of its type names, say): its data then has any size (AnySize).
package sectioncache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ompd-inspect/ompd-inspect/target/privdir"
)

// DefaultMaxBytes bounds the directory's size when Open is given 0.
const DefaultMaxBytes = 1 << 30

// maxSectionBytes bounds one entry's data (as elf.MaxDebugSectionBytes
// bounds a section).
const maxSectionBytes = 1 << 30

// Key identifies a section of a file.
type Key struct {
	// BuildID is the file's build-id, lowercase hex.
	BuildID string
	// Section is the section's name (".debug_info").
	Section string
	// FileDev and FileIno are the device and inode of the file the
	// section comes from; FileSize, FileModTime and FileChangeTime (Unix
	// nanoseconds) identify its contents: its owner can set its
	// modification time, but not its change time, which any write or
	// change of its metadata moves. Offset and Size are the compressed
	// section's place in it.
	FileDev, FileIno                      uint64
	FileSize, FileModTime, FileChangeTime int64
	Offset, Size                          uint64
}

// Cache is an opened cache directory.
type Cache struct {
	dir    string
	uid    int
	max    int64
	mapped bool // entries are mapped, not read (localFS)
}

// DefaultDir is where the cache lives: $XDG_CACHE_HOME/ompd-inspect/sections,
// else ~/.cache/ompd-inspect/sections.
func DefaultDir() (string, error) {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "ompd-inspect", "sections"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("section cache: %w", err)
	}
	return filepath.Join(home, ".cache", "ompd-inspect", "sections"), nil
}

// Open opens (creating it if needed) the cache directory dir, refusing
// it unless it is private to the invoking user (privdir). maxBytes bounds
// its size (0: DefaultMaxBytes).
func Open(dir string, maxBytes int64) (*Cache, error) {
	uid := os.Getuid()
	resolved, err := privdir.Open("section cache", dir, uid)
	if err != nil {
		return nil, err
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &Cache{dir: resolved, uid: uid, max: maxBytes, mapped: localFS(resolved)}, nil
}

// localFileSystems are the file systems (statfs f_type) whose files are
// mapped: local ones, where a file renamed over or unlinked by another
// run keeps its pages. On a network file system (an NFS home directory,
// common on clusters) an entry another node replaced can fault when its
// pages are read again: entries there are read instead.
var localFileSystems = map[int64]bool{
	0xEF53:     true, // ext2, ext3, ext4
	0x58465342: true, // xfs
	0x9123683E: true, // btrfs
	0x01021994: true, // tmpfs
	0x794C7630: true, // overlayfs
	0x2FC12FC1: true, // zfs
	0xF2F52010: true, // f2fs
}

// localFS reports whether dir lies on a local file system.
func localFS(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && localFileSystems[int64(st.Type)]
}

// Dir is the cache's directory.
func (c *Cache) Dir() string { return c.dir }

// magic starts every entry.
const magic = "OMPDSEC2"

// name is the entry file of k; "" when k cannot name one (a build-id
// that is not hex, a section name with other characters than letters,
// digits, '.' and '_').
func name(k Key) string {
	if k.BuildID == "" || len(k.BuildID) > 256 || strings.Trim(k.BuildID, "0123456789abcdef") != "" {
		return ""
	}
	if k.Section == "" || len(k.Section) > 64 || strings.Trim(k.Section, "._abcdefghijklmnopqrstuvwxyz0123456789") != "" {
		return ""
	}
	return k.BuildID + "-" + strings.TrimPrefix(k.Section, ".")
}

// header is an entry's header: the key and the data's length and CRC. An
// entry describes one file (by device, inode and change time), so a file
// another user made to look like a system one (same build-id, size and
// modification time) cannot stand for it: its entry only replaces the
// system file's, which is then written again.
func header(k Key, n uint64, crc uint32) []byte {
	var b bytes.Buffer
	b.WriteString(magic)
	for _, s := range []string{k.BuildID, k.Section} {
		binary.Write(&b, binary.LittleEndian, uint16(len(s)))
		b.WriteString(s)
	}
	binary.Write(&b, binary.LittleEndian, []uint64{k.FileDev, k.FileIno, uint64(k.FileSize), uint64(k.FileModTime), uint64(k.FileChangeTime), k.Offset, k.Size, n})
	binary.Write(&b, binary.LittleEndian, crc)
	return b.Bytes()
}

// castagnoli is CRC-32C's table.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AnySize, given to Get as the size wanted, accepts data of any size: for
// entries that hold what was derived from a file (an index) rather than
// one of its sections.
const AnySize = ^uint64(0)

// Get returns the section k names as the cache holds it, or nil when it
// holds none that matches k and its own checksum (such an entry is
// removed). want is the section's decompressed size, which the data must
// have, or AnySize. The data is mapped read-only: it must not be written.
func (c *Cache) Get(k Key, want uint64) []byte {
	n := name(k)
	if n == "" || (want > maxSectionBytes && want != AnySize) {
		return nil
	}
	p := filepath.Join(c.dir, n)
	f, fi, err := privdir.OpenFile("section cache entry", p, c.uid)
	if err != nil {
		return nil // missing, or not safe to read (and not ours to remove)
	}
	defer f.Close()
	if want == AnySize {
		// The header's length does not depend on the data's.
		hlen := int64(len(header(k, 0, 0)))
		if fi.Size() < hlen || fi.Size()-hlen > maxSectionBytes {
			os.Remove(p)
			return nil
		}
		want = uint64(fi.Size() - hlen)
	}
	hdr := header(k, want, 0)
	if fi.Size() != int64(len(hdr))+int64(want) {
		os.Remove(p)
		return nil
	}
	buf, unmap, err := c.load(f, fi.Size())
	if err != nil {
		os.Remove(p)
		return nil
	}
	if !valid(buf, hdr) {
		unmap()
		os.Remove(p)
		return nil
	}
	data := buf[len(hdr):]
	now := time.Now()
	os.Chtimes(p, now, now) // recently used
	return data
}

// load maps or reads the n bytes of the entry f; unmap releases a
// mapping (it does nothing for data read).
func (c *Cache) load(f *os.File, n int64) (buf []byte, unmap func(), err error) {
	if !c.mapped {
		buf = make([]byte, n)
		_, err = io.ReadFull(f, buf)
		return buf, func() {}, err
	}
	buf, err = unix.Mmap(int(f.Fd()), 0, int(n), unix.PROT_READ, unix.MAP_PRIVATE)
	return buf, func() { unix.Munmap(buf) }, err
}

// valid reports whether the entry buf starts with the header hdr (but for
// its checksum) and its data has the header's checksum. A fault while
// reading a mapping (the file was cut short meanwhile) is a mismatch.
func valid(buf, hdr []byte) (ok bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	got, data := buf[:len(hdr)], buf[len(hdr):]
	crc := binary.LittleEndian.Uint32(got[len(hdr)-4:])
	return bytes.Equal(got[:len(hdr)-4], hdr[:len(hdr)-4]) && crc32.Checksum(data, castagnoli) == crc
}

// Put stores section k's decompressed data. Problems are returned for
// the caller to ignore or report: a cache that cannot be written is no
// reason to fail.
func (c *Cache) Put(k Key, data []byte) error {
	n := name(k)
	if n == "" || uint64(len(data)) > maxSectionBytes {
		return nil
	}
	tmp, err := os.CreateTemp(c.dir, ".tmp-"+n+"-*")
	if err != nil {
		return fmt.Errorf("section cache: %w", err)
	}
	defer func() {
		tmp.Close()
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(header(k, uint64(len(data)), crc32.Checksum(data, castagnoli))); err != nil {
		return fmt.Errorf("section cache: %w", err)
	}
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("section cache: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("section cache: %w", err)
	}
	if err = os.Rename(tmp.Name(), filepath.Join(c.dir, n)); err != nil {
		return fmt.Errorf("section cache: %w", err)
	}
	return c.trim()
}

// trim removes the least recently used entries (and temporary files
// older than a minute, left by runs that died) until the directory holds
// at most c.max bytes.
func (c *Cache) trim() error {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("section cache: %w", err)
	}
	type entry struct {
		path string
		size int64
		used time.Time
	}
	var all []entry
	var total int64
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		p := filepath.Join(c.dir, e.Name())
		if strings.HasPrefix(e.Name(), ".tmp-") {
			if time.Since(fi.ModTime()) > time.Minute {
				os.Remove(p)
			}
			continue
		}
		all = append(all, entry{p, fi.Size(), fi.ModTime()})
		total += fi.Size()
	}
	sort.Slice(all, func(i, j int) bool { return all[i].used.Before(all[j].used) })
	var errs []error
	for _, e := range all {
		if total <= c.max {
			break
		}
		if err := os.Remove(e.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		total -= e.size
	}
	if len(errs) > 0 {
		return fmt.Errorf("section cache: %w", errors.Join(errs...))
	}
	return nil
}
