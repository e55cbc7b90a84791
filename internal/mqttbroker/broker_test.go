package mqttbroker

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/tablectl/tablectl/internal/clock"
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
	b := start(t, Options{TCP: "127.0.0.1:0", WS: "127.0.0.1:0", Writer: "tablectl", WriterPassword: "s3cret"})
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

// TestOnlyTheWriterWrites: anyone may read and publish commands; only the
// controller, with its password, may publish anything else; a wrong
// password for the controller's name is refused outright.
func TestOnlyTheWriterWrites(t *testing.T) {
	b := start(t, Options{TCP: "127.0.0.1:0", Writer: "tablectl", WriterPassword: "s3cret", OpenTopics: []string{"tablectl/+/cmd"}})
	sub := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: b.URL(), Topics: []string{"tablectl/#"}})
	mqtttest.Publish(t, b.URL(), "", "", "tablectl/T1/pit/events", 1, []byte("forged"))
	mqtttest.Publish(t, b.URL(), "display", "x", "tablectl/T1/status", 1, []byte("forged"))
	mqtttest.Publish(t, b.URL(), "", "", "tablectl/T1/cmd", 1, []byte("a command"))
	mqtttest.Publish(t, b.URL(), "tablectl", "s3cret", "tablectl/T1/pit/events", 1, []byte("real"))
	got := sub.Wait(10*time.Second, "the command and the controller's event", func(m []mqtttest.Msg) bool { return len(m) >= 2 })
	// Each publish is its own client, so the two may arrive in either order;
	// a forged one, had it got through, arrived before the last of them.
	payloads := make([]string, len(got))
	for i, m := range got {
		payloads[i] = m.Topic + " " + string(m.Payload)
	}
	slices.Sort(payloads)
	if !slices.Equal(payloads, []string{"tablectl/T1/cmd a command", "tablectl/T1/pit/events real"}) {
		for _, m := range got {
			t.Logf("%s %s", m.Topic, m.Payload)
		}
		t.Fatal("a reader's publish got through, or a permitted one did not")
	}
	if !matches("tablectl/+/cmd", "tablectl/T1/cmd") || matches("tablectl/+/cmd", "tablectl/T1/cmd/x") || !matches("a/#", "a/b/c") {
		t.Fatal("topic filter matching")
	}
}

func TestWrongWriterPasswordRefused(t *testing.T) {
	h := &accessHook{opt: Options{Writer: "tablectl", WriterPassword: "s3cret"}}
	if h.OnConnectAuthenticate(nil, connectPacket("tablectl", "guess")) {
		t.Fatal("wrong password accepted for the writer")
	}
	if !h.OnConnectAuthenticate(nil, connectPacket("tablectl", "s3cret")) || !h.OnConnectAuthenticate(nil, connectPacket("display", "")) {
		t.Fatal("right password or a reader refused")
	}
}

// TestClientLimit: each client may publish a burst on the open topic, then
// one message an interval; beyond it a message is acknowledged (the
// publisher is not held up) and delivered to no one, and OnLimited hears
// of it. Another client has a bucket of its own; the writer and the other
// topics are never limited.
func TestClientLimit(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	limited := map[string]int{}
	b := start(t, Options{TCP: "127.0.0.1:0", Writer: "tablectl", WriterPassword: "s3cret", OpenTopics: []string{"tablectl/+/cmd"},
		ClientLimit: Rate{Burst: 3, Every: time.Minute}, Clock: clk,
		OnLimited: func(client, topic string, size int) {
			mu.Lock()
			limited[client+" "+topic] += size
			mu.Unlock()
		}})
	sub := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: b.URL(), Topics: []string{"tablectl/#"}})
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
	flood, other, writer := dial("flood", "", ""), dial("other", "", ""), dial("ctl", "tablectl", "s3cret")
	publish(flood, "tablectl/T1/cmd", 5, "flood")
	publish(other, "tablectl/T1/cmd", 2, "other")
	publish(writer, "tablectl/T1/cmd", 5, "writer")
	publish(writer, "tablectl/T1/pit/events", 5, "events")
	clk.Advance(time.Minute) // one more token for the flood
	publish(flood, "tablectl/T1/cmd", 2, "later")
	want := 3 + 2 + 5 + 5 + 1
	got := sub.Wait(10*time.Second, "what the limit lets through", func(m []mqtttest.Msg) bool { return len(m) >= want })
	// The writer's last message says everything before it has arrived.
	publish(writer, "tablectl/T1/pit/events", 1, "marker")
	got = sub.Wait(10*time.Second, "the marker", func(m []mqtttest.Msg) bool { return len(m) >= want+1 })
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
