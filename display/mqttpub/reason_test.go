package mqttpub

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// trailOf records inputs in a new trail and returns its rows.
func trailOf(t *testing.T, ins []coup.Input) []audit.Record {
	t.Helper()
	ctx := context.Background()
	rec, err := audit.OpenRecorder(ctx, filepath.Join(t.TempDir(), "trail.db"), audit.RecorderOptions{
		Table: tableID, Config: vipConfig(t), Clock: newStepClock(), Logger: quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	for _, in := range ins {
		if _, err := rec.Submit(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	var rows []audit.Record
	for r, err := range rec.Store().Events(ctx, audit.Query{}) {
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestPublicSuspendReason suspends the table each way it can be and reads
// every message a display gets without a login: each says why in a word of
// the fixed list (coup.PublicReasons), never the supervisor's note or an
// alert's message, which the pit's coup view carries.
func TestPublicSuspendReason(t *testing.T) {
	const note = "suspect dealer"
	betting := append(shoeStart(), aCoup()...)
	for _, tc := range []struct {
		name    string
		ins     []coup.Input
		audit   bool   // the trail fails (the status holds the table, not the view)
		want    string // the public reason
		private string // words that must not reach the public
		pit     string // what the pit's coup view says
	}{
		{"supervisor while betting is open", append(slices.Clone(betting),
			coup.Input{Kind: coup.InCmd, Command: &coup.Command{ID: "c1", Action: coup.ActionSuspend, By: "alice", Reason: note}}),
			false, coup.ReasonTableCheck, note, note},
		{"supervisor without a note", append(slices.Clone(betting),
			coup.Input{Kind: coup.InCmd, Command: &coup.Command{ID: "c1", Action: coup.ActionSuspend, By: "alice"}}),
			false, coup.ReasonTableCheck, "alice", "suspended by alice"},
		{"unreadable card", append(shoeStart(), button(coup.ButtonNoMoreBets), cardIn("2H"), coup.Input{Kind: coup.InCard, Unreadable: true}),
			false, coup.ReasonCardCheck, "card 2 of coup", ""},
		{"shoe link lost mid-coup", append(shoeStart(), button(coup.ButtonNoMoreBets), cardIn("2H"),
			coup.Input{Kind: coup.InLink, Link: coup.LinkDisconnected, Reason: "ttyUSB0 gone"}),
			false, coup.ReasonShoeCheck, "ttyUSB0", ""},
		{"self-check failed", append(slices.Clone(betting),
			coup.Input{Kind: coup.InSelfCheck, Check: &coup.SelfCheck{Result: coup.SelfCheckFailed, Detail: "tablectl differs from the manifest"}}),
			false, coup.ReasonSystemCheck, "manifest", ""},
		{"supervisor and a card alert: the worst", append(shoeStart(), button(coup.ButtonNoMoreBets), cardIn("2H"),
			coup.Input{Kind: coup.InCmd, Command: &coup.Command{ID: "c1", Action: coup.ActionSuspend, By: "alice", Reason: note}},
			coup.Input{Kind: coup.InCard, Unreadable: true}),
			false, coup.ReasonCardCheck, note, note},
		{"audit trail failing", betting, true, coup.ReasonSystemCheck, "disk", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := newEngine(Topics{Prefix: "p"}, tableID, "v1", "online", vipConfig(t), quiet())
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range trailOf(t, tc.ins) {
				e.apply(r)
			}
			if tc.audit {
				e.failing("disk full", 7, newStepClock().Now(), false)
			}
			checkReasons(t, e.retainedMessages(true), tc.want, tc.private, tc.pit, !tc.audit)
		})
	}
}

// checkReasons: the status (and the public coup view, when the table
// holds the suspension) gives the public reason and no public topic the
// private words; pit/coup gives the pit's.
func checkReasons(t *testing.T, msgs []Message, want, private, pit string, coupToo bool) {
	t.Helper()
	seen := map[string]bool{}
	for _, m := range msgs {
		topic := strings.TrimPrefix(m.Topic, "p/")
		var v struct {
			Suspended bool   `json:"suspended"`
			Reason    string `json:"suspend_reason"`
		}
		if err := json.Unmarshal(m.Payload, &v); err != nil {
			continue
		}
		switch {
		case topic == TopicPitCoup:
			if pit != "" && v.Reason != pit {
				t.Errorf("pit/coup says %q, want the supervisor's %q", v.Reason, pit)
			}
		case anonymousTopic(topic):
			if bytes.Contains(bytes.ToLower(m.Payload), []byte(strings.ToLower(private))) {
				t.Errorf("%s carries %q: %s", topic, private, m.Payload)
			}
			if topic == TopicStatus || topic == TopicPublicCoup && coupToo {
				seen[topic] = true
				if !v.Suspended || v.Reason != want {
					t.Errorf("%s: suspended %v, reason %q; want %q", topic, v.Suspended, v.Reason, want)
				}
			}
		}
	}
	if !seen[TopicStatus] || coupToo && !seen[TopicPublicCoup] {
		t.Errorf("status and public/coup not both published: %v", seen)
	}
}
