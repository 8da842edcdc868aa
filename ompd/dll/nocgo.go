//go:build !cgo

package dll

import "github.com/ompd-inspect/ompd-inspect/ompd/backend"

// BuiltIn reports whether this build can load OMPD libraries.
const BuiltIn = false

// Open reports that the backend is not built in.
func Open(path string, cb Callbacks, runtimeHint string) (backend.AddressSpace, error) {
	return nil, ErrNotBuiltIn
}
