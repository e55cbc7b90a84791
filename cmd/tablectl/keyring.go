package main

import (
	"crypto/ed25519"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/signedcmd"
)

func init() {
	register(command{
		Name:  "keyring",
		Short: "the security officer's keyring steps: make the officer's key, sign a keyring, show one",
		Subs:  keyringCommands,
	})
}

// keyringCommands are keyring's subcommands.
var keyringCommands = []command{
	{Name: "keygen", Short: "make the security officer's key pair (officer.key stays off the table boxes)", Run: runKeyringKeygen},
	{Name: "sign", Short: "sign a supervisors' keyring with the officer's key (the officer's machine)", Run: runKeyringSign},
	{Name: "show", Short: "print a keyring's serial, signer, hash and keys, and check its signature", Run: runKeyringShow},
}

func runKeyringKeygen(args []string, stdout io.Writer) error {
	fs := newFlagSet("keyring keygen")
	fs.Usage = func() {
		usageHead(fs.Output(), "keyring keygen", "--out DIR",
			`Makes the security officer's key pair in DIR: officer.key (the private
key, mode 0600: it signs every table's supervisors' keyring and never goes
on a table box) and officer.pub (install it on each table as
mqtt.keyring_authority). Never overwrites a file. docs/operations.md,
"Supervisors' keys".`)
		printFlags(fs.Output(), fs)
	}
	out := fs.String("out", "", "the `DIR` to write officer.key and officer.pub to (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return usageError(fs, "--out is required")
	}
	priv, pub, err := signedcmd.GenerateAuthority(*out)
	if err != nil {
		return err
	}
	key, err := audit.LoadPrivateKey(priv)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (private: the security officer's, off every table box) and %s (every table's mqtt.keyring_authority); authority %s\n",
		priv, pub, audit.KeyID(key.Public().(ed25519.PublicKey)))
	return nil
}

func runKeyringSign(args []string, stdout io.Writer) error {
	fs := newFlagSet("keyring sign")
	fs.Usage = func() {
		usageHead(fs.Output(), "keyring sign", "--keyring FILE --key FILE [--out FILE] [--serial N]",
			`The security officer's step, on the officer's machine: checks the keyring as
the controller does, gives it the next serial (or --serial), the time and
the officer's key id, and signs it. Install the signed file as the tables'
mqtt.keyring (root:tablectl 0640); a running controller takes it within
seconds and records it in the trail. A keyring edited after signing (an
entry added with tablectl enrol, say) is refused until signed again.`)
		printFlags(fs.Output(), fs)
	}
	keyring := fs.String("keyring", "", "the keyring `FILE` to sign (required)")
	keyFile := fs.String("key", "", "the officer's private key `FILE` (officer.key; required)")
	out := fs.String("out", "", "write the signed keyring to `FILE` (default: over --keyring)")
	serial := fs.Int64("serial", 0, "the `SERIAL` to give it (default: its serial plus one)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *keyring == "" || *keyFile == "" {
		return usageError(fs, "--keyring and --key are required")
	}
	key, err := audit.LoadPrivateKey(*keyFile)
	if err != nil {
		return err
	}
	kr, err := signedcmd.SignKeyringFile(*keyring, *out, key, *serial, time.Now())
	if err != nil {
		return err
	}
	if *out == "" {
		*out = *keyring
	}
	fmt.Fprintf(stdout, "signed %s: ", *out)
	printKeyring(stdout, kr)
	return nil
}

func runKeyringShow(args []string, stdout io.Writer) error {
	fs := newFlagSet("keyring show")
	fs.Usage = func() {
		usageHead(fs.Output(), "keyring show", "--keyring FILE [--authority FILE]",
			`Prints a keyring's serial, signer, signing time, hash (what the trail's
ctl.keyring rows record) and keys. With --authority, checks its signature
as the controller does and exits 1 if the controller would refuse it.`)
		printFlags(fs.Output(), fs)
	}
	keyring := fs.String("keyring", "", "the keyring `FILE` (required)")
	authority := fs.String("authority", "", "the keyring authority's public key `FILE` (mqtt.keyring_authority) to check the signature with")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *keyring == "" {
		return usageError(fs, "--keyring is required")
	}
	kr, err := signedcmd.LoadKeyring(*keyring)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: ", *keyring)
	printKeyring(stdout, kr)
	if *authority == "" {
		return nil
	}
	auth, err := signedcmd.LoadAuthorities(*authority)
	if err != nil {
		return err
	}
	id, err := kr.VerifySignature(auth)
	if err != nil {
		return fmt.Errorf("%s: the controller would refuse it: %w", *keyring, err)
	}
	fmt.Fprintf(stdout, "signature: ok, by authority %s\n", id)
	return nil
}

// printKeyring writes what a keyring says of itself, then its keys.
func printKeyring(w io.Writer, kr *signedcmd.Keyring) {
	m := kr.Meta()
	if m.Signature == nil {
		fmt.Fprintf(w, "UNSIGNED (a draft: the controller refuses it until the officer signs it), serial %d, %d keys\n", m.Serial, kr.Len())
	} else {
		fmt.Fprintf(w, "serial %d, signed %s by authority %s, sha256 %s, %d keys\n", m.Serial, m.SignedAt.UTC().Format(time.RFC3339), m.Authority, m.Hash, kr.Len())
	}
	for _, k := range signedcmd.RecordedKeys(kr) {
		label := ""
		if k.Key != "" {
			label = " (key " + k.Key + ")"
		}
		window := ""
		if k.NotBefore != "" || k.NotAfter != "" {
			window = fmt.Sprintf("  %s to %s", orDash(k.NotBefore), orDash(k.NotAfter))
		}
		fmt.Fprintf(w, "  %s%s  %s  %s%s\n", k.Name, label, k.KeyID, strings.Join(k.Actions, ","), window)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
