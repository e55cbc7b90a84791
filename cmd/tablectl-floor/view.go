package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tablectl/tablectl/floor"
	"github.com/tablectl/tablectl/internal/smallfile"
)

func init() {
	register(command{Name: "view", Short: "serve the floor view alone (without a witness), behind HTTP basic auth", Run: runView})
}

func runView(args []string, stdout io.Writer) error {
	fs := newFlagSet("view")
	fs.Usage = func() {
		usageHead(fs.Output(), "view", "--db URL --registry FILE --http ADDR --http-password-file FILE [flags]", `Serves the floor view (every table's status, witnessed rows and floor
alerts, live) from the floor's database and the status stream, behind
HTTP basic auth, over HTTPS (--tls-cert, --tls-key; plain HTTP on
loopback only); the same page as witness --http, on a machine of its
own. With --nats-ca the broker is reached over TLS, verified with the
floor's CA. docs/floor.md.`)
		printFlags(fs.Output(), fs)
	}
	natsURL := fs.String("nats", "nats://127.0.0.1:4222", "the floor broker's `URLs`, comma-separated")
	db := fs.String("db", "", "the floor's database: PostgreSQL's `URL`, or a SQLite file (required)")
	schema := fs.String("schema", "floor", "the floor's `schema` in the database")
	registry := fs.String("registry", "", "the tables' registry `file` (required)")
	statusStream := fs.String("status-stream", floor.DefaultStatusStream, "the JetStream `stream` of each table's last status")
	httpAddr := fs.String("http", "", "the floor view's `address` (required)")
	natsUser := fs.String("nats-user", "", "the view's `user` at the floor broker (a witness's login; empty: no login)")
	natsPass := fs.String("nats-password-file", "", "the `file` of that login's password (with --nats-user)")
	var login floor.Login
	fs.StringVar(&login.User, "http-user", "floor", "the floor view's HTTP basic-auth `user`")
	passFile := fs.String("http-password-file", "", "the floor view's password: a `file` of one line (required)")
	tl := tlsFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *db == "" || *registry == "" || *httpAddr == "" || *passFile == "" || login.User == "" {
		return usageError(fs, "--db, --registry, --http, --http-user and --http-password-file are required: the floor view shows every table's alerts")
	}
	p, err := smallfile.Secret(*passFile)
	if err != nil {
		return fmt.Errorf("--http-password-file: %w", err)
	}
	login.Password = p
	// Before anything starts: plain HTTP off loopback is refused here.
	ln, scheme, err := tl.listenView(*httpAddr)
	if err != nil {
		return fmt.Errorf("--http: %w", err)
	}
	defer ln.Close()
	reg, err := floor.LoadRegistry(*registry)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := floor.Open(ctx, *db, *schema)
	if err != nil {
		return err
	}
	defer st.Close()
	opts := append([]nats.Option{nats.MaxReconnects(-1), nats.Timeout(floor.ConnectTimeout)}, tl.natsOptions()...)
	if *natsUser != "" || *natsPass != "" {
		opt, err := natsLogin(*natsUser, *natsPass)
		if err != nil {
			return usageError(fs, "%v", err)
		}
		opts = append(opts, opt)
	}
	nc, err := nats.Connect(*natsURL, opts...)
	if err != nil {
		return fmt.Errorf("--nats: %w", err)
	}
	defer nc.Close()
	v := floor.NewView(st, reg, floor.Subjects{}, nil, slog.Default())
	srv := &http.Server{Handler: login.Guard(v), ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); srv.Close() }()
	go v.Run(ctx, nc, *statusStream, 2*time.Second)
	fmt.Fprintf(stdout, "floor view on %s://%s/\n", scheme, ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
