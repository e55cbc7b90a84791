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
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/command"
	"github.com/tablectl/tablectl/display/mqttpub"
)

// ErrRefused: the table answered and refused the command; the reply says
// why (its code and reason). The caller reports it; sending again the same
// way is refused the same way.
var ErrRefused = errors.New("refused")

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
	Action string // coup.ActionVoid, ..., command.ActionResync
	Coup   int    // void, bets-closed: the coup (0: the one in progress)
	Card   string // card: the card to enter, as KH
	From   int64  // resync: the first sequence number to send again
	Reason string // the supervisor's words, kept in the trail
	Dealer string // dealer-in: the dealer signed in
}

// Send signs r, sends it and returns the table's reply. A reply that
// refuses is returned with an error wrapping ErrRefused; no reply in time
// is an error of its own.
func Send(ctx context.Context, o Options, r Request) (command.Reply, error) {
	if o.Table == "" || o.Key == nil || o.Name == "" {
		return command.Reply{}, fmt.Errorf("a command needs a table, a key and the supervisor's name")
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
	c := command.Command{Table: o.Table, ID: command.NewID(), Action: r.Action, Supervisor: o.Name,
		IssuedAt: command.FormatTime(o.Now()), Coup: r.Coup, Card: r.Card, From: r.From, Reason: r.Reason, Dealer: r.Dealer}
	if err := c.Sign(o.Key); err != nil {
		return command.Reply{}, err
	}
	payload, err := c.Marshal()
	if err != nil {
		return command.Reply{}, err
	}
	topics := mqttpub.Topics{Prefix: o.Prefix}
	conn, err := mqttpub.Dial(mqttpub.ConnOptions{Broker: o.Broker, ClientID: "tablectl-" + r.Action + "-" + c.ID[:8],
		Username: o.Username, Password: o.Password, TLS: o.TLS,
		Subscribe: []string{topics.Topic(mqttpub.TopicCmdReply)}, ConnectTimeout: o.Timeout, Logger: o.Logger})
	if err != nil {
		return command.Reply{}, err
	}
	defer conn.Close(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	rep, err := mqttpub.SendCommand(ctx, conn, topics, payload, c.ID)
	if err != nil {
		return command.Reply{}, err
	}
	if rep.Result != command.Accepted {
		return rep, fmt.Errorf("%w: %s: %s", ErrRefused, rep.Code, rep.Reason)
	}
	return rep, nil
}
