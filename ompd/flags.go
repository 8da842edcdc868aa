package ompd

// Flags are a task's flags that OMPD exposes.
type Flags struct {
	Explicit   bool // tasktype: an explicit task (not the implicit task of a region)
	Final      bool
	Untied     bool // tiedness 0
	Serial     bool // task_serial: executed immediately, undeferred
	Started    bool
	Executing  bool
	Complete   bool
	Freed      bool
	Native     bool
	TeamSerial bool
}
