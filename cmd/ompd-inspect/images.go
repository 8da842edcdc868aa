package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ompd-inspect/ompd-inspect/target/debuginfod"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// debugDirHelp describes --debug-dir.
const debugDirHelp = "a directory to look for separate debug files in (DIR/.build-id/xx/rest.debug, or by debug-link name), before /usr/lib/debug; repeatable. Debuginfod servers named by DEBUGINFOD_URLS are asked too"

// addDebugDirFlag declares --debug-dir on c.
func addDebugDirFlag(c *cobra.Command, dirs *[]string) {
	c.Flags().StringArrayVar(dirs, "debug-dir", nil, debugDirHelp)
}

// imageOptions says where the targets' modules find their separate debug
// files: the --debug-dir directories, then the debuginfod servers that
// DEBUGINFOD_URLS names (none when it is unset: no network use). What the
// client warns about goes to stderr.
func imageOptions(dirs []string, stderr io.Writer) elf.OpenOptions {
	warn := func(s string) { fmt.Fprintf(stderr, "ompd-inspect: warning: %s\n", s) }
	client, warns := debuginfod.FromEnv()
	for _, w := range warns {
		warn(w)
	}
	opts := elf.OpenOptions{DebugDirs: dirs}
	if client != nil {
		client.Warn = warn
		opts.Fetch = client.Fetcher(context.Background())
	}
	return opts
}
