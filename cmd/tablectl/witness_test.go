package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
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
	if alerts, err := st.Take(ctx, reg, "test", rows, cps); err != nil || len(alerts) != 0 {
		t.Fatalf("witnessing the honest trail: %v %v", alerts, err)
	}
	url := floortest.PostgresURL()
	var out bytes.Buffer
	if err := runAudit([]string{"verify", "--db", honest, "--pubkey", pubFile, "--witness", url, "--witness-schema", schema}, &out); err != nil {
		t.Fatalf("honest trail against the witness: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "matches the witness: 6 rows matched") {
		t.Errorf("honest: %s", out.String())
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
	if err := runAudit([]string{"verify", "--db", rewritten, "--pubkey", pubFile}, &out); err != nil {
		t.Fatalf("the rewritten trail should verify on its own (that is the attack): %v\n%s", err, out.String())
	}
	out.Reset()
	err = runAudit([]string{"verify", "--db", rewritten, "--pubkey", pubFile, "--witness", url, "--witness-schema", schema}, &out)
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
	err = runAudit([]string{"verify", "--db", cut, "--pubkey", pubFile, "--witness", url, "--witness-schema", schema}, &out)
	if !errors.Is(err, errTampered) || !strings.Contains(out.String(), "2 witnessed rows past the trail's head") {
		t.Errorf("cut back against the witness: %v\n%s", err, out.String())
	}
}
