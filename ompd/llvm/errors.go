package llvm

import "github.com/ompd-inspect/ompd-inspect/ompd"

// fail returns the OMPD error of operation op.
func fail(op string, rc ompd.RC, err error) error { return &ompd.Error{Op: op, RC: rc, Err: err} }
