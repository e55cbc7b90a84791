package mqttbroker

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/tablectl/tablectl/base/netlimit"
	"github.com/tablectl/tablectl/internal/mqtttest"
	"github.com/tablectl/tablectl/internal/testenv"
)

// TestAcceptsAfterDescriptorsRunOut: the process runs out of file
// descriptors while clients flood the TCP listener; once they are gone the
// broker accepts again (mochi's own TCP listener ended on its first accept
// error and left the port open and deaf).
//
// The test lowers its own soft RLIMIT_NOFILE for the flood: it runs alone
// (not parallel), and puts the limit back before it returns.
func TestAcceptsAfterDescriptorsRunOut(t *testing.T) {
	b := start(t, Options{TCP: "127.0.0.1:0", Writer: "tablectl", WriterPassword: "s3cret", Anonymous: Access{Read: []string{"t/#"}}})
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	open, err := netlimit.OpenFiles()
	if err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = uint64(open + 40)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer restore()
	var flood []net.Conn
	var dialErr error
	for range 200 {
		c, err := net.DialTimeout("tcp", b.TCPAddr(), 2*time.Second)
		if err != nil {
			dialErr = err
			break
		}
		flood = append(flood, c)
	}
	// The broker's side runs out too: wait until its accept loop has met it.
	testenv.Eventually(t, 10*time.Second, "the broker's accept loop to run out of descriptors", func() bool {
		var n uint64
		for _, l := range b.Listeners() {
			n += l.Stats().AcceptErrors
		}
		return n > 0
	})
	for _, c := range flood {
		c.Close()
	}
	restore()
	if !errors.Is(dialErr, syscall.EMFILE) {
		t.Fatalf("the flood of %d connections ended with %v, not the process's descriptors running out", len(flood), dialErr)
	}
	t.Logf("descriptors ran out after %d connections (%v)", len(flood), dialErr)
	if err := mqtttest.Connect(t, b.URL(), "", ""); err != nil {
		t.Fatalf("after the flood, a client cannot connect: %v", err)
	}
}

// dialFrom opens a TCP connection to addr from the loopback address from.
func dialFrom(t *testing.T, addr, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin reports whether the broker closes c within d (plus a
// margin for a loaded machine), and how long it took.
func closedWithin(c net.Conn, d time.Duration) (bool, time.Duration) {
	start := time.Now()
	c.SetReadDeadline(start.Add(d + 5*time.Second))
	var buf [64]byte
	for {
		_, err := c.Read(buf[:])
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return false, time.Since(start)
		}
		return true, time.Since(start)
	}
}

// TestListenerLimits: each listener, TCP and WebSocket, closes a
// connection beyond its cap per client address or in all, and one that
// sends no CONNECT within ConnectWithin.
func TestListenerLimits(t *testing.T) {
	b := start(t, Options{TCP: "127.0.0.1:0", WS: "127.0.0.1:0", Writer: "tablectl", WriterPassword: "s3cret",
		Anonymous: Access{Read: []string{"t/#"}}, Limits: netlimit.Limits{Total: 3, PerClient: 2}, ConnectWithin: 300 * time.Millisecond})
	for _, addr := range []string{b.TCPAddr(), b.WSAddr()} {
		a1, a2 := dialFrom(t, addr, "127.0.0.2"), dialFrom(t, addr, "127.0.0.2")
		if ok, _ := closedWithin(dialFrom(t, addr, "127.0.0.2"), 0); !ok {
			t.Errorf("%s: a third connection from one address was kept (per client cap 2)", addr)
		}
		b1 := dialFrom(t, addr, "127.0.0.3")
		if ok, _ := closedWithin(dialFrom(t, addr, "127.0.0.4"), 0); !ok {
			t.Errorf("%s: a fourth connection in all was kept (cap 3)", addr)
		}
		// Idle: none of the three sends anything, and each is closed.
		for _, c := range []net.Conn{a1, a2, b1} {
			if ok, took := closedWithin(c, 300*time.Millisecond); !ok {
				t.Errorf("%s: a connection that sent nothing still open after %v", addr, took)
			}
		}
	}
	// The slots came back: a client connects.
	if err := mqtttest.Connect(t, b.URL(), "", ""); err != nil {
		t.Fatalf("once the idle ones were closed: %v", err)
	}
}

// TestKeepaliveHeld: a client that asks for no keepalive is held to
// MaxKeepalive, and disconnected after one and a half times it without a
// packet; one that keeps alive stays.
func TestKeepaliveHeld(t *testing.T) {
	b := start(t, Options{TCP: "127.0.0.1:0", Anonymous: Access{Read: []string{"t/#"}}, MaxKeepalive: 2 * time.Second})
	idle := dialFrom(t, b.TCPAddr(), "127.0.0.1")
	// A CONNECT, MQTT 3.1.1, clean session, keepalive 0, client id "idle".
	connect := []byte{0x10, 16, 0, 4, 'M', 'Q', 'T', 'T', 4, 2, 0, 0, 0, 4, 'i', 'd', 'l', 'e'}
	if _, err := idle.Write(connect); err != nil {
		t.Fatal(err)
	}
	var ack [4]byte
	idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := idle.Read(ack[:]); err != nil || ack[0] != 0x20 || ack[3] != 0 {
		t.Fatalf("CONNACK % x, %v", ack, err)
	}
	ok, took := closedWithin(idle, 3*time.Second)
	if !ok || took < 2*time.Second {
		t.Fatalf("a client without keepalive, silent: closed %v after %v; want closed after 3s (1.5 x 2s)", ok, took)
	}
	t.Logf("a silent client without keepalive closed after %v", took)
}

// TestRetainedRefused: a retained message on a NoRetain topic is
// acknowledged, delivered to no one, kept by no one and reported; a live
// one and a clear pass.
func TestRetainedRefused(t *testing.T) {
	type refusal struct {
		topic string
		size  int
	}
	refused := make(chan refusal, 8)
	b := start(t, Options{TCP: "127.0.0.1:0", Writer: "tablectl", WriterPassword: "s3cret",
		Logins:   []Login{{Username: "pit", Password: "pit-pw", Access: Access{Read: []string{"t/#"}, Write: []string{"t/cmd"}}}},
		NoRetain: []string{"t/cmd"},
		OnRetainRefused: func(_, topic string, size int) {
			refused <- refusal{topic, size}
		}})
	live := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: b.URL(), Username: "pit", Password: "pit-pw", Topics: []string{"t/#"}})
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("pit-1").SetUsername("pit").SetPassword("pit-pw"))
	if tok := pub.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	for _, m := range []struct {
		retained bool
		payload  string
	}{{true, `{"retained":1}`}, {false, `{"live":1}`}, {true, ""}} {
		if tok := pub.Publish("t/cmd", 1, m.retained, m.payload); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("publish retained %v: %v", m.retained, tok.Error())
		}
	}
	select {
	case r := <-refused:
		if r.topic != "t/cmd" || r.size != len(`{"retained":1}`) {
			t.Errorf("refusal reported as %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the retained message's refusal was not reported")
	}
	live.Wait(5*time.Second, "the live message and the clear", func(ms []mqtttest.Msg) bool { return len(ms) >= 2 })
	for _, m := range live.Messages() {
		if string(m.Payload) == `{"retained":1}` {
			t.Error("the refused retained message was delivered")
		}
	}
	pub.Disconnect(0)
	// A later subscriber: what the broker keeps for t/cmd would come
	// before the retained marker it subscribes to next.
	retainMarker(t, b.URL(), "t/marker")
	for _, m := range retainedBefore(t, b.URL(), "pit", "pit-pw", "t/marker", "t/cmd") {
		t.Errorf("a later subscriber got %q on %s (retained %v)", m.Payload, m.Topic, m.Retained)
	}
	select {
	case r := <-refused:
		t.Errorf("more refusals reported: %+v", r)
	default:
	}
}

// TestRetainedWillOnNoRetainTopic: a will on a NoRetain topic loses its
// retain flag at the connect; one elsewhere keeps it.
func TestRetainedWillOnNoRetainTopic(t *testing.T) {
	h := &accessHook{log: quiet(), opt: Options{NoRetain: []string{"t/cmd"}, MaxKeepalive: time.Minute}}
	for _, tt := range []struct {
		topic string
		keep  bool
	}{{"t/cmd", false}, {"t/status", true}} {
		cl := &mqtt.Client{}
		cl.Properties.Will = mqtt.Will{TopicName: tt.topic, Retain: true, Payload: []byte("x")}
		if err := h.OnConnect(cl, packets.Packet{}); err != nil {
			t.Fatal(err)
		}
		if cl.Properties.Will.Retain != tt.keep {
			t.Errorf("a retained will on %s: retain %v after the connect, want %v", tt.topic, cl.Properties.Will.Retain, tt.keep)
		}
		if cl.State.Keepalive != 60 || !cl.State.ServerKeepalive {
			t.Errorf("keepalive 0 held to %d (server keepalive %v), want 60", cl.State.Keepalive, cl.State.ServerKeepalive)
		}
	}
}

// retainMarker publishes a retained marker on topic as the writer
// (tablectl, s3cret), for retainedBefore.
func retainMarker(t *testing.T, url, topic string) {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID("writer-marker").SetUsername("tablectl").SetPassword("s3cret"))
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("the writer's connect: %v", tok.Error())
	}
	defer c.Disconnect(0)
	if tok := c.Publish(topic, 1, true, "marker"); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("the retained marker: %v", tok.Error())
	}
}

// retainedBefore subscribes as user to each filter in turn, then to
// marker, which holds a retained message, and returns what came on the
// filters before the marker's: the broker answers a subscription's
// retained messages before it reads the next one, so that is all it
// answers them with. A refused filter fails the test.
func retainedBefore(t *testing.T, url, user, pass, marker string, filters ...string) []mqtttest.Msg {
	t.Helper()
	var mu sync.Mutex
	var got []mqtttest.Msg
	marked := make(chan struct{}, 1)
	c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(user + "-later").SetUsername(user).SetPassword(pass).
		SetOrderMatters(true).SetAutoReconnect(false))
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect as %s: %v", user, tok.Error())
	}
	defer c.Disconnect(0)
	for _, f := range filters {
		tok := c.Subscribe(f, 1, func(_ paho.Client, m paho.Message) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, mqtttest.Msg{Topic: m.Topic(), Payload: m.Payload(), Retained: m.Retained()})
		})
		if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("subscribe %s: %v", f, tok.Error())
		}
		if q := tok.(*paho.SubscribeToken).Result()[f]; q > 2 {
			t.Fatalf("subscribe %s: refused (%#x)", f, q)
		}
	}
	if tok := c.Subscribe(marker, 1, func(paho.Client, paho.Message) {
		select {
		case marked <- struct{}{}:
		default:
		}
	}); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe %s: %v", marker, tok.Error())
	}
	select {
	case <-marked:
	case <-time.After(10 * time.Second):
		t.Fatalf("no retained %s for a later subscriber", marker)
	}
	mu.Lock()
	defer mu.Unlock()
	return got
}
