// Package edfast signs and checks Ed25519 signatures with exactly the
// results of crypto/ed25519, in less time, using curve25519-voi.
//
// Sign makes the very bytes ed25519.Sign makes (Ed25519 is deterministic:
// RFC 8032 fixes the nonce), in about half the time on a small VM's core
// (BenchmarkSign; nearly all of it is the base point's multiplication,
// which voi does faster). The recorder signs a checkpoint
// of every commit's head on the card's path, so that time is the
// display's.
//
// Verify and Key check with exactly the rules of crypto/ed25519
// (cofactorless, S below the group order, A and R as crypto/ed25519
// decodes them): voi's verifier held to its crypto/ed25519 preset, for a
// single check, and for a key that checks many (a table's checkpoint key
// at the witness) the key's point decoded once with its multiples
// precomputed. The floor's witness checks the signature of every
// checkpoint it takes in, and on a 2-core box that was half its CPU
// (docs/benchmarks.md, issue 17).
//
// The results are the same or this package has no business existing: a
// signature one accepts and the other refuses would make the witness and
// `audit verify` disagree, and a signature that differs would be a
// different trail. The tests compare the two on the well-known edge
// cases, every flipped bit, many keys and messages, and fuzz targets on
// whatever they find.
package edfast

import (
	"crypto/ed25519"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// stdlib is voi's preset "compatible with that provided by the Go
// crypto/ed25519 package".
var stdlib = &voi.Options{Verify: voi.VerifyOptionsStdLib}

// Sign returns priv's signature of msg: the bytes ed25519.Sign returns.
// Like it, it panics if priv is not ed25519.PrivateKeySize bytes (a key
// is the program's own, never outside input).
func Sign(priv ed25519.PrivateKey, msg []byte) []byte {
	if len(priv) != ed25519.PrivateKeySize {
		panic("edfast: bad private key length")
	}
	return voi.Sign(voi.PrivateKey(priv), msg)
}

// Verify reports whether sig is pub's signature of msg, as
// ed25519.Verify does. Unlike it, a public key of the wrong length is
// false, not a panic.
func Verify(pub ed25519.PublicKey, msg, sig []byte) bool {
	if len(pub) != ed25519.PublicKeySize {
		return false
	}
	return voi.VerifyWithOptions(voi.PublicKey(pub), msg, sig, stdlib)
}

// Key is a public key made ready to check many signatures.
type Key struct {
	x *voi.ExpandedPublicKey // nil: not a point; nothing verifies
}

// NewKey prepares pub (about 1.5 KiB; worth it from the second check on).
func NewKey(pub ed25519.PublicKey) *Key {
	k := &Key{}
	if len(pub) == ed25519.PublicKeySize {
		k.x, _ = voi.NewExpandedPublicKey(voi.PublicKey(pub)) // an error: no point, as crypto/ed25519 would refuse it
	}
	return k
}

// Verify reports whether sig is the key's signature of msg, as
// ed25519.Verify does.
func (k *Key) Verify(msg, sig []byte) bool {
	if k.x == nil {
		return false
	}
	return voi.VerifyExpandedWithOptions(k.x, msg, sig, stdlib)
}
