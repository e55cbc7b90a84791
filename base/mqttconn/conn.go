package mqttconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// Token is a publish in flight: Done is closed once the broker has it
// (PUBACK for QoS 1), and Error then says whether it failed.
type Token interface {
	Done() <-chan struct{}
	Error() error
}

// Client is a broker connection as the publisher uses it. *Conn is the
// production one.
type Client interface {
	Publish(topic string, qos byte, retained bool, payload []byte) Token
	// Connection reports whether the connection is up, and a channel that
	// is closed at its next change.
	Connection() (up bool, changed <-chan struct{})
}

// ConnOptions configure a Conn.
type ConnOptions struct {
	// Broker is the broker's URL: tcp://, ssl:// (TLS), ws:// or wss://.
	Broker   string
	ClientID string
	Username string
	Password string
	// TLS is used for ssl:// and wss:// brokers (see TLSConfig).
	TLS *tls.Config
	// Will is published by the broker, retained, if the connection dies.
	WillTopic   string
	WillPayload []byte
	// Subscribe lists the topics subscribed at QoS 1 on every connect;
	// their messages arrive on Messages.
	Subscribe []string
	// Inbox is how many received messages wait for the reader; more are
	// dropped (and counted). 0 is 64.
	Inbox int
	// Sort, when set, is asked in paho's handler where each received
	// message waits: LaneInbox (Messages), LanePriority (Priority: a lane
	// of its own that the inbox's messages cannot fill) or LaneNone
	// (dropped: Sort has dealt with it). It sees the whole payload before
	// it is copied or cut; it must be cheap and never block.
	// Nil sends every message to the inbox.
	Sort func(topic string, payload []byte) Lane
	// PriorityInbox is how many messages wait in the priority lane; more
	// are dropped (and counted). 0 is 64.
	PriorityInbox int
	// Lost hears each message dropped because its lane was full (after
	// Sort). It must not block.
	Lost func(lane Lane, size int)
	// Retained, when set, hears each message the broker delivers as
	// retained: one it kept from before the subscription, not one sent
	// now. Such a message is neither sorted nor queued. It must not block.
	// (A command left retained on cmd would otherwise be taken again at
	// every connection.)
	Retained func(topic string, size int)
	// MaxPayload cuts received payloads at MaxPayload+1 bytes, so an
	// oversized message is never copied whole; 0 keeps them whole.
	MaxPayload int
	// KeepAlive, ConnectTimeout and MaxReconnectInterval tune how fast a
	// dead broker is noticed and how often it is tried again.
	KeepAlive, ConnectTimeout, MaxReconnectInterval time.Duration
	Logger                                          *slog.Logger
	// Once makes the first connection now, once: Dial waits for it and
	// returns why it failed (refused, TLS, the login), for a one-shot
	// client such as a supervisor's command that has nothing to wait for.
	// Without it Dial returns at once and connects in the background,
	// trying again until Close. A connection made once is kept up as
	// without it.
	Once bool
}

// InMessage is a message received on a subscribed topic.
type InMessage struct {
	Topic   string
	Payload []byte
	// Size is the payload's size on the wire (Payload may be cut short).
	Size int
}

// Lane is where a received message waits for its reader (ConnOptions.Sort).
type Lane int

// The lanes.
const (
	// LaneInbox is Messages.
	LaneInbox Lane = iota
	// LanePriority is Priority.
	LanePriority
	// LaneNone drops the message: Sort has dealt with it.
	LaneNone
)

func (l Lane) String() string {
	switch l {
	case LaneInbox:
		return "inbox"
	case LanePriority:
		return "priority"
	}
	return "none"
}

// Conn is a paho connection that reconnects on its own, resubscribes on
// every connect, hands received messages to a channel without ever
// blocking paho's handler, and tells its state to whoever watches.
type Conn struct {
	opt ConnOptions
	log *slog.Logger
	c   paho.Client

	inbox    chan InMessage
	priority chan InMessage
	dropped  atomic.Uint64

	mu      sync.Mutex
	up      bool
	changed chan struct{}
	closed  bool
	// refused are the topics the broker refused to subscribe on the last
	// connect (its ACL), losses how many times the connection was lost.
	refused []string
	losses  int
}

// Refused lists the topics the broker refused to subscribe on the last
// connect: its ACL does not let this login read them.
func (c *Conn) Refused() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.refused...)
}

// Losses is how many times the connection has been lost.
func (c *Conn) Losses() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.losses
}

// Dial starts connecting to the broker and returns at once: the connection
// comes up, and comes back after every loss, in the background. Wait for
// it with WaitConnected, or watch Connection.
func Dial(opt ConnOptions) (*Conn, error) {
	if opt.Broker == "" {
		return nil, errors.New("mqtt: no broker URL")
	}
	if opt.ClientID == "" {
		return nil, errors.New("mqtt: no client id")
	}
	if opt.Inbox <= 0 {
		opt.Inbox = 64
	}
	if opt.PriorityInbox <= 0 {
		opt.PriorityInbox = 64
	}
	if opt.KeepAlive <= 0 {
		opt.KeepAlive = 10 * time.Second
	}
	if opt.ConnectTimeout <= 0 {
		opt.ConnectTimeout = 5 * time.Second
	}
	if opt.MaxReconnectInterval <= 0 {
		opt.MaxReconnectInterval = 5 * time.Second
	}
	c := &Conn{opt: opt, log: opt.Logger, inbox: make(chan InMessage, opt.Inbox),
		priority: make(chan InMessage, opt.PriorityInbox), changed: make(chan struct{})}
	if c.log == nil {
		c.log = slog.Default()
	}
	po := paho.NewClientOptions().
		AddBroker(opt.Broker).
		SetClientID(opt.ClientID).
		SetUsername(opt.Username).
		SetPassword(opt.Password).
		// A new session each time: subscriptions are made again on connect,
		// and commands sent while the controller was away are stale anyway.
		SetCleanSession(true).
		SetAutoReconnect(true).
		SetConnectRetry(true).
		SetConnectRetryInterval(time.Second).
		SetMaxReconnectInterval(opt.MaxReconnectInterval).
		SetConnectTimeout(opt.ConnectTimeout).
		SetKeepAlive(opt.KeepAlive).
		SetPingTimeout(opt.ConnectTimeout).
		SetWriteTimeout(5 * time.Second).
		// Received messages reach the handler one at a time, in order (the
		// handler only hands them on); what is published goes out in the
		// order Publish is called, and anything paho keeps across a
		// reconnect is sent again in that order.
		SetOrderMatters(true).
		// The trail is the store: after a reconnect the publisher sends
		// again, in order, every row the broker did not acknowledge, so paho
		// keeps nothing to resend. (Its own resend of stored packets also
		// races with its writer in paho 1.5.1: client.resume sets Dup on a
		// packet the outgoing goroutine is writing.)
		SetStore(noStore{}).
		SetMaxResumePubInFlight(64).
		SetOnConnectHandler(c.onConnect).
		SetConnectionLostHandler(c.onLost)
	if opt.TLS != nil {
		po.SetTLSConfig(opt.TLS)
	}
	if dial := batchDialer(opt.Broker); dial != nil {
		po.SetCustomOpenConnectionFn(dial)
	}
	if opt.WillTopic != "" {
		po.SetBinaryWill(opt.WillTopic, opt.WillPayload, 1, true)
	}
	if opt.Once {
		po.SetConnectRetry(false)
	}
	c.c = paho.NewClient(po)
	tok := c.c.Connect() // with ConnectRetry this keeps trying in the background
	if opt.Once {
		// paho bounds the dial, the TLS handshake and the CONNACK each by
		// ConnectTimeout; the wait here only backs that up.
		if !tok.WaitTimeout(3*opt.ConnectTimeout + time.Second) {
			c.Close(0)
			return nil, fmt.Errorf("mqtt: no answer from %s in %v", opt.Broker, 3*opt.ConnectTimeout)
		}
		if err := tok.Error(); err != nil {
			c.Close(0)
			return nil, err
		}
	}
	return c, nil
}

// onConnect runs in its own goroutine on every connect: it subscribes
// again (the session is clean) and only then reports the connection up, so
// a caller that waits for it can rely on the subscriptions.
func (c *Conn) onConnect(pc paho.Client) {
	var refused []string
	defer func() {
		c.mu.Lock()
		c.refused = refused
		c.mu.Unlock()
	}()
	for _, topic := range c.opt.Subscribe {
		tok := pc.Subscribe(topic, 1, c.receive)
		switch {
		case !tok.WaitTimeout(c.opt.ConnectTimeout):
			c.log.Error("mqtt: no answer to subscribe", "topic", topic)
		case tok.Error() != nil:
			c.log.Error("mqtt: subscribe failed", "topic", topic, "err", tok.Error())
		case tok.(*paho.SubscribeToken).Result()[topic] == 0x80:
			// Publishing goes on; only this topic is deaf. A broker ACL
			// that refuses it is a configuration error to fix.
			c.log.Error("mqtt: the broker refused the subscription (check its ACL)", "topic", topic)
			refused = append(refused, topic)
		}
	}
	c.log.Info("mqtt: connected", "broker", c.opt.Broker, "client_id", c.opt.ClientID)
	c.set(true)
}

func (c *Conn) onLost(_ paho.Client, err error) {
	c.log.Warn("mqtt: connection lost; reconnecting", "broker", c.opt.Broker, "err", err)
	c.mu.Lock()
	c.losses++
	c.mu.Unlock()
	c.set(false)
}

func (c *Conn) set(up bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.up == up {
		return
	}
	c.up = up
	close(c.changed)
	c.changed = make(chan struct{})
}

// receive is paho's message handler: it sorts the message into its lane,
// copies it and hands it on, never blocking. A message that finds its lane
// full is dropped.
func (c *Conn) receive(_ paho.Client, m paho.Message) {
	p := m.Payload()
	size := len(p)
	if m.Retained() && c.opt.Retained != nil {
		c.opt.Retained(m.Topic(), size)
		return
	}
	lane, ch := LaneInbox, c.inbox
	if c.opt.Sort != nil {
		switch lane = c.opt.Sort(m.Topic(), p); lane {
		case LaneNone:
			return
		case LanePriority:
			ch = c.priority
		}
	}
	if c.opt.MaxPayload > 0 && len(p) > c.opt.MaxPayload+1 {
		p = p[:c.opt.MaxPayload+1]
	}
	in := InMessage{Topic: m.Topic(), Payload: append([]byte(nil), p...), Size: size}
	select {
	case ch <- in:
	default:
		if c.opt.Lost != nil {
			c.opt.Lost(lane, size)
		}
		if n := c.dropped.Add(1); n&(n-1) == 0 { // log at 1, 2, 4, 8...
			c.log.Warn("mqtt: inbox full, message dropped", "lane", lane, "topic", in.Topic, "dropped", n)
		}
	}
}

// Messages delivers what arrives on the subscribed topics (what Sort puts
// in LaneInbox).
func (c *Conn) Messages() <-chan InMessage { return c.inbox }

// Priority delivers what Sort puts in LanePriority.
func (c *Conn) Priority() <-chan InMessage { return c.priority }

// Dropped counts messages dropped because their lane was full.
func (c *Conn) Dropped() uint64 { return c.dropped.Load() }

// Publish sends a message; see Token.
func (c *Conn) Publish(topic string, qos byte, retained bool, payload []byte) Token {
	return c.c.Publish(topic, qos, retained, payload)
}

// Connection reports whether the connection is up (and subscribed), and a
// channel closed at the next change.
func (c *Conn) Connection() (bool, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.up, c.changed
}

// WaitConnected waits until the connection is up or ctx is done.
func (c *Conn) WaitConnected(ctx context.Context) error {
	for {
		up, ch := c.Connection()
		if up {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("mqtt: no connection to %s: %w", c.opt.Broker, ctx.Err())
		case <-ch:
		}
	}
}

// Close disconnects, giving messages in flight up to wait to go out.
func (c *Conn) Close(wait time.Duration) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	c.c.Disconnect(uint(wait.Milliseconds()))
	c.set(false)
}

// TLSConfig builds the TLS settings for a broker: caFile is the PEM bundle
// that signs the broker's certificate ("" trusts the system's), and
// certFile and keyFile a client certificate, if the broker asks for one.
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("mqtt CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("mqtt CA file %s: no PEM certificate in it", caFile)
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("mqtt client certificate: give both the certificate and its key, or neither")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("mqtt client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// noStore is a paho store that keeps nothing: what was in flight when a
// connection died is published again from the audit trail, by sequence
// number, not resent by paho.
type noStore struct{}

func (noStore) Open()                             {}
func (noStore) Put(string, packets.ControlPacket) {}
func (noStore) Get(string) packets.ControlPacket  { return nil }
func (noStore) All() []string                     { return nil }
func (noStore) Del(string)                        {}
func (noStore) Close()                            {}
func (noStore) Reset()                            {}
