package floorbench

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/floor"
)

// simTable is a table as the floor sees it, and no more: a hash chain of
// rows published on its pit.events subject at a dealer's pace, and every
// few rows a checkpoint over its head signed with its own ed25519 key (the
// one the floor's registry holds). Not a controller: no shoe, no trail on
// disk, no Mosquitto; it publishes straight to JetStream, as a table's
// bridge lands its messages in the stream.
type simTable struct {
	id   string
	key  ed25519.PrivateKey
	seq  int64
	prev audit.Hash
}

func newSimTable(id string) (*simTable, error) {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	return &simTable{id: id, key: key}, nil
}

// next is the table's next row (a card dealt) as published on pit.events,
// chained to the one before.
func (t *simTable) next(now time.Time) ([]byte, error) {
	t.seq++
	at := now.UTC()
	r := floor.Row{Table: t.id, Seq: t.seq, At: at.Format(time.RFC3339Nano), Kind: "card_dealt", Shoe: 1, Coup: t.seq/5 + 1,
		Body: fmt.Appendf(nil, `{"card":"%dH","side":"player"}`, t.seq%9+1), PrevHash: t.prev}
	r.Hash = r.ComputeHash()
	t.prev = r.Hash
	return mqttpub.MarshalEvent(mqttpub.Event{Seq: r.Seq, At: at, Kind: r.Kind, Shoe: r.Shoe, Coup: r.Coup, Body: r.Body, PrevHash: r.PrevHash, Hash: r.Hash})
}

// checkpoint signs the table's head, as the controller does after a commit.
func (t *simTable) checkpoint(now time.Time) ([]byte, error) {
	cp := audit.Checkpoint{Table: t.id, Seq: t.seq, HeadHash: t.prev, SignedAt: now.UTC(), KeyID: audit.KeyID(t.key.Public().(ed25519.PublicKey))}
	cp.Signature = ed25519.Sign(t.key, cp.Message())
	return json.Marshal(cp)
}

// deal publishes rows at pace (each gap drawn between 0.8 and 1.2 times
// it, so the tables do not beat together) and a checkpoint every
// cpEvery rows, until ctx ends; published counts the rows the stream
// took.
func (t *simTable) deal(ctx context.Context, js jetstream.JetStream, root string, pace time.Duration, cpEvery int, published *atomic.Int64) error {
	events, cps := root+"."+t.id+".pit.events", root+"."+t.id+".pit.checkpoint"
	// The first row comes anywhere in the first gap: the tables start
	// spread over it.
	wait := time.Duration(rand.Int64N(int64(pace)))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = time.Duration(float64(pace) * (0.8 + 0.4*rand.Float64()))
		now := time.Now()
		row, err := t.next(now)
		if err != nil {
			return err
		}
		if err := publish(ctx, js, events, row); err != nil {
			return err
		}
		published.Add(1)
		if t.seq%int64(cpEvery) == 0 {
			cp, err := t.checkpoint(now)
			if err != nil {
				return err
			}
			if err := publish(ctx, js, cps, cp); err != nil {
				return err
			}
		}
	}
}

// publish waits for the stream's acknowledgement, retrying a refusal (a
// node busy or electing) as a table's bridge re-sends: nothing is lost.
func publish(ctx context.Context, js jetstream.JetStream, subject string, data []byte) error {
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := js.Publish(pctx, subject, data)
		cancel()
		if err == nil || ctx.Err() != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// writeRegistry writes the floor's registry of tables: each table's
// public key, the heartbeat hb.
func writeRegistry(path string, tables []*simTable, hb time.Duration) error {
	type entry struct {
		PublicKeys []string `json:"public_keys"`
	}
	reg := struct {
		Heartbeat string           `json:"heartbeat"`
		Tables    map[string]entry `json:"tables"`
	}{Heartbeat: hb.String(), Tables: map[string]entry{}}
	for _, t := range tables {
		reg.Tables[t.id] = entry{PublicKeys: []string{base64.StdEncoding.EncodeToString(t.key.Public().(ed25519.PublicKey))}}
	}
	b, err := json.Marshal(reg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
