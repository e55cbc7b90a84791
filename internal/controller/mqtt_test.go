package controller

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/mqtttest"
	"github.com/tablectl/tablectl/internal/supervisor"
	"github.com/tablectl/tablectl/shoeread/shoesim"
	"github.com/tablectl/tablectl/signedcmd"
)

// mqWait bounds every wait in the MQTT tests; it only guards against a hang.
const mqWait = 30 * time.Second

func mqQuiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// mqBuffer is a buffer several goroutines write.
type mqBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *mqBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *mqBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestWebOrigins: the web display's own origins, as browsers on this
// machine name them.
func TestWebOrigins(t *testing.T) {
	for _, tt := range []struct {
		addr string
		want []string
	}{
		{"127.0.0.1:8080", []string{"http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8080"}},
		{"0.0.0.0:80", []string{"http://127.0.0.1:80", "http://localhost:80", "http://[::1]:80"}},
		{"192.0.2.7:8080", []string{"http://192.0.2.7:8080"}},
	} {
		a, err := net.ResolveTCPAddr("tcp", tt.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := webOrigins(a); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.addr, got, tt.want)
		}
	}
}

func TestMQTTConfig(t *testing.T) {
	base := `{"table_id":"T-1","profile":"vip","audit":{"path":"a.db"},"shoe":{"port":{"path":"/dev/x"}}`
	c, _, err := config.Parse([]byte(base+`,"mqtt":{"keyring":"keys.json","keyring_authority":"keys/officer.pub"}}`), "/etc/tablectl")
	if err != nil {
		t.Fatal(err)
	}
	m := c.MQTT
	if m.Broker != "" || m.Listen != config.DefaultMQTTListen || m.WSListen != config.DefaultMQTTWSListen || m.Prefix != "tablectl/T-1" ||
		m.ClientID != "tablectl-T-1" || time.Duration(m.CommandWindow) != signedcmd.DefaultWindow || m.Keyring != "/etc/tablectl/keys.json" ||
		m.KeyringAuthority != "/etc/tablectl/keys/officer.pub" {
		t.Fatalf("defaults: %+v", m)
	}
	// A keyring without its authority: the controller could check no
	// signature, so the config is refused.
	if _, _, err := config.Parse([]byte(base+`,"mqtt":{"keyring":"keys.json"}}`), "/etc/tablectl"); err == nil || !strings.Contains(err.Error(), "mqtt.keyring_authority is required") {
		t.Fatalf("a keyring without an authority: %v", err)
	}
	// Origins as browsers send them.
	if c, _, err := config.Parse([]byte(base+`,"mqtt":{"ws_origins":["HTTP://Table7.Local:8080","https://pit.example:443"]}}`), "/"); err != nil ||
		!slices.Equal(c.MQTT.WSOrigins, []string{"http://table7.local:8080", "https://pit.example"}) {
		t.Fatalf("ws_origins: %+v %v", c.MQTT, err)
	}
	// No broker configured: the embedded broker on its default ports.
	if c, _, err := config.Parse([]byte(base+`}`), "/"); err != nil || c.MQTT == nil || c.MQTT.Broker != "" || c.MQTT.Listen != config.DefaultMQTTListen {
		t.Fatalf("no section: %+v %v", c.MQTT, err)
	}
	if c, _, err := config.Parse([]byte(base+`,"mqtt":{"disabled":true}}`), "/"); err != nil || c.MQTT != nil {
		t.Fatalf("disabled: %+v %v", c.MQTT, err)
	}
	for _, tt := range []struct{ doc, want string }{
		{`{"broker":"tcp://b:1883","listen":"127.0.0.1:1"}`, "embedded broker"},
		{`{"prefix":"a/+/b"}`, "mqtt.prefix"},
		{`{"prefix":"/a"}`, "mqtt.prefix"},
		{`{"command_window":"-1s"}`, "command_window"},
		{`{"queue":-1}`, "mqtt.queue"},
		{`{"brokr":"x"}`, "unknown field"},
		{`{"broker":"tcp://b:1883","ws_origins":["http://a:1"]}`, "embedded broker"},
		{`{"ws_origins":["null"]}`, "mqtt.ws_origins"},
		{`{"ws_origins":["http://a:1/path"]}`, "mqtt.ws_origins"},
		{`{"ws_origins":["ws://a:1"]}`, "mqtt.ws_origins"},
	} {
		if _, _, err := config.Parse([]byte(base+`,"mqtt":`+tt.doc+`}`), "/"); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.doc, err, tt.want)
		}
	}
	// The flags override the section, and turn MQTT on without one.
	c, _, _ = config.Parse([]byte(base+`,"mqtt":{"disabled":true}}`), "/")
	if err := c.OverrideMQTT(config.MQTTOverride{Listen: "127.0.0.1:0"}); err != nil || c.MQTT == nil || c.MQTT.Listen != "127.0.0.1:0" || c.MQTT.Prefix != "tablectl/T-1" {
		t.Fatalf("flags: %+v %v", c.MQTT, err)
	}
	for _, tt := range []struct {
		doc  string
		o    config.MQTTOverride
		want string
	}{
		{`}`, config.MQTTOverride{Broker: "tcp://b:1883", Listen: "127.0.0.1:1"}, "not with --broker"},
		{`,"mqtt":{"broker":"tcp://b:1883"}}`, config.MQTTOverride{WSListen: "127.0.0.1:1"}, "names a broker"},
	} {
		c, _, _ = config.Parse([]byte(base+tt.doc), "/")
		if err := c.OverrideMQTT(tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v over %s: err %v, want %q", tt.o, tt.doc, err, tt.want)
		}
	}
	c, _, _ = config.Parse([]byte(base+`}`), "/")
	if err := c.OverrideMQTT(config.MQTTOverride{Broker: "tcp://b:1883"}); err != nil || c.MQTT.Broker != "tcp://b:1883" || c.MQTT.Listen != "" {
		t.Fatalf("--broker: %+v %v", c.MQTT, err)
	}
}

// mqController is a controller on a simulated shoe through the real serial
// path, publishing over MQTT.
type mqController struct {
	ctl *Controller
	url string
	// user and pass are the pit's login on the embedded broker (empty on
	// the shared Mosquitto, which lets anyone in).
	user, pass string
	prefix     string
	trail      string
	key        string // alice's private key file
	other      string // a key not in the keyring
}

// startMQController deals coups coups of a seeded shoe at full speed into a
// controller whose MQTT section is m (the keyring is filled in).
func startMQController(t *testing.T, m *config.MQTTSection, coups int) *mqController {
	t.Helper()
	return startMQControllerAt(t, "MQ-1", m, coups)
}

// startMQControllerAt is startMQController for the table table.
func startMQControllerAt(t *testing.T, table string, m *config.MQTTSection, coups int) *mqController {
	t.Helper()
	dir := t.TempDir()
	keys := t.TempDir()
	priv, _, entry, err := signedcmd.GenerateKey(keys, "alice")
	if err != nil {
		t.Fatal(err)
	}
	other, _, _, err := signedcmd.GenerateKey(keys, "mallory")
	if err != nil {
		t.Fatal(err)
	}
	m.Keyring = filepath.Join(dir, "supervisors.json")
	_, m.KeyringAuthority = writeSignedKeyring(t, m.Keyring, entry)
	cpKey, _, err := audit.GenerateKey(keys)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "shoe")
	pty, err := shoesim.OpenPTY(link)
	if err != nil {
		t.Fatal(err)
	}
	sim, err := shoesim.New(shoesim.Options{Seed: 7, Decks: 8, Coups: coups}, pty, clock.NewVirtual(time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC)), mqQuiet())
	if err != nil {
		t.Fatal(err)
	}
	c := config.Config{
		TableID: table,
		Shoe: config.ShoeSection{Driver: "v1", Port: device.Config{Path: link, Baud: 115200, SilentAfter: device.Off,
			BackoffMin: device.Duration(5 * time.Millisecond), BackoffMax: device.Duration(50 * time.Millisecond)}.WithDefaults()},
		Audit: config.AuditSection{Path: filepath.Join(dir, "trail.db"), CheckpointKey: cpKey},
		MQTT:  m,
	}
	if m.Prefix == "" {
		m.Prefix = mqtttest.Prefix(t)
	}
	if err := m.Complete(c.TableID, ""); err != nil {
		t.Fatal(err)
	}
	p, err := coup.BuiltinProfile(coup.ProfileVIP)
	if err != nil {
		t.Fatal(err)
	}
	tc := coup.DefaultTableConfig(p)
	tc.ResultTime = 0 // the simulated dealer goes on at once
	ctx, cancel := context.WithCancel(context.Background())
	ctl, err := Start(ctx, c, tc, mqQuiet(), Hooks{})
	if err != nil {
		cancel()
		pty.Close()
		t.Fatal(err)
	}
	mc := &mqController{ctl: ctl, url: ctl.BrokerURL(), prefix: m.Prefix, trail: c.Audit.Path, key: priv, other: other,
		user: ctl.pitBroker.Username, pass: ctl.pitBroker.Password}
	var wg sync.WaitGroup
	wg.Add(1)
	ctlErr := make(chan error, 1)
	go func() { ctlErr <- ctl.Run(ctx) }()
	go func() { defer wg.Done(); sim.Run(ctx, true) }()
	t.Cleanup(func() {
		cancel()
		awaitStop(t, "the controller", ctlErr, mqWait, nil)
		wg.Wait()
		pty.Close()
	})
	// A command sent before the controller has subscribed to cmd reaches
	// no one, and the CLI rightly reports no reply: wait until its
	// connection is up, which it is only once subscribed.
	wctx, wcancel := context.WithTimeout(ctx, mqWait)
	defer wcancel()
	if err := ctl.conn.WaitConnected(wctx); err != nil {
		t.Fatal(err)
	}
	return mc
}

// supervise sends a signed command as the CLI does, signed with the key
// in the file key as the supervisor that file is named after.
func (mc *mqController) supervise(t *testing.T, key string, r supervisor.Request) (signedcmd.Reply, error) {
	t.Helper()
	return mc.superviseAs(t, key, "", r)
}

// superviseAs signs with the key in the file key as name.
func (mc *mqController) superviseAs(t *testing.T, key, name string, r supervisor.Request) (signedcmd.Reply, error) {
	t.Helper()
	return sendAs(t, supervisor.Options{Broker: mc.url, Username: mc.user, Password: mc.pass, Table: mc.ctl.cfg.TableID, Prefix: mc.prefix, Name: name,
		Timeout: 20 * time.Second, Logger: mqQuiet()}, key, r)
}

// sendAs sends r as o says, signed with the key in keyFile (as the name
// the file is for, unless o names someone).
func sendAs(t testing.TB, o supervisor.Options, keyFile string, r supervisor.Request) (signedcmd.Reply, error) {
	t.Helper()
	key, name, err := supervisor.LoadKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	o.Key = key
	if o.Name == "" {
		o.Name = name
	}
	return supervisor.Send(context.Background(), o, r)
}

// TestControllerOverMQTT deals a shoe through the serial path into a
// controller and checks, at a subscriber on each kind of broker: every row
// once and in order, each in the trail when it arrived, every retained
// topic, then supervisor commands from the CLI, accepted and refused.
func TestControllerOverMQTT(t *testing.T) {
	brokers := map[string]func(t *testing.T) *config.MQTTSection{
		"mosquitto": func(t *testing.T) *config.MQTTSection {
			return &config.MQTTSection{Broker: mqtttest.Shared(t)}
		},
		"embedded": func(t *testing.T) *config.MQTTSection {
			return &config.MQTTSection{Listen: "127.0.0.1:0", WSListen: "127.0.0.1:0"}
		},
	}
	for name, section := range brokers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := section(t)
			m.Prefix = mqtttest.Prefix(t)
			topics := mqttpub.Topics{Prefix: m.Prefix}
			// Subscribe before the controller starts, to see every row. The
			// embedded broker only exists once it does: there the stream
			// from row 1 is checked through a resync instead.
			var sub *mqtttest.Subscriber
			var violations []int64
			var mu sync.Mutex
			var reader *audit.Reader
			check := func(msg mqtttest.Msg) {
				if msg.Topic != topics.Topic(mqttpub.TopicPitEvents) {
					return
				}
				var e mqttpub.Event
				json.Unmarshal(msg.Payload, &e)
				mu.Lock()
				defer mu.Unlock()
				found := false
				if reader != nil {
					for r, err := range reader.Events(context.Background(), audit.Query{From: e.Seq, To: e.Seq}) {
						found = err == nil && r.Seq == e.Seq
					}
				}
				if !found {
					violations = append(violations, e.Seq)
				}
			}
			if m.Broker != "" {
				sub = mqtttest.Subscribe(t, mqtttest.SubOptions{URL: m.Broker, Topics: []string{m.Prefix + "/#"}, OnMessage: check})
			}
			mc := startMQController(t, m, 3)
			mu.Lock()
			var err error
			if reader, err = audit.OpenReader(context.Background(), mc.trail); err != nil {
				mu.Unlock()
				t.Fatal(err)
			}
			mu.Unlock()
			defer reader.Close()
			if sub == nil {
				sub = mqtttest.Subscribe(t, mqtttest.SubOptions{URL: mc.url, Username: mc.user, Password: mc.pass, Topics: []string{m.Prefix + "/#"}, OnMessage: check})
				rep, err := mc.supervise(t, mc.key, supervisor.Request{Action: signedcmd.ActionResync, From: 1})
				if err != nil || rep.Result != signedcmd.Accepted {
					t.Fatalf("resync: %+v %v", rep, err)
				}
			}
			// The simulated shoe deals three coups; then the table waits
			// for bets on the fourth.
			msgs := sub.Wait(mqWait, "three coups on every topic", func(ms []mqtttest.Msg) bool {
				st, ok := mqtttest.Last(ms, topics.Topic(mqttpub.TopicPublicShoe))
				var ps mqttpub.PublicShoe
				if !ok || json.Unmarshal(st.Payload, &ps) != nil || ps.Coup != 4 {
					return false
				}
				for _, tp := range []string{mqttpub.TopicStatus, mqttpub.TopicPublicCoup, mqttpub.TopicPitCoup,
					mqttpub.TopicPitShoe, mqttpub.TopicPitAlertsActive, mqttpub.TopicPitCheckpoint} {
					if _, ok := mqtttest.Last(ms, topics.Topic(tp)); !ok {
						return false
					}
				}
				// The roads follow public/shoe in the same publish: wait
				// for the third coup on them.
				var roads struct {
					BeadPlate []json.RawMessage `json:"bead_plate"`
				}
				rd, ok := mqtttest.Last(ms, topics.Topic(mqttpub.TopicPublicRoads))
				if !ok || json.Unmarshal(rd.Payload, &roads) != nil || len(roads.BeadPlate) < 3 {
					return false
				}
				return hasSeqs(ms, topics, mc.ctl.rec.Store().Head().Seq)
			})
			mu.Lock()
			if len(violations) > 0 {
				t.Fatalf("rows published before they were in the trail: %v", violations)
			}
			mu.Unlock()
			var roads struct {
				BeadPlate []json.RawMessage `json:"bead_plate"`
			}
			rd, _ := mqtttest.Last(msgs, topics.Topic(mqttpub.TopicPublicRoads))
			if json.Unmarshal(rd.Payload, &roads); len(roads.BeadPlate) != 3 {
				t.Fatalf("public/roads after three coups: %s", rd.Payload)
			}
			if m.Broker != "" {
				// Subscribed from the start: every row exactly once, in order.
				var got []int64
				for _, x := range msgs {
					if x.Topic == topics.Topic(mqttpub.TopicPitEvents) {
						var e mqttpub.Event
						json.Unmarshal(x.Payload, &e)
						got = append(got, e.Seq)
					}
				}
				for i, s := range got {
					if s != int64(i+1) {
						t.Fatalf("rows out of order or missing at %d: %v", i, got)
					}
				}
			}

			// Supervisor commands, signed and sent as the command line does.
			if rep, err := mc.supervise(t, mc.key, supervisor.Request{Action: coup.ActionSuspend, Reason: "camera 3 down"}); err != nil || rep.Result != signedcmd.Accepted || rep.By != "alice" {
				t.Fatalf("suspend: %+v %v", rep, err)
			}
			if _, pit := mc.ctl.rec.View(); !pit.Suspended || pit.SuspendReason != "camera 3 down" {
				t.Fatalf("not suspended: %+v", pit)
			}
			if rep, err := mc.supervise(t, mc.key, supervisor.Request{Action: coup.ActionResume}); err != nil || rep.Result != signedcmd.Accepted {
				t.Fatalf("resume: %+v %v", rep, err)
			}
			rep, err := mc.supervise(t, mc.key, supervisor.Request{Action: coup.ActionResume})
			if !errors.Is(err, supervisor.ErrRefused) || rep.Code != signedcmd.CodeTable {
				t.Fatalf("second resume: %+v %v", rep, err)
			}
			rep, err = mc.superviseAs(t, mc.other, "alice", supervisor.Request{Action: coup.ActionSuspend})
			if !errors.Is(err, supervisor.ErrRefused) || rep.Code != signedcmd.CodeBadSignature {
				t.Fatalf("another key: %+v %v", rep, err)
			}
			rep, err = mc.supervise(t, mc.other, supervisor.Request{Action: coup.ActionSuspend})
			if !errors.Is(err, supervisor.ErrRefused) || rep.Code != signedcmd.CodeUnknownKey {
				t.Fatalf("unknown key: %+v %v", rep, err)
			}
			// A table that does not answer, or that this login may not
			// command: the supervisor gives up. The embedded broker refuses
			// the replies' subscription, which says "not allowed" at once;
			// Mosquitto (MQTT 3.1.1) cannot say, so it is "no reply".
			_, err = sendAs(t, supervisor.Options{Broker: mc.url, Username: mc.user, Password: mc.pass, Table: "NOBODY", Timeout: time.Second, Logger: mqQuiet()},
				mc.key, supervisor.Request{Action: coup.ActionSuspend})
			if m.Broker == "" && !errors.Is(err, mqttpub.ErrNotAllowed) {
				t.Fatalf("no table on the embedded broker: %v", err)
			}
			if m.Broker != "" && (err == nil || !strings.Contains(err.Error(), "no reply")) {
				t.Fatalf("no table: %v", err)
			}
			if m.Broker != "" {
				var tops []string
				for _, tp := range []string{mqttpub.TopicStatus, mqttpub.TopicPublicCoup, mqttpub.TopicPitCoup, mqttpub.TopicPublicShoe,
					mqttpub.TopicPublicRoads, mqttpub.TopicPitShoe, mqttpub.TopicPitAlertsActive, mqttpub.TopicPitCheckpoint} {
					tops = append(tops, topics.Topic(tp))
				}
				t.Cleanup(func() { mqtttest.ClearRetained(t, m.Broker, "", "", tops...) })
			}
		})
	}
}

// hasSeqs reports whether msgs hold every row from 1 to head on pit/events.
func hasSeqs(msgs []mqtttest.Msg, topics mqttpub.Topics, head int64) bool {
	seen := map[int64]bool{}
	for _, m := range msgs {
		if m.Topic == topics.Topic(mqttpub.TopicPitEvents) {
			var e mqttpub.Event
			if json.Unmarshal(m.Payload, &e) == nil {
				seen[e.Seq] = true
			}
		}
	}
	for s := int64(1); s <= head; s++ {
		if !seen[s] {
			return false
		}
	}
	return head > 0
}

// testDemo is the demo running inside a test, on free ports and fast.
type testDemo struct {
	info   DemoInfo
	logs   mqBuffer
	done   chan error
	cancel context.CancelFunc
}

// startTestDemo runs the demo with the shoe shuffled by seed and the MQTT
// WebSocket listener at ws ("off" for none), and returns once it is ready
// to deal. It is stopped at the end of the test if the test did not stop it.
func startTestDemo(t *testing.T, seed uint64, ws string) *testDemo {
	t.Helper()
	return startDemoWith(t, DemoOptions{Seed: seed, MQTTWS: ws, Pace: 5 * time.Millisecond, Shoes: 1})
}

// startDemoWith runs the demo with o's seed, WebSocket address, paces,
// shoes and origins, on free ports otherwise, and returns once it is ready
// to deal.
func startDemoWith(t *testing.T, o DemoOptions) *testDemo {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	d := &testDemo{done: make(chan error, 1), cancel: cancel}
	ready := make(chan DemoInfo, 1)
	o.Dir, o.Table, o.Profile = filepath.Join(dir, "demo"), "DEMO", coup.ProfileVIP
	o.MQTTListen, o.HTTP = "127.0.0.1:0", "127.0.0.1:0"
	if o.CoupPace == 0 {
		o.CoupPace = -1 // 5 x Pace
	}
	o.Ready, o.LogTo = func(i DemoInfo) { ready <- i }, &d.logs
	go func() { d.done <- Demo(ctx, o) }()
	select {
	case d.info = <-ready:
	case err := <-d.done:
		t.Fatalf("demo stopped: %v\n%s", err, d.logs.String())
	case <-time.After(mqWait):
		t.Fatalf("demo not ready:\n%s", d.logs.String())
	}
	return d
}

// waitCoupResult waits until a coup's result arrives on pit/events.
func (d *testDemo) waitCoupResult(t *testing.T) {
	t.Helper()
	sub := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: d.info.MQTT, Username: d.info.PitBrokerUser, Password: d.info.PitBrokerPassword,
		Topics: []string{d.info.Prefix + "/" + mqttpub.TopicPitEvents}})
	sub.Wait(mqWait, "a coup's result", func(ms []mqtttest.Msg) bool {
		for _, m := range ms {
			var e mqttpub.Event
			if json.Unmarshal(m.Payload, &e) == nil && e.Kind == string(coup.EvCoupResult) {
				return true
			}
		}
		return false
	})
}

// stop stops the demo as Ctrl-C does and ends the test if it does not
// stop cleanly.
func (d *testDemo) stop(t *testing.T) {
	t.Helper()
	d.cancel()
	if !awaitStop(t, "the demo", d.done, mqWait, d.logs.String) {
		t.FailNow()
	}
}

// TestDemo runs the demo as a newcomer would (on free ports, fast), sees a
// coup arrive over MQTT, then stops it as Ctrl-C does: the trail it leaves
// verifies against its checkpoint key.
func TestDemo(t *testing.T) {
	d := startTestDemo(t, 3, "127.0.0.1:0")
	info := d.info
	d.waitCoupResult(t)
	for what, v := range map[string]string{"broker": info.MQTT, "WebSocket": info.WS, "HTTP": info.HTTP, "prefix": info.Prefix,
		"trail": info.Trail, "shoe": info.Shoe, "key": info.Key, "keyring": info.Keyring, "checkpoint key": info.CheckpointPub} {
		if v == "" {
			t.Errorf("the demo does not say where its %s is: %+v", what, info)
		}
	}
	d.stop(t)
	pub, err := audit.LoadPublicKey(info.CheckpointPub)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(context.Background(), info.Trail, audit.VerifyOptions{PublicKeys: []ed25519.PublicKey{pub}})
	if err != nil || !rep.OK() {
		t.Fatalf("the demo's trail: %v %+v", err, rep)
	}
	// A second run sets the first trail aside and starts a fresh table.
	aside, err := setAside(info.Trail)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(info.Trail); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("trail still there: %v", err)
	}
	olds, _ := filepath.Glob(filepath.Join(filepath.Dir(info.Trail), "demo.*.db"))
	if len(olds) != 1 || olds[0] != aside {
		t.Fatalf("set aside: %v, said %s", olds, aside)
	}
}
