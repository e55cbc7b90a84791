package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/mqttconn"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/display/viewer"
	"github.com/tablectl/tablectl/internal/smallfile"
)

func init() {
	register(command{Name: "replay", Short: "run an audit trail back through the rules, coup by coup, and flag differences", Run: runReplay})
}

// errDiffers makes replay exit non-zero when the trail differs from the rules.
var errDiffers = errors.New("the trail differs from what the rules derive")

func runReplay(args []string, stdout io.Writer) error {
	fs := newFlagSet("replay")
	db := fs.String("db", "", "the audit trail: a SQLite `file`, a directory of segments, or segment files in order, comma-separated")
	shoe := fs.Int("shoe", 0, "print only this shoe `N` (0: all)")
	coupN := fs.Int("coup", 0, "print only this coup `N` (0: all)")
	asJSON := fs.Bool("json", false, "print JSON lines instead of text")
	publish := fs.Bool("publish", false, "republish the trail (or --shoe) to a broker instead of printing it")
	broker := fs.String("broker", "tcp://127.0.0.1:1883", "with --publish: the broker's `URL`")
	user := fs.String("username", "", "with --publish: the broker's `USER`")
	pass := fs.String("password", "", "with --publish: the broker's `PASSWORD`")
	prefix := fs.String("prefix", "", "with --publish: the topic `PREFIX` (default tablectl/<table>/replay)")
	speed := fs.Float64("speed", 1, "with --publish: the `FACTOR` of the recorded pace: 1 as recorded, 10 ten times faster, 0 no pauses")
	maxPause := fs.Duration("max-pause", 10*time.Second, "with --publish: the longest `PAUSE` between inputs")
	keyring := fs.String("keyring", "", "re-verify every recorded command against this supervisors' keyring `file`")
	serve := fs.String("serve", "", "serve the surveillance viewer of the trail on `ADDR` (:8090 is 127.0.0.1:8090) instead of printing it; off loopback it needs --http-password-file and TLS")
	view := viewer.ServeOptions{}
	fs.StringVar(&view.User, "http-user", viewer.DefaultUser, "with --serve: the viewer's HTTP basic-auth `USER`")
	passFile := fs.String("http-password-file", "", "with --serve: the viewer's password, a `FILE` of one line (required off loopback)")
	fs.StringVar(&view.CertFile, "http-cert-file", "", "with --serve: the viewer's TLS certificate, a PEM `FILE` (required off loopback)")
	fs.StringVar(&view.KeyFile, "http-key-file", "", "with --serve: the TLS certificate's private key, a PEM `FILE`")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ctx := context.Background()
	if *db == "" {
		return usageError(fs, "--db is required")
	}
	if *serve != "" && *publish {
		return usageError(fs, "--serve and --publish: give one")
	}
	if *serve != "" {
		view.Addr = *serve
		if *passFile != "" {
			p, err := smallfile.Secret(*passFile)
			if err != nil {
				return fmt.Errorf("--http-password-file: %w", err)
			}
			if p == "" {
				return fmt.Errorf("--http-password-file %s: empty", *passFile)
			}
			view.Password = p
		}
		return serveViewer(ctx, *db, view, stdout)
	}
	r, err := openTrail(ctx, *db)
	if err != nil {
		return err
	}
	defer r.Close()
	if *publish {
		return republish(ctx, r, *shoe, *broker, *user, *pass, *prefix, *speed, *maxPause, stdout)
	}

	coups, rp, err := audit.ReplayCoups(r.Events(ctx, audit.Query{}), audit.DefaultReplayConfig())
	if err != nil {
		return err
	}
	diffs := rp.Differences()
	var forged []audit.Finding
	if *keyring != "" {
		if err := checkCommands(*db, *keyring, func(f audit.Finding) { forged = append(forged, f) }); err != nil {
			return err
		}
	}
	enc := json.NewEncoder(stdout)
	for _, rc := range coups {
		if (*shoe != 0 && rc.Shoe != *shoe) || (*coupN != 0 && rc.Coup != *coupN) {
			continue
		}
		if *asJSON {
			if err := enc.Encode(rc); err != nil {
				return err
			}
			continue
		}
		writeReplayedCoup(stdout, rc)
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "%d rows replayed, %d coups, %d differences\n", rp.Rows(), len(coups), len(diffs))
		for _, d := range diffs {
			fmt.Fprintf(stdout, "DIFFERENCE at seq %d (%s): %s\n", d.Seq, d.Kind, d.Detail)
		}
	}
	for _, f := range forged {
		if *asJSON {
			if err := enc.Encode(f); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(stdout, "FORGED COMMAND at seq %d: %s\n", f.Seq, f.Detail)
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%w: %d rows", errDiffers, len(diffs))
	}
	if len(forged) > 0 {
		return fmt.Errorf("%w: %d recorded commands", errForged, len(forged))
	}
	return nil
}

// errForged makes replay exit non-zero when a recorded command does not
// verify against the keyring.
var errForged = errors.New("recorded commands do not verify against the keyring")

func writeReplayedCoup(w io.Writer, rc *audit.ReplayedCoup) {
	fmt.Fprintf(w, "shoe %d coup %d  [seq %d-%d]  cards %s", rc.Shoe, rc.Coup, rc.FirstSeq, rc.LastSeq, strings.Join(rc.Cards, " "))
	if r := rc.Result; r != nil {
		fmt.Fprintf(w, "  P %s (%d)  B %s (%d)  %s", coup.FormatCards(r.Player), r.PlayerPoint, coup.FormatCards(r.Banker), r.BankerPoint, r.Winner)
	}
	if rc.Voided {
		fmt.Fprint(w, "  VOIDED")
	}
	fmt.Fprintln(w)
	for _, a := range rc.Alerts {
		fmt.Fprintf(w, "    alert %s\n", a)
	}
	for _, a := range rc.Actions {
		fmt.Fprintf(w, "    action %s\n", a)
	}
	for _, r := range rc.Rejected {
		fmt.Fprintf(w, "    rejected %s\n", r)
	}
	for _, d := range rc.Diffs {
		fmt.Fprintf(w, "    DIFFERENCE seq %d %s: %s\n", d.Seq, d.Kind, d.Detail)
	}
}

// republish sends a stored trail, or one shoe of it, to a broker under a
// replay prefix at the recorded pace (or faster), for a surveillance display.
func republish(ctx context.Context, r *audit.Reader, shoe int, broker, user, pass, prefix string, speed float64, maxPause time.Duration, stdout io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if prefix == "" {
		prefix = "tablectl/" + r.Table() + "/replay"
	}
	conn, err := mqttconn.Dial(mqttconn.ConnOptions{Broker: broker, ClientID: "tablectl-replay-" + r.Table(), Username: user, Password: pass})
	if err != nil {
		return err
	}
	defer conn.Close(2 * time.Second)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := conn.WaitConnected(wctx); err != nil {
		return fmt.Errorf("--broker %s: %w", broker, err)
	}
	rows := r.Events(ctx, audit.Query{})
	if shoe > 0 {
		rows = audit.ShoeRows(rows, shoe)
	}
	n, err := mqttpub.Republish(ctx, mqttpub.RepublishOptions{Client: conn, Topics: mqttpub.Topics{Prefix: prefix}, Table: r.Table(),
		Config: audit.DefaultReplayConfig(), Speed: speed, MaxPause: maxPause}, rows)
	fmt.Fprintf(stdout, "%d rows republished under %s\n", n, prefix)
	return err
}

// serveViewer serves the surveillance viewer of the trail until
// interrupted.
func serveViewer(ctx context.Context, db string, opt viewer.ServeOptions, stdout io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	tl, err := viewer.LoadFile(ctx, db)
	if err != nil {
		return err
	}
	return viewer.Serve(ctx, opt, tl, db, func(url string) {
		login := "no login: loopback only"
		if opt.Password != "" {
			login = "user " + opt.User + ", password from --http-password-file"
		}
		fmt.Fprintf(stdout, "surveillance viewer of %s (%d rows, %d coups, %d differences) on %s (%s)\n", db, tl.Rows, len(tl.Coups), len(tl.Diffs), url, login)
	})
}

// openTrail opens the trail named by --db for reading.
func openTrail(ctx context.Context, db string) (*audit.Reader, error) {
	return audit.OpenReader(ctx, db)
}
