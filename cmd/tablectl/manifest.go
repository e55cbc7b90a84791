package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/internal/selfcheck"
)

func init() {
	register(command{
		Name:  "manifest",
		Short: "sign (at build time) or check the self-authentication manifest of a binary and its config",
		Subs:  manifestCommands,
	})
}

// manifestCommands are manifest's subcommands.
var manifestCommands = []command{
	{Name: "sign", Short: "hash an executable and its config files and write the signed manifest", Run: runManifestSign},
	{Name: "check", Short: "check files against a signed manifest as the controller does", Run: runManifestCheck},
}

// entryFlag takes FILE or FILE=INSTALLED-PATH.
func entryFlag(role string, into *[]selfcheck.Entry) func(string) error {
	return func(s string) error {
		file, as, _ := strings.Cut(s, "=")
		*into = append(*into, selfcheck.Entry{Role: role, Path: file, As: as})
		return nil
	}
}

func runManifestSign(args []string, stdout io.Writer) error {
	fs := newFlagSet("manifest sign")
	fs.Usage = func() {
		usageHead(fs.Output(), "manifest sign", "--key FILE --exe FILE[=PATH] [--config FILE[=PATH]]... [--file FILE[=PATH]]... --out FILE",
			`Hashes the executable and the files and writes a manifest signed with the
build key (an Ed25519 PEM key, tablectl audit keygen). =PATH records where
the package installs the file. The controller checks it at start and every
self_check.every (docs/operations.md, "Self-authentication").`)
		printFlags(fs.Output(), fs)
	}
	var entries []selfcheck.Entry
	keyFile := fs.String("key", "", "the build's Ed25519 private key `FILE` (PEM)")
	fs.Func("exe", "the executable `FILE[=PATH]` (required)", entryFlag(selfcheck.RoleExecutable, &entries))
	fs.Func("config", "a config `FILE[=PATH]` the controller may run with (repeatable)", entryFlag(selfcheck.RoleConfig, &entries))
	fs.Func("file", "another `FILE` checked at its path (repeatable)", entryFlag(selfcheck.RoleFile, &entries))
	out := fs.String("out", "", "write the manifest to `FILE` (default: standard output)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *keyFile == "" {
		return usageError(fs, "--key is required")
	}
	key, err := audit.LoadPrivateKey(*keyFile)
	if err != nil {
		return err
	}
	m, err := selfcheck.Make(entries, key, time.Now())
	if err != nil {
		return err
	}
	b, err := m.Marshal()
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = stdout.Write(b)
		return err
	}
	f, err := createOut(*out)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func runManifestCheck(args []string, stdout io.Writer) error {
	fs := newFlagSet("manifest check")
	manifest := fs.String("manifest", selfcheck.DefaultManifest, "the manifest `FILE`")
	pub := fs.String("pubkey", selfcheck.DefaultPublicKey, "the manifest key's public key `FILE` (PEM)")
	exe := fs.String("exe", "", "the executable `FILE` to check (required)")
	cfg := fs.String("config", "", "the config `FILE` to check")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *exe == "" {
		return usageError(fs, "--exe is required")
	}
	res := selfcheck.Checker{Manifest: *manifest, PublicKey: *pub, Require: true, Executable: *exe, Config: *cfg}.Check()
	b, _ := json.MarshalIndent(res, "", "  ")
	fmt.Fprintf(stdout, "%s\n", b)
	if res.Result != coup.SelfCheckOK {
		return fmt.Errorf("self-check %s: %s", res.Result, res.Detail)
	}
	return nil
}
