package controller

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
	"path/filepath"
	"sync"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/shoeread/shoesim"
	"github.com/tablectl/tablectl/signedcmd"
)

// DemoOptions are the demo's settings (tablectl demo's flags).
type DemoOptions struct {
	Dir, Table, Profile string
	MQTTListen, MQTTWS  string // the embedded broker's addresses ("off": no WebSocket)
	// WSOrigins are web origins besides the demo's own web display whose
	// pages may open the broker's WebSocket (mqtt.ws_origins).
	WSOrigins      []string
	HTTP           string
	Pace, CoupPace time.Duration // CoupPace < 0: 5 x Pace
	Seed           uint64        // 0: a new shoe each run
	Shoes          int
	Ready          func(DemoInfo) // called once everything runs
	ResultTime     time.Duration  // tests: how long a result stands (0: half the betting time)
	LogTo          io.Writer
	// Logger, when set, is the demo's logger (tablectl --log-level and
	// --log-format); nil logs warnings and errors as text to LogTo.
	Logger *slog.Logger
}

// DemoInfo is where to look.
type DemoInfo struct {
	Table, MQTT, WS, HTTP, Prefix, Trail, Shoe, Key, Keyring, PitPassword string
	// Officer and KeyringAuthority are the demo's security officer's key
	// pair: the private half signs the keyring (the demo signs its own;
	// on a real floor it stays off the box), the public half is
	// mqtt.keyring_authority.
	Officer, KeyringAuthority string
	// PitBrokerUser and PitBrokerPassword are the pit's broker login (it
	// reads pit/# and sends commands; without a login a client reads only
	// status and public/#); PitBrokerPasswordFile holds the password, for
	// the supervisor commands' --password-file.
	PitBrokerUser, PitBrokerPassword, PitBrokerPasswordFile string
	// CheckpointPub is the checkpoint key's public half, for audit verify.
	CheckpointPub string
	// SetAside is where an earlier demo's trail was moved (empty: there
	// was none): a demo starts a fresh table and deletes no trail.
	SetAside string
}

// Demo runs a whole table on this machine until ctx is done: a simulated
// shoe dealing at a dealer's pace on a pseudo-terminal, the controller
// reading it, the embedded broker, the trail in o.Dir (a trail left by an
// earlier demo is set aside) and the HTTP endpoints with the web display.
func Demo(ctx context.Context, o DemoOptions) error {
	if o.CoupPace < 0 {
		o.CoupPace = 5 * o.Pace
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	profile, err := coup.BuiltinProfile(o.Profile)
	if err != nil {
		return err
	}
	if o.LogTo == nil {
		o.LogTo = os.Stderr
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(o.LogTo, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	log = log.With("table", o.Table)
	// Device paths must be absolute.
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return err
	}
	keys := filepath.Join(o.Dir, "keys")
	if err := os.MkdirAll(keys, 0o700); err != nil {
		return err
	}
	trail := filepath.Join(o.Dir, "demo.db")
	aside, err := setAside(trail)
	if err != nil {
		return err
	}
	cpKey, err := demoCheckpointKey(keys)
	if err != nil {
		return err
	}
	supKey, keyring, officer, err := demoSupervisor(o.Dir, keys)
	if err != nil {
		return err
	}

	link := filepath.Join(o.Dir, "shoe")
	pty, err := shoesim.OpenPTY(link)
	if err != nil {
		return err
	}
	defer pty.Close()
	sim, err := shoesim.New(shoesim.Options{Seed: o.Seed, Shoes: o.Shoes, Decks: profile.Decks, CardPace: o.Pace, CoupPace: o.CoupPace},
		pty, clock.Real, log.With("part", "shoe"))
	if err != nil {
		return err
	}

	// The pit's broker login, new at each run, in a file the supervisor
	// commands read (--password-file).
	pitBrokerPassword := rand.Text()[:16]
	pitBrokerFile := filepath.Join(keys, "pit-broker.password")
	if err := os.WriteFile(pitBrokerFile, []byte(pitBrokerPassword+"\n"), 0o600); err != nil {
		return fmt.Errorf("the pit's broker password: %w", err)
	}

	rawProfile, _ := json.Marshal(o.Profile)
	c := config.Config{
		TableID: o.Table,
		Profile: rawProfile,
		Shoe:    config.ShoeSection{Driver: shoesim.ProtocolV1, Port: device.Config{Path: link, Baud: shoesim.DefaultBaud[shoesim.ProtocolV1]}.WithDefaults()},
		Audit:   config.AuditSection{Path: trail, CheckpointKey: cpKey},
		HTTP:    config.HTTPSection{Listen: o.HTTP, PitUser: "pit", PitBrokerUser: "pit", PitBrokerPasswordFile: pitBrokerFile},
		MQTT: &config.MQTTSection{Listen: o.MQTTListen, WSListen: o.MQTTWS, WSOrigins: o.WSOrigins, Keyring: keyring,
			KeyringAuthority: filepath.Join(keys, signedcmd.AuthorityPublicFile)},
	}
	// The demo is a development build: its manifest would be in its own
	// folder, and there is none, so it deals as "unsigned".
	c.SelfCheck.Manifest = filepath.Join(keys, "manifest.json")
	if err := c.MQTT.Complete(o.Table, ""); err != nil {
		return err
	}
	tc := coup.DefaultTableConfig(profile)
	// The result stands for part of the betting time the simulated dealer
	// takes before the next coup, so its "no more bets" finds betting open.
	tc.ResultTime = o.CoupPace / 2
	if o.ResultTime > 0 {
		tc.ResultTime = o.ResultTime
	}
	// One password for the pit, at the pit view and at the broker: the
	// demo's user is the pit's.
	pitPassword := pitBrokerPassword
	ctl, err := Start(ctx, c, tc, log.With("part", "controller"), Hooks{WebPitPassword: pitPassword})
	if err != nil {
		return err
	}
	// The simulated dealer stops while the table is suspended, as a dealer
	// would, and goes on once a supervisor resumes it; it calls "no more
	// bets" only once the table shows betting open and live (a call while
	// suspended is ignored by the table, and the coup's first card would
	// then find betting open: a misdeal no dealer made).
	sim.HoldWhile(func() bool {
		_, pit := ctl.Recorder().View()
		return pit.Suspended
	})
	sim.WaitForBetting(func() bool {
		_, pit := ctl.Recorder().View()
		return pit.Phase == coup.PhaseBettingOpen && !pit.Suspended
	})
	info := DemoInfo{Table: o.Table, CheckpointPub: pubOf(cpKey), MQTT: ctl.broker.URL(), WS: ctl.broker.WSURL(), HTTP: "http://" + ctl.ln.Addr().String(),
		Prefix: c.MQTT.Prefix, Trail: trail, Shoe: pty.Path(), Key: supKey, Keyring: keyring, PitPassword: pitPassword,
		Officer: officer, KeyringAuthority: c.MQTT.KeyringAuthority,
		PitBrokerUser: "pit", PitBrokerPassword: pitBrokerPassword, PitBrokerPasswordFile: pitBrokerFile, SetAside: aside}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var ctlErr, simErr error
	wg.Add(2)
	go func() { defer wg.Done(); ctlErr = ctl.Run(ctx) }()
	go func() {
		defer wg.Done()
		if simErr = sim.Run(ctx, true); errors.Is(simErr, context.Canceled) {
			simErr = nil
		}
	}()
	if o.Ready != nil {
		o.Ready(info)
	}
	<-ctx.Done()
	wg.Wait()
	return errors.Join(ctlErr, simErr)
}

// pubOf is the public key file beside a private one.
func pubOf(priv string) string { return filepath.Join(filepath.Dir(priv), audit.PublicKeyFile) }

// setAside renames a trail left by an earlier demo, so each demo starts a
// fresh table (a shoe interrupted mid-coup would hold the new one
// suspended) and no trail is ever deleted; it returns the new name (empty
// when there was none).
func setAside(trail string) (string, error) {
	if _, err := os.Stat(trail); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	old := fmt.Sprintf("%s.%s", trail[:len(trail)-len(filepath.Ext(trail))], time.Now().Format("20060102-150405"))
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Rename(trail+suffix, old+".db"+suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("set the last demo's trail aside: %w", err)
		}
	}
	os.Remove(trail + "-lock")
	return old + ".db", nil
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

// demoSupervisor makes a supervisor key and the security officer's key on
// the first run, and a keyring that holds the supervisor, signed by the
// officer's key (the demo is its own officer).
func demoSupervisor(dir, keys string) (key, keyring, officer string, err error) {
	key = filepath.Join(keys, "demo.key")
	keyring = filepath.Join(dir, "supervisors.json")
	officer = filepath.Join(keys, signedcmd.AuthorityKeyFile)
	if _, err := os.Stat(key); errors.Is(err, os.ErrNotExist) {
		if _, _, _, err := signedcmd.GenerateKey(keys, "demo"); err != nil {
			return "", "", "", err
		}
	}
	if _, err := os.Stat(officer); errors.Is(err, os.ErrNotExist) {
		if _, _, err := signedcmd.GenerateAuthority(keys); err != nil {
			return "", "", "", err
		}
	}
	priv, err := audit.LoadPrivateKey(key)
	if err != nil {
		return "", "", "", err
	}
	officerKey, err := audit.LoadPrivateKey(officer)
	if err != nil {
		return "", "", "", err
	}
	entry, err := signedcmd.Entry("demo", priv.Public().(ed25519.PublicKey), []string{signedcmd.ActionsAll})
	if err != nil {
		return "", "", "", err
	}
	doc, _, err := signedcmd.SignKeyring(fmt.Appendf(nil, "{\"keys\": [\n  %s\n]}\n", entry), officerKey, 0, time.Now())
	if err != nil {
		return "", "", "", err
	}
	if err := os.WriteFile(keyring, doc, 0o644); err != nil {
		return "", "", "", err
	}
	return key, keyring, officer, nil
}
