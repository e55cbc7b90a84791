package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tablectl/tablectl/base/mqttconn"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/smallfile"
	"github.com/tablectl/tablectl/internal/supervisor"
	"github.com/tablectl/tablectl/signedcmd"
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
		register(command{Name: action, Short: a.short, Run: func(args []string, stdout io.Writer) error {
			return runSupervise(action, args, stdout)
		}})
	}
}

// supervisePolicy says which of a command's arguments each action takes.
var actionArgs = map[string][]string{
	coup.ActionVoid:        {"coup"},
	coup.ActionBetsClosed:  {"coup"},
	coup.ActionCard:        {"card"},
	signedcmd.ActionResync: {"from"},
	coup.ActionDealerIn:    {"dealer"},
}

// installedConfig is what the supervisor's commands read from the
// controller's config when there is no client config: where its broker is
// and which table it is (never its login: the controller's own).
type installedConfig struct {
	TableID string `json:"table_id"`
	MQTT    *struct {
		Broker string `json:"broker"`
		Prefix string `json:"prefix"`
		CAFile string `json:"ca_file"`
	} `json:"mqtt"`
}

func runSupervise(action string, args []string, stdout io.Writer) error {
	fs := newFlagSet(action)
	fs.Usage = func() {
		usageHead(fs.Output(), action, "--key FILE [--table ID] [flags]", fmt.Sprintf(`Signs a %s command with the supervisor's key, sends it to the table over
MQTT and waits for the table's reply, which it prints as JSON. It exits 1
when the command is refused or no reply comes in time, and says which: the
connection refused, TLS failed, the login refused, the login not allowed on
the table's topics, or no reply.

Where the table is: the client config (--client-config, default %s,
which tablectl init writes on the box: the box's broker, the table, the
supervisors' broker login), else the installed controller config
(--config: its broker, table and CA, not its login), else
tcp://127.0.0.1:1883. Each flag below overrides what they say.`, action, supervisor.DefaultClientConfig))
		printFlags(fs.Output(), fs)
	}
	clientCfg := fs.String("client-config", supervisor.DefaultClientConfig, "the client config `FILE` (JSON: broker, table, prefix, username, password_file, ca_file, cert_file, key_file); empty: none")
	ctlCfg := fs.String("config", defaultConfigPath, "the installed controller config `FILE`, read when there is no client config; empty: none")
	broker := fs.String("broker", "", "MQTT broker `URL` (tcp://, ssl://, ws://, wss://); default from the configs, else tcp://127.0.0.1:1883")
	table := fs.String("table", "", "the table `ID` the command is for (default from the configs)")
	prefix := fs.String("prefix", "", "the table's topic `PREFIX` (default from the configs, else tablectl/<table>)")
	keyFile := fs.String("key", "", "the supervisor's private key `FILE` (tablectl keygen) (required)")
	as := fs.String("as", "", "the supervisor's `NAME` in the keyring (default: the key file's name without .key)")
	coupNo := fs.Int("coup", 0, "void, bets-closed: the coup `N` (0: the coup in progress)")
	card := fs.String("card", "", "card: the `CARD` to enter, as KH (rank A 2-9 T J Q K, suit C D H S)")
	from := fs.Int64("from", 0, "resync: the first audit sequence number `SEQ` to send again")
	reason := fs.String("reason", "", "the supervisor's `WORDS`, kept in the trail")
	dealer := fs.String("dealer", "", "dealer-in: the dealer's `NAME` (badge or staff id)")
	timeout := fs.Duration("timeout", 10*time.Second, "how `LONG` to wait to connect, and then for the reply")
	user := fs.String("username", "", "broker `USER` (default from the client config)")
	passFile := fs.String("password-file", "", "broker password `FILE` (default from the client config)")
	ca := fs.String("tls-ca", "", "PEM `FILE` of the CA that signs the broker's certificate")
	cert := fs.String("tls-cert", "", "client certificate `FILE`, if the broker wants one")
	certKey := fs.String("tls-key", "", "the client certificate's key `FILE`")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	// What can be checked here is checked before anything is sent.
	if err := checkSuperviseArgs(fs, action, set, superviseArgs{key: *keyFile, coup: *coupNo, card: *card, from: *from,
		dealer: *dealer, reason: *reason, timeout: *timeout}); err != nil {
		return err
	}

	cc, err := clientConfig(*clientCfg, set["client-config"], *ctlCfg, set["config"])
	if err != nil {
		return err
	}
	over := func(dst *string, flagName, v string) {
		if set[flagName] {
			*dst = v
		}
	}
	over(&cc.Broker, "broker", *broker)
	over(&cc.Table, "table", *table)
	over(&cc.Prefix, "prefix", *prefix)
	over(&cc.Username, "username", *user)
	over(&cc.PasswordFile, "password-file", *passFile)
	over(&cc.CAFile, "tls-ca", *ca)
	over(&cc.CertFile, "tls-cert", *cert)
	over(&cc.KeyFile, "tls-key", *certKey)
	if cc.Broker == "" {
		cc.Broker = "tcp://127.0.0.1:1883"
	}
	if cc.Table == "" {
		return usageError(fs, "--table is required: no client config (%s) or installed config (%s) names the table", *clientCfg, *ctlCfg)
	}
	key, name, err := supervisor.LoadKey(*keyFile)
	if err != nil {
		return fmt.Errorf("--key: %w", err)
	}
	if *as != "" {
		name = *as
	}
	if !coup.ValidStaffName(name) {
		return usageError(fs, "the supervisor's name %q (from the key file's name): want A-Z a-z 0-9 . _ @ -; give it with --as", name)
	}
	o := supervisor.Options{Broker: cc.Broker, Table: cc.Table, Prefix: cc.Prefix, Key: key, Name: name, Username: cc.Username, Timeout: *timeout,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 4}))}
	if cc.PasswordFile != "" {
		if o.Password, err = smallfile.Secret(cc.PasswordFile); err != nil {
			return fmt.Errorf("the broker password (--password-file): %w", err)
		}
	}
	if cc.CAFile != "" || cc.CertFile != "" || strings.HasPrefix(cc.Broker, "ssl://") || strings.HasPrefix(cc.Broker, "wss://") {
		if o.TLS, err = mqttconn.TLSConfig(cc.CAFile, cc.CertFile, cc.KeyFile); err != nil {
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

// superviseArgs are a command's arguments as given.
type superviseArgs struct {
	key, card, dealer, reason string
	coup                      int
	from                      int64
	timeout                   time.Duration
}

// checkSuperviseArgs refuses, as a usage error, what the table would
// refuse for its form: a missing or malformed argument, or one the action
// does not take (the same card and name rules the table applies).
func checkSuperviseArgs(fs *flag.FlagSet, action string, set map[string]bool, a superviseArgs) error {
	if a.key == "" {
		return usageError(fs, "--key is required (the supervisor's private key, tablectl keygen's NAME.key)")
	}
	takes := actionArgs[action]
	for _, arg := range []string{"coup", "card", "from", "dealer"} {
		if set[arg] && !slices.Contains(takes, arg) {
			return usageError(fs, "--%s is not for %s (%s)", arg, action, argsFor(arg))
		}
	}
	switch {
	case a.coup < 0:
		return usageError(fs, "--coup %d: want 0 (the coup in progress) or a coup number", a.coup)
	case a.timeout <= 0:
		return usageError(fs, "--timeout %v: want more than 0", a.timeout)
	case len(a.reason) > 1024:
		return usageError(fs, "--reason is %d bytes: the table takes 1024 at most", len(a.reason))
	}
	switch action {
	case coup.ActionCard:
		if a.card == "" {
			return usageError(fs, "--card is required: the card to enter, as KH")
		}
		if _, err := coup.ParseCard(strings.ToUpper(a.card)); err != nil {
			return usageError(fs, "--card %s: %v", a.card, err)
		}
	case coup.ActionDealerIn:
		if a.dealer == "" {
			return usageError(fs, "--dealer is required: the dealer's badge or staff id")
		}
		if !coup.ValidStaffName(a.dealer) {
			return usageError(fs, "--dealer %q: want 1 to 64 of A-Z a-z 0-9 . _ @ -", a.dealer)
		}
	case signedcmd.ActionResync:
		if a.from < 1 {
			return usageError(fs, "--from is required: the first sequence number to send again (1 or more)")
		}
	}
	return nil
}

// argsFor says which actions take an argument.
func argsFor(arg string) string {
	var acts []string
	for a, args := range actionArgs {
		if slices.Contains(args, arg) {
			acts = append(acts, a)
		}
	}
	slices.Sort(acts)
	return "it is for " + strings.Join(acts, " and ")
}

// clientConfig is where the table is, from the client config at path or,
// when that is missing and was not asked for by name, the installed
// controller config at ctl (its broker, table and CA).
func clientConfig(path string, named bool, ctl string, ctlNamed bool) (supervisor.ClientConfig, error) {
	var cc supervisor.ClientConfig
	var err error
	if path == "" {
		err = os.ErrNotExist
		named = false
	} else {
		cc, err = supervisor.LoadClientConfig(path)
	}
	switch {
	case err == nil:
		return cc, nil
	case named || !supervisor.IsNotExist(err):
		if errors.Is(err, os.ErrPermission) {
			return cc, fmt.Errorf("the client config: %w (root's: run with sudo, or give --broker, --table and the login)", err)
		}
		return cc, fmt.Errorf("the client config: %w", err)
	}
	if ctl == "" {
		return supervisor.ClientConfig{}, nil
	}
	data, err := smallfile.Read(ctl, config.MaxConfig)
	switch {
	case err == nil:
	case !ctlNamed && supervisor.IsNotExist(err):
		return supervisor.ClientConfig{}, nil
	case errors.Is(err, os.ErrPermission):
		return cc, fmt.Errorf("the installed config: %w (run with sudo, or give --broker and --table)", err)
	default:
		return cc, fmt.Errorf("the installed config: %w", err)
	}
	var ic installedConfig
	if err := json.Unmarshal(data, &ic); err != nil {
		return cc, fmt.Errorf("the installed config %s: %w", ctl, err)
	}
	cc = supervisor.ClientConfig{Table: ic.TableID}
	if ic.MQTT != nil {
		cc.Broker, cc.Prefix, cc.CAFile = ic.MQTT.Broker, ic.MQTT.Prefix, ic.MQTT.CAFile
	}
	return cc, nil
}
