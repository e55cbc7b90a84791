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
	register(command{name: "enrol", short: "add a supervisor's public key (an enrolment request, or a key) to a keyring for the officer to sign", run: runEnrol})
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
sign it with tablectl keyring sign, then install it on the tables. A
keyring enrolled into on a table box is refused by its controller.`)
		printFlags(fs.Output(), fs)
	}
	keyring := fs.String("keyring", "", "the keyring `FILE` (made when missing)")
	request := fs.String("request", "", "an enrolment request `FILE` (name and key, signed with the key)")
	name := fs.String("name", "", "the supervisor's `NAME` (A-Z a-z 0-9 . _ @ -)")
	label := fs.String("key", "", "the key's `LABEL` among the supervisor's keys (needed for a second key of a name, and on the first)")
	pubText := fs.String("public-key", "", "the public `KEY` in base64")
	pubFile := fs.String("public-key-file", "", "a PEM public key `FILE` (tablectl keygen's NAME.pub)")
	actions := fs.String("actions", signedcmd.ActionsAll, "the actions the key may sign, comma-separated (* for all)")
	notBefore := fs.String("not-before", "", "RFC 3339 `TIME` from which the key may sign (default now)")
	notAfter := fs.String("not-after", "", "RFC 3339 `TIME` from which the key may no longer sign")
	validFor := fs.Duration("valid-for", 90*24*time.Hour, "with no --not-after: how long from --not-before the key may sign (0: no end)")
	comment := fs.String("comment", "", "a note kept with the key (who, which browser)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	given := 0
	for _, s := range []string{*request, *pubText, *pubFile} {
		if s != "" {
			given++
		}
	}
	if *keyring == "" || given != 1 || (*request == "") == (*name == "") {
		fmt.Fprintln(fs.Output(), "--keyring, and either --request or --name with one of --public-key or --public-key-file, are required")
		return errUsage
	}
	e := signedcmd.Enrolment{Name: *name, Label: *label, Comment: *comment}
	if err := enrolKey(&e, *request, *pubText, *pubFile); err != nil {
		return err
	}
	for _, a := range strings.Split(*actions, ",") {
		if a = strings.TrimSpace(a); a != "" {
			e.Actions = append(e.Actions, a)
		}
	}
	var err error
	if e.NotBefore, e.NotAfter, err = enrolWindow(*notBefore, *notAfter, *validFor, time.Now()); err != nil {
		return err
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
// PEM public key file.
func enrolKey(e *signedcmd.Enrolment, request, pubText, pubFile string) error {
	if request != "" {
		b, err := smallfile.Read(request, 4096)
		if err != nil {
			return err
		}
		req, pub, err := signedcmd.ParseRequest(b)
		if err != nil {
			return fmt.Errorf("%s: %w", request, err)
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
			return err
		}
		text = string(b)
	}
	pub, err := signedcmd.ParsePublicKey(text)
	if err != nil {
		return err
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
			return from, to, fmt.Errorf("--not-before: %w", err)
		}
	}
	switch {
	case notAfter != "":
		if to, err = time.Parse(time.RFC3339, notAfter); err != nil {
			return from, to, fmt.Errorf("--not-after: %w", err)
		}
	case validFor > 0:
		to = from.Add(validFor)
	}
	return from, to, nil
}
