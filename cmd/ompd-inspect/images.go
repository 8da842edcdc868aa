package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ompd-inspect/ompd-inspect/target/debuginfod"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
	"github.com/ompd-inspect/ompd-inspect/target/privdir"
	"github.com/ompd-inspect/ompd-inspect/target/sectioncache"
)

// debugDirHelp describes --debug-dir.
const debugDirHelp = "a directory to look for separate debug files in (DIR/.build-id/xx/rest.debug, or by debug-link name), before /usr/lib/debug; repeatable. Debuginfod servers named by DEBUGINFOD_URLS are asked too"

// addDebugDirFlag declares --debug-dir on c.
func addDebugDirFlag(c *cobra.Command, dirs *[]string) {
	c.Flags().StringArrayVar(dirs, "debug-dir", nil, debugDirHelp)
}

// imageOptions says where a core's modules find their separate debug
// files: the --debug-dir directories, then the debuginfod servers that
// DEBUGINFOD_URLS names (none when it is unset: no network use). What the
// client warns about goes to stderr.
func imageOptions(dirs []string, stderr io.Writer) elf.OpenOptions {
	client := debuginfodClient(stderr)
	opts := elf.OpenOptions{DebugDirs: dirs, Sections: sectionCache(stderr)}
	if client != nil {
		opts.Fetch = client.Fetcher(context.Background())
	}
	return opts
}

// liveImageOptions is imageOptions for a process that will be held
// stopped: the debuginfod servers are asked before, for the files the
// process maps now (prefetch, to be called before attaching), and while
// it is stopped only the cache is read, so that no network wait ever
// holds the target. A library it loads later (run, attach --trace) gets a
// debug file from a server only on a later run.
func liveImageOptions(dirs []string, stderr io.Writer) (opts elf.OpenOptions, prefetch func(pid int)) {
	client := debuginfodClient(stderr)
	opts = elf.OpenOptions{DebugDirs: dirs, Sections: sectionCache(stderr)}
	if client == nil || !client.Enabled() {
		return opts, func(int) {}
	}
	opts.Fetch = client.CachedFetcher()
	return opts, func(pid int) { prefetchDebugFiles(pid, dirs, client) }
}

// sectionCacheEnv names the section cache's directory, or "off".
const sectionCacheEnv = "OMPD_INSPECT_SECTION_CACHE"

// sectionCache opens the cache of decompressed debug sections:
// OMPD_INSPECT_SECTION_CACHE's directory, else the default one
// ($XDG_CACHE_HOME/ompd-inspect/sections, ~/.cache/ompd-inspect/sections);
// none when that variable is "off", no home directory is known or the
// directory cannot be made or read (another user's home, a read-only
// file system). A directory that is not private to the user is not used,
// with a warning (sudo keeps the invoking user's HOME: root would use a
// cache that user controls).
func sectionCache(stderr io.Writer) elf.SectionCache {
	dir := os.Getenv(sectionCacheEnv)
	switch {
	case dir == "off":
		return nil
	case dir == "":
		var err error
		if dir, err = sectioncache.DefaultDir(); err != nil {
			return nil
		}
	}
	c, err := sectioncache.Open(dir, 0)
	if err != nil {
		if errors.Is(err, privdir.ErrUnsafe) {
			fmt.Fprintf(stderr, "ompd-inspect: warning: %v\n", err)
		}
		return nil
	}
	return c
}

// debuginfodClient returns the client DEBUGINFOD_URLS describes (nil or
// not enabled when it names no server); its warnings go to stderr.
func debuginfodClient(stderr io.Writer) *debuginfod.Client {
	warn := func(s string) { fmt.Fprintf(stderr, "ompd-inspect: warning: %s\n", s) }
	client, warns := debuginfod.FromEnv()
	for _, w := range warns {
		warn(w)
	}
	if client != nil {
		client.Warn = warn
	}
	return client
}

// prefetchDebugFiles asks the servers for the debug file of every file
// process pid maps that has a build-id and no debug file found locally,
// so that the cache has them before the process is stopped. Failures are
// left to the lookups that follow (a file not found stays without).
func prefetchDebugFiles(pid int, dirs []string, client *debuginfod.Client) {
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return // the attach says what is wrong with the process
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || !strings.HasPrefix(f[5], "/") || seen[f[5]] {
			continue
		}
		seen[f[5]] = true
		im, err := elf.OpenWith(f[5], elf.OpenOptions{DebugDirs: dirs})
		if err != nil {
			continue
		}
		if id := im.BuildID(); id != "" && im.DebugFile() == "" {
			if _, err := client.Fetch(context.Background(), id); err != nil && !errors.Is(err, debuginfod.ErrNotFound) {
				client.Warn(err.Error())
			}
		}
		im.Close()
	}
}
