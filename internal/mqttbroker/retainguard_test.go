package mqttbroker

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/tablectl/tablectl/internal/mqtttest"
)

const (
	raceTopics = 24 // retained topics r/<i>/v each wildcard subscribe walks
	raceRounds = 12 // subscribes per subscriber
)

// TestRetainedRace: clients subscribe to wildcard filters (over TCP and
// WebSocket), which makes mochi walk its retained messages, while other
// clients rewrite those retained messages and drop off with retained
// wills. Under -race, without retainGuard, mochi's write of a topic
// node's retainPath races the subscribe's read of it. Each subscribe must
// still get every retained topic, so the guard holds nothing back, and
// the run must end, so each lock it takes is let go.
func TestRetainedRace(t *testing.T) {
	b := start(t, Options{TCP: "127.0.0.1:0", WS: "127.0.0.1:0", Writer: "tablectl", WriterPassword: "s3cret",
		Anonymous: Access{Read: []string{"r/#"}}})
	topic := func(i int) string { return fmt.Sprintf("r/%d/v", i) }

	seed := connectClient(t, b.URL(), "seed", "tablectl", "s3cret")
	for i := range raceTopics {
		if tok := seed.Publish(topic(i), 1, true, "0"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("seed %s: %v", topic(i), tok.Error())
		}
	}

	stop := make(chan struct{})
	var writers sync.WaitGroup
	for p := range 2 {
		pub := connectClient(t, b.URL(), fmt.Sprintf("pub%d", p), "tablectl", "s3cret")
		writers.Add(1)
		go func() {
			defer writers.Done()
			for n := 0; ; n++ {
				for i := range raceTopics {
					select {
					case <-stop:
						return
					default:
					}
					pub.Publish(topic(i), 0, true, fmt.Sprint(n))
				}
			}
		}()
	}
	wills := make(chan error, 1)
	writers.Add(1)
	go func() {
		defer writers.Done()
		for n := 0; ; n++ {
			select {
			case <-stop:
				wills <- nil
				return
			default:
			}
			// MQTT 5 with a will delay on every other one: the guard sends
			// a retained will at once.
			if err := dropWithWill(b.URL(), fmt.Sprintf("will%d", n), byte(4+n%2), topic(n%raceTopics)); err != nil {
				wills <- err
				return
			}
		}
	}()

	var subs sync.WaitGroup
	errs := make(chan error, 4)
	for s, url := range []string{b.URL(), b.URL(), b.WSURL(), b.WSURL()} {
		c := connectClient(t, url, fmt.Sprintf("sub%d", s), "", "")
		subs.Add(1)
		go func() {
			defer subs.Done()
			for r := range raceRounds {
				filter := []string{"r/#", "r/+/v", "r/+/+", "r/+/#"}[(s+r)%4]
				if err := subscribeAll(c, filter); err != nil {
					errs <- fmt.Errorf("subscriber %d, round %d, %s: %w", s, r, filter, err)
					return
				}
			}
		}()
	}
	subs.Wait()
	close(stop)
	writers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := <-wills; err != nil {
		t.Error(err)
	}
}

// subscribeAll subscribes to filter, waits for every retained topic to
// arrive, and unsubscribes.
func subscribeAll(c paho.Client, filter string) error {
	got := make(chan string, 4*raceTopics)
	tok := c.Subscribe(filter, 0, func(_ paho.Client, m paho.Message) {
		if m.Retained() {
			select {
			case got <- m.Topic():
			default:
			}
		}
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return fmt.Errorf("subscribe: %v", tok.Error())
	}
	if q := tok.(*paho.SubscribeToken).Result()[filter]; q != 0 {
		return fmt.Errorf("subscribe: refused (%#x)", q)
	}
	seen := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for len(seen) < raceTopics {
		select {
		case tp := <-got:
			seen[tp] = true
		case <-deadline:
			return fmt.Errorf("%d of %d retained topics", len(seen), raceTopics)
		}
	}
	if tok := c.Unsubscribe(filter); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return fmt.Errorf("unsubscribe: %v", tok.Error())
	}
	return nil
}

func connectClient(t *testing.T, url, id, user, pass string) paho.Client {
	t.Helper()
	o := paho.NewClientOptions().AddBroker(url).SetClientID(id).SetUsername(user).SetPassword(pass).
		SetAutoReconnect(false).SetConnectTimeout(5 * time.Second)
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect %s: %v", id, tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(0) })
	return c
}

// dropWithWill connects as the writer with a retained will on topic (MQTT
// version 4 or 5; on 5 with a will delay) and drops the connection without
// a DISCONNECT, so the broker sends the will.
func dropWithWill(addr, id string, version byte, topic string) error {
	conn, err := net.DialTimeout("tcp", addr[len("tcp://"):], 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: version,
		Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 30, ClientIdentifier: id,
			UsernameFlag: true, Username: []byte("tablectl"), PasswordFlag: true, Password: []byte("s3cret"),
			WillFlag: true, WillTopic: topic, WillPayload: []byte("will"), WillRetain: true}}
	if version == 5 {
		pk.Connect.WillProperties.WillDelayInterval = 3600
	}
	var buf bytes.Buffer
	if err := pk.ConnectEncode(&buf); err != nil {
		return err
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(buf.Bytes()); err != nil {
		return err
	}
	ack := make([]byte, 4)
	if _, err := io.ReadFull(conn, ack); err != nil {
		return fmt.Errorf("connack: %w", err)
	}
	if ack[0]>>4 != packets.Connack || ack[3] != 0 {
		return fmt.Errorf("connack % x: refused", ack)
	}
	return nil
}

// TestRetainGuardLetsGo: a retained publish that never reaches mochi's
// retained store (refused by access, dropped by the client limit) holds
// no lock, so the writer's retained publish and a wildcard subscribe
// after it still go through and get every retained message.
func TestRetainGuardLetsGo(t *testing.T) {
	b := start(t, Options{TCP: "127.0.0.1:0", Writer: "tablectl", WriterPassword: "s3cret",
		Logins:      []Login{{Username: "pit", Password: "pit-pw", Access: Access{Write: []string{"r/pit"}}}},
		Anonymous:   Access{Read: []string{"r/#"}},
		ClientLimit: Rate{Burst: 1, Every: time.Hour}})
	anon := connectClient(t, b.URL(), "anon", "", "")
	anon.Publish("r/anon", 0, true, "refused") // QoS 0: dropped without a word
	pit := connectClient(t, b.URL(), "pit", "pit", "pit-pw")
	for i := range 3 { // the first goes through, the rest are limited
		if tok := pit.Publish("r/pit", 1, true, fmt.Sprint(i)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("the pit's publish %d: %v", i, tok.Error())
		}
	}
	w := connectClient(t, b.URL(), "writer", "tablectl", "s3cret")
	if tok := w.Publish("r/w", 1, true, "w"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("the writer's retained publish after them: %v", tok.Error())
	}
	s := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: b.URL(), Topics: []string{"r/#"}})
	retained := func(m []mqtttest.Msg) map[string]string {
		got := map[string]string{}
		for _, x := range m {
			if x.Retained {
				got[x.Topic] = string(x.Payload)
			}
		}
		return got
	}
	s.Wait(10*time.Second, "the retained r/pit and r/w", func(m []mqtttest.Msg) bool { return len(retained(m)) >= 2 })
	// Anything more went out before a live message the writer sends now:
	// wait for that.
	if tok := w.Publish("r/marker", 1, false, "marker"); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("the writer's marker: %v", tok.Error())
	}
	var msgs []mqtttest.Msg
	for _, m := range s.Wait(10*time.Second, "the writer's marker", func(m []mqtttest.Msg) bool {
		return slices.ContainsFunc(m, func(x mqtttest.Msg) bool { return x.Topic == "r/marker" })
	}) {
		if m.Topic != "r/marker" {
			msgs = append(msgs, m)
		}
	}
	if got := retained(msgs); len(got) != 2 || got["r/pit"] != "0" || got["r/w"] != "w" {
		t.Fatalf("retained messages %v, want r/pit=0 and r/w=w", got)
	}
	for _, m := range msgs {
		// mochi acknowledges a QoS 1 publish before it sends it on, so the
		// writer's may also reach a subscription made just after its PUBACK,
		// live (without the retained flag); nothing else may.
		if !m.Retained && (m.Topic != "r/w" || string(m.Payload) != "w") {
			t.Fatalf("live message %+v, want none but the writer's r/w", m)
		}
	}
}

// TestRetainedWillNotDelayed: an MQTT 5 client's retained will with a
// will delay is sent and retained at once (mochi would retain it later
// from its event loop, unguarded); a later subscriber gets it retained.
func TestRetainedWillNotDelayed(t *testing.T) {
	b := start(t, Options{TCP: "127.0.0.1:0", Writer: "tablectl", WriterPassword: "s3cret", Anonymous: Access{Read: []string{"r/#"}}})
	live := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: b.URL(), ClientID: "live", Topics: []string{"r/#"}})
	if err := dropWithWill(b.URL(), "will5", 5, "r/status"); err != nil {
		t.Fatal(err)
	}
	// The subscriber may have it twice: live, and retained from the scan
	// mochi runs for its subscription after the SUBACK, if the will came
	// between the two.
	for _, m := range live.Wait(5*time.Second, "the will, at once (its delay is an hour)", func(m []mqtttest.Msg) bool { return len(m) >= 1 }) {
		if m.Topic != "r/status" || string(m.Payload) != "will" {
			t.Fatalf("live subscriber got %+v, want the will", m)
		}
	}
	late := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: b.URL(), ClientID: "late", Topics: []string{"r/+"}})
	m := late.Wait(5*time.Second, "the retained will", func(m []mqtttest.Msg) bool { return len(m) == 1 })
	if m[0].Topic != "r/status" || string(m[0].Payload) != "will" || !m[0].Retained {
		t.Fatalf("late subscriber got %+v, want the retained will on r/status", m[0])
	}
}

// TestSysWildcardNoRetained: a wildcard filter under $SYS is granted but
// not answered with retained messages (mochi rewrites them from its event
// loop, unguarded); a $SYS topic by name still is.
func TestSysWildcardNoRetained(t *testing.T) {
	b := start(t, Options{TCP: "127.0.0.1:0", Writer: "tablectl", WriterPassword: "s3cret"})
	named := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: b.URL(), ClientID: "named", Username: "tablectl", Password: "s3cret", Topics: []string{"$SYS/broker/version"}})
	m := named.Wait(5*time.Second, "the retained $SYS/broker/version", func(m []mqtttest.Msg) bool { return len(m) == 1 })
	if !m[0].Retained {
		t.Fatalf("%+v: not retained", m[0])
	}
	retainMarker(t, b.URL(), "m/marker")
	var retained []mqtttest.Msg
	for _, m := range retainedBefore(t, b.URL(), "tablectl", "s3cret", "m/marker", "$SYS/#", "$SYS/broker/+") {
		if m.Retained { // $SYS's live updates may come meanwhile
			retained = append(retained, m)
		}
	}
	if len(retained) != 0 {
		t.Fatalf("$SYS wildcards answered with %d retained messages, first %s", len(retained), retained[0].Topic)
	}
}

// BenchmarkRetainedPublish: the writer publishes retained messages (QoS 0,
// over raceTopics topics; a QoS 1 one at the end, whose PUBACK says the
// broker has handled all before it), alone or with a wildcard subscriber
// receiving them: what retainGuard costs a publish.
func BenchmarkRetainedPublish(b *testing.B) {
	for _, sub := range []bool{false, true} {
		name := "alone"
		if sub {
			name = "subscriber"
		}
		b.Run(name, func(b *testing.B) {
			br, err := Start(Options{TCP: "127.0.0.1:0", Writer: "tablectl", WriterPassword: "s3cret",
				Anonymous: Access{Read: []string{"r/#"}}, Logger: quiet()})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			if sub {
				mqtttest.Subscribe(b, mqtttest.SubOptions{URL: br.URL(), Topics: []string{"r/#"}})
			}
			o := paho.NewClientOptions().AddBroker(br.URL()).SetClientID("bench").SetUsername("tablectl").SetPassword("s3cret").
				SetAutoReconnect(false).SetWriteTimeout(10 * time.Second)
			c := paho.NewClient(o)
			if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				b.Fatal(tok.Error())
			}
			defer c.Disconnect(0)
			topics := make([]string, raceTopics)
			for i := range topics {
				topics[i] = fmt.Sprintf("r/%d/v", i)
			}
			payload := []byte(`{"shoe":1,"hand":42,"state":"dealing"}`)
			b.ResetTimer()
			for i := range b.N {
				c.Publish(topics[i%raceTopics], 0, true, payload)
			}
			if tok := c.Publish("r/end", 1, true, payload); !tok.WaitTimeout(time.Minute) || tok.Error() != nil {
				b.Fatal(tok.Error())
			}
			b.StopTimer()
		})
	}
}

// BenchmarkRetainGuardHooks: the guard's own work for one retained publish
// delivered to one subscriber (what mochi calls on it: OnPublish,
// OnRetainMessage, OnPacketProcessed, OnPacketSent), without the network
// that BenchmarkRetainedPublish's figures are mostly made of.
func BenchmarkRetainGuardHooks(b *testing.B) {
	g := newRetainGuard()
	cl := &mqtt.Client{}
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Retain: true}, TopicName: "r/0/v"}
	for b.Loop() {
		for _, e := range []byte{mqtt.OnPublish, mqtt.OnRetainMessage, mqtt.OnPacketProcessed, mqtt.OnPacketSent} {
			if !g.Provides(e) {
				b.Fatal(e)
			}
		}
		out, _ := g.OnPublish(cl, pk)
		g.OnRetainMessage(cl, out, 1)
		g.OnPacketProcessed(cl, pk, nil)
		g.OnPacketSent(cl, pk, nil)
	}
}
