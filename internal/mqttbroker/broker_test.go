package mqttbroker

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/gorilla/websocket"

	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/internal/mqtttest"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func start(t *testing.T, opt Options) *Broker {
	t.Helper()
	opt.Logger = quiet()
	b, err := Start(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestTakenPortNamesTheFlag: a port already in use is an error at start
// that says which flag picks another, for either listener.
func TestTakenPortNamesTheFlag(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()
	for _, tt := range []struct {
		name string
		opt  Options
		flag string
	}{
		{"tcp", Options{TCP: taken, TCPFlag: "--mqtt-listen"}, "--mqtt-listen"},
		{"websocket", Options{TCP: "127.0.0.1:0", WS: taken, WSFlag: "--mqtt-ws-listen"}, "--mqtt-ws-listen"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.opt.Logger = quiet()
			b, err := Start(tt.opt)
			if err == nil {
				b.Close()
				t.Fatal("started on a taken port")
			}
			if !errors.Is(err, ErrAddrInUse) || !strings.Contains(err.Error(), tt.flag) || !strings.Contains(err.Error(), taken) {
				t.Fatalf("error %q: want it to name %s and %s", err, taken, tt.flag)
			}
		})
	}
}

// TestTCPAndWebSocket: a message published over TCP reaches a subscriber
// over WebSocket, and the other way round.
func TestTCPAndWebSocket(t *testing.T) {
	b := start(t, Options{TCP: "127.0.0.1:0", WS: "127.0.0.1:0", Writer: "tablectl", WriterPassword: "s3cret", Anonymous: Access{Read: []string{"t/#"}}})
	if !strings.HasPrefix(b.WSURL(), "ws://127.0.0.1:") || !strings.HasSuffix(b.WSURL(), "/mqtt") {
		t.Fatalf("ws url %q", b.WSURL())
	}
	ws := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: "ws://" + b.WSAddr() + "/mqtt", Topics: []string{"t/#"}})
	tcp := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: b.URL(), Topics: []string{"t/#"}})
	mqtttest.Publish(t, b.URL(), "tablectl", "s3cret", "t/over-tcp", 1, []byte("1"))
	mqtttest.Publish(t, "ws://"+b.WSAddr()+"/mqtt", "tablectl", "s3cret", "t/over-ws", 1, []byte("2"))
	for _, s := range []*mqtttest.Subscriber{ws, tcp} {
		s.Wait(10*time.Second, "both messages", func(m []mqtttest.Msg) bool { return len(m) == 2 })
	}
}

// TestAccess: the controller writes everything; the pit login reads
// everything and publishes commands; a client without a login reads the
// public topics only and publishes nothing; a known login with a wrong
// password is refused outright.
func TestAccess(t *testing.T) {
	b := start(t, Options{TCP: "127.0.0.1:0", Writer: "tablectl", WriterPassword: "s3cret",
		Logins:    []Login{{Username: "pit", Password: "pit-pw", Access: Access{Read: []string{"tablectl/T1/#"}, Write: []string{"tablectl/T1/cmd"}}}},
		Anonymous: Access{Read: []string{"tablectl/T1/status", "tablectl/T1/public/#"}}})
	pit := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: b.URL(), Username: "pit", Password: "pit-pw", Topics: []string{"tablectl/#"}})
	anon := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: b.URL(), Topics: []string{"tablectl/T1/public/#", "tablectl/T1/status"}})
	if r := pit.Refused(); len(r) != 1 || r[0] != "tablectl/#" {
		t.Fatalf("the pit's subscription to tablectl/#: refused %v, want refused (it reads tablectl/T1/# only)", r)
	}
	pit = mqtttest.Subscribe(t, mqtttest.SubOptions{URL: b.URL(), Username: "pit", Password: "pit-pw", Topics: []string{"tablectl/T1/#"}})
	for _, tt := range []struct {
		name, filter string
		refused      bool
	}{
		{"everything", "#", true},
		{"the table", "tablectl/T1/#", true},
		{"pit", "tablectl/T1/pit/#", true},
		{"pit coup through +", "tablectl/T1/+/coup", true},
		{"cmd", "tablectl/T1/cmd", true},
		{"public", "tablectl/T1/public/#", false},
		{"public coup", "tablectl/T1/public/coup", false},
		{"status", "tablectl/T1/status", false},
	} {
		t.Run("anonymous subscribes to "+tt.name, func(t *testing.T) {
			s := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: b.URL(), Topics: []string{tt.filter}})
			if got := len(s.Refused()) == 1; got != tt.refused {
				t.Fatalf("subscription to %s refused %v, want %v", tt.filter, got, tt.refused)
			}
		})
	}
	mqtttest.Publish(t, b.URL(), "", "", "tablectl/T1/pit/events", 1, []byte("forged"))
	mqtttest.Publish(t, b.URL(), "", "", "tablectl/T1/cmd", 1, []byte("anonymous command"))
	mqtttest.Publish(t, b.URL(), "display", "x", "tablectl/T1/status", 1, []byte("forged"))
	mqtttest.Publish(t, b.URL(), "pit", "pit-pw", "tablectl/T1/public/coup", 1, []byte("forged by the pit"))
	mqtttest.Publish(t, b.URL(), "pit", "pit-pw", "tablectl/T1/cmd", 1, []byte("a command"))
	mqtttest.Publish(t, b.URL(), "tablectl", "s3cret", "tablectl/T1/pit/coup", 1, []byte("KH face down"))
	mqtttest.Publish(t, b.URL(), "tablectl", "s3cret", "tablectl/T1/public/coup", 1, []byte("hidden"))
	got := pit.Wait(10*time.Second, "the command and the controller's two", func(m []mqtttest.Msg) bool { return len(m) >= 3 })
	// Each publish is its own client, so they may arrive in any order; a
	// forged one, had it got through, arrived before the last of them.
	payloads := make([]string, len(got))
	for i, m := range got {
		payloads[i] = m.Topic + " " + string(m.Payload)
	}
	slices.Sort(payloads)
	if !slices.Equal(payloads, []string{"tablectl/T1/cmd a command", "tablectl/T1/pit/coup KH face down", "tablectl/T1/public/coup hidden"}) {
		t.Fatalf("the pit received %q: a forbidden publish got through, or a permitted one did not", payloads)
	}
	if m := anon.Wait(10*time.Second, "the public coup", func(m []mqtttest.Msg) bool { return len(m) >= 1 }); len(m) != 1 || m[0].Topic != "tablectl/T1/public/coup" {
		t.Fatalf("anonymous received %v", m)
	}
	if !matches("tablectl/+/cmd", "tablectl/T1/cmd") || matches("tablectl/+/cmd", "tablectl/T1/cmd/x") || !matches("a/#", "a/b/c") ||
		matches("a/b/public/#", "a/b/#") || matches("a/+/c", "a") {
		t.Fatal("topic filter matching")
	}
}

// TestConnectRefused: wrong passwords for the controller's or a login's
// name, and the controller's client id without its credentials, are
// refused; readers and the right credentials are let in.
func TestConnectRefused(t *testing.T) {
	h := &accessHook{log: quiet(), opt: Options{Writer: "tablectl", WriterPassword: "s3cret", WriterClientID: "tablectl-T1",
		Logins: []Login{{Username: "pit", Password: "pit-pw"}}}}
	for _, tt := range []struct {
		id, user, pass string
		ok             bool
	}{
		{"c1", "tablectl", "guess", false},
		{"c1", "tablectl", "", false},
		{"c1", "pit", "guess", false},
		{"c1", "pit", "", false},
		{"tablectl-T1", "", "", false},
		{"tablectl-T1", "pit", "pit-pw", false},
		{"tablectl-T1", "tablectl", "guess", false},
		{"tablectl-T1", "tablectl", "s3cret", true},
		{"c1", "tablectl", "s3cret", true},
		{"c1", "pit", "pit-pw", true},
		{"c1", "display", "", true},
		{"c1", "", "", true},
	} {
		if got := h.OnConnectAuthenticate(nil, connectPacket(tt.id, tt.user, tt.pass)); got != tt.ok {
			t.Errorf("connect %s as %q/%q: let in %v, want %v", tt.id, tt.user, tt.pass, got, tt.ok)
		}
	}
}

// TestWriterClientIDReserved: a real client connecting with the
// controller's client id and no credentials is refused, and the
// controller's session (its last will) is untouched.
func TestWriterClientIDReserved(t *testing.T) {
	b := start(t, Options{TCP: "127.0.0.1:0", Writer: "tablectl", WriterPassword: "s3cret", WriterClientID: "tablectl-T1",
		Anonymous: Access{Read: []string{"tablectl/T1/status"}}})
	status := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: b.URL(), Topics: []string{"tablectl/T1/status"}})
	o := paho.NewClientOptions().AddBroker(b.URL()).SetClientID("tablectl-T1").SetUsername("tablectl").SetPassword("s3cret").
		SetWill("tablectl/T1/status", "offline", 1, true).SetAutoReconnect(false).SetConnectTimeout(5 * time.Second)
	ctl := paho.NewClient(o)
	if tok := ctl.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("the controller's connect: %v", tok.Error())
	}
	defer ctl.Disconnect(0)
	for _, user := range []string{"", "tablectl"} {
		o := paho.NewClientOptions().AddBroker(b.URL()).SetClientID("tablectl-T1").SetUsername(user).SetPassword("guess").
			SetAutoReconnect(false).SetConnectTimeout(5 * time.Second)
		evil := paho.NewClient(o)
		tok := evil.Connect()
		if !tok.WaitTimeout(10 * time.Second) {
			t.Fatal("no answer to the connect")
		}
		if tok.Error() == nil {
			evil.Disconnect(0)
			t.Fatalf("a connect with the controller's client id as %q was let in", user)
		}
	}
	// A will, had it been sent, went out before what the controller
	// publishes now: wait for that, and nothing before it.
	if tok := ctl.Publish("tablectl/T1/status", 1, false, "marker"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("the controller was knocked off: its publish %v", tok.Error())
	}
	if m := status.Wait(10*time.Second, "the controller's marker", func(m []mqtttest.Msg) bool { return len(m) > 0 }); len(m) != 1 || string(m[0].Payload) != "marker" || !ctl.IsConnectionOpen() {
		t.Fatalf("the controller was knocked off: status %v, connected %v", m, ctl.IsConnectionOpen())
	}
}

// TestWebSocketOrigin: a browser page's WebSocket is upgraded only for the
// listed origins (and those added later); a client without Origin is not a
// page and is let in.
func TestWebSocketOrigin(t *testing.T) {
	b := start(t, Options{TCP: "127.0.0.1:0", WS: "127.0.0.1:0", WSOrigins: []string{"http://127.0.0.1:8080", "HTTPS://Table7.example:443"}})
	if err := b.AllowOrigins("http://localhost:9090"); err != nil {
		t.Fatal(err)
	}
	if err := b.AllowOrigins("null", "ftp://x", "http://x/path", "http://"); err == nil {
		t.Fatal("malformed origins taken")
	}
	for _, tt := range []struct {
		origin string // "-": no header
		ok     bool
	}{
		{"-", true},
		{"http://127.0.0.1:8080", true},
		{"https://table7.example", true},
		{"http://localhost:9090", true},
		{"http://evil.example", false},
		{"http://127.0.0.1:8081", false},
		{"https://127.0.0.1:8080", false},
		{"null", false},
		{"", false},
	} {
		t.Run(tt.origin, func(t *testing.T) {
			h := http.Header{"Sec-WebSocket-Protocol": {"mqtt"}}
			if tt.origin != "-" {
				h["Origin"] = []string{tt.origin}
			}
			c, resp, err := websocket.DefaultDialer.Dial(b.WSURL(), h)
			if c != nil {
				c.Close()
			}
			if (err == nil) != tt.ok {
				t.Fatalf("origin %q: upgrade error %v, want allowed %v", tt.origin, err, tt.ok)
			}
			if !tt.ok && (resp == nil || resp.StatusCode != http.StatusForbidden) {
				t.Fatalf("origin %q: refused without a 403: %v", tt.origin, resp)
			}
		})
	}
}

// TestClientLimit: each client may publish a burst on the open topic, then
// one message an interval; beyond it a message is acknowledged (the
// publisher is not held up) and delivered to no one, and OnLimited hears
// of it. Another client has a bucket of its own; the writer is never
// limited.
func TestClientLimit(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	limited := map[string]int{}
	b := start(t, Options{TCP: "127.0.0.1:0", Writer: "tablectl", WriterPassword: "s3cret",
		Logins:      []Login{{Username: "pit", Password: "pw", Access: Access{Read: []string{"tablectl/#"}, Write: []string{"tablectl/+/cmd"}}}},
		ClientLimit: Rate{Burst: 3, Every: time.Minute}, Clock: clk,
		OnLimited: func(client, topic string, size int) {
			mu.Lock()
			limited[client+" "+topic] += size
			mu.Unlock()
		}})
	sub := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: b.URL(), Username: "tablectl", Password: "s3cret", Topics: []string{"tablectl/#"}})
	dial := func(id, user, pass string) paho.Client {
		c := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID(id).SetUsername(user).SetPassword(pass))
		if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("connect %s: %v", id, tok.Error())
		}
		t.Cleanup(func() { c.Disconnect(100) })
		return c
	}
	publish := func(c paho.Client, topic string, n int, what string) {
		for i := range n {
			if tok := c.Publish(topic, 1, false, fmt.Appendf(nil, "%s %d", what, i)); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
				t.Fatalf("publish %s %d: not acknowledged: %v", what, i, tok.Error())
			}
		}
	}
	flood, other, writer := dial("flood", "pit", "pw"), dial("other", "pit", "pw"), dial("ctl", "tablectl", "s3cret")
	publish(flood, "tablectl/T1/cmd", 5, "flood")
	publish(other, "tablectl/T1/cmd", 2, "other")
	publish(writer, "tablectl/T1/cmd", 5, "writer")
	publish(writer, "tablectl/T1/pit/events", 5, "events")
	clk.Advance(time.Minute) // one more token for the flood
	publish(flood, "tablectl/T1/cmd", 2, "later")
	want := 3 + 2 + 5 + 5 + 1
	sub.Wait(10*time.Second, "what the limit lets through", func(m []mqtttest.Msg) bool { return len(m) >= want })
	// The writer's last message says everything before it has arrived.
	publish(writer, "tablectl/T1/pit/events", 1, "marker")
	got := sub.Wait(10*time.Second, "the marker", func(m []mqtttest.Msg) bool { return len(m) >= want+1 })
	counts := map[string]int{}
	for _, m := range got {
		counts[strings.Fields(string(m.Payload))[0]]++
	}
	if w := map[string]int{"flood": 3, "other": 2, "writer": 5, "events": 5, "later": 1, "marker": 1}; !maps.Equal(counts, w) {
		t.Fatalf("delivered %v, want %v", counts, w)
	}
	mu.Lock()
	defer mu.Unlock()
	if w := map[string]int{"flood tablectl/T1/cmd": len("flood 3") + len("flood 4") + len("later 1")}; !maps.Equal(limited, w) {
		t.Fatalf("OnLimited heard %v, want %v", limited, w)
	}
}
