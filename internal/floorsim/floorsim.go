// Package floorsim runs a whole floor on one machine: a NATS cluster
// (internal/natsserver), N tables (a simulated shoe on a pseudo-terminal,
// a controller process, a Mosquitto bridged to the cluster as
// deploy/mosquitto/bridge.conf says), two or more witnesses (package
// floor, in this process or as tablectl-floor witness processes) storing into
// PostgreSQL or SQLite. It plays the faults of the floor's proof (a node
// killed, a witness process killed -9, a bridge cut, a controller killed
// -9, a trail rewritten and re-signed on its box) for the floor's test
// and bench, and is the laptop demo's floor.
package floorsim

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/mattn/go-sqlite3"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/floor"
	"github.com/tablectl/tablectl/internal/floorbridge"
	"github.com/tablectl/tablectl/internal/freeport"
	"github.com/tablectl/tablectl/internal/logtail"
	"github.com/tablectl/tablectl/internal/natsserver"
	"github.com/tablectl/tablectl/shoeread/shoesim"
	"github.com/tablectl/tablectl/signedcmd"
)

// WitnessKeyName is the witness's name in every table's keyring: it may
// sign resync only.
const WitnessKeyName = "floor-witness"

// Options say what floor to run.
type Options struct {
	// Logins runs the cluster as a floor runs it: the node config as
	// shipped (natsserver.StartFloor: every listener TLS with a CA made
	// for the run, the routes verifying each other) and the floor's logins
	// (floor.AuthConfig): each table's controller or bridge and each
	// witness on its own, the streams made with the admin's, no anonymous
	// client, no plaintext.
	Logins   bool
	Dir      string
	Tables   int
	Nodes    int // NATS nodes (3)
	Witness  int // witnesses (2)
	Batch    int // the witnesses' batch (floor.DefaultBatch)
	CardPace time.Duration
	CoupPace time.Duration
	Seed     uint64
	// Shuffle is how the tables' simulated shoes are prepared (shuffled
	// by default; shoesim.ShuffleRecut re-uses each shoe, cut).
	Shuffle shoesim.ShuffleMode
	// Postgres is the database URL; Schema the floor's schema in it.
	// Without it the store is SQLite, Dir/floor.db (the laptop demo).
	Postgres, Schema string
	// EmbeddedNATS runs the cluster's nodes in this process
	// (nats-server as a library) instead of Debian's nats-server binary.
	EmbeddedNATS bool
	// Bridge is the text of deploy/mosquitto/bridge.conf, made into each
	// table's bridge (its id, the cluster's MQTT listeners, no TLS).
	Bridge string
	// Proxied tables reach the cluster through a proxy the rig can cut.
	Proxied map[int]bool
	// StartBroker runs a table's Mosquitto on a config file (which logs
	// to stderr at information level) and returns once it listens: the
	// tests' internal/mosquitto.Start. Without it the tables connect
	// straight to the cluster's MQTT listeners (the laptop demo).
	StartBroker func(conf string) (Broker, error)
	// WitnessExe is a tablectl-floor binary; the witnesses in WitnessProcs run
	// as its own processes (WitnessExe witness ...), killed with SIGKILL
	// by KillWitness. The others run in this process.
	WitnessExe   string
	WitnessProcs map[int]bool
	// WitnessHTTP has the witness processes serve the floor view
	// (--http on loopback, behind ViewLogin; over HTTPS with a certificate
	// of the floor's CA with Logins).
	WitnessHTTP bool
	// Exe and Env run a controller: Exe run --config FILE.
	Exe       string
	Env       []string
	Heartbeat time.Duration
	Log       *slog.Logger
	OnAlert   func(floor.Alert)
}

// Broker is a table's Mosquitto.
type Broker interface {
	Kill()
	Log() string
}

// Floor is a running floor.
type Floor struct {
	// Logins are the floor broker's logins (Options.Logins; empty without).
	Logins floor.Logins
	// TLS are the floor's CA and the nodes' certificate (Options.Logins;
	// empty without): every client trusts TLS.CAFile.
	TLS     natsserver.TLS
	o       Options
	Cluster *natsserver.Cluster
	// Pool is the PostgreSQL store's pool (nil with SQLite).
	Pool     *pgxpool.Pool
	Store    floor.Store
	Registry *floor.Registry
	Tables   []*Table
	key      ed25519.PrivateKey
	// authority is the floor's security officer's public key file, every
	// table's mqtt.keyring_authority.
	authority string
	log       *slog.Logger

	// ViewLogin is the floor view's login (Options.WitnessHTTP).
	ViewLogin floor.Login

	mu              sync.Mutex
	witnesses       []*witnessRun
	deadWitnessLogs []string
}

type witnessRun struct {
	w      *floor.Witness // in this process
	cmd    *exec.Cmd      // or a process of its own
	view   string         // where its floor view serves (Options.WitnessHTTP)
	log    *logtail.Buffer
	cancel context.CancelFunc
	done   chan struct{}
}

// Table is one table of the floor.
type Table struct {
	ID, Dir, Trail, Config, PubKey, PrivKey string
	f                                       *Floor
	mosq                                    Broker
	mosqConf                                string
	proxy                                   *Proxy
	pty                                     *shoesim.PTY
	simDone                                 chan struct{}
	simStop                                 context.CancelFunc

	mu   sync.Mutex
	ctl  *exec.Cmd
	done chan struct{}
	logs []*logtail.Buffer
}

// Start runs the floor. Stop it with Close.
func Start(ctx context.Context, o Options) (_ *Floor, err error) {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Witness == 0 {
		o.Witness = 2
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = floor.DefaultHeartbeat
	}
	f := &Floor{o: o, log: o.Log, Registry: &floor.Registry{Heartbeat: o.Heartbeat, Tables: map[string]floor.TableEntry{}}}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	if err := os.MkdirAll(filepath.Join(o.Dir, "nats"), 0o700); err != nil {
		return nil, err
	}
	var auth string
	if o.Logins {
		if auth, err = f.makeLogins(); err != nil {
			return nil, err
		}
		if f.TLS, err = makeTLS(filepath.Join(o.Dir, "tls")); err != nil {
			return nil, err
		}
	}
	if o.Logins {
		f.Cluster, err = natsserver.StartFloor(ctx, filepath.Join(o.Dir, "nats"), natsserver.Options{Nodes: o.Nodes, Auth: auth, TLS: f.TLS, Embedded: o.EmbeddedNATS})
	} else if o.EmbeddedNATS {
		f.Cluster, err = natsserver.StartEmbeddedAuth(ctx, filepath.Join(o.Dir, "nats"), o.Nodes, auth)
	} else {
		f.Cluster, err = natsserver.StartAuth(ctx, filepath.Join(o.Dir, "nats"), o.Nodes, auth)
	}
	if err != nil {
		return nil, err
	}
	if o.Postgres != "" {
		if f.Pool, err = pgxpool.New(ctx, o.Postgres); err != nil {
			return nil, fmt.Errorf("floor database: %w", err)
		}
		if f.Store, err = floor.OpenStore(ctx, f.Pool, o.Schema); err != nil {
			return nil, err
		}
	} else if f.Store, err = floor.OpenSQLiteStore(ctx, filepath.Join(o.Dir, "floor.db")); err != nil {
		return nil, err
	}
	_, f.key, _ = ed25519.GenerateKey(nil)
	keyring, _ := json.Marshal(map[string]any{"keys": []map[string]any{{"name": WitnessKeyName,
		"public_key": base64.StdEncoding.EncodeToString(f.key.Public().(ed25519.PublicKey)), "actions": []string{"resync"}}}})
	// The floor's security officer signs the tables' keyring.
	if keyring, f.authority, err = officerSigned(filepath.Join(o.Dir, "officer"), keyring); err != nil {
		return nil, err
	}
	for i := range o.Tables {
		t, err := f.newTable(ctx, i, keyring)
		if err != nil {
			return nil, err
		}
		f.Tables = append(f.Tables, t)
	}
	if o.Logins {
		// The streams and the consumer are the admin's to make.
		cfg := f.WitnessConfig(0)
		cfg.Name, cfg.NATSOptions, cfg.ShoeKeep = "admin", f.NATSOptions(f.Logins.Admin), -1
		w, err := floor.New(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("the admin's streams: %w", err)
		}
		w.Close()
	}
	// The stream first, so nothing a table publishes is missed.
	for i := range o.Witness {
		if err := f.StartWitness(ctx, i); err != nil {
			return nil, err
		}
	}
	// And the stream ready to store: NATS acknowledges a QoS 1 publish on
	// the MQTT listener before the stream has it, so rows published while
	// a stream just made has no leader yet (a loaded machine: seconds) are
	// lost at the door and come back only by a resync (docs/floor.md).
	if err := f.streamReady(ctx); err != nil {
		return nil, err
	}
	for _, t := range f.Tables {
		if err := t.startMosquitto(); err != nil {
			return nil, err
		}
		if err := t.Start(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// streamReady waits until the floor's stream has a leader and every
// replica is current.
func (f *Floor) streamReady(ctx context.Context) error {
	cfg := f.WitnessConfig(0)
	nc, err := nats.Connect(cfg.NATS, cfg.NATSOptions...)
	if err != nil {
		return fmt.Errorf("the stream's state: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		why := streamNotReady(ctx, js)
		if why == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the floor's stream not ready to store after a minute: %s", why)
		case <-tick.C:
		}
	}
}

// streamNotReady says why the floor's stream cannot store yet ("": it
// can).
func streamNotReady(ctx context.Context, js jetstream.JetStream) string {
	s, err := js.Stream(ctx, floor.DefaultStream)
	if err != nil {
		return err.Error()
	}
	si, err := s.Info(ctx)
	switch {
	case err != nil:
		return err.Error()
	case si.Cluster == nil:
		return "" // one node, no cluster
	case si.Cluster.Leader == "":
		return "no leader"
	}
	for _, r := range si.Cluster.Replicas {
		if !r.Current {
			return "replica " + r.Name + " not current"
		}
	}
	return ""
}

// WitnessConfig is the witnesses' config, for one more started by hand.
func (f *Floor) WitnessConfig(i int) floor.Config {
	c := floor.Config{Name: fmt.Sprintf("witness-%d", i+1), NATS: f.Cluster.URLs(), Replicas: min(3, f.o.Nodes), Store: f.Store,
		Registry: f.Registry, Key: f.key, KeyName: WitnessKeyName, Logger: f.log.With("part", fmt.Sprintf("witness-%d", i+1)),
		OnAlert: f.o.OnAlert, Clock: clock.Real, Batch: f.o.Batch}
	if f.o.Logins {
		c.NATSOptions = f.NATSOptions(f.WitnessLogin(i))
	}
	return c
}

// NATSOptions connect to the floor's cluster with login l, over TLS
// with the floor's CA (Options.Logins).
func (f *Floor) NATSOptions(l floor.NATSLogin) []nats.Option {
	return []nats.Option{nats.UserInfo(l.User, l.Password), nats.RootCAs(f.TLS.CAFile), nats.Timeout(floor.ConnectTimeout)}
}

// makeTLS makes the floor's CA in dir and the nodes' certificate for
// loopback, as tablectl-floor init does for a floor's nodes.
func makeTLS(dir string) (natsserver.TLS, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return natsserver.TLS{}, err
	}
	ca, err := floor.EnsureCA(dir)
	if err != nil {
		return natsserver.TLS{}, err
	}
	cert, key, err := ca.EnsureCert(dir, "node", []string{"127.0.0.1", "localhost"})
	return natsserver.TLS{CAFile: ca.CertFile, CertFile: cert, KeyFile: key}, err
}

// WitnessLogin is witness i's login at the floor broker (with Logins).
func (f *Floor) WitnessLogin(i int) floor.NATSLogin {
	return f.Logins.Witnesses[i%len(f.Logins.Witnesses)]
}

// makeLogins makes the floor's logins (a password each) and returns the
// nodes' authorization block.
func (f *Floor) makeLogins() (string, error) {
	pw := func() string { return strings.ToLower(rand.Text()) }
	f.Logins = floor.Logins{Admin: floor.NATSLogin{User: "admin", Password: pw()}, Tables: map[string]floor.NATSLogin{}}
	for i := range max(f.o.Witness, 1) {
		f.Logins.Witnesses = append(f.Logins.Witnesses, floor.NATSLogin{User: fmt.Sprintf("witness-%d", i+1), Password: pw()})
	}
	for i := range f.o.Tables {
		id := tableID(i)
		f.Logins.Tables[id] = floor.NATSLogin{User: floor.TableUser(id), Password: pw()}
	}
	return floor.AuthConfig(f.Logins, floor.Subjects{}, floor.DefaultStream, floor.DefaultStatusStream, floor.DefaultConsumer)
}

// writeSecret writes a password file (0600) and returns its name.
func writeSecret(path, secret string) (string, error) {
	return path, os.WriteFile(path, []byte(secret+"\n"), 0o600)
}

// tableID is table i's id.
func tableID(i int) string { return fmt.Sprintf("FLOOR-%02d", i+1) }

// StartWitness starts witness i (again).
func (f *Floor) StartWitness(ctx context.Context, i int) error {
	var r *witnessRun
	if f.o.WitnessProcs[i] {
		var err error
		if r, err = f.startWitnessProc(i); err != nil {
			return err
		}
	} else {
		w, err := floor.New(ctx, f.WitnessConfig(i))
		if err != nil {
			return err
		}
		wctx, cancel := context.WithCancel(context.Background())
		r = &witnessRun{w: w, cancel: cancel, done: make(chan struct{})}
		go func() {
			defer close(r.done)
			w.Run(wctx)
		}()
	}
	f.mu.Lock()
	for len(f.witnesses) <= i {
		f.witnesses = append(f.witnesses, nil)
	}
	f.witnesses[i] = r
	f.mu.Unlock()
	return nil
}

// startWitnessProc runs witness i as `tablectl-floor witness`, on the floor's
// registry and the witness's key written to files.
func (f *Floor) startWitnessProc(i int) (*witnessRun, error) {
	if f.o.WitnessExe == "" {
		return nil, errors.New("floorsim: a witness process needs WitnessExe")
	}
	reg := map[string]any{}
	tables := map[string]any{}
	for id, e := range f.Registry.Tables {
		var keys []string
		for _, k := range e.Keys {
			keys = append(keys, base64.StdEncoding.EncodeToString(k))
		}
		tables[id] = map[string]any{"public_keys": keys, "heartbeat": e.Heartbeat.String()}
	}
	reg["heartbeat"], reg["tables"] = f.Registry.Heartbeat.String(), tables
	b, _ := json.Marshal(reg)
	regFile := filepath.Join(f.o.Dir, "registry.json")
	if err := os.WriteFile(regFile, b, 0o644); err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(f.key)
	if err != nil {
		return nil, err
	}
	keyFile := filepath.Join(f.o.Dir, WitnessKeyName+".key")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	db := f.o.Postgres
	if db == "" {
		db = filepath.Join(f.o.Dir, "floor.db")
	}
	name := fmt.Sprintf("witness-%d", i+1)
	args := []string{"witness", "--name", name, "--nats", f.Cluster.URLs(), "--db", db, "--schema", f.o.Schema,
		"--registry", regFile, "--key", keyFile, "--replicas", fmt.Sprint(min(3, f.o.Nodes))}
	if f.o.Logins {
		l := f.WitnessLogin(i)
		pf, err := writeSecret(filepath.Join(f.o.Dir, l.User+".password"), l.Password)
		if err != nil {
			return nil, err
		}
		args = append(args, "--nats-user", l.User, "--nats-password-file", pf, "--nats-ca", f.TLS.CAFile)
	}
	view := ""
	if f.o.WitnessHTTP {
		va, err := f.viewArgs()
		if err != nil {
			return nil, err
		}
		port, err := freeport.Loopback()
		if err != nil {
			return nil, err
		}
		view = fmt.Sprintf("127.0.0.1:%d", port)
		args = append(append(args, "--http", view), va...)
	}
	cmd := exec.Command(f.o.WitnessExe, args...)
	cmd.Env = os.Environ()
	l := &logtail.Buffer{}
	cmd.Stdout, cmd.Stderr = l, l
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	r := &witnessRun{cmd: cmd, log: l, view: view, done: make(chan struct{})}
	go func() { cmd.Wait(); close(r.done) }()
	return r, nil
}

// viewArgs are a witness process's floor view flags: its login (made on
// the first call) and, with Logins, its certificate from the floor's CA.
func (f *Floor) viewArgs() ([]string, error) {
	if f.ViewLogin.User == "" {
		f.ViewLogin = floor.Login{User: "floor", Password: strings.ToLower(rand.Text())}
	}
	pf, err := writeSecret(filepath.Join(f.o.Dir, "floor-view.password"), f.ViewLogin.Password)
	if err != nil {
		return nil, err
	}
	args := []string{"--http-user", f.ViewLogin.User, "--http-password-file", pf}
	if !f.o.Logins {
		return args, nil
	}
	dir := filepath.Dir(f.TLS.CAFile)
	ca, err := floor.EnsureCA(dir)
	if err != nil {
		return nil, err
	}
	cert, key, err := ca.EnsureCert(dir, "floor-view", []string{"127.0.0.1", "localhost"})
	return append(args, "--tls-cert", cert, "--tls-key", key), err
}

// ViewAddr is where witness process i serves the floor view
// (Options.WitnessHTTP; "" when it does not run).
func (f *Floor) ViewAddr(i int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i >= len(f.witnesses) || f.witnesses[i] == nil {
		return ""
	}
	return f.witnesses[i].view
}

// KillWitness kills witness i at once, mid-batch: a process with
// SIGKILL, one in this process by dropping its connection. What it had
// taken and not acknowledged goes to the others after the ack wait.
func (f *Floor) KillWitness(i int) {
	f.mu.Lock()
	r := f.witnesses[i]
	f.witnesses[i] = nil
	f.mu.Unlock()
	if r == nil {
		return
	}
	if r.cmd != nil {
		r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.done
		f.mu.Lock()
		f.deadWitnessLogs = append(f.deadWitnessLogs, r.log.String())
		f.mu.Unlock()
		return
	}
	r.w.Close()
	r.cancel()
	<-r.done
}

// WitnessRunning says whether witness i runs: for a process, whether it
// has not exited.
func (f *Floor) WitnessRunning(i int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i >= len(f.witnesses) || f.witnesses[i] == nil {
		return false
	}
	select {
	case <-f.witnesses[i].done:
		return false
	default:
		return true
	}
}

// WitnessLog is what witness process i said (its current run, after
// what its killed runs said).
func (f *Floor) WitnessLog(i int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := strings.Join(f.deadWitnessLogs, "--- killed ---\n")
	if i < len(f.witnesses) && f.witnesses[i] != nil && f.witnesses[i].log != nil {
		out += f.witnesses[i].log.String()
	}
	return out
}

// WitnessStats sums the running witnesses' counts.
func (f *Floor) WitnessStats() floor.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s floor.Stats
	for _, r := range f.witnesses {
		if r == nil || r.w == nil {
			continue
		}
		x := r.w.Stats()
		s.Messages += x.Messages
		s.Rows += x.Rows
		s.Checkpoints += x.Checkpoints
		s.Batches += x.Batches
		s.Alerts += x.Alerts
		s.Resyncs += x.Resyncs
	}
	return s
}

// Close stops everything.
func (f *Floor) Close() {
	for _, t := range f.Tables {
		if t.simStop != nil {
			t.StopDealing()
		}
		t.Kill()
		if t.mosq != nil {
			t.mosq.Kill()
		}
		if t.proxy != nil {
			t.proxy.Close()
		}
		if t.pty != nil {
			t.pty.Close()
		}
	}
	f.mu.Lock()
	ws := f.witnesses
	f.mu.Unlock()
	for i := range ws {
		f.KillWitness(i)
	}
	if f.Cluster != nil {
		f.Cluster.Stop()
	}
	if f.Store != nil {
		f.Store.Close()
	}
	if f.Pool != nil {
		f.Pool.Close()
	}
}

// officerSigned signs the keyring doc with the floor's security officer's
// key, kept in dir (made on the first run), and returns it with the
// officer's public key file.
func officerSigned(dir string, doc []byte) ([]byte, string, error) {
	priv, pub := filepath.Join(dir, signedcmd.AuthorityKeyFile), filepath.Join(dir, signedcmd.AuthorityPublicFile)
	if _, err := os.Stat(priv); errors.Is(err, os.ErrNotExist) {
		if priv, pub, err = signedcmd.GenerateAuthority(dir); err != nil {
			return nil, "", err
		}
	}
	key, err := audit.LoadPrivateKey(priv)
	if err != nil {
		return nil, "", err
	}
	signed, _, err := signedcmd.SignKeyring(doc, key, 0, time.Now())
	return signed, pub, err
}

func (f *Floor) newTable(ctx context.Context, i int, keyring []byte) (*Table, error) {
	id := tableID(i)
	dir := filepath.Join(f.o.Dir, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	t := &Table{ID: id, Dir: dir, Trail: filepath.Join(dir, "trail.db"), Config: filepath.Join(dir, "tablectl.json"), f: f}
	var err error
	if t.PrivKey, t.PubKey, err = audit.GenerateKey(dir); err != nil {
		return nil, err
	}
	pub, err := audit.LoadPublicKey(t.PubKey)
	if err != nil {
		return nil, err
	}
	f.Registry.Tables[id] = floor.TableEntry{Keys: []ed25519.PublicKey{pub}, Heartbeat: f.o.Heartbeat}
	if err := os.WriteFile(filepath.Join(dir, "supervisors.json"), keyring, 0o644); err != nil {
		return nil, err
	}
	mosqPort, err := freeport.Loopback()
	if err != nil {
		return nil, err
	}
	broker := fmt.Sprintf("tcp://127.0.0.1:%d", mosqPort)
	if f.o.StartBroker == nil {
		// No broker of its own: straight to a node's MQTT listener (TLS
		// on a floor with logins).
		broker = f.Cluster.Nodes[i%len(f.Cluster.Nodes)].MQTTURL()
	}
	// The shoe.
	link := filepath.Join(dir, "shoe")
	if t.pty, err = shoesim.OpenPTY(link); err != nil {
		return nil, err
	}
	sim, err := shoesim.New(shoesim.Options{Seed: f.o.Seed + uint64(i) + 1, Shoes: 30, Decks: 6, CardPace: f.o.CardPace, CoupPace: f.o.CoupPace, Shuffle: f.o.Shuffle},
		t.pty, clock.Real, f.log.With("table", id, "part", "shoe"))
	if err != nil {
		return nil, err
	}
	t.simDone = make(chan struct{})
	simCtx, simStop := context.WithCancel(context.Background())
	t.simStop = simStop
	go func() {
		defer close(t.simDone)
		if err := sim.Run(simCtx, true); err != nil && simCtx.Err() == nil {
			f.log.Warn("shoe simulator stopped", "table", id, "err", err)
		}
	}()
	// The controller's config.
	conf := map[string]any{
		"table_id": id, "profile": "classic",
		"table": map[string]any{"burn": "first_card", "burn_done_by_button": true, "cut_card": "one_more", "reveal": "button",
			"betting_time": "0s", "result_time": (f.o.CoupPace / 2).String()},
		"shoe": map[string]any{"driver": "v1", "port": map[string]any{"path": link, "baud": 115200, "data_bits": 8, "parity": "none",
			"stop_bits": 1, "silent_after": "3s", "backoff_min": "50ms", "backoff_max": "1s"}},
		"audit": map[string]any{"path": t.Trail, "checkpoint_key": t.PrivKey},
		"mqtt": map[string]any{"broker": broker, "prefix": "tablectl/" + id,
			"client_id": "tablectl-" + id, "keyring": filepath.Join(dir, "supervisors.json"), "keyring_authority": f.authority},
	}
	if l, ok := f.Logins.Tables[id]; ok && f.o.StartBroker == nil {
		// Straight to the cluster: the controller on the table's login.
		pf := filepath.Join(dir, "floor-broker.password")
		if err := os.WriteFile(pf, []byte(l.Password+"\n"), 0o600); err != nil {
			return nil, err
		}
		m := conf["mqtt"].(map[string]any)
		m["username"], m["password_file"], m["ca_file"] = l.User, pf, f.TLS.CAFile
		// NATS's MQTT listener binds no client id to a login: another
		// login using this id would take the session over. An id with a
		// random part no other login can guess is the binding there is.
		m["client_id"] = "tablectl-" + id + "-" + strings.ToLower(rand.Text()[:12])
	}
	b, _ := json.MarshalIndent(conf, "", "  ")
	if err := os.WriteFile(t.Config, b, 0o644); err != nil {
		return nil, err
	}
	if f.o.StartBroker == nil {
		return t, nil
	}
	// Its Mosquitto and bridge.
	var addrs []string
	if f.o.Proxied[i] {
		if t.proxy, err = NewProxy(f.Cluster); err != nil {
			return nil, err
		}
		addrs = []string{t.proxy.Addr()}
	} else {
		// Each table starts on another node, as a floor spreads its
		// bridges; the others are where it fails over to.
		for k := range f.Cluster.Nodes {
			addrs = append(addrs, f.Cluster.Nodes[(i+k)%len(f.Cluster.Nodes)].MQTTAddr())
		}
	}
	bridge, err := f.bridge(id, addrs)
	if err != nil {
		return nil, err
	}
	t.mosqConf = filepath.Join(dir, "mosquitto.conf")
	// user root: Mosquitto started as root drops to the mosquitto user
	// after reading its config, and the bridge reads its CA file then,
	// from the test's private folder (a box's is world-readable, copied
	// by tablectl init into /etc/mosquitto/tablectl). Not root: ignored.
	mc := fmt.Sprintf(`listener %d 127.0.0.1
allow_anonymous true
user root
persistence false
log_dest stderr
log_type error
log_type warning
log_type notice
log_type information
max_queued_messages 200000
max_inflight_messages 100
%s`, mosqPort, bridge)
	if err := os.WriteFile(t.mosqConf, []byte(mc), 0o644); err != nil {
		return nil, err
	}
	return t, nil
}

// bridge is table id's bridge to addrs: on a floor with logins as
// `tablectl init --floor-login` writes it on a box (internal/floorbridge:
// the table's login, a client id with a random part, TLS with the
// floor's CA); without, loopback and anonymous.
func (f *Floor) bridge(id string, addrs []string) (string, error) {
	l, ok := f.Logins.Tables[id]
	if !ok {
		return natsserver.Bridge(f.o.Bridge, id, addrs)
	}
	return floorbridge.Conf(f.o.Bridge, floorbridge.Options{Table: id, Addrs: addrs, User: l.User, Password: l.Password,
		CAFile: f.TLS.CAFile, RestartTimeout: "1 3"})
}

func (t *Table) startMosquitto() error {
	if t.f.o.StartBroker == nil {
		return nil
	}
	p, err := t.f.o.StartBroker(t.mosqConf)
	if err != nil {
		return fmt.Errorf("table %s: %w", t.ID, err)
	}
	t.mosq = p
	return nil
}

// Start runs the table's controller (again).
func (t *Table) Start() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctl != nil {
		return nil
	}
	cmd := exec.Command(t.f.o.Exe, "run", "--config", t.Config)
	cmd.Env = append(os.Environ(), t.f.o.Env...)
	l := &logtail.Buffer{}
	cmd.Stdout, cmd.Stderr = l, l
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("table %s: controller: %w", t.ID, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.ctl, t.done = cmd, done
	t.logs = append(t.logs, l)
	return nil
}

// StopDealing stops the table's shoe: the dealer goes home, the trail
// stops growing.
func (t *Table) StopDealing() {
	t.simStop()
	<-t.simDone
}

// Kill ends the controller with SIGKILL.
func (t *Table) Kill() { t.signal(syscall.SIGKILL) }

// Stop ends the controller with SIGTERM, as an operator does.
func (t *Table) Stop() { t.signal(syscall.SIGTERM) }

func (t *Table) signal(sig syscall.Signal) {
	t.mu.Lock()
	cmd, done := t.ctl, t.done
	t.ctl = nil
	t.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// Running reports whether the controller process runs.
func (t *Table) Running() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctl == nil {
		return false
	}
	select {
	case <-t.done:
		return false
	default:
		return true
	}
}

// Log is the tail of the controller's output (every process started).
func (t *Table) Log() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	for i, l := range t.logs {
		fmt.Fprintf(&b, "--- controller process %d ---\n%s", i+1, l.String())
	}
	return b.String()
}

// BrokerLog is what the table's Mosquitto has said.
func (t *Table) BrokerLog() string {
	if t.mosq == nil {
		return ""
	}
	return t.mosq.Log()
}

// Cut cuts the table's bridge (a proxied table only) until Mend.
func (t *Table) Cut() { t.proxy.SetCut(true) }

// Mend lets the bridge reconnect.
func (t *Table) Mend() error { return t.proxy.SetCut(false) }

// Rewrite plays root on the table's box rewriting history: the controller
// is stopped, the trail cut back to the commit at or below seq (the
// triggers that refuse it dropped and put back), a new checkpoint of the
// new head signed with the box's own key, and the controller started on
// the rewritten trail, which it accepts: only a copy held elsewhere can
// tell. It returns the new head's seq.
func (t *Table) Rewrite(ctx context.Context, seq int64) (int64, error) {
	t.Stop()
	head, err := RewriteTrail(ctx, t.Trail, seq)
	if err != nil {
		return 0, fmt.Errorf("table %s: rewrite: %w", t.ID, err)
	}
	return head, t.Start()
}

// RewriteTrail is what root on a box can do to a stopped table's trail:
// cut it back to the last commit at or below seq (the triggers that refuse
// it dropped and put back); it returns the new head.
// The controller signs a checkpoint of the new head in its first commit
// with the box's key, which is the re-signing.
func RewriteTrail(ctx context.Context, trail string, seq int64) (int64, error) {
	db, err := sql.Open("sqlite3", "file:"+trail+"?_txlock=immediate")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	// Cut at a commit: a seq with a checkpoint (one is signed per commit).
	var head int64
	if err := tx.QueryRowContext(ctx, `SELECT seq FROM checkpoints WHERE seq <= ? ORDER BY seq DESC LIMIT 1`, seq).Scan(&head); err != nil {
		return 0, fmt.Errorf("no checkpoint at or below %d: %w", seq, err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT name, sql FROM sqlite_master WHERE type = 'trigger'`)
	if err != nil {
		return 0, err
	}
	var triggers [][2]string
	for rows.Next() {
		var n, s string
		if err := rows.Scan(&n, &s); err != nil {
			rows.Close()
			return 0, err
		}
		triggers = append(triggers, [2]string{n, s})
	}
	rows.Close()
	for _, tr := range triggers {
		if _, err := tx.ExecContext(ctx, `DROP TRIGGER "`+tr[0]+`"`); err != nil {
			return 0, err
		}
	}
	for _, q := range []string{`DELETE FROM events WHERE seq > ?`, `DELETE FROM checkpoints WHERE seq > ?`} {
		if _, err := tx.ExecContext(ctx, q, head); err != nil {
			return 0, err
		}
	}
	for _, tr := range triggers {
		if _, err := tx.ExecContext(ctx, tr[1]); err != nil {
			return 0, err
		}
	}
	return head, tx.Commit()
}

// Proxy forwards TCP connections to the first cluster node that answers,
// and can cut them all. While cut it does not listen: a bridge's connect
// is refused, as to a floor out of reach, not accepted and dropped (which
// Debian's Mosquitto 2.0.11 takes badly over TLS: a TLS bridge whose
// handshake was cut by the far side stopped retrying for good in a run of
// the proof; docs/floor.md).
type Proxy struct {
	addr    string
	cluster *natsserver.Cluster
	mu      sync.Mutex
	ln      net.Listener
	cut     bool
	conns   map[net.Conn]bool
}

// NewProxy listens on a loopback port.
func NewProxy(c *natsserver.Cluster) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{addr: ln.Addr().String(), ln: ln, cluster: c, conns: map[net.Conn]bool{}}
	go p.serve(ln)
	return p, nil
}

// Addr is where the proxy listens.
func (p *Proxy) Addr() string { return p.addr }

// SetCut cuts every connection and stops listening while cut; uncut, it
// listens again on the same address.
func (p *Proxy) SetCut(cut bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cut == p.cut {
		return nil
	}
	if cut {
		p.cut = true
		p.ln.Close()
		for c := range p.conns {
			c.Close()
		}
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("proxy: listen again on %s: %w", p.addr, err)
	}
	p.ln, p.cut = ln, false
	go p.serve(ln)
	return nil
}

// Close stops the proxy.
func (p *Proxy) Close() { p.SetCut(true) }

func (p *Proxy) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *Proxy) forward(c net.Conn) {
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		c.Close()
		return
	}
	p.mu.Unlock()
	var up net.Conn
	for _, nd := range p.cluster.Nodes {
		var err error
		if up, err = net.DialTimeout("tcp", nd.MQTTAddr(), time.Second); err == nil {
			break
		}
	}
	if up == nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}
