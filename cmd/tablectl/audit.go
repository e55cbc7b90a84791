package main

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/tablectl/tablectl/signedcmd"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/internal/pkcs11signer"
)

func init() {
	register(command{
		Name:  "audit",
		Short: "verify, export and checkpoint the audit trail; make a checkpoint key",
		Subs:  auditCommands,
	})
}

// auditCommands are audit's subcommands.
var auditCommands = []command{
	{Name: "verify", Short: "check a trail for edits, deleted rows, truncation and bad signatures", Run: runAuditVerify},
	{Name: "export", Short: "write a trail's rows as JSON lines", Run: runAuditExport},
	{Name: "checkpoint", Short: "write a trail's last signed checkpoint to a file (the copy kept elsewhere)", Run: runAuditCheckpoint},
	{Name: "keygen", Short: "make an Ed25519 checkpoint key pair", Run: runAuditKeygen},
	{Name: "pubkey", Short: "write the checkpoint public key of a key file or a token's key as PEM", Run: runAuditPubkey},
}

// errTampered is returned when verify found something, after printing it.
var errTampered = errors.New("the audit trail did not verify")

func runAuditVerify(args []string, stdout io.Writer) error {
	fs := newFlagSet("audit verify")
	db := fs.String("db", "", "the trail (required; opened read-only): a `file`, a directory of segments, or segment files in order, comma-separated")
	var cpFiles, keyFiles []string
	fs.Func("checkpoint", "checkpoint `file` held elsewhere (repeatable)", func(s string) error {
		cpFiles = append(cpFiles, s)
		return nil
	})
	fs.Func("pubkey", "checkpoint public key: a PEM `file` or a pkcs11: URI (repeatable; without one, signatures are not checked)", func(s string) error {
		keyFiles = append(keyFiles, s)
		return nil
	})
	asJSON := fs.Bool("json", false, "print the report as JSON")
	noSigs := fs.Bool("no-signatures", false, "check the chain only: without it, a run with no --pubkey fails")
	everySig := fs.Bool("every-signature", false, "check every checkpoint's signature (forensic), not only the newest checkpoint's, which through the chain covers every row before it")
	keyring := fs.String("keyring", "", "re-verify every recorded command against this supervisors' keyring `file`")
	witness := fs.String("witness", "", "the comparison with the floor's witnessed copy (a database `URL`) is the floor's binary's: tablectl-floor verify (docs/floor.md)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *witness != "" {
		return usageError(fs, "--witness: the comparison with the floor's witnessed copy is the floor's binary's: tablectl-floor verify --db %s --pubkey FILE --witness %s (docs/floor.md)", *db, *witness)
	}
	if *db == "" {
		return usageError(fs, "--db is required")
	}
	if *noSigs && len(keyFiles) > 0 {
		return usageError(fs, "--no-signatures and --pubkey exclude each other")
	}
	if *everySig && len(keyFiles) == 0 {
		return usageError(fs, "--every-signature needs --pubkey")
	}
	opt := audit.VerifyOptions{EverySignature: *everySig}
	for _, f := range cpFiles {
		c, err := audit.ReadCheckpointFile(f)
		if err != nil {
			return err
		}
		opt.Checkpoints = append(opt.Checkpoints, c)
	}
	for _, f := range keyFiles {
		k, err := pkcs11signer.LoadPublic(f)
		if err != nil {
			return err
		}
		opt.PublicKeys = append(opt.PublicKeys, k)
	}
	rep, err := audit.Verify(context.Background(), *db, opt)
	if err != nil {
		return err
	}
	if *keyring != "" {
		if err := checkCommands(*db, *keyring, rep.Add); err != nil {
			return err
		}
	}
	if *asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	switch {
	case rep.Tampered():
		return fmt.Errorf("%w: %d findings", errTampered, int64(len(rep.Findings))+rep.Omitted)
	case rep.Unverifiable != "":
		return fmt.Errorf("%w: %s", errUnverified, rep.Unverifiable)
	case len(keyFiles) == 0 && !*noSigs:
		return fmt.Errorf("%w: no --pubkey given (say --no-signatures to check the chain alone)", errUnverified)
	}
	return nil
}

// checkCommands re-verifies every command the trail at db recorded against
// the keyring file, reporting each forgery as a forged_command finding.
func checkCommands(db, keyringFile string, report func(audit.Finding)) error {
	kr, err := signedcmd.LoadKeyring(keyringFile)
	if err != nil {
		return err
	}
	ctx := context.Background()
	r, err := audit.OpenReader(ctx, db)
	if err != nil {
		return err
	}
	defer r.Close()
	_, forged, err := signedcmd.CheckTrail(r.Events(ctx, audit.Query{Kinds: []string{string(coup.InCmd)}}), r.Table(), kr)
	if err != nil {
		return err
	}
	for _, f := range forged {
		report(audit.Finding{Kind: audit.FindingForgedCommand, Seq: f.Seq, Detail: f.Detail})
	}
	return nil
}

// errUnverified is returned when the chain holds but the signatures were
// not checked: a clean chain alone does not prove who wrote it.
var errUnverified = errors.New("the checkpoint signatures were not verified")

func runAuditExport(args []string, stdout io.Writer) error {
	fs := newFlagSet("audit export")
	db := fs.String("db", "", "the trail (required; opened read-only): a `file`, a directory of segments, or segment files in order, comma-separated")
	var q audit.Query
	fs.Int64Var(&q.From, "from", 0, "first `seq`")
	fs.Int64Var(&q.To, "to", 0, "last `seq` (0: the head)")
	fs.Int64Var(&q.Shoe, "shoe", 0, "only this shoe `id`")
	fs.Int64Var(&q.Coup, "coup", 0, "only this coup `id`")
	kinds := fs.String("kind", "", "only these `kinds`, comma-separated")
	out := fs.String("out", "", "output `file` (default: standard output)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *db == "" {
		return usageError(fs, "--db is required")
	}
	if *kinds != "" {
		q.Kinds = strings.Split(*kinds, ",")
	}
	ctx := context.Background()
	r, err := audit.OpenReader(ctx, *db)
	if err != nil {
		return err
	}
	defer r.Close()
	w := stdout
	var f *os.File
	if *out != "" {
		if f, err = createOut(*out); err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	if _, err := r.Export(ctx, w, q); err != nil {
		return err
	}
	if f != nil {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		return f.Close()
	}
	return nil
}

func runAuditCheckpoint(args []string, stdout io.Writer) error {
	fs := newFlagSet("audit checkpoint")
	db := fs.String("db", "", "the trail (required; opened read-only): a `file`, a directory of segments, or segment files in order, comma-separated")
	out := fs.String("out", "", "checkpoint `file` to write (default: standard output)")
	pubkey := fs.String("pubkey", "", "refuse a checkpoint that does not verify with this public key (a PEM `file` or a pkcs11: URI)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *db == "" {
		return usageError(fs, "--db is required")
	}
	ctx := context.Background()
	r, err := audit.OpenReader(ctx, *db)
	if err != nil {
		return err
	}
	defer r.Close()
	c, ok, err := r.LastCheckpoint(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s has no checkpoint yet", *db)
	}
	if *pubkey != "" {
		var k ed25519.PublicKey
		if k, err = pkcs11signer.LoadPublic(*pubkey); err != nil {
			return err
		}
		if err := c.VerifySignature(k); err != nil {
			return err
		}
	}
	if *out != "" {
		return audit.WriteCheckpointFile(*out, c)
	}
	b, err := c.MarshalJSON()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}

func runAuditKeygen(args []string, stdout io.Writer) error {
	fs := newFlagSet("audit keygen")
	dir := fs.String("out", "", "`directory` for "+audit.PrivateKeyFile+" and "+audit.PublicKeyFile+" (required; never overwritten)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return usageError(fs, "--out is required")
	}
	// The folder is made when missing (mode 0700: it holds a private key).
	privPath, pubPath, err := audit.GenerateKey(*dir)
	if err != nil {
		return err
	}
	pub, err := audit.LoadPublicKey(pubPath)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "private key %s (keep it off the trail's disk)\npublic key  %s\nkey id      %s\n", privPath, pubPath, audit.KeyID(pub))
	return err
}

// runAuditPubkey writes the public half of the checkpoint key (as
// audit.checkpoint_key names it: a PEM private key file or a pkcs11: URI)
// as a PEM public key file, the form verify's --pubkey and openssl read:
// what surveillance is handed when the private key is in a token.
func runAuditPubkey(args []string, stdout io.Writer) error {
	fs := newFlagSet("audit pubkey")
	key := fs.String("key", "", "the checkpoint key: a PEM private key `file` or a pkcs11: URI (required)")
	out := fs.String("out", "", "public key `file` to write (never overwritten; default: standard output)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *key == "" {
		return usageError(fs, "--key is required")
	}
	var pub ed25519.PublicKey
	if pkcs11signer.IsURI(*key) {
		k, err := pkcs11signer.PublicKey(*key)
		if err != nil {
			return err
		}
		pub = k
	} else {
		k, err := audit.LoadPrivateKey(*key)
		if err != nil {
			return err
		}
		pub = audit.SignerPublic(k)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return fmt.Errorf("encode public key: %w", err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	if *out == "" {
		_, err = stdout.Write(data)
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return fmt.Errorf("write public key: %w", err)
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("write public key: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write public key %s: %w", *out, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write public key %s: %w", *out, err)
	}
	_, err = fmt.Fprintf(stdout, "public key %s\nkey id     %s\n", *out, audit.KeyID(pub))
	return err
}
