package display

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// Source is what the HTTP endpoints read: the running controller's recorder.
type Source interface {
	View() (public, pit coup.View)
	Recall() []coup.CoupRecord
	Failing() error
}

// Endpoints are the parts of the controller's HTTP endpoints beyond the
// table and its trail. Any may be nil.
type Endpoints struct {
	// ShoeLink says the shoe's link state for /health ("connected",
	// "silent", "disconnected"); nil reports "unknown".
	ShoeLink func() string
	// Broker says the MQTT broker connection's state for /health
	// ("connected", "disconnected"); nil reports "off" (no MQTT).
	Broker func() string
	// Metrics serves /metrics (display/metrics); nil leaves it out.
	Metrics http.Handler
	// SelfCheck says the last program self-check's result for /health
	// ("ok", "unsigned", "failed", "pending"); nil leaves it out.
	SelfCheck func() string
	// Version is the running build (internal/buildinfo), for /health.
	Version string
}

// Health is the /health answer. Status is "ok", "degraded" (the table's
// links are not all up: the shoe's or the broker's) or
// "audit_write_failed" ("trail_tampered" when the trail holds rows the
// controller did not write); the other fields say which part is what.
type Health struct {
	Status   string `json:"status"`
	Audit    string `json:"audit"` // "ok", "failing" or "tampered"
	Error    string `json:"error,omitempty"`
	ShoeLink string `json:"shoe_link"`
	Broker   string `json:"broker"`
	// SelfCheck is the last self-check's result: "ok", "unsigned" (a
	// development build), "failed", or "pending" before the first.
	SelfCheck string `json:"self_check,omitempty"`
	Version   string `json:"version,omitempty"`
}

// Health statuses.
const (
	HealthOK       = "ok"
	HealthDegraded = "degraded"
	HealthFailing  = "audit_write_failed"
	HealthTampered = "trail_tampered"
	// HealthSelfCheckFailed: the program or its configuration is not the
	// signed one; the table is suspended until a check passes.
	HealthSelfCheckFailed = "self_check_failed"
)

// Handler serves the controller's read-only endpoints with no Endpoints:
// see NewHandler.
func Handler(src Source) http.Handler { return NewHandler(src, Endpoints{}) }

// NewHandler serves the controller's read-only endpoints:
//
//	/health       the state of the trail and the links as a Health: 503
//	              while the trail cannot be written (nothing can be
//	              recorded), else 200, "degraded" while the shoe's link or
//	              the broker is down (the table goes on, or is suspended
//	              by its own alert; restarting the controller would not help)
//	/state        the public view of the table
//	/recall       the last 10 coups with every card (last-game recall)
//	/metrics      Prometheus metrics, when Endpoints.Metrics is set
//
// /recall shows every card as read, so serve it on loopback or behind the
// pit's credentials.
func NewHandler(src Source, e Endpoints) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		h := HealthOf(src, e)
		code := http.StatusOK
		if h.Status == HealthFailing || h.Status == HealthTampered || h.Status == HealthSelfCheckFailed {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, h)
	})
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		pub, _ := src.View()
		writeJSON(w, http.StatusOK, pub)
	})
	mux.HandleFunc("GET /recall", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, RecallOf(src.Recall()))
	})
	if e.Metrics != nil {
		mux.Handle("GET /metrics", e.Metrics)
	}
	return mux
}

// HealthOf is the controller's health now.
func HealthOf(src Source, e Endpoints) Health {
	h := Health{Status: HealthOK, Audit: "ok", ShoeLink: "unknown", Broker: "off", Version: e.Version}
	if e.ShoeLink != nil {
		h.ShoeLink = e.ShoeLink()
	}
	if e.Broker != nil {
		h.Broker = e.Broker()
	}
	if (e.ShoeLink != nil && h.ShoeLink != "connected") || (e.Broker != nil && h.Broker != "connected") {
		h.Status = HealthDegraded
	}
	if e.SelfCheck != nil {
		h.SelfCheck = e.SelfCheck()
		if h.SelfCheck == coup.SelfCheckFailed {
			h.Status = HealthSelfCheckFailed
		}
	}
	if err := src.Failing(); err != nil {
		h.Status, h.Audit, h.Error = HealthFailing, "failing", err.Error()
		if errors.Is(err, audit.ErrTampered) {
			h.Status, h.Audit = HealthTampered, "tampered"
		}
	}
	return h
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
	// Dealer is the dealer on duty when the coup finished, if one was
	// signed in.
	Dealer string `json:"dealer,omitempty"`
	// Suspended lists the places in Cards of the cards drawn while the
	// table was suspended, BettingOpen of those drawn while betting was
	// open (a misdeal): out of the shoe, in no hand.
	Suspended   []int `json:"suspended,omitempty"`
	BettingOpen []int `json:"betting_open,omitempty"`
}

// RecallOf lays the table's recall out for people: every card in shoe order,
// the hands, the result, and what supervisors did.
func RecallOf(recs []coup.CoupRecord) []RecallCoup {
	out := make([]RecallCoup, 0, len(recs))
	for _, r := range recs {
		rc := RecallCoup{Shoe: r.Shoe, Coup: r.Coup, Cards: []string{}, Voided: r.Voided, Actions: r.Actions, Dealer: r.Dealer}
		strays := r.Strays
		for i, dc := range r.Cards {
			strays = rc.addStrays(strays, i)
			rc.add(dc)
		}
		rc.addStrays(strays, len(r.Cards))
		if r.Result != nil {
			rc.Player, rc.Banker = r.Result.Player, r.Result.Banker
			rc.Winner = r.Result.Winner.String()
			rc.Points = itoa(r.Result.PlayerPoint) + "-" + itoa(r.Result.BankerPoint)
		}
		out = append(out, rc)
	}
	return out
}

// add puts a card of the coup in shoe order.
func (rc *RecallCoup) add(dc coup.DealtCard) {
	s := dc.Card.String()
	if dc.Unreadable {
		s = "??"
	}
	rc.Cards = append(rc.Cards, s)
	if dc.Manual {
		rc.Manual = append(rc.Manual, s)
	}
}

// addStrays puts the strays drawn after the coup's first n cards, and
// returns the rest.
func (rc *RecallCoup) addStrays(strays []coup.StrayCard, n int) []coup.StrayCard {
	for len(strays) > 0 && strays[0].After <= n {
		if strays[0].BettingOpen {
			rc.BettingOpen = append(rc.BettingOpen, len(rc.Cards))
		} else {
			rc.Suspended = append(rc.Suspended, len(rc.Cards))
		}
		rc.add(strays[0].DealtCard)
		strays = strays[1:]
	}
	return strays
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
