package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/tablectl/tablectl/internal/config"
)

func init() {
	register(command{Name: "config", Short: "check a config file: every error with its line, column and key; exit 0 only if it would start and deal", Subs: configCommands})
}

// configCommands are config's subcommands.
var configCommands = []command{
	{Name: "check", Short: "check a config file as tablectl run would read it: every error with its line, column and key", Run: runConfigCheck},
}

// errConfigBad is returned once check has printed why the config would not
// start, or its table would not deal.
var errConfigBad = errors.New("the config would not start, or its table would not deal")

func runConfigCheck(args []string, stdout io.Writer) error {
	fs := newFlagSet("config check")
	fs.Usage = func() {
		usageHead(fs.Output(), "config check", "[flags] FILE", `Reads the controller's config FILE as tablectl run would, and says every
reason it would not start (JSON syntax, unknown keys, values of the wrong
type or form, files it names that are missing or unreadable), each with
its line, column and key path; the start-up self-check of this tablectl
and FILE against the signed manifest (self_check: a failure means the
table would start but refuse to deal); and warnings: no checkpoint key (the
trail would be unsigned), no keyring (every command refused), an HTTP
listener off loopback without TLS, no manifest with self_check.require off
(an unsigned development build), a shoe port that is not there (the
controller would start and wait for it). Unknown keys get the key they may
have meant. Findings are in the file's order. Exit 0 only when the
controller would start and deal.
Run it as the service's user (runuser -u tablectl --, or sudo -u tablectl)
to check what it can read.`)
		printFlags(fs.Output(), fs)
	}
	asJSON := fs.Bool("json", false, "print the findings as JSON")
	if err := parseFlagsArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError(fs, "one config FILE is needed, after the flags")
	}
	path := fs.Arg(0)
	findings, ok := config.Check(path)
	if *asJSON {
		b, err := json.Marshal(struct {
			File     string           `json:"file"`
			OK       bool             `json:"ok"`
			Findings []config.Finding `json:"findings"`
		}{path, ok, findings})
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		for _, f := range findings {
			fmt.Fprintf(stdout, "%s:%s\n", path, prefixSpace(f.String()))
		}
		switch {
		case ok && deviceMissing(findings):
			fmt.Fprintf(stdout, "%s: ok, the controller would start; it deals once the shoe's port is there (the warning above)\n", path)
		case ok:
			fmt.Fprintf(stdout, "%s: ok, the controller would start and deal\n", path)
		}
	}
	if !ok {
		return errConfigBad
	}
	return nil
}

// deviceMissing reports whether the findings say the shoe's port is not
// there.
func deviceMissing(fs []config.Finding) bool {
	for _, f := range fs {
		if f.Key == "shoe.port.path" && strings.HasPrefix(f.Message, config.DeviceMissing) {
			return true
		}
	}
	return false
}

func prefixSpace(s string) string {
	if len(s) > 0 && s[0] >= '0' && s[0] <= '9' {
		return s
	}
	return " " + s
}
