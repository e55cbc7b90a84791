package main

import (
	"encoding/json"
	"fmt"
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
	i := buildinfo.Get()
	if *asJSON {
		b, err := json.Marshal(i)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return nil
	}
	fmt.Fprintln(stdout, i)
	return nil
}
