package mqttpub

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/mqttconn"
	"github.com/tablectl/tablectl/coup"
)

func TestSummarise(t *testing.T) {
	alerts := func(n int, msgLen int) ActiveAlerts {
		a := ActiveAlerts{Alerts: []Alert{}}
		for i := 1; i <= n; i++ {
			a.Alerts = append(a.Alerts, Alert{State: AlertRaised, ID: fmt.Sprint("table-", i), Source: SourceTable,
				Kind: []string{"card_while_suspended", "extra_card", "gap"}[i%3], Seq: int64(i), Message: strings.Repeat("x", msgLen)})
		}
		return a
	}
	cases := []struct {
		name      string
		in        ActiveAlerts
		listed    int
		omitted   int
		newest    int64 // the newest row listed
		withNoRow bool  // an alert no row records is listed
	}{
		{"none", ActiveAlerts{Alerts: []Alert{}}, 0, 0, 0, false},
		{"few", alerts(10, 80), 10, 0, 10, false},
		{"at the limit", alerts(MaxActiveAlerts, 80), MaxActiveAlerts, 0, MaxActiveAlerts, false},
		{"one over", alerts(MaxActiveAlerts+1, 80), MaxActiveAlerts, 1, MaxActiveAlerts + 1, false},
		{"a long suspension", alerts(5000, 80), MaxActiveAlerts, 5000 - MaxActiveAlerts, 5000, false},
		{"long messages", alerts(300, 4000), 0, 0, 300, false}, // listed and omitted checked by size below
		{"advantage kept", func() ActiveAlerts {
			a := alerts(200, 80)
			a.Alerts = append(a.Alerts, Alert{State: AlertRaised, ID: "advantage-player_pair", Source: SourceAdvantage, Kind: "advantage"})
			return a
		}(), MaxActiveAlerts, 201 - MaxActiveAlerts, 200, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := summarise(c.in)
			b, _ := json.Marshal(got)
			if len(b) > MaxPayload {
				t.Fatalf("%d bytes, over the bound of %d", len(b), MaxPayload)
			}
			if c.listed > 0 && (len(got.Alerts) != c.listed || got.Omitted != c.omitted) {
				t.Fatalf("listed %d, omitted %d; want %d, %d", len(got.Alerts), got.Omitted, c.listed, c.omitted)
			}
			if len(got.Alerts)+got.Omitted != len(c.in.Alerts) {
				t.Fatalf("listed %d + omitted %d != %d active", len(got.Alerts), got.Omitted, len(c.in.Alerts))
			}
			if got.Omitted > 0 {
				sum := 0
				for _, n := range got.ByKind {
					sum += n
				}
				if sum != len(c.in.Alerts) {
					t.Fatalf("by kind counts %d of %d", sum, len(c.in.Alerts))
				}
			} else if got.ByKind != nil {
				t.Fatalf("by kind %v with every alert listed", got.ByKind)
			}
			var newest int64
			noRow := false
			for i, a := range got.Alerts {
				newest = max(newest, a.Seq)
				noRow = noRow || a.Seq == 0
				if i > 0 && a.Seq != 0 && got.Alerts[i-1].Seq != 0 && a.Seq < got.Alerts[i-1].Seq {
					t.Fatalf("not in the table's order at %d", i)
				}
			}
			if newest != c.newest || noRow != c.withNoRow {
				t.Fatalf("newest listed %d, one with no row %v; want %d, %v", newest, noRow, c.newest, c.withNoRow)
			}
		})
	}
}

// TestActiveAlertsBoundedInPlay: a table suspended while the dealer draws
// on raises an alert per card; pit/alerts/active stays under the bound
// and says how many it leaves out (before: 1,068,720 bytes, which NATS
// refused, wedging the table's uplink).
func TestActiveAlertsBoundedInPlay(t *testing.T) {
	e, err := newEngine(Topics{Prefix: "p"}, tableID, "v1", "online", vipConfig(t), quiet())
	if err != nil {
		t.Fatal(err)
	}
	shadow, err := coup.NewTable(vipConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	var seq int64
	feed := func(in coup.Input) {
		evs := shadow.Apply(in)
		for _, v := range append([]any{in}, anySlice(evs)...) {
			body, err := audit.CanonicalJSON(v)
			if err != nil {
				t.Fatal(err)
			}
			seq++
			kind := string(in.Kind)
			if ev, ok := v.(coup.Event); ok {
				kind = string(ev.Kind)
			}
			e.apply(audit.Record{Seq: seq, Kind: kind, Body: body})
		}
	}
	for _, in := range []coup.Input{button(coup.ButtonNewShoe), cardIn("2C"), cardIn("3C"), cardIn("3D"), button(coup.ButtonBurnDone)} {
		feed(in)
	}
	feed(coup.Input{Kind: coup.InCmd, Command: &coup.Command{ID: "s1", Action: coup.ActionSuspend, By: "alice", Reason: "check"}})
	ranks := []string{"2", "3", "4", "5", "6", "7", "8", "9", "T", "J", "Q", "K", "A"}
	for i := 0; i < 2000; i++ {
		feed(cardIn(ranks[i%13] + "SHDC"[i/13%4:i/13%4+1]))
	}
	active := len(shadow.Alerts())
	if active <= MaxActiveAlerts {
		t.Fatalf("only %d alerts active: the test means a long suspension", active)
	}
	var payload []byte
	for _, m := range e.retainedMessages(false) {
		if m.Topic == "p/"+TopicPitAlertsActive {
			payload = m.Payload
		}
	}
	var got ActiveAlerts
	if err := json.Unmarshal(payload, &got); err != nil {
		t.Fatalf("pit/alerts/active: %v", err)
	}
	if len(payload) > MaxPayload || len(got.Alerts) != MaxActiveAlerts || got.Omitted != active-MaxActiveAlerts {
		t.Fatalf("pit/alerts/active: %d bytes, %d listed, %d omitted, of %d active", len(payload), len(got.Alerts), got.Omitted, active)
	}
}

func anySlice(evs []coup.Event) []any {
	out := make([]any, len(evs))
	for i, ev := range evs {
		out[i] = ev
	}
	return out
}

// recordingClient is a broker connection that keeps what was published.
type recordingClient struct {
	mu   sync.Mutex
	msgs []Message
}

func (c *recordingClient) Publish(topic string, qos byte, retained bool, payload []byte) mqttconn.Token {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, Message{Topic: topic, QoS: qos, Retained: retained, Payload: payload})
	return doneToken{}
}

func (c *recordingClient) Connection() (bool, <-chan struct{}) { return true, make(chan struct{}) }

// TestOversizedDropped: a message over the bound never goes out; it is
// counted, and a small alert on pit/alerts names the topic and its size.
func TestOversizedDropped(t *testing.T) {
	client := &recordingClient{}
	rec, err := audit.OpenRecorder(context.Background(), filepath.Join(t.TempDir(), "trail.db"), audit.RecorderOptions{
		Table: tableID, Config: vipConfig(t), Clock: newStepClock(), Logger: quiet(), Key: checkpointKey()})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	p, err := New(Options{Table: tableID, Topics: Topics{Prefix: "p"}, Client: client, Trail: rec.Store(), Config: vipConfig(t), From: 1, Driver: "v1", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range []Message{
		{Topic: "p/pit/status", Payload: make([]byte, 10)},
		{Topic: "p/pit/status", Payload: make([]byte, MaxPayload)},
		{Topic: "p/pit/status", Payload: make([]byte, MaxPayload+1)},
		{Topic: "p/pit/status", Payload: make([]byte, 1<<20)},
		{Topic: "p/" + TopicPitEvents, Payload: make([]byte, MaxPayload+1)}, // a snapshot row passes
		{Topic: "p/" + TopicPitEvents, Payload: make([]byte, MaxEventPayload+1)},
	} {
		tok := p.send(m)
		<-tok.Done()
		if tok.Error() != nil {
			t.Fatalf("message %d: %v", i, tok.Error())
		}
	}
	if p.Oversized() != 3 {
		t.Fatalf("%d counted as oversized, want 3", p.Oversized())
	}
	var sent, alerts int
	for _, m := range client.msgs {
		if len(m.Payload) > boundOf(m.Topic) {
			t.Fatalf("%s: %d bytes went out", m.Topic, len(m.Payload))
		}
		if m.Topic == "p/"+TopicPitAlerts {
			var a Alert
			if err := json.Unmarshal(m.Payload, &a); err != nil || a.Source != SourceMQTT || !strings.Contains(a.Message, "p/pit/") {
				t.Fatalf("alert %s: %v", m.Payload, err)
			}
			alerts++
			continue
		}
		sent++
	}
	if sent != 3 || alerts != 3 {
		t.Fatalf("%d sent, %d alerts; want 3 and 3", sent, alerts)
	}
}
