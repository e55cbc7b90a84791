package device

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tablectl/tablectl/base/clock"

	"go.bug.st/serial"
)

// State is what a Link knows of its port.
type State uint8

// The states of a Link.
const (
	Disconnected State = iota + 1 // not open: failed to open, hung up, or stopped
	Connected                     // open, and bytes arrived within the silence window
	Silent                        // open, but no byte for the silence window
)

// String names the state: "connected", "disconnected" or "silent".
func (s State) String() string {
	switch s {
	case Disconnected:
		return "disconnected"
	case Connected:
		return "connected"
	case Silent:
		return "silent"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// MarshalText writes the state's name.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// ErrHangup reports that the port hung up under a read: the adapter was
// unplugged, or a pseudo-terminal's master side closed.
var ErrHangup = errors.New("port hung up")

// ErrStopped is the reason in the last status a Link reports, when Run's
// context ends.
var ErrStopped = errors.New("link stopped")

// Status is a Link's state, as reported to OnState.
type Status struct {
	State State
	// Port is the device opened or tried; empty when a USB id resolved to
	// no single port.
	Port string
	// Err says why the port is Disconnected.
	Err error
	// Since is when the Link entered this status, by its Clock.
	Since time.Time
	// Retry is how long a Disconnected Link waits before the next attempt
	// (zero once stopped).
	Retry time.Duration
}

// Stats count what a Link has done since it was made.
type Stats struct {
	Opens        uint64 `json:"opens"`         // successful opens
	OpenFailures uint64 `json:"open_failures"` // failed attempts, including USB ids that resolved to no single port
	Disconnects  uint64 `json:"disconnects"`   // open sessions that ended other than by stopping
	Bytes        uint64 `json:"bytes"`         // bytes delivered to OnData
	Silences     uint64 `json:"silences"`      // times the port went Silent
	Stalls       uint64 `json:"stalls"`        // times the reader waited StallAfter on a full queue
}

// Options are a Link's consumer and test seams; only OnData is required.
type Options struct {
	// OnData receives the bytes read, in order; p is the callee's to keep.
	// What was read while the call before ran comes in one call (up to
	// 8 KiB), so a consumer that falls behind catches up in larger steps.
	OnData func(p []byte)
	// OnState receives each change of status: a new State, or a new reason
	// for being Disconnected (retries for the same reason are not
	// repeated). The last call, when Run ends, is Disconnected with
	// ErrStopped.
	OnState func(Status)
	// Clock defaults to the wall clock.
	Clock clock.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Lister finds ports by USB id; it defaults to ListPorts.
	Lister Lister
	// QueueLen is how many read chunks may wait for OnData (default 64).
	QueueLen int
	// StallAfter is how long the reader waits on a full queue before it
	// warns (default 1s).
	StallAfter time.Duration
}

// Defaults for Options.
const (
	DefaultQueueLen   = 64
	DefaultStallAfter = time.Second
)

const (
	// readPoll is the read timeout: how soon the reader notices it should
	// stop. It is not a silence window.
	readPoll = 200 * time.Millisecond
	// readSize is the largest chunk read at once: well over what a shoe
	// sends between two reads at 9600 baud.
	readSize = 512
	// maxDeliver bounds what one OnData call gathers of the chunks that
	// queued while the one before ran.
	maxDeliver = 16 * readSize
)

// port is what a Link needs of a serial port; serial.Port has it.
type port interface {
	io.ReadCloser
	SetReadTimeout(time.Duration) error
}

// Link keeps the shoe's serial port open and its bytes flowing; see the
// package comment for its policies. Make one with NewLink and call Run.
type Link struct {
	cfg         Config
	mode        *serial.Mode
	silentAfter time.Duration // 0: silence detection off
	backoffMin  time.Duration
	backoffMax  time.Duration

	onData     func([]byte)
	onState    func(Status)
	clock      clock.Clock
	log        *slog.Logger
	lister     Lister
	queueLen   int
	stallAfter time.Duration
	openPort   func(name string, mode *serial.Mode) (port, error) // a seam for tests

	running atomic.Bool

	mu     sync.Mutex
	status Status

	opens, openFailures, disconnects, bytes, silences, stalls atomic.Uint64
}

// NewLink checks cfg and returns a Link that will run the port it names.
func NewLink(cfg Config, opts Options) (*Link, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.OnData == nil {
		return nil, errors.New("device: Options.OnData is required")
	}
	if opts.QueueLen < 0 || opts.StallAfter < 0 {
		return nil, fmt.Errorf("device: negative QueueLen %d or StallAfter %s", opts.QueueLen, opts.StallAfter)
	}
	cfg = cfg.WithDefaults()
	l := &Link{
		cfg:        cfg,
		mode:       cfg.mode(),
		backoffMin: time.Duration(cfg.BackoffMin),
		backoffMax: time.Duration(cfg.BackoffMax),
		onData:     opts.OnData,
		onState:    opts.OnState,
		clock:      clock.Or(opts.Clock),
		log:        opts.Logger,
		lister:     opts.Lister,
		queueLen:   opts.QueueLen,
		stallAfter: opts.StallAfter,
		openPort: func(name string, mode *serial.Mode) (port, error) {
			p, err := serial.Open(name, mode)
			if err != nil {
				return nil, err
			}
			return p, nil
		},
	}
	if cfg.SilentAfter != Off {
		l.silentAfter = time.Duration(cfg.SilentAfter)
	}
	if l.onState == nil {
		l.onState = func(Status) {}
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.lister == nil {
		l.lister = ListPorts
	}
	if l.queueLen == 0 {
		l.queueLen = DefaultQueueLen
	}
	if l.stallAfter == 0 {
		l.stallAfter = DefaultStallAfter
	}
	return l, nil
}

// Status returns the last status reported; its State is zero before Run
// has tried the port.
func (l *Link) Status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.status
}

// Stats returns the Link's counters.
func (l *Link) Stats() Stats {
	return Stats{
		Opens:        l.opens.Load(),
		OpenFailures: l.openFailures.Load(),
		Disconnects:  l.disconnects.Load(),
		Bytes:        l.bytes.Load(),
		Silences:     l.silences.Load(),
		Stalls:       l.stalls.Load(),
	}
}

// Run opens the port and keeps it open until ctx is done, then closes it and
// returns ctx.Err(). The port is closed and the reader goroutine has
// finished when it returns. A Link runs once at a time; it may be run
// again after Run returns.
func (l *Link) Run(ctx context.Context) error {
	if !l.running.CompareAndSwap(false, true) {
		return errors.New("device: Link.Run is already running")
	}
	defer l.running.Store(false)

	failures := 0
	for ctx.Err() == nil {
		name, p, err := l.open()
		if err != nil {
			l.openFailures.Add(1)
		} else {
			var delivered bool
			delivered, err = l.session(ctx, name, p)
			if ctx.Err() != nil {
				break
			}
			l.disconnects.Add(1)
			if delivered {
				failures = 0
			}
		}
		delay := l.backoff(failures)
		failures++
		l.report(Status{State: Disconnected, Port: name, Err: err, Retry: delay})
		l.log.Debug("shoe port retry scheduled", "port", name, "in", delay, "failures", failures, "err", err)
		t := l.clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C():
		}
	}
	l.report(Status{State: Disconnected, Port: l.Status().Port, Err: fmt.Errorf("%w: %w", ErrStopped, context.Cause(ctx))})
	return ctx.Err()
}

// backoff is the wait after the given number of consecutive failures, less
// one: BackoffMin doubled that many times, at most BackoffMax.
func (l *Link) backoff(failures int) time.Duration {
	d := l.backoffMin
	for i := 0; i < failures && d < l.backoffMax; i++ {
		d *= 2
	}
	return min(d, l.backoffMax)
}

// open resolves the configured port and opens it.
func (l *Link) open() (string, port, error) {
	name := l.cfg.Path
	if l.cfg.USB != nil {
		ports, err := l.lister()
		if err != nil {
			return "", nil, err
		}
		if name, err = Resolve(*l.cfg.USB, ports); err != nil {
			return "", nil, err
		}
	}
	p, err := l.openPort(name, l.mode)
	if err != nil {
		return name, nil, fmt.Errorf("open %s: %w", name, err)
	}
	if err := p.SetReadTimeout(readPoll); err != nil {
		p.Close()
		return name, nil, fmt.Errorf("set read timeout on %s: %w", name, err)
	}
	return name, p, nil
}

// chunk is one read: bytes, or the error that ended the reading.
type chunk struct {
	data []byte
	err  error
}

// session runs an open port until it fails or ctx is done, and closes it.
// It reports whether any byte was delivered.
func (l *Link) session(ctx context.Context, name string, p port) (delivered bool, err error) {
	l.opens.Add(1)
	attrs := []any{"port", name}
	if target, lerr := filepath.EvalSymlinks(name); lerr == nil && target != name {
		attrs = append(attrs, "device", target)
	}
	l.report(Status{State: Connected, Port: name}, attrs...)

	q := make(chan chunk, l.queueLen)
	stop := make(chan struct{})
	done := make(chan struct{})
	go l.read(name, p, q, stop, done)
	defer func() {
		// The reader must be out of Read before Close: the library closes
		// the fd before waking a pending Read, so a reused fd number could
		// otherwise be read by a reader that outlived its port.
		close(stop)
		<-done
		if err := p.Close(); err != nil {
			l.log.Warn("closing shoe port", "port", name, "err", err)
		}
	}()

	var timer clock.Timer
	var silence <-chan time.Time
	if l.silentAfter > 0 {
		timer = l.clock.NewTimer(l.silentAfter)
		defer timer.Stop()
		silence = timer.C()
	}
	state := Connected
	for {
		select {
		case <-ctx.Done():
			return delivered, ctx.Err()
		case c := <-q:
			if c.err != nil {
				return delivered, c.err
			}
			// What queued while OnData was busy goes in one call (the
			// controller commits one call's sentences in one transaction):
			// a consumer that falls behind catches up in larger steps.
			data, err := c.data, error(nil)
		more:
			for len(data) < maxDeliver {
				select {
				case m := <-q:
					if m.err != nil {
						err = m.err
						break more
					}
					data = append(data, m.data...)
				default:
					break more
				}
			}
			delivered = true
			l.bytes.Add(uint64(len(data)))
			if timer != nil {
				timer.Reset(l.silentAfter)
			}
			if state == Silent {
				state = Connected
				l.report(Status{State: Connected, Port: name})
			}
			l.onData(data)
			if err != nil {
				return delivered, err
			}
		case <-silence:
			state = Silent
			l.silences.Add(1)
			l.report(Status{State: Silent, Port: name}, "port", name, "quiet_for", l.silentAfter)
		}
	}
}

// read runs in its own goroutine for one session: it reads until the port
// fails or stop is closed, and queues what it reads in order, the error
// last.
func (l *Link) read(name string, p port, q chan<- chunk, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	buf := make([]byte, readSize)
	for {
		select {
		case <-stop:
			return
		default:
		}
		n, err := p.Read(buf)
		if n > 0 {
			if !l.deliver(name, q, chunk{data: bytes.Clone(buf[:n])}, stop) {
				return
			}
			// The session's goroutine, just made runnable, waits in this
			// processor's queue while this one blocks in the next Read (a
			// system call, not the network poller): on a busy machine until
			// another processor is free or the runtime takes this one back,
			// tens of microseconds to milliseconds of a card's time. Let it
			// run now; the next Read waits its turn, the bytes in the port.
			// Only when the session was waiting: a send to a goroutine
			// waiting on the channel hands the chunk over directly and
			// leaves the queue empty; a session busy with an earlier
			// call finds this chunk queued, with whatever else queues
			// meanwhile, in its next call.
			if len(q) == 0 {
				runtime.Gosched()
			}
		}
		if err != nil {
			var pe *serial.PortError
			if errors.As(err, &pe) && pe.Code() == serial.PortClosed || errors.Is(err, syscall.EIO) {
				// Only the reader's own session closes the port, and only
				// after the reader has gone, so this is the device's doing.
				// Linux reports a vanished adapter or a closed pty master
				// either as a zero-length read (PortClosed) or as EIO,
				// depending on where the read was when it went.
				err = fmt.Errorf("read %s: %w: %w", name, ErrHangup, err)
			} else {
				err = fmt.Errorf("read %s: %w", name, err)
			}
			l.deliver(name, q, chunk{err: err}, stop)
			return
		}
		// n == 0 and no error is the read timeout expiring (go.bug.st/serial
		// says so with (0, nil)), not end of file: read again.
	}
}

// deliver queues c, waiting while the queue is full, warning once the wait
// reaches stallAfter. It returns false if the session stopped first.
func (l *Link) deliver(name string, q chan<- chunk, c chunk, stop <-chan struct{}) bool {
	select {
	case q <- c:
		return true
	case <-stop:
		return false
	default:
	}
	t := l.clock.NewTimer(l.stallAfter)
	select {
	case q <- c:
		t.Stop()
		return true
	case <-stop:
		t.Stop()
		return false
	case <-t.C():
	}
	l.stalls.Add(1)
	l.log.Warn("shoe data consumer stalled: reading paused, unread bytes wait in the kernel's buffer and are lost if it fills",
		"port", name, "waited", l.stallAfter, "queued_chunks", len(q))
	select {
	case q <- c:
		l.log.Info("shoe data consumer caught up: reading resumed", "port", name)
		return true
	case <-stop:
		return false
	}
}

// report records st and tells OnState if it is news: a new State or port,
// or a new reason for being Disconnected.
func (l *Link) report(st Status, logAttrs ...any) {
	st.Since = l.clock.Now()
	l.mu.Lock()
	prev := l.status
	news := st.State != prev.State || st.Port != prev.Port ||
		(st.State == Disconnected && errText(st.Err) != errText(prev.Err))
	if news {
		l.status = st
	}
	l.mu.Unlock()
	if !news {
		return
	}
	if len(logAttrs) == 0 {
		logAttrs = []any{"port", st.Port}
	}
	switch {
	case st.State == Disconnected && errors.Is(st.Err, ErrStopped):
		l.log.Info("shoe port closed", append(logAttrs, "reason", st.Err)...)
	case st.State == Disconnected:
		l.log.Warn("shoe port disconnected", append(logAttrs, "err", st.Err, "retry_in", st.Retry)...)
	case st.State == Silent:
		l.log.Warn("shoe port silent", logAttrs...)
	default:
		l.log.Info("shoe port connected", logAttrs...)
	}
	l.onState(st)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
