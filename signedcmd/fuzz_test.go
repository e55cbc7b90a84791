package signedcmd

import (
	"bytes"
	"testing"
	"time"

	"github.com/tablectl/tablectl/coup"
)

// FuzzVerify feeds the verifier anything: it must never panic, and a
// command it can parse must survive a round trip through Marshal with the
// same signed bytes as SigningBytes gives.
func FuzzVerify(f *testing.F) {
	clock := newFakeClock()
	f.Add(wire(f, signed(f, clock, "alice", "void", func(c *Command) { c.Coup = 3 })))
	f.Add(wire(f, signed(f, clock, "alice", "card", func(c *Command) { c.Card = "KH" })))
	f.Add(wire(f, signed(f, clock, "alice", "resync", func(c *Command) { c.From = 9 })))
	v, err := NewVerifier(VerifierOptions{Table: "BAC-07", Keys: testKeyring(f), Window: time.Minute, Clock: clock})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		v.Verify(payload)
		p := parse(payload)
		if p.refusal != nil {
			if p.refusal.Code == "" || p.refusal.Reason == "" {
				t.Fatalf("refusal without code or reason: %+v", p.refusal)
			}
			return
		}
		again := parse(wire(t, p.cmd))
		if again.refusal != nil {
			t.Fatalf("re-marshalled command refused: %v", again.refusal)
		}
		sb, err := p.cmd.SigningBytes()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.signed, sb) {
			t.Fatalf("signed bytes differ:\n%q\n%q", again.signed, sb)
		}
	})
}

// FuzzParseKeyring: any input is a keyring or an error, never a panic, and
// every key it yields is usable.
func FuzzParseKeyring(f *testing.F) {
	f.Add([]byte(`{"keys":[{"name":"a","public_key":"11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=","actions":["*"]}]}`))
	f.Add([]byte(`{"keys":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		kr, err := ParseKeyring(data)
		if err != nil {
			return
		}
		for _, k := range kr.keys {
			if len(k.PublicKey) != 32 || !coup.ValidStaffName(k.Name) || len(k.Actions) == 0 {
				t.Fatalf("bad key %+v", k)
			}
		}
	})
}
