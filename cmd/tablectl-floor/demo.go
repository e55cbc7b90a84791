package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/floor"
	"github.com/tablectl/tablectl/internal/controller"
	"github.com/tablectl/tablectl/internal/floorsim"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

func init() {
	register(command{Name: "demo", Short: "a floor on this machine: N simulated tables, a NATS cluster, two witnesses, the floor view", Run: runDemo})
}

// floorDemoOptions are the floor demo's own flags.
type floorDemoOptions struct {
	tables           *int
	db, schema, view *string
}

func runDemo(args []string, stdout io.Writer) error {
	fs := newFlagSet("demo")
	fs.Usage = func() {
		usageHead(fs.Output(), "demo", "--tables N [flags]", `Runs a floor on this machine: --tables N simulated tables (a shoe and a
controller process each, this binary's run), a 3-node NATS cluster in
this process, two witnesses and the floor view, as a floor runs them:
every link TLS with a CA made for the run (in --dir), every client on a
login of its own. The witnessed copy is
SQLite in --dir (nothing to install), or PostgreSQL with --floor-db. It
prints where to look. Ctrl-C stops it. docs/floor.md.`)
		printFlags(fs.Output(), fs)
	}
	o := controller.DemoOptions{LogTo: os.Stderr}
	fs.StringVar(&o.Dir, "dir", "demo", "the `folder` for the tables' trails and keys and the floor's files")
	fs.StringVar(&o.Profile, "profile", coup.ProfileVIP, "the rule `PROFILE`: classic, no-commission or vip")
	fs.DurationVar(&o.Pace, "pace", shoesim.DefaultCardPace, "the dealer's pace: the `WAIT` before each card and button")
	fs.DurationVar(&o.CoupPace, "coup-pace", -1, "the betting `TIME` before each coup (default 5 x --pace)")
	fs.Uint64Var(&o.Seed, "seed", 0, "shuffle `SEED` (0: new shoes each run)")
	fl := floorDemoOptions{
		tables: fs.Int("tables", 0, "`N` simulated tables (required)"),
		db:     fs.String("floor-db", "", "the floor's PostgreSQL `URL` (default: SQLite in --dir, nothing to install)"),
		schema: fs.String("floor-schema", "floor_demo", "the floor's `schema` (emptied first)"),
		view:   fs.String("floor-http", "127.0.0.1:8090", "the floor view's `address`"),
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *fl.tables < 1:
		return usageError(fs, "--tables %d: want a number of tables, 1 or more", *fl.tables)
	case o.Pace < 0:
		return usageError(fs, "--pace %v: want 0 or more", o.Pace)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return floorDemo(ctx, fl, o, stdout)
}

// floorDemo runs --tables N tables, each a simulated shoe and a controller
// process, publishing straight to the MQTT listeners of a 3-node NATS
// cluster run in this process (nats-server as a library), two witnesses
// and the floor view, until ctx is done. The store is SQLite in the
// demo's folder, or PostgreSQL (the floor's) with --floor-db: the
// judging is the same code (docs/floor.md), so nothing needs installing
// to see a floor.
func floorDemo(ctx context.Context, fl floorDemoOptions, o controller.DemoOptions, stdout io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	dir = filepath.Join(dir, "floor")
	// The floor view's address first: a port in use fails the demo at
	// once, before the cluster and the tables start.
	ln, err := net.Listen("tcp", *fl.view)
	if err != nil {
		return fmt.Errorf("--floor-http: %w", err)
	}
	defer ln.Close()
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// A fresh schema: the demo's tables start from seq 1 each run (the
	// SQLite file is in the folder just emptied).
	if *fl.db != "" {
		if err := dropSchema(ctx, *fl.db, *fl.schema); err != nil {
			return err
		}
	}
	coupPace := o.CoupPace
	if coupPace < 0 {
		coupPace = 5 * o.Pace
	}
	f, err := floorsim.Start(ctx, floorsim.Options{Logins: true, Dir: dir, Tables: *fl.tables, Nodes: 3, Witness: 2, CardPace: o.Pace, CoupPace: coupPace,
		Seed: o.Seed, Postgres: *fl.db, Schema: *fl.schema, EmbeddedNATS: true, Exe: exe, Heartbeat: time.Minute, Log: log})
	if err != nil {
		return err
	}
	defer f.Close()
	// The floor view reads the broker on a witness's login, over TLS: no
	// client of the demo's floor is anonymous or in clear.
	nc, err := nats.Connect(f.Cluster.URLs(), f.NATSOptions(f.WitnessLogin(0))...)
	if err != nil {
		return err
	}
	defer nc.Close()
	v := floor.NewView(f.Store, f.Registry, floor.Subjects{}, nil, log)
	// The floor view's login, made for this run as the pit view's is.
	login := floor.Login{User: "floor", Password: strings.ToLower(rand.Text()[:16])}
	passFile := filepath.Join(dir, "floor-view.password")
	if err := os.WriteFile(passFile, []byte(login.Password+"\n"), 0o600); err != nil {
		return err
	}
	// The floor view over HTTPS, its certificate from the floor's CA.
	viewTLS, err := viewCert(f.TLS.CAFile, ln.Addr().String())
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: login.Guard(v), ReadHeaderTimeout: 10 * time.Second}
	go v.Run(ctx, nc, floor.DefaultStatusStream, 2*time.Second)
	go srv.Serve(tls.NewListener(ln, viewTLS))
	defer srv.Close()
	first := f.Tables[0]
	store, verify := fmt.Sprintf("%s, schema %s", *fl.db, *fl.schema), fmt.Sprintf("'%s' --witness-schema %s", *fl.db, *fl.schema)
	if *fl.db == "" {
		store, verify = filepath.Join(dir, "floor.db")+" (SQLite)", filepath.Join(dir, "floor.db")
	}
	fmt.Fprintf(stdout, `tablectl-floor demo: a floor of %d simulated tables (%s ... %s) on this machine.

  floor view       https://%s/   (user %s, password %s, in %s)
  floor broker     %s   (NATS, JetStream; MQTT on %s ...; logins only: each table, witness and the admin its own)
  floor CA         %s   (every link is TLS: curl --cacert, mosquitto_sub --cafile, nats --tlsca)
  floor alerts     floor/alerts on the broker's MQTT listener
  witnessed rows   %s (tables rows, checkpoints, alerts, forks)
  trails           %s/<table>/trail.db
                   verify one against the witness:
                   tablectl-floor verify --db %s --pubkey %s --witness %s

Ctrl-C stops it.
`, len(f.Tables), first.ID, f.Tables[len(f.Tables)-1].ID, ln.Addr(), login.User, login.Password, passFile, f.Cluster.URLs(), f.Cluster.Nodes[0].MQTTURL(),
		f.TLS.CAFile, store, dir, first.Trail, first.PubKey, verify)
	<-ctx.Done()
	fmt.Fprintf(stdout, "\nstopped; the trails are in %s, the witnessed copy is %s\n", dir, store)
	return nil
}

// viewCert is the demo's floor view's TLS: a certificate for addr's host
// (and loopback's names), signed by the floor's CA beside caFile.
func viewCert(caFile, addr string) (*tls.Config, error) {
	dir := filepath.Dir(caFile)
	ca, err := floor.EnsureCA(dir)
	if err != nil {
		return nil, err
	}
	hosts := []string{"127.0.0.1", "localhost"}
	if h, _, err := net.SplitHostPort(addr); err == nil && h != "" && !slices.Contains(hosts, h) {
		if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
			hosts = append(hosts, h)
		}
	}
	cert, key, err := ca.EnsureCert(dir, "floor-view", hosts)
	if err != nil {
		return nil, err
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

func dropSchema(ctx context.Context, url, schema string) error {
	conn, err := pgxConnect(ctx, url)
	if err != nil {
		return fmt.Errorf("the floor's database (--floor-db; PostgreSQL is what the floor runs on): %w", err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+quoteIdent(schema)+" CASCADE")
	return err
}

func pgxConnect(ctx context.Context, url string) (*pgx.Conn, error) { return pgx.Connect(ctx, url) }

func quoteIdent(s string) string { return pgx.Identifier{s}.Sanitize() }
