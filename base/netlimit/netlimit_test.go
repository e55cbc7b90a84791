package netlimit

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tablectl/tablectl/internal/testenv"
)

// dial connects to ln from the loopback address from (127.0.0.x), so one
// test can play several clients.
func dial(t *testing.T, ln net.Listener, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// serve accepts on l and hands the connections to the test.
func serve(t *testing.T, l *Listener) <-chan net.Conn {
	t.Helper()
	out := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(out)
				return
			}
			out <- c
		}
	}()
	t.Cleanup(func() { l.Close() })
	return out
}

func listen(t *testing.T, lim Limits) *Listener {
	t.Helper()
	l, err := Listen("127.0.0.1:0", "test", lim, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// closedByServer waits until the server closes c (EOF or reset).
func closedByServer(t *testing.T, c net.Conn) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

func stillOpen(t *testing.T, c net.Conn) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func accepted(t *testing.T, in <-chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c := <-in:
		t.Cleanup(func() { c.Close() })
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted")
		return nil
	}
}

func TestCaps(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lim     Limits
		clients []string // one connection each, in order
		refused []bool
		reason  string
	}{
		{"total", Limits{Total: 2}, []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}, []bool{false, false, true}, RefusedTotal},
		{"per client", Limits{Total: 10, PerClient: 2}, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.2"}, []bool{false, false, true, false}, RefusedPerClient},
		{"budget", Limits{Budget: NewBudget(1)}, []string{"127.0.0.1", "127.0.0.2"}, []bool{false, true}, RefusedBudget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := listen(t, tc.lim)
			in := serve(t, l)
			var kept []net.Conn
			for i, from := range tc.clients {
				c := dial(t, l, from)
				if tc.refused[i] {
					if !closedByServer(t, c) {
						t.Fatalf("client %d (%s) beyond the %s cap: not closed", i, from, tc.name)
					}
					continue
				}
				accepted(t, in)
				kept = append(kept, c)
			}
			for i, c := range kept {
				if !stillOpen(t, c) {
					t.Errorf("connection %d within the limits was closed", i)
				}
			}
			st := l.Stats()
			if st.Refused[tc.reason] != 1 || st.Open != len(kept) {
				t.Errorf("stats %+v; want 1 refused for %s and %d open", st, tc.reason, len(kept))
			}
		})
	}
}

// A connection closed gives its slot back, once however often it is
// closed; the shared budget too.
func TestSlotsComeBack(t *testing.T) {
	b := NewBudget(2)
	a, z := listen(t, Limits{Total: 1, Budget: b}), listen(t, Limits{Total: 5, Budget: b})
	ina, inz := serve(t, a), serve(t, z)
	dial(t, a, "127.0.0.1")
	sa := accepted(t, ina)
	dial(t, z, "127.0.0.1")
	accepted(t, inz)
	if b.Used() != 2 {
		t.Fatalf("budget used %d, want 2", b.Used())
	}
	if c := dial(t, z, "127.0.0.1"); !closedByServer(t, c) {
		t.Fatal("a third connection beyond the shared budget of 2 was kept")
	}
	sa.Close()
	sa.Close()
	if b.Used() != 1 || a.Stats().Open != 0 {
		t.Fatalf("after a close: budget %d, open %d", b.Used(), a.Stats().Open)
	}
	dial(t, a, "127.0.0.1")
	accepted(t, ina)
	if b.Used() != 2 {
		t.Fatalf("budget used %d, want 2", b.Used())
	}
}

// failing is a listener whose Accept fails with errs in turn, then hands
// out conn, then reports itself closed.
type failing struct {
	errs  []error
	conn  net.Conn
	calls int
}

func (f *failing) Accept() (net.Conn, error) {
	f.calls++
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	if f.conn != nil {
		c := f.conn
		f.conn = nil
		return c, nil
	}
	return nil, net.ErrClosed
}
func (f *failing) Close() error   { return nil }
func (f *failing) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// full is a listener out of descriptors until it is closed.
type full struct{ closed atomic.Bool }

func (f *full) Accept() (net.Conn, error) {
	if f.closed.Load() {
		return nil, net.ErrClosed
	}
	return nil, opErr(syscall.EMFILE)
}
func (f *full) Close() error   { f.closed.Store(true); return nil }
func (f *full) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

func opErr(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: &net.OpError{Err: errno}}
}

// Accept waits out every error but a closed listener's, and hands on the
// connection that comes after them.
func TestAcceptErrorsAreWaitedOut(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c2.Close()
	f := &failing{errs: []error{opErr(syscall.EMFILE), opErr(syscall.ENFILE), opErr(syscall.ECONNABORTED), errors.New("something else")}, conn: c1}
	l := Wrap(f, "test", Limits{}, nil)
	start := time.Now()
	c, err := l.Accept()
	if err != nil {
		t.Fatalf("Accept: %v", err)
	}
	c.Close()
	if took := time.Since(start); took < backoffMin+2*backoffMin+4*backoffMin {
		t.Errorf("four failures waited out in %v: no backoff", took)
	}
	if st := l.Stats(); st.AcceptErrors != 4 {
		t.Errorf("accept errors counted %d, want 4", st.AcceptErrors)
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept on a closed listener: %v", err)
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ECONNABORTED} {
		if !Transient(opErr(e)) {
			t.Errorf("%v is not taken for transient", e)
		}
	}
	if Transient(io.EOF) {
		t.Error("EOF taken for transient")
	}
}

// Close ends Accept even while it waits out an error.
func TestCloseEndsAccept(t *testing.T) {
	l := Wrap(&full{}, "test", Limits{}, nil)
	done := make(chan error, 1)
	go func() { _, err := l.Accept(); done <- err }()
	testenv.Eventually(t, 5*time.Second, "Accept waiting out an error", func() bool { return l.Stats().AcceptErrors > 0 })
	l.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept did not return after Close")
	}
}

func TestClientBudget(t *testing.T) {
	for _, tc := range []struct {
		limit uint64
		open  int
		want  int
		short bool
	}{
		{20000, 40, 20000 - 40 - Reserve, false},
		{1024, 30, 1024 - 30 - Reserve, false},
		{600, 30, MinBudget, true},
		{1 << 62, 10, 1<<30 - 10 - Reserve, false},
	} {
		got, short := ClientBudget(tc.limit, tc.open)
		if got != tc.want || short != tc.short {
			t.Errorf("ClientBudget(%d, %d) = %d, %v; want %d, %v", tc.limit, tc.open, got, short, tc.want, tc.short)
		}
	}
}

func TestRaiseFileLimit(t *testing.T) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		t.Fatal(err)
	}
	got, err := RaiseFileLimit()
	if err != nil || got != r.Max {
		t.Fatalf("RaiseFileLimit = %d, %v; the hard limit is %d", got, err, r.Max)
	}
	n, err := OpenFiles()
	if err != nil || n < 3 {
		t.Fatalf("OpenFiles = %d, %v", n, err)
	}
}
