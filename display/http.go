package display

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/tablectl/tablectl/coup"
)

// Source is what the HTTP endpoints read: the running controller's recorder.
type Source interface {
	View() (public, pit coup.View)
	Recall() []coup.CoupRecord
	Failing() error
}

// Handler serves the controller's read-only endpoints:
//
//	/health       200 when the audit trail is writable, 503 with why when not
//	/state        the public view of the table
//	/recall       the last 10 coups with every card (last-game recall)
//
// /recall shows every card as read, so serve it on loopback or behind the
// pit's credentials.
func Handler(src Source) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if err := src.Failing(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "audit_write_failed", "error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		pub, _ := src.View()
		writeJSON(w, http.StatusOK, pub)
	})
	mux.HandleFunc("GET /recall", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, RecallOf(src.Recall()))
	})
	return mux
}

// RecallCoup is one coup of last-game recall.
type RecallCoup struct {
	Shoe    int         `json:"shoe"`
	Coup    int         `json:"coup"`
	Cards   []string    `json:"cards"`
	Player  []coup.Card `json:"player,omitempty"`
	Banker  []coup.Card `json:"banker,omitempty"`
	Winner  string      `json:"winner,omitempty"`
	Points  string      `json:"points,omitempty"`
	Voided  bool        `json:"voided,omitempty"`
	Manual  []string    `json:"manual,omitempty"`
	Actions []string    `json:"actions,omitempty"`
}

// RecallOf lays the table's recall out for people: every card in shoe order,
// the hands, the result, and what supervisors did.
func RecallOf(recs []coup.CoupRecord) []RecallCoup {
	out := make([]RecallCoup, 0, len(recs))
	for _, r := range recs {
		rc := RecallCoup{Shoe: r.Shoe, Coup: r.Coup, Cards: []string{}, Voided: r.Voided, Actions: r.Actions}
		for _, dc := range r.Cards {
			s := dc.Card.String()
			if dc.Unreadable {
				s = "??"
			}
			rc.Cards = append(rc.Cards, s)
			if dc.Manual {
				rc.Manual = append(rc.Manual, s)
			}
		}
		if r.Result != nil {
			rc.Player, rc.Banker = r.Result.Player, r.Result.Banker
			rc.Winner = r.Result.Winner.String()
			rc.Points = itoa(r.Result.PlayerPoint) + "-" + itoa(r.Result.BankerPoint)
		}
		out = append(out, rc)
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
