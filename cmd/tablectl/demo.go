package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/device"
	signedcmd "github.com/tablectl/tablectl/display/command"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

func init() {
	register(command{name: "demo", short: "a whole table on this machine: simulated shoe, controller, broker, trail", run: runDemo})
}

// demoOptions are the demo's flags.
type demoOptions struct {
	dir, table, profile string
	mqttListen, mqttWS  string
	http                string
	pace, coupPace      time.Duration
	seed                uint64
	shoes               int
	ready               func(demoInfo) // tests: called once everything runs
	resultTime          time.Duration  // tests: how long a result stands (0: half the betting time)
	logTo               io.Writer
}

// demoInfo is where to look.
type demoInfo struct {
	MQTT, WS, HTTP, Prefix, Trail, Shoe, Key, Keyring, PitPassword string
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
		fs.PrintDefaults()
	}
	o := demoOptions{logTo: os.Stderr}
	fs.StringVar(&o.dir, "dir", "demo", "the `folder` for the trail, the keys and the shoe's link")
	fs.StringVar(&o.table, "table", "DEMO", "the table `ID`")
	fs.StringVar(&o.profile, "profile", coup.ProfileVIP, "the rule profile: classic, no-commission or vip")
	fs.StringVar(&o.mqttListen, "mqtt-listen", defaultMQTTListen, "the embedded broker's TCP `address`")
	fs.StringVar(&o.mqttWS, "mqtt-ws-listen", defaultMQTTWSListen, "the embedded broker's WebSocket `address`, or off")
	fs.StringVar(&o.http, "http", "127.0.0.1:8080", "the HTTP endpoints' `address`")
	fs.DurationVar(&o.pace, "pace", shoesim.DefaultCardPace, "the dealer's pace: the wait before each card and button")
	fs.DurationVar(&o.coupPace, "coup-pace", -1, "the betting time before each coup (default 5 x --pace)")
	fs.Uint64Var(&o.seed, "seed", 0, "shuffle seed (0: a new shoe each run)")
	fs.IntVar(&o.shoes, "shoes", 1, "shoes to deal, one after another")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return demo(ctx, o, stdout)
}

// demo runs until ctx is done.
func demo(ctx context.Context, o demoOptions, stdout io.Writer) error {
	if o.coupPace < 0 {
		o.coupPace = 5 * o.pace
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	profile, err := coup.BuiltinProfile(o.profile)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(o.logTo, &slog.HandlerOptions{Level: slog.LevelWarn})).With("table", o.table)
	// Device paths must be absolute.
	if o.dir, err = filepath.Abs(o.dir); err != nil {
		return err
	}
	keys := filepath.Join(o.dir, "keys")
	if err := os.MkdirAll(keys, 0o700); err != nil {
		return err
	}
	trail := filepath.Join(o.dir, "demo.db")
	if err := setAside(trail); err != nil {
		return err
	}
	cpKey, err := demoCheckpointKey(keys)
	if err != nil {
		return err
	}
	supKey, keyring, err := demoSupervisor(o.dir, keys)
	if err != nil {
		return err
	}

	link := filepath.Join(o.dir, "shoe")
	pty, err := shoesim.OpenPTY(link)
	if err != nil {
		return err
	}
	defer pty.Close()
	sim, err := shoesim.New(shoesim.Options{Seed: o.seed, Shoes: o.shoes, Decks: profile.Decks, CardPace: o.pace, CoupPace: o.coupPace},
		pty, shoesim.RealClock, log.With("part", "shoe"))
	if err != nil {
		return err
	}

	rawProfile, _ := json.Marshal(o.profile)
	c := Config{
		TableID: o.table,
		Profile: rawProfile,
		Shoe:    ShoeSection{Driver: shoesim.ProtocolV1, Port: device.Config{Path: link, Baud: shoesim.DefaultBaud[shoesim.ProtocolV1]}.WithDefaults()},
		Audit:   AuditSection{Path: trail, CheckpointKey: cpKey, CheckpointEvery: 50},
		HTTP:    HTTPSection{Listen: o.http, PitUser: "pit"},
		MQTT:    &MQTTSection{Listen: o.mqttListen, WSListen: o.mqttWS, Keyring: keyring},
	}
	if err := c.MQTT.complete(o.table, ""); err != nil {
		return err
	}
	tc := coup.DefaultTableConfig(profile)
	// The result stands for part of the betting time the simulated dealer
	// takes before the next coup, so its "no more bets" finds betting open.
	tc.ResultTime = o.coupPace / 2
	if o.resultTime > 0 {
		tc.ResultTime = o.resultTime
	}
	pitPassword := rand.Text()[:12]
	ctl, err := startController(ctx, c, tc, log.With("part", "controller"), controllerHooks{WebPitPassword: pitPassword})
	if err != nil {
		return err
	}
	info := demoInfo{MQTT: ctl.broker.URL(), WS: ctl.broker.WSURL(), HTTP: "http://" + ctl.ln.Addr().String(),
		Prefix: c.MQTT.Prefix, Trail: trail, Shoe: pty.Path(), Key: supKey, Keyring: keyring, PitPassword: pitPassword}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var ctlErr, simErr error
	wg.Add(2)
	go func() { defer wg.Done(); ctlErr = ctl.run(ctx) }()
	go func() {
		defer wg.Done()
		if simErr = sim.Run(ctx, true); errors.Is(simErr, context.Canceled) {
			simErr = nil
		}
	}()
	printDemo(stdout, info, o)
	if o.ready != nil {
		o.ready(info)
	}
	<-ctx.Done()
	wg.Wait()
	fmt.Fprintf(stdout, "\nstopped; the trail is %s (tablectl audit verify --db %s --pubkey %s)\n", trail, trail, pubOf(cpKey))
	return errors.Join(ctlErr, simErr)
}

func printDemo(w io.Writer, i demoInfo, o demoOptions) {
	host, port := splitHostPort(o.mqttListen, i.MQTT)
	fmt.Fprintf(w, `tablectl demo: table %s, a simulated shoe dealing at a dealer's pace.

  web display      %s/          (pit view %s/pit: user pit, password %s)
  MQTT broker      %s   (WebSocket: %s)
  topics           %s/#
                   watch: mosquitto_sub -h %s -p %s -t '%s/#' -v
  HTTP             %s/state  %s/recall  %s/health  %s/metrics
  audit trail      %s   (tablectl audit verify --db %s)
  shoe             %s (pseudo-terminal)
  supervisor key   %s   (keyring %s)
                   try:   go run ./cmd/tablectl suspend --broker %s --table %s --key %s --reason "a test"
                          go run ./cmd/tablectl resume --broker %s --table %s --key %s

Ctrl-C stops it.
`, o.table, i.HTTP, i.HTTP, i.PitPassword, i.MQTT, orOff(i.WS), i.Prefix, host, port, i.Prefix, i.HTTP, i.HTTP, i.HTTP, i.HTTP, i.Trail, i.Trail, i.Shoe,
		i.Key, i.Keyring, i.MQTT, o.table, i.Key, i.MQTT, o.table, i.Key)
}

func orOff(s string) string {
	if s == "" {
		return "off"
	}
	return s
}

func splitHostPort(listen, url string) (string, string) {
	addr := url
	if len(addr) > 6 && addr[:6] == "tcp://" {
		addr = addr[6:]
	}
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i], addr[i+1:]
		}
	}
	return listen, "1883"
}

// pubOf is the public key file beside a private one.
func pubOf(priv string) string { return filepath.Join(filepath.Dir(priv), audit.PublicKeyFile) }

// setAside renames a trail left by an earlier demo, so each demo starts a
// fresh table (a shoe interrupted mid-coup would hold the new one
// suspended) and no trail is ever deleted.
func setAside(trail string) error {
	if _, err := os.Stat(trail); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	old := fmt.Sprintf("%s.%s", trail[:len(trail)-len(filepath.Ext(trail))], time.Now().Format("20060102-150405"))
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Rename(trail+suffix, old+".db"+suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("set the last demo's trail aside: %w", err)
		}
	}
	os.Remove(trail + "-lock")
	return nil
}

// demoCheckpointKey makes the checkpoint key on the first run.
func demoCheckpointKey(dir string) (string, error) {
	priv := filepath.Join(dir, audit.PrivateKeyFile)
	if _, err := os.Stat(priv); err == nil {
		return priv, nil
	}
	p, _, err := audit.GenerateKey(dir)
	return p, err
}

// demoSupervisor makes a supervisor key on the first run and a keyring
// that holds it.
func demoSupervisor(dir, keys string) (key, keyring string, err error) {
	key = filepath.Join(keys, "demo.key")
	keyring = filepath.Join(dir, "supervisors.json")
	if _, err := os.Stat(key); errors.Is(err, os.ErrNotExist) {
		if _, _, _, err := signedcmd.GenerateKey(keys, "demo"); err != nil {
			return "", "", err
		}
	}
	priv, err := audit.LoadPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	entry, err := signedcmd.Entry("demo", priv.Public().(ed25519.PublicKey), []string{signedcmd.ActionsAll})
	if err != nil {
		return "", "", err
	}
	doc := fmt.Sprintf("{\"keys\": [\n  %s\n]}\n", entry)
	if err := os.WriteFile(keyring, []byte(doc), 0o644); err != nil {
		return "", "", err
	}
	return key, keyring, nil
}
