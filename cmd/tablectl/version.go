package main

import (
	"io"

	"github.com/tablectl/tablectl/internal/buildinfo"
)

func init() {
	register(command{name: "version", short: "print the build: version, VCS revision, Go, platform", run: runVersion})
}

func runVersion(args []string, stdout io.Writer) error {
	fs := newFlagSet("version")
	asJSON := fs.Bool("json", false, "print the build as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return buildinfo.Write(stdout, *asJSON)
}
