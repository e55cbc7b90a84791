package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/tablectl/tablectl/audit"

	"github.com/tablectl/tablectl/signedcmd"
)

func init() {
	register(command{Name: "keygen", Short: "make a supervisor's Ed25519 key pair for signed commands", Run: runKeygen})
}

func runKeygen(args []string, stdout io.Writer) error {
	fs := newFlagSet("keygen")
	fs.Usage = func() {
		usageHead(fs.Output(), "keygen", "--name NAME [--out DIR]", `Makes NAME.key (the private key: it signs commands and stays with the
supervisor, mode 0600), NAME.pub and NAME.request.json (the enrolment
request, signed with the new key) in DIR, and prints the keyring entry.
Send the request to the security officer, who enrols it and signs the
keyring (tablectl enrol --request, tablectl keyring sign).`)
		printFlags(fs.Output(), fs)
	}
	name := fs.String("name", "", "the supervisor's `NAME` as commands carry it (A-Z a-z 0-9 . _ @ -)")
	out := fs.String("out", ".", "the `DIR` to write the key files to")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *name == "" {
		return usageError(fs, "--name is required")
	}
	priv, pub, entry, err := signedcmd.GenerateKey(*out, *name)
	if err != nil {
		return err
	}
	key, err := audit.LoadPrivateKey(priv)
	if err != nil {
		return err
	}
	req, err := signedcmd.NewRequest(*name, key, "", time.Now())
	if err != nil {
		return err
	}
	reqPath := filepath.Join(*out, *name+".request.json")
	if err := writeNew(reqPath, req, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(fs.Output(), "%s: wrote %s (private: keep it with %s), %s and %s (send it to the security officer); keyring entry:\n", fs.Name(), priv, *name, pub, reqPath)
	fmt.Fprintf(stdout, "%s\n", entry)
	return nil
}

// writeNew writes a file that must not exist yet.
func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
