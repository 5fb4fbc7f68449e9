// Package buildinfo says which build of meshnode is running: the version
// the build stamped (make build sets it from git describe), else the
// module version or the VCS revision Go recorded, and the Go toolchain.
// Operators need it during a rolling upgrade — which nodes already run
// the new binary — so the version command, the start log line, GET
// /v1/status and the meshnode_build_info metric all print the same.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Version is set at build time:
//
//	go build -ldflags "-X github.com/meshnode/meshnode/internal/buildinfo.Version=v1.2.3"
//
// The Makefile passes `git describe --tags --always --dirty`.
var Version = "dev"

// Info is what one binary knows about its own build.
type Info struct {
	// Version is the stamped version; without one (a plain go build),
	// the module's version when built from a tagged module, else "dev".
	Version string
	// Revision is the VCS revision Go stamped (go build -buildvcs, the
	// default inside a git work tree), "" when none was recorded.
	Revision string
	// Modified: the work tree had uncommitted changes at build time.
	Modified bool
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// Read returns this binary's Info.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: Version}
	}
	return of(Version, bi)
}

// of is Read for a given stamp and build info (pure, for tests).
func of(stamp string, bi *debug.BuildInfo) Info {
	in := Info{Version: stamp, GoVersion: bi.GoVersion}
	if in.Version == "" {
		in.Version = "dev"
	}
	if in.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		in.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// ShortRevision is the first 12 hex digits of Revision ("" without one).
func (in Info) ShortRevision() string {
	if len(in.Revision) > 12 {
		return in.Revision[:12]
	}
	return in.Revision
}

// String is the one-line form: "v1.2.3 (go1.26.8)", with the revision
// when Go recorded one the version does not already name:
// "dev (rev 0123456789ab, modified; go1.26.8)".
func (in Info) String() string {
	var parts []string
	if r := in.ShortRevision(); r != "" && !strings.Contains(in.Version, r[:min(len(r), 7)]) {
		rev := "rev " + r
		if in.Modified {
			rev += ", modified"
		}
		parts = append(parts, rev)
	}
	if in.GoVersion != "" {
		parts = append(parts, in.GoVersion)
	}
	if len(parts) == 0 {
		return in.Version
	}
	return in.Version + " (" + strings.Join(parts, "; ") + ")"
}
