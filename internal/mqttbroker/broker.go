// Package mqttbroker is the MQTT broker tablectl runs inside itself when no
// broker is configured (github.com/mochi-mqtt/server/v2), so a controller,
// a demo or a developer's laptop works with nothing else installed. It
// listens on loopback, over TCP and WebSocket. What a client may read and
// publish depends on its login: the controller (the writer, with a password
// made at start) publishes everything, the logins it is given (the pit) read
// and publish what each lists, and a client without a login reads only the
// public topics. The controller's client id is reserved to the writer, so no
// one can take over its session, and each client may publish only at a
// bounded rate. The WebSocket refuses a browser page from
// an origin not on its list, so a foreign web page cannot use a visitor's
// browser as a client on the table's machine.
//
// Every listener is held to limits (base/netlimit): connections in
// all and per client address, a share of the process's descriptors, and an
// accept loop that waits out a transient error (EMFILE, ECONNABORTED)
// instead of ending as mochi's own TCP listener does, which left the port
// open and the broker deaf until a restart. A connection must send its
// CONNECT within ConnectWithin, and a client's keepalive is held to at most
// MaxKeepalive (0, "none", included), so no idle socket is held for ever.
// A retained publish on a topic of NoRetain (the table's cmd) is refused:
// acknowledged, delivered to no one, kept by no one, and counted.
//
// A hook of its own (retainGuard) keeps a retained message's write apart
// from a wildcard subscription's walk of the retained messages: mochi
// v2.7.9 (the newest) reads a topic node's retainPath in that walk without
// the lock RetainMessage writes it under (topics.go; upstream issue
// mochi-mqtt/server#200, closed, reported it in 2023), a data race that
// failed the controller's test under -race. The guard also sends a retained MQTT 5 will at once,
// not after its delay, and answers a wildcard filter under $SYS without
// retained messages, because mochi writes those with no hook before.
//
// In production the table runs Mosquitto (deploy/mosquitto/) instead.
package mqttbroker

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/base/netlimit"
	"github.com/tablectl/tablectl/internal/oplog"
)

// Options configure the embedded broker.
type Options struct {
	// TCP and WS are the listen addresses ("127.0.0.1:1884"; port 0 picks a
	// free one); "" leaves that listener out.
	TCP, WS string
	// TCPFlag and WSFlag name the flags that choose the addresses, so a
	// taken port can say how to pick another.
	TCPFlag, WSFlag string
	// Writer and WriterPassword are the credentials of the one client that
	// may read and publish on every topic (the controller).
	Writer, WriterPassword string
	// WriterClientID, when set, is reserved to the writer: a connect with
	// it and without the writer's credentials is refused, so that no one
	// takes over the controller's session (and has its last will sent).
	WriterClientID string
	// Logins are the other users the broker knows (the pit, a display),
	// each with what it may read and publish. A known user with a wrong
	// password is refused.
	Logins []Login
	// Anonymous is what a client without a known login may read and
	// publish (the public topics); the zero value is nothing.
	Anonymous Access
	// WSOrigins are the web origins ("http://127.0.0.1:8080") whose pages
	// may open the WebSocket; AllowOrigins adds more once known. A request
	// without an Origin header is not a browser page's, and is let in; a
	// page of any other origin is refused.
	WSOrigins []string
	// MaxPacket bounds one MQTT packet; 0 is 4 MiB.
	MaxPacket uint32
	// ClientLimit bounds how fast each client (by client id) other than
	// the writer may publish; beyond it a message is acknowledged to its
	// publisher and delivered to no one. The zero value is no limit.
	ClientLimit Rate
	// OnLimited hears each message ClientLimit dropped. It must not block.
	OnLimited func(client, topic string, size int)
	// Limits hold each listener (TCP and WebSocket, each its own) to caps
	// on connections; the zero value is no cap (tests). Limits.Budget is
	// shared with the process's other listeners.
	Limits netlimit.Limits
	// ConnectWithin is how long a new connection may take to send its
	// CONNECT before it is closed; 0 is DefaultConnectWithin.
	ConnectWithin time.Duration
	// MaxKeepalive is the longest keepalive a client may have: one that
	// asks for none (0) or more gets this, and is disconnected after one and
	// a half times it without a packet; 0 is DefaultMaxKeepalive.
	MaxKeepalive time.Duration
	// NoRetain are topic filters on which a retained message is refused
	// (the table's cmd: a command left there would be delivered again to
	// every later subscriber). Clearing one (an empty retained message) is
	// let through.
	NoRetain []string
	// OnRetainRefused hears of each retained message NoRetain refused. It
	// must not block.
	OnRetainRefused func(client, topic string, size int)
	// Clock times ClientLimit; nil is the wall clock.
	Clock  clock.Clock
	Logger *slog.Logger
}

// The defaults of ConnectWithin and MaxKeepalive.
const (
	DefaultConnectWithin = 10 * time.Second
	DefaultMaxKeepalive  = 2 * time.Minute
)

// Rate is a token bucket: Burst messages in a row, then one every Every.
type Rate struct {
	Burst int
	Every time.Duration
}

// Access is what a client may do: MQTT topic filters it may read
// (subscribe to and receive) and publish to ("tablectl/T1/public/#").
type Access struct {
	Read, Write []string
}

// Login is a user and password the broker knows, and its access.
type Login struct {
	Username, Password string
	Access
}

// Broker is a running embedded broker.
type Broker struct {
	srv       *mqtt.Server
	tcpAddr   string
	wsAddr    string
	origins   *origins
	listeners []*netlimit.Listener
	closed    atomic.Bool
}

// Listeners are the broker's listeners with their limits and counts.
func (b *Broker) Listeners() []*netlimit.Listener { return b.listeners }

// ErrAddrInUse reports a listen address that is taken.
var ErrAddrInUse = errors.New("address already in use")

// Start starts the broker's listeners. A port already taken is an error
// that names the flag picking another.
func Start(opt Options) (*Broker, error) {
	if opt.TCP == "" && opt.WS == "" {
		return nil, errors.New("embedded MQTT broker: no listener")
	}
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	if opt.MaxPacket == 0 {
		opt.MaxPacket = 4 << 20
	}
	if opt.ConnectWithin <= 0 {
		opt.ConnectWithin = DefaultConnectWithin
	}
	if opt.MaxKeepalive <= 0 {
		opt.MaxKeepalive = DefaultMaxKeepalive
	}
	caps := mqtt.NewDefaultServerCapabilities()
	caps.MaximumPacketSize = opt.MaxPacket
	srv := mqtt.New(&mqtt.Options{
		Capabilities: caps,
		// The broker's own chatter is debug detail for tablectl; a
		// client's bad packet is the client's problem, and no packet is
		// dumped into the log (internal/oplog).
		Logger:                 oplog.Library(log, "mqtt-broker"),
		SysTopicResendInterval: 60,
	})
	if err := srv.AddHook(&accessHook{opt: opt, log: log}, nil); err != nil {
		return nil, fmt.Errorf("embedded MQTT broker: %w", err)
	}
	if opt.ClientLimit.Burst > 0 && opt.ClientLimit.Every > 0 {
		h := &limitHook{opt: opt, clk: clock.Or(opt.Clock), log: log, buckets: map[string]*bucket{}}
		if err := srv.AddHook(h, nil); err != nil {
			return nil, fmt.Errorf("embedded MQTT broker: %w", err)
		}
	}
	// Last: its OnPublish locks for the retained write that follows only
	// if no hook refuses the message after it.
	if err := srv.AddHook(newRetainGuard(), nil); err != nil {
		return nil, fmt.Errorf("embedded MQTT broker: %w", err)
	}
	b := &Broker{srv: srv, origins: &origins{}}
	if err := b.AllowOrigins(opt.WSOrigins...); err != nil {
		return nil, fmt.Errorf("embedded MQTT broker: %w", err)
	}
	if opt.TCP != "" {
		l := &tcpListener{id: "tcp", address: opt.TCP, lim: opt.Limits, connectWithin: opt.ConnectWithin}
		if err := srv.AddListener(l); err != nil {
			srv.Close()
			return nil, listenErr("TCP", opt.TCP, opt.TCPFlag, err)
		}
		b.tcpAddr = l.Address()
		b.listeners = append(b.listeners, l.ln)
	}
	if opt.WS != "" {
		l := &wsListener{id: "ws", address: opt.WS, origins: b.origins, lim: opt.Limits, connectWithin: opt.ConnectWithin}
		if err := srv.AddListener(l); err != nil {
			srv.Close()
			return nil, listenErr("WebSocket", opt.WS, opt.WSFlag, err)
		}
		b.wsAddr = l.Address()
		b.listeners = append(b.listeners, l.ln)
	}
	if err := srv.Serve(); err != nil {
		srv.Close()
		return nil, fmt.Errorf("embedded MQTT broker: %w", err)
	}
	return b, nil
}

func listenErr(what, addr, flag string, err error) error {
	if flag == "" {
		flag = "the listen address"
	}
	if isAddrInUse(err) {
		return fmt.Errorf("embedded MQTT broker: %s listener: %s is already in use (%w); pick another address with %s", what, addr, ErrAddrInUse, flag)
	}
	return fmt.Errorf("embedded MQTT broker: %s listener on %s: %w (set it with %s)", what, addr, err, flag)
}

// TCPAddr is the TCP listener's address, "" without one.
func (b *Broker) TCPAddr() string { return b.tcpAddr }

// WSAddr is the WebSocket listener's address, "" without one.
func (b *Broker) WSAddr() string { return b.wsAddr }

// URL is the broker's TCP address as paho takes it ("tcp://127.0.0.1:1884").
func (b *Broker) URL() string {
	if b.tcpAddr == "" {
		return ""
	}
	return "tcp://" + b.tcpAddr
}

// WSURL is the WebSocket address as a browser client takes it.
func (b *Broker) WSURL() string {
	if b.wsAddr == "" {
		return ""
	}
	return "ws://" + b.wsAddr + "/mqtt"
}

// AllowOrigins lets pages of these web origins open the WebSocket (the
// controller's web display, known once its HTTP listener is up). An origin
// is scheme://host[:port], as a browser sends it.
func (b *Broker) AllowOrigins(origin ...string) error {
	var errs []error
	for _, o := range origin {
		n, err := NormalizeOrigin(o)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		b.origins.add(n)
	}
	return errors.Join(errs...)
}

// NormalizeOrigin checks a web origin and puts it in the form browsers
// send: lower-case scheme and host, no default port, no path.
func NormalizeOrigin(o string) (string, error) {
	u, err := url.Parse(o)
	if err != nil {
		return "", fmt.Errorf("web origin %q: %w", o, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("web origin %q: want http(s)://host[:port], nothing after", o)
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	if p := u.Port(); scheme == "http" && p == "80" || scheme == "https" && p == "443" {
		host = strings.ToLower(u.Hostname())
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
	}
	return scheme + "://" + host, nil
}

// origins is the WebSocket's list of allowed web origins.
type origins struct {
	mu sync.Mutex
	ok map[string]bool
}

func (o *origins) add(origin string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ok == nil {
		o.ok = map[string]bool{}
	}
	o.ok[origin] = true
}

// allowed reports whether a WebSocket request may be upgraded: no Origin
// header (not a browser page), or an origin on the list.
func (o *origins) allowed(r *http.Request) bool {
	h, ok := r.Header["Origin"]
	if !ok || len(h) == 0 {
		return true
	}
	if len(h) != 1 {
		return false
	}
	n, err := NormalizeOrigin(h[0])
	if err != nil {
		return false // "null" (a sandboxed or file page) among others
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ok[n]
}

// Close disconnects every client and stops the listeners.
func (b *Broker) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	return b.srv.Close()
}

// accessHook authenticates clients and checks every subscription,
// delivery and publish against their access.
type accessHook struct {
	mqtt.HookBase
	opt Options
	log *slog.Logger
}

func (h *accessHook) ID() string { return "tablectl-access" }

func (h *accessHook) Provides(b byte) bool {
	switch b {
	case mqtt.OnConnect, mqtt.OnConnectAuthenticate, mqtt.OnACLCheck, mqtt.OnPublish:
		return true
	}
	return false
}

// OnConnect holds the client's keepalive to MaxKeepalive (an MQTT 5
// client is told; a 3.1.1 client that asked for none is disconnected
// after one and a half times it without a packet), and takes the retain
// flag off a will on a NoRetain topic.
func (h *accessHook) OnConnect(cl *mqtt.Client, _ packets.Packet) error {
	maxKA := uint16(min(h.opt.MaxKeepalive/time.Second, 65535))
	if maxKA > 0 && (cl.State.Keepalive == 0 || cl.State.Keepalive > maxKA) {
		cl.State.Keepalive = maxKA
		cl.State.ServerKeepalive = true
	}
	if w := &cl.Properties.Will; w.Retain && h.noRetain(w.TopicName) {
		w.Retain = false
		h.log.Warn("mqtt broker: a retained will on a topic that keeps nothing; it will not be retained", "client", cl.ID, "topic", w.TopicName)
	}
	return nil
}

// noRetain reports a topic on which nothing may be retained.
func (h *accessHook) noRetain(topic string) bool {
	return slices.ContainsFunc(h.opt.NoRetain, func(f string) bool { return matches(f, topic) })
}

// OnPublish refuses a retained message on a NoRetain topic: acknowledged
// (CodeSuccessIgnore), so the publisher is not held up, and neither
// delivered nor retained. An empty one, which clears what is retained, is
// let through.
func (h *accessHook) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if !pk.FixedHeader.Retain || len(pk.Payload) == 0 || !h.noRetain(pk.TopicName) {
		return pk, nil
	}
	h.log.Warn("mqtt broker: a retained message refused on a topic that keeps nothing", "client", cl.ID, "topic", pk.TopicName, "bytes", len(pk.Payload))
	if h.opt.OnRetainRefused != nil {
		h.opt.OnRetainRefused(cl.ID, pk.TopicName, len(pk.Payload))
	}
	return pk, packets.CodeSuccessIgnore
}

// isWriter reports whether a connect carries the writer's credentials.
func (h *accessHook) isWriter(user, pass []byte) bool {
	return h.opt.Writer != "" && h.opt.WriterPassword != "" && string(user) == h.opt.Writer &&
		subtle.ConstantTimeCompare(pass, []byte(h.opt.WriterPassword)) == 1
}

func (h *accessHook) OnConnectAuthenticate(cl *mqtt.Client, pk packets.Packet) bool {
	user, pass := pk.Connect.Username, pk.Connect.Password
	writer := h.isWriter(user, pass)
	if h.opt.WriterClientID != "" && pk.Connect.ClientIdentifier == h.opt.WriterClientID && !writer {
		h.log.Warn("refused a connect with the controller's client id", "remote", remote(cl))
		return false
	}
	if h.opt.Writer != "" && string(user) == h.opt.Writer {
		return writer
	}
	if l, ok := h.login(user); ok {
		return l.Password != "" && subtle.ConstantTimeCompare(pass, []byte(l.Password)) == 1
	}
	return true // anonymous, or a name the broker does not know: the public's access
}

// login is the known login of a username.
func (h *accessHook) login(user []byte) (Login, bool) {
	if len(user) == 0 {
		return Login{}, false
	}
	i := slices.IndexFunc(h.opt.Logins, func(l Login) bool { return l.Username == string(user) })
	if i < 0 {
		return Login{}, false
	}
	return h.opt.Logins[i], true
}

// access is what an authenticated client may do, by its username (the
// connect was checked, so the name stands for its login).
func (h *accessHook) access(cl *mqtt.Client) (all bool, a Access) {
	user := cl.Properties.Username
	if h.opt.Writer != "" && bytes.Equal(user, []byte(h.opt.Writer)) {
		return true, Access{}
	}
	if l, ok := h.login(user); ok {
		return false, l.Access
	}
	return false, h.opt.Anonymous
}

func (h *accessHook) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool {
	all, a := h.access(cl)
	if all {
		return true
	}
	filters := a.Read
	if write {
		filters = a.Write
	}
	return slices.ContainsFunc(filters, func(f string) bool { return matches(f, topic) })
}

// limitHook holds each client but the writer to Options.ClientLimit.
type limitHook struct {
	mqtt.HookBase
	opt Options
	clk clock.Clock
	log *slog.Logger

	mu      sync.Mutex
	buckets map[string]*bucket // by client id, while connected
	limited uint64
}

type bucket struct {
	tokens float64
	last   time.Time
}

func (h *limitHook) ID() string { return "tablectl-client-limit" }

func (h *limitHook) Provides(b byte) bool { return b == mqtt.OnPublish || b == mqtt.OnDisconnect }

// OnPublish lets a message through while its client has a token, and
// otherwise acknowledges it without delivering it (CodeSuccessIgnore), so
// the publisher is not held up and nothing waits in the broker.
func (h *limitHook) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if h.opt.Writer != "" && bytes.Equal(cl.Properties.Username, []byte(h.opt.Writer)) {
		return pk, nil
	}
	now := h.clk.Now()
	r := h.opt.ClientLimit
	h.mu.Lock()
	b, ok := h.buckets[cl.ID]
	if !ok {
		b = &bucket{tokens: float64(r.Burst), last: now}
		h.buckets[cl.ID] = b
	}
	if now.After(b.last) { // a clock stepped back gives nothing
		b.tokens = min(float64(r.Burst), b.tokens+float64(now.Sub(b.last))/float64(r.Every))
		b.last = now
	}
	pass := b.tokens >= 1
	if pass {
		b.tokens--
	} else {
		h.limited++
	}
	n := h.limited
	h.mu.Unlock()
	if pass {
		return pk, nil
	}
	if n&(n-1) == 0 { // log at 1, 2, 4, 8...
		h.log.Warn("mqtt broker: a client publishes too fast; message dropped",
			"client", cl.ID, "topic", pk.TopicName, "burst", r.Burst, "every", r.Every, "dropped", n)
	}
	if h.opt.OnLimited != nil {
		h.opt.OnLimited(cl.ID, pk.TopicName, len(pk.Payload))
	}
	return pk, packets.CodeSuccessIgnore
}

// OnDisconnect forgets the client's bucket.
func (h *limitHook) OnDisconnect(cl *mqtt.Client, _ error, _ bool) {
	h.mu.Lock()
	delete(h.buckets, cl.ID)
	h.mu.Unlock()
}

func remote(cl *mqtt.Client) string {
	if cl == nil {
		return ""
	}
	return cl.Net.Remote
}

// matches reports whether an MQTT topic filter matches a topic name. On a
// subscription the "name" is the client's filter, whose + and # match only
// a + or # of ours, so a wildcard subscription is let in only when every
// topic it could match is.
func matches(filter, topic string) bool {
	fs, ts := strings.Split(filter, "/"), strings.Split(topic, "/")
	for i, f := range fs {
		switch {
		case f == "#":
			return true
		case i >= len(ts):
			return false
		case f != "+" && f != ts[i]:
			return false
		}
	}
	return len(fs) == len(ts)
}

// tcpListener serves MQTT over TCP, as mochi's listeners.TCP does but
// held to netlimit's limits: its accept loop waits out a transient error
// rather than ending, and a connection must send its CONNECT within
// connectWithin.
type tcpListener struct {
	id, address   string
	lim           netlimit.Limits
	connectWithin time.Duration
	ln            *netlimit.Listener
	log           *slog.Logger
	once          sync.Once
	end           atomic.Bool
}

func (l *tcpListener) ID() string       { return l.id }
func (l *tcpListener) Protocol() string { return "tcp" }
func (l *tcpListener) Address() string {
	if l.ln != nil {
		return l.ln.Addr().String()
	}
	return l.address
}

func (l *tcpListener) Init(log *slog.Logger) error {
	l.log = log
	ln, err := netlimit.Listen(l.address, "mqtt tcp", l.lim, log)
	if err != nil {
		return err
	}
	l.ln = ln
	return nil
}

// Serve accepts until the listener is closed (netlimit's Accept returns an
// error only then).
func (l *tcpListener) Serve(establish listeners.EstablishFn) {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if !l.end.Load() {
				l.log.Error("mqtt tcp listener stopped", "err", err)
			}
			return
		}
		if l.end.Load() {
			c.Close()
			return
		}
		// mochi reads the CONNECT with no deadline of its own; once it has
		// it, the client's keepalive sets the next.
		c.SetReadDeadline(time.Now().Add(l.connectWithin))
		go func() {
			if err := establish(l.id, c); err != nil {
				l.log.Debug("mqtt tcp client", "err", err)
			}
		}()
	}
}

func (l *tcpListener) Close(closeClients listeners.CloseFn) {
	l.once.Do(func() {
		l.end.Store(true)
		closeClients(l.id)
		if l.ln != nil {
			l.ln.Close()
		}
	})
}

// wsListener serves MQTT over WebSocket. Unlike mochi's own, it binds its
// port in Init, so a taken port is an error at start, and port 0 works.
type wsListener struct {
	id, address   string
	lim           netlimit.Limits
	connectWithin time.Duration
	ln            *netlimit.Listener
	srv           *http.Server
	log           *slog.Logger
	once          sync.Once
	upgrader      websocket.Upgrader
	origins       *origins

	mu          sync.Mutex
	establishFn listeners.EstablishFn
}

func (l *wsListener) ID() string       { return l.id }
func (l *wsListener) Protocol() string { return "ws" }
func (l *wsListener) Address() string {
	if l.ln != nil {
		return l.ln.Addr().String()
	}
	return l.address
}

func (l *wsListener) Init(log *slog.Logger) error {
	l.log = log
	ln, err := netlimit.Listen(l.address, "mqtt websocket", l.lim, log)
	if err != nil {
		return err
	}
	l.ln = ln
	l.upgrader = websocket.Upgrader{
		Subprotocols: []string{"mqtt"},
		// A browser lets any page it shows open a WebSocket to the table's
		// machine: only the controller's own web display and the configured
		// origins may.
		CheckOrigin: l.origins.allowed,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c, err := l.upgrader.Upgrade(w, r, nil)
		if err != nil {
			l.log.Warn("websocket refused", "origin", r.Header.Get("Origin"), "remote", r.RemoteAddr, "err", err)
			return
		}
		defer c.Close()
		// The HTTP server's deadlines stay on a hijacked connection: the
		// CONNECT's is ours, then the client's keepalive (mochi's).
		nc := c.UnderlyingConn()
		nc.SetWriteDeadline(time.Time{})
		nc.SetReadDeadline(time.Now().Add(l.connectWithin))
		if err := l.establish(l.id, &wsConn{Conn: nc, c: c}); err != nil {
			l.log.Debug("websocket client", "err", err)
		}
	})
	// Made here, not in Serve, so Close never races with Serve.
	l.srv = netlimit.Server(mux)
	return nil
}

func (l *wsListener) Serve(establish listeners.EstablishFn) {
	l.mu.Lock()
	l.establishFn = establish
	l.mu.Unlock()
	if err := l.srv.Serve(l.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		l.log.Error("websocket listener stopped", "err", err)
	}
}

func (l *wsListener) establish(id string, c net.Conn) error {
	l.mu.Lock()
	f := l.establishFn
	l.mu.Unlock()
	if f == nil {
		c.Close()
		return errors.New("websocket listener not serving yet")
	}
	return f(id, c)
}

func (l *wsListener) Close(closeClients listeners.CloseFn) {
	l.once.Do(func() {
		closeClients(l.id)
		if l.srv != nil {
			l.srv.Close()
		}
		if l.ln != nil {
			l.ln.Close()
		}
	})
}

// wsConn carries MQTT bytes in binary WebSocket messages.
type wsConn struct {
	net.Conn
	c *websocket.Conn
	r io.Reader
}

func (ws *wsConn) Read(p []byte) (int, error) {
	for {
		if ws.r == nil {
			op, r, err := ws.c.NextReader()
			if err != nil {
				return 0, err
			}
			if op != websocket.BinaryMessage {
				return 0, errors.New("websocket: MQTT needs binary messages")
			}
			ws.r = r
		}
		n, err := ws.r.Read(p)
		if errors.Is(err, io.EOF) {
			ws.r = nil
			if n == 0 {
				continue
			}
			return n, nil
		}
		return n, err
	}
}

func (ws *wsConn) Write(p []byte) (int, error) {
	if err := ws.c.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (ws *wsConn) Close() error { return ws.c.Close() }
