package mqttpub

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/mqttconn"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/signedcmd"
)

// heldClient is a broker that acknowledges nothing until the test says so.
type heldClient struct {
	mu        sync.Mutex
	toks      []*heldToken
	published chan Message
	changed   chan struct{}
	auto      bool // acknowledge at once from now on
}

type heldToken struct {
	done  chan struct{}
	acked bool
}

func (t *heldToken) Done() <-chan struct{} { return t.done }
func (t *heldToken) Error() error          { return nil }

func (c *heldClient) Publish(topic string, qos byte, retained bool, payload []byte) mqttconn.Token {
	t := &heldToken{done: make(chan struct{})}
	c.mu.Lock()
	c.toks = append(c.toks, t)
	if c.auto {
		t.acked = true
		close(t.done)
	}
	c.mu.Unlock()
	select {
	case c.published <- Message{Topic: topic, QoS: qos, Retained: retained, Payload: payload}:
	default: // the test stopped looking
	}
	return t
}

func (c *heldClient) Connection() (bool, <-chan struct{}) { return true, c.changed }

// ackAll acknowledges every publish so far, and with auto every later one
// at once.
func (c *heldClient) ackAll(auto bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.auto = auto
	for _, t := range c.toks {
		if !t.acked {
			t.acked = true
			close(t.done)
		}
	}
}

// The publish latency runs from the commit to the broker's acknowledgement,
// not to the publish call; Waiting counts the rows the broker has not
// acknowledged.
func TestPublishLatencyAndWaiting(t *testing.T) {
	topics := Topics{Prefix: "tablectl-test/observe"}
	client := &heldClient{published: make(chan Message, 1024), changed: make(chan struct{})}
	var pub *Publisher
	var mu sync.Mutex
	live := 0 // rows handed to Commit
	rec, err := audit.OpenRecorder(context.Background(), filepath.Join(t.TempDir(), "trail.db"), audit.RecorderOptions{
		Table: tableID, Config: vipConfig(t), Clock: newStepClock(), Logger: quiet(),
		OnCommit: func(c audit.Commit) {
			if pub != nil {
				mu.Lock()
				live += len(c.Records)
				mu.Unlock()
				pub.Commit(c)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	start := rec.Store().Head().Seq // the config and start rows
	observed := make(chan time.Duration, 1024)
	pub, err = New(Options{Table: tableID, Topics: topics, Client: client, Trail: rec.Store(), Config: vipConfig(t),
		From: 1, Driver: "v1", Logger: quiet(), ObservePublish: func(d time.Duration) { observed <- d }})
	if err != nil {
		t.Fatal(err)
	}
	if w := pub.Waiting(); w != start {
		t.Fatalf("before Run: %d rows waiting, want the %d rows from From on", w, start)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { pub.Run(ctx); close(done) }()
	defer func() { client.ackAll(true); cancel(); <-done }()

	for _, in := range shoeStart() {
		if _, err := rec.Submit(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	committed := time.Now()
	head := rec.Store().Head().Seq
	// Wait until the head row's event is out: every row is published, none
	// acknowledged.
	for seen := false; !seen; {
		m := <-client.published
		if m.Topic == topics.Topic(TopicPitEvents) {
			var e Event
			if err := json.Unmarshal(m.Payload, &e); err != nil {
				t.Fatal(err)
			}
			seen = e.Seq == head
		}
	}
	if w := pub.Waiting(); w != head {
		t.Fatalf("%d rows waiting with nothing acknowledged, want %d", w, head)
	}
	if len(observed) != 0 {
		t.Fatalf("a publish timed before the broker acknowledged it")
	}
	held := time.Now()
	client.ackAll(false)
	mu.Lock()
	n := live
	mu.Unlock()
	for i := range n {
		d := <-observed
		// Every row was committed before committed and acknowledged after
		// held: its latency covers the wait for the broker.
		if d < held.Sub(committed) {
			t.Fatalf("row %d of %d: latency %s, less than the %s the broker held it", i+1, n, d, held.Sub(committed))
		}
	}
	if w, a := pub.Waiting(), pub.Acked(); w != 0 || a != head {
		t.Fatalf("after the acknowledgements: %d waiting, acked to %d; want 0 and %d", w, a, head)
	}
	if n != int(head-start) {
		t.Fatalf("%d rows timed, want the %d rows committed after the publisher started", n, head-start)
	}
	// The rows from before it were read from the trail: not timed.
	select {
	case d := <-observed:
		t.Fatalf("a row read back from the trail was timed: %s", d)
	default:
	}
	// Another commit, not yet acknowledged, waits.
	if _, err := rec.Submit(context.Background(), coup.Input{Kind: coup.InButton, Button: coup.ButtonNoMoreBets}); err != nil {
		t.Fatal(err)
	}
	for seen := false; !seen; {
		m := <-client.published
		var e Event
		seen = m.Topic == topics.Topic(TopicPitEvents) && json.Unmarshal(m.Payload, &e) == nil && e.Seq == rec.Store().Head().Seq
	}
	if w := pub.Waiting(); w != rec.Store().Head().Seq-head {
		t.Fatalf("%d waiting after one more commit, want %d", w, rec.Store().Head().Seq-head)
	}
}

func TestWaitingBeforeRunWithoutFrom(t *testing.T) {
	rec, err := audit.OpenRecorder(context.Background(), filepath.Join(t.TempDir(), "trail.db"), audit.RecorderOptions{
		Table: tableID, Config: vipConfig(t), Clock: newStepClock(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	pub, err := New(Options{Table: tableID, Topics: Topics{Prefix: "x"}, Client: &heldClient{}, Trail: rec.Store(), Config: vipConfig(t)})
	if err != nil {
		t.Fatal(err)
	}
	// From 0 publishes what comes after the head Run finds: nothing waits.
	if w := pub.Waiting(); w != 0 {
		t.Fatalf("%d waiting", w)
	}
}

// A summary of refusals is a notice on pit/alerts, and calls for no reply.
func TestRefusalSummaryAlert(t *testing.T) {
	topics := Topics{Prefix: "tablectl/BAC-07"}
	e, err := newEngine(topics, tableID, "v1", "online", vipConfig(t), quiet())
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 22, 21, 0, 10, 0, time.UTC)
	body, err := json.Marshal(signedcmd.RefusalsBody{Count: 9990, Bytes: 61234567,
		Codes: map[string]int64{"oversized": 6660, "malformed": 3330},
		From:  time.Date(2026, 11, 22, 21, 0, 0, 0, time.UTC), To: time.Date(2026, 11, 22, 21, 0, 9, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	msgs := e.rowMessages(audit.Record{Seq: 77, At: at, Kind: signedcmd.KindRefusals, Body: body})
	if len(msgs) != 1 || msgs[0].Topic != topics.Topic(TopicPitAlerts) || msgs[0].Retained {
		t.Fatalf("messages %+v", msgs)
	}
	var a Alert
	if err := json.Unmarshal(msgs[0].Payload, &a); err != nil {
		t.Fatal(err)
	}
	want := Alert{State: AlertNotice, ID: "command-77", Source: SourceCommand, Kind: "command_refusals", Seq: 77, At: at,
		Message: "9990 commands refused without a reply each, from 2026-11-22T21:00:00Z to 2026-11-22T21:00:09Z: a flood on cmd? (by code: malformed 3330, oversized 6660)"}
	if a != want {
		t.Fatalf("alert %+v\nwant  %+v", a, want)
	}
}

// A keyring the controller refused is a notice on pit/alerts that says
// why, and calls for no reply.
func TestKeyringRefusedAlert(t *testing.T) {
	topics := Topics{Prefix: "tablectl/BAC-07"}
	e, err := newEngine(topics, tableID, "v1", "online", vipConfig(t), quiet())
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 22, 21, 0, 10, 0, time.UTC)
	body, _ := json.Marshal(signedcmd.KeyringRefusedBody{Reason: signedcmd.KeyringReloaded, Path: "/etc/tablectl/supervisors.json", SHA256: "ab12",
		Error: "the keyring is not signed by the security officer"})
	msgs := e.rowMessages(audit.Record{Seq: 78, At: at, Kind: signedcmd.KindKeyringRefused, Body: body})
	if len(msgs) != 1 || msgs[0].Topic != topics.Topic(TopicPitAlerts) || msgs[0].Retained {
		t.Fatalf("messages %+v", msgs)
	}
	var a Alert
	if err := json.Unmarshal(msgs[0].Payload, &a); err != nil {
		t.Fatal(err)
	}
	want := Alert{State: AlertNotice, ID: "keyring-78", Source: SourceCommand, Kind: "keyring_refused", Seq: 78, At: at,
		Message: "supervisors' keyring /etc/tablectl/supervisors.json refused (the keyring is not signed by the security officer): the keys in use stay; a keyring takes effect only signed by the security officer"}
	if a != want {
		t.Fatalf("alert %+v\nwant  %+v", a, want)
	}
}
