// Package buildinfo says which build of tablectl is running: the release
// version stamped at link time (the package builder sets it with -ldflags
// -X), else the module version, and the VCS revision the Go toolchain
// records. Operators see it in `tablectl version`, the start log, /health
// and the trail's start row, so a row can be traced to the code that wrote it.
package buildinfo

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// version is the release version, set at link time:
//
//	go build -ldflags "-X github.com/tablectl/tablectl/internal/buildinfo.version=1.2.0"
var version string

// revision, modified ("true") and commitTime are the VCS revision stamped at link time
// by a build the toolchain cannot stamp itself (a git worktree, whose .git
// is a file the go command does not recognise).
var revision, modified, commitTime string

// Info is one build's identity.
type Info struct {
	// Version is the release version, or the module version ("(devel)"
	// for a build from a work tree).
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from, Modified
	// whether the work tree had uncommitted changes, Time the commit's time.
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// Go is the toolchain, Platform GOOS/GOARCH.
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// Get reads the running binary's build information.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	i := from(bi, ok, version)
	if i.Revision == "" && revision != "" {
		i.Revision, i.Modified, i.Time = revision, modified == "true", commitTime
	}
	return i
}

func from(bi *debug.BuildInfo, ok bool, stamped string) Info {
	i := Info{Version: stamped, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if !ok || bi == nil {
		if i.Version == "" {
			i.Version = "unknown"
		}
		return i
	}
	if i.Version == "" {
		i.Version = bi.Main.Version
	}
	if i.Version == "" {
		i.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = s.Value
		case "vcs.time":
			i.Time = s.Value
		case "vcs.modified":
			i.Modified = s.Value == "true"
		}
	}
	return i
}

// Short is the version and the revision's first 12 digits, with "+dirty"
// for a build from a modified tree: what logs and rows carry.
func (i Info) Short() string {
	if i.Revision == "" {
		return i.Version
	}
	rev := i.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if i.Modified {
		rev += "+dirty"
	}
	return i.Version + " (" + rev + ")"
}

// String is the full line `tablectl version` prints.
func (i Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tablectl %s", i.Version)
	if i.Revision != "" {
		fmt.Fprintf(&b, " revision %s", i.Revision)
		if i.Modified {
			b.WriteString(" (modified)")
		}
		if i.Time != "" {
			fmt.Fprintf(&b, " from %s", i.Time)
		}
	}
	fmt.Fprintf(&b, " %s %s", i.Go, i.Platform)
	return b.String()
}

// Write prints the running binary's build: one line, or one JSON object
// with asJSON (every binary's `version`).
func Write(w io.Writer, asJSON bool) error {
	i := Get()
	if !asJSON {
		_, err := fmt.Fprintln(w, i)
		return err
	}
	b, err := json.Marshal(i)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
