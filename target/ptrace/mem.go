package ptrace

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/ompd-inspect/ompd-inspect/target"
)

// maxIovecs is the most iovecs one process_vm_readv call takes (IOV_MAX).
const maxIovecs = 1024

// memReader reads a process's memory with process_vm_readv, one iovec per
// page, and falls back to /proc/PID/mem when that system call is refused.
type memReader struct {
	pid int // the process, for messages
	tid int // a live thread, whose memory is the process's

	useFile atomic.Bool // process_vm_readv was refused: use /proc/TID/mem

	mu   sync.Mutex // guards file; process_vm_readv needs no lock
	file *os.File   // /proc/TID/mem, opened on first use
}

func newMemReader(pid, tid int) *memReader {
	return &memReader{pid: pid, tid: tid}
}

// ReadPages reads len(buf) bytes at addr and returns how many were read.
// When fewer, the error wraps target.ErrUnmapped if the next byte is not
// readable.
func (m *memReader) ReadPages(addr uint64, buf []byte) (int, error) {
	if len(buf) == 0 {
		return 0, nil
	}
	if addr+uint64(len(buf)) < addr {
		return 0, m.unmapped(addr, len(buf), addr)
	}
	if !m.useFile.Load() {
		n, err := m.readVM(addr, buf)
		if err == nil || n > 0 || !fallBack(err) {
			return n, err
		}
		m.useFile.Store(true)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.readFile(addr, buf)
}

// readable reports whether the byte at addr can be read now with
// process_vm_readv (false when the reader uses /proc/TID/mem instead),
// bypassing every cache.
func (m *memReader) readable(addr uint64) bool {
	if addr == 0 || m.useFile.Load() {
		return false
	}
	var b [1]byte
	n, err := m.readVM(addr, b[:])
	return err == nil && n == 1
}

// fallBack reports whether a process_vm_readv failure calls for
// /proc/PID/mem: the system call is missing or refused.
func fallBack(err error) bool {
	return errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)
}

// unmapped builds the error for a read of size bytes at addr that stopped
// at bad.
func (m *memReader) unmapped(addr uint64, size int, bad uint64) error {
	return fmt.Errorf("process %d: reading %d bytes at %#x: %#x: %w", m.pid, size, addr, bad, target.ErrUnmapped)
}

// readVM reads with process_vm_readv, one remote iovec per page so that a
// run of pages costs one system call per maxIovecs pages.
func (m *memReader) readVM(addr uint64, buf []byte) (int, error) {
	remote := make([]unix.RemoteIovec, 0, min(maxIovecs, len(buf)/target.PageSize+2))
	done := 0
	for done < len(buf) {
		// Build up to maxIovecs page pieces starting at addr+done.
		remote = remote[:0]
		a := addr + uint64(done)
		want := 0
		for done+want < len(buf) && len(remote) < maxIovecs {
			cur := a + uint64(want)
			n := int(target.PageSize - cur%target.PageSize)
			if rest := len(buf) - done - want; n > rest {
				n = rest
			}
			remote = append(remote, unix.RemoteIovec{Base: uintptr(cur), Len: n})
			want += n
		}
		local := []unix.Iovec{{Base: &buf[done]}}
		local[0].SetLen(want)
		n, err := unix.ProcessVMReadv(m.tid, local, remote, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			if errors.Is(err, unix.EFAULT) {
				return done, m.unmapped(addr, len(buf), a)
			}
			if errors.Is(err, unix.ESRCH) {
				return done, fmt.Errorf("process %d: reading %d bytes at %#x: %w", m.pid, len(buf), addr, err)
			}
			return done, fmt.Errorf("process %d: process_vm_readv of %d bytes at %#x: %w", m.pid, want, a, err)
		}
		done += n
		if n < want {
			return done, m.unmapped(addr, len(buf), addr+uint64(done))
		}
	}
	return done, nil
}

// ReadPageList implements target.PageListReader with one
// process_vm_readv of one remote iovec per page. With /proc/TID/mem (the
// system call refused) it reads no lists.
func (m *memReader) ReadPageList(addrs []uint64, buf []byte) (int, error) {
	if m.useFile.Load() {
		return 0, target.ErrNoPageList
	}
	n := len(addrs)
	if n > maxIovecs || n > len(buf)/target.PageSize {
		return 0, fmt.Errorf("process %d: a list of %d pages into %d bytes: at most %d, and room for each", m.pid, n, len(buf), maxIovecs)
	}
	if n == 0 {
		return 0, nil
	}
	remote := make([]unix.RemoteIovec, n)
	for i, a := range addrs[:n] {
		remote[i] = unix.RemoteIovec{Base: uintptr(a), Len: target.PageSize}
	}
	local := []unix.Iovec{{Base: &buf[0]}}
	local[0].SetLen(n * target.PageSize)
	for {
		got, err := unix.ProcessVMReadv(m.tid, local, remote, 0)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case fallBack(err):
			return 0, target.ErrNoPageList
		case errors.Is(err, unix.EFAULT):
			return 0, nil // the first page cannot be read
		case err != nil:
			return 0, fmt.Errorf("process %d: reading a list of %d pages: %w", m.pid, n, err)
		}
		return got / target.PageSize, nil
	}
}

// readFile reads with pread on /proc/TID/mem.
func (m *memReader) readFile(addr uint64, buf []byte) (int, error) {
	if m.file == nil {
		f, err := os.Open(fmt.Sprintf("/proc/%d/mem", m.tid))
		if err != nil {
			return 0, fmt.Errorf("process %d: reading memory: %w", m.pid, err)
		}
		m.file = f
	}
	done := 0
	for done < len(buf) {
		a := addr + uint64(done)
		if a > math.MaxInt64 {
			// Offsets are signed: the kernel half is not readable anyway.
			return done, m.unmapped(addr, len(buf), a)
		}
		n, err := unix.Pread(int(m.file.Fd()), buf[done:], int64(a))
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EIO) || errors.Is(err, unix.EFAULT) || (err == nil && n == 0):
			return done, m.unmapped(addr, len(buf), a)
		case err != nil:
			return done, fmt.Errorf("process %d: reading /proc/%d/mem at %#x: %w", m.pid, m.tid, a, err)
		}
		done += n
	}
	return done, nil
}

// close releases /proc/TID/mem.
func (m *memReader) close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.file == nil {
		return nil
	}
	err := m.file.Close()
	m.file = nil
	if err != nil {
		return fmt.Errorf("process %d: closing /proc/%d/mem: %w", m.pid, m.tid, err)
	}
	return nil
}
