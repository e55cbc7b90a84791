package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/internal/mqttbroker"
	"github.com/tablectl/tablectl/internal/pkcs11signer"
	"github.com/tablectl/tablectl/internal/smallfile"
	"github.com/tablectl/tablectl/shoeread"
	"github.com/tablectl/tablectl/signedcmd"
)

// MaxConfig bounds the controller's config file.
const MaxConfig = 256 << 10

// Config is the controller's config file (deploy/tablectl.json is the
// documented example).
type Config struct {
	// TableID names the table in the trail, checkpoints and topics.
	TableID string `json:"table_id"`
	// Profile is a built-in profile's name ("vip") or a profile config
	// object (a built-in and overrides; see coup.ParseProfile).
	Profile json.RawMessage `json:"profile"`
	Table   TableSection    `json:"table"`
	Shoe    ShoeSection     `json:"shoe"`
	Audit   AuditSection    `json:"audit"`
	HTTP    HTTPSection     `json:"http"`
	// MQTT is publishing and commands. Without the section (or with no
	// broker in it) the controller runs the embedded broker; "disabled"
	// turns MQTT off.
	MQTT *MQTTSection `json:"mqtt"`
	// SelfCheck is program self-authentication (selfcheck.go).
	SelfCheck SelfCheckSection `json:"self_check"`

	// file is the config file read (Load), which the self-check
	// hashes; "" for a config made in code (the demo).
	file string
}

// MQTTSection is the broker the table publishes to and takes commands from
// (docs/mqtt.md).
type MQTTSection struct {
	// Disabled turns MQTT off altogether.
	Disabled bool `json:"disabled,omitempty"`
	// Broker is the broker's URL: tcp://host:1883, ssl://host:8883,
	// ws://host/mqtt, wss://...; empty runs the embedded broker.
	Broker string `json:"broker"`
	// Listen and WSListen are the embedded broker's TCP and WebSocket
	// addresses ("off" leaves the WebSocket listener out).
	Listen   string `json:"listen"`
	WSListen string `json:"ws_listen"`
	// WSOrigins are the web origins ("http://table7.local:8080") besides
	// the controller's own web display whose pages may open the embedded
	// broker's WebSocket; a page of any other origin is refused.
	WSOrigins []string `json:"ws_origins,omitempty"`
	// Prefix is the topic prefix; default tablectl/<table_id>.
	Prefix string `json:"prefix"`
	// ClientID defaults to tablectl-<table_id>.
	ClientID string `json:"client_id"`
	Username string `json:"username"`
	// PasswordFile holds the broker password (one line), so the config
	// file holds no secret.
	PasswordFile string `json:"password_file"`
	// CAFile is the PEM bundle that signs the broker's certificate;
	// CertFile and KeyFile a client certificate, if the broker wants one.
	CAFile   string `json:"ca_file"`
	CertFile string `json:"cert_file"`
	KeyFile  string `json:"key_file"`
	// Keyring is the supervisors' public keys (deploy/supervisors.json);
	// without one every command is refused.
	Keyring string `json:"keyring"`
	// KeyringAuthority is the security officer's public key (PEM; one or
	// more), whose private half signs the keyring off the box: the
	// controller takes no keyring it did not sign. Required with Keyring.
	KeyringAuthority string `json:"keyring_authority,omitempty"`
	// CommandWindow is how far a command's issued_at may be from the
	// controller's clock; default 2m.
	CommandWindow Duration `json:"command_window"`
	// Queue is how many commits wait for the publisher before it reads
	// them back from the trail; default 4096.
	Queue int `json:"queue"`
	// ClientCommandBurst and ClientCommandEvery hold each client of the
	// embedded broker to a rate on cmd: a burst, then one message every
	// interval; more are dropped at the broker (and counted). Defaults 30
	// and 100ms; a negative burst turns the limit off. Only for the
	// embedded broker: MQTT 3.1.1 does not tell a subscriber who published,
	// so a configured broker must limit its clients itself.
	ClientCommandBurst int      `json:"client_command_burst,omitempty"`
	ClientCommandEvery Duration `json:"client_command_every,omitempty"`
	// MaxConnections and MaxConnectionsPerClient cap the embedded broker's
	// connections open at once, on each of its listeners (TCP and
	// WebSocket), in all and from one client address; defaults 512 and 32.
	MaxConnections          int `json:"max_connections,omitempty"`
	MaxConnectionsPerClient int `json:"max_connections_per_client,omitempty"`
}

// Defaults of the embedded broker's limit on each client's commands: far
// above what a supervisor or the game server sends.
const (
	DefaultClientCommandBurst = 30
	DefaultClientCommandEvery = 100 * time.Millisecond
)

// Defaults of the caps on connections: the table's screens and pit are a
// handful of clients, each a few connections; a casino network's NAT may
// put several screens behind one address.
const (
	DefaultHTTPMaxConnections          = 256
	DefaultHTTPMaxConnectionsPerClient = 32
	DefaultMQTTMaxConnections          = 512
	DefaultMQTTMaxConnectionsPerClient = 32
)

// ConnectionCaps fills in the defaults of a listener's caps and checks
// them: positive, the one per client no more than the total.
func ConnectionCaps(section string, total, perClient *int, defTotal, defPerClient int) error {
	if *total == 0 {
		*total = defTotal
	}
	if *perClient == 0 {
		*perClient = min(defPerClient, *total)
	}
	if *total < 0 || *perClient < 0 || *perClient > *total {
		return fmt.Errorf("%s.max_connections (%d) and max_connections_per_client (%d): want positive, the one per client no more than the total", section, *total, *perClient)
	}
	return nil
}

// Defaults of the embedded broker: beside, not on, the standard ports, so
// that it never collides with a Mosquitto on the same machine.
const (
	DefaultMQTTListen   = "127.0.0.1:1884"
	DefaultMQTTWSListen = "127.0.0.1:8084"
)

// TableSection is the house procedure around the coup.
type TableSection struct {
	Burn             string   `json:"burn"`                // first_card, fixed, none
	BurnCount        int      `json:"burn_count"`          // for fixed
	BurnDoneByButton *bool    `json:"burn_done_by_button"` // default true
	CutCard          string   `json:"cut_card"`            // one_more, finish
	Reveal           string   `json:"reveal"`              // button, immediate
	BettingTime      Duration `json:"betting_time"`        // 0: button or game server closes betting
	ResultTime       Duration `json:"result_time"`         // default 3s
}

// ShoeSection is the shoe: its protocol and its port.
type ShoeSection struct {
	Driver string        `json:"driver"` // v1, beetek
	Port   device.Config `json:"port"`
}

// AuditSection is the trail and its checkpoint key.
type AuditSection struct {
	// Path is the trail as one SQLite file (a version 1 trail stays one).
	Path string `json:"path,omitempty"`
	// Dir keeps the trail as a directory of sealed segments, one per
	// gaming day (docs/audit.md, "Segments"). With Path too, the file at
	// Path is sealed and moved into Dir as its first segment at the first
	// start, and the chain goes on there.
	Dir string `json:"dir,omitempty"`
	// SegmentCutover is the time of day ("06:00") the gaming day begins,
	// in SegmentZone: the trail is cut at the first moment after it that
	// the table is between coups. Default 06:00.
	SegmentCutover string `json:"segment_cutover,omitempty"`
	// SegmentZone is the IANA zone SegmentCutover is read in; default UTC.
	SegmentZone string `json:"segment_zone,omitempty"`
	// SegmentEveryShoes, when set, also cuts once this many shoes have
	// ended in the live segment, at the last one's end.
	SegmentEveryShoes int `json:"segment_every_shoes,omitempty"`
	// ArchiveDir receives a verified copy of each sealed segment.
	ArchiveDir string `json:"archive_dir,omitempty"`
	// ArchiveCommand is run with a sealed segment's path as its last
	// argument; exit status 0 means archived.
	ArchiveCommand []string `json:"archive_command,omitempty"`
	// KeepDays is how many days of archived segments stay on the box; 0
	// keeps them all. Never a segment not archived.
	KeepDays int `json:"keep_days,omitempty"`
	// CheckpointKey is the Ed25519 key that signs checkpoints: a PEM private
	// key file (keep it outside the trail's directory) or a PKCS#11 URI
	// naming a key that never leaves its token (docs/audit.md). Empty
	// writes no checkpoints.
	CheckpointKey string `json:"checkpoint_key"`
	// CheckpointEvery is read only to warn about it: every commit now
	// carries a signed checkpoint of its own head, so a row after the last
	// checkpoint is a row the controller did not write.
	CheckpointEvery int64 `json:"checkpoint_every,omitempty"`
	// FreeSpaceFloorMB is the free space (MiB) under the trail below which
	// the pit is warned (a ctl.disk_low row and a pit/alerts alert); 0 is
	// 10% of the file system, at most 2 GiB.
	FreeSpaceFloorMB int64 `json:"free_space_floor_mb,omitempty"`
	// SnapshotEvery is how many rows may pass between two snapshots of the
	// table in the trail (a start replays at most about that many); 0 is
	// 20,000.
	SnapshotEvery int64 `json:"snapshot_every,omitempty"`
}

// HTTPSection is the controller's read-only HTTP endpoints.
type HTTPSection struct {
	Listen string `json:"listen"` // e.g. 127.0.0.1:8080; empty serves none
	// CertFile and KeyFile (PEM) serve the listener over TLS (HTTPS): for
	// screens on other machines without a proxy in front.
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
	// The web display, served at / with MQTT on. BrowserWS is the broker's
	// MQTT-over-WebSocket URL as a browser reaches it (default: the embedded
	// broker's; with an external broker, set it or the page is not served).
	BrowserWS string `json:"browser_ws"`
	// DisplayUser/DisplayPasswordFile and PitBrokerUser/PitBrokerPasswordFile
	// are the broker logins the public page and the pit view use (the
	// Mosquitto ACL's display and pit users). On the embedded broker they
	// are its logins too; without them the public page reads anonymously
	// and the pit's login is "pit" with a password made at each start.
	DisplayUser           string `json:"display_user"`
	DisplayPasswordFile   string `json:"display_password_file"`
	PitBrokerUser         string `json:"pit_broker_user"`
	PitBrokerPasswordFile string `json:"pit_broker_password_file"`
	// PitUser and PitPasswordFile guard the pit view (/pit) and /recall with
	// HTTP basic auth; without them the pit view is off.
	PitUser         string `json:"pit_user"`
	PitPasswordFile string `json:"pit_password_file"`
	// DisplayLanguage is the public screens' language, unless a screen
	// says its own (?lang=): "en" (the default), "zh-Hans", "zh-Hant".
	DisplayLanguage string `json:"display_language,omitempty"`
	// MaxConnections and MaxConnectionsPerClient cap the connections open
	// at once, in all and from one client address; defaults 256 and 32.
	MaxConnections          int `json:"max_connections,omitempty"`
	MaxConnectionsPerClient int `json:"max_connections_per_client,omitempty"`
}

// Load reads and parses the config file at path (at most MaxConfig
// bytes); relative paths in it are taken from its folder.
func Load(path string) (Config, coup.TableConfig, error) {
	data, err := smallfile.Read(path, MaxConfig)
	if err != nil {
		return Config{}, coup.TableConfig{}, err
	}
	c, tc, err := Parse(data, filepath.Dir(path))
	if err != nil {
		// Say where: line, column and key (tablectl config check says all).
		if fs := Locate(data); len(fs) > 0 {
			err = &ConfigError{Findings: fs}
		}
		return Config{}, coup.TableConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	if c.file, err = filepath.Abs(path); err != nil {
		return Config{}, coup.TableConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, tc, nil
}

// MQTTOverride is what the command line says of MQTT (tablectl run's
// --broker, --mqtt-listen and --mqtt-ws-listen).
type MQTTOverride struct {
	Broker, Listen, WSListen string
}

// OverrideMQTT puts what the command line says of MQTT over the config
// file's mqtt section: a broker URL, or the embedded broker's TCP and
// WebSocket addresses (empty strings leave the file's). Either turns MQTT
// on when the file has no section.
func (c *Config) OverrideMQTT(o MQTTOverride) error {
	broker, listen, wsListen := o.Broker, o.Listen, o.WSListen
	if broker == "" && listen == "" && wsListen == "" {
		return nil
	}
	if c.MQTT == nil {
		// The flags turn MQTT on, as the section would.
		c.MQTT = &MQTTSection{}
		if err := c.MQTT.Complete(c.TableID, ""); err != nil {
			return err
		}
	}
	if broker != "" {
		if listen != "" || wsListen != "" {
			return fmt.Errorf("--mqtt-listen and --mqtt-ws-listen are for the embedded broker, not with --broker")
		}
		c.MQTT.Broker, c.MQTT.Listen, c.MQTT.WSListen, c.MQTT.WSOrigins = broker, "", "", nil
		return nil
	}
	if c.MQTT.Broker != "" {
		return fmt.Errorf("the config file names a broker (mqtt.broker); --mqtt-listen and --mqtt-ws-listen are for the embedded one")
	}
	if listen != "" {
		c.MQTT.Listen = listen
	}
	if wsListen != "" {
		c.MQTT.WSListen = wsListen
	}
	return nil
}

// Parse reads a config document strictly: unknown fields are errors.
// Relative paths are taken from dir (the config file's folder).
func Parse(data []byte, dir string) (Config, coup.TableConfig, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, coup.TableConfig{}, fmt.Errorf("config: %w", err)
	}
	if dec.More() {
		return c, coup.TableConfig{}, errors.New("config: text after the JSON document")
	}
	var errs []error
	if c.TableID == "" {
		errs = append(errs, errors.New("table_id is required"))
	}
	p, err := profileOf(c.Profile)
	if err != nil {
		errs = append(errs, fmt.Errorf("profile: %w", err))
	}
	tc := coup.DefaultTableConfig(p)
	if c.Table.Burn != "" {
		tc.Burn = c.Table.Burn
	}
	tc.BurnCount = c.Table.BurnCount
	if c.Table.BurnDoneByButton != nil {
		tc.BurnDoneByButton = *c.Table.BurnDoneByButton
	}
	if c.Table.CutCard != "" {
		tc.CutCard = c.Table.CutCard
	}
	if c.Table.Reveal != "" {
		tc.Reveal = c.Table.Reveal
	}
	tc.BettingTime = time.Duration(c.Table.BettingTime)
	if c.Table.ResultTime != 0 {
		tc.ResultTime = time.Duration(c.Table.ResultTime)
	}
	if err == nil {
		if err := tc.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("table: %w", err))
		}
	}
	if c.Shoe.Driver == "" {
		c.Shoe.Driver = "v1"
	}
	if _, err := shoeread.New(c.Shoe.Driver); err != nil {
		errs = append(errs, fmt.Errorf("shoe.driver: %w", err))
	}
	c.Shoe.Port = c.Shoe.Port.WithDefaults()
	if err := c.Shoe.Port.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("shoe.port: %w", err))
	}
	errs = append(errs, c.Audit.complete(dir))
	if c.Audit.SnapshotEvery < 0 || c.Audit.FreeSpaceFloorMB < 0 {
		errs = append(errs, errors.New("audit.snapshot_every and audit.free_space_floor_mb must not be negative"))
	}
	c.HTTP.DisplayPasswordFile = under(dir, c.HTTP.DisplayPasswordFile)
	c.HTTP.PitBrokerPasswordFile = under(dir, c.HTTP.PitBrokerPasswordFile)
	c.HTTP.PitPasswordFile = under(dir, c.HTTP.PitPasswordFile)
	c.HTTP.CertFile, c.HTTP.KeyFile = under(dir, c.HTTP.CertFile), under(dir, c.HTTP.KeyFile)
	if (c.HTTP.CertFile == "") != (c.HTTP.KeyFile == "") {
		errs = append(errs, errors.New("http.cert_file and http.key_file go together"))
	}
	switch c.HTTP.DisplayLanguage {
	case "", "en", "zh-Hans", "zh-Hant":
	default:
		errs = append(errs, fmt.Errorf("http.display_language %q: want en, zh-Hans or zh-Hant", c.HTTP.DisplayLanguage))
	}
	if (c.HTTP.PitUser == "") != (c.HTTP.PitPasswordFile == "") {
		errs = append(errs, errors.New("http.pit_user and http.pit_password_file go together"))
	}
	errs = append(errs, ConnectionCaps("http", &c.HTTP.MaxConnections, &c.HTTP.MaxConnectionsPerClient,
		DefaultHTTPMaxConnections, DefaultHTTPMaxConnectionsPerClient))
	if pkcs11signer.IsURI(c.Audit.CheckpointKey) {
		if _, err := pkcs11signer.ParseURI(c.Audit.CheckpointKey); err != nil {
			errs = append(errs, fmt.Errorf("audit.checkpoint_key: %w", err))
		}
	} else {
		c.Audit.CheckpointKey = under(dir, c.Audit.CheckpointKey)
	}
	// No broker configured: the embedded one, so the table is never dark.
	if c.MQTT == nil {
		c.MQTT = &MQTTSection{}
	}
	if c.MQTT.Disabled {
		c.MQTT = nil
	}
	if c.MQTT != nil {
		errs = append(errs, c.MQTT.Complete(c.TableID, dir))
	}
	errs = append(errs, c.SelfCheck.Complete(dir))
	return c, tc, errors.Join(errs...)
}

// Complete fills in the defaults and checks the section; relative paths
// are taken from dir.
func (m *MQTTSection) Complete(table, dir string) error {
	var errs []error
	if m.Broker == "" {
		if m.Listen == "" {
			m.Listen = DefaultMQTTListen
		}
		if m.WSListen == "" {
			m.WSListen = DefaultMQTTWSListen
		}
		if m.ClientCommandBurst == 0 {
			m.ClientCommandBurst = DefaultClientCommandBurst
		}
		if m.ClientCommandEvery == 0 {
			m.ClientCommandEvery = Duration(DefaultClientCommandEvery)
		}
		errs = append(errs, ConnectionCaps("mqtt", &m.MaxConnections, &m.MaxConnectionsPerClient,
			DefaultMQTTMaxConnections, DefaultMQTTMaxConnectionsPerClient))
	} else {
		if m.Listen != "" || m.WSListen != "" || len(m.WSOrigins) > 0 {
			errs = append(errs, errors.New("mqtt: listen, ws_listen and ws_origins are for the embedded broker; with mqtt.broker set, leave them out"))
		}
		if m.ClientCommandBurst != 0 || m.ClientCommandEvery != 0 {
			errs = append(errs, errors.New("mqtt: client_command_burst and client_command_every are for the embedded broker; with mqtt.broker set, limit clients at the broker"))
		}
		if m.MaxConnections != 0 || m.MaxConnectionsPerClient != 0 {
			errs = append(errs, errors.New("mqtt: max_connections and max_connections_per_client are for the embedded broker; with mqtt.broker set, cap connections at the broker (Mosquitto's max_connections)"))
		}
	}
	for i, o := range m.WSOrigins {
		n, err := mqttbroker.NormalizeOrigin(o)
		if err != nil {
			errs = append(errs, fmt.Errorf("mqtt.ws_origins: %w", err))
			continue
		}
		m.WSOrigins[i] = n
	}
	if m.ClientCommandEvery < 0 {
		errs = append(errs, errors.New("mqtt.client_command_every must not be negative"))
	}
	if m.Prefix == "" {
		m.Prefix = mqttpub.DefaultPrefix(table)
	}
	if err := mqttpub.CheckPrefix(m.Prefix); err != nil {
		errs = append(errs, fmt.Errorf("mqtt.prefix: %w", err))
	}
	if m.ClientID == "" {
		m.ClientID = "tablectl-" + table
	}
	if m.CommandWindow < 0 {
		errs = append(errs, errors.New("mqtt.command_window must not be negative"))
	}
	if m.CommandWindow == 0 {
		m.CommandWindow = Duration(signedcmd.DefaultWindow)
	}
	if m.Queue < 0 {
		errs = append(errs, errors.New("mqtt.queue must not be negative"))
	}
	m.PasswordFile = under(dir, m.PasswordFile)
	m.CAFile = under(dir, m.CAFile)
	m.CertFile = under(dir, m.CertFile)
	m.KeyFile = under(dir, m.KeyFile)
	m.Keyring = under(dir, m.Keyring)
	m.KeyringAuthority = under(dir, m.KeyringAuthority)
	if m.Keyring != "" && m.KeyringAuthority == "" {
		errs = append(errs, errors.New("mqtt.keyring_authority is required with mqtt.keyring: the security officer's public key, "+
			"whose private half signs the keyring off the box (docs/operations.md, \"Supervisors' keys\")"))
	}
	return errors.Join(errs...)
}

func under(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// profileOf reads the profile field: a name, or a profile config object.
func profileOf(raw json.RawMessage) (coup.Profile, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return coup.Profile{}, errors.New("is required: a built-in name or a profile config")
	}
	if raw[0] == '"' {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return coup.Profile{}, err
		}
		return coup.BuiltinProfile(name)
	}
	return coup.ParseProfile(raw)
}

// complete checks the trail's keys and takes relative paths from dir.
func (a *AuditSection) complete(dir string) error {
	var errs []error
	switch {
	case a.Path == "" && a.Dir == "":
		errs = append(errs, errors.New("audit.path or audit.dir is required"))
	}
	a.Path, a.Dir, a.ArchiveDir = under(dir, a.Path), under(dir, a.Dir), under(dir, a.ArchiveDir)
	if a.Dir == "" && (a.SegmentCutover != "" || a.SegmentZone != "" || a.SegmentEveryShoes != 0 || a.ArchiveDir != "" || len(a.ArchiveCommand) > 0 || a.KeepDays != 0) {
		errs = append(errs, errors.New("audit.path: segment_cutover, segment_zone, segment_every_shoes, archive_dir, archive_command and keep_days go with audit.dir, not a trail in one file"))
	}
	if _, err := a.Segments(); err != nil {
		errs = append(errs, err)
	}
	if a.KeepDays < 0 {
		errs = append(errs, errors.New("audit.keep_days: must not be negative"))
	}
	if a.ArchiveDir != "" && a.Dir != "" && filepath.Clean(a.ArchiveDir) == filepath.Clean(a.Dir) {
		errs = append(errs, errors.New("audit.archive_dir: the trail's own directory: archive elsewhere (another disk or a network share)"))
	}
	if a.SegmentEveryShoes < 0 {
		errs = append(errs, errors.New("audit.segment_every_shoes: must not be negative"))
	}
	if a.KeepDays > 0 && a.ArchiveDir == "" && len(a.ArchiveCommand) == 0 {
		errs = append(errs, errors.New("audit.keep_days: deletes archived segments: set audit.archive_dir or audit.archive_command"))
	}
	if len(a.ArchiveCommand) > 0 && a.ArchiveCommand[0] == "" {
		errs = append(errs, errors.New("audit.archive_command: the command is empty"))
	}
	return errors.Join(errs...)
}

// Trail is the trail's path: the directory of segments, or the file.
func (a *AuditSection) Trail() string {
	if a.Dir != "" {
		return a.Dir
	}
	return a.Path
}

// Segments is the cut-over policy of a directory trail; nil for a file.
func (a *AuditSection) Segments() (*audit.SegmentPolicy, error) {
	if a.Dir == "" {
		return nil, nil
	}
	cut := a.SegmentCutover
	if cut == "" {
		cut = "06:00"
	}
	t, err := time.Parse("15:04", cut)
	if err != nil {
		return nil, fmt.Errorf("audit.segment_cutover: %q: want HH:MM", a.SegmentCutover)
	}
	p := &audit.SegmentPolicy{Cutover: time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute, Location: time.UTC,
		EveryShoes: a.SegmentEveryShoes}
	if a.SegmentZone != "" {
		if p.Location, err = time.LoadLocation(a.SegmentZone); err != nil {
			return nil, fmt.Errorf("audit.segment_zone: %w", err)
		}
	}
	return p, nil
}

// File is the config file the config was read from (Load), which the
// self-check hashes; "" for a config made in code.
func (c Config) File() string { return c.file }
