package mqttpub

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/base/mqttconn"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/internal/mqttbroker"
	"github.com/tablectl/tablectl/internal/mqtttest"
	"github.com/tablectl/tablectl/signedcmd"
)

// restartable is a broker a test can kill and bring back on the same
// address, with nothing retained across the restart.
type restartable struct {
	url         string
	stop, start func()
}

func restartables() map[string]func(t *testing.T) restartable {
	return map[string]func(t *testing.T) restartable{
		"mosquitto": func(t *testing.T) restartable {
			m := mqtttest.StartMosquitto(t, "allow_anonymous true\npersistence false\n")
			return restartable{url: m.URL, stop: m.Stop, start: m.Start}
		},
		"embedded": func(t *testing.T) restartable {
			opt := mqttbroker.Options{TCP: "127.0.0.1:0", Logger: quiet(), Writer: "tablectl", WriterPassword: "pw",
				// The test's own broker: anyone reads everything and sends commands.
				Anonymous: mqttbroker.Access{Read: []string{"#"}, Write: []string{"tablectl-test/+/cmd"}}}
			var mu sync.Mutex
			b, err := mqttbroker.Start(opt)
			if err != nil {
				t.Fatal(err)
			}
			opt.TCP = b.TCPAddr()
			t.Cleanup(func() {
				mu.Lock()
				defer mu.Unlock()
				b.Close()
			})
			return restartable{
				url: b.URL(),
				stop: func() {
					mu.Lock()
					defer mu.Unlock()
					b.Close()
				},
				start: func() {
					mu.Lock()
					defer mu.Unlock()
					nb, err := mqttbroker.Start(opt)
					if err != nil {
						t.Fatal(err)
					}
					b = nb
				},
			}
		},
	}
}

// TestBrokerRestartMidShoe kills the broker in the middle of a coup: the
// controller goes on recording; once the broker is back the retained
// topics are there again as the table stands, and a QoS 1 subscriber that
// asks for a resync from the first row it lacks has every row.
func TestBrokerRestartMidShoe(t *testing.T) {
	for name, mk := range restartables() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := mk(t)
			prefix := mqtttest.Prefix(t)
			topics := Topics{Prefix: prefix}
			wa := &writeAhead{}
			sub := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: b.url, Topics: []string{topics.Topic(TopicPitEvents)}, OnMessage: wa.check(topics)})
			r := newRig(t, b.url, rigOptions{prefix: prefix})
			wa.set(r)
			r.submit(shoeStart()...)
			r.submit(button(coup.ButtonNoMoreBets), cardIn("2H"), cardIn("KS"))
			before := r.head()
			sub.Wait(wait, "the rows before the restart", func(m []mqtttest.Msg) bool { return hasAll(seqs(t, topics, m), before) })

			b.stop()
			// The table deals on while the broker is away.
			r.submit(cardIn("3D"), cardIn("4C"), cardIn("7C"), cardIn("5S"), button(coup.ButtonReveal))
			for i := 0; i < 20; i++ {
				r.submit(coup.Input{Kind: coup.InStatus, Status: "ok"})
			}
			during := r.head()
			if r.pub.Acked() >= during {
				t.Fatalf("rows acknowledged by a dead broker: %d of %d", r.pub.Acked(), during)
			}
			b.start()

			// Retained state is back, as the table stands now.
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			if err := r.conn.WaitConnected(ctx); err != nil {
				t.Fatal(err)
			}
			pub, _ := r.rec.View()
			want, err := json.Marshal(pub)
			if err != nil {
				t.Fatal(err)
			}
			late := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: b.url, Topics: []string{prefix + "/#"}})
			t.Cleanup(func() {
				if t.Failed() {
					last, _ := mqtttest.Last(late.Messages(), topics.Topic(TopicPublicCoup))
					t.Logf("public/coup %s\nwant %s", last.Payload, want)
					for _, m := range late.Messages() {
						t.Logf("late got %s %v", m.Topic, m.Retained)
					}
				}
			})
			late.Wait(wait, "the retained topics as the table stands", func(m []mqtttest.Msg) bool {
				last, ok := mqtttest.Last(m, topics.Topic(TopicPublicCoup))
				if !ok || string(last.Payload) != string(want) {
					return false
				}
				for _, tp := range retainedTopics {
					if _, ok := mqtttest.Last(m, topics.Topic(tp)); !ok {
						return false
					}
				}
				return true
			})

			// The subscriber asks for what it lacks and gets it all.
			sub.WaitConnects(wait, 2)
			got := seqs(t, topics, sub.Messages())
			from := int64(1)
			for hasAll(got, from) {
				from++
			}
			rs := r.sign("resync", func(c *signedcmd.Command) { c.From = from })
			rep := sendCommand(t, b.url, topics, mustWire(t, rs), rs.ID)
			if rep.Result != signedcmd.Accepted {
				t.Fatalf("resync: %+v", rep)
			}
			sub.Wait(wait, "every row after the resync", func(m []mqtttest.Msg) bool { return hasAll(seqs(t, topics, m), rep.Seq-1) })
			if rep.Seq-1 < during {
				t.Fatalf("resync row %d before the rows dealt during the outage (%d)", rep.Seq, during)
			}
			wa.assert(t)
		})
	}
}

// TestRepublish replays the standard scenario's trail under a replay
// prefix at twice the recorded pace: every row in order, pauses of half the
// recorded gaps between inputs, and the same retained state as live.
func TestRepublish(t *testing.T) {
	for name, start := range brokers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url := start(t)
			rows := scenarioTrail(t)
			topics := Topics{Prefix: mqtttest.Prefix(t) + "/replay"}
			sub := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: url, Topics: []string{topics.Prefix + "/#"}})
			conn, err := mqttconn.Dial(mqttconn.ConnOptions{Broker: url, ClientID: mqtttest.ClientID(t, "replay"), Username: "tablectl", Password: "pw", Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(0)
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			if err := conn.WaitConnected(ctx); err != nil {
				t.Fatal(err)
			}
			clk := clock.NewVirtual(time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC))
			seq := func(yield func(audit.Record, error) bool) {
				for _, r := range rows {
					if !yield(r, nil) {
						return
					}
				}
			}
			n, err := Republish(ctx, RepublishOptions{Client: conn, Topics: topics, Table: tableID, Config: vipConfig(t),
				Speed: 2, Clock: clk, Logger: quiet()}, seq)
			if err != nil || n != int64(len(rows)) {
				t.Fatalf("republished %d of %d rows: %v", n, len(rows), err)
			}
			var want []time.Duration
			var prev time.Time
			for _, r := range rows {
				if coup.IsInput(r.Kind) || strings.HasPrefix(r.Kind, "ctl.") {
					if !prev.IsZero() {
						want = append(want, r.At.Sub(prev)/2)
					}
					prev = r.At
				}
			}
			sleeps := clk.Armed()
			if len(sleeps) != len(want) {
				t.Fatalf("%d pauses, want %d", len(sleeps), len(want))
			}
			for i := range want {
				if sleeps[i] != want[i] {
					t.Fatalf("pause %d: %v, want %v", i, sleeps[i], want[i])
				}
			}
			msgs := sub.Wait(wait, "the replayed shoe", func(m []mqtttest.Msg) bool {
				c, ok := mqtttest.Last(m, topics.Topic(TopicPublicCoup))
				return int64(len(seqs(t, topics, m))) == n && ok && string(indent(t, c.Payload)) == readGolden(t, "public-coup.json")
			})
			for i, s := range seqs(t, topics, msgs) {
				if s != int64(i+1) {
					t.Fatalf("replayed rows out of order at %d", i)
				}
			}
			st, _ := mqtttest.Last(msgs, topics.Topic(TopicStatus))
			var status Status
			if json.Unmarshal(st.Payload, &status); status.State != "replay" {
				t.Fatalf("status %s", st.Payload)
			}
			var top []string
			for _, tp := range retainedTopics {
				top = append(top, topics.Topic(tp))
			}
			mqtttest.ClearRetained(t, url, "tablectl", "pw", top...)
		})
	}
}
