package controller

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/signedcmd"
)

// writeSignedKeyring writes a keyring of entries at path, signed by a
// security officer's key made for the test, and returns the officer's
// private key and the public key file (mqtt.keyring_authority).
func writeSignedKeyring(t testing.TB, path string, entries ...[]byte) (officer ed25519.PrivateKey, authority string) {
	t.Helper()
	dir := t.TempDir() // the officer's key is kept off the box, as in production
	priv, pub, err := signedcmd.GenerateAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	if officer, err = audit.LoadPrivateKey(priv); err != nil {
		t.Fatal(err)
	}
	raw := make([]json.RawMessage, len(entries))
	for i, e := range entries {
		raw[i] = e
	}
	doc, _ := json.Marshal(map[string]any{"keys": raw})
	signed, _, err := signedcmd.SignKeyring(doc, officer, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, signed, 0o644); err != nil {
		t.Fatal(err)
	}
	return officer, pub
}

// testSupervisors are supervisors' keys and the signed keyring that holds
// them.
type testSupervisors struct {
	keyring, authority string
	officer            ed25519.PrivateKey
	keys               map[string]ed25519.PrivateKey
}

// newTestSupervisors makes a key for each name and a keyring of them (every
// action) in dir, signed by an officer's key of the test's own.
func newTestSupervisors(t *testing.T, dir string, names ...string) *testSupervisors {
	t.Helper()
	s := &testSupervisors{keyring: filepath.Join(dir, "supervisors.json"), keys: map[string]ed25519.PrivateKey{}}
	var entries [][]byte
	for _, n := range names {
		pub, priv, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		s.keys[n] = priv
		e, err := signedcmd.Entry(n, pub, []string{signedcmd.ActionsAll})
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	s.officer, s.authority = writeSignedKeyring(t, s.keyring, entries...)
	return s
}

// mqttConfig is the keyring's part of an mqtt section, without braces.
func (s *testSupervisors) mqttConfig() string {
	return fmt.Sprintf(`"keyring":%q,"keyring_authority":%q`, s.keyring, s.authority)
}

// sign signs c as name and returns it as sent.
func (s *testSupervisors) sign(t *testing.T, c signedcmd.Command, name string) []byte {
	t.Helper()
	if err := c.Sign(s.keys[name]); err != nil {
		t.Fatal(err)
	}
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runInProcess starts a controller as cfg says and runs it; stop stops it
// and waits for it (failing the test if a part hangs).
func runInProcess(t *testing.T, cfg config.Config, tc coup.TableConfig, log *slog.Logger, hooks Hooks) (ctl *Controller, stop func(), err error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ctl, err = Start(ctx, cfg, tc, log, hooks)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	return ctl, func() {
		t.Helper()
		cancel()
		if !awaitStop(t, "the controller", done, guard, nil) {
			t.FailNow()
		}
	}, nil
}

// handIn hands a command, as sent, to the controller as the broker would,
// and returns the rows recorded meanwhile.
func handIn(t *testing.T, ctl *Controller, payload []byte) []audit.Record {
	t.Helper()
	before := ctl.rec.Store().Head().Seq
	ctl.commands.HandleMessage(context.Background(), signedcmd.Message{Payload: payload})
	var out []audit.Record
	for rec, err := range ctl.rec.Store().Events(context.Background(), audit.Query{From: before + 1}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
	return out
}
