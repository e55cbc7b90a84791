package signedcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
)

func newTestScreen(t testing.TB) *Screen {
	t.Helper()
	s, err := NewScreen("BAC-07", testKeyring(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The screen lets through every command Verify accepts, however it is
// written, and refuses junk with the code Verify gives it.
func TestScreen(t *testing.T) {
	clock := newFakeClock()
	s := newTestScreen(t)
	good := wire(t, signed(t, clock, "alice", "void", func(c *Command) { c.Coup = 3; c.Reason = `a "quoted" reason \ with <P3>` }))
	// The same object written otherwise: spaced out, keys in another order,
	// names escaped.
	var members map[string]json.RawMessage
	if err := json.Unmarshal(good, &members); err != nil {
		t.Fatal(err)
	}
	var spaced bytes.Buffer
	spaced.WriteString(" {\n")
	for _, k := range []string{"sig", "table", "reason", "supervisor", "coup", "id", "issued_at", "action"} {
		spaced.WriteString("\t\"" + k + "\" : " + string(members[k]) + " ,\r\n")
	}
	spacedCmd := strings.TrimSuffix(spaced.String(), " ,\r\n") + "\n} "
	escaped := strings.Replace(strings.Replace(string(good), `"supervisor":"alice"`, `"supervisor":"\u0061lice"`, 1), `"table":`, `"t\u0061ble":`, 1)
	tests := []struct {
		name    string
		payload string
		size    int
		want    string
	}{
		{"canonical", string(good), 0, ""},
		{"spaced and reordered", spacedCmd, 0, ""},
		{"escaped names", escaped, 0, ""},
		{"cut short, oversized", strings.Repeat("{", MaxBytes+1), MaxBytes + 5000, CodeOversized},
		{"oversized whole", `{"table":"BAC-07","supervisor":"alice","reason":"` + strings.Repeat("x", MaxBytes) + `"}`, 0, CodeOversized},
		{"empty", "", 0, CodeMalformed},
		{"not an object", `["table","BAC-07"]`, 0, CodeMalformed},
		{"random bytes", "\xff\xfe{}", 0, CodeMalformed},
		{"empty object", `{}`, 0, CodeMalformed},
		{"no supervisor", `{"table":"BAC-07","id":"x","action":"void","sig":"AAAA","unknown":1}`, 0, CodeMalformed},
		{"no table", `{"supervisor":"alice","id":"x"}`, 0, CodeMalformed},
		{"cut off", `{"table":"BAC-07","id":`, 0, CodeMalformed},
		{"nested value", `{"id":{"a":1},"table":"BAC-07","supervisor":"alice"}`, 0, CodeMalformed},
		{"array value", `{"coup":[1],"table":"BAC-07","supervisor":"alice"}`, 0, CodeMalformed},
		{"table twice", `{"table":"BAC-07","table":"BAC-07","supervisor":"alice"}`, 0, CodeMalformed},
		{"supervisor not a string", `{"table":"BAC-07","supervisor":7}`, 0, CodeMalformed},
		{"bad supervisor name", `{"table":"BAC-07","supervisor":"al ice"}`, 0, CodeMalformed},
		{"control character", "{\"table\":\"BAC\n07\",\"supervisor\":\"alice\"}", 0, CodeMalformed},
		{"unknown supervisor", string(wire(t, signed(t, clock, "mallory", "void", nil))), 0, CodeUnknownKey},
		{"unknown supervisor, other table", `{"table":"BAC-08","supervisor":"mallory"}`, 0, CodeUnknownKey},
		{"other table", string(wire(t, signed(t, clock, "alice", "void", func(c *Command) { c.Table = "BAC-08" }))), 0, CodeWrongTable},
		{"forged but plausible", `{"table":"BAC-07","supervisor":"alice","sig":"AAAA"}`, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			payload := []byte(tt.payload)
			if got := s.Check(payload, tt.size); got != tt.want {
				t.Fatalf("Check = %q, want %q", got, tt.want)
			}
			if tt.want == "" {
				return
			}
			// What the screen refuses, Verify refuses.
			_, err := newTestVerifier(t, clock).Verify(payload)
			var ref *Refusal
			if !errors.As(err, &ref) {
				t.Fatalf("Verify accepted what the screen refused as %s", tt.want)
			}
		})
	}
	for _, tt := range tests[:3] {
		if _, err := newTestVerifier(t, clock).Verify([]byte(tt.payload)); err != nil {
			t.Errorf("%s: Verify refused it: %v", tt.name, err)
		}
	}
}

// FuzzScreen: the screen never panics, and never refuses a command that
// Verify accepts.
func FuzzScreen(f *testing.F) {
	clock := newFakeClock()
	good := wire(f, signed(f, clock, "alice", "void", func(c *Command) { c.Coup = 3 }))
	f.Add(good, 0)
	f.Add(wire(f, signed(f, clock, "bob", "card", func(c *Command) { c.Card = "KH"; c.Reason = "\u00e9\\\"" })), 0)
	f.Add(bytes.Replace(good, []byte(`"table"`), []byte(`"t\u0061ble"`), 1), 0)
	f.Add([]byte(`{"table":"BAC-07","supervisor":"mallory"}`), 0)
	f.Add([]byte(` { "coup" : -1.5e3 , "x" : null , "table" : "BAC-07" , "supervisor" : "alice" } `), 0)
	f.Add(bytes.Repeat([]byte("{"), 100), MaxBytes+1)
	s := newTestScreen(f)
	f.Fuzz(func(t *testing.T, payload []byte, size int) {
		code := s.Check(payload, size)
		switch code {
		case "", CodeOversized, CodeMalformed, CodeUnknownKey, CodeWrongTable:
		default:
			t.Fatalf("Check = %q", code)
		}
		if code == "" || size > len(payload) {
			return
		}
		v, err := NewVerifier(VerifierOptions{Table: "BAC-07", Keys: testKeyring(t), Window: time.Minute, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(payload); err == nil {
			t.Fatalf("the screen refused (%s) a command Verify accepts: %q", code, payload)
		}
	})
}

// A command the screen refused takes a token while there are any, and is
// then handled (a row and a reply of its own); beyond them it is counted in
// the summary, as a command lost to a full queue is, and the loop taking
// commands is woken to arm the summary's timer.
func TestScreenedAndLostAreSummarised(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	rec := openRecorder(t, filepath.Join(t.TempDir(), "trail.db"), clock)
	defer rec.Close()
	var outs outcomes
	limit := RefusalLimit{Burst: 2, Every: time.Second, Summary: 10 * time.Second}
	h := &Handler{Verifier: newTestVerifier(t, clock), Recorder: rec, Clock: clock, Logger: quiet(), Limit: limit, Observe: outs.add}
	start := rec.Store().Head().Seq
	other := wire(t, signed(t, clock, "alice", "void", func(c *Command) { c.Table = "BAC-08" }))

	for i := range 2 {
		if !h.Screened(CodeWrongTable, len(other)) {
			t.Fatalf("refusal %d of the burst got no token", i)
		}
		h.HandleMessage(ctx, Message{Payload: other, Token: true})
	}
	select {
	case <-h.Gathered():
		t.Fatal("woken before any summary began")
	default:
	}
	const beyond = 50
	for i := range beyond {
		if h.Screened(CodeWrongTable, len(other)) {
			t.Fatalf("refusal %d beyond the burst got a token", i)
		}
	}
	h.Lost(CodeQueueFull, 300)
	select {
	case <-h.Gathered():
	default:
		t.Fatal("a summary began and the loop was not woken")
	}
	if due, ok := h.SummaryDue(); !ok || !due.Equal(clock.Now().Add(limit.Summary)) {
		t.Fatalf("summary due %s %v", due, ok)
	}
	if err := h.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := rows(t, rec, start+1)
	if len(got) != 3 || got[0].Kind != audit.KindRejected || got[1].Kind != audit.KindRejected || got[2].Kind != KindRefusals {
		t.Fatalf("rows %v", got)
	}
	var rej RejectedBody
	if err := json.Unmarshal(got[0].Body, &rej); err != nil || rej.Code != CodeWrongTable {
		t.Fatalf("the burst's row %+v %v", rej, err)
	}
	var b RefusalsBody
	if err := json.Unmarshal(got[2].Body, &b); err != nil {
		t.Fatal(err)
	}
	if b.Count != beyond+1 || b.Codes[CodeWrongTable] != beyond || b.Codes[CodeQueueFull] != 1 || b.Bytes != int64(beyond*len(other)+300) {
		t.Fatalf("summary %+v", b)
	}
	if n := outs.count(func(o Outcome) bool { return o.Screened && o.Summarised && o.Result == Refused }); n != beyond+1 {
		t.Fatalf("%d screened outcomes, want %d", n, beyond+1)
	}
	if n := outs.count(func(o Outcome) bool { return !o.Summarised && o.Code == CodeWrongTable }); n != 2 {
		t.Fatalf("%d refusals with their own row, want 2", n)
	}
}
