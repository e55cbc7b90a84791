package main

import (
	"fmt"
	"io"
	"os"
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
		usageHead(fs.Output(), "enrol", "--keyring FILE --name NAME (--public-key KEY | --public-key-file FILE) [flags]", `Adds a supervisor's public key to the controller's keyring, with the
actions it may sign and the window it may sign in. KEY is what the pit
console shows after it makes a key in the supervisor's browser (the raw
key in base64); FILE is a PEM public key (tablectl keygen's NAME.pub).
The keyring is replaced whole (written beside it, then renamed), and
checked as the controller checks it. A running controller reloads its
keyring within 2 seconds of the change: no restart.`)
		printFlags(fs.Output(), fs)
	}
	keyring := fs.String("keyring", "", "the keyring `FILE` (mqtt.keyring; made when missing) (required)")
	name := fs.String("name", "", "the supervisor's `NAME` (A-Z a-z 0-9 . _ @ -) (required)")
	pubText := fs.String("public-key", "", "the public `KEY` in base64, as the pit console shows it")
	pubFile := fs.String("public-key-file", "", "a PEM public key `FILE` (tablectl keygen's NAME.pub)")
	actions := fs.String("actions", signedcmd.ActionsAll, "the `ACTIONS` the key may sign, comma-separated (* for all)")
	notBefore := fs.String("not-before", "", "RFC 3339 `TIME` from which the key may sign (default now)")
	notAfter := fs.String("not-after", "", "RFC 3339 `TIME` from which the key may no longer sign")
	validFor := fs.Duration("valid-for", 90*24*time.Hour, "with no --not-after: how `LONG` from --not-before the key may sign (0: no end)")
	comment := fs.String("comment", "", "a `NOTE` kept with the key (who, which browser)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *keyring == "":
		return usageError(fs, "--keyring is required")
	case *name == "":
		return usageError(fs, "--name is required")
	case *pubText == "" && *pubFile == "":
		return usageError(fs, "give the key: --public-key KEY (the pit console's base64) or --public-key-file FILE (keygen's NAME.pub)")
	case *pubText != "" && *pubFile != "":
		return usageError(fs, "--public-key and --public-key-file: give one")
	}
	text := *pubText
	if *pubFile != "" {
		b, err := smallfile.Read(*pubFile, 4096)
		if err != nil {
			return fmt.Errorf("--public-key-file: %w", err)
		}
		text = string(b)
	} else if looksLikeFile(text) {
		return usageError(fs, "--public-key %s: that is a file; --public-key takes the key's base64 text (as the pit console shows it): for a PEM file (keygen's NAME.pub) use --public-key-file %s", text, text)
	}
	pub, err := signedcmd.ParsePublicKey(text)
	if err != nil {
		flag := "--public-key"
		if *pubFile != "" {
			flag = "--public-key-file " + *pubFile
		}
		return usageError(fs, "%s: %v", flag, err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	e := signedcmd.Enrolment{Name: *name, PublicKey: pub, Comment: *comment, NotBefore: now}
	for _, a := range strings.Split(*actions, ",") {
		if a = strings.TrimSpace(a); a != "" {
			e.Actions = append(e.Actions, a)
		}
	}
	if *notBefore != "" {
		if e.NotBefore, err = time.Parse(time.RFC3339, *notBefore); err != nil {
			return usageError(fs, "--not-before: want RFC 3339 (2025-06-01T06:00:00Z): %v", err)
		}
	}
	switch {
	case *notAfter != "":
		if e.NotAfter, err = time.Parse(time.RFC3339, *notAfter); err != nil {
			return usageError(fs, "--not-after: want RFC 3339 (2025-09-01T06:00:00Z): %v", err)
		}
	case *validFor < 0:
		return usageError(fs, "--valid-for %v: want 0 (no end) or more", *validFor)
	case *validFor > 0:
		e.NotAfter = e.NotBefore.Add(*validFor)
	}
	if !e.NotAfter.IsZero() && !e.NotAfter.After(e.NotBefore) {
		return usageError(fs, "the window ends (%s) before it starts (%s)", e.NotAfter.UTC().Format(time.RFC3339), e.NotBefore.UTC().Format(time.RFC3339))
	}
	switch {
	case !e.NotAfter.IsZero() && !now.Before(e.NotAfter):
		warn(fs, "the key's window ended at %s: it is enrolled, but every command it signs is refused (expired); give --not-after or --valid-for for a window that is still open", e.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(e.NotBefore):
		warn(fs, "the key may sign only from %s: until then its commands are refused (not yet valid)", e.NotBefore.UTC().Format(time.RFC3339))
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

// looksLikeFile reports whether --public-key was given a file's name
// rather than the key: base64 of 32 bytes is 44 characters with no '.'
// or '/', while a keygen file is NAME.pub.
func looksLikeFile(s string) bool {
	if strings.HasSuffix(s, ".pub") || strings.HasSuffix(s, ".pem") || strings.ContainsAny(s, "./") && !strings.Contains(s, "BEGIN") {
		if _, err := os.Stat(s); err == nil || strings.HasSuffix(s, ".pub") || strings.HasSuffix(s, ".pem") {
			return true
		}
	}
	return false
}
