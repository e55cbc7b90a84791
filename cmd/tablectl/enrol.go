package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/internal/smallfile"
	"github.com/tablectl/tablectl/signedcmd"
)

func init() {
	register(command{Name: "enrol", Short: "add a supervisor's public key (an enrolment request, or a key) to a keyring for the officer to sign", Run: runEnrol})
}

func runEnrol(args []string, stdout io.Writer) error {
	fs := newFlagSet("enrol")
	fs.Usage = func() {
		usageHead(fs.Output(), "enrol", "--keyring FILE (--request FILE | --name NAME (--public-key KEY | --public-key-file FILE)) [flags]",
			`The security officer's step, on the officer's machine: adds a supervisor's
public key to a keyring, with the actions it may sign and the window it
may sign in. FILE of --request is an enrolment request (the pit console
makes one for a key made in the browser, tablectl keygen NAME.request.json):
it carries the name and the key, signed with that key; check its key id
with the supervisor before signing it in. KEY is a raw key in base64;
--public-key-file a PEM public key. The keyring is checked as the
controller checks it and replaced whole; it is left unsigned (a draft):
sign it with tablectl keyring sign, then install it on the tables, where a
running controller takes it within 2 seconds (no restart). A keyring
enrolled into on a table box is refused by its controller.`)
		printFlags(fs.Output(), fs)
	}
	keyring := fs.String("keyring", "", "the keyring `FILE` (made when missing) (required)")
	request := fs.String("request", "", "an enrolment request `FILE` (name and key, signed with the key)")
	name := fs.String("name", "", "the supervisor's `NAME` (A-Z a-z 0-9 . _ @ -)")
	label := fs.String("key", "", "the key's `LABEL` among the supervisor's keys (needed for a second key of a name, and on the first)")
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
	case *request != "" && (*name != "" || *pubText != "" || *pubFile != ""):
		return usageError(fs, "--request carries the name and the key: give it alone, without --name, --public-key or --public-key-file")
	case *request == "" && *name == "":
		return usageError(fs, "give an enrolment request (--request FILE) or the supervisor's --name with the key")
	case *request == "" && *pubText == "" && *pubFile == "":
		return usageError(fs, "give the key: --public-key KEY (the pit console's base64) or --public-key-file FILE (keygen's NAME.pub)")
	case *pubText != "" && *pubFile != "":
		return usageError(fs, "--public-key and --public-key-file: give one")
	}
	e := signedcmd.Enrolment{Name: *name, Label: *label, Comment: *comment}
	if err := enrolKey(fs, &e, *request, *pubText, *pubFile); err != nil {
		return err
	}
	for _, a := range strings.Split(*actions, ",") {
		if a = strings.TrimSpace(a); a != "" {
			e.Actions = append(e.Actions, a)
		}
	}
	now := time.Now()
	var err error
	if e.NotBefore, e.NotAfter, err = enrolWindow(*notBefore, *notAfter, *validFor, now); err != nil {
		return usageError(fs, "%v", err)
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
	fmt.Fprintf(stdout, "enrolled %s (key %s) in %s, %s; the keyring is now unsigned: sign it (tablectl keyring sign --keyring %s --key officer.key) and install it on the tables\n",
		e.Name, audit.KeyID(e.PublicKey), *keyring, window, *keyring)
	return nil
}

// enrolKey fills e's key (and, from a request, its name and a comment)
// from the one source given: an enrolment request file, a base64 key or a
// PEM public key file. A mistake in what was given is a usage error that
// names the flag to use.
func enrolKey(fs *flag.FlagSet, e *signedcmd.Enrolment, request, pubText, pubFile string) error {
	if request != "" {
		b, err := smallfile.Read(request, 4096)
		if err != nil {
			return fmt.Errorf("--request: %w", err)
		}
		req, pub, err := signedcmd.ParseRequest(b)
		if err != nil {
			return fmt.Errorf("--request %s: %w", request, err)
		}
		e.Name, e.PublicKey = req.Name, pub
		if e.Comment == "" {
			e.Comment = "enrolment request of " + req.RequestedAt
			if req.Table != "" {
				e.Comment += " from table " + req.Table
			}
		}
		return nil
	}
	text := pubText
	if pubFile != "" {
		b, err := smallfile.Read(pubFile, 4096)
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
		if pubFile != "" {
			flag = "--public-key-file " + pubFile
		}
		return usageError(fs, "%s: %v", flag, err)
	}
	e.PublicKey = pub
	return nil
}

// enrolWindow is the key's validity window from the flags: from notBefore
// (now, to the second, when empty) to notAfter, or validFor after the
// start (0: no end).
func enrolWindow(notBefore, notAfter string, validFor time.Duration, now time.Time) (from, to time.Time, err error) {
	from = now.UTC().Truncate(time.Second)
	if notBefore != "" {
		if from, err = time.Parse(time.RFC3339, notBefore); err != nil {
			return from, to, fmt.Errorf("--not-before: want RFC 3339 (2025-06-01T06:00:00Z): %w", err)
		}
	}
	switch {
	case notAfter != "":
		if to, err = time.Parse(time.RFC3339, notAfter); err != nil {
			return from, to, fmt.Errorf("--not-after: want RFC 3339 (2025-09-01T06:00:00Z): %w", err)
		}
	case validFor < 0:
		return from, to, fmt.Errorf("--valid-for %v: want 0 (no end) or more", validFor)
	case validFor > 0:
		to = from.Add(validFor)
	}
	if !to.IsZero() && !to.After(from) {
		return from, to, fmt.Errorf("the window ends (%s) before it starts (%s)", to.UTC().Format(time.RFC3339), from.UTC().Format(time.RFC3339))
	}
	return from, to, nil
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
