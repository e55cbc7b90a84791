// Package pkcs11signer is the checkpoint key kept in a hardware token (an
// HSM, a TPM or a smart card, or SoftHSM2 in the tests) through PKCS#11: an
// audit.Signer that signs with CKM_EDDSA inside the token, so the private
// key is never read out, and the public half read from the token for
// verifying. A PKCS#11 URI (RFC 7512) names the key; Load takes that or a
// PEM file's path, which is how audit.checkpoint_key chooses.
//
// A module (the vendor's .so) is loaded and initialised once per process
// however many keys use it, and finalised when the last is closed. Sign is
// serialised (a PKCS#11 session is not for concurrent use), reopens the
// session once if the token dropped it, and checks every signature with the
// public key before returning it: a token fault never becomes a checkpoint
// that does not verify.
package pkcs11signer

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/miekg/pkcs11"

	"github.com/tablectl/tablectl/internal/smallfile"
)

// PKCS#11 3.0 names that miekg/pkcs11's 2.40 headers lack.
const (
	ckkECEdwards = 0x40   // CKK_EC_EDWARDS
	ckmEdDSA     = 0x1057 // CKM_EDDSA
	// maxObjectsPerSearchPass: two are enough to see a name is ambiguous.
	maxObjectsPerSearchPass = 2
)

// Ed25519's CKA_EC_PARAMS, as PKCS#11 3.0 allows them: the DER OID
// 1.3.101.112 (id-Ed25519, what RFC 8410 names) or the DER PrintableString
// "edwards25519" (what OpenSC's pkcs11-tool writes).
var (
	ed25519OID     = []byte{0x06, 0x03, 0x2b, 0x65, 0x70}
	ed25519Printed = append([]byte{0x13, 0x0c}, "edwards25519"...)
)

// Signer is an Ed25519 checkpoint key in a token. It is an audit.Signer
// (crypto.Signer with an ed25519.PublicKey) and must be closed after the
// last signature (the recorder's close signs one).
type Signer struct {
	uri URI
	pub ed25519.PublicKey
	pin string

	mu      sync.Mutex
	ctx     *pkcs11.Ctx // nil once closed
	session pkcs11.SessionHandle
	open    bool // session is open
	priv    pkcs11.ObjectHandle
	info    KeyInfo
}

// KeyInfo is what the token says of the private key: whether it can ever
// leave the token in the clear.
type KeyInfo struct {
	// Token is the token's label; Object the key's label.
	Token, Object string
	// Sensitive (CKA_SENSITIVE) keys never show their value; Extractable
	// (CKA_EXTRACTABLE) ones can be wrapped out. A non-exportable key is
	// sensitive and not extractable.
	Sensitive, Extractable bool
}

// Exportable reports whether the token would let the private key out: not
// sensitive, or extractable.
func (k KeyInfo) Exportable() bool { return !k.Sensitive || k.Extractable }

// Open finds the Ed25519 key pair the PKCS#11 URI ref names, logs in with
// the PIN from its pin-source, and checks with one signature that the
// private key and the public key are a pair.
func Open(ref string) (*Signer, error) {
	u, err := ParseURI(ref)
	if err != nil {
		return nil, err
	}
	if u.PINFile == "" {
		return nil, fmt.Errorf("pkcs11 URI: pin-source is required to sign (the private key is found only once logged in)")
	}
	pin, err := smallfile.Secret(u.PINFile)
	if err != nil {
		return nil, fmt.Errorf("pkcs11 pin-source: %w", err)
	}
	ctx, err := acquire(u.ModulePath)
	if err != nil {
		return nil, err
	}
	s := &Signer{uri: u, pin: pin, ctx: ctx}
	fail := func(err error) (*Signer, error) {
		s.Close()
		return nil, err
	}
	if err := s.connect(); err != nil {
		return fail(err)
	}
	if s.pub, err = publicKey(ctx, s.session, u); err != nil {
		return fail(err)
	}
	probe := []byte("tablectl pkcs11signer: is this a pair?")
	if _, err := s.Sign(nil, probe, crypto.Hash(0)); err != nil {
		return fail(fmt.Errorf("%s: the private key and the public key are not a pair: %w", u.label(), err))
	}
	return s, nil
}

// connect opens a session on the URI's token, logs in and finds the private
// key. s.mu is held or s is not shared yet.
func (s *Signer) connect() error {
	slot, tok, err := findToken(s.ctx, s.uri)
	if err != nil {
		return err
	}
	sh, err := s.ctx.OpenSession(slot, pkcs11.CKF_SERIAL_SESSION)
	if err != nil {
		return fmt.Errorf("%s: open session: %w", s.uri.label(), err)
	}
	s.session, s.open = sh, true
	// Login is per token for the whole process: another key on it may
	// have logged in already.
	if err := s.ctx.Login(sh, pkcs11.CKU_USER, s.pin); err != nil && !errors.Is(err, pkcs11.Error(pkcs11.CKR_USER_ALREADY_LOGGED_IN)) {
		return fmt.Errorf("%s: log in: %w", s.uri.label(), err)
	}
	priv, err := findObject(s.ctx, sh, s.uri, pkcs11.CKO_PRIVATE_KEY)
	if err != nil {
		return err
	}
	attrs, err := s.ctx.GetAttributeValue(sh, priv, []*pkcs11.Attribute{
		pkcs11.NewAttribute(pkcs11.CKA_SENSITIVE, nil),
		pkcs11.NewAttribute(pkcs11.CKA_EXTRACTABLE, nil),
		pkcs11.NewAttribute(pkcs11.CKA_LABEL, nil),
	})
	if err != nil {
		return fmt.Errorf("%s: read the private key's attributes: %w", s.uri.label(), err)
	}
	s.priv = priv
	s.info = KeyInfo{Token: tok, Object: string(attrs[2].Value), Sensitive: isTrue(attrs[0].Value), Extractable: isTrue(attrs[1].Value)}
	return nil
}

func isTrue(v []byte) bool { return len(v) == 1 && v[0] != 0 }

// Public returns the key's ed25519.PublicKey, read from the token at Open.
func (s *Signer) Public() crypto.PublicKey { return s.pub }

// Info says what the token reported of the private key at Open.
func (s *Signer) Info() KeyInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

// Sign signs msg itself (Ed25519, not prehashed: opts.HashFunc() must be
// 0) with CKM_EDDSA in the token; rand is unused, the token has its own. It
// reopens the session once if the token lost it, and refuses a signature
// that does not verify with the public key.
func (s *Signer) Sign(_ io.Reader, msg []byte, opts crypto.SignerOpts) ([]byte, error) {
	if opts == nil || opts.HashFunc() != crypto.Hash(0) {
		return nil, errors.New("pkcs11 Ed25519: only pure Ed25519 (crypto.Hash(0)) is supported")
	}
	if o, ok := opts.(*ed25519.Options); ok && o.Context != "" {
		return nil, errors.New("pkcs11 Ed25519: a signing context is not supported")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		return nil, fmt.Errorf("%s: signer is closed", s.uri.label())
	}
	sig, err := s.signOnce(msg)
	if err != nil && lostSession(err) {
		s.closeSession()
		if cerr := s.connect(); cerr != nil {
			return nil, fmt.Errorf("%s: sign: %w; reopening the session: %w", s.uri.label(), err, cerr)
		}
		sig, err = s.signOnce(msg)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: sign: %w", s.uri.label(), err)
	}
	if s.pub != nil && !ed25519.Verify(s.pub, msg, sig) {
		return nil, fmt.Errorf("%s: the token's signature does not verify with its public key", s.uri.label())
	}
	return sig, nil
}

func (s *Signer) signOnce(msg []byte) ([]byte, error) {
	if !s.open {
		return nil, pkcs11.Error(pkcs11.CKR_SESSION_HANDLE_INVALID)
	}
	if err := s.ctx.SignInit(s.session, []*pkcs11.Mechanism{pkcs11.NewMechanism(ckmEdDSA, nil)}, s.priv); err != nil {
		return nil, err
	}
	return s.ctx.Sign(s.session, msg)
}

// lostSession reports errors after which a new session may succeed: the
// token dropped the session or its login, or was pulled and put back.
func lostSession(err error) bool {
	var e pkcs11.Error
	if !errors.As(err, &e) {
		return false
	}
	switch uint(e) {
	case pkcs11.CKR_SESSION_HANDLE_INVALID, pkcs11.CKR_SESSION_CLOSED, pkcs11.CKR_USER_NOT_LOGGED_IN,
		pkcs11.CKR_KEY_HANDLE_INVALID, pkcs11.CKR_OBJECT_HANDLE_INVALID, pkcs11.CKR_DEVICE_REMOVED,
		pkcs11.CKR_TOKEN_NOT_PRESENT, pkcs11.CKR_DEVICE_ERROR:
		return true
	}
	return false
}

func (s *Signer) closeSession() {
	if s.open {
		s.ctx.CloseSession(s.session) // a lost session cannot be closed; nothing to do about it
		s.open = false
	}
}

// Close ends the session and unloads the module if no other key uses it.
// Signing after Close is an error; closing twice is not.
func (s *Signer) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		return nil
	}
	s.closeSession()
	s.ctx = nil
	return release(s.uri.ModulePath)
}

// PublicKey reads the Ed25519 public key of the pair the PKCS#11 URI ref
// names. It logs in only when the URI has a pin-source (a public key is
// usually readable without).
func PublicKey(ref string) (ed25519.PublicKey, error) {
	u, err := ParseURI(ref)
	if err != nil {
		return nil, err
	}
	var pin string
	if u.PINFile != "" {
		if pin, err = smallfile.Secret(u.PINFile); err != nil {
			return nil, fmt.Errorf("pkcs11 pin-source: %w", err)
		}
	}
	ctx, err := acquire(u.ModulePath)
	if err != nil {
		return nil, err
	}
	defer release(u.ModulePath)
	slot, _, err := findToken(ctx, u)
	if err != nil {
		return nil, err
	}
	sh, err := ctx.OpenSession(slot, pkcs11.CKF_SERIAL_SESSION)
	if err != nil {
		return nil, fmt.Errorf("%s: open session: %w", u.label(), err)
	}
	defer ctx.CloseSession(sh)
	if u.PINFile != "" {
		if err := ctx.Login(sh, pkcs11.CKU_USER, pin); err != nil && !errors.Is(err, pkcs11.Error(pkcs11.CKR_USER_ALREADY_LOGGED_IN)) {
			return nil, fmt.Errorf("%s: log in: %w", u.label(), err)
		}
	}
	return publicKey(ctx, sh, u)
}

// publicKey reads and checks the public key object of u's pair.
func publicKey(ctx *pkcs11.Ctx, sh pkcs11.SessionHandle, u URI) (ed25519.PublicKey, error) {
	o, err := findObject(ctx, sh, u, pkcs11.CKO_PUBLIC_KEY)
	if err != nil {
		return nil, err
	}
	a, err := ctx.GetAttributeValue(sh, o, []*pkcs11.Attribute{
		pkcs11.NewAttribute(pkcs11.CKA_EC_PARAMS, nil),
		pkcs11.NewAttribute(pkcs11.CKA_EC_POINT, nil),
	})
	if err != nil {
		return nil, fmt.Errorf("%s: read the public key: %w", u.label(), err)
	}
	if p := a[0].Value; !bytes.Equal(p, ed25519OID) && !bytes.Equal(p, ed25519Printed) {
		return nil, fmt.Errorf("%s: the key's curve (CKA_EC_PARAMS %x) is not Ed25519", u.label(), p)
	}
	pt := a[1].Value
	// PKCS#11 3.0 says a DER OCTET STRING; some tokens give the 32 bytes
	// bare.
	if len(pt) == 2+ed25519.PublicKeySize && pt[0] == 0x04 && pt[1] == ed25519.PublicKeySize {
		pt = pt[2:]
	}
	if len(pt) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%s: CKA_EC_POINT of %d bytes is not an Ed25519 public key", u.label(), len(a[1].Value))
	}
	return ed25519.PublicKey(bytes.Clone(pt)), nil
}

// findToken returns the slot holding the one token u names, and its label.
func findToken(ctx *pkcs11.Ctx, u URI) (uint, string, error) {
	slots, err := ctx.GetSlotList(true)
	if err != nil {
		return 0, "", fmt.Errorf("%s: list slots: %w", u.label(), err)
	}
	var found []uint
	var label string
	var seen []string
	for _, sl := range slots {
		ti, err := ctx.GetTokenInfo(sl)
		if err != nil {
			continue // a slot that cannot say is not the one named
		}
		seen = append(seen, fmt.Sprintf("%q (serial %s)", ti.Label, ti.SerialNumber))
		if (u.Token == "" || ti.Label == u.Token) && (u.Serial == "" || ti.SerialNumber == u.Serial) {
			found = append(found, sl)
			label = ti.Label
		}
	}
	switch len(found) {
	case 1:
		return found[0], label, nil
	case 0:
		return 0, "", fmt.Errorf("%s: no such token; the module has %d: %v", u.label(), len(seen), seen)
	default:
		return 0, "", fmt.Errorf("%s: %d tokens match; name one by serial=", u.label(), len(found))
	}
}

// findObject finds the one Ed25519 key of class cls that u names.
func findObject(ctx *pkcs11.Ctx, sh pkcs11.SessionHandle, u URI, cls uint) (pkcs11.ObjectHandle, error) {
	what := "private"
	if cls == pkcs11.CKO_PUBLIC_KEY {
		what = "public"
	}
	tmpl := []*pkcs11.Attribute{
		pkcs11.NewAttribute(pkcs11.CKA_CLASS, cls),
		pkcs11.NewAttribute(pkcs11.CKA_KEY_TYPE, ckkECEdwards),
	}
	if u.Object != "" {
		tmpl = append(tmpl, pkcs11.NewAttribute(pkcs11.CKA_LABEL, u.Object))
	}
	if u.ID != nil {
		tmpl = append(tmpl, pkcs11.NewAttribute(pkcs11.CKA_ID, u.ID))
	}
	if err := ctx.FindObjectsInit(sh, tmpl); err != nil {
		return 0, fmt.Errorf("%s: find the %s key: %w", u.label(), what, err)
	}
	objs, _, err := ctx.FindObjects(sh, maxObjectsPerSearchPass)
	if ferr := ctx.FindObjectsFinal(sh); err == nil && ferr != nil {
		err = ferr
	}
	if err != nil {
		return 0, fmt.Errorf("%s: find the %s key: %w", u.label(), what, err)
	}
	switch len(objs) {
	case 1:
		return objs[0], nil
	case 0:
		return 0, fmt.Errorf("%s: no Ed25519 %s key of that name", u.label(), what)
	default:
		return 0, fmt.Errorf("%s: more than one Ed25519 %s key of that name; name it by id= too", u.label(), what)
	}
}

// label names u's key in errors: token and object, never the PIN.
func (u URI) label() string {
	tok := u.Token
	if tok == "" {
		tok = "serial " + u.Serial
	}
	obj := u.Object
	if obj == "" {
		obj = fmt.Sprintf("id %x", u.ID)
	}
	return fmt.Sprintf("pkcs11 token %q key %q", tok, obj)
}

// modules are the loaded PKCS#11 modules by path: C_Initialize is once per
// process, and C_Finalize would end every other user's sessions.
var modules = struct {
	sync.Mutex
	m map[string]*module
}{m: map[string]*module{}}

type module struct {
	ctx  *pkcs11.Ctx
	refs int
}

// acquire loads and initialises the module at path, or takes another
// reference to it.
func acquire(path string) (*pkcs11.Ctx, error) {
	path = moduleKey(path)
	modules.Lock()
	defer modules.Unlock()
	if m := modules.m[path]; m != nil {
		m.refs++
		return m.ctx, nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("pkcs11 module: %w", err)
	}
	ctx := pkcs11.New(path)
	if ctx == nil {
		return nil, fmt.Errorf("pkcs11 module %s: cannot load it (not a PKCS#11 library?)", path)
	}
	if err := ctx.Initialize(); err != nil && !errors.Is(err, pkcs11.Error(pkcs11.CKR_CRYPTOKI_ALREADY_INITIALIZED)) {
		ctx.Destroy()
		return nil, fmt.Errorf("pkcs11 module %s: initialise: %w", path, err)
	}
	modules.m[path] = &module{ctx: ctx, refs: 1}
	return ctx, nil
}

// moduleKey is the module's real path: two names of one library (a
// symbolic link) are one module, initialised once.
func moduleKey(path string) string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		return p
	}
	return path
}

// release drops a reference to the module at path, finalising and
// unloading it with the last.
func release(path string) error {
	path = moduleKey(path)
	modules.Lock()
	defer modules.Unlock()
	m := modules.m[path]
	if m == nil {
		return nil
	}
	if m.refs--; m.refs > 0 {
		return nil
	}
	delete(modules.m, path)
	err := m.ctx.Finalize()
	m.ctx.Destroy()
	if err != nil {
		return fmt.Errorf("pkcs11 module %s: finalise: %w", path, err)
	}
	return nil
}
