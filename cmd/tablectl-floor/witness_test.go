package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
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
	go func() {
		done <- witness(ctx, floor.Config{Name: "t", NATS: cluster.URLs(), Replicas: 1, Registry: reg, Logger: slog.New(slog.DiscardHandler)},
			floortest.PostgresURL(), schema, "127.0.0.1:0", floor.Login{User: "floor", Password: "pw-17"}, out)
	}()
	var view string
	for view == "" {
		if i := strings.Index(out.String(), "floor view on "); i >= 0 {
			view = strings.Fields(out.String()[i+len("floor view on "):])[0]
		}
		select {
		case err := <-done:
			t.Fatalf("witness stopped: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err1 := js.Publish(ctx, "tablectl.BAC-07.pit.events", ev)
		_, err2 := js.Publish(ctx, "tablectl.BAC-07.pit.checkpoint", cp)
		if err1 == nil && err2 == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish: %v %v", err1, err2)
		}
		time.Sleep(200 * time.Millisecond) // the witness makes the stream
	}
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
	for {
		var n, cps int64
		pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+schema+`.rows), (SELECT count(*) FROM `+schema+`.checkpoints WHERE verified)`).Scan(&n, &cps)
		resp := get("floor", "pw-17")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if n == 1 && cps == 1 && strings.Contains(string(b), `"witnessed":1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rows, %d verified checkpoints witnessed; floor view %s", n, cps, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
