package controller

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/pkcs11signer"
	"github.com/tablectl/tablectl/internal/softhsmtest"
)

// TestCheckpointKeyInToken runs the table with audit.checkpoint_key a
// PKCS#11 URI: a SoftHSM2 token made with docs/audit.md's commands. The
// checkpoints the token signed verify with the public key read from it.
func TestCheckpointKeyInToken(t *testing.T) {
	tok := softhsmtest.New(t)
	dir, uri := tok.Dir, tok.URI

	doc := `{"table_id":"HSM-01","profile":"vip","shoe":{"port":{"path":"` + filepath.Join(dir, "no-shoe") + `"}},
		"audit":{"path":"trail.db","checkpoint_key":"` + uri + `","checkpoint_every":1},"mqtt":{"disabled":true}}`
	cfg, tc, err := config.Parse([]byte(doc), dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Audit.CheckpointKey != uri {
		t.Fatalf("checkpoint_key %q: the URI was changed to %q", uri, cfg.Audit.CheckpointKey)
	}
	cfg.Shoe.Port.BackoffMin = device.Duration(5 * time.Millisecond)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	// Started with time to spare (opening the trail and the token waits
	// on a loaded machine), then run for a moment: a checkpoint or two.
	start, cancelStart := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelStart()
	ctl, err := Start(start, cfg, tc, log, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := ctl.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if out := logs.tail(1000); !strings.Contains(out, "checkpoint key in a PKCS#11 token") || strings.Contains(out, "can leave its token") {
		t.Errorf("logs do not say a non-exportable key in a token signs:\n%s", out)
	}

	pub, err := pkcs11signer.LoadPublic(tok.PublicURI)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(context.Background(), cfg.Audit.Path, audit.VerifyOptions{PublicKeys: []ed25519.PublicKey{pub}})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || !rep.SignaturesChecked || rep.Checkpoints == 0 || rep.Events == 0 {
		t.Fatalf("verify with the token's public key: ok %v, signatures checked %v, %d checkpoints, %d events, findings %v",
			rep.OK(), rep.SignaturesChecked, rep.Checkpoints, rep.Events, rep.Findings)
	}
}
