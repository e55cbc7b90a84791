package signedcmd

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/coup"
)

// TestSigningBytesGolden pins the signed bytes and checks a signature made
// outside tablectl (openssl pkeyutl -sign -rawin over the golden file, with
// RFC 8032's test key 1) verifies.
func TestSigningBytesGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/signing-void.golden")
	if err != nil {
		t.Fatal(err)
	}
	c := Command{Table: "BAC-07", ID: "c-0001", Action: "void", Supervisor: "alice",
		IssuedAt: "2026-11-22T14:03:07.123Z", Coup: 12, Reason: "dealer exposed a card <P3>"}
	got, err := c.SigningBytes()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("signing bytes\n got %q\nwant %q", got, want)
	}
	if err := c.Sign(rfcKey()); err != nil {
		t.Fatal(err)
	}
	payload, err := os.ReadFile("testdata/void-signed.json")
	if err != nil {
		t.Fatal(err)
	}
	if wire := append(must(c.Marshal()), '\n'); !bytes.Equal(wire, payload) {
		t.Fatalf("wire form\n got %s\nwant %s", wire, payload)
	}
	kr, err := LoadKeyring("testdata/keyring.json")
	if err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock() // the command's own issue time
	v, err := NewVerifier(VerifierOptions{Table: "BAC-07", Keys: kr, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	got2, err := v.Verify(payload)
	if err != nil {
		t.Fatal(err)
	}
	in := got2.Input()
	if in.Kind != coup.InCmd || in.Command.By != "alice" || in.Command.Coup != 12 || in.Command.ID != "c-0001" || in.Command.Action != coup.ActionVoid {
		t.Fatalf("input %+v %+v", in, in.Command)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestVerifyIndependentSigner signs hand-written canonical bytes with
// crypto/ed25519 directly, as a signer in another language would, with the
// fields in another order and spacing on the wire.
func TestVerifyIndependentSigner(t *testing.T) {
	clock := newFakeClock()
	v := newTestVerifier(t, clock)
	msg := "tablectl-command-v1\n" + `{"action":"card","card":"9D","id":"x:1","issued_at":"2026-11-22T14:03:07.123Z","supervisor":"bob","table":"BAC-07"}`
	sig := base64.StdEncoding.EncodeToString(ed25519.Sign(keyFor("bob"), []byte(msg)))
	payload := `{ "supervisor": "bob", "table": "BAC-07", "id": "x:1", "action": "card", "card": "9D",
	  "issued_at": "2026-11-22T14:03:07.123Z", "sig": "` + sig + `" }`
	got, err := v.Verify([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	if got.Card == nil || *got.Card != (coup.Card{Rank: coup.Nine, Suit: coup.Diamonds}) {
		t.Fatalf("card %v", got.Card)
	}
}

func TestVerifyRefusals(t *testing.T) {
	big := strings.Repeat("x", MaxBytes)
	tests := []struct {
		name string
		// payload builds the command; it gets a fresh verifier whose clock
		// reads the command's issue time.
		payload func(t *testing.T, clock *fakeClock) []byte
		code    string
		id      bool // the refusal still names the id
	}{
		{"oversized", func(t *testing.T, c *fakeClock) []byte {
			return wire(t, signed(t, c, "alice", "suspend", func(x *Command) { x.Reason = big }))
		}, CodeOversized, false},
		{"not json", func(t *testing.T, c *fakeClock) []byte { return []byte("void coup 12 please") }, CodeMalformed, false},
		{"array", func(t *testing.T, c *fakeClock) []byte { return []byte(`[1,2]`) }, CodeMalformed, false},
		{"invalid utf-8", func(t *testing.T, c *fakeClock) []byte { return []byte("{\"id\":\"\xff\"}") }, CodeMalformed, false},
		{"trailing data", func(t *testing.T, c *fakeClock) []byte {
			return append(wire(t, signed(t, c, "alice", "suspend", nil)), "{}"...)
		}, CodeMalformed, false},
		{"duplicate key", func(t *testing.T, c *fakeClock) []byte {
			w := wire(t, signed(t, c, "alice", "suspend", nil))
			return bytes.Replace(w, []byte(`{"action":"suspend",`), []byte(`{"action":"suspend","action":"void",`), 1)
		}, CodeMalformed, false},
		{"unknown field", func(t *testing.T, c *fakeClock) []byte {
			w := wire(t, signed(t, c, "alice", "suspend", nil))
			return bytes.Replace(w, []byte(`{"action"`), []byte(`{"admin":true,"action"`), 1)
		}, CodeMalformed, true},
		{"wrong type", func(t *testing.T, c *fakeClock) []byte {
			w := wire(t, signed(t, c, "alice", "void", func(x *Command) { x.Coup = 3 }))
			return bytes.Replace(w, []byte(`"coup":3`), []byte(`"coup":"3"`), 1)
		}, CodeMalformed, true},
		{"fractional coup", func(t *testing.T, c *fakeClock) []byte {
			w := wire(t, signed(t, c, "alice", "void", func(x *Command) { x.Coup = 3 }))
			return bytes.Replace(w, []byte(`"coup":3`), []byte(`"coup":3.5`), 1)
		}, CodeMalformed, true},
		{"no id", func(t *testing.T, c *fakeClock) []byte {
			return wire(t, signed(t, c, "alice", "suspend", func(x *Command) { x.ID = "" }))
		}, CodeMalformed, false},
		{"bad id", func(t *testing.T, c *fakeClock) []byte {
			return wire(t, signed(t, c, "alice", "suspend", func(x *Command) { x.ID = "a b" }))
		}, CodeMalformed, true},
		{"unknown action", func(t *testing.T, c *fakeClock) []byte { return wire(t, signed(t, c, "alice", "shuffle", nil)) }, CodeMalformed, true},
		{"dealer-in without a dealer", func(t *testing.T, c *fakeClock) []byte { return wire(t, signed(t, c, "alice", "dealer-in", nil)) }, CodeMalformed, true},
		{"dealer-in with a bad name", func(t *testing.T, c *fakeClock) []byte {
			return wire(t, signed(t, c, "alice", "dealer-in", func(x *Command) { x.Dealer = "ann smith" }))
		}, CodeMalformed, true},
		{"dealer on another action", func(t *testing.T, c *fakeClock) []byte {
			return wire(t, signed(t, c, "alice", "suspend", func(x *Command) { x.Dealer = "ann" }))
		}, CodeMalformed, true},
		{"no supervisor", func(t *testing.T, c *fakeClock) []byte {
			x := signed(t, c, "alice", "suspend", nil)
			x.Supervisor = ""
			return wire(t, x)
		}, CodeMalformed, true},
		{"no signature", func(t *testing.T, c *fakeClock) []byte {
			x := signed(t, c, "alice", "suspend", nil)
			x.Sig = ""
			return wire(t, x)
		}, CodeMalformed, true},
		{"signature not base64", func(t *testing.T, c *fakeClock) []byte {
			x := signed(t, c, "alice", "suspend", nil)
			x.Sig = "not*base64"
			return wire(t, x)
		}, CodeMalformed, true},
		{"short signature", func(t *testing.T, c *fakeClock) []byte {
			x := signed(t, c, "alice", "suspend", nil)
			x.Sig = base64.StdEncoding.EncodeToString([]byte("short"))
			return wire(t, x)
		}, CodeMalformed, true},
		{"bad issued_at", func(t *testing.T, c *fakeClock) []byte {
			return wire(t, signed(t, c, "alice", "suspend", func(x *Command) { x.IssuedAt = "yesterday" }))
		}, CodeMalformed, true},
		{"bad card", func(t *testing.T, c *fakeClock) []byte {
			return wire(t, signed(t, c, "alice", "card", func(x *Command) { x.Card = "1Z" }))
		}, CodeMalformed, true},
		{"card on a void", func(t *testing.T, c *fakeClock) []byte {
			return wire(t, signed(t, c, "alice", "void", func(x *Command) { x.Card = "KH" }))
		}, CodeMalformed, true},
		{"resync without from", func(t *testing.T, c *fakeClock) []byte { return wire(t, signed(t, c, "alice", "resync", nil)) }, CodeMalformed, true},
		{"resync to before from", func(t *testing.T, c *fakeClock) []byte {
			return wire(t, signed(t, c, "alice", "resync", func(x *Command) { x.From, x.To = 10, 9 }))
		}, CodeMalformed, true},
		{"negative to", func(t *testing.T, c *fakeClock) []byte {
			return wire(t, signed(t, c, "alice", "resync", func(x *Command) { x.From, x.To = 10, -1 }))
		}, CodeMalformed, true},
		{"to on a void", func(t *testing.T, c *fakeClock) []byte {
			return wire(t, signed(t, c, "alice", "void", func(x *Command) { x.To = 5 }))
		}, CodeMalformed, true},
		{"negative coup", func(t *testing.T, c *fakeClock) []byte {
			return wire(t, signed(t, c, "alice", "void", func(x *Command) { x.Coup = -1 }))
		}, CodeMalformed, true},
		{"unknown key", func(t *testing.T, c *fakeClock) []byte { return wire(t, signed(t, c, "mallory", "suspend", nil)) }, CodeUnknownKey, true},
		{"signed by another key", func(t *testing.T, c *fakeClock) []byte {
			x := signed(t, c, "mallory", "suspend", nil)
			x.Supervisor = "alice"
			if err := x.Sign(keyFor("mallory")); err != nil {
				t.Fatal(err)
			}
			return wire(t, x)
		}, CodeBadSignature, true},
		{"altered after signing", func(t *testing.T, c *fakeClock) []byte {
			x := signed(t, c, "alice", "void", func(x *Command) { x.Coup = 3 })
			x.Coup = 4
			return wire(t, x)
		}, CodeBadSignature, true},
		{"field added after signing", func(t *testing.T, c *fakeClock) []byte {
			x := signed(t, c, "alice", "void", nil)
			x.Reason = "added"
			return wire(t, x)
		}, CodeBadSignature, true},
		{"wrong table", func(t *testing.T, c *fakeClock) []byte {
			return wire(t, signed(t, c, "alice", "suspend", func(x *Command) { x.Table = "BAC-08" }))
		}, CodeWrongTable, true},
		{"stale", func(t *testing.T, c *fakeClock) []byte {
			x := signed(t, c, "alice", "suspend", nil)
			c.Advance(time.Minute + time.Millisecond)
			return wire(t, x)
		}, CodeStale, true},
		{"future", func(t *testing.T, c *fakeClock) []byte {
			x := signed(t, c, "alice", "suspend", nil)
			c.Advance(-time.Minute - time.Millisecond)
			return wire(t, x)
		}, CodeFuture, true},
		{"not permitted", func(t *testing.T, c *fakeClock) []byte { return wire(t, signed(t, c, "game-server", "suspend", nil)) }, CodeNotPermitted, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			v := newTestVerifier(t, clock)
			payload := tt.payload(t, clock)
			_, err := v.Verify(payload)
			var r *Refusal
			if !errors.As(err, &r) {
				t.Fatalf("Verify(%.200s) = %v, want a refusal %s", payload, err, tt.code)
			}
			if r.Code != tt.code || r.Reason == "" {
				t.Fatalf("refused %s (%s), want %s", r.Code, r.Reason, tt.code)
			}
			if tt.id && r.ID == "" {
				t.Fatalf("refusal %s does not name the command id", r.Code)
			}
			if v.Seen() != 0 {
				t.Fatalf("a refused command's id was remembered")
			}
		})
	}
}

func TestVerifyAccepts(t *testing.T) {
	clock := newFakeClock()
	v := newTestVerifier(t, clock)
	tests := []struct {
		by, action string
		edit       func(*Command)
		check      func(t *testing.T, got Verified)
	}{
		{"alice", "suspend", func(c *Command) { c.Reason = "camera 3 down" }, func(t *testing.T, got Verified) {
			if in := got.Input(); in.Command.Reason != "camera 3 down" || in.Command.By != "alice" {
				t.Fatalf("%+v", in.Command)
			}
		}},
		{"bob", "void", func(c *Command) { c.Coup = 7 }, func(t *testing.T, got Verified) {
			if got.Input().Command.Coup != 7 {
				t.Fatal("coup lost")
			}
		}},
		{"alice", "card", func(c *Command) { c.Card = "QS" }, func(t *testing.T, got Verified) {
			if c := got.Input().Command.Card; c == nil || c.String() != "QS" {
				t.Fatalf("card %v", c)
			}
		}},
		{"alice", "resync", func(c *Command) { c.From = 42 }, func(t *testing.T, got Verified) {
			if got.Command.From != 42 {
				t.Fatal("from lost")
			}
		}},
		{"alice", "resync", func(c *Command) { c.From, c.To = 42, 52 }, func(t *testing.T, got Verified) {
			if got.Command.From != 42 || got.Command.To != 52 {
				t.Fatal("from or to lost")
			}
		}},
		{"game-server", "bets-closed", func(c *Command) { c.Coup = 3 }, nil},
		{"alice", "resume", nil, nil},
		{"alice", "shoe-start", nil, nil},
		{"alice", "shoe-end", nil, nil},
		{"alice", "dealer-in", func(c *Command) { c.Dealer = "d-1042" }, func(t *testing.T, got Verified) {
			if d := got.Input().Command.Dealer; d != "d-1042" {
				t.Fatalf("dealer %q", d)
			}
		}},
		{"alice", "dealer-out", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.action, func(t *testing.T) {
			c := signed(t, clock, tt.by, tt.action, tt.edit)
			got, err := v.Verify(wire(t, c))
			if err != nil {
				t.Fatal(err)
			}
			if got.Command.ID != c.ID || got.Command.Supervisor != tt.by {
				t.Fatalf("%+v", got.Command)
			}
			if tt.check != nil {
				tt.check(t, got)
			}
			// The same command again is a replay.
			_, err = v.Verify(wire(t, c))
			var r *Refusal
			if !errors.As(err, &r) || r.Code != CodeReplayed || r.ID != c.ID {
				t.Fatalf("replay: %v", err)
			}
		})
	}
	// The window edges are inside it.
	for _, d := range []time.Duration{-time.Minute, time.Minute} {
		c := signed(t, clock, "alice", "suspend", func(c *Command) { c.IssuedAt = FormatTime(clock.Now().Add(d)) })
		if _, err := v.Verify(wire(t, c)); err != nil {
			t.Fatalf("issued %v away: %v", d, err)
		}
	}
}

// TestReplayNeverAccepted: whenever a command is sent again, before or
// after its id is forgotten, it is refused, as a replay or as stale.
func TestReplayNeverAccepted(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	clock := newFakeClock()
	v := newTestVerifier(t, clock)
	var sent []Command
	for i := 0; i < 2000; i++ {
		clock.Advance(time.Duration(rng.IntN(3000)) * time.Millisecond)
		skew := time.Duration(rng.IntN(120_000)-60_000) * time.Millisecond
		c := signed(t, clock, "alice", "suspend", func(c *Command) { c.IssuedAt = FormatTime(clock.Now().Add(skew)) })
		if _, err := v.Verify(wire(t, c)); err != nil {
			t.Fatalf("fresh command %d refused: %v", i, err)
		}
		sent = append(sent, c)
		old := sent[rng.IntN(len(sent))]
		_, err := v.Verify(wire(t, old))
		var r *Refusal
		if !errors.As(err, &r) || (r.Code != CodeReplayed && r.Code != CodeStale) {
			t.Fatalf("resent command %s: %v", old.ID, err)
		}
	}
	// Memory stays bounded by the window: at most ~2 minutes of commands
	// at one every 1.5 s on average, not all 2000.
	if n := v.Seen(); n > 200 {
		t.Fatalf("%d ids remembered", n)
	}
}

func TestVerifyBusy(t *testing.T) {
	clock := newFakeClock()
	v, err := NewVerifier(VerifierOptions{Table: "BAC-07", Keys: testKeyring(t), Window: time.Minute, MaxSeen: 2, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := v.Verify(wire(t, signed(t, clock, "alice", "suspend", nil))); err != nil {
			t.Fatal(err)
		}
	}
	_, err = v.Verify(wire(t, signed(t, clock, "alice", "suspend", nil)))
	var r *Refusal
	if !errors.As(err, &r) || r.Code != CodeBusy {
		t.Fatalf("third: %v", err)
	}
	clock.Advance(time.Minute + time.Second)
	if _, err := v.Verify(wire(t, signed(t, clock, "alice", "suspend", nil))); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

func TestParseKeyring(t *testing.T) {
	pub := base64.StdEncoding.EncodeToString(keyFor("a").Public().(ed25519.PublicKey))
	tests := []struct{ name, doc, want string }{
		{"unknown field", `{"keys":[],"admins":[]}`, "unknown field"},
		{"bad name", `{"keys":[{"name":"a b","public_key":"` + pub + `","actions":["*"]}]}`, "name"},
		{"short key", `{"keys":[{"name":"a","public_key":"AAAA","actions":["*"]}]}`, "public_key"},
		{"no actions", `{"keys":[{"name":"a","public_key":"` + pub + `"}]}`, "no actions"},
		{"unknown action", `{"keys":[{"name":"a","public_key":"` + pub + `","actions":["shuffle"]}]}`, "unknown action"},
		{"same key twice", `{"keys":[{"name":"a","public_key":"` + pub + `","actions":["*"]},{"name":"b","public_key":"` + pub + `","actions":["*"]}]}`, "twice"},
		{"trailing", `{"keys":[]} {}`, "after the JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseKeyring([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
	kr, err := ParseKeyring([]byte(`{"keys":[{"name":"a","public_key":"` + pub + `","actions":["void","resume"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	k := kr.Lookup("a")
	if len(k) != 1 || !k[0].Permits("void") || k[0].Permits("suspend") || kr.Lookup("b") != nil {
		t.Fatalf("%+v", k)
	}
}

func TestDeployKeyringParses(t *testing.T) {
	kr, err := LoadKeyring("../deploy/supervisors.json")
	if err != nil {
		t.Fatal(err)
	}
	gs := kr.Lookup("game-server")
	if len(gs) != 1 || !gs[0].Permits("bets-closed") || gs[0].Permits("void") {
		t.Fatalf("game server key %+v", gs)
	}
}

func TestGenerateKey(t *testing.T) {
	dir := t.TempDir()
	priv, pub, entry, err := GenerateKey(dir, "carol")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := GenerateKey(dir, "carol"); err == nil {
		t.Fatal("overwrote an existing key")
	}
	fi, err := os.Stat(priv)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key mode %v %v", fi.Mode(), err)
	}
	if _, err := os.Stat(pub); err != nil {
		t.Fatal(err)
	}
	kr, err := ParseKeyring([]byte(`{"keys":[` + string(entry) + `]}`))
	if err != nil || len(kr.Lookup("carol")) != 1 {
		t.Fatalf("entry %s: %v", entry, err)
	}
}
