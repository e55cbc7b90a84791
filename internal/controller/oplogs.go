package controller

import (
	"log/slog"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// logEvents logs what an operator acts on from one commit (every row is
// at DEBUG): an alert at WARN with its kind, shoe, coup, message and what
// clears it; its resolution, and a command the table carried out or
// refused (with the supervisor, the action and why), at INFO. (A command
// that fails verification, forged or stale, never reaches the table: the
// command handler logs it at WARN.)
func logEvents(log *slog.Logger, cm audit.Commit) {
	by := ""
	if cm.Input.Command != nil {
		by = cm.Input.Command.By
	}
	for _, ev := range cm.Events {
		switch ev.Kind {
		case coup.EvAlert:
			if a := ev.Alert; a != nil {
				log.Warn("alert: "+a.Message, "alert", a.Kind, "alert_id", a.ID, "shoe", a.Shoe, "coup", a.Coup,
					"clears_with", clearsWith(a.Needs), "shoe_seq", a.ShoeSeq)
			}
		case coup.EvAlertResolved:
			if a := ev.Alert; a != nil {
				log.Info("alert resolved", "alert", a.Kind, "alert_id", a.ID, "shoe", a.Shoe, "coup", a.Coup, "by", ev.By)
			}
		case coup.EvCommandDone:
			log.Info("command accepted", "action", ev.Action, "supervisor", or(ev.By, by), "command", ev.Command, "shoe", ev.Shoe, "coup", ev.Coup, "reason", ev.Reason)
		case coup.EvCommandRefused:
			log.Info("command refused", "action", ev.Action, "supervisor", or(ev.By, by), "command", ev.Command, "why", ev.Reason, "shoe", ev.Shoe, "coup", ev.Coup)
		}
	}
}

// clearsWith says an alert's Needs as an operator's next step.
func clearsWith(needs string) string {
	switch needs {
	case coup.NeedsVoid:
		return "void the coup in progress (tablectl void), then resume"
	case coup.NeedsCard:
		return "enter the missed card (tablectl card) or void the coup"
	case coup.NeedsLink:
		return "the shoe's link coming back, then resume (tablectl resume)"
	case coup.NeedsResume:
		return "resume (tablectl resume)"
	}
	return needs
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
