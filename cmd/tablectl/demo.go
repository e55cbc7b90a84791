package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/controller"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

func init() {
	register(command{Name: "demo", Short: "a whole table on this machine: simulated shoe, controller, broker, trail", Run: runDemo})
}

func runDemo(args []string, stdout io.Writer) error {
	fs := newFlagSet("demo")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: tablectl demo [flags]

Runs a whole table on this machine: a simulated shoe dealing at a human
pace on a pseudo-terminal, the controller reading it, an embedded MQTT
broker (TCP and WebSocket) it publishes to, the audit trail in --dir, and
the HTTP endpoints. It prints where to look. Ctrl-C stops it.

flags:
`)
		printFlags(fs.Output(), fs)
	}
	o := controller.DemoOptions{LogTo: os.Stderr}
	if app.LogFlagsSet() {
		o.Logger = slog.Default()
	}
	fs.StringVar(&o.Dir, "dir", "demo", "the `folder` for the trail, the keys and the shoe's link")
	fs.StringVar(&o.Table, "table", "DEMO", "the table `ID`")
	fs.StringVar(&o.Profile, "profile", coup.ProfileVIP, "the rule `PROFILE`: classic, no-commission or vip")
	fs.StringVar(&o.MQTTListen, "mqtt-listen", config.DefaultMQTTListen, "the embedded broker's TCP `address`")
	fs.StringVar(&o.MQTTWS, "mqtt-ws-listen", config.DefaultMQTTWSListen, "the embedded broker's WebSocket `address`, or off")
	fs.StringVar(&o.HTTP, "http", "127.0.0.1:8080", "the HTTP endpoints' `address`")
	fs.DurationVar(&o.Pace, "pace", shoesim.DefaultCardPace, "the dealer's pace: the `WAIT` before each card and button")
	fs.DurationVar(&o.CoupPace, "coup-pace", -1, "the betting `TIME` before each coup (default 5 x --pace)")
	fs.Uint64Var(&o.Seed, "seed", 0, "shuffle `SEED` (0: a new shoe each run)")
	fs.IntVar(&o.Shoes, "shoes", 1, "`N` shoes to deal, one after another")
	tables := fs.Int("tables", 0, "a floor of `N` tables is the floor's binary's: go run ./cmd/tablectl-floor demo --tables N (docs/floor.md)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkDemoFlags(fs, *tables, o); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return demo(ctx, o, stdout)
}

// checkDemoFlags refuses what cannot be meant before anything starts.
// --tables is kept to say where the floor went: the table's binary carries
// no floor (no NATS server, no PostgreSQL driver).
func checkDemoFlags(fs *flag.FlagSet, tables int, o controller.DemoOptions) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case set["tables"]:
		return usageError(fs, "--tables %d: a floor is the floor's binary's: go run ./cmd/tablectl-floor demo --tables %d (docs/floor.md)", tables, max(tables, 1))
	case o.Pace < 0:
		return usageError(fs, "--pace %v: want 0 or more", o.Pace)
	case o.Shoes < 1:
		return usageError(fs, "--shoes %d: want 1 or more", o.Shoes)
	}
	return nil
}

// demo runs the demo until ctx is done, saying where to look once it runs
// and where the trail is once it stops.
func demo(ctx context.Context, o controller.DemoOptions, stdout io.Writer) error {
	var info controller.DemoInfo
	ready := o.Ready
	o.Ready = func(i controller.DemoInfo) {
		info = i
		printDemo(stdout, i)
		if ready != nil {
			ready(i)
		}
	}
	err := controller.Demo(ctx, o)
	if info.Trail != "" {
		fmt.Fprintf(stdout, "\nstopped; the trail is %s (tablectl audit verify --db %s --pubkey %s)\n", info.Trail, info.Trail, info.CheckpointPub)
	}
	return err
}

func printDemo(w io.Writer, i controller.DemoInfo) {
	host, port := brokerHostPort(i.MQTT)
	login := fmt.Sprintf("--username %s --password-file %s", i.PitBrokerUser, i.PitBrokerPasswordFile)
	fmt.Fprintf(w, `tablectl demo: table %s, a simulated shoe dealing at a dealer's pace.

  web display      %s/
  pit view         %s/pit   and %s/recall   (user %s, password %s: the pit's login, here and at the broker)
  MQTT broker      %s   (WebSocket: %s)
  topics           %s/#   (without a login: status and public/# only)
  pit's login      user %s, password %s   (in %s)
                   watch: mosquitto_sub -h %s -p %s -u %s -P %s -t '%s/#' -v
                   public: mosquitto_sub -h %s -p %s -t '%s/public/#' -t '%s/status' -v
  HTTP             %s/state  %s/health  %s/metrics
  audit trail      %s   (tablectl audit verify --db %s --pubkey %s)
`, i.Table, i.HTTP, i.HTTP, i.HTTP, i.PitBrokerUser, i.PitPassword, i.MQTT, orOff(i.WS), i.Prefix,
		i.PitBrokerUser, i.PitBrokerPassword, i.PitBrokerPasswordFile,
		host, port, i.PitBrokerUser, i.PitBrokerPassword, i.Prefix, host, port, i.Prefix, i.Prefix,
		i.HTTP, i.HTTP, i.HTTP, i.Trail, i.Trail, i.CheckpointPub)
	if i.SetAside != "" {
		fmt.Fprintf(w, "                   the last demo's trail was moved aside to %s (kept: no trail is deleted)\n", i.SetAside)
	}
	fmt.Fprintf(w, `  shoe             %s (pseudo-terminal)
  supervisor key   %s   (keyring %s)
                   try:   go run ./cmd/tablectl suspend --broker %s %s --table %s --key %s --reason "a test"
                          go run ./cmd/tablectl resume --broker %s %s --table %s --key %s
  officer's key    %s   (signs the keyring: tablectl keyring sign --keyring %s --key %s)

Ctrl-C stops it.
`, i.Shoe, i.Key, i.Keyring, i.MQTT, login, i.Table, i.Key, i.MQTT, login, i.Table, i.Key, i.Officer, i.Keyring, i.Officer)
}

func orOff(s string) string {
	if s == "" {
		return "off"
	}
	return s
}

// brokerHostPort splits tcp://host:port for mosquitto_sub's flags.
func brokerHostPort(url string) (string, string) {
	addr := strings.TrimPrefix(url, "tcp://")
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[:i], addr[i+1:]
	}
	return addr, "1883"
}
