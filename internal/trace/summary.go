package trace

import (
	"sort"
)

// summer accumulates the summary.
type summer struct {
	rows     map[string]*row
	order    []string
	events   map[string]int
	threads  map[int]bool
	ignored  int
	warnings []string
}

type row struct {
	SummaryRow
	gtids map[int]bool
}

func newSummer() *summer {
	return &summer{rows: make(map[string]*row), events: make(map[string]int), threads: make(map[int]bool)}
}

// key identifies a construct.
func key(class, location, function string) string {
	return class + "\x00" + location + "\x00" + function
}

func (s *summer) row(class, location, function string) *row {
	k := key(class, location, function)
	r := s.rows[k]
	if r == nil {
		r = &row{SummaryRow: SummaryRow{Class: class, Location: location, Function: function}, gtids: make(map[int]bool)}
		s.rows[k] = r
		s.order = append(s.order, k)
	}
	return r
}

// begin counts a region or task that begins, and returns the key of its
// construct for end.
func (s *summer) begin(class, location, function string, team int, gtids []int) string {
	r := s.row(class, location, function)
	r.Count++
	r.TeamTotal += team
	for _, g := range gtids {
		if g >= 0 {
			r.gtids[g] = true
		}
	}
	return key(class, location, function)
}

// end counts a matched end, d seconds after its begin.
func (s *summer) end(k string, d float64, gtids []int) {
	r := s.rows[k]
	r.Ended++
	r.TimeTotal += d
	for _, g := range gtids {
		r.gtids[g] = true
	}
}

// summary returns the summary: regions first, then tasks, each by
// location.
func (s *summer) summary() *Summary {
	out := &Summary{Events: make(map[string]int), Threads: len(s.threads), Ignored: s.ignored, Warnings: append([]string{}, s.warnings...)}
	for k, n := range s.events {
		out.Events[k] = n
	}
	for _, k := range s.order {
		r := s.rows[k]
		row := r.SummaryRow
		row.Threads = len(r.gtids)
		if row.Class == ClassParallel {
			row.TeamMean = float64(row.TeamTotal) / float64(row.Count)
		}
		if row.Ended > 0 {
			row.TimeMean = row.TimeTotal / float64(row.Ended)
		}
		out.Rows = append(out.Rows, row)
	}
	sort.SliceStable(out.Rows, func(i, j int) bool {
		a, b := out.Rows[i], out.Rows[j]
		if a.Class != b.Class {
			return a.Class == ClassParallel
		}
		af, al, _ := splitLocation(a.Location)
		bf, bl, _ := splitLocation(b.Location)
		if af != bf {
			return af < bf
		}
		return al < bl
	})
	if out.Rows == nil {
		out.Rows = []SummaryRow{}
	}
	return out
}
