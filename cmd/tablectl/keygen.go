package main

import (
	"fmt"
	"io"

	signedcmd "github.com/tablectl/tablectl/command"
)

func init() {
	register(command{name: "keygen", short: "make a supervisor's Ed25519 key pair for signed commands", run: runKeygen})
}

func runKeygen(args []string, stdout io.Writer) error {
	fs := newFlagSet("keygen")
	fs.Usage = func() {
		usageHead(fs.Output(), "keygen", "--name NAME [--out DIR]", `Makes NAME.key (the private key: it signs commands and stays with the
supervisor, mode 0600) and NAME.pub in DIR, and prints the keyring entry
to add to the controller's keyring (deploy/supervisors.json), or enrol
NAME.pub with tablectl enrol --public-key-file. Edit the entry's
"actions" to narrow what the key may sign.`)
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
	fmt.Fprintf(fs.Output(), "%s: wrote %s (private: keep it with %s) and %s; keyring entry:\n", fs.Name(), priv, *name, pub)
	fmt.Fprintf(stdout, "%s\n", entry)
	return nil
}
