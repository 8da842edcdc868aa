package main

import (
	"os"
	"testing"
)

// TestMain runs the tests without the developer's or the machine's
// debuginfod servers: a test that wants one names it itself.
func TestMain(m *testing.M) {
	os.Unsetenv("DEBUGINFOD_URLS")
	os.Exit(m.Run())
}
