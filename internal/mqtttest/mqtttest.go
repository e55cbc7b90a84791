// Package mqtttest helps tests talk to real MQTT brokers: the Mosquitto the
// CI runs on 127.0.0.1:1883, private Mosquitto instances a test starts,
// stops and restarts on a free port, and subscribers that record every
// message they receive. It is for tests only.
package mqtttest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/tablectl/tablectl/internal/freeport"
	"github.com/tablectl/tablectl/internal/mosquitto"
	"github.com/tablectl/tablectl/internal/testenv"
)

// SharedURL is the Mosquitto every test may use; .ci/test starts it.
const SharedURL = "tcp://127.0.0.1:1883"

// Shared returns SharedURL once it answers. Without it the test is skipped
// (failed under .ci/test, which starts one): see testenv.
func Shared(t testing.TB) string {
	t.Helper()
	testenv.Listening(t, "127.0.0.1:1883", "Mosquitto (.ci/test starts one)")
	return SharedURL
}

// Prefix returns a topic prefix no other test uses, so tests can share a
// broker and run in parallel.
func Prefix(t testing.TB) string {
	var b [4]byte
	rand.Read(b[:])
	name := regexp.MustCompile(`[^A-Za-z0-9_-]+`).ReplaceAllString(t.Name(), "_")
	return "tablectl-test/" + name + "-" + hex.EncodeToString(b[:])
}

// ClientID returns a client id no other test uses.
func ClientID(t testing.TB, role string) string {
	var b [4]byte
	rand.Read(b[:])
	return role + "-" + hex.EncodeToString(b[:])
}

// Mosquitto is a private Mosquitto a test controls.
type Mosquitto struct {
	t    testing.TB
	Port int
	URL  string
	Dir  string
	conf string

	mu   sync.Mutex // guards proc
	proc *mosquitto.Process
	last string // the log of the process before, once stopped
}

// StartMosquitto starts a Mosquitto on a free loopback port with extra
// configuration lines after the listener (password_file, acl_file...); the
// test's temporary directory holds its files. It is killed at the end of
// the test.
func StartMosquitto(t testing.TB, extra string) *Mosquitto {
	t.Helper()
	testenv.Command(t, "mosquitto", "mosquitto")
	port, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	m := &Mosquitto{t: t, Port: port, URL: fmt.Sprintf("tcp://127.0.0.1:%d", port), Dir: t.TempDir()}
	m.conf = filepath.Join(m.Dir, "mosquitto.conf")
	conf := fmt.Sprintf(`# written by a test
listener %d 127.0.0.1
# Run as root, mosquitto would switch to its own user, who cannot read the
# test's files.
user root
log_dest stderr
log_type error
log_type warning
log_type notice
log_type information
%s
`, port, extra)
	if err := os.WriteFile(m.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	m.Start()
	t.Cleanup(m.Stop)
	return m
}

// Start starts the broker (again) and returns once it says it is running.
func (m *Mosquitto) Start() {
	m.t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc != nil {
		m.t.Fatal("mosquitto already running")
	}
	p, err := mosquitto.Start(m.conf, 10*time.Second)
	if err != nil {
		m.t.Fatal(err)
	}
	m.proc = p
}

// Stop kills the broker, as a crash or a power cut would (no clean
// shutdown, no last words to clients).
func (m *Mosquitto) Stop() {
	m.mu.Lock()
	p := m.proc
	m.proc = nil
	m.mu.Unlock()
	if p == nil {
		return
	}
	p.Kill()
	m.mu.Lock()
	m.last = p.Log()
	m.mu.Unlock()
}

// Log is what the broker has written so far (the last one, once stopped).
func (m *Mosquitto) Log() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return m.last
	}
	return m.proc.Log()
}

// Msg is one message a Subscriber received.
type Msg struct {
	Topic    string
	Payload  []byte
	Retained bool
	// N numbers messages in the order received, from 0.
	N int
}

// SubOptions configure a Subscriber.
type SubOptions struct {
	URL                string
	ClientID           string
	Username, Password string
	Topics             []string
	// OnMessage, when set, runs in paho's handler for each message, before
	// it is recorded (to check something at the very moment of receipt).
	OnMessage func(Msg)
}

// Subscriber records every message on its topics. It subscribes again on
// every connect.
type Subscriber struct {
	t   testing.TB
	opt SubOptions
	c   paho.Client

	mu       sync.Mutex
	msgs     []Msg
	notify   chan struct{}
	ready    chan struct{}
	once     sync.Once
	refused  []string
	connects int
}

// Subscribe connects and subscribes, and returns once the broker has
// granted or refused every subscription.
func Subscribe(t testing.TB, opt SubOptions) *Subscriber {
	t.Helper()
	if opt.ClientID == "" {
		opt.ClientID = ClientID(t, "sub")
	}
	s := &Subscriber{t: t, opt: opt, notify: make(chan struct{}), ready: make(chan struct{})}
	po := paho.NewClientOptions().AddBroker(opt.URL).SetClientID(opt.ClientID).
		SetUsername(opt.Username).SetPassword(opt.Password).
		SetCleanSession(true).SetAutoReconnect(true).SetConnectRetry(true).
		SetConnectRetryInterval(100 * time.Millisecond).SetMaxReconnectInterval(500 * time.Millisecond).
		SetOrderMatters(true).
		SetOnConnectHandler(func(c paho.Client) {
			filters := map[string]byte{}
			for _, tp := range opt.Topics {
				filters[tp] = 1
			}
			tok := c.SubscribeMultiple(filters, s.receive)
			tok.WaitTimeout(5 * time.Second)
			s.mu.Lock()
			s.connects++
			s.refused = nil
			for tp, q := range tok.(*paho.SubscribeToken).Result() {
				if q == 0x80 {
					s.refused = append(s.refused, tp)
				}
			}
			close(s.notify)
			s.notify = make(chan struct{})
			s.mu.Unlock()
			s.once.Do(func() { close(s.ready) })
		})
	s.c = paho.NewClient(po)
	s.c.Connect()
	select {
	case <-s.ready:
	case <-time.After(10 * time.Second):
		t.Fatalf("subscriber %s: no connection to %s in 10s", opt.ClientID, opt.URL)
	}
	t.Cleanup(func() { s.c.Disconnect(100) })
	return s
}

// Publish publishes on the subscriber's own connection and waits for the
// broker's acknowledgement: where a login is its client id
// (use_username_as_clientid), a second connection with the same login
// would take the first one's place.
func (s *Subscriber) Publish(topic string, qos byte, payload []byte) {
	s.t.Helper()
	if tok := s.c.Publish(topic, qos, false, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		s.t.Fatalf("publish %s as %s: %v", topic, s.opt.Username, tok.Error())
	}
}

func (s *Subscriber) receive(_ paho.Client, m paho.Message) {
	msg := Msg{Topic: m.Topic(), Payload: append([]byte(nil), m.Payload()...), Retained: m.Retained()}
	if s.opt.OnMessage != nil {
		s.opt.OnMessage(msg)
	}
	s.mu.Lock()
	msg.N = len(s.msgs)
	s.msgs = append(s.msgs, msg)
	close(s.notify)
	s.notify = make(chan struct{})
	s.mu.Unlock()
}

// WaitConnects waits until the subscriber has connected and subscribed n
// times in all (n = 2 is the first reconnect).
func (s *Subscriber) WaitConnects(timeout time.Duration, n int) {
	s.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		c, ch := s.connects, s.notify
		s.mu.Unlock()
		if c >= n {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			s.t.Fatalf("subscriber %s: connected %d times in %v, want %d", s.opt.ClientID, c, timeout, n)
		}
	}
}

// Refused lists the subscriptions the broker refused at the last connect.
func (s *Subscriber) Refused() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.refused...)
}

// Messages returns a copy of everything received so far.
func (s *Subscriber) Messages() []Msg {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Msg(nil), s.msgs...)
}

// Wait waits until ok holds for the messages received so far, and returns
// them. The timeout only guards against a test that would hang.
func (s *Subscriber) Wait(timeout time.Duration, what string, ok func([]Msg) bool) []Msg {
	s.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		msgs, ch := append([]Msg(nil), s.msgs...), s.notify
		s.mu.Unlock()
		if ok(msgs) {
			return msgs
		}
		select {
		case <-ch:
		case <-deadline.C:
			s.t.Fatalf("waited %v for %s; received %d messages", timeout, what, len(msgs))
			return nil
		}
	}
}

// Last is the last message received on topic, and whether there is one.
func Last(msgs []Msg, topic string) (Msg, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Topic == topic {
			return msgs[i], true
		}
	}
	return Msg{}, false
}

// Publish publishes one message with its own short-lived client and waits
// for the broker to take it.
func Publish(t testing.TB, url, user, pass, topic string, qos byte, payload []byte) {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(ClientID(t, "pub")).
		SetUsername(user).SetPassword(pass).SetCleanSession(true))
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect to %s: %v", url, tok.Error())
	}
	defer c.Disconnect(100)
	if tok := c.Publish(topic, qos, false, payload); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("publish %s: %v", topic, tok.Error())
	}
}

// ClearRetained removes retained messages (an empty retained publish each),
// so tests leave nothing behind on a shared broker.
func ClearRetained(t testing.TB, url, user, pass string, topics ...string) {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(ClientID(t, "clear")).
		SetUsername(user).SetPassword(pass).SetCleanSession(true))
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Logf("clear retained: connect to %s: %v", url, tok.Error())
		return
	}
	defer c.Disconnect(100)
	for _, tp := range topics {
		c.Publish(tp, 1, true, []byte{}).WaitTimeout(5 * time.Second)
	}
}

// Connect tries to log in and reports the broker's answer.
func Connect(t testing.TB, url, user, pass string) error {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(ClientID(t, "login")).
		SetUsername(user).SetPassword(pass).SetCleanSession(true).SetConnectRetry(false).SetAutoReconnect(false))
	tok := c.Connect()
	if !tok.WaitTimeout(10 * time.Second) {
		return fmt.Errorf("no answer from %s", url)
	}
	if tok.Error() == nil {
		c.Disconnect(0)
	}
	return tok.Error()
}
