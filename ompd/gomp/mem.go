package gomp

import (
	"encoding/binary"
	"fmt"

	"github.com/ompd-inspect/ompd-inspect/ompd"
)

// mem reads the target's memory through the callbacks.
type mem struct{ cb ompd.Callbacks }

func (m *mem) read(addr uint64, buf []byte) error {
	if addr == 0 {
		return fmt.Errorf("read of %d bytes at address 0", len(buf))
	}
	return m.cb.ReadMemory(addr, buf)
}

func (m *mem) u64(addr uint64) (uint64, error) {
	var b [8]byte
	if err := m.read(addr, b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

func (m *mem) u32(addr uint64) (uint32, error) {
	var b [4]byte
	if err := m.read(addr, b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

func (m *mem) u8(addr uint64) (uint8, error) {
	var b [1]byte
	if err := m.read(addr, b[:]); err != nil {
		return 0, err
	}
	return b[0], nil
}
