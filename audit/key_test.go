package audit

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeyID(t *testing.T) {
	// sha256(d75a9801...511a) starts 21fe31dfa154a261 (RFC 8032 test 1
	// public key; digest computed with sha256sum).
	if got := KeyID(testPub()); got != "21fe31dfa154a261" {
		t.Fatalf("KeyID = %s", got)
	}
}

func TestGenerateAndLoadKeys(t *testing.T) {
	dir := t.TempDir()
	privPath, pubPath, err := GenerateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(privPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key file mode %v (%v), want 0600", fi.Mode(), err)
	}
	priv, err := LoadPrivateKey(privPath)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := LoadPublicKey(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(priv.Public()) {
		t.Fatal("public key file does not match the private key")
	}
	c, err := signCheckpoint(priv, "T1", Head{Seq: 1}, newStepClock().Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.VerifySignature(pub); err != nil {
		t.Fatal(err)
	}
	// Never overwrite a key.
	if _, _, err := GenerateKey(dir); err == nil {
		t.Fatal("GenerateKey overwrote an existing key")
	}
	again, err := LoadPrivateKey(privPath)
	if err != nil || !again.Equal(priv) {
		t.Fatal("the existing key changed")
	}
}

func TestLoadKeyRejects(t *testing.T) {
	dir := t.TempDir()
	privPath, pubPath, err := GenerateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecPriv, _ := x509.MarshalPKCS8PrivateKey(ec)
	ecPub, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		load func() error
	}{
		{"public key as private", func() error { _, err := LoadPrivateKey(pubPath); return err }},
		{"private key as public", func() error { _, err := LoadPublicKey(privPath); return err }},
		{"ECDSA private", func() error {
			_, err := LoadPrivateKey(write("ec.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecPriv})))
			return err
		}},
		{"ECDSA public", func() error {
			_, err := LoadPublicKey(write("ec.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecPub})))
			return err
		}},
		{"not PEM", func() error { _, err := LoadPublicKey(write("junk", []byte("hello"))); return err }},
		{"garbled DER", func() error {
			_, err := LoadPublicKey(write("bad.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{0x30, 1, 2}})))
			return err
		}},
		{"huge file", func() error { _, err := LoadPublicKey(write("huge", make([]byte, maxKeyFile+1))); return err }},
		{"missing", func() error { _, err := LoadPrivateKey(filepath.Join(dir, "none")); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.load(); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// FuzzParseKeys: key files are outside input; no bytes may panic, and an
// accepted public key is 32 bytes.
func FuzzParseKeys(f *testing.F) {
	dir := f.TempDir()
	privPath, pubPath, err := GenerateKey(dir)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(mustRead(f, privPath))
	f.Add(mustRead(f, pubPath))
	f.Fuzz(func(t *testing.T, data []byte) {
		if k, err := ParsePublicKey(data); err == nil && len(k) != 32 {
			t.Fatalf("accepted a %d-byte public key", len(k))
		}
		if k, err := ParsePrivateKey(data); err == nil && len(k) != 64 {
			t.Fatalf("accepted a %d-byte private key", len(k))
		}
	})
}

// TestParseOpenSSLKeys reads the RFC 8032 test 1 key pair as openssl
// writes it (openssl pkey -text shows the same bytes).
func TestParseOpenSSLKeys(t *testing.T) {
	pub, err := ParsePublicKey([]byte("-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n-----END PUBLIC KEY-----\n"))
	if err != nil || !pub.Equal(testPub()) {
		t.Fatalf("public key %x, %v; want %x", pub, err, testPub())
	}
	priv, err := ParsePrivateKey([]byte("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n-----END PRIVATE KEY-----\n"))
	if err != nil || !priv.Equal(testKey()) {
		t.Fatalf("private key: %v", err)
	}
}

func TestCheckSigner(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		key    Signer
		nilKey bool
		errs   string
	}{
		{"none", nil, true, ""},
		{"nil Ed25519 key", ed25519.PrivateKey(nil), true, ""},
		{"Ed25519", testKey(), false, ""},
		{"short Ed25519", testKey()[:40], false, "40 bytes"},
		{"ECDSA", ec, false, "want Ed25519"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := checkSigner(tc.key)
			if tc.errs != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errs) {
					t.Fatalf("err %v, want one saying %q", err, tc.errs)
				}
				return
			}
			if err != nil || (k == nil) != tc.nilKey {
				t.Fatalf("key %v err %v, want nil key %v", k, err, tc.nilKey)
			}
		})
	}
}
