package signedcmd

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

var signTime = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

// signedDoc is a keyring of alice and bob signed by the officer keyFor
// names.
func signedDoc(t *testing.T, officer string) []byte {
	t.Helper()
	doc := []byte(`{"keys":[` + entryJSON(t, "alice", "") + `,` + entryJSON(t, "bob", "") + `]}`)
	out, _, err := SignKeyring(doc, keyFor(officer), 0, signTime)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func entryJSON(t *testing.T, name, label string) string {
	t.Helper()
	pub := keyFor(name + label).Public().(ed25519.PublicKey)
	b, _ := json.Marshal(keyJSON{Name: name, Key: label, PublicKey: base64.StdEncoding.EncodeToString(pub), Actions: []string{ActionsAll}})
	return string(b)
}

func officerPub(name string) []ed25519.PublicKey {
	return []ed25519.PublicKey{keyFor(name).Public().(ed25519.PublicKey)}
}

// TestKeyringSignature: a keyring the officer signed verifies with the
// officer's public key and names it; unsigned, signed by another key, or
// changed in any field after signing (a key added, an action widened, a
// window stretched, the serial, the time or the authority's id), it is
// refused with the error that says which.
func TestKeyringSignature(t *testing.T) {
	doc := signedDoc(t, "officer")
	kr, err := ParseKeyring(doc)
	if err != nil {
		t.Fatal(err)
	}
	id, err := kr.VerifySignature(officerPub("officer"))
	m := kr.Meta()
	if err != nil || id != audit.KeyID(officerPub("officer")[0]) || m.Serial != 1 || !m.SignedAt.Equal(signTime) || m.Authority != id {
		t.Fatalf("signed keyring: %v, authority %s, meta %+v", err, id, m)
	}
	sum := sha256.Sum256(m.SigningBytes)
	if !bytes.HasPrefix(m.SigningBytes, []byte(KeyringDomain)) || m.Hash != hex.EncodeToString(sum[:]) {
		t.Fatalf("signing bytes %q, hash %s", m.SigningBytes, m.Hash)
	}
	// Two authorities: either one's signature is taken.
	if _, err := kr.VerifySignature(append(officerPub("other"), officerPub("officer")...)); err != nil {
		t.Errorf("with two authorities: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(s string) string
		want error
	}{
		{"unsigned", func(s string) string { return string(mustSignless(t, s)) }, ErrKeyringUnsigned},
		{"a key added", func(s string) string {
			return strings.Replace(s, `"keys": [`, `"keys": [`+entryJSON(t, "mallory", "")+",", 1)
		}, ErrKeyringSignature},
		{"a key removed", func(s string) string {
			var kj keyringJSON
			json.Unmarshal([]byte(s), &kj)
			kj.Keys = kj.Keys[:1]
			b, _ := json.Marshal(kj)
			return string(b)
		}, ErrKeyringSignature},
		{"actions widened", func(s string) string {
			var kj keyringJSON
			json.Unmarshal([]byte(s), &kj)
			kj.Keys[0].Actions = []string{"void", "resume"}
			b, _ := json.Marshal(kj)
			return string(b)
		}, ErrKeyringSignature},
		{"a window stretched", func(s string) string {
			var kj keyringJSON
			json.Unmarshal([]byte(s), &kj)
			kj.Keys[1].NotAfter = "2099-01-01T00:00:00Z"
			b, _ := json.Marshal(kj)
			return string(b)
		}, ErrKeyringSignature},
		{"the serial", func(s string) string { return strings.Replace(s, `"serial": 1`, `"serial": 9`, 1) }, ErrKeyringSignature},
		{"the time", func(s string) string { return strings.Replace(s, `2026-11-28T09:00:00Z`, `2026-11-29T09:00:00Z`, 1) }, ErrKeyringSignature},
		{"the authority", func(s string) string {
			return strings.Replace(s, audit.KeyID(officerPub("officer")[0]), audit.KeyID(officerPub("other")[0]), 1)
		}, ErrKeyringAuthority},
	} {
		edited := tc.edit(string(doc))
		if edited == string(doc) {
			t.Fatalf("%s: the edit changed nothing", tc.name)
		}
		kr, err := ParseKeyring([]byte(edited))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if _, err := kr.VerifySignature(officerPub("officer")); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// Signed by another officer: refused here, naming the key.
	other, _ := ParseKeyring(signedDoc(t, "other"))
	if _, err := other.VerifySignature(officerPub("officer")); !errors.Is(err, ErrKeyringAuthority) || !strings.Contains(err.Error(), audit.KeyID(officerPub("other")[0])) {
		t.Errorf("another officer's keyring: %v", err)
	}
	// Whitespace and the order of members are not what is signed: the
	// same keyring written otherwise verifies, with the same hash.
	var anyDoc map[string]any
	json.Unmarshal(doc, &anyDoc)
	compact, _ := json.Marshal(anyDoc)
	again, err := ParseKeyring(compact)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.VerifySignature(officerPub("officer")); err != nil || again.Meta().Hash != m.Hash {
		t.Errorf("the same keyring re-encoded: %v, hash %s want %s", err, again.Meta().Hash, m.Hash)
	}
	// Re-signing bumps the serial, or takes the one given.
	re, kr2, err := SignKeyring(doc, keyFor("officer"), 0, signTime.Add(time.Hour))
	if err != nil || kr2.Meta().Serial != 2 {
		t.Fatalf("re-signed: serial %d, %v", kr2.Meta().Serial, err)
	}
	if _, kr3, err := SignKeyring(re, keyFor("officer"), 40, signTime); err != nil || kr3.Meta().Serial != 40 {
		t.Fatalf("signed as serial 40: %v", err)
	}
	for _, bad := range []string{`{"keys":[],"signature":"AAAA"}`, `{"keys":[],"authority":"XYZ"}`, `{"keys":[],"serial":-1}`, `{"keys":[],"signed_at":"yesterday"}`} {
		if _, err := ParseKeyring([]byte(bad)); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}

func mustSignless(t *testing.T, s string) []byte {
	t.Helper()
	var kj keyringJSON
	if err := json.Unmarshal([]byte(s), &kj); err != nil {
		t.Fatal(err)
	}
	kj.Signature = ""
	b, _ := json.Marshal(kj)
	return b
}

// TestCheckSuccession: a keyring may follow the one in force only with a
// higher serial, or the same one unchanged.
func TestCheckSuccession(t *testing.T) {
	for _, tc := range []struct {
		serial int64
		hash   string
		ok     bool
	}{
		{4, "h", true}, {5, "h", true}, {5, "other", false}, {6, "other", true}, {3, "h", false}, {0, "", false},
	} {
		err := CheckSuccession(5, "h", KeyringMeta{Serial: tc.serial, Hash: tc.hash})
		if tc.serial == 4 {
			if !errors.Is(err, ErrKeyringRollback) {
				t.Errorf("serial 4 after 5: %v", err)
			}
			continue
		}
		if (err == nil) != tc.ok {
			t.Errorf("serial %d hash %s after 5 h: %v", tc.serial, tc.hash, err)
		}
	}
	if err := CheckSuccession(0, "", KeyringMeta{Serial: 1, Hash: "x"}); err != nil {
		t.Errorf("the first keyring: %v", err)
	}
}

// TestKeyLabels: a name holds one key unless the keyring labels each of its
// keys, each label its own; a command signed with one of them is recorded
// with its label, and the trail check holds the row to it.
func TestKeyLabels(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want string
	}{
		{`{"keys":[` + entryJSON(t, "alice", "pc2") + `,` + strings.Replace(entryJSON(t, "alicex", "pc2"), `"alicex"`, `"alice"`, 1) + `]}`, "two keys labelled"},
		{`{"keys":[` + entryJSON(t, "alice", "pc 2") + `]}`, "key label"},
	} {
		if _, err := ParseKeyring([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.doc, err, tc.want)
		}
	}
	// Two keys of a name, one unlabelled: an unsigned keyring of before
	// (a key being replaced) still reads, for surveillance; the officer
	// cannot sign it, nor enrol into it, and the controller would not
	// take it signed.
	legacy := []byte(`{"keys":[` + entryJSON(t, "alice", "") + `,` + entryJSON(t, "alice", "pc2") + `]}`)
	if _, err := ParseKeyring(legacy); err != nil {
		t.Fatalf("a keyring of before: %v", err)
	}
	if _, _, err := SignKeyring(legacy, keyFor("officer"), 0, signTime); err == nil || !strings.Contains(err.Error(), "has no \"key\" label") {
		t.Errorf("signing two keys of a name without labels: %v", err)
	}
	if _, err := AddKey(legacy, Enrolment{Name: "bob", PublicKey: keyFor("bob").Public().(ed25519.PublicKey)}); err == nil {
		t.Error("an enrolment into two keys of a name without labels")
	}
	kj := keyringJSON{}
	json.Unmarshal(legacy, &kj)
	kj.Serial, kj.Authority, kj.SignedAt = 1, audit.KeyID(officerPub("officer")[0]), signTime.Format(time.RFC3339)
	m, _ := parseMeta(kj)
	kj.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(keyFor("officer"), m.SigningBytes))
	handSigned, _ := json.Marshal(kj)
	hs, err := ParseKeyring(handSigned)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hs.VerifySignature(officerPub("officer")); err == nil || !strings.Contains(err.Error(), "has no \"key\" label") {
		t.Errorf("a hand-signed keyring, two keys of a name without labels: %v", err)
	}
	kr, err := ParseKeyring([]byte(`{"keys":[` + entryJSON(t, "alice", "laptop") + `,` + entryJSON(t, "alice", "pit-pc-2") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	v, err := NewVerifier(VerifierOptions{Table: "BAC-07", Keys: kr, Window: time.Minute, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	c := Command{Table: "BAC-07", ID: NewID(), Action: coup.ActionSuspend, Supervisor: "alice", IssuedAt: FormatTime(clock.Now())}
	if err := c.Sign(keyFor("alicepit-pc-2")); err != nil {
		t.Fatal(err)
	}
	got, err := v.Verify(wire(t, c))
	if err != nil || got.KeyLabel != "pit-pc-2" || got.Input().Command.Key != "pit-pc-2" {
		t.Fatalf("verified %+v, %v", got, err)
	}
	body, _ := json.Marshal(got.Input())
	if why := checkRecorded(body, "BAC-07", kr); why != "" {
		t.Errorf("the recorded command: %s", why)
	}
	forged := bytes.Replace(body, []byte(`"key":"pit-pc-2"`), []byte(`"key":"laptop"`), 1)
	if why := checkRecorded(forged, "BAC-07", kr); !strings.Contains(why, "names key") {
		t.Errorf("a row naming the wrong key: %q", why)
	}
}

// TestRequest: an enrolment request carries a key and that key's signature
// of it; altered, or signed by another key, it is refused.
func TestRequest(t *testing.T) {
	req, err := NewRequest("ann", keyFor("ann"), "BAC-07", signTime)
	if err != nil {
		t.Fatal(err)
	}
	r, pub, err := ParseRequest(req)
	if err != nil || r.Name != "ann" || r.Table != "BAC-07" || !pub.Equal(keyFor("ann").Public()) {
		t.Fatalf("%+v %v", r, err)
	}
	for name, edit := range map[string]func(string) string{
		"another name":  func(s string) string { return strings.Replace(s, `"ann"`, `"bob"`, 1) },
		"another table": func(s string) string { return strings.Replace(s, `"BAC-07"`, `"BAC-08"`, 1) },
		"another key": func(s string) string {
			return strings.Replace(s, r.PublicKey, base64.StdEncoding.EncodeToString(keyFor("eve").Public().(ed25519.PublicKey)), 1)
		},
		"an unknown field": func(s string) string { return strings.Replace(s, `"name"`, `"admin": "yes", "name"`, 1) },
		"another format":   func(s string) string { return strings.Replace(s, RequestFormat, "tablectl-enrolment-v2", 1) },
		"no signature":     func(s string) string { return strings.Replace(s, r.Sig, "", 1) },
		"trailing data":    func(s string) string { return s + "{}" },
	} {
		if _, _, err := ParseRequest([]byte(edit(string(req)))); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	if _, err := NewRequest("a b", keyFor("ann"), "", signTime); err == nil {
		t.Error("a bad name made a request")
	}
}

// TestNewKeyringBody: the row of a keyring says which keys came, went and
// changed since the keys before.
func TestNewKeyringBody(t *testing.T) {
	before, _ := ParseKeyring([]byte(`{"keys":[` + entryJSON(t, "alice", "") + `,` + entryJSON(t, "bob", "") + `]}`))
	carl := entryJSON(t, "carl", "")
	var kj keyringJSON
	json.Unmarshal([]byte(`{"keys":[`+entryJSON(t, "alice", "")+`,`+carl+`]}`), &kj)
	kj.Keys[0].Actions = []string{"resume"}
	b, _ := json.Marshal(kj)
	next, err := ParseKeyring(b)
	if err != nil {
		t.Fatal(err)
	}
	body := NewKeyringBody(KeyringReloaded, "/etc/tablectl/supervisors.json", RecordedKeys(before), next)
	names := func(ks []KeyringKey) string {
		var out []string
		for _, k := range ks {
			out = append(out, k.Name)
		}
		return strings.Join(out, ",")
	}
	if names(body.Keys) != "alice,carl" || names(body.Added) != "carl" || names(body.Removed) != "bob" || names(body.Changed) != "alice" || body.SHA256 != next.Meta().Hash {
		t.Fatalf("%+v", body)
	}
	if first := NewKeyringBody(KeyringAtStart, "", nil, next); names(first.Added) != "alice,carl" || len(first.Removed) != 0 {
		t.Fatalf("first: %+v", first)
	}
}

// TestSignKeyringFile: the officer's step on a file, in place or to
// another, keeping the file's mode.
func TestSignKeyringFile(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "draft.json")
	if err := EnrolFile(in, Enrolment{Name: "ann", PublicKey: keyFor("ann").Public().(ed25519.PublicKey)}); err != nil {
		t.Fatal(err)
	}
	os.Chmod(in, 0o640)
	out := filepath.Join(dir, "supervisors.json")
	if _, err := SignKeyringFile(in, out, keyFor("officer"), 0, signTime); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("signed file: %v %v", fi.Mode(), err)
	}
	kr, id, err := LoadSignedKeyring(out, officerPub("officer"))
	if err != nil || id == "" || len(kr.Lookup("ann")) != 1 {
		t.Fatalf("%v", err)
	}
	if _, _, err := LoadSignedKeyring(in, officerPub("officer")); !errors.Is(err, ErrKeyringUnsigned) {
		t.Fatalf("the draft: %v", err)
	}
	// An enrolment into the signed keyring leaves a draft again, its
	// serial kept for the next signature to follow.
	if err := EnrolFile(out, Enrolment{Name: "bob", PublicKey: keyFor("bob").Public().(ed25519.PublicKey)}); err != nil {
		t.Fatal(err)
	}
	draft, err := LoadKeyring(out)
	if err != nil || draft.Meta().Signature != nil || draft.Meta().Serial != 1 {
		t.Fatalf("enrolled into a signed keyring: %+v %v", draft.Meta(), err)
	}
	kr, err = SignKeyringFile(out, "", keyFor("officer"), 0, signTime)
	if err != nil || kr.Meta().Serial != 2 {
		t.Fatalf("signed again: %v", err)
	}
}

// TestParseAuthorities: one or more PEM public keys; anything else is an
// error.
func TestParseAuthorities(t *testing.T) {
	dir := t.TempDir()
	_, pub1, err := audit.GenerateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(pub1)
	_, _, _, err = GenerateKey(dir, "second")
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := os.ReadFile(filepath.Join(dir, "second.pub"))
	got, err := ParseAuthorities(append(append([]byte{}, b1...), b2...))
	if err != nil || len(got) != 2 {
		t.Fatalf("%d authorities, %v", len(got), err)
	}
	for _, bad := range []string{"", "not pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"} {
		if _, err := ParseAuthorities([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// FuzzParseRequest: any input is a request whose key signed it, or an
// error, never a panic.
func FuzzParseRequest(f *testing.F) {
	req, _ := NewRequest("ann", keyFor("ann"), "BAC-07", signTime)
	f.Add(req)
	f.Add([]byte(`{"format":"tablectl-enrolment-v1"}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, pub, err := ParseRequest(data)
		if err != nil {
			return
		}
		msg, _ := r.signingBytes()
		sig, _ := base64.StdEncoding.DecodeString(r.Sig)
		if len(pub) != ed25519.PublicKeySize || !coup.ValidStaffName(r.Name) || !ed25519.Verify(pub, msg, sig) {
			t.Fatalf("accepted %+v", r)
		}
	})
}

// FuzzParseAuthorities: any input gives Ed25519 keys or an error.
func FuzzParseAuthorities(f *testing.F) {
	f.Add([]byte("-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAvPx0VIRMJ7IBKUkOat3n3f0foKN8vbyf/N6tSki+5oM=\n-----END PUBLIC KEY-----\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := ParseAuthorities(data)
		if err != nil {
			return
		}
		for _, k := range keys {
			if len(k) != ed25519.PublicKeySize {
				t.Fatalf("a %d-byte key", len(k))
			}
		}
	})
}
