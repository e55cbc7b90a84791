package controller

// A command storm: ten thousand malformed and oversized commands on cmd,
// through a real broker (the embedded one and Mosquitto) into a running
// controller, with a supervisor's signed command in the middle of it. The
// controller must not panic, its memory must stay bounded, the trail must
// grow by a bounded number of rows (the refusal limit's: display/command
// RefusalLimit), and the supervisor's command must be carried out and
// answered. Run it with
//
//	go test -race -run CommandStorm ./cmd/tablectl/

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	signedcmd "github.com/tablectl/tablectl/command"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/internal/clock"
	"github.com/tablectl/tablectl/internal/mqtttest"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

// stormJunk is the i-th hostile command: every other one oversized (the
// connection cuts it at MaxBytes+1), the rest malformed in various ways.
func stormJunk(r *rand.Rand, i int) []byte {
	switch i % 6 {
	case 0, 2, 4:
		return bytes.Repeat([]byte{'{'}, signedcmd.MaxBytes+1+r.IntN(2048))
	case 1:
		b := make([]byte, 1+r.IntN(200))
		for j := range b {
			b[j] = byte(r.UintN(256))
		}
		return b
	case 3:
		return []byte(`{"table":"STORM-1","id":"x","action":"void","sig":"AAAA","unknown":1}`)
	default:
		return []byte(`{"table":"STORM-1","id":`)
	}
}

func TestCommandStorm(t *testing.T) {
	brokers := map[string]func(t *testing.T) *MQTTSection{
		"embedded":  func(t *testing.T) *MQTTSection { return &MQTTSection{Listen: "127.0.0.1:0", WSListen: "off"} },
		"mosquitto": func(t *testing.T) *MQTTSection { return &MQTTSection{Broker: mqtttest.Shared(t)} },
	}
	for name, section := range brokers {
		t.Run(name, func(t *testing.T) {
			commandStorm(t, section(t))
		})
	}
}

func commandStorm(t *testing.T, m *MQTTSection) {
	const storm = 10000
	dir, keys := t.TempDir(), t.TempDir()
	privFile, _, entry, err := signedcmd.GenerateKey(keys, "alice")
	if err != nil {
		t.Fatal(err)
	}
	priv, err := audit.LoadPrivateKey(privFile)
	if err != nil {
		t.Fatal(err)
	}
	m.Keyring = filepath.Join(dir, "supervisors.json")
	if err := os.WriteFile(m.Keyring, []byte(`{"keys":[`+string(entry)+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Prefix = mqtttest.Prefix(t)
	const table = "STORM-1"
	if err := m.Complete(table, ""); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "shoe")
	pty, err := shoesim.OpenPTY(link) // a shoe plugged in, saying nothing
	if err != nil {
		t.Fatal(err)
	}
	defer pty.Close()
	// The clock stands still: no refusal token comes back and no summary
	// falls due during the storm, so the rows the storm may write are exact.
	clk := clock.NewFake(time.Date(2026, 11, 22, 21, 0, 0, 0, time.UTC))
	trail := filepath.Join(dir, "trail.db")
	c := Config{
		TableID: table,
		Shoe: ShoeSection{Driver: "v1", Port: device.Config{Path: link, Baud: 115200, SilentAfter: device.Off,
			BackoffMin: device.Duration(5 * time.Millisecond), BackoffMax: device.Duration(50 * time.Millisecond)}.WithDefaults()},
		Audit: AuditSection{Path: trail},
		MQTT:  m,
	}
	p, err := coup.BuiltinProfile(coup.ProfileVIP)
	if err != nil {
		t.Fatal(err)
	}
	commits := newCommitLog()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ctl, err := Start(ctx, c, coup.DefaultTableConfig(p), mqQuiet(), Hooks{Clock: clk, OnCommit: commits.add})
	if err != nil {
		t.Fatal(err)
	}
	ctlDone := make(chan error, 1)
	go func() { ctlDone <- ctl.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if !awaitStop(t, "the controller", ctlDone, mqWait, nil) {
			t.FailNow()
		}
	}
	defer stop()

	wctx, wcancel := context.WithTimeout(ctx, mqWait)
	defer wcancel()
	if _, err := commits.await(wctx, 0, func(c audit.Commit) bool {
		return c.Input.Kind == coup.InLink && c.Input.Link == coup.LinkConnected
	}); err != nil {
		t.Fatalf("the shoe link never came up: %v", err)
	}
	if err := ctl.conn.WaitConnected(wctx); err != nil {
		t.Fatal(err)
	}
	url, topics := ctl.BrokerURL(), mqttpub.Topics{Prefix: m.Prefix}
	pit := ctl.pitBroker // the embedded broker's pit login, empty on Mosquitto
	replies := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: url, Username: pit.Username, Password: pit.Password,
		Topics: []string{topics.Topic(mqttpub.TopicCmdReply)}})
	dial := func(role string, sub ...string) *mqttpub.Conn {
		conn, err := mqttpub.Dial(mqttpub.ConnOptions{Broker: url, ClientID: mqtttest.ClientID(t, role), Username: pit.Username, Password: pit.Password,
			Subscribe: sub, Logger: mqQuiet()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(100 * time.Millisecond) })
		if err := conn.WaitConnected(wctx); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	flood := dial("storm")
	supervisor := dial("supervisor", topics.Topic(mqttpub.TopicCmdReply))
	sign := func(action string, edit func(*signedcmd.Command)) ([]byte, string) {
		cmd := signedcmd.Command{Table: table, ID: signedcmd.NewID(), Action: action, Supervisor: "alice", IssuedAt: signedcmd.FormatTime(clk.Now())}
		if edit != nil {
			edit(&cmd)
		}
		if err := cmd.Sign(ed25519.PrivateKey(priv)); err != nil {
			t.Fatal(err)
		}
		b, err := cmd.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b, cmd.ID
	}

	head := ctl.rec.Store().Head().Seq
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	// The flood, from its own client, at QoS 1 so that the broker keeps it
	// in order; the last message is a resync, whose reply says the
	// controller has taken everything before it.
	half := make(chan struct{})
	var peak uint64
	var floodErr error
	var wg sync.WaitGroup
	wg.Add(1)
	markerPayload, markerID := sign(signedcmd.ActionResync, func(c *signedcmd.Command) { c.From = 1 })
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(2026, 11))
		var last mqttpub.Token
		for i := range storm {
			if i == storm/2 {
				close(half)
			}
			last = flood.Publish(topics.Topic(mqttpub.TopicCmd), 1, false, stormJunk(r, i))
			if i%500 == 499 {
				// Bound what the flood itself holds in flight, and see what
				// the process holds meanwhile.
				select {
				case <-last.Done():
				case <-wctx.Done():
					floodErr = wctx.Err()
					return
				}
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapAlloc)
			}
		}
		tok := flood.Publish(topics.Topic(mqttpub.TopicCmd), 1, false, markerPayload)
		select {
		case <-tok.Done():
			floodErr = tok.Error()
		case <-wctx.Done():
			floodErr = wctx.Err()
		}
	}()

	// The supervisor's command, in the middle of the storm.
	select {
	case <-half:
	case <-wctx.Done():
		t.Fatal("the flood did not get half way")
	}
	payload, id := sign(coup.ActionSuspend, func(c *signedcmd.Command) { c.Reason = "flood on cmd" })
	rep, err := mqttpub.SendCommand(wctx, supervisor, topics, payload, id)
	if err != nil || rep.Result != signedcmd.Accepted || rep.ID != id || rep.Seq == 0 {
		t.Fatalf("the supervisor's command during the storm: %+v %v", rep, err)
	}
	wg.Wait()
	if floodErr != nil {
		t.Fatalf("the flood: %v", floodErr)
	}
	replies.Wait(mqWait, "the reply to the resync after the flood", func(ms []mqtttest.Msg) bool {
		for _, msg := range ms {
			var r signedcmd.Reply
			if json.Unmarshal(msg.Payload, &r) == nil && r.ID == markerID {
				return r.Result == signedcmd.Accepted
			}
		}
		return false
	})
	if _, pit := ctl.rec.View(); !pit.Suspended || pit.SuspendReason != "flood on cmd" {
		t.Fatalf("the supervisor's command was not carried out: %+v", pit)
	}

	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	peak = max(peak, after.HeapAlloc)
	const bound = 64 << 20 // generous: a flood of 10000 x 8 KiB is 80 MiB, none of it kept
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > bound {
		t.Errorf("the heap grew by %d MiB over the storm", grew>>20)
	}
	if grew := int64(peak) - int64(before.HeapAlloc); grew > 2*bound {
		t.Errorf("the heap peaked %d MiB above where it started", grew>>20)
	}
	t.Logf("heap: %d MiB before, %d MiB after, %d MiB at the peak seen", before.HeapAlloc>>20, after.HeapAlloc>>20, peak>>20)

	sc := scrapeController(t, ctl)
	refused := sc.get(t, "tablectl_commands_total", "result=refused", "code=malformed") +
		sc.get(t, "tablectl_commands_total", "result=refused", "code=oversized")
	summarised := sc.get(t, "tablectl_command_refusals_summarised_total")
	dropped := sc.get(t, "tablectl_mqtt_commands_dropped_total")
	sc.want(t, "tablectl_commands_total", 2, "result=accepted", "code=")
	t.Logf("%d of %d refused (%d summarised), %d dropped unread at the controller", int(refused), storm, int(summarised), int(dropped))
	if refused+dropped > storm {
		t.Errorf("%v refused and %v dropped: more than the %d sent", refused, dropped, storm)
	}
	if refused < storm/2 {
		t.Errorf("only %v of the %d reached the command handler", refused, storm)
	}
	if summarised != refused-signedcmd.DefaultRefusalBurst {
		t.Errorf("%v summarised of %v refused, want all but the burst of %d", summarised, refused, signedcmd.DefaultRefusalBurst)
	}

	// Stopped, the controller writes the summary; the trail verifies and
	// holds exactly the burst's rows, the summary and the two commands.
	stop()
	// The publisher's last act was to see the broker acknowledge what it
	// had sent: every row of the storm's commands was timed from its commit
	// to the broker's acknowledgement.
	sc = scrapeController(t, ctl)
	if n := sc.get(t, "tablectl_publish_latency_seconds"); n < signedcmd.DefaultRefusalBurst+3+1 {
		t.Errorf("%v rows timed to the broker; the storm's commands alone wrote %d", n, signedcmd.DefaultRefusalBurst+3+1)
	}
	rep2, err := audit.Verify(context.Background(), trail, audit.VerifyOptions{})
	if err != nil || !rep2.OK() {
		t.Fatalf("the trail after the storm: %v %+v", err, rep2)
	}
	rd, err := audit.OpenReader(context.Background(), trail)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	byKind := map[string]int{}
	var sum signedcmd.RefusalsBody
	for r, err := range rd.Events(context.Background(), audit.Query{From: head + 1}) {
		if err != nil {
			t.Fatal(err)
		}
		byKind[r.Kind]++
		if r.Kind == signedcmd.KindRefusals {
			if err := json.Unmarshal(r.Body, &sum); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[string]int{
		audit.KindRejected: signedcmd.DefaultRefusalBurst, signedcmd.KindRefusals: 1,
		string(coup.InCmd): 1, string(coup.EvCommandDone): 1, string(coup.EvSuspended): 1, // the suspend
		signedcmd.KindAccepted: 1, // the resync
	}
	if len(byKind) != len(want) {
		t.Errorf("rows after the storm began: %v, want %v", byKind, want)
	}
	for k, n := range want {
		if byKind[k] != n {
			t.Errorf("rows after the storm began: %v, want %v", byKind, want)
			break
		}
	}
	if float64(sum.Count) != summarised || sum.Codes[signedcmd.CodeOversized]+sum.Codes[signedcmd.CodeMalformed] != sum.Count {
		t.Errorf("the summary %+v; %v summarised", sum, summarised)
	}
	if !sum.From.Equal(clk.Now()) || !sum.To.Equal(clk.Now()) {
		t.Errorf("the summary spans %s to %s; the clock stood at %s", sum.From, sum.To, clk.Now())
	}
}
