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
		if c.name == "verify, another key" && !errors.Is(err, errTampered) {
			t.Errorf("%s: %v, want %v", c.name, err, errTampered)
		}
	}
}
