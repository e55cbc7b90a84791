package display

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/coup"
)

// healthSource is a table whose trail fails or not.
type healthSource struct{ failing error }

func (h healthSource) View() (public, pit coup.View) { return coup.View{}, coup.View{} }
func (h healthSource) Recall() []coup.CoupRecord     { return nil }
func (h healthSource) Failing() error                { return h.failing }

func state(s string) func() string { return func() string { return s } }

func TestHealthSaysWhichPartIsUnwell(t *testing.T) {
	diskFull := errors.New("database or disk is full")
	tests := []struct {
		name    string
		failing error
		ep      Endpoints
		code    int
		want    Health
	}{
		{"no links watched", nil, Endpoints{}, 200,
			Health{Status: "ok", Audit: "ok", ShoeLink: "unknown", Broker: "off"}},
		{"all up", nil, Endpoints{ShoeLink: state("connected"), Broker: state("connected")}, 200,
			Health{Status: "ok", Audit: "ok", ShoeLink: "connected", Broker: "connected"}},
		{"no MQTT", nil, Endpoints{ShoeLink: state("connected")}, 200,
			Health{Status: "ok", Audit: "ok", ShoeLink: "connected", Broker: "off"}},
		{"shoe unplugged", nil, Endpoints{ShoeLink: state("disconnected"), Broker: state("connected")}, 200,
			Health{Status: "degraded", Audit: "ok", ShoeLink: "disconnected", Broker: "connected"}},
		{"shoe silent", nil, Endpoints{ShoeLink: state("silent"), Broker: state("connected")}, 200,
			Health{Status: "degraded", Audit: "ok", ShoeLink: "silent", Broker: "connected"}},
		{"broker away", nil, Endpoints{ShoeLink: state("connected"), Broker: state("disconnected")}, 200,
			Health{Status: "degraded", Audit: "ok", ShoeLink: "connected", Broker: "disconnected"}},
		{"trail failing", diskFull, Endpoints{ShoeLink: state("connected"), Broker: state("connected")}, 503,
			Health{Status: "audit_write_failed", Audit: "failing", Error: diskFull.Error(), ShoeLink: "connected", Broker: "connected"}},
		{"self-check passed", nil, Endpoints{ShoeLink: state("connected"), SelfCheck: state("ok")}, 200,
			Health{Status: "ok", Audit: "ok", ShoeLink: "connected", Broker: "off", SelfCheck: "ok"}},
		{"unsigned build", nil, Endpoints{ShoeLink: state("connected"), SelfCheck: state("unsigned")}, 200,
			Health{Status: "ok", Audit: "ok", ShoeLink: "connected", Broker: "off", SelfCheck: "unsigned"}},
		{"self-check failed", nil, Endpoints{ShoeLink: state("disconnected"), SelfCheck: state("failed")}, 503,
			Health{Status: "self_check_failed", Audit: "ok", ShoeLink: "disconnected", Broker: "off", SelfCheck: "failed"}},
		{"self-check failed and the trail too", diskFull, Endpoints{ShoeLink: state("connected"), SelfCheck: state("failed")}, 503,
			Health{Status: "audit_write_failed", Audit: "failing", Error: diskFull.Error(), ShoeLink: "connected", Broker: "off", SelfCheck: "failed"}},
		{"trail failing and the shoe away", diskFull, Endpoints{ShoeLink: state("disconnected")}, 503,
			Health{Status: "audit_write_failed", Audit: "failing", Error: diskFull.Error(), ShoeLink: "disconnected", Broker: "off"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			NewHandler(healthSource{tt.failing}, tt.ep).ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
			if rec.Code != tt.code {
				t.Errorf("code %d, want %d", rec.Code, tt.code)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
			var got Health
			dec := json.NewDecoder(rec.Body)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("health %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// The JSON keys are a published interface (docs/operations.md).
func TestHealthJSONKeys(t *testing.T) {
	rec := httptest.NewRecorder()
	NewHandler(healthSource{}, Endpoints{ShoeLink: state("connected"), Broker: state("connected")}).
		ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
	var m map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"status": "ok", "audit": "ok", "shoe_link": "connected", "broker": "connected"}
	if len(m) != len(want) {
		t.Fatalf("keys %v, want %v", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %q, want %q", k, m[k], v)
		}
	}
}

func TestMetricsMountedOnlyWhenGiven(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tablectl_up 1\n") })
	rec := httptest.NewRecorder()
	NewHandler(healthSource{}, Endpoints{Metrics: metrics}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "tablectl_up 1") {
		t.Errorf("GET /metrics = %d %q", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	Handler(healthSource{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /metrics with none = %d, want 404", rec.Code)
	}
}

// TestRecallOfStrays: the cards drawn while the table was suspended take
// their place in shoe order, marked.
func TestRecallOfStrays(t *testing.T) {
	c := func(s string) coup.DealtCard {
		card, err := coup.ParseCard(s)
		if err != nil {
			t.Fatal(err)
		}
		return coup.DealtCard{Card: card}
	}
	for _, tc := range []struct {
		name      string
		cards     []coup.DealtCard
		strays    []coup.StrayCard
		want      string
		suspended []int
	}{
		{"none", []coup.DealtCard{c("2H"), c("3D")}, nil, "2H 3D", nil},
		{"before any", []coup.DealtCard{c("2H")}, []coup.StrayCard{{DealtCard: c("9S"), After: 0}}, "9S 2H", []int{0}},
		{"between", []coup.DealtCard{c("2H"), c("3D")}, []coup.StrayCard{{DealtCard: c("9S"), After: 1}, {DealtCard: c("9C"), After: 1}}, "2H 9S 9C 3D", []int{1, 2}},
		{"after all", []coup.DealtCard{c("2H"), c("3D")}, []coup.StrayCard{{DealtCard: coup.DealtCard{Unreadable: true}, After: 2}}, "2H 3D ??", []int{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RecallOf([]coup.CoupRecord{{Shoe: 1, Coup: 4, Cards: tc.cards, Strays: tc.strays, Voided: true}})[0]
			if strings.Join(got.Cards, " ") != tc.want || fmt.Sprint(got.Suspended) != fmt.Sprint(tc.suspended) {
				t.Errorf("cards %v, suspended at %v; want %s, %v", got.Cards, got.Suspended, tc.want, tc.suspended)
			}
		})
	}
}

// TestRecallOfMisdeal: a card drawn while betting was open is marked apart
// from those drawn while suspended.
func TestRecallOfMisdeal(t *testing.T) {
	card, err := coup.ParseCard("9S")
	if err != nil {
		t.Fatal(err)
	}
	got := RecallOf([]coup.CoupRecord{{Shoe: 1, Coup: 2, Voided: true, Strays: []coup.StrayCard{
		{DealtCard: coup.DealtCard{Card: card}, BettingOpen: true}, {DealtCard: coup.DealtCard{Card: card}}}}})[0]
	if fmt.Sprint(got.Cards, got.BettingOpen, got.Suspended) != "[9S 9S] [0] [1]" {
		t.Errorf("cards %v, betting open at %v, suspended at %v", got.Cards, got.BettingOpen, got.Suspended)
	}
}
