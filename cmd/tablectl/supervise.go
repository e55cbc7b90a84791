package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	signedcmd "github.com/tablectl/tablectl/command"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/internal/controller"
	"github.com/tablectl/tablectl/internal/smallfile"
	"github.com/tablectl/tablectl/internal/supervisor"
)

// The supervisor's commands: each signs, sends and waits for its reply.
func init() {
	for _, a := range []struct{ action, short string }{
		{coup.ActionVoid, "void a coup (signed supervisor command)"},
		{coup.ActionSuspend, "suspend the game (signed supervisor command)"},
		{coup.ActionResume, "resume the game (signed supervisor command)"},
		{coup.ActionCard, "enter the card the reader missed (signed supervisor command)"},
		{coup.ActionShoeStart, "start a shoe (signed supervisor command)"},
		{coup.ActionShoeEnd, "end the shoe (signed supervisor command)"},
		{coup.ActionBetsClosed, "close betting (signed game-server command)"},
		{signedcmd.ActionResync, "republish audit rows from a sequence number (signed command)"},
		{coup.ActionDealerIn, "sign a dealer in at the table (signed pit command)"},
		{coup.ActionDealerOut, "sign the dealer on duty out (signed pit command)"},
	} {
		action := a.action
		register(command{name: action, short: a.short, run: func(args []string, stdout io.Writer) error {
			return runSupervise(action, args, stdout)
		}})
	}
}

func runSupervise(action string, args []string, stdout io.Writer) error {
	fs := newFlagSet(action)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: tablectl %s --table ID --key FILE [flags]

Signs a %s command with the supervisor's key, sends it to the table over
MQTT and waits for the table's reply, which it prints as JSON. It exits
non-zero when the command is refused or no reply comes in time.

flags:
`, action, action)
		printFlags(fs.Output(), fs)
	}
	broker := fs.String("broker", "tcp://"+controller.DefaultMQTTListen, "MQTT broker `URL`")
	table := fs.String("table", "", "the table `ID` the command is for")
	prefix := fs.String("prefix", "", "the table's topic `prefix` (default tablectl/<table>)")
	keyFile := fs.String("key", "", "the supervisor's private key `FILE` (tablectl keygen)")
	as := fs.String("as", "", "the supervisor's `NAME` in the keyring (default: the key file's name without .key)")
	coupNo := fs.Int("coup", 0, "void, bets-closed: the coup `N` (0: the coup in progress)")
	card := fs.String("card", "", "card: the `CARD` to enter, as KH")
	from := fs.Int64("from", 0, "resync: the first audit sequence number `SEQ` to send again")
	reason := fs.String("reason", "", "the supervisor's words, kept in the trail")
	dealer := fs.String("dealer", "", "dealer-in: the dealer's `NAME` (badge or staff id)")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the reply")
	user := fs.String("username", "", "broker username")
	passFile := fs.String("password-file", "", "broker password `FILE`")
	ca := fs.String("tls-ca", "", "PEM `FILE` of the CA that signs the broker's certificate")
	cert := fs.String("tls-cert", "", "client certificate `FILE`, if the broker wants one")
	certKey := fs.String("tls-key", "", "the client certificate's key `FILE`")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *table == "" || *keyFile == "" {
		return fmt.Errorf("--table and --key are required")
	}
	key, name, err := supervisor.LoadKey(*keyFile)
	if err != nil {
		return err
	}
	if *as != "" {
		name = *as
	}
	o := supervisor.Options{Broker: *broker, Table: *table, Prefix: *prefix, Key: key, Name: name, Username: *user, Timeout: *timeout,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if *passFile != "" {
		if o.Password, err = smallfile.Secret(*passFile); err != nil {
			return err
		}
	}
	if *ca != "" || *cert != "" || strings.HasPrefix(*broker, "ssl://") || strings.HasPrefix(*broker, "wss://") {
		if o.TLS, err = mqttpub.TLSConfig(*ca, *cert, *certKey); err != nil {
			return err
		}
	}
	rep, err := supervisor.Send(context.Background(), o, supervisor.Request{Action: action, Coup: *coupNo,
		Card: strings.ToUpper(*card), From: *from, Reason: *reason, Dealer: *dealer})
	if err != nil && !errors.Is(err, supervisor.ErrRefused) {
		return err
	}
	b, _ := json.Marshal(rep)
	fmt.Fprintf(stdout, "%s\n", b)
	return err
}
