// Package netlimit holds a listener to limits, so that no client can
// starve the process it serves: a cap on the connections open at once
// through the listener, one on those from a single client address, and a
// budget of file descriptors shared by every listener of the process, below
// the process's limit by a reserve that its own files (the audit trail's
// segments) keep for themselves. A connection beyond a limit is closed as
// soon as it is accepted, so the kernel's queue never fills with clients
// waiting for a slot and a legitimate client gets its answer (a closed
// connection) at once.
//
// Accept never gives up on a transient error: a process out of descriptors
// (EMFILE, ENFILE), a connection reset before it was accepted
// (ECONNABORTED), or the kernel short of memory (ENOBUFS, ENOMEM) makes it
// wait (5 ms, doubling up to 1 s) and try again; it returns only once the
// listener is closed. A library's own accept loop that ends on its first
// error (mochi-mqtt's TCP listener does) is given this listener instead.
//
// Timeouts are the server's business (an http.Server's, or the MQTT
// broker's keepalive), not this package's: Server gives an http.Server the
// timeouts every listener of tablectl uses.
package netlimit

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Limits bound what one listener accepts. A zero field is no cap.
type Limits struct {
	// Total is how many connections may be open at once through the
	// listener.
	Total int
	// PerClient is how many of them may come from one client address (IP).
	PerClient int
	// Budget, when set, is the descriptors the listeners of a process share
	// (NewBudget); a connection takes one for as long as it is open.
	Budget *Budget
}

// Reasons a connection is refused, as Stats counts them.
const (
	RefusedTotal     = "total"      // the listener's Total was reached
	RefusedPerClient = "per_client" // the client's address holds PerClient
	RefusedBudget    = "budget"     // the process's descriptor budget is spent
)

// Budget is the file descriptors that clients of every listener of a
// process may hold together.
type Budget struct {
	mu   sync.Mutex
	max  int
	used int
}

// NewBudget makes a budget of max descriptors.
func NewBudget(max int) *Budget { return &Budget{max: max} }

// Max is the budget's size.
func (b *Budget) Max() int { return b.max }

// Used is how many of the budget's descriptors clients hold now.
func (b *Budget) Used() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

func (b *Budget) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used >= b.max {
		return false
	}
	b.used++
	return true
}

func (b *Budget) release() {
	b.mu.Lock()
	b.used--
	b.mu.Unlock()
}

// Listener is a net.Listener held to Limits. Its Accept returns only
// connections within the limits, and an error only once it is closed.
type Listener struct {
	net.Listener
	name string
	lim  Limits
	log  *slog.Logger

	mu       sync.Mutex
	open     int
	byClient map[string]int

	refused      [3]atomic.Uint64 // by reason: total, per client, budget
	acceptErrors atomic.Uint64
	closed       atomic.Bool
}

// Wrap holds ln to lim. name says which listener it is in logs ("http",
// "mqtt tcp"); log may be nil.
func Wrap(ln net.Listener, name string, lim Limits, log *slog.Logger) *Listener {
	if log == nil {
		log = slog.Default()
	}
	return &Listener{Listener: ln, name: name, lim: lim, log: log, byClient: map[string]int{}}
}

// Listen listens on the TCP address addr and holds it to lim.
func Listen(addr, name string, lim Limits, log *slog.Logger) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return Wrap(ln, name, lim, log), nil
}

// Backoff bounds the waits after a transient accept error.
const (
	backoffMin = 5 * time.Millisecond
	backoffMax = time.Second
)

// Accept waits for the next connection within the limits. Connections
// beyond them are closed at once and counted; a transient error is waited
// out and logged (at the first of a run, then with the run's count every
// ten seconds). It returns an error only once the listener is closed.
func (l *Listener) Accept() (net.Conn, error) {
	var wait time.Duration
	var run uint64
	var lastLog time.Time
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if l.closed.Load() || errors.Is(err, net.ErrClosed) {
				return nil, err
			}
			// Every other error is waited out: a listener that returned
			// would leave its port open and its clients unanswered.
			l.acceptErrors.Add(1)
			run++
			wait = min(max(2*wait, backoffMin), backoffMax)
			if now := time.Now(); run == 1 || now.Sub(lastLog) >= 10*time.Second {
				lastLog = now
				l.log.Warn("listener: accept failed; waiting, then accepting again", "name", l.name, "err", err,
					"transient", Transient(err), "retry_in", wait, "errors_in_a_row", run)
			}
			time.Sleep(wait)
			continue
		}
		if run > 0 {
			l.log.Info("listener: accepting again", "name", l.name, "errors_in_a_row", run)
			wait, run = 0, 0
		}
		if lc, ok := l.admit(c); ok {
			return lc, nil
		}
	}
}

// admit counts c in, or closes it when it would break a limit.
func (l *Listener) admit(c net.Conn) (net.Conn, bool) {
	client := clientOf(c.RemoteAddr())
	l.mu.Lock()
	reason := ""
	switch {
	case l.lim.Total > 0 && l.open >= l.lim.Total:
		reason = RefusedTotal
	case l.lim.PerClient > 0 && l.byClient[client] >= l.lim.PerClient:
		reason = RefusedPerClient
	case l.lim.Budget != nil && !l.lim.Budget.take():
		reason = RefusedBudget
	}
	if reason == "" {
		l.open++
		l.byClient[client]++
	}
	open := l.open
	l.mu.Unlock()
	if reason != "" {
		c.Close()
		n := l.refused[reasonIndex(reason)].Add(1)
		if n&(n-1) == 0 { // log at 1, 2, 4, 8...
			l.log.Warn("listener: connection refused at its limit", "name", l.name, "client", client, "limit", reason,
				"total", l.lim.Total, "per_client", l.lim.PerClient, "open", open, "refused", n)
		}
		return nil, false
	}
	return &conn{Conn: c, l: l, client: client}, true
}

func (l *Listener) release(client string) {
	l.mu.Lock()
	l.open--
	if l.byClient[client]--; l.byClient[client] <= 0 {
		delete(l.byClient, client)
	}
	l.mu.Unlock()
	if l.lim.Budget != nil {
		l.lim.Budget.release()
	}
}

// Close closes the listener; connections accepted stay open.
func (l *Listener) Close() error {
	l.closed.Store(true)
	return l.Listener.Close()
}

// Stats are a listener's counts.
type Stats struct {
	Open int
	// Refused counts connections closed at a limit, by reason (RefusedTotal,
	// RefusedPerClient, RefusedBudget).
	Refused map[string]uint64
	// AcceptErrors counts failed accepts, each waited out.
	AcceptErrors uint64
}

// Stats reads the listener's counts.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	open := l.open
	l.mu.Unlock()
	s := Stats{Open: open, AcceptErrors: l.acceptErrors.Load(), Refused: map[string]uint64{}}
	for _, r := range []string{RefusedTotal, RefusedPerClient, RefusedBudget} {
		s.Refused[r] = l.refused[reasonIndex(r)].Load()
	}
	return s
}

// Name is the listener's name.
func (l *Listener) Name() string { return l.name }

func reasonIndex(r string) int {
	switch r {
	case RefusedTotal:
		return 0
	case RefusedPerClient:
		return 1
	}
	return 2
}

// clientOf is the client's address as the per-client cap counts it: its
// IP, IPv4 in dotted form even when it came mapped into IPv6.
func clientOf(a net.Addr) string {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.String()
	case nil:
		return ""
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// conn gives its slot back once, when it is closed.
type conn struct {
	net.Conn
	l      *Listener
	client string
	once   sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.client) })
	return err
}

// Transient reports an accept error that passes: descriptors or memory
// short for a moment, or a client gone before it was accepted.
func Transient(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ECONNABORTED, syscall.ENOBUFS, syscall.ENOMEM, syscall.EAGAIN, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// The timeouts of every HTTP server tablectl runs. A client that opens a
// connection and sends nothing is closed after ReadHeaderTimeout; one that
// trickles a request, after ReadTimeout; one idle between requests, after
// IdleTimeout; a response the client does not read, after WriteTimeout.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 30 * time.Second
	WriteTimeout      = 2 * time.Minute
	IdleTimeout       = time.Minute
	MaxHeaderBytes    = 64 << 10
)

// Server is an http.Server for h with tablectl's timeouts and header size.
func Server(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: ReadHeaderTimeout, ReadTimeout: ReadTimeout,
		WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout, MaxHeaderBytes: MaxHeaderBytes}
}

// String describes the limits, for logs.
func (lim Limits) String() string {
	s := fmt.Sprintf("total %d, per client %d", lim.Total, lim.PerClient)
	if lim.Budget != nil {
		s += fmt.Sprintf(", descriptor budget %d", lim.Budget.Max())
	}
	return s
}
