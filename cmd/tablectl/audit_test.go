package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/internal/pkcs11signer"
	"github.com/tablectl/tablectl/internal/softhsmtest"
)

// TestAuditWithTokenKey checks a trail whose checkpoints a key in a token
// signed: verify and checkpoint take the token's URI for --pubkey, and
// pubkey writes the PEM file surveillance is handed.
func TestAuditWithTokenKey(t *testing.T) {
	tok := softhsmtest.New(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "trail.db")
	key, closeKey, err := pkcs11signer.Load(tok.URI)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := audit.Open(ctx, db, audit.Options{Table: "BAC-07", Logger: slog.New(slog.DiscardHandler), Key: key, CheckpointEvery: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := st.Append(ctx, audit.Event{Kind: "card", Shoe: 1, Coup: 1, Body: map[string]any{"i": i}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := closeKey(); err != nil {
		t.Fatal(err)
	}

	pemFile := filepath.Join(dir, "checkpoint.pub")
	var out bytes.Buffer
	if err := runAudit([]string{"pubkey", "--key", tok.URI, "--out", pemFile}, &out); err != nil {
		t.Fatal(err)
	}
	pub, err := audit.LoadPublicKey(pemFile)
	if err != nil || !strings.Contains(out.String(), audit.KeyID(pub)) {
		t.Fatalf("pubkey wrote %s (%v), said %q", pemFile, err, out.String())
	}
	if err := runAudit([]string{"pubkey", "--key", tok.URI, "--out", pemFile}, &out); err == nil {
		t.Error("pubkey overwrote its --out file")
	}
	otherDir := t.TempDir()
	_, otherPub, err := audit.GenerateKey(otherDir)
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		args []string
		ok   bool
	}{
		{"verify, token URI", []string{"verify", "--db", db, "--pubkey", tok.PublicURI}, true},
		{"verify, exported PEM", []string{"verify", "--db", db, "--pubkey", pemFile}, true},
		{"verify, another key", []string{"verify", "--db", db, "--pubkey", otherPub}, false},
		{"checkpoint, token URI", []string{"checkpoint", "--db", db, "--pubkey", tok.PublicURI}, true},
		{"checkpoint, another key", []string{"checkpoint", "--db", db, "--pubkey", otherPub}, false},
	} {
		out.Reset()
		err := runAudit(c.args, &out)
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok %v\n%s", c.name, err, c.ok, out.String())
		}
		if c.name == "verify, another key" && !errors.Is(err, errUnverified) {
			t.Errorf("%s: %v, want %v", c.name, err, errUnverified)
		}
	}
}

// TestAuditVerifySignatures: verify passes only when the signatures were
// checked, or the operator said not to check them.
func TestAuditVerifySignatures(t *testing.T) {
	dir := t.TempDir()
	priv, pub, err := audit.GenerateKey(filepath.Join(dir))
	if err != nil {
		t.Fatal(err)
	}
	_, otherPub, err := audit.GenerateKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	key, err := audit.LoadPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	trail := filepath.Join(dir, "trail.db")
	st, err := audit.Open(context.Background(), trail, audit.Options{Table: "T1", Key: key, CheckpointEvery: 1, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := st.Append(context.Background(), audit.Event{Kind: "card", Body: map[string]string{"card": "KH"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want error
		say  string // in the report
	}{
		{"no key", nil, errUnverified, "signatures NOT checked (no public key)"},
		{"no signatures asked", []string{"--no-signatures"}, nil, "signatures NOT checked (no public key)"},
		{"the key", []string{"--pubkey", pub}, nil,
			"signatures: newest checkpoint at seq 3 verified, covering 3 rows; 1 checked, 2 earlier checkpoints' signatures not checked (--every-signature checks them)"},
		{"every signature", []string{"--pubkey", pub, "--every-signature"}, nil,
			"signatures: every checkpoint's checked (3); newest checkpoint at seq 3 verified, covering 3 rows"},
		{"another key", []string{"--pubkey", otherPub}, errUnverified, "signatures NOT checked: the checkpoints are signed by key"},
		{"every signature, another key", []string{"--pubkey", otherPub, "--every-signature"}, errUnverified, "signatures NOT checked: the checkpoints are signed by key"},
		{"both", []string{"--pubkey", pub, "--no-signatures"}, errUsage, ""},
		{"every signature, no key", []string{"--every-signature"}, errUsage, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := runAuditVerify(append([]string{"--db", trail}, tc.args...), &out)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("verify %v: %v, want %v", tc.args, err, tc.want)
			}
			if !strings.Contains(out.String(), tc.say) {
				t.Errorf("verify %v said %q, want it to say %q", tc.args, out.String(), tc.say)
			}
		})
	}
}
