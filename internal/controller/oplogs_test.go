package controller

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// TestLogEvents: an alert is a WARN that says its kind, coup and what
// clears it; commands carried out or refused are INFO with the supervisor
// and the action; other events log nothing at INFO.
func TestLogEvents(t *testing.T) {
	cmd := &coup.Command{ID: "c1", Action: coup.ActionVoid, By: "alice.martin"}
	for _, tt := range []struct {
		name string
		cm   audit.Commit
		want []string
	}{
		{"alert", audit.Commit{Events: []coup.Event{{Kind: coup.EvAlert, Alert: &coup.Alert{ID: 3, Kind: "extra_card", Shoe: 1, Coup: 7,
			Message: "8S drawn after coup 7 was complete", Needs: coup.NeedsVoid}}}},
			[]string{`level=WARN msg="alert: 8S drawn after coup 7 was complete" alert=extra_card alert_id=3 shoe=1 coup=7 clears_with="void the coup in progress (tablectl void), then resume"`}},
		{"resolved", audit.Commit{Events: []coup.Event{{Kind: coup.EvAlertResolved, By: "resume", Alert: &coup.Alert{ID: 3, Kind: "extra_card", Shoe: 1, Coup: 7}}}},
			[]string{`level=INFO msg="alert resolved" alert=extra_card alert_id=3 shoe=1 coup=7 by=resume`}},
		{"accepted", audit.Commit{Input: coup.Input{Kind: coup.InCmd, Command: cmd}, Events: []coup.Event{{Kind: coup.EvCommandDone, Action: coup.ActionVoid, Command: "c1", Shoe: 1, Coup: 7}}},
			[]string{`level=INFO msg="command accepted" action=void supervisor=alice.martin command=c1 shoe=1 coup=7`}},
		{"refused", audit.Commit{Input: coup.Input{Kind: coup.InCmd, Command: cmd}, Events: []coup.Event{{Kind: coup.EvCommandRefused, Action: coup.ActionVoid, Command: "c1", Reason: "no such coup", Shoe: 1, Coup: 7}}},
			[]string{`level=INFO msg="command refused" action=void supervisor=alice.martin command=c1 why="no such coup"`}},
		{"a card", audit.Commit{Events: []coup.Event{{Kind: coup.EvCardDealt, Shoe: 1, Coup: 7}}}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			logEvents(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}})), tt.cm)
			out := b.String()
			if len(tt.want) == 0 && out != "" {
				t.Errorf("logged %q", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("log %q lacks %q", out, w)
				}
			}
		})
	}
}
