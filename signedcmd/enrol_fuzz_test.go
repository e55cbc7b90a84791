package signedcmd

import (
	"crypto/ed25519"
	"testing"
)

// FuzzParsePublicKey: whatever is pasted as a public key gives a key of
// the right size or an error, never a panic.
func FuzzParsePublicKey(f *testing.F) {
	f.Add("vPx0VIRMJ7IBKUkOat3n3f0foKN8vbyf/N6tSki+5oM=")
	f.Add("-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAvPx0VIRMJ7IBKUkOat3n3f0foKN8vbyf/N6tSki+5oM=\n-----END PUBLIC KEY-----\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParsePublicKey(s)
		if err == nil && len(k) != ed25519.PublicKeySize {
			t.Fatalf("%q gave a %d-byte key", s, len(k))
		}
	})
}
