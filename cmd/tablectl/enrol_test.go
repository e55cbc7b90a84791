package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/signedcmd"
)

func TestEnrol(t *testing.T) {
	dir := t.TempDir()
	ring := filepath.Join(dir, "supervisors.json")
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	var out, errb bytes.Buffer
	args := []string{"enrol", "--keyring", ring, "--name", "ann", "--public-key", base64.StdEncoding.EncodeToString(pub),
		"--actions", "void,suspend,resume", "--not-before", "2026-11-25T00:00:00Z", "--valid-for", "24h"}
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "enrolled ann") || !strings.Contains(out.String(), "2026-11-26T00:00:00Z") {
		t.Errorf("output %q", out.String())
	}
	// A keygen key, by its public key file.
	_, pubPath, _, err := signedcmd.GenerateKey(dir, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"enrol", "--keyring", ring, "--name", "bob", "--public-key-file", pubPath, "--valid-for", "0"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	kr, err := signedcmd.LoadKeyring(ring)
	if err != nil {
		t.Fatal(err)
	}
	ann := kr.Lookup("ann")
	if len(ann) != 1 || !ann[0].Permits("void") || ann[0].Permits("card") || !ann[0].NotAfter.Equal(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("ann: %+v", ann)
	}
	if bob := kr.Lookup("bob"); len(bob) != 1 || !bob[0].NotAfter.IsZero() {
		t.Errorf("bob: %+v", bob)
	}
	// The same key twice, a bad key, missing flags: refused.
	for _, bad := range [][]string{
		args,
		{"enrol", "--keyring", ring, "--name", "carl", "--public-key", "AAAA"},
		{"enrol", "--keyring", ring, "--name", "carl"},
		{"enrol", "--keyring", ring, "--name", "carl", "--public-key", base64.StdEncoding.EncodeToString(pub[:31]) + "A", "--not-after", "soon"},
	} {
		if code := run(bad, &out, &errb); code == 0 {
			t.Errorf("%v: exit 0", bad)
		}
	}
}

// TestEnrolSays (issue 35): a keygen .pub given to --public-key is
// pointed to --public-key-file; a key whose window is over, or not yet
// open, is enrolled with a warning; what cannot be right exits 2.
func TestEnrolSays(t *testing.T) {
	dir := t.TempDir()
	ring := filepath.Join(dir, "supervisors.json")
	_, pubPath, _, err := signedcmd.GenerateKey(dir, "bob")
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	key := base64.StdEncoding.EncodeToString(pub)
	for _, tt := range []struct {
		args       []string
		code       int
		stderr     string
		wantOutput bool
	}{
		{[]string{"--name", "bob", "--public-key", pubPath}, 2, "tablectl enrol: --public-key " + pubPath + ": that is a file; --public-key takes the key's base64 text (as the pit console shows it): for a PEM file (keygen's NAME.pub) use --public-key-file " + pubPath, false},
		{[]string{"--name", "old", "--public-key", key, "--not-before", "2020-01-01T00:00:00Z", "--valid-for", "24h"}, 0, "tablectl enrol: warning: the key's window ended at 2020-01-02T00:00:00Z: it is enrolled, but every command it signs is refused (expired)", true},
		{[]string{"--name", "later", "--public-key-file", pubPath, "--not-before", "2099-01-01T00:00:00Z"}, 0, "tablectl enrol: warning: the key may sign only from 2099-01-01T00:00:00Z", true},
		{[]string{"--name", "back", "--public-key", key, "--not-before", "2030-01-02T00:00:00Z", "--not-after", "2030-01-01T00:00:00Z"}, 2, "tablectl enrol: the window ends (2030-01-01T00:00:00Z) before it starts", false},
		{[]string{"--name", "x", "--public-key", key, "--public-key-file", pubPath}, 2, "tablectl enrol: --public-key and --public-key-file: give one", false},
		{[]string{"--name", "x", "--public-key", "AAAA"}, 2, "tablectl enrol: --public-key: public key: 3 bytes, want 32", false},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"enrol", "--keyring", ring}, tt.args...), &out, &errb)
		if code != tt.code || !strings.HasPrefix(errb.String(), tt.stderr) || (out.Len() > 0) != tt.wantOutput {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", tt.args, code, out.String(), errb.String(), tt.code, tt.stderr)
		}
	}
}
