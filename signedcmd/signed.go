package signedcmd

// The keyring signed by the security officer: a controller takes only a
// keyring whose signature verifies with a keyring authority's public key,
// which is all the box holds of it. Whoever is root on the box can replace
// the file, but not sign one: an enrolment done there is refused, and said
// so in the trail.

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/tablectl/tablectl/audit"
)

// KeyringDomain opens the bytes a keyring signature covers, so that it can
// never be taken for a signature of anything else (a command's opens with
// SigningDomain).
const KeyringDomain = "tablectl-keyring-v1\n"

// Errors of a keyring's signature: the controller refuses the keyring.
var (
	// ErrKeyringUnsigned: the keyring carries no signature (a draft, or
	// one edited on the box: tablectl enrol leaves it unsigned).
	ErrKeyringUnsigned = errors.New("the keyring is not signed by the security officer")
	// ErrKeyringAuthority: signed by a key that is not a keyring authority
	// of this controller (mqtt.keyring_authority).
	ErrKeyringAuthority = errors.New("the keyring is signed by a key that is not a keyring authority here")
	// ErrKeyringSignature: the signature does not verify: the keyring was
	// changed after it was signed (an entry added, removed or edited).
	ErrKeyringSignature = errors.New("the keyring's signature does not verify")
	// ErrKeyringRollback: an older keyring than the one the trail
	// recorded last, or other contents under the same serial.
	ErrKeyringRollback = errors.New("the keyring is older than the one in force")
)

// parseMeta reads what a keyring document says of itself and computes the
// bytes its signature covers.
func parseMeta(kj keyringJSON) (KeyringMeta, error) {
	m := KeyringMeta{Serial: kj.Serial, Authority: kj.Authority}
	var errs []error
	if kj.Serial < 0 {
		errs = append(errs, fmt.Errorf("keyring: serial %d: want 1 or more", kj.Serial))
	}
	if kj.SignedAt != "" {
		t, err := time.Parse(time.RFC3339, kj.SignedAt)
		if err != nil {
			errs = append(errs, fmt.Errorf("keyring: signed_at %q: want an RFC 3339 time", clip(kj.SignedAt)))
		}
		m.SignedAt = t
	}
	if kj.Authority != "" {
		if b, err := hex.DecodeString(kj.Authority); err != nil || len(b) != 8 || hex.EncodeToString(b) != kj.Authority {
			errs = append(errs, fmt.Errorf("keyring: authority %q: want a key id, 16 lower-case hex digits", clip(kj.Authority)))
		}
	}
	if kj.Signature != "" {
		sig, err := base64.StdEncoding.Strict().DecodeString(kj.Signature)
		if err != nil || len(sig) != ed25519.SignatureSize {
			errs = append(errs, fmt.Errorf("keyring: signature: want %d bytes in standard base64", ed25519.SignatureSize))
		}
		m.Signature = sig
	}
	kj.Signature = ""
	canon, err := audit.CanonicalJSON(kj)
	if err != nil {
		errs = append(errs, fmt.Errorf("keyring: %w", err))
	}
	m.SigningBytes = append([]byte(KeyringDomain), canon...)
	sum := sha256.Sum256(m.SigningBytes)
	m.Hash = hex.EncodeToString(sum[:])
	return m, errors.Join(errs...)
}

// VerifySignature checks that one of authorities signed the keyring and
// returns that key's id. An unsigned keyring, one signed by another key and
// one changed since it was signed are refused, each with its own error.
func (kr *Keyring) VerifySignature(authorities []ed25519.PublicKey) (string, error) {
	m := kr.Meta()
	if m.Signature == nil {
		return "", fmt.Errorf("%w: sign it with tablectl keyring sign, on the officer's machine", ErrKeyringUnsigned)
	}
	if err := errors.Join(checkLabels(kr.Keys(), true)...); err != nil {
		return "", fmt.Errorf("%w: %w", ErrKeyringSignature, err)
	}
	if m.Serial < 1 {
		return "", fmt.Errorf("%w: it has no serial", ErrKeyringSignature)
	}
	ids := make([]string, len(authorities))
	for i, a := range authorities {
		ids[i] = audit.KeyID(a)
		if ids[i] != m.Authority {
			continue
		}
		if !ed25519.Verify(a, m.SigningBytes, m.Signature) {
			return "", fmt.Errorf("%w with authority %s: the keyring was changed after it was signed (an entry added, removed or edited)", ErrKeyringSignature, m.Authority)
		}
		return m.Authority, nil
	}
	return "", fmt.Errorf("%w: it names key %q, the authorities here are %v", ErrKeyringAuthority, m.Authority, ids)
}

// ParseAuthorities reads keyring authorities: one or more PEM public keys
// (PKIX, Ed25519) one after the other, as tablectl keyring keygen writes
// one. More than one lets an officer's key be replaced without a gap.
func ParseAuthorities(data []byte) ([]ed25519.PublicKey, error) {
	var out []ed25519.PublicKey
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		pub, err := audit.ParsePublicKey(pem.EncodeToMemory(b))
		if err != nil {
			return nil, fmt.Errorf("keyring authority %d: %w", len(out)+1, err)
		}
		out = append(out, pub)
	}
	if len(out) == 0 {
		return nil, errors.New("keyring authority: no PEM public key")
	}
	return out, nil
}

// LoadAuthorities reads the keyring authorities' file (mqtt.keyring_authority).
func LoadAuthorities(path string) ([]ed25519.PublicKey, error) {
	b, err := readSmall(path, 64<<10)
	if err != nil {
		return nil, fmt.Errorf("keyring authority: %w", err)
	}
	a, err := ParseAuthorities(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

// LoadSignedKeyring reads the keyring file at path and checks its
// signature against authorities; it returns the keyring and the id of
// the authority that signed it. Any failure refuses the whole keyring.
func LoadSignedKeyring(path string, authorities []ed25519.PublicKey) (*Keyring, string, error) {
	kr, err := LoadKeyring(path)
	if err != nil {
		return nil, "", err
	}
	id, err := kr.VerifySignature(authorities)
	if err != nil {
		return nil, "", fmt.Errorf("keyring %s: %w", path, err)
	}
	return kr, id, nil
}

// CheckSuccession refuses a keyring that would take the place of the one
// recorded last (serial and hash) while older than it: a lower serial, or
// the same serial with other contents. An officer signs each change with a
// new serial, so an old signed keyring (a key since revoked in it) cannot
// be put back.
func CheckSuccession(serial int64, hash string, next KeyringMeta) error {
	switch {
	case next.Serial < serial:
		return fmt.Errorf("%w: serial %d, and serial %d is in force (a key removed since may be back in it)", ErrKeyringRollback, next.Serial, serial)
	case next.Serial == serial && next.Hash != hash:
		return fmt.Errorf("%w: serial %d is in force with other contents (sha256 %s, this one %s): the officer signs each change with a new serial", ErrKeyringRollback, serial, hash, next.Hash)
	}
	return nil
}

// SignKeyring signs the keyring document doc (a draft, or a keyring signed
// before) with the officer's key and returns the signed document: serial
// (the document's plus one, unless serial is set), signed_at now, the key's
// id as authority, and the signature. The keys are checked as the
// controller checks them first. now is the signing time (the officer's
// clock).
func SignKeyring(doc []byte, key ed25519.PrivateKey, serial int64, now time.Time) ([]byte, *Keyring, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, nil, fmt.Errorf("keyring sign: the key is %d bytes, want an Ed25519 private key", len(key))
	}
	old, err := ParseKeyring(doc)
	if err != nil {
		return nil, nil, err
	}
	if err := errors.Join(checkLabels(old.Keys(), true)...); err != nil {
		return nil, nil, err
	}
	var kj keyringJSON
	if err := json.Unmarshal(doc, &kj); err != nil {
		return nil, nil, fmt.Errorf("keyring: %w", err)
	}
	if serial == 0 {
		serial = old.Meta().Serial + 1
	}
	pub := key.Public().(ed25519.PublicKey)
	kj.Serial, kj.SignedAt, kj.Authority, kj.Signature = serial, now.UTC().Format(time.RFC3339), audit.KeyID(pub), ""
	m, err := parseMeta(kj)
	if err != nil {
		return nil, nil, err
	}
	kj.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, m.SigningBytes))
	out, err := json.MarshalIndent(kj, "", "  ")
	if err != nil {
		return nil, nil, fmt.Errorf("keyring: %w", err)
	}
	out = append(out, '\n')
	kr, err := ParseKeyring(out)
	if err != nil {
		return nil, nil, err
	}
	if _, err := kr.VerifySignature([]ed25519.PublicKey{pub}); err != nil {
		return nil, nil, fmt.Errorf("keyring sign: %w", err) // cannot happen: what was signed is what reads back
	}
	return out, kr, nil
}

// SignKeyringFile signs the keyring file in with the officer's key and
// writes the signed keyring to out (in itself when out is ""), replaced
// whole; see SignKeyring.
func SignKeyringFile(in, out string, key ed25519.PrivateKey, serial int64, now time.Time) (*Keyring, error) {
	doc, err := readSmall(in, maxKeyring)
	if err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	signed, kr, err := SignKeyring(doc, key, serial, now)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", in, err)
	}
	if out == "" {
		out = in
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, fmt.Errorf("keyring %s: %w", out, err)
	}
	if err := writeFileAtomic(out, signed, modeOf(out, modeOf(in, 0o644))); err != nil {
		return nil, fmt.Errorf("keyring %s: %w", out, err)
	}
	return kr, nil
}

// modeOf is the permission bits of the file at path, or def.
func modeOf(path string, def os.FileMode) os.FileMode {
	if fi, err := os.Stat(path); err == nil {
		return fi.Mode().Perm()
	}
	return def
}

// readSmall reads the file at path, refusing one of more than limit
// bytes.
func readSmall(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: more than %d bytes", path, limit)
	}
	return b, nil
}

// writeFileAtomic replaces the file at path with data, whole: written to a
// new file beside it, given mode, synced, then renamed over it, and the
// directory synced; a reader meets the old file or the new one, never half
// of one. Any step that fails leaves the old file and no new one.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone once renamed; else the leftover
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Files of the security officer's key pair, as GenerateAuthority names
// them.
const (
	AuthorityKeyFile    = "officer.key"
	AuthorityPublicFile = "officer.pub"
)

// GenerateAuthority makes the security officer's key pair in dir:
// officer.key (PKCS #8 PEM, mode 0600), which signs keyrings and belongs
// off the table box, and officer.pub (PKIX PEM), mqtt.keyring_authority
// on every table. It never overwrites a file.
func GenerateAuthority(dir string) (privPath, pubPath string, err error) {
	privPath, pubPath = filepath.Join(dir, AuthorityKeyFile), filepath.Join(dir, AuthorityPublicFile)
	// WriteKeyPair makes the folder, private to the officer.
	if _, err := audit.WriteKeyPair(privPath, pubPath); err != nil {
		return "", "", err
	}
	return privPath, pubPath, nil
}
