package mqttpub

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
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

var update = flag.Bool("update", false, "rewrite the golden files")

const tableID = "BAC-07"

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newStepClock moves on by 250 ms at every reading, so rows get
// distinct, reproducible times.
func newStepClock() *clock.Fake {
	return clock.NewStepping(time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC), 250*time.Millisecond)
}

func vipConfig(t testing.TB) coup.TableConfig {
	t.Helper()
	p, err := coup.BuiltinProfile(coup.ProfileVIP)
	if err != nil {
		t.Fatal(err)
	}
	return coup.DefaultTableConfig(p)
}

// checkpointKey signs the rigs' checkpoints, every checkpointEvery rows.
func checkpointKey() ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("mqttpub test checkpoints"))
	return ed25519.NewKeyFromSeed(seed[:])
}

const checkpointEvery = 10

// supervisorKey is alice's key in the test keyring.
func supervisorKey() ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("mqttpub test supervisor"))
	return ed25519.NewKeyFromSeed(seed[:])
}

func testKeyring(t testing.TB) *signedcmd.Keyring {
	t.Helper()
	pub := supervisorKey().Public().(ed25519.PublicKey)
	kr, err := signedcmd.ParseKeyring([]byte(fmt.Sprintf(`{"keys":[{"name":"alice","public_key":%q,"actions":["*"]}]}`,
		base64.StdEncoding.EncodeToString(pub))))
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// brokers are the two kinds of broker every publishing test runs against:
// the shared Mosquitto and an embedded broker of the test's own.
func brokers(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"mosquitto": func(t *testing.T) string { return mqtttest.Shared(t) },
		"embedded": func(t *testing.T) string {
			b, err := mqttbroker.Start(mqttbroker.Options{TCP: "127.0.0.1:0", Logger: quiet(),
				Writer: "tablectl", WriterPassword: "pw",
				// The test's own broker: anyone reads everything and sends commands.
				Anonymous: mqttbroker.Access{Read: []string{"#"}, Write: []string{"tablectl-test/+/cmd"}}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			return b.URL()
		},
	}
}

// rig is a controller without a shoe: a recorder, a publisher on a
// connection to a broker, and the command handler.
type rig struct {
	t      testing.TB
	url    string
	topics Topics
	clock  *clock.Fake
	path   string
	rec    *audit.Recorder
	pub    *Publisher
	conn   *mqttconn.Conn
	reader *audit.Reader
	user   string
	pass   string

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type rigOptions struct {
	prefix string
	queue  int
	// user and password for the controller's connection (the embedded
	// broker's writer).
	user, pass string
}

func newRig(t testing.TB, url string, o rigOptions) *rig {
	t.Helper()
	if o.prefix == "" {
		o.prefix = mqtttest.Prefix(t)
	}
	r := &rig{t: t, url: url, topics: Topics{Prefix: o.prefix}, clock: newStepClock(),
		path: filepath.Join(t.TempDir(), "trail.db")}
	if o.user == "" {
		o.user, o.pass = "tablectl", "pw"
	}
	var pub *Publisher
	rec, err := audit.OpenRecorder(context.Background(), r.path, audit.RecorderOptions{
		Table: tableID, Config: vipConfig(t), Clock: r.clock, Logger: quiet(),
		Key: checkpointKey(), CheckpointEvery: checkpointEvery,
		OnCommit: func(c audit.Commit) { pub.Commit(c) },
	})
	if err != nil {
		t.Fatal(err)
	}
	r.rec = rec
	r.user, r.pass = o.user, o.pass
	conn, err := mqttconn.Dial(mqttconn.ConnOptions{Broker: url, ClientID: mqtttest.ClientID(t, "tablectl"), Username: o.user, Password: o.pass,
		WillTopic: r.topics.Topic(TopicStatus), WillPayload: Offline(tableID),
		Subscribe: []string{r.topics.Topic(TopicCmd)}, MaxPayload: signedcmd.MaxBytes,
		KeepAlive: 2 * time.Second, ConnectTimeout: 2 * time.Second, MaxReconnectInterval: 200 * time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	r.conn = conn
	pub, err = New(Options{Table: tableID, Topics: r.topics, Client: conn, Trail: rec.Store(), Config: vipConfig(t),
		From: 1, Driver: "v1", Queue: o.queue, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	r.pub = pub
	ver, err := signedcmd.NewVerifier(signedcmd.VerifierOptions{Table: tableID, Keys: testKeyring(t), Clock: r.clock, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h := &signedcmd.Handler{Verifier: ver, Recorder: rec, Replier: pub, Clock: r.clock, Logger: quiet()}
	cmds := make(chan signedcmd.Message)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Add(3)
	go func() { defer r.wg.Done(); pub.Run(ctx) }()
	go func() { defer r.wg.Done(); h.Run(ctx, cmds) }()
	go func() {
		defer r.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case m := <-conn.Messages():
				select {
				case cmds <- signedcmd.Message{Payload: m.Payload, Size: m.Size}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	if r.reader, err = audit.OpenReader(context.Background(), r.path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.close)
	return r
}

func (r *rig) close() {
	r.cancel()
	r.wg.Wait()
	r.conn.Close(100 * time.Millisecond)
	r.reader.Close()
	r.rec.Close()
	var topics []string
	for _, tp := range retainedTopics {
		topics = append(topics, r.topics.Topic(tp))
	}
	mqtttest.ClearRetained(r.t, r.url, r.user, r.pass, topics...)
}

// submit records inputs, failing the test if one is not recorded.
func (r *rig) submit(ins ...coup.Input) {
	r.t.Helper()
	for _, in := range ins {
		if _, err := r.rec.Submit(context.Background(), in); err != nil {
			r.t.Fatalf("submit %s: %v", in, err)
		}
	}
}

func (r *rig) head() int64 { return r.rec.Store().Head().Seq }

// inTrail reports whether row seq is committed, read through a separate
// read-only connection as any auditor would.
func (r *rig) inTrail(seq int64) bool {
	for rec, err := range r.reader.Events(context.Background(), audit.Query{From: seq, To: seq}) {
		return err == nil && rec.Seq == seq
	}
	return false
}

// sign builds and signs a command for the rig's table.
func (r *rig) sign(action string, edit func(*signedcmd.Command)) signedcmd.Command {
	r.t.Helper()
	c := signedcmd.Command{Table: tableID, ID: signedcmd.NewID(), Action: action, Supervisor: "alice", IssuedAt: signedcmd.FormatTime(r.clock.Now())}
	if edit != nil {
		edit(&c)
	}
	if err := c.Sign(supervisorKey()); err != nil {
		r.t.Fatal(err)
	}
	return c
}

func card(s string) *coup.Card {
	c, err := coup.ParseCard(s)
	if err != nil {
		panic(err)
	}
	return &c
}

func button(b string) coup.Input { return coup.Input{Kind: coup.InButton, Button: b} }
func cardIn(s string) coup.Input { return coup.Input{Kind: coup.InCard, Card: card(s)} }

// shoeStart loads a shoe and burns: 3C exposed, three burned.
func shoeStart() []coup.Input {
	return []coup.Input{
		{Kind: coup.InHello, Text: "SIM-1"},
		button(coup.ButtonNewShoe), cardIn("3C"), cardIn("8D"), cardIn("8H"), cardIn("8S"), button(coup.ButtonBurnDone),
	}
}

// aCoup deals Player 2H 3D 7C (2), Banker KS 4C 5S (9), and reveals.
func aCoup() []coup.Input {
	return []coup.Input{
		button(coup.ButtonNoMoreBets),
		cardIn("2H"), cardIn("KS"), cardIn("3D"), cardIn("4C"), cardIn("7C"), cardIn("5S"),
		button(coup.ButtonReveal),
	}
}

// scenario is the standard table of the golden files: a shoe, one coup, a
// card too many (an alert), a supervisor's resume (a command accepted,
// the alert resolved) and a command refused before the table.
func scenario(submit func(...coup.Input), record func(audit.Event)) {
	submit(shoeStart()...)
	submit(aCoup()...)
	submit(cardIn("9H"))
	submit(coup.Input{Kind: coup.InCmd, Command: &coup.Command{ID: "cmd-1", Action: coup.ActionResume, By: "alice", Reason: "card put back"}})
	record(audit.Event{Kind: audit.KindRejected, Body: signedcmd.RejectedBody{ID: "cmd-2", Action: "void", Supervisor: "mallory",
		Table: tableID, Code: signedcmd.CodeUnknownKey, Reason: "no key for supervisor \"mallory\" in the keyring", Bytes: 212,
		SHA256: "1f0c3e8fa1fd6e8b31d2a5bd1c8e0a2a6b39a6b33a1f2f8d7fbd0e2f0a3c4d5e"}})
}

// retainedTopics are the retained topics, in the order they are published.
var retainedTopics = []string{TopicStatus, TopicPublicCoup, TopicPitCoup, TopicPublicShoe, TopicPublicRoads, TopicPitShoe, TopicPitAlertsActive, TopicPitCheckpoint}

// seqs are the pit/events sequence numbers among msgs, in order received.
func seqs(t testing.TB, topics Topics, msgs []mqtttest.Msg) []int64 {
	var out []int64
	for _, m := range msgs {
		if m.Topic != topics.Topic(TopicPitEvents) {
			continue
		}
		var e Event
		if err := json.Unmarshal(m.Payload, &e); err != nil {
			t.Fatalf("pit/events payload %s: %v", m.Payload, err)
		}
		out = append(out, e.Seq)
	}
	return out
}

// has reports whether every seq from 1 to head is among got.
func hasAll(got []int64, head int64) bool {
	seen := map[int64]bool{}
	for _, s := range got {
		seen[s] = true
	}
	for s := int64(1); s <= head; s++ {
		if !seen[s] {
			return false
		}
	}
	return true
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs from the golden file:\n got %s\nwant %s", name, got, want)
	}
}

func indent(t testing.TB, b []byte) []byte {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}
