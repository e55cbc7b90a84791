package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/floor"
	"github.com/tablectl/tablectl/internal/floorsim"
	"github.com/tablectl/tablectl/internal/floortest"
	"github.com/tablectl/tablectl/internal/testenv"
)

func copyFile(t *testing.T, from, to string) {
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAuditVerifyWitness: a trail the floor witnessed verifies against
// the witness; the same box's trail cut back and dealt on again, signed
// with its own key, still verifies alone (--pubkey) and fails against the
// witness.
func TestAuditVerifyWitness(t *testing.T) {
	pool, schema := floortest.Postgres(t)
	ctx := context.Background()
	dir := t.TempDir()
	priv, pubFile, err := audit.GenerateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := audit.LoadPrivateKey(priv)
	write := func(db string, bodies ...string) {
		st, err := audit.Open(ctx, db, audit.Options{Table: "BAC-07", Key: key, CheckpointEvery: 1, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		for _, b := range bodies {
			if _, err := st.Append(ctx, audit.Event{Kind: "card", Shoe: 1, Coup: 1, Body: map[string]string{"card": b}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	honest := filepath.Join(dir, "honest.db")
	write(honest, "2H", "3D", "7C", "KS", "4C", "5S")
	// The floor witnessed every row and checkpoint as published.
	st, err := floor.OpenStore(ctx, pool, schema)
	if err != nil {
		t.Fatal(err)
	}
	r, err := audit.OpenReader(ctx, honest)
	if err != nil {
		t.Fatal(err)
	}
	var rows []floor.Row
	for rec, err := range r.Events(ctx, audit.Query{}) {
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, floor.Row{Table: "BAC-07", Seq: rec.Seq, At: rec.At.UTC().Format(time.RFC3339Nano), Kind: rec.Kind, Shoe: rec.Shoe, Coup: rec.Coup, Body: rec.Body, PrevHash: rec.PrevHash, Hash: rec.Hash})
	}
	cps, err := r.Checkpoints(ctx)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := audit.LoadPublicKey(pubFile)
	reg := &floor.Registry{Tables: map[string]floor.TableEntry{"BAC-07": {Keys: []ed25519.PublicKey{pub}}}}
	if alerts, err := floor.Take(ctx, st, reg, "test", rows, cps); err != nil || len(alerts) != 0 {
		t.Fatalf("witnessing the honest trail: %v %v", alerts, err)
	}
	url := floortest.PostgresURL()
	var out bytes.Buffer
	if err := runVerify([]string{"--db", honest, "--pubkey", pubFile, "--witness", url, "--witness-schema", schema}, &out); err != nil {
		t.Fatalf("honest trail against the witness: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "matches the witness: 6 rows matched") {
		t.Errorf("honest: %s", out.String())
	}
	// A witness that holds nothing of this table (here: another schema
	// of the floor's database) compares nothing: that is not a match.
	other, otherSchema := floortest.Postgres(t)
	if _, err := floor.OpenStore(ctx, other, otherSchema); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = runVerify([]string{"--db", honest, "--pubkey", pubFile, "--witness", url, "--witness-schema", otherSchema}, &out)
	if !errors.Is(err, errUnverified) || !strings.Contains(out.String(), "NOT COMPARED: the witness holds no row of this table") {
		t.Errorf("against an empty witness: %v\n%s", err, out.String())
	}
	// Root on the box: the first three rows kept, three others dealt in
	// their place, checkpoints signed by the box's own key.
	rewritten := filepath.Join(dir, "rewritten.db")
	copyFile(t, honest, rewritten)
	if head, err := floorsim.RewriteTrail(ctx, rewritten, 3); err != nil || head != 3 {
		t.Fatalf("rewrite: %d %v", head, err)
	}
	write(rewritten, "9H", "9D", "9S")
	out.Reset()
	if rep, err := audit.Verify(ctx, rewritten, audit.VerifyOptions{PublicKeys: []ed25519.PublicKey{pub}}); err != nil || rep.Tampered() || rep.Unverifiable != "" {
		t.Fatalf("the rewritten trail should verify on its own (that is the attack): %v %+v", err, rep)
	}
	out.Reset()
	err = runVerify([]string{"--db", rewritten, "--pubkey", pubFile, "--witness", url, "--witness-schema", schema}, &out)
	if !errors.Is(err, errTampered) || !strings.Contains(out.String(), "DIFFERS from the witness") || !strings.Contains(out.String(), "3 rows differ (first [4 5 6])") {
		t.Errorf("rewritten against the witness: %v\n%s", err, out.String())
	}
	// A trail cut back is caught too.
	cut := filepath.Join(dir, "cut.db")
	copyFile(t, honest, cut)
	if _, err := floorsim.RewriteTrail(ctx, cut, 4); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = runVerify([]string{"--db", cut, "--pubkey", pubFile, "--witness", url, "--witness-schema", schema}, &out)
	if !errors.Is(err, errTampered) || !strings.Contains(out.String(), "2 witnessed rows past the trail's head") {
		t.Errorf("cut back against the witness: %v\n%s", err, out.String())
	}
}

// TestWitnessCommand: `tablectl-floor witness` against a NATS node makes the
// stream, takes a table's row and checkpoint published on it into
// PostgreSQL, and serves the floor view showing the table witnessed.
func TestWitnessCommand(t *testing.T) {
	pool, schema := floortest.Postgres(t)
	cluster := floortest.Cluster(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	priv, pubFile, err := audit.GenerateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := audit.LoadPrivateKey(priv)
	regFile := filepath.Join(dir, "floor.json")
	if err := os.WriteFile(regFile, []byte(`{"tables":{"BAC-07":{"public_key_files":["`+filepath.Base(pubFile)+`"]}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, err := floor.LoadRegistry(regFile)
	if err != nil {
		t.Fatal(err)
	}
	out := &lockedBuffer{}
	done := make(chan error, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() {
		done <- witness(ctx, floor.Config{Name: "t", NATS: cluster.URLs(), Replicas: 1, Registry: reg, Logger: slog.New(slog.DiscardHandler)},
			floortest.PostgresURL(), schema, viewListener{ln, "http"}, floor.Login{User: "floor", Password: "pw-17"}, out)
		close(stopped)
	}()
	var view string
	testenv.Eventually(t, 30*time.Second, "the floor view's address printed", func() bool {
		select {
		case <-stopped:
			t.Fatalf("witness stopped: %v", <-done)
		default:
		}
		if i := strings.Index(out.String(), "floor view on "); i >= 0 {
			view = strings.Fields(out.String()[i+len("floor view on "):])[0]
		}
		return view != ""
	})
	// A table publishes a row and its checkpoint, as the bridge brings them.
	st, err := audit.Open(ctx, filepath.Join(dir, "trail.db"), audit.Options{Table: "BAC-07", Key: key, CheckpointEvery: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.Append(ctx, audit.Event{Kind: "card", Shoe: 1, Coup: 1, Body: map[string]string{"card": "KH", "note": "<ok>"}})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	ev, _ := mqttpub.MarshalEvent(mqttpub.EventOf(rec))
	cp, _ := json.Marshal(rec.Checkpoint)
	nc, err := nats.Connect(cluster.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	// The witness makes the stream: publishing fails until it has.
	published := 0
	testenv.EventuallyErr(t, 30*time.Second, "the row and checkpoint published on the stream", func() error {
		for _, m := range []struct {
			subj string
			data []byte
		}{{"tablectl.BAC-07.pit.events", ev}, {"tablectl.BAC-07.pit.checkpoint", cp}}[published:] {
			if _, err := js.Publish(ctx, m.subj, m.data); err != nil {
				return err
			}
			published++
		}
		return nil
	})
	get := func(user, pw string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", view+"floor.json", nil)
		if user != "" {
			req.SetBasicAuth(user, pw)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, c := range [][2]string{{"", ""}, {"floor", "pw-1"}, {"pit", "pw-17"}} {
		resp := get(c[0], c[1])
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("floor view as %q/%q: %s, want 401 with a challenge", c[0], c[1], resp.Status)
		}
	}
	testenv.EventuallyErr(t, 30*time.Second, "the row and its checkpoint witnessed and on the floor view", func() error {
		var n, cps int64
		pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+schema+`.rows), (SELECT count(*) FROM `+schema+`.checkpoints WHERE verified)`).Scan(&n, &cps)
		resp := get("floor", "pw-17")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if n == 1 && cps == 1 && strings.Contains(string(b), `"witnessed":1`) {
			return nil
		}
		return fmt.Errorf("%d rows, %d verified checkpoints witnessed; floor view %s", n, cps, b)
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestWitnessViewNeedsLogin: `tablectl-floor witness --http` without the floor
// view's password is refused before anything starts: the floor view is
// not served to anyone who asks.
func TestWitnessViewNeedsLogin(t *testing.T) {
	var out bytes.Buffer
	err := runWitness([]string{"--db", filepath.Join(t.TempDir(), "floor.db"), "--registry", "none.json", "--http", "127.0.0.1:0"}, &out)
	if !errors.Is(err, errUsage) {
		t.Fatalf("--http without --http-password-file: %v, want a usage error", err)
	}
	err = runWitness([]string{"--db", filepath.Join(t.TempDir(), "floor.db"), "--registry", "none.json", "--http", "127.0.0.1:0",
		"--http-password-file", filepath.Join(t.TempDir(), "missing")}, &out)
	if err == nil || errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--http-password-file") {
		t.Fatalf("--http-password-file missing: %v", err)
	}
}

// TestViewPlainHTTPOffLoopback: the floor view serves plain HTTP on
// loopback only; off it, `witness --http` and `view --http` without
// --tls-cert and --tls-key are refused before anything starts, saying so.
func TestViewPlainHTTPOffLoopback(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "view.password")
	if err := os.WriteFile(pw, []byte("pw-17-pw-17-pw-17\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"--db", filepath.Join(dir, "floor.db"), "--registry", "none.json", "--http-password-file", pw}
	for _, c := range []struct {
		name string
		run  func([]string, io.Writer) error
		args []string
	}{
		{"witness all interfaces", runWitness, []string{"--http", "0.0.0.0:0"}},
		{"witness on a LAN address", runWitness, []string{"--http", "192.0.2.1:8090"}},
		{"view all interfaces", runView, []string{"--http", ":0"}},
		{"witness a certificate without its key", runWitness, []string{"--http", "127.0.0.1:0", "--tls-cert", pw}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.run(append(append([]string{}, common...), c.args...), io.Discard)
			if err == nil || !strings.Contains(err.Error(), "--http") || !strings.Contains(err.Error(), "--tls-") {
				t.Fatalf("%v: %v, want --http refused naming --tls-cert/--tls-key", c.args, err)
			}
		})
	}
}
