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

	signedcmd "github.com/tablectl/tablectl/command"
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
