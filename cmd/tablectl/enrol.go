package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tablectl/tablectl/audit"
	signedcmd "github.com/tablectl/tablectl/command"
	"github.com/tablectl/tablectl/internal/smallfile"
)

func init() {
	register(command{name: "enrol", short: "add a supervisor's public key (a pit console's, or tablectl keygen's) to the keyring", run: runEnrol})
}

func runEnrol(args []string, stdout io.Writer) error {
	fs := newFlagSet("enrol")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: tablectl enrol --keyring FILE --name NAME (--public-key KEY | --public-key-file FILE) [flags]

Adds a supervisor's public key to the controller's keyring, with the
actions it may sign and the window it may sign in. KEY is what the pit
console shows after it makes a key in the supervisor's browser (the raw
key in base64); FILE is a PEM public key (tablectl keygen's NAME.pub).
The keyring is replaced whole (written beside it, then renamed), and
checked as the controller checks it. A running controller reloads its
keyring within 2 seconds of the change.

flags:
`)
		fs.PrintDefaults()
	}
	keyring := fs.String("keyring", "", "the keyring `FILE` (mqtt.keyring; made when missing)")
	name := fs.String("name", "", "the supervisor's `NAME` (A-Z a-z 0-9 . _ @ -)")
	pubText := fs.String("public-key", "", "the public `KEY` in base64, as the pit console shows it")
	pubFile := fs.String("public-key-file", "", "a PEM public key `FILE` (tablectl keygen's NAME.pub)")
	actions := fs.String("actions", signedcmd.ActionsAll, "the actions the key may sign, comma-separated (* for all)")
	notBefore := fs.String("not-before", "", "RFC 3339 `TIME` from which the key may sign (default now)")
	notAfter := fs.String("not-after", "", "RFC 3339 `TIME` from which the key may no longer sign")
	validFor := fs.Duration("valid-for", 90*24*time.Hour, "with no --not-after: how long from --not-before the key may sign (0: no end)")
	comment := fs.String("comment", "", "a note kept with the key (who, which browser)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *keyring == "" || *name == "" || (*pubText == "") == (*pubFile == "") {
		return fmt.Errorf("--keyring, --name and one of --public-key or --public-key-file are required")
	}
	text := *pubText
	if *pubFile != "" {
		b, err := smallfile.Read(*pubFile, 4096)
		if err != nil {
			return err
		}
		text = string(b)
	}
	pub, err := signedcmd.ParsePublicKey(text)
	if err != nil {
		return err
	}
	e := signedcmd.Enrolment{Name: *name, PublicKey: pub, Comment: *comment, NotBefore: time.Now().UTC().Truncate(time.Second)}
	for _, a := range strings.Split(*actions, ",") {
		if a = strings.TrimSpace(a); a != "" {
			e.Actions = append(e.Actions, a)
		}
	}
	if *notBefore != "" {
		if e.NotBefore, err = time.Parse(time.RFC3339, *notBefore); err != nil {
			return fmt.Errorf("--not-before: %w", err)
		}
	}
	switch {
	case *notAfter != "":
		if e.NotAfter, err = time.Parse(time.RFC3339, *notAfter); err != nil {
			return fmt.Errorf("--not-after: %w", err)
		}
	case *validFor > 0:
		e.NotAfter = e.NotBefore.Add(*validFor)
	}
	if err := signedcmd.EnrolFile(*keyring, e); err != nil {
		return err
	}
	window := "from " + e.NotBefore.UTC().Format(time.RFC3339)
	if !e.NotAfter.IsZero() {
		window += " to " + e.NotAfter.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(stdout, "enrolled %s (key %s) in %s, %s; a running controller takes it within seconds\n", *name, audit.KeyID(pub), *keyring, window)
	return nil
}
