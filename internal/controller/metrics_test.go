package controller

// The controller's /metrics and /health through the real path: the shoe
// simulator deals on a pseudo-terminal, the controller reads, records and
// counts, and the test scrapes its HTTP endpoints and checks the numbers
// against what the simulator says it sent. Run them with
//
//	go test -race -run E2EMetrics ./cmd/tablectl/

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/display"
	"github.com/tablectl/tablectl/internal/buildinfo"
	"github.com/tablectl/tablectl/shoeread"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

// promScrape is one GET /metrics, parsed.
type promScrape map[string]*dto.MetricFamily

// scrapeController gets the controller's /metrics over HTTP, from the
// handler its listener serves.
func scrapeController(t *testing.T, ctl *Controller) promScrape {
	t.Helper()
	srv := httptest.NewServer(ctl.handler)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET /metrics does not parse: %v", err)
	}
	return fams
}

// get is the value of name{labels} ("k=v" pairs, exactly those); a
// histogram's value is its count. A missing sample fails the test.
func (s promScrape) get(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	sort.Strings(labels)
	if f, ok := s[name]; ok {
		for _, m := range f.Metric {
			var got []string
			for _, l := range m.Label {
				got = append(got, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(got)
			if !slices.Equal(got, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	t.Fatalf("no sample %s%v in the scrape", name, labels)
	return 0
}

func (s promScrape) want(t *testing.T, name string, want float64, labels ...string) {
	t.Helper()
	if got := s.get(t, name, labels...); got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// health gets /health.
func health(t *testing.T, ctl *Controller) (int, display.Health) {
	t.Helper()
	srv := httptest.NewServer(ctl.handler)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h display.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, h
}

// written is what the simulator has put on the line so far: the sentences
// whose bytes went out, up to and including last (the gate holds the rest).
func written(r *rig, last shoesim.Sent) []shoesim.Sent {
	end := last.Offset + int64(len(last.Bytes))
	var out []shoesim.Sent
	for _, s := range r.sim.Record().Sent {
		if len(s.Bytes) > 0 && !s.Dropped && s.Offset+int64(len(s.Bytes)) <= end {
			out = append(out, s)
		}
	}
	return out
}

// alertEvents counts the alerts raised in commits, by kind.
func alertEvents(cs []audit.Commit) map[coup.AlertKind]int {
	n := map[coup.AlertKind]int{}
	for _, a := range alertsRaised(events(cs)) {
		n[a.Kind]++
	}
	return n
}

func TestE2EMetrics(t *testing.T) {
	t.Run("a dealt coup", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, shoesim.Options{Seed: 411, Coups: 3}, tableConfig(t, nil))
		last, _ := r.deal(reveal(1))
		sent := written(r, last)
		kinds := map[shoeread.Kind]int{}
		var bytes int64
		for _, s := range sent {
			k := s.Event.Kind
			if s.Heartbeat {
				k = shoeread.KindHeartbeat
			}
			kinds[k]++
			bytes += int64(len(s.Bytes))
		}
		if kinds[shoeread.KindCard] < 4+4 { // the burn, and a coup of four cards at least
			t.Fatalf("the shoe sent %d cards by the first reveal", kinds[shoeread.KindCard])
		}
		sc := scrapeController(t, r.ctl)
		sc.want(t, "tablectl_cards_total", float64(kinds[shoeread.KindCard]))
		for _, k := range []shoeread.Kind{shoeread.KindCard, shoeread.KindButton, shoeread.KindHello, shoeread.KindHeartbeat, shoeread.KindCutCard} {
			sc.want(t, "tablectl_shoe_sentences_total", float64(kinds[k]), "kind="+k.String())
		}
		sc.want(t, "tablectl_shoe_bytes_total", float64(bytes))
		sc.want(t, "tablectl_shoe_bytes_total", float64(last.Offset+int64(len(last.Bytes))))
		winner := truthResult(t, r.plan.Shoes[0].Coups[0].Cards).winner
		for _, side := range []coup.Side{coup.SidePlayer, coup.SideBanker, coup.SideTie} {
			want := 0.0
			if side == winner {
				want = 1
			}
			sc.want(t, "tablectl_coups_total", want, "result="+side.String())
		}
		sc.want(t, "tablectl_coups_total", 0, "result=voided")
		// Every transaction was timed (inputs that came in one read share
		// one: group commit), and nothing went wrong.
		if n, inputs := sc.get(t, "tablectl_audit_commit_seconds"), float64(len(r.commits.since(0))); n < 1 || n > inputs {
			t.Errorf("tablectl_audit_commit_seconds counts %v transactions for %v inputs", n, inputs)
		}
		sc.want(t, "tablectl_audit_writable", 1)
		sc.want(t, "tablectl_audit_write_failures_total", 0)
		sc.want(t, "tablectl_table_suspended", 0)
		for _, reason := range []string{"noise", "checksum", "framing", "duplicate"} {
			sc.want(t, "tablectl_shoe_rejected_total", 0, "reason="+reason)
		}
		sc.want(t, "tablectl_shoe_gaps_total", 0)
		sc.want(t, "tablectl_shoe_link_state", 1, "state=connected")
		sc.want(t, "tablectl_shoe_link_state", 0, "state=disconnected")
		sc.want(t, "tablectl_shoe_link_opens_total", 1)
		if _, ok := sc["tablectl_broker_link_state"]; ok {
			t.Error("a broker state without MQTT")
		}
		code, h := health(t, r.ctl)
		if code != 200 || h != (display.Health{Status: "ok", Audit: "ok", ShoeLink: "connected", Broker: "off", SelfCheck: "unsigned", Version: buildinfo.Get().Short()}) {
			t.Errorf("health %d %+v", code, h)
		}
	})

	t.Run("a checksum failure and the gap it leaves", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, shoesim.Options{Seed: 412, Coups: 3, Faults: []shoesim.Fault{fault(t, "badsum@2.2")}}, tableConfig(t, nil))
		bad, _ := r.deal(faulted(shoesim.FaultBadSum))
		if !bad.Corrupt || len(bad.Bytes) == 0 {
			t.Fatalf("the corrupted sentence: %+v", bad)
		}
		_, cs := r.deal(coupCard(2, 3))
		sc := scrapeController(t, r.ctl)
		sc.want(t, "tablectl_shoe_rejected_total", 1, "reason=checksum")
		sc.want(t, "tablectl_shoe_rejected_bytes_total", float64(len(bad.Bytes)), "reason=checksum")
		sc.want(t, "tablectl_shoe_rejected_total", 0, "reason=noise")
		sc.want(t, "tablectl_shoe_gaps_total", 1)
		sc.want(t, "tablectl_shoe_missing_sentences_total", 1)
		sc.want(t, "tablectl_alerts_total", 1, "kind=sequence_gap")
		sc.want(t, "tablectl_alerts_active", 1, "kind=sequence_gap")
		sc.want(t, "tablectl_table_suspended", 1)
		// The card lost with its checksum is not counted; the others are.
		cards := 0
		for _, s := range written(r, r.last) {
			if s.Event.Kind == shoeread.KindCard && !s.Corrupt {
				cards++
			}
		}
		sc.want(t, "tablectl_cards_total", float64(cards))
		for kind, n := range alertEvents(r.commits.since(0)) {
			sc.want(t, "tablectl_alerts_total", float64(n), "kind="+string(kind))
		}
		if len(alertsRaised(events(cs))) == 0 {
			t.Fatalf("no alert for the gap: %s", kinds(events(cs)))
		}
	})

	t.Run("an unreadable card, entered by hand", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, shoesim.Options{Seed: 403, Coups: 3, Faults: []shoesim.Fault{fault(t, "unreadable@2.3")}}, tableConfig(t, nil))
		bad, _ := r.deal(coupCard(2, 3))
		sc := scrapeController(t, r.ctl)
		sc.want(t, "tablectl_alerts_total", 1, "kind=unreadable_card")
		sc.want(t, "tablectl_alerts_active", 1, "kind=unreadable_card")
		for _, other := range []coup.AlertKind{coup.AlertSequenceGap, coup.AlertShoeOffline, coup.AlertExtraCard} {
			sc.want(t, "tablectl_alerts_total", 0, "kind="+string(other))
		}
		sc.want(t, "tablectl_table_suspended", 1)
		cardsBefore := sc.get(t, "tablectl_cards_total")
		r.accepted(enter(&bad.Truth))
		sc = scrapeController(t, r.ctl)
		sc.want(t, "tablectl_alerts_total", 1, "kind=unreadable_card")
		sc.want(t, "tablectl_alerts_active", 0, "kind=unreadable_card")
		sc.want(t, "tablectl_table_suspended", 0)
		// A manual entry is a supervisor's command, not a card from the shoe.
		sc.want(t, "tablectl_cards_total", cardsBefore)
		last, _ := r.deal(reveal(2))
		sc = scrapeController(t, r.ctl)
		cards := 0
		for _, s := range written(r, last) {
			if s.Event.Kind == shoeread.KindCard {
				cards++
			}
		}
		sc.want(t, "tablectl_cards_total", float64(cards))
		won := map[coup.Side]float64{}
		for _, c := range r.plan.Shoes[0].Coups[:2] {
			won[truthResult(t, c.Cards).winner]++
		}
		for _, side := range []coup.Side{coup.SidePlayer, coup.SideBanker, coup.SideTie} {
			sc.want(t, "tablectl_coups_total", won[side], "result="+side.String())
		}
	})

	t.Run("the shoe unplugged and plugged back", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, shoesim.Options{Seed: 406, Coups: 2, Faults: []shoesim.Fault{fault(t, "unplug@2.2:1s")}}, tableConfig(t, nil))
		r.deal(coupCard(2, 1))
		r.await("the link going down", func(c audit.Commit) bool {
			return c.Input.Kind == coup.InLink && c.Input.Link != coup.LinkConnected
		})
		sc := scrapeController(t, r.ctl)
		sc.want(t, "tablectl_shoe_link_state", 0, "state=connected")
		sc.want(t, "tablectl_shoe_link_state", 0, "state=silent")
		sc.want(t, "tablectl_shoe_link_state", 1, "state=disconnected")
		sc.want(t, "tablectl_shoe_link_disconnects_total", 1)
		sc.want(t, "tablectl_alerts_total", 1, "kind=shoe_offline")
		sc.want(t, "tablectl_alerts_active", 1, "kind=shoe_offline")
		code, h := health(t, r.ctl)
		if code != 200 || h != (display.Health{Status: "degraded", Audit: "ok", ShoeLink: "disconnected", Broker: "off", SelfCheck: "unsigned", Version: buildinfo.Get().Short()}) {
			t.Errorf("health while unplugged: %d %+v", code, h)
		}
		r.replug()
		r.await("the link coming back", func(c audit.Commit) bool {
			return c.Input.Kind == coup.InLink && c.Input.Link == coup.LinkConnected
		})
		sc = scrapeController(t, r.ctl)
		sc.want(t, "tablectl_shoe_link_state", 1, "state=connected")
		sc.want(t, "tablectl_shoe_link_state", 0, "state=disconnected")
		sc.want(t, "tablectl_shoe_link_opens_total", 2)
		sc.want(t, "tablectl_shoe_link_disconnects_total", 1)
		if code, h := health(t, r.ctl); code != 200 || h.Status != "ok" || h.ShoeLink != "connected" {
			t.Errorf("health once plugged back: %d %+v", code, h)
		}
	})
}

// The demo serves /metrics and /health beside /state, and they tell of the
// coups it deals and of its broker.
func TestDemoServesMetrics(t *testing.T) {
	d := startTestDemo(t, 5, "off")
	info := d.info
	d.waitCoupResult(t)
	resp, err := http.Get(info.HTTP + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	sc := promScrape(fams)
	coups := 0.0
	for _, r := range []string{"player", "banker", "tie"} {
		coups += sc.get(t, "tablectl_coups_total", "result="+r)
	}
	if coups < 1 || sc.get(t, "tablectl_cards_total") < 4 {
		t.Errorf("after a coup's result: %v coups, %v cards", coups, sc.get(t, "tablectl_cards_total"))
	}
	sc.want(t, "tablectl_broker_link_state", 1, "state=connected")
	sc.want(t, "tablectl_shoe_link_state", 1, "state=connected")
	if w := sc.get(t, "tablectl_publish_waiting_rows"); w < 0 {
		t.Errorf("%v rows waiting", w)
	}
	resp, err = http.Get(info.HTTP + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var h display.Health
	err = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || h != (display.Health{Status: "ok", Audit: "ok", ShoeLink: "connected", Broker: "connected", SelfCheck: "unsigned", Version: buildinfo.Get().Short()}) {
		t.Errorf("demo health: %d %+v %v", resp.StatusCode, h, err)
	}
	d.stop(t)
}
