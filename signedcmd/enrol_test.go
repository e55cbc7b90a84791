package signedcmd

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEnrolFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "supervisors.json")
	pub1, _, _ := ed25519.GenerateKey(rand.Reader)
	pub2, _, _ := ed25519.GenerateKey(rand.Reader)
	from := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	to := from.Add(90 * 24 * time.Hour)
	if err := EnrolFile(path, Enrolment{Name: "ann", PublicKey: pub1, NotBefore: from, NotAfter: to, Comment: "pit console, podium 2"}); err != nil {
		t.Fatal(err)
	}
	if err := EnrolFile(path, Enrolment{Name: "bob", PublicKey: pub2, Actions: []string{"void", "resume"}}); err != nil {
		t.Fatal(err)
	}
	kr, err := LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	ann, bob := kr.Lookup("ann"), kr.Lookup("bob")
	if len(ann) != 1 || len(bob) != 1 || kr.Len() != 2 {
		t.Fatalf("keyring holds %d keys: ann %v, bob %v", kr.Len(), ann, bob)
	}
	if !ann[0].PublicKey.Equal(pub1) || !ann[0].NotBefore.Equal(from) || !ann[0].NotAfter.Equal(to) || !ann[0].Permits("card") {
		t.Errorf("ann's key %+v", ann[0])
	}
	if !ann[0].ValidAt(from) || ann[0].ValidAt(to) || ann[0].ValidAt(from.Add(-time.Second)) {
		t.Errorf("ann's window %s", ann[0].validity())
	}
	if !bob[0].Permits("void") || bob[0].Permits("card") {
		t.Errorf("bob's actions %v", bob[0].Actions)
	}
	before, _ := os.ReadFile(path)
	for name, e := range map[string]Enrolment{
		"the same key again": {Name: "carl", PublicKey: pub1},
		"an unknown action":  {Name: "carl", PublicKey: make(ed25519.PublicKey, 32), Actions: []string{"deal"}},
		"a bad name":         {Name: "carl smith", PublicKey: make(ed25519.PublicKey, 32)},
		"a short key":        {Name: "carl", PublicKey: make(ed25519.PublicKey, 31)},
		"an empty window":    {Name: "carl", PublicKey: make(ed25519.PublicKey, 32), NotBefore: to, NotAfter: from},
	} {
		if err := EnrolFile(path, e); err == nil {
			t.Errorf("%s: enrolled", name)
		}
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("a refused enrolment changed the keyring")
	}
	if err := os.WriteFile(path, []byte(`{"keys": [{"name": "x"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := EnrolFile(path, Enrolment{Name: "dan", PublicKey: pub2}); err == nil || !strings.Contains(err.Error(), "as it is") {
		t.Errorf("a broken keyring: %v", err)
	}
}

func TestParsePublicKey(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	got, err := ParsePublicKey(" " + base64.StdEncoding.EncodeToString(pub) + "\n")
	if err != nil || !got.Equal(pub) {
		t.Errorf("base64: %v %v", got, err)
	}
	dir := t.TempDir()
	_, pubPath, _, err := GenerateKey(dir, "eve")
	if err != nil {
		t.Fatal(err)
	}
	pemText, _ := os.ReadFile(pubPath)
	if _, err := ParsePublicKey(string(pemText)); err != nil {
		t.Errorf("PEM: %v", err)
	}
	for _, bad := range []string{"", "abcd", base64.StdEncoding.EncodeToString(pub[:31]), strings.Repeat("A", 5000)} {
		if _, err := ParsePublicKey(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
