package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ompd-inspect/ompd-inspect/ompd/llvm/recovery"
	"github.com/ompd-inspect/ompd-inspect/target/elf"
)

// newDebugFileCommand is `ompd-inspect debug-file RUNTIME DIR`.
func newDebugFileCommand(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "debug-file RUNTIME DIR",
		Short: "Write what ompd-inspect recovers from a stripped OpenMP runtime as a debug file for other debuggers",
		Long: "Recover the OMPD symbols of a stripped LLVM OpenMP runtime (libomp) from its code and write them as a separate debug file\n" +
			"DIR/.build-id/xx/rest.debug, named by the runtime's build-id. gdb then finds them with\n" +
			"'set debug-file-directory /usr/lib/debug:DIR' (naming DIR alone would hide the system's other debug files)\n" +
			"(and LLVM's OMPD library and gdb plugin work on the runtime), and a debuginfod server over DIR serves them.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			im, err := elf.Open(args[0])
			if err != nil {
				return err
			}
			defer im.Close()
			path, warnings, err := recovery.WriteDebugFile(im, args[1])
			if err != nil {
				return err
			}
			for _, w := range warnings {
				fmt.Fprintf(stderr, "ompd-inspect: warning: %s\n", w)
			}
			fmt.Fprintln(stdout, path)
			return nil
		},
	}
}
