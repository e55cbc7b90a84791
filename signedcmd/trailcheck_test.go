package signedcmd

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// TestCheckTrail records real commands through the handler, then checks
// the trail against keyrings: genuine ones pass, and every way of forging
// or altering a recorded command is a Forgery.
func TestCheckTrail(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	rec := openRecorder(t, filepath.Join(t.TempDir(), "trail.db"), clock)
	defer rec.Close()
	h := &Handler{Verifier: newTestVerifier(t, clock), Recorder: rec, Clock: clock, Logger: quiet()}
	start := rec.Store().Head().Seq + 1
	h.Handle(ctx, wire(t, signed(t, clock, "alice", "suspend", func(c *Command) { c.Reason = "camera down" })), 0)
	h.Handle(ctx, wire(t, signed(t, clock, "bob", "resume", nil)), 0)
	var cmds []audit.Record
	for _, r := range rows(t, rec, start) {
		if r.Kind == string(coup.InCmd) {
			cmds = append(cmds, r)
		}
	}
	if len(cmds) != 2 {
		t.Fatalf("%d commands recorded, want 2", len(cmds))
	}
	seq := func(rs []audit.Record) func(func(audit.Record, error) bool) {
		return func(yield func(audit.Record, error) bool) {
			for _, r := range rs {
				if !yield(r, nil) {
					return
				}
			}
		}
	}
	checked, forged, err := CheckTrail(seq(rows(t, rec, 1)), "BAC-07", testKeyring(t))
	if err != nil || checked != 2 || len(forged) != 0 {
		t.Fatalf("genuine trail: checked %d, forged %+v, err %v", checked, forged, err)
	}

	edit := func(r audit.Record, f func(c *coup.Command)) audit.Record {
		var in coup.Input
		if err := json.Unmarshal(r.Body, &in); err != nil {
			t.Fatal(err)
		}
		f(in.Command)
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		r.Body = b
		return r
	}
	mallory := signed(t, clock, "mallory", "void", nil)
	msigned, _ := mallory.SigningBytes()
	tests := []struct {
		name string
		row  audit.Record
		kr   *Keyring
		want string
	}{
		{"no signature recorded", edit(cmds[0], func(c *coup.Command) { c.Signed, c.Sig, c.KeyID = "", "", "" }), testKeyring(t), "without its signature"},
		{"by changed", edit(cmds[0], func(c *coup.Command) { c.By = "bob" }), testKeyring(t), "the row says suspend by bob"},
		{"reason changed", edit(cmds[0], func(c *coup.Command) { c.Reason = "none" }), testKeyring(t), "the row says"},
		{"action changed", edit(cmds[0], func(c *coup.Command) { c.Action = coup.ActionVoid }), testKeyring(t), "the row says void"},
		{"signature of other bytes", edit(cmds[0], func(c *coup.Command) { c.Sig = cmds1Sig(t, cmds[1]) }), testKeyring(t), "does not verify"},
		{"signed bytes altered", edit(cmds[0], func(c *coup.Command) {
			c.Signed, c.Reason = strings.Replace(c.Signed, "camera down", "camera up", 1), "camera up"
		}), testKeyring(t), "does not verify"},
		{"a key the keyring does not hold", edit(cmds[0], func(c *coup.Command) {
			c.ID, c.By, c.Action, c.Reason = mallory.ID, "mallory", "void", ""
			c.Signed, c.Sig, c.KeyID = string(msigned), mallory.Sig, audit.KeyID(keyFor("mallory").Public().(ed25519.PublicKey))
		}), testKeyring(t), "is not mallory's in the keyring"},
		{"key removed from the keyring", cmds[0], keyringOf(t, "bob", ""), "is not alice's in the keyring"},
		{"key retired before it signed", cmds[0], keyringOf(t, "alice", `,"not_after":"2026-11-22T14:00:00Z"`), "was not valid"},
		{"key retired after it signed", cmds[0], keyringOf(t, "alice", `,"not_after":"2026-11-22T15:00:00Z"`), ""},
		{"key not yet valid", cmds[0], keyringOf(t, "alice", `,"not_before":"2026-11-23T00:00:00Z"`), "was not valid"},
		{"another table's", editTable(t, cmds[0]), testKeyring(t), "signed for table"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, forged, err := CheckTrail(seq([]audit.Record{tc.row}), "BAC-07", tc.kr)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && len(forged) != 0:
				t.Fatalf("forged %+v, want none", forged)
			case tc.want != "" && (len(forged) != 1 || !strings.Contains(forged[0].Detail, tc.want) || forged[0].Seq != tc.row.Seq):
				t.Fatalf("forged %+v, want one at %d saying %q", forged, tc.row.Seq, tc.want)
			}
		})
	}
}

func cmds1Sig(t *testing.T, r audit.Record) string {
	var in coup.Input
	if err := json.Unmarshal(r.Body, &in); err != nil {
		t.Fatal(err)
	}
	return in.Command.Sig
}

// editTable re-signs the recorded command with its own key for another
// table: a genuine signature, but not for this trail's table.
func editTable(t *testing.T, r audit.Record) audit.Record {
	var in coup.Input
	if err := json.Unmarshal(r.Body, &in); err != nil {
		t.Fatal(err)
	}
	canon, _ := strings.CutPrefix(in.Command.Signed, SigningDomain)
	var c Command
	if err := json.Unmarshal([]byte(canon), &c); err != nil {
		t.Fatal(err)
	}
	c.Table = "BAC-08"
	if err := c.Sign(keyFor(c.Supervisor)); err != nil {
		t.Fatal(err)
	}
	b, _ := c.SigningBytes()
	in.Command.Signed, in.Command.Sig = string(b), c.Sig
	r.Body, _ = json.Marshal(in)
	return r
}

// keyringOf is a keyring holding name's test key with extra JSON members.
func keyringOf(t *testing.T, name, extra string) *Keyring {
	t.Helper()
	pub := keyFor(name).Public().(ed25519.PublicKey)
	kr, err := ParseKeyring([]byte(fmt.Sprintf(`{"keys":[{"name":%q,"public_key":%q,"actions":["*"]%s}]}`, name, base64.StdEncoding.EncodeToString(pub), extra)))
	if err != nil {
		t.Fatal(err)
	}
	return kr
}
