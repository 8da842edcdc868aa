package recovery

// release is a libomp build the project has examined.
type release struct {
	name    string
	version int // LLVM major version: its name list is names/<version>.txt
}

// knownReleases are Debian 12's libomp packages, by build-id.
var knownReleases = map[string]release{
	"cfe4e8a3fd4c7275f52d8c3e3e96f593bff67ea6": {"Debian libomp5-13 1:13.0.1-11+b2", 13},
	"e9e0c9f73b23c8084edb4e0729bf87b9b7e3b563": {"Debian libomp5-14 1:14.0.6-12", 14},
	"861597ad0fca1891cd9974a9c37a8e5088206e6e": {"Debian libomp5-15 1:15.0.6-4+b1", 15},
	"05ca19636d348c9239a0433e3b383db4d4819baf": {"Debian libomp5-16 1:16.0.6-15~deb12u1", 16},
	"88dd4c1b40803a1eb06aab61e1089e0504fed768": {"Debian libomp5-19 1:19.1.7-3~deb12u1", 19},
}
