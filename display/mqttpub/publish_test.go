package mqttpub

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/mqttconn"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/internal/mqtttest"
	"github.com/tablectl/tablectl/signedcmd"
)

// wait bounds every wait in these tests; it only guards against a hang.
const wait = 20 * time.Second

// writeAhead checks, at the moment each pit/events message arrives, that
// its row is already in the trail.
type writeAhead struct {
	mu         sync.Mutex
	rig        *rig
	violations []int64
}

func (w *writeAhead) check(topics Topics) func(mqtttest.Msg) {
	return func(m mqtttest.Msg) {
		if m.Topic != topics.Topic(TopicPitEvents) {
			return
		}
		var e Event
		if json.Unmarshal(m.Payload, &e) != nil {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.rig == nil || !w.rig.inTrail(e.Seq) {
			w.violations = append(w.violations, e.Seq)
		}
	}
}

func (w *writeAhead) set(r *rig) {
	w.mu.Lock()
	w.rig = r
	w.mu.Unlock()
}

func (w *writeAhead) assert(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.violations) > 0 {
		t.Fatalf("rows published before they were in the trail: %v", w.violations)
	}
}

// streamLines is what a subscriber received on pit/alerts and cmd/reply,
// in the golden stream file's form.
func streamLines(topics Topics, msgs []mqtttest.Msg) string {
	var b strings.Builder
	for _, m := range msgs {
		name := strings.TrimPrefix(m.Topic, topics.Prefix+"/")
		if name == TopicPitAlerts || name == TopicCmdReply {
			b.WriteString(name + " " + string(m.Payload) + "\n")
		}
	}
	return b.String()
}

func readGolden(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/scenario/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// settled reports whether the subscriber has every row once and in order,
// and the retained topics and the streams as the golden files have them.
func settled(t *testing.T, topics Topics, head int64, events string, stream string, msgs []mqtttest.Msg) bool {
	got := seqs(t, topics, msgs)
	if int64(len(got)) < head {
		return false
	}
	for _, topic := range retainedTopics {
		m, ok := mqtttest.Last(msgs, topics.Topic(topic))
		if !ok || string(indent(t, m.Payload)) != readGolden(t, strings.ReplaceAll(topic, "/", "-")+".json") {
			return false
		}
	}
	return streamLines(topics, msgs) == stream
}

// TestPublishEveryTopic deals the standard scenario through a recorder and
// checks, at a subscriber on the real broker, every topic against the
// golden files, every row once and in order, each one already in the trail
// when it arrived, and what a subscriber that comes later gets retained.
func TestPublishEveryTopic(t *testing.T) {
	for name, start := range brokers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url := start(t)
			prefix := mqtttest.Prefix(t)
			topics := Topics{Prefix: prefix}
			wa := &writeAhead{}
			sub := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: url, Topics: []string{prefix + "/#"}, OnMessage: wa.check(topics)})
			r := newRig(t, url, rigOptions{prefix: prefix})
			wa.set(r)
			scenario(r.submit, func(e audit.Event) {
				if _, err := r.rec.Record(context.Background(), e); err != nil {
					t.Fatal(err)
				}
			})
			head := r.head()
			events, stream := readGolden(t, "pit-events.jsonl"), readGolden(t, "stream.txt")
			t.Cleanup(func() {
				if t.Failed() {
					debugSettled(t, topics, head, stream, sub.Messages())
				}
			})
			msgs := sub.Wait(wait, "every topic as the golden files have it", func(m []mqtttest.Msg) bool {
				return settled(t, topics, head, events, stream, m)
			})
			wa.assert(t)
			got := seqs(t, topics, msgs)
			if int64(len(got)) != head {
				t.Fatalf("received rows %v, want 1 to %d once each", got, head)
			}
			var ev bytes.Buffer
			for _, m := range msgs {
				if m.Topic == topics.Topic(TopicPitEvents) {
					if m.Retained {
						t.Fatal("pit/events retained")
					}
					ev.Write(m.Payload)
					ev.WriteByte('\n')
				}
			}
			if ev.String() != events {
				t.Fatalf("pit/events differ from the golden file:\n%s", ev.String())
			}

			// A subscriber that comes now gets the retained topics, and
			// only those.
			late := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: url, Topics: []string{prefix + "/#"}})
			lm := late.Wait(wait, "the retained topics", func(m []mqtttest.Msg) bool { return len(m) >= len(retainedTopics) })
			var names []string
			for _, m := range lm {
				if !m.Retained {
					t.Fatalf("late subscriber got %s not retained", m.Topic)
				}
				names = append(names, strings.TrimPrefix(m.Topic, prefix+"/"))
				if string(indent(t, m.Payload)) != readGolden(t, strings.ReplaceAll(strings.TrimPrefix(m.Topic, prefix+"/"), "/", "-")+".json") {
					t.Fatalf("retained %s: %s", m.Topic, m.Payload)
				}
			}
			slices.Sort(names)
			want := slices.Sorted(slices.Values(retainedTopics))
			if !slices.Equal(names, want) {
				t.Fatalf("retained topics %v, want %v", names, want)
			}
		})
	}
}

// TestCatchUpFromTheTrail gives the publisher a queue of one commit, so
// nearly every commit overflows it: every row still arrives, once, in
// order, each already in the trail.
func TestCatchUpFromTheTrail(t *testing.T) {
	for name, start := range brokers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url := start(t)
			prefix := mqtttest.Prefix(t)
			topics := Topics{Prefix: prefix}
			wa := &writeAhead{}
			sub := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: url, Topics: []string{topics.Topic(TopicPitEvents)}, OnMessage: wa.check(topics)})
			r := newRig(t, url, rigOptions{prefix: prefix, queue: 1})
			wa.set(r)
			r.submit(shoeStart()...)
			for i := 0; i < 150; i++ {
				r.submit(coup.Input{Kind: coup.InStatus, Status: "ok", Text: fmt.Sprint(i)})
			}
			r.submit(aCoup()...)
			head := r.head()
			msgs := sub.Wait(wait, "every row", func(m []mqtttest.Msg) bool { return int64(len(seqs(t, topics, m))) >= head })
			wa.assert(t)
			got := seqs(t, topics, msgs)
			for i, s := range got {
				if s != int64(i+1) {
					t.Fatalf("rows out of order or missing at %d: %v", i, got)
				}
			}
			if int64(len(got)) != head {
				t.Fatalf("%d rows received, head %d", len(got), head)
			}
		})
	}
}

// sendCommand signs and sends a command over the wire and waits for its
// reply.
func sendCommand(t *testing.T, url string, topics Topics, payload []byte, id string) signedcmd.Reply {
	t.Helper()
	conn, err := mqttconn.Dial(mqttconn.ConnOptions{Broker: url, ClientID: mqtttest.ClientID(t, "supervisor"),
		Subscribe: []string{topics.Topic(TopicCmdReply)}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(0)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	rep, err := SendCommand(ctx, conn, topics, payload, id)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestCommandsOverTheWire sends every kind of refused command and accepted
// ones through the broker: each gets its reply, refusals are recorded and
// alerted, accepted ones act on the table as the supervisor who signed.
func TestCommandsOverTheWire(t *testing.T) {
	for name, start := range brokers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url := start(t)
			r := newRig(t, url, rigOptions{})
			alerts := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: url, Topics: []string{r.topics.Topic(TopicPitAlerts)}})
			r.submit(shoeStart()...)

			mallory := r.sign("suspend", nil)
			mallory.Supervisor = "mallory"
			forged := r.sign("suspend", nil)
			forged.Reason = "changed after signing"
			replayed := r.sign("suspend", func(c *signedcmd.Command) { c.Reason = "first" })
			refusals := []struct {
				name    string
				payload []byte
				id      string
				code    string
			}{
				{"unknown key", mustWire(t, mallory), mallory.ID, signedcmd.CodeUnknownKey},
				{"bad signature", mustWire(t, forged), forged.ID, signedcmd.CodeBadSignature},
				{"wrong table", mustWire(t, r.sign("suspend", func(c *signedcmd.Command) { c.Table = "BAC-99" })), "", signedcmd.CodeWrongTable},
				{"stale", mustWire(t, r.sign("suspend", func(c *signedcmd.Command) {
					c.IssuedAt = signedcmd.FormatTime(time.Date(2026, 11, 22, 18, 0, 0, 0, time.UTC))
				})), "", signedcmd.CodeStale},
				{"future", mustWire(t, r.sign("suspend", func(c *signedcmd.Command) {
					c.IssuedAt = signedcmd.FormatTime(time.Date(2026, 11, 22, 23, 0, 0, 0, time.UTC))
				})), "", signedcmd.CodeFuture},
				{"malformed", []byte(`{"id":"m-1","action":"void",`), "", signedcmd.CodeMalformed},
				{"oversized", mustWire(t, r.sign("suspend", func(c *signedcmd.Command) {
					c.Reason = strings.Repeat("x", 9000)
				})), "", signedcmd.CodeOversized},
				{"table refuses", mustWire(t, r.sign("shoe-start", nil)), "", signedcmd.CodeTable},
			}
			// The reply echoes the id of every command it can read: all but
			// the malformed and the oversized one.
			for i := range refusals {
				if c := refusals[i].code; refusals[i].id == "" && c != signedcmd.CodeMalformed && c != signedcmd.CodeOversized {
					var c signedcmd.Command
					json.Unmarshal(refusals[i].payload, &c)
					refusals[i].id = c.ID
				}
			}
			// The first send of replayed is accepted; the second is the
			// replay.
			rep := sendCommand(t, url, r.topics, mustWire(t, replayed), replayed.ID)
			if rep.Result != signedcmd.Accepted || rep.By != "alice" {
				t.Fatalf("first suspend: %+v", rep)
			}
			refusals = append(refusals, struct {
				name    string
				payload []byte
				id      string
				code    string
			}{"replayed", mustWire(t, replayed), replayed.ID, signedcmd.CodeReplayed})
			for _, rf := range refusals {
				if rf.id == "" {
					// Malformed and oversized: the reply carries no id the
					// sender can match, so watch pit/alerts instead.
					continue
				}
				rep := sendCommand(t, url, r.topics, rf.payload, rf.id)
				if rep.Result != signedcmd.Refused || rep.Code != rf.code || rep.Reason == "" || rep.Seq == 0 {
					t.Errorf("%s: reply %+v, want refused %s", rf.name, rep, rf.code)
				}
			}
			for _, rf := range refusals {
				if rf.id == "" {
					mqtttest.Publish(t, url, "", "", r.topics.Topic(TopicCmd), 1, rf.payload)
				}
			}
			// Every refusal before the table is alerted; the table's own
			// refusal is not an alert (the reply says why).
			want := map[string]int{}
			for _, rf := range refusals {
				if rf.code != signedcmd.CodeTable {
					want[rf.code]++
				}
			}
			alerts.Wait(wait, "an alert for every refused command", func(m []mqtttest.Msg) bool {
				got := map[string]int{}
				for _, x := range m {
					var a Alert
					if json.Unmarshal(x.Payload, &a) == nil && a.Source == SourceCommand && a.State == AlertNotice {
						got[a.Code]++
					}
				}
				return fmt.Sprint(got) == fmt.Sprint(want)
			})
			// The trail holds each refusal with its code, and the accepted
			// suspend as alice's.
			codes := map[string]int{}
			var suspendedBy string
			for rec, err := range r.rec.Store().Events(context.Background(), audit.Query{}) {
				if err != nil {
					t.Fatal(err)
				}
				switch rec.Kind {
				case audit.KindRejected:
					var b signedcmd.RejectedBody
					json.Unmarshal(rec.Body, &b)
					codes[b.Code]++
				case string(coup.EvSuspended):
					var e coup.Event
					json.Unmarshal(rec.Body, &e)
					suspendedBy = e.By
				}
			}
			if fmt.Sprint(codes) != fmt.Sprint(want) || suspendedBy != "alice" {
				t.Fatalf("trail: refusals %v (want %v), suspended by %q", codes, want, suspendedBy)
			}
			// And an accepted resume, end to end.
			resume := r.sign("resume", nil)
			if rep := sendCommand(t, url, r.topics, mustWire(t, resume), resume.ID); rep.Result != signedcmd.Accepted {
				t.Fatalf("resume: %+v", rep)
			}
			if _, pit := r.rec.View(); pit.Suspended {
				t.Fatal("still suspended after resume")
			}
		})
	}
}

func mustWire(t *testing.T, c signedcmd.Command) []byte {
	t.Helper()
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestResync: a subscriber that joins late asks for the rows it missed
// and gets every one, then the reply naming the range.
func TestResync(t *testing.T) {
	for name, start := range brokers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url := start(t)
			r := newRig(t, url, rigOptions{})
			r.submit(shoeStart()...)
			r.submit(aCoup()...)
			before := r.head()
			sub := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: url, Topics: []string{r.topics.Topic(TopicPitEvents)}})
			rs := r.sign("resync", func(c *signedcmd.Command) { c.From = 1 })
			rep := sendCommand(t, url, r.topics, mustWire(t, rs), rs.ID)
			if rep.Result != signedcmd.Accepted || rep.From != 1 || rep.To < before || rep.By != "alice" {
				t.Fatalf("reply %+v", rep)
			}
			sub.Wait(wait, "every row again", func(m []mqtttest.Msg) bool { return hasAll(seqs(t, r.topics, m), rep.To) })
			// A hole named whole (a witness's: from, to) gets exactly its
			// rows, not the rows after it.
			sub2 := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: url, Topics: []string{r.topics.Topic(TopicPitEvents)}})
			rs3 := r.sign("resync", func(c *signedcmd.Command) { c.From, c.To = 3, 5 })
			if rep := sendCommand(t, url, r.topics, mustWire(t, rs3), rs3.ID); rep.Result != signedcmd.Accepted || rep.From != 3 || rep.To != 5 {
				t.Fatalf("resync of a hole: %+v", rep)
			}
			old := func(m []mqtttest.Msg) map[int64]int { // the rows dealt before the resyncs, by seq
				got := map[int64]int{}
				for _, s := range seqs(t, r.topics, m) {
					if s <= before {
						got[s]++
					}
				}
				return got
			}
			sub2.Wait(wait, "rows 3 to 5 again", func(m []mqtttest.Msg) bool { return old(m)[5] > 0 })
			if got := old(sub2.Messages()); len(got) != 3 || got[3] != 1 || got[4] != 1 || got[5] != 1 {
				t.Fatalf("resync of rows 3 to 5 sent %v", got)
			}
			// Asking for rows that do not exist yet is answered, not an error.
			rs2 := r.sign("resync", func(c *signedcmd.Command) { c.From = 100000 })
			if rep := sendCommand(t, url, r.topics, mustWire(t, rs2), rs2.ID); rep.Result != signedcmd.Accepted || rep.To != 0 || rep.Reason == "" {
				t.Fatalf("resync from the future: %+v", rep)
			}
		})
	}
}

// TestPitShoeFollowsEveryCoup: the live publisher prices the shoe after
// every coup; pit/shoe follows each one, in order, with the cards the table
// has left and every bet priced.
func TestPitShoeFollowsEveryCoup(t *testing.T) {
	url := mqtttest.Shared(t)
	prefix := mqtttest.Prefix(t)
	topics := Topics{Prefix: prefix}
	sub := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: url, Topics: []string{topics.Topic(TopicPitShoe)}})
	r := newRig(t, url, rigOptions{prefix: prefix})
	r.submit(shoeStart()...)
	lastShoe := func(m []mqtttest.Msg) (PitShoe, bool) {
		msg, ok := mqtttest.Last(m, topics.Topic(TopicPitShoe))
		var ps PitShoe
		return ps, ok && json.Unmarshal(msg.Payload, &ps) == nil
	}
	const coups = 6
	for n := 1; n <= coups; n++ {
		r.submit(aCoup()...)
		if d, ok := r.rec.Deadline(); ok {
			r.submit(coup.Input{Kind: coup.InTick, At: d})
		}
		head, left := r.head(), r.rec.Remaining().Remaining()
		sub.Wait(wait, fmt.Sprintf("pit/shoe after coup %d", n), func(m []mqtttest.Msg) bool {
			ps, ok := lastShoe(m)
			return ok && ps.Coup == n && ps.Seq <= head && ps.CardsRemaining == left && len(ps.Bets) > 0
		})
	}
	var prev int64
	count := 0
	for _, m := range sub.Messages() {
		var ps PitShoe
		// Never a pit/shoe with its maps unset.
		if json.Unmarshal(m.Payload, &ps) != nil || ps.Cards == nil || ps.Ranks == nil || ps.Bets == nil {
			t.Fatalf("pit/shoe %s", m.Payload)
		}
		if ps.Seq < prev {
			t.Fatalf("pit/shoe for row %d after row %d", ps.Seq, prev)
		}
		prev = ps.Seq
		count++
	}
	if count < coups {
		t.Fatalf("%d pit/shoe messages for %d coups", count, coups)
	}
}
