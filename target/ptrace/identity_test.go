package ptrace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"testing"
)

// TestExecIdentity checks the identity of this test's own process against
// its auxiliary vector and the random bytes AT_RANDOM points to, read here
// from /proc/self/mem (execIdentity reads with process_vm_readv).
func TestExecIdentity(t *testing.T) {
	auxv, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		t.Fatal(err)
	}
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	var random []byte
	for i := 0; i+16 <= len(auxv); i += 16 {
		if binary.LittleEndian.Uint64(auxv[i:]) == atRandom {
			random = make([]byte, 16)
			if _, err := mem.ReadAt(random, int64(binary.LittleEndian.Uint64(auxv[i+8:]))); err != nil {
				t.Fatalf("reading AT_RANDOM's bytes from /proc/self/mem: %v", err)
			}
		}
	}
	if len(random) != 16 {
		t.Fatalf("no AT_RANDOM entry in this process's auxiliary vector")
	}
	id, err := execIdentity(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if want := append(append([]byte(nil), auxv...), random...); !bytes.Equal(id, want) {
		t.Errorf("identity is %d bytes, not the %d of the auxiliary vector and its random bytes", len(id), len(want))
	}
}

// TestIdentityOfUnreadableRandom checks that random bytes that cannot be
// read (a process being killed can still show its auxiliary vector) give
// an error, never an identity that differs from the process's own and
// would be taken for an exec.
func TestIdentityOfUnreadableRandom(t *testing.T) {
	entry := func(tag, val uint64) []byte {
		b := make([]byte, 16)
		binary.LittleEndian.PutUint64(b, tag)
		binary.LittleEndian.PutUint64(b[8:], val)
		return b
	}
	auxv := append(append(entry(6, 4096), entry(atRandom, 0x7ffc0010)...), entry(0, 0)...)
	random := []byte("0123456789abcdef")
	good := func(addr uint64, buf []byte) (int, error) {
		if addr != 0x7ffc0010 {
			t.Errorf("read at %#x, not at AT_RANDOM's 0x7ffc0010", addr)
		}
		return copy(buf, random), nil
	}
	id, err := identityOf(auxv, good)
	if err != nil || !bytes.Equal(id, append(append([]byte(nil), auxv...), random...)) {
		t.Errorf("readable: identity %q, %v", id, err)
	}
	gone := func(uint64, []byte) (int, error) { return 0, errors.New("no such process") }
	if id, err := identityOf(auxv, gone); err == nil {
		t.Errorf("unreadable random bytes gave identity %q, want an error", id)
	}
	short := func(_ uint64, buf []byte) (int, error) { return copy(buf, random[:8]), nil }
	if id, err := identityOf(auxv, short); err == nil {
		t.Errorf("8 of 16 random bytes gave identity %q, want an error", id)
	}
	noRandom := append(entry(6, 4096), entry(0, 0)...)
	if id, err := identityOf(noRandom, gone); err != nil || !bytes.Equal(id, noRandom) {
		t.Errorf("without AT_RANDOM: identity %q, %v; want the vector itself", id, err)
	}
	if id, err := identityOf(nil, good); err == nil {
		t.Errorf("empty vector gave identity %q, want an error", id)
	}
}
