package pkcs11signer

import (
	"crypto/ed25519"

	"github.com/tablectl/tablectl/audit"
)

// Load opens the checkpoint key ref names: a PKCS#11 URI (the key stays in
// the token) or the path of a PEM private key file (audit.LoadPrivateKey).
// close releases the token's session once the last checkpoint is signed; it
// does nothing for a PEM key.
func Load(ref string) (key audit.Signer, close func() error, err error) {
	if IsURI(ref) {
		s, err := Open(ref)
		if err != nil {
			return nil, nil, err
		}
		return s, s.Close, nil
	}
	k, err := audit.LoadPrivateKey(ref)
	if err != nil {
		return nil, nil, err
	}
	return k, func() error { return nil }, nil
}

// LoadPublic reads a checkpoint public key: the public half of the key
// pair a PKCS#11 URI names, or a PEM public key file (audit.LoadPublicKey).
func LoadPublic(ref string) (ed25519.PublicKey, error) {
	if IsURI(ref) {
		return PublicKey(ref)
	}
	return audit.LoadPublicKey(ref)
}
