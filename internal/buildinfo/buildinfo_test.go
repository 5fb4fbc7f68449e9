package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestInfo(t *testing.T) {
	rev := "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name       string
		stamp      string
		main       string
		settings   []debug.BuildSetting
		want       Info
		wantString string
	}{
		{"plain go build outside git", "dev", "(devel)", nil,
			Info{Version: "dev", GoVersion: "go1.26.8"}, "dev (go1.26.8)"},
		{"empty stamp reads as dev", "", "(devel)", nil,
			Info{Version: "dev", GoVersion: "go1.26.8"}, "dev (go1.26.8)"},
		{"go build in a work tree", "dev", "(devel)",
			[]debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}},
			Info{Version: "dev", Revision: rev, Modified: true, GoVersion: "go1.26.8"},
			"dev (rev 0123456789ab, modified; go1.26.8)"},
		{"go install of a tagged module", "dev", "v1.4.0", nil,
			Info{Version: "v1.4.0", GoVersion: "go1.26.8"}, "v1.4.0 (go1.26.8)"},
		{"stamp wins over the module version", "v2.0.0-rc1", "v1.4.0", nil,
			Info{Version: "v2.0.0-rc1", GoVersion: "go1.26.8"}, "v2.0.0-rc1 (go1.26.8)"},
		{"git describe already names the revision", "v1.4.0-3-g0123456-dirty", "(devel)",
			[]debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}},
			Info{Version: "v1.4.0-3-g0123456-dirty", Revision: rev, Modified: true, GoVersion: "go1.26.8"},
			"v1.4.0-3-g0123456-dirty (go1.26.8)"},
		{"a bare describe hash", "0123456", "(devel)",
			[]debug.BuildSetting{{Key: "vcs.revision", Value: rev}},
			Info{Version: "0123456", Revision: rev, GoVersion: "go1.26.8"}, "0123456 (go1.26.8)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: tc.main}, Settings: tc.settings}
			got := of(tc.stamp, bi)
			if got != tc.want {
				t.Fatalf("of = %+v, want %+v", got, tc.want)
			}
			if s := got.String(); s != tc.wantString {
				t.Fatalf("String = %q, want %q", s, tc.wantString)
			}
		})
	}
}

// A revision shorter than a git abbreviation (not a git hash) is printed
// as it is, without indexing past it.
func TestStringOfAShortRevision(t *testing.T) {
	if got, want := (Info{Version: "dev", Revision: "abc"}).String(), "dev (rev abc)"; got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
}
