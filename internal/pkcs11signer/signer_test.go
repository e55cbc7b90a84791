package pkcs11signer

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/pkcs11"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/internal/softhsmtest"
)

// softHSMModule is where Debian's softhsm2 package puts the module.
const softHSMModule = softhsmtest.Module

const (
	ckmECEdwardsKeyPairGen = 0x1055 // CKM_EC_EDWARDS_KEY_PAIR_GEN
	testToken              = "tablectl"
	testUserPIN            = "246810"
	testSOPIN              = "13579111"
)

// ed448OID is CKA_EC_PARAMS for Ed448 (1.3.101.113), a key the signer
// must refuse.
var ed448OID = []byte{0x06, 0x03, 0x2b, 0x65, 0x71}

// testHSM is a SoftHSM2 token of its own in a temporary directory.
type testHSM struct {
	dir     string
	pinFile string
}

// newSoftHSM points SoftHSM2 at a fresh token directory (SOFTHSM2_CONF)
// and writes the user PIN file. The token is not made yet.
func newSoftHSM(t testing.TB) *testHSM {
	t.Helper()
	dir, pinFile := softhsmtest.Dir(t, testUserPIN)
	t.Cleanup(func() {
		modules.Lock()
		defer modules.Unlock()
		if len(modules.m) != 0 {
			t.Errorf("a module is still loaded after the test: %v", modules.m)
		}
	})
	return &testHSM{dir: dir, pinFile: pinFile}
}

// uri names key object in the test token, with the PIN file.
func (h *testHSM) uri(object string) string {
	return "pkcs11:token=" + testToken + ";object=" + object + "?module-path=" + softHSMModule + "&pin-source=file:" + h.pinFile
}

// withSession runs f in a read-write session of the test token, logged in
// as the user, making the token first if it is not there.
func (h *testHSM) withSession(t testing.TB, f func(ctx *pkcs11.Ctx, sh pkcs11.SessionHandle)) {
	t.Helper()
	ctx, err := acquire(softHSMModule)
	if err != nil {
		t.Fatal(err)
	}
	defer release(softHSMModule)
	slot, _, err := findToken(ctx, URI{Token: testToken})
	if err != nil {
		slot = initToken(t, ctx)
	}
	sh, err := ctx.OpenSession(slot, pkcs11.CKF_SERIAL_SESSION|pkcs11.CKF_RW_SESSION)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.CloseSession(sh)
	if err := ctx.Login(sh, pkcs11.CKU_USER, testUserPIN); err != nil && !errors.Is(err, pkcs11.Error(pkcs11.CKR_USER_ALREADY_LOGGED_IN)) {
		t.Fatal(err)
	}
	f(ctx, sh)
}

// initToken makes the test token in the first free slot and sets its user
// PIN, as `softhsm2-util --init-token --free` does.
func initToken(t testing.TB, ctx *pkcs11.Ctx) uint {
	t.Helper()
	slots, err := ctx.GetSlotList(true)
	if err != nil || len(slots) == 0 {
		t.Fatalf("SoftHSM2 slots: %v %v", slots, err)
	}
	if err := ctx.InitToken(slots[0], testSOPIN, testToken); err != nil {
		t.Fatalf("init token: %v", err)
	}
	// SoftHSM2 moves an initialised token to a slot of its own.
	slot, _, err := findToken(ctx, URI{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	sh, err := ctx.OpenSession(slot, pkcs11.CKF_SERIAL_SESSION|pkcs11.CKF_RW_SESSION)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.CloseSession(sh)
	if err := ctx.Login(sh, pkcs11.CKU_SO, testSOPIN); err != nil {
		t.Fatal(err)
	}
	if err := ctx.InitPIN(sh, testUserPIN); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Logout(sh); err != nil {
		t.Fatal(err)
	}
	return slot
}

// keyPair is what genKeyPair makes: labels and id of each half, the curve.
type keyPair struct {
	pubLabel, privLabel string
	id                  string
	params              []byte // CKA_EC_PARAMS; nil is Ed25519's OID
}

// genKeyPair generates an EdDSA key pair in the token with
// CKM_EC_EDWARDS_KEY_PAIR_GEN: the private half sensitive and not
// extractable, as docs/audit.md says to make it.
func (h *testHSM) genKeyPair(t testing.TB, kp keyPair) {
	t.Helper()
	if kp.params == nil {
		kp.params = ed25519OID
	}
	h.withSession(t, func(ctx *pkcs11.Ctx, sh pkcs11.SessionHandle) {
		pub := []*pkcs11.Attribute{
			pkcs11.NewAttribute(pkcs11.CKA_TOKEN, true),
			pkcs11.NewAttribute(pkcs11.CKA_KEY_TYPE, ckkECEdwards),
			pkcs11.NewAttribute(pkcs11.CKA_EC_PARAMS, kp.params),
			pkcs11.NewAttribute(pkcs11.CKA_VERIFY, true),
			pkcs11.NewAttribute(pkcs11.CKA_LABEL, kp.pubLabel),
			pkcs11.NewAttribute(pkcs11.CKA_ID, kp.id),
		}
		priv := []*pkcs11.Attribute{
			pkcs11.NewAttribute(pkcs11.CKA_TOKEN, true),
			pkcs11.NewAttribute(pkcs11.CKA_PRIVATE, true),
			pkcs11.NewAttribute(pkcs11.CKA_SENSITIVE, true),
			pkcs11.NewAttribute(pkcs11.CKA_EXTRACTABLE, false),
			pkcs11.NewAttribute(pkcs11.CKA_SIGN, true),
			pkcs11.NewAttribute(pkcs11.CKA_LABEL, kp.privLabel),
			pkcs11.NewAttribute(pkcs11.CKA_ID, kp.id),
		}
		if _, _, err := ctx.GenerateKeyPair(sh, []*pkcs11.Mechanism{pkcs11.NewMechanism(ckmECEdwardsKeyPairGen, nil)}, pub, priv); err != nil {
			t.Fatalf("generate %+v: %v", kp, err)
		}
	})
}

// TestSoftHSMHasEdDSA measures what the task rests on: Debian's SoftHSM2
// lists CKM_EDDSA for signing and CKM_EC_EDWARDS_KEY_PAIR_GEN.
func TestSoftHSMHasEdDSA(t *testing.T) {
	h := newSoftHSM(t)
	h.withSession(t, func(ctx *pkcs11.Ctx, sh pkcs11.SessionHandle) {
		info, err := ctx.GetSessionInfo(sh)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []struct {
			name string
			mech uint
			flag uint
		}{{"CKM_EDDSA", ckmEdDSA, pkcs11.CKF_SIGN}, {"CKM_EC_EDWARDS_KEY_PAIR_GEN", ckmECEdwardsKeyPairGen, pkcs11.CKF_GENERATE_KEY_PAIR}} {
			mi, err := ctx.GetMechanismInfo(info.SlotID, []*pkcs11.Mechanism{pkcs11.NewMechanism(m.mech, nil)})
			if err != nil {
				t.Fatalf("%s: %v", m.name, err)
			}
			if mi.Flags&m.flag == 0 || mi.MinKeySize > 256 || mi.MaxKeySize < 256 {
				t.Errorf("%s: flags %#x, key sizes %d-%d; want %#x and 256 bits", m.name, mi.Flags, mi.MinKeySize, mi.MaxKeySize, m.flag)
			}
		}
	})
}

// TestTrailSignedInToken opens a trail whose checkpoints the token signs,
// writes rows, and verifies the trail and a checkpoint with the public key
// read from the token.
func TestTrailSignedInToken(t *testing.T) {
	h := newSoftHSM(t)
	h.genKeyPair(t, keyPair{pubLabel: "checkpoint", privLabel: "checkpoint", id: "\x01"})
	key, closeKey, err := Load(h.uri("checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	defer closeKey()
	s := key.(*Signer)
	if info := s.Info(); info.Exportable() || info.Token != testToken || info.Object != "checkpoint" {
		t.Errorf("key info %+v: want a non-exportable key %q in token %q", info, "checkpoint", testToken)
	}
	pub := audit.SignerPublic(key)
	// Read without the PIN too: surveillance checks with the public key only.
	noPIN := "pkcs11:token=" + testToken + ";object=checkpoint;type=public?module-path=" + softHSMModule
	for _, ref := range []string{h.uri("checkpoint"), noPIN} {
		got, err := LoadPublic(ref)
		if err != nil {
			t.Fatalf("public key from %s: %v", ref, err)
		}
		if !got.Equal(pub) {
			t.Errorf("public key from %s: %x, the signer's is %x", ref, got, pub)
		}
	}

	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "trail.db")
	st, err := audit.Open(ctx, path, audit.Options{Table: "BAC-07", Logger: slog.New(slog.DiscardHandler), Key: key, CheckpointEvery: 4})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := st.Append(ctx, audit.Event{Kind: "card", Shoe: 1, Coup: int64(i/3 + 1), Body: map[string]any{"card": "9S", "i": i}}); err != nil {
			t.Fatal(err)
		}
	}
	last, err := st.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if !ed25519.Verify(pub, last.Message(), last.Signature) {
		t.Fatalf("checkpoint seq %d signed in the token does not verify with ed25519.Verify", last.Seq)
	}
	if last.KeyID != audit.KeyID(pub) || last.Seq != 10 {
		t.Errorf("checkpoint %+v: want seq 10 by key %s", last, audit.KeyID(pub))
	}

	other, _, _ := ed25519.GenerateKey(rand.Reader)
	for _, c := range []struct {
		name string
		keys []ed25519.PublicKey
		ok   bool
	}{{"token's public key", []ed25519.PublicKey{pub}, true}, {"another key", []ed25519.PublicKey{other}, false}} {
		rep, err := audit.Verify(ctx, path, audit.VerifyOptions{PublicKeys: c.keys, Checkpoints: []audit.Checkpoint{last}})
		if err != nil {
			t.Fatal(err)
		}
		// Another key is unverifiable (the wrong key file), not tampering.
		if rep.OK() != c.ok || rep.SignaturesChecked != c.ok || rep.Tampered() || rep.Checkpoints < 3 {
			t.Errorf("verify with %s: ok %v (want %v), signatures checked %v, %d checkpoints, findings %v",
				c.name, rep.OK(), c.ok, rep.SignaturesChecked, rep.Checkpoints, rep.Findings)
		}
	}
}

// TestPrivateKeyStaysInToken asks the token for the private key's value
// (CKA_VALUE) and expects a refusal.
func TestPrivateKeyStaysInToken(t *testing.T) {
	h := newSoftHSM(t)
	h.genKeyPair(t, keyPair{pubLabel: "checkpoint", privLabel: "checkpoint", id: "\x01"})
	s, err := Open(h.uri("checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	assertValueRefused(t, s)
}

func assertValueRefused(t testing.TB, s *Signer) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	a, err := s.ctx.GetAttributeValue(s.session, s.priv, []*pkcs11.Attribute{pkcs11.NewAttribute(pkcs11.CKA_VALUE, nil)})
	if !errors.Is(err, pkcs11.Error(pkcs11.CKR_ATTRIBUTE_SENSITIVE)) {
		t.Fatalf("reading CKA_VALUE of the private key: %v, %d attributes; want CKR_ATTRIBUTE_SENSITIVE", err, len(a))
	}
}

// TestKeyMadeWithTools signs with a key made by the commands docs/audit.md
// gives (softhsm2-util, then OpenSC's pkcs11-tool, which writes Ed25519's
// curve as the name "edwards25519" rather than the OID).
func TestKeyMadeWithTools(t *testing.T) {
	tok := softhsmtest.New(t)
	s, err := Open(tok.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if info := s.Info(); info.Exportable() {
		t.Errorf("pkcs11-tool's key: %+v, want sensitive and not extractable", info)
	}
	msg := []byte("tablectl-checkpoint-v1\n")
	sig, err := s.Sign(nil, msg, crypto.Hash(0))
	if err != nil {
		t.Fatal(err)
	}
	if !ed25519.Verify(s.Public().(ed25519.PublicKey), msg, sig) {
		t.Error("signature does not verify")
	}
	assertValueRefused(t, s)
}

// TestSignAfterSessionLost closes the signer's session behind its back, as
// a token reset does: the next Sign opens a new one.
func TestSignAfterSessionLost(t *testing.T) {
	h := newSoftHSM(t)
	h.genKeyPair(t, keyPair{pubLabel: "checkpoint", privLabel: "checkpoint", id: "\x01"})
	s, err := Open(h.uri("checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.ctx.CloseSession(s.session); err != nil {
		t.Fatal(err)
	}
	msg := []byte("after the reset")
	sig, err := s.Sign(nil, msg, crypto.Hash(0))
	if err != nil {
		t.Fatalf("sign after the session was closed: %v", err)
	}
	if !ed25519.Verify(audit.SignerPublic(s), msg, sig) {
		t.Error("signature does not verify")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sign(nil, msg, crypto.Hash(0)); err == nil {
		t.Error("sign after Close: no error")
	}
}

// TestOpenRefuses names each wrong key, token or PIN and wants a clear
// error rather than a signer.
func TestOpenRefuses(t *testing.T) {
	h := newSoftHSM(t)
	h.genKeyPair(t, keyPair{pubLabel: "checkpoint", privLabel: "checkpoint", id: "\x01"})
	// "mixed" is the private half of one pair and the public of another.
	h.genKeyPair(t, keyPair{pubLabel: "stray-a", privLabel: "mixed", id: "\x02"})
	h.genKeyPair(t, keyPair{pubLabel: "mixed", privLabel: "stray-b", id: "\x03"})
	h.genKeyPair(t, keyPair{pubLabel: "ed448", privLabel: "ed448", id: "\x04", params: ed448OID})
	h.genKeyPair(t, keyPair{pubLabel: "twice", privLabel: "twice", id: "\x05"})
	h.genKeyPair(t, keyPair{pubLabel: "twice", privLabel: "twice", id: "\x06"})
	badPIN := filepath.Join(h.dir, "bad.pin")
	if err := os.WriteFile(badPIN, []byte("000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := "pkcs11:token=" + testToken + ";object=checkpoint?module-path=" + softHSMModule
	for _, c := range []struct {
		name, uri, want string
	}{
		{"no such token", strings.Replace(h.uri("checkpoint"), "token="+testToken, "token=other", 1), "no such token"},
		{"no such key", h.uri("nokey"), "no Ed25519 private key"},
		{"wrong PIN", base + "&pin-source=file:" + badPIN, "CKR_PIN_INCORRECT"},
		{"no PIN", base, "pin-source is required"},
		{"PIN file missing", base + "&pin-source=file:" + filepath.Join(h.dir, "none"), "no such file"},
		{"module missing", strings.Replace(h.uri("checkpoint"), softHSMModule, "/nonexistent/lib.so", 1), "no such file"},
		{"not a pair", h.uri("mixed"), "not a pair"},
		{"Ed448", h.uri("ed448"), "not Ed25519"},
		{"ambiguous", h.uri("twice"), "more than one Ed25519 private key of that name; name it by id="},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(c.uri)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%s): no error", c.uri)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("Open(%s): %v; want it to say %q", c.uri, err, c.want)
			}
			if strings.Contains(err.Error(), testUserPIN) {
				t.Errorf("the error shows the PIN: %v", err)
			}
		})
	}
	// The id picks one of the two "twice" keys.
	s, err := Open("pkcs11:token=" + testToken + ";object=twice;id=%06?module-path=" + softHSMModule + "&pin-source=file:" + h.pinFile)
	if err != nil {
		t.Fatalf("by label and id: %v", err)
	}
	s.Close()
}

// BenchmarkSignCheckpoint is the cost of signing one checkpoint: the PEM
// key in memory against the key in SoftHSM2 (run: go test -run '^$'
// -bench SignCheckpoint -benchtime 2s ./internal/pkcs11signer).
func BenchmarkSignCheckpoint(b *testing.B) {
	msg := audit.Checkpoint{Table: "BAC-07", Seq: 1_000_000, SignedAt: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)}.Message()
	_, pemKey, _ := ed25519.GenerateKey(rand.Reader)
	b.Run("pem", func(b *testing.B) {
		for b.Loop() {
			if _, err := pemKey.Sign(nil, msg, crypto.Hash(0)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("softhsm2", func(b *testing.B) {
		h := newSoftHSM(b)
		h.genKeyPair(b, keyPair{pubLabel: "checkpoint", privLabel: "checkpoint", id: "\x01"})
		s, err := Open(h.uri("checkpoint"))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		for b.Loop() {
			if _, err := s.Sign(nil, msg, crypto.Hash(0)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestTwoSignersOneModule opens the key twice, once through a symbolic
// link to the module: closing one must leave the module initialised for
// the other (C_Finalize is once per process).
func TestTwoSignersOneModule(t *testing.T) {
	h := newSoftHSM(t)
	h.genKeyPair(t, keyPair{pubLabel: "checkpoint", privLabel: "checkpoint", id: "\x01"})
	link := filepath.Join(h.dir, "libsofthsm2-link.so")
	if err := os.Symlink(softHSMModule, link); err != nil {
		t.Fatal(err)
	}
	for _, second := range []string{h.uri("checkpoint"), strings.Replace(h.uri("checkpoint"), softHSMModule, link, 1)} {
		a, err := Open(h.uri("checkpoint"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := Open(second)
		if err != nil {
			a.Close()
			t.Fatal(err)
		}
		if err := a.Close(); err != nil {
			t.Error(err)
		}
		if _, err := b.Sign(nil, []byte("still here"), crypto.Hash(0)); err != nil {
			t.Errorf("%s: sign after the other signer closed: %v", second, err)
		}
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	}
}
