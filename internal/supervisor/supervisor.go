// Package supervisor is a supervisor's side of a signed command (tablectl
// void, suspend, resume, card, ...): it signs the command with the
// supervisor's key, sends it to the table over MQTT and waits for the
// table's reply. The table's side, verifying and recording it, is package
// command.
package supervisor

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/mqttconn"
	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/signedcmd"
)

// ErrRefused: the table answered and refused the command; the reply says
// why (its code and reason). The caller reports it; sending again the same
// way is refused the same way.
var ErrRefused = errors.New("refused")

// Why a command did not reach the table, or got no answer: each error Send
// returns for these wraps one, and its message is one line that says what
// to do about it.
var (
	// ErrConnRefused: nothing listens at the broker's address.
	ErrConnRefused = errors.New("connection refused")
	// ErrTLS: the TLS handshake with the broker failed (its certificate
	// is not trusted, names another host, or the broker wants a client
	// certificate).
	ErrTLS = errors.New("TLS failed")
	// ErrLogin: the broker refused the login (user, password, or a client
	// certificate it does not accept).
	ErrLogin = errors.New("login refused")
	// ErrNotAllowed: the broker let the login in but not on this table's
	// command topics (its ACL), mqttpub.ErrNotAllowed.
	ErrNotAllowed = mqttpub.ErrNotAllowed
	// ErrNoAnswer: the broker did not answer in time (a firewall that
	// drops, a wrong address, a broker that hangs).
	ErrNoAnswer = errors.New("no answer from the broker")
	// ErrNoReply: the broker took the command but no reply came in time.
	ErrNoReply = errors.New("no reply")
)

// Options say where the table is and who signs.
type Options struct {
	Broker string // the broker's URL
	Table  string // the table's id
	Prefix string // the table's topic prefix; default tablectl/<table>
	// Key signs as Name, the supervisor's name in the table's keyring.
	Key  ed25519.PrivateKey
	Name string
	// Username, Password and TLS log in to the broker.
	Username, Password string
	TLS                *tls.Config
	// Timeout bounds connecting and waiting for the reply; default 10s.
	Timeout time.Duration
	// Now stamps issued_at; default time.Now. The table refuses a command
	// stamped outside its window, so this is the supervisor's clock.
	Now    func() time.Time
	Logger *slog.Logger
}

// LoadKey reads a supervisor's private key file (tablectl keygen writes
// NAME.key) and returns the key and the name the file is for, which is the
// supervisor's name in the table's keyring unless said otherwise.
func LoadKey(path string) (ed25519.PrivateKey, string, error) {
	key, err := audit.LoadPrivateKey(path)
	if err != nil {
		return nil, "", err
	}
	return key, strings.TrimSuffix(filepath.Base(path), ".key"), nil
}

// Request is what the supervisor asks: an action and its arguments.
type Request struct {
	Action string // coup.ActionVoid, ..., signedcmd.ActionResync
	Coup   int    // void, bets-closed: the coup (0: the one in progress)
	Card   string // card: the card to enter, as KH
	From   int64  // resync: the first sequence number to send again
	Reason string // the supervisor's words, kept in the trail
	Dealer string // dealer-in: the dealer signed in
}

// Send signs r, sends it and returns the table's reply. A reply that
// refuses is returned with an error wrapping ErrRefused; no reply in time
// is an error of its own.
func Send(ctx context.Context, o Options, r Request) (signedcmd.Reply, error) {
	if o.Table == "" || o.Key == nil || o.Name == "" {
		return signedcmd.Reply{}, fmt.Errorf("a command needs a table, a key and the supervisor's name")
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Prefix == "" {
		o.Prefix = mqttpub.DefaultPrefix(o.Table)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	c := signedcmd.Command{Table: o.Table, ID: signedcmd.NewID(), Action: r.Action, Supervisor: o.Name,
		IssuedAt: signedcmd.FormatTime(o.Now()), Coup: r.Coup, Card: r.Card, From: r.From, Reason: r.Reason, Dealer: r.Dealer}
	if err := c.Sign(o.Key); err != nil {
		return signedcmd.Reply{}, err
	}
	payload, err := c.Marshal()
	if err != nil {
		return signedcmd.Reply{}, err
	}
	topics := mqttpub.Topics{Prefix: o.Prefix}
	conn, err := mqttconn.Dial(mqttconn.ConnOptions{Broker: o.Broker, ClientID: "tablectl-" + r.Action + "-" + c.ID[:8],
		Username: o.Username, Password: o.Password, TLS: o.TLS, Once: true,
		Subscribe: []string{topics.Topic(mqttpub.TopicCmdReply)}, ConnectTimeout: o.Timeout, Logger: o.Logger})
	if err != nil {
		return signedcmd.Reply{}, connectError(o, err)
	}
	defer conn.Close(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	rep, err := mqttpub.SendCommand(ctx, conn, topics, payload, c.ID)
	if err != nil {
		return signedcmd.Reply{}, replyError(o, topics, err)
	}
	if rep.Result != signedcmd.Accepted {
		return rep, fmt.Errorf("%w: %s: %s", ErrRefused, rep.Code, rep.Reason)
	}
	return rep, nil
}

// connectError says why the connection to the broker failed, in one line
// with what to do.
func connectError(o Options, err error) error {
	b := o.Broker
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		alert     tls.AlertError
		record    tls.RecordHeaderError
		verify    *tls.CertificateVerificationError
	)
	login := "no login"
	if o.Username != "" {
		login = "user " + o.Username
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w: nothing listens at %s: is the broker running there (systemctl status mosquitto)? Give the table's broker with --broker or in the client config (%s)", ErrConnRefused, b, DefaultClientConfig)
	case errors.As(err, &unknownCA), errors.As(err, &verify) && errors.As(verify.Err, &unknownCA):
		return fmt.Errorf("%w: %s: the broker's certificate is not signed by a CA this command trusts: give its CA with --tls-ca FILE (ca_file in the client config)", ErrTLS, b)
	case errors.As(err, &hostname):
		return fmt.Errorf("%w: %s: the broker's certificate is for %s, not %s: use the name it was issued for in --broker", ErrTLS, b, strings.Join(hostname.Certificate.DNSNames, ", "), hostname.Host)
	case errors.As(err, &invalid):
		return fmt.Errorf("%w: %s: the broker's certificate: %v: have it reissued", ErrTLS, b, invalid)
	case errors.As(err, &alert), errors.As(err, &verify):
		return fmt.Errorf("%w: %s: %v: the broker may want a client certificate (--tls-cert, --tls-key)", ErrTLS, b, err)
	case errors.As(err, &record):
		return fmt.Errorf("%w: %s does not speak TLS: use tcp:// for it, or the broker's TLS port with ssl://", ErrTLS, b)
	case isTLS(b) && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)):
		return fmt.Errorf("%w: %s closed the connection in the TLS handshake: is that the broker's TLS port (ssl://), or its plain one (tcp://)?", ErrTLS, b)
	case errors.Is(err, packets.ErrorRefusedBadUsernameOrPassword), errors.Is(err, packets.ErrorRefusedNotAuthorised):
		return fmt.Errorf("%w: the broker at %s refused %s: give the supervisors' broker login with --username and --password-file (init made supervisor-%s; or username and password_file in the client config)", ErrLogin, b, login, or(o.Table, "TABLE"))
	case errors.Is(err, packets.ErrorRefusedIDRejected), errors.Is(err, packets.ErrorRefusedServerUnavailable), errors.Is(err, packets.ErrorRefusedBadProtocolVersion):
		return fmt.Errorf("%w: the broker at %s refused the connection: %v", ErrLogin, b, err)
	case isTimeout(err):
		return fmt.Errorf("%w: %s did not answer in %v: check the address and port in --broker, and that no firewall drops them", ErrNoAnswer, b, o.Timeout)
	}
	return fmt.Errorf("the broker at %s: %w", b, err)
}

// replyError says why no reply came, once connected.
func replyError(o Options, topics mqttpub.Topics, err error) error {
	switch {
	case errors.Is(err, mqttpub.ErrNotAllowed):
		return fmt.Errorf("%w: %s lets %s in but not on table %s's topics (%s): check --table, and the broker's ACL for the login", ErrNotAllowed, o.Broker, or(o.Username, "this login"), o.Table, topics.Topic(mqttpub.TopicCmd))
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w in %v from table %s on %s: the table's controller is down or on another broker, --table or --prefix is not the table's, or the broker's ACL drops this login's commands silently (Mosquitto does): %w",
			ErrNoReply, o.Timeout, o.Table, o.Broker, err)
	}
	return err
}

func isTLS(url string) bool {
	return strings.HasPrefix(url, "ssl://") || strings.HasPrefix(url, "wss://") || strings.HasPrefix(url, "tls://")
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "no answer from")
}

func or(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
