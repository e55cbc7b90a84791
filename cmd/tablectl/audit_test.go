package main

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/tablectl/tablectl/audit"
)

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
	}{
		{"no key", nil, errUnverified},
		{"no signatures asked", []string{"--no-signatures"}, nil},
		{"the key", []string{"--pubkey", pub}, nil},
		{"another key", []string{"--pubkey", otherPub}, errUnverified},
		{"both", []string{"--pubkey", pub, "--no-signatures"}, errUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := runAuditVerify(append([]string{"--db", trail}, tc.args...), io.Discard)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("verify %v: %v, want %v", tc.args, err, tc.want)
			}
		})
	}
}
