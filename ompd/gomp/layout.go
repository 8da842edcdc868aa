package gomp

import (
	"bufio"
	"embed"
	"fmt"
	"strconv"
	"strings"
)

//go:embed layouts/*.txt
var layoutFiles embed.FS

// Layout holds offsets and sizes of libgomp's structures for one release:
// "TYPE.FIELD" gives a field's offset, "sizeof TYPE" and "sizeof
// TYPE.FIELD" sizes, "enum NAME" an enumerator. A Layout may be partial
// (fields dropped after a failed check, or an unknown release of which only
// the code's offsets are known).
type Layout struct {
	// Release is the GCC major release the table was generated for, 0 for
	// a layout made only of the offsets the code revealed.
	Release int
	vals    map[string]int64
	// fields are the offsets and sizes of the fields vals holds, indexed
	// by seal once vals no longer changes: a field read then looks up
	// one key, where vals takes two lookups and a key built for the size
	// (18% and 8% of the CPU of a report of 1024 threads).
	fields map[string]fieldAt
}

// fieldAt is the offset and the size of a field.
type fieldAt struct{ off, size uint64 }

// seal indexes the fields of l for field; l must not change after.
func (l *Layout) seal() {
	l.fields = make(map[string]fieldAt, len(l.vals)/2)
	for k, off := range l.vals {
		if strings.HasPrefix(k, "sizeof ") || strings.HasPrefix(k, "enum ") {
			continue
		}
		l.fields[k] = fieldAt{uint64(off), l.sizeOf(k)}
	}
}

// field returns the offset and the size of field key ("TYPE.FIELD"); the
// size is 8 when the layout does not give it.
func (l *Layout) field(key string) (off, size uint64, err error) {
	if f, ok := l.fields[key]; ok {
		return f.off, f.size, nil
	}
	if off, err = l.off(key); err != nil {
		return 0, 0, err
	}
	return off, l.sizeOf(key), nil
}

// sizeOf is the size of field key, 8 when the layout does not give it.
func (l *Layout) sizeOf(key string) uint64 {
	if v, ok := l.vals["sizeof "+key]; ok {
		return uint64(v)
	}
	return 8
}

// Get returns the value of key and whether the layout has it.
func (l *Layout) Get(key string) (int64, bool) {
	v, ok := l.vals[key]
	return v, ok
}

// Has reports whether the layout has every key.
func (l *Layout) Has(keys ...string) bool {
	for _, k := range keys {
		if _, ok := l.vals[k]; !ok {
			return false
		}
	}
	return true
}

// Keys returns the number of values the layout holds.
func (l *Layout) Keys() int { return len(l.vals) }

// off returns a field's offset or an error naming what is missing.
func (l *Layout) off(key string) (uint64, error) {
	v, ok := l.vals[key]
	if !ok {
		return 0, fmt.Errorf("libgomp layout: %s is not known (%s)", key, l.source())
	}
	return uint64(v), nil
}

func (l *Layout) source() string {
	if l.Release == 0 {
		return "unknown release: only offsets confirmed by code"
	}
	return fmt.Sprintf("table of GCC %d", l.Release)
}

// LayoutFor returns the table of GCC release major, if the package has one.
// newestTable is the newest release with a table: the field sizes an
// unknown release's confirmed offsets are read with.
const newestTable = 16

// LayoutFor returns the layout table of GCC release major.
func LayoutFor(major int) (*Layout, error) {
	data, err := layoutFiles.ReadFile(fmt.Sprintf("layouts/%d.txt", major))
	if err != nil {
		return nil, fmt.Errorf("no libgomp layout table for GCC %d: %w", major, err)
	}
	l, err := parseLayout(string(data))
	if err != nil {
		return nil, fmt.Errorf("libgomp layout table for GCC %d: %w", major, err)
	}
	l.Release = major
	return l, nil
}

// parseLayout reads the lines of a table (scripts/gen-libgomp-layouts.sh).
func parseLayout(text string) (*Layout, error) {
	l := &Layout{vals: map[string]int64{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		num := func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }
		switch {
		case len(f) == 3 && f[0] == "enum":
			v, err := num(f[2])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			l.vals["enum "+f[1]] = v
		case len(f) == 3 && f[1] == "-":
			v, err := num(f[2])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			l.vals["sizeof "+f[0]] = v
		case len(f) == 4:
			off, err := num(f[2])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			size, err := num(f[3])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			l.vals[f[0]+"."+f[1]] = off
			l.vals["sizeof "+f[0]+"."+f[1]] = size
		default:
			return nil, fmt.Errorf("line %d: %q is not TYPE FIELD OFFSET SIZE, TYPE - SIZE or enum NAME VALUE", n, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return l, nil
}

// knownNodes maps a version node to the GCC release that introduced it
// (layouts/versions.txt).
func knownNodes() (map[string]int, error) {
	return readPairs("layouts/versions.txt")
}

// knownBuilds maps a libgomp build-id (hex) to its GCC release
// (layouts/build-ids.txt).
func knownBuilds() (map[string]int, error) {
	return readPairs("layouts/build-ids.txt")
}

func readPairs(name string) (map[string]int, error) {
	data, err := layoutFiles.ReadFile(name)
	if err != nil {
		return nil, err
	}
	m := map[string]int{}
	for n, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("%s line %d: %q has no release", name, n+1, line)
		}
		v, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", name, n+1, err)
		}
		m[f[0]] = v
	}
	return m, nil
}
