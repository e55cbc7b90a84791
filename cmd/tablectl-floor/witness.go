package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tablectl/tablectl/floor"
	"github.com/tablectl/tablectl/internal/smallfile"
	"github.com/tablectl/tablectl/internal/supervisor"
)

func init() {
	register(command{Name: "witness", Short: "the floor's witness: every table's rows and checkpoints into PostgreSQL, checked (docs/floor.md)", Run: runWitness})
}

func runWitness(args []string, stdout io.Writer) error {
	fs := newFlagSet("witness")
	fs.Usage = func() {
		usageHead(fs.Output(), "witness", "--db URL --registry FILE [flags]", `Takes every table's pit/events and pit/checkpoint from the floor's NATS
JetStream stream, checks each row's hash and link and each checkpoint's
signature against the table's registered key, keeps every row exactly once
in PostgreSQL and raises floor alerts (floor/alerts). Run two or more: they
share the work. With --http it serves the floor view, behind HTTP basic
auth (--http-user, --http-password-file), over HTTPS (--tls-cert,
--tls-key; plain HTTP on loopback only). With --nats-ca the broker is
reached over TLS, verified with the floor's CA. docs/floor.md.`)
		printFlags(fs.Output(), fs)
	}
	var cfg floor.Config
	host, _ := os.Hostname()
	fs.StringVar(&cfg.Name, "name", host, "this witness's `name` in logs and alerts")
	fs.StringVar(&cfg.NATS, "nats", "nats://127.0.0.1:4222", "the floor broker's `URLs`, comma-separated")
	db := fs.String("db", "", "the floor's database: PostgreSQL's `URL` (postgres://user@host/db), or a SQLite file (one machine: the demo's)")
	schema := fs.String("schema", "floor", "the floor's `schema` in the database")
	registry := fs.String("registry", "", "the tables' registry `file`: their checkpoint keys (docs/floor.md)")
	key := fs.String("key", "", "the witness's supervisor key `file` (tablectl keygen), for resync requests; without it gaps are only alerted")
	as := fs.String("as", "", "the key's `name` in the tables' keyrings (default: the key file's name)")
	fs.StringVar(&cfg.Stream, "stream", floor.DefaultStream, "the JetStream `stream`")
	fs.StringVar(&cfg.Consumer, "consumer", floor.DefaultConsumer, "the durable `consumer` every witness shares")
	fs.StringVar(&cfg.Group, "group", "", "the witnesses' `group` this witness is of (the registry's \"group\"): it takes only that group's tables, through the group's own consumer (empty: every table)")
	fs.IntVar(&cfg.Replicas, "replicas", 3, "the stream's `N` replicas when it is created")
	fs.IntVar(&cfg.Batch, "batch", floor.DefaultBatch, "`N` messages taken and committed at once")
	fs.DurationVar(&cfg.ShoeKeep, "shoe-keep", floor.DefaultShoeKeep, "how `LONG` each shoe's print is kept to compare the tables' shoes with (shuffle_suspect; negative: off)")
	fs.StringVar(&cfg.StatusStream, "status-stream", floor.DefaultStatusStream, "the JetStream `stream` of each table's last status, for the floor view")
	httpAddr := fs.String("http", "", "serve the floor view at this `address` (empty: none), behind HTTP basic auth")
	natsUser := fs.String("nats-user", "", "the witness's `user` at the floor broker (tablectl-floor init; empty: no login, a floor without logins)")
	natsPass := fs.String("nats-password-file", "", "the `file` of the witness's broker password (with --nats-user)")
	var login floor.Login
	fs.StringVar(&login.User, "http-user", "floor", "the floor view's HTTP basic-auth `user`")
	passFile := fs.String("http-password-file", "", "the floor view's password: a `file` of one line (required with --http)")
	tl := tlsFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *db == "" || *registry == "" {
		return usageError(fs, "--db and --registry are required")
	}
	var view viewListener
	if *httpAddr != "" {
		if *passFile == "" || login.User == "" {
			return usageError(fs, "--http needs --http-user and --http-password-file: the floor view shows every table's alerts")
		}
		p, err := smallfile.Secret(*passFile)
		if err != nil {
			return fmt.Errorf("--http-password-file: %w", err)
		}
		login.Password = p
		// Before anything starts: plain HTTP off loopback is refused here.
		if view.ln, view.scheme, err = tl.listenView(*httpAddr); err != nil {
			return fmt.Errorf("--http: %w", err)
		}
		defer view.ln.Close()
	}
	if *natsUser != "" || *natsPass != "" {
		opt, err := natsLogin(*natsUser, *natsPass)
		if err != nil {
			return usageError(fs, "%v", err)
		}
		cfg.NATSOptions = append(cfg.NATSOptions, opt)
	}
	cfg.NATSOptions = append(cfg.NATSOptions, tl.natsOptions()...)
	reg, err := floor.LoadRegistry(*registry)
	if err != nil {
		return err
	}
	cfg.Registry = reg
	if *key != "" {
		k, name, err := supervisor.LoadKey(*key)
		if err != nil {
			return err
		}
		cfg.Key, cfg.KeyName = k, name
		if *as != "" {
			cfg.KeyName = *as
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return witness(ctx, cfg, *db, *schema, view, login, stdout)
}

// viewListener is where the floor view serves (nil: no view) and how.
type viewListener struct {
	ln     net.Listener
	scheme string
}

// witness runs a witness (and the floor view on view behind login, if
// set) until ctx is done.
func witness(ctx context.Context, cfg floor.Config, db, schema string, view viewListener, login floor.Login, stdout io.Writer) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	reg := cfg.Registry
	var err error
	if cfg.Store, err = floor.Open(ctx, db, schema); err != nil {
		return err
	}
	defer cfg.Store.Close()
	cfg.Logger = slog.Default()
	w, err := floor.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer w.Close()
	var wg sync.WaitGroup
	var srvErr error
	if ln := view.ln; ln != nil {
		defer ln.Close()
		v := floor.NewView(cfg.Store, reg, cfg.Subjects, nil, slog.Default())
		srv := &http.Server{Handler: login.Guard(v), ReadHeaderTimeout: 10 * time.Second}
		wg.Add(2)
		go func() { defer wg.Done(); v.Run(ctx, w.Conn(), w.StatusStream(), 2*time.Second) }()
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				srvErr = err
			}
		}()
		go func() { <-ctx.Done(); srv.Close() }()
		fmt.Fprintf(stdout, "floor view on %s://%s/\n", view.scheme, ln.Addr())
	}
	slog.Info("witness running", "name", cfg.Name, "nats", cfg.NATS, "tables", len(reg.Tables))
	err = w.Run(ctx)
	stop()
	wg.Wait()
	return errors.Join(err, srvErr)
}

// natsLogin is the broker login of --nats-user and --nats-password-file.
func natsLogin(user, passFile string) (nats.Option, error) {
	if user == "" || passFile == "" {
		return nil, errors.New("--nats-user and --nats-password-file go together")
	}
	p, err := smallfile.Secret(passFile)
	if err != nil {
		return nil, fmt.Errorf("--nats-password-file: %w", err)
	}
	return nats.UserInfo(user, p), nil
}
