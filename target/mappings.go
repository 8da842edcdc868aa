package target

// FileMapping is one mapping of a file into a target's address space, as
// /proc/PID/maps or a core's NT_FILE note lists it.
type FileMapping struct {
	Name       string // the file's path
	Start, End uint64 // the addresses mapped
	Offset     uint64 // the file offset mapped at Start
}

// FileGroup gathers the mappings of one file: a module once its file is
// opened.
type FileGroup struct {
	Name       string
	Start, End uint64 // the lowest start and the highest end of its mappings
	// First is the index, in the list grouped, of the mapping with the
	// lowest file offset (the lowest address among equals): the one the
	// module's load bias is computed from.
	First int
	// Members are the indexes of its mappings, in the order listed.
	Members []int
}

// GroupFileMappings groups maps by file name, in the order the names first
// appear. Both backends list modules from it: a live process's maps and a
// core's NT_FILE note.
func GroupFileMappings(maps []FileMapping) []*FileGroup {
	byName := make(map[string]*FileGroup)
	var groups []*FileGroup
	for i, m := range maps {
		g := byName[m.Name]
		if g == nil {
			g = &FileGroup{Name: m.Name, Start: m.Start, End: m.End, First: i}
			byName[m.Name] = g
			groups = append(groups, g)
		}
		g.Members = append(g.Members, i)
		g.Start = min(g.Start, m.Start)
		g.End = max(g.End, m.End)
		if f := maps[g.First]; m.Offset < f.Offset || (m.Offset == f.Offset && m.Start < f.Start) {
			g.First = i
		}
	}
	return groups
}
