package mqttpub

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// scenarioTrail records the standard scenario in a new trail and returns
// its rows.
func scenarioTrail(t *testing.T) []audit.Record {
	t.Helper()
	ctx := context.Background()
	rec, err := audit.OpenRecorder(ctx, filepath.Join(t.TempDir(), "trail.db"), audit.RecorderOptions{
		Table: tableID, Config: vipConfig(t), Clock: newStepClock(), Logger: quiet(),
		Key: checkpointKey(), CheckpointEvery: checkpointEvery,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	// The checkpoints the commits carried, as the live feed has them.
	cps := map[int64]*audit.Checkpoint{}
	scenario(func(ins ...coup.Input) {
		for _, in := range ins {
			c, err := rec.Submit(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range c.Records {
				cps[r.Seq] = r.Checkpoint
			}
		}
	}, func(e audit.Event) {
		r, err := rec.Record(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		cps[r.Seq] = r.Checkpoint
	})
	var rows []audit.Record
	for r, err := range rec.Store().Events(ctx, audit.Query{}) {
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	for i := range rows {
		rows[i].Checkpoint = cps[rows[i].Seq]
	}
	return rows
}

// scenarioMessages runs the scenario's rows through an engine, as the
// publisher does with a commit at a time, and returns every message.
func scenarioMessages(t *testing.T, rows []audit.Record) (events, stream []Message, retained map[string][]byte) {
	e, err := newEngine(Topics{Prefix: "p"}, tableID, "v1", "online", vipConfig(t), quiet())
	if err != nil {
		t.Fatal(err)
	}
	retained = map[string][]byte{}
	for i, r := range rows {
		e.apply(r)
		events = append(events, e.eventMessage(r))
		stream = append(stream, e.rowMessages(r)...)
		if i+1 == len(rows) || coup.IsInput(rows[i+1].Kind) || strings.HasPrefix(rows[i+1].Kind, "ctl.") {
			for _, m := range e.retainedMessages(false) {
				if m.Retained {
					retained[strings.TrimPrefix(m.Topic, "p/")] = m.Payload
				} else {
					stream = append(stream, m)
				}
			}
		}
	}
	return events, stream, retained
}

// TestScenarioGolden pins every topic's payloads for the standard
// scenario. The broker tests expect these same files.
func TestScenarioGolden(t *testing.T) {
	rows := scenarioTrail(t)
	events, stream, retained := scenarioMessages(t, rows)
	var ev bytes.Buffer
	for _, m := range events {
		ev.Write(m.Payload)
		ev.WriteByte('\n')
	}
	golden(t, "scenario/pit-events.jsonl", ev.Bytes())
	var st bytes.Buffer
	for _, m := range stream {
		st.WriteString(strings.TrimPrefix(m.Topic, "p/") + " " + string(m.Payload) + "\n")
	}
	golden(t, "scenario/stream.txt", st.Bytes())
	for _, topic := range retainedTopics {
		p, ok := retained[topic]
		if !ok {
			t.Errorf("no %s published", topic)
			continue
		}
		golden(t, "scenario/"+strings.ReplaceAll(topic, "/", "-")+".json", indent(t, p))
	}
}

// TestEventsAreTheTrail: every pit/events payload is its row, byte for
// byte where it matters: seq, kind, ids, body and hashes that chain.
func TestEventsAreTheTrail(t *testing.T) {
	rows := scenarioTrail(t)
	events, _, _ := scenarioMessages(t, rows)
	var prev audit.Hash
	for i, m := range events {
		var e Event
		if err := json.Unmarshal(m.Payload, &e); err != nil {
			t.Fatal(err)
		}
		r := rows[i]
		if e.Seq != r.Seq || e.Kind != r.Kind || e.Shoe != r.Shoe || e.Coup != r.Coup || !bytes.Equal(e.Body, r.Body) || !e.At.Equal(r.At) {
			t.Fatalf("event %d: %s\nrow %+v", i, m.Payload, r)
		}
		rr := audit.Record{Seq: e.Seq, At: e.At, Kind: e.Kind, Shoe: e.Shoe, Coup: e.Coup, Body: e.Body, PrevHash: e.PrevHash}
		if e.PrevHash != prev || rr.ComputeHash() != e.Hash {
			t.Fatalf("event %d does not chain", e.Seq)
		}
		prev = e.Hash
		if m.QoS != 1 || m.Retained {
			t.Fatalf("pit/events must be QoS 1, not retained")
		}
	}
}

// TestFreshShoeOdds checks pit/shoe on a fresh 8-deck shoe against the
// published house edges (Wizard of Odds, 8 decks): Banker 1.0579%,
// Player 1.2351%, Tie 8:1 14.3596%, Player Pair 11:1 10.3614%.
func TestFreshShoeOdds(t *testing.T) {
	e, err := newEngine(Topics{Prefix: "p"}, tableID, "v1", "online", vipConfig(t), quiet())
	if err != nil {
		t.Fatal(err)
	}
	for i, in := range []coup.Input{button(coup.ButtonNewShoe)} {
		e.rp.Table().Apply(in)
		_ = i
	}
	e.capture()
	ps, alerts := e.analyse(e.pricing)
	if len(alerts) != 0 || len(ps.Advantage) != 0 || ps.CardsRemaining != 416 || ps.Ranks["K"] != 32 || ps.Cards["AS"] != 8 {
		t.Fatalf("%+v %v", ps, alerts)
	}
	want := map[coup.Bet]float64{coup.BetBanker: -0.010579, coup.BetPlayer: -0.012351, coup.BetTie: -0.143596, coup.BetPlayerPair: -0.103614}
	for _, b := range ps.Bets {
		if w, ok := want[b.Bet]; ok {
			if b.EV == nil || math.Abs(*b.EV-w) > 5e-7 {
				t.Errorf("%s EV %v, want %v", b.Bet, b.EV, w)
			}
			delete(want, b.Bet)
		}
	}
	if len(want) != 0 {
		t.Fatalf("bets missing: %v", want)
	}
}

// TestAdvantageAlert deals every card but aces and kings out of an 8-deck
// shoe: pairs then come often enough that the pair bets pay the player, an
// advantage alert is raised for each (without suspending the table), and
// the end of the shoe resolves them.
func TestAdvantageAlert(t *testing.T) {
	e, err := newEngine(Topics{Prefix: "p"}, tableID, "v1", "online", vipConfig(t), quiet())
	if err != nil {
		t.Fatal(err)
	}
	// Rows as the recorder writes them: the input, then the events a
	// table of its own derives from it.
	shadow, err := coup.NewTable(vipConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	var seq int64
	row := func(kind string, v any) {
		body, err := audit.CanonicalJSON(v)
		if err != nil {
			t.Fatal(err)
		}
		seq++
		e.apply(audit.Record{Seq: seq, Kind: kind, Body: body})
	}
	feed := func(in coup.Input) {
		evs := shadow.Apply(in)
		row(string(in.Kind), in)
		for _, ev := range evs {
			row(string(ev.Kind), ev)
		}
	}
	// Burn with the shoe's own first card: 2C exposed, two burned.
	for _, in := range []coup.Input{button(coup.ButtonNewShoe), cardIn("2C"), cardIn("3C"), cardIn("3D"), button(coup.ButtonBurnDone)} {
		feed(in)
	}
	var pool []coup.Card
	comp := e.rp.Table().Remaining()
	for i, n := range comp.Counts() {
		c := coup.CardAt(i)
		if c.Rank == coup.Ace || c.Rank == coup.King {
			continue
		}
		for k := 0; k < int(n); k++ {
			pool = append(pool, c)
		}
	}
	// In a shuffled order: sorted by rank, the table's shuffle check
	// (rules 2) would rightly stop the shoe.
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	var raised, resolved []Alert
	collect := func() {
		for _, m := range e.retainedMessages(false) {
			if m.Topic != "p/"+TopicPitAlerts {
				continue
			}
			var a Alert
			if err := json.Unmarshal(m.Payload, &a); err != nil {
				t.Fatal(err)
			}
			switch a.State {
			case AlertRaised:
				raised = append(raised, a)
			case AlertResolved:
				resolved = append(resolved, a)
			}
		}
	}
	collect()
	for len(pool) >= coup.CoupCards {
		feed(button(coup.ButtonNoMoreBets))
		var dealt []coup.Card
		for {
			pos, err := coup.Next(dealt)
			if err != nil {
				t.Fatal(err)
			}
			if pos == coup.Complete {
				break
			}
			c := pool[0]
			pool = pool[1:]
			dealt = append(dealt, c)
			feed(coup.Input{Kind: coup.InCard, Card: &c})
		}
		feed(button(coup.ButtonReveal))
		// Result time: the next coup takes bets on the tick.
		if d, ok := e.rp.Table().Deadline(); ok {
			feed(coup.Input{Kind: coup.InTick, At: d})
		}
		collect()
		if e.rp.Table().Suspended() {
			t.Fatalf("table suspended: %v", e.rp.Table().Alerts())
		}
	}
	if len(raised) == 0 {
		t.Fatal("no advantage alert with only aces and kings left")
	}
	bets := map[coup.Bet]bool{}
	for _, a := range raised {
		if a.Source != SourceAdvantage || a.Suspends || a.EV <= 0 || a.Bet == "" {
			t.Fatalf("alert %+v", a)
		}
		bets[a.Bet] = true
	}
	for _, b := range []coup.Bet{coup.BetPlayerPair, coup.BetBankerPair, coup.BetAnyPair} {
		if !bets[b] {
			t.Errorf("no advantage alert for %s (raised for %v)", b, bets)
		}
	}
	var active ActiveAlerts
	if err := json.Unmarshal(e.last[TopicPitAlertsActive], &active); err != nil || len(active.Alerts) != len(raised)-len(resolved) {
		t.Fatalf("active %s with %d raised, %d resolved", e.last[TopicPitAlertsActive], len(raised), len(resolved))
	}
	feed(coup.Input{Kind: coup.InCmd, Command: &coup.Command{ID: "end", Action: coup.ActionShoeEnd, By: "alice"}})
	collect()
	if len(resolved) != len(raised) {
		t.Fatalf("after the shoe: %d raised, %d resolved", len(raised), len(resolved))
	}
}

// TestAuditAlerts: a trail that cannot be written raises audit_write_failed
// and status says failing; rows the controller did not write raise
// trail_tampered instead; the public status says only failing.
func TestAuditAlerts(t *testing.T) {
	at := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		tampered bool
		kind     coup.AlertKind
		audit    string
		reason   string
	}{
		{"disk full", false, coup.AlertAuditFailed, "failing", coup.ReasonSystemCheck},
		{"foreign rows", true, coup.AlertTrailTampered, "failing", coup.ReasonSystemCheck}, // tampered is the pit's word
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := newEngine(Topics{Prefix: "p"}, tableID, "v1", "online", vipConfig(t), quiet())
			if err != nil {
				t.Fatal(err)
			}
			e.failing("why", 7, at, tc.tampered)
			var alert Alert
			var st Status
			for _, m := range e.retainedMessages(true) {
				switch m.Topic {
				case e.topics.Topic(TopicPitAlerts):
					if err := json.Unmarshal(m.Payload, &alert); err != nil {
						t.Fatal(err)
					}
				case e.topics.Topic(TopicStatus):
					if err := json.Unmarshal(m.Payload, &st); err != nil {
						t.Fatal(err)
					}
				}
			}
			if alert.Kind != string(tc.kind) || alert.State != AlertRaised || !alert.Suspends || !strings.Contains(alert.Message, "why") {
				t.Errorf("alert %+v, want %s raised", alert, tc.kind)
			}
			if st.Audit != tc.audit || !st.Suspended || st.SuspendReason != tc.reason {
				t.Errorf("status audit %q suspended %v (%q), want %q (%q)", st.Audit, st.Suspended, st.SuspendReason, tc.audit, tc.reason)
			}
		})
	}
}
