package buildinfo

import (
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFrom(t *testing.T) {
	rev := "0123456789abcdef0123456789abcdef01234567"
	bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/tablectl/tablectl", Version: "v0.3.1"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: "2026-11-25T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tt := range []struct {
		name     string
		bi       *debug.BuildInfo
		ok       bool
		stamped  string
		version  string
		short    string
		contains []string
	}{
		{"module version", bi, true, "", "v0.3.1", "v0.3.1 (0123456789ab+dirty)", []string{"revision " + rev, "(modified)", "from 2026-11-25T10:00:00Z"}},
		{"stamped wins", bi, true, "1.0.0", "1.0.0", "1.0.0 (0123456789ab+dirty)", []string{"tablectl 1.0.0 "}},
		{"work tree", &debug.BuildInfo{Main: debug.Module{Version: ""}}, true, "", "(devel)", "(devel)", []string{"tablectl (devel) go"}},
		{"no build info", nil, false, "", "unknown", "unknown", []string{"tablectl unknown"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			i := from(tt.bi, tt.ok, tt.stamped)
			if i.Version != tt.version || i.Short() != tt.short {
				t.Errorf("version %q short %q, want %q %q", i.Version, i.Short(), tt.version, tt.short)
			}
			for _, c := range tt.contains {
				if !strings.Contains(i.String(), c) {
					t.Errorf("%q lacks %q", i.String(), c)
				}
			}
			if i.Go == "" || !strings.Contains(i.Platform, "/") {
				t.Errorf("no toolchain or platform: %+v", i)
			}
		})
	}
}

// TestGet: a test binary has build info; its version is never empty.
func TestGet(t *testing.T) {
	if v := Get().Version; v == "" {
		t.Fatal("empty version")
	}
}

func TestWrite(t *testing.T) {
	var line, js strings.Builder
	if err := Write(&line, false); err != nil || line.String() != Get().String()+"\n" {
		t.Fatalf("one line: %q, %v", line.String(), err)
	}
	var got Info
	if err := Write(&js, true); err != nil || json.Unmarshal([]byte(js.String()), &got) != nil || got != Get() {
		t.Fatalf("JSON: %q, %v", js.String(), err)
	}
}
