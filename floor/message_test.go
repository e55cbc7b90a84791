package floor

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/display/mqttpub"
)

func TestSubjectsParse(t *testing.T) {
	s := Subjects{}
	for _, tc := range []struct {
		subject, table, kind string
		bad                  bool
	}{
		{"tablectl.BAC-07.pit.events", "BAC-07", KindEvents, false},
		{"tablectl.BAC-07.pit.checkpoint", "BAC-07", KindCheckpoint, false},
		{"tablectl.BAC_7.status", "BAC_7", KindStatus, false},
		{"tablectl.T1.pit.alerts.active", "T1", KindAlerts, false},
		{"tablectl.BAC//07.pit.events", "", "", true}, // NATS's form of an MQTT '.'
		{"tablectl..pit.events", "", "", true},
		{"other.BAC-07.pit.events", "", "", true},
		{"tablectl.BAC-07.pit.coup", "", "", true},
		{"tablectl.BAC-07", "", "", true},
		{"tablectl." + strings.Repeat("x", 65) + ".status", "", "", true},
	} {
		table, kind, err := s.Parse(tc.subject)
		if tc.bad != (err != nil) || table != tc.table || kind != tc.kind {
			t.Errorf("Parse(%q) = %q, %q, %v", tc.subject, table, kind, err)
		}
	}
	if got := (Subjects{Root: "x"}).Stream(); got[0] != "x.*.pit.events" || got[1] != "x.*.pit.checkpoint" {
		t.Errorf("Stream() = %v", got)
	}
}

// TestParseRowFromTheTrail: a real trail's rows, published as the
// publisher publishes them, parse to rows whose hash recomputes, bodies
// with '<', '>' and '&' included; a row changed in any field does not.
func TestParseRowFromTheTrail(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	priv, _, err := audit.GenerateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	key, err := audit.LoadPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	st, err := audit.Open(ctx, filepath.Join(dir, "trail.db"), audit.Options{Table: "BAC-07", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var recs []audit.Record
	for _, body := range []any{map[string]any{"reason": "dealer exposed a card <P3> & more"}, map[string]any{"n": 1.5, "s": "é\u2028"}, []int{1, 2}} {
		r, err := st.Append(ctx, audit.Event{Kind: "ctl.test", Shoe: 1, Coup: 2, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	for _, rec := range recs {
		p, err := mqttpub.MarshalEvent(mqttpub.EventOf(rec))
		if err != nil {
			t.Fatal(err)
		}
		r, err := ParseRow("BAC-07", p)
		if err != nil {
			t.Fatal(err)
		}
		if r.ComputeHash() != rec.Hash || !bytes.Equal(r.Body, rec.Body) {
			t.Fatalf("row %d from %s does not hash to %s", rec.Seq, p, rec.Hash)
		}
		// What json.Marshal would have sent (HTML escapes) still checks.
		escaped, _ := json.Marshal(mqttpub.EventOf(rec))
		if r, err := ParseRow("BAC-07", escaped); err != nil || r.ComputeHash() != rec.Hash {
			t.Fatalf("escaped payload %s: %v", escaped, err)
		}
		for _, change := range []func(*Row){
			func(r *Row) { r.Seq++ },
			func(r *Row) { r.At = strings.Replace(r.At, "Z", "+00:00", 1) },
			func(r *Row) { r.Kind = "ctl.other" },
			func(r *Row) { r.Coup++ },
			func(r *Row) { r.Body = append([]byte(nil), r.Body...); r.Body[len(r.Body)-1] = ' ' },
			func(r *Row) { r.PrevHash[0] ^= 1 },
		} {
			c := r
			change(&c)
			if c.ComputeHash() == rec.Hash {
				t.Errorf("row %d: a change left the hash %s", rec.Seq, rec.Hash)
			}
		}
	}
}

func TestParseRowRefuses(t *testing.T) {
	good := `{"seq":1,"at":"2026-11-25T12:00:00Z","kind":"x","shoe":0,"coup":0,"body":{},"prev_hash":"` + strings.Repeat("0", 64) + `","hash":"` + strings.Repeat("a", 64) + `"}`
	if _, err := ParseRow("T", []byte(good)); err != nil {
		t.Fatalf("good row refused: %v", err)
	}
	for _, bad := range []string{
		``, `null`, `[]`, `{}`, good + good,
		strings.Replace(good, `"seq":1`, `"seq":0`, 1),
		strings.Replace(good, `"seq":1,`, ``, 1),
		strings.Replace(good, `"body":{},`, ``, 1),
		strings.Replace(good, `"at":"2026-11-25T12:00:00Z"`, `"at":"yesterday"`, 1),
		strings.Replace(good, `"kind":"x"`, `"kind":""`, 1),
		strings.Replace(good, `"shoe":0`, `"shoe":0,"extra":1`, 1),
		strings.Replace(good, strings.Repeat("a", 64), strings.Repeat("A", 64), 1),
		`{"seq":1,"body":` + strings.Repeat("[", 100000) + `}`,
		strings.Repeat(" ", MaxMessageBytes+1),
	} {
		if _, err := ParseRow("T", []byte(bad)); err == nil {
			t.Errorf("ParseRow(%.80q) accepted", bad)
		}
	}
}

func TestRegistry(t *testing.T) {
	dir := t.TempDir()
	_, pubFile, err := audit.GenerateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _ := ed25519.GenerateKey(nil)
	reg := `{"heartbeat":"30s","tables":{"BAC-07":{"public_key_files":["checkpoint.pub"],"heartbeat":"5s","pit_view":"http://x/pit"},
		"BAC-08":{"public_keys":["` + base64.StdEncoding.EncodeToString(pub) + `"]}}}`
	path := filepath.Join(dir, "floor.json")
	os.WriteFile(path, []byte(reg), 0o644)
	r, err := LoadRegistry(path)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := audit.LoadPublicKey(pubFile)
	if e := r.Tables["BAC-07"]; !e.Keys[0].Equal(want) || e.Heartbeat != 5*time.Second || e.PitView != "http://x/pit" {
		t.Errorf("BAC-07: %+v", e)
	}
	if r.heartbeat("BAC-08") != 30*time.Second || r.heartbeat("NEW") != 30*time.Second {
		t.Errorf("heartbeats %v %v", r.heartbeat("BAC-08"), r.heartbeat("NEW"))
	}
	for _, bad := range []string{
		`{"tables":{"BAC.07":{"public_keys":["` + base64.StdEncoding.EncodeToString(pub) + `"]}}}`,
		`{"tables":{"BAC-07":{}}}`,
		`{"tables":{"BAC-07":{"public_keys":["short"]}}}`,
		`{"tables":{"BAC-07":{"public_key_files":["missing.pub"]}}}`,
		`{"heartbeat":"-1s"}`,
		`{"tables":{},"other":1}`,
	} {
		if _, err := ParseRegistry([]byte(bad), dir); err == nil {
			t.Errorf("registry %s accepted", bad)
		}
	}
}

// FuzzWitnessRead: whatever arrives on a table's subjects, the witness
// reads it without panicking, and a row it accepts has every field.
func FuzzWitnessRead(f *testing.F) {
	good := `{"seq":1,"at":"2026-11-25T12:00:00Z","kind":"x","shoe":0,"coup":0,"body":{"a":"<b>"},"prev_hash":"` + strings.Repeat("0", 64) + `","hash":"` + strings.Repeat("a", 64) + `"}`
	f.Add("tablectl.BAC-07.pit.events", []byte(good))
	f.Add("tablectl.BAC-07.pit.checkpoint", []byte(`{"format":"tablectl-checkpoint-v1","table":"BAC-07","seq":42,"head_hash":"`+strings.Repeat("0", 64)+`","signed_at":"2026-11-22T20:00:15.5Z","key_id":"bea092595774e6a5","signature":"`+strings.Repeat("00", 64)+`"}`))
	f.Add("tablectl.X.status", []byte(`{}`))
	w := &Witness{cfg: Config{Registry: &Registry{Tables: map[string]TableEntry{}}}}
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		it := w.read(subject, data)
		if it.row != nil && (it.row.Seq < 1 || it.row.Kind == "" || it.row.Body == nil) {
			t.Fatalf("accepted %+v", it.row)
		}
		if it.cp != nil {
			verifyAll([]item{it}, w.cfg.Registry)
		}
	})
}
