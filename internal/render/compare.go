package render

import (
	"fmt"
	"io"
	"strings"

	"github.com/ompd-inspect/ompd-inspect/internal/compare"
	"github.com/ompd-inspect/ompd-inspect/internal/inspect"
)

// Differences prints the result of comparing the native backend's report
// a with the dll backend's report b.
func Differences(w io.Writer, a, b *inspect.Report, res compare.Result) {
	ds := res.Differences
	lib := "the OMPD library"
	if l := b.Runtime.OMPDLibrary; l != nil {
		lib = l.Path
		if l.Version != "" {
			lib += " (" + l.Version + ")"
		}
	}
	fmt.Fprintf(w, "Comparing ompd-inspect's native OMPD with %s\n", lib)
	if len(b.Runtime.Unavailable) > 0 {
		fmt.Fprintf(w, "Not compared (no OMPD call gives them): %s\n", strings.Join(b.Runtime.Unavailable, ", "))
	}
	n := compare.Unexpected(ds)
	for _, d := range ds {
		fmt.Fprintln(w, "  "+d.Format())
	}
	switch {
	case len(ds) == 0:
		fmt.Fprintf(w, "No differences in %d fields.\n", res.Compared)
	case len(ds) == 1 && n == 0:
		fmt.Fprintf(w, "1 difference, a known defect of the library.\n")
	case len(ds) == 1:
		fmt.Fprintf(w, "1 difference, not known.\n")
	case n == 0:
		fmt.Fprintf(w, "%d differences, all known defects of the library.\n", len(ds))
	default:
		fmt.Fprintf(w, "%d differences, %d not known.\n", len(ds), n)
	}
}
