package audit

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Key file names GenerateKey writes.
const (
	PrivateKeyFile = "checkpoint.key"
	PublicKeyFile  = "checkpoint.pub"
)

// maxKeyFile bounds what is read from a key file: a PEM Ed25519 key is
// about 120 bytes.
const maxKeyFile = 16 << 10

// KeyID names a checkpoint key: the first 8 bytes of SHA-256 of the raw
// 32-byte public key, in hex (16 digits).
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// GenerateKey makes a new Ed25519 checkpoint key pair and writes it to dir
// as PrivateKeyFile (PKCS #8 PEM, mode 0600) and PublicKeyFile (PKIX PEM,
// mode 0644), the forms openssl reads. It never overwrites an existing file.
// The private key belongs outside the trail's directory in production: a
// key stolen with the database lets the thief re-sign a rewritten chain.
func GenerateKey(dir string) (privPath, pubPath string, err error) {
	privPath = filepath.Join(dir, PrivateKeyFile)
	pubPath = filepath.Join(dir, PublicKeyFile)
	if _, err := WriteKeyPair(privPath, pubPath); err != nil {
		return "", "", err
	}
	return privPath, pubPath, nil
}

// WriteKeyPair makes a new Ed25519 key pair and writes the private key to
// privPath (PKCS #8 PEM, mode 0600) and the public key to pubPath (PKIX PEM,
// mode 0644), never overwriting a file; it returns the public key. The
// checkpoint key and the supervisors' keys are made by it.
func WriteKeyPair(privPath, pubPath string) (ed25519.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	if err := writeNew(privPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600); err != nil {
		return nil, err
	}
	if err := writeNew(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		os.Remove(privPath)
		return nil, err
	}
	return pub, nil
}

// writeNew creates path (failing if it exists), writes data and syncs it.
// Its folder is made when missing: private to the owner for a private key
// (perm without group or other bits), else readable by all.
func writeNew(path string, data []byte, perm os.FileMode) error {
	dirPerm := os.FileMode(0o755)
	if perm&0o077 == 0 {
		dirPerm = 0o700
	}
	if err := os.MkdirAll(filepath.Dir(path), dirPerm); err != nil {
		return fmt.Errorf("create key folder: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("create key file: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write key file %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync key file %s: %w", path, err)
	}
	return f.Close()
}

// LoadPrivateKey reads an Ed25519 private key from a PKCS #8 PEM file.
func LoadPrivateKey(path string) (ed25519.PrivateKey, error) {
	data, err := readSmall(path)
	if err != nil {
		return nil, err
	}
	k, err := ParsePrivateKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// LoadPublicKey reads an Ed25519 public key from a PKIX PEM file.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	data, err := readSmall(path)
	if err != nil {
		return nil, err
	}
	k, err := ParsePublicKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("read key %s: %w", path, err)
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("key file %s: larger than %d bytes, not a key", path, maxKeyFile)
	}
	return data, nil
}

// ParsePrivateKey parses a PEM "PRIVATE KEY" block holding a PKCS #8
// Ed25519 key.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	der, err := pemBlock(data, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("private key is %T, want Ed25519", k)
	}
	return ek, nil
}

// ParsePublicKey parses a PEM "PUBLIC KEY" block holding a PKIX Ed25519 key.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	der, err := pemBlock(data, "PUBLIC KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	ek, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("public key is %T, want Ed25519", k)
	}
	return ek, nil
}

func pemBlock(data []byte, typ string) ([]byte, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.New("no PEM block found")
	}
	if b.Type != typ {
		return nil, fmt.Errorf("PEM block is %q, want %q", b.Type, typ)
	}
	return b.Bytes, nil
}
