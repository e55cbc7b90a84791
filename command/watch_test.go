package command

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tablectl/tablectl/internal/clock"
)

// TestWatchKeyring: an enrolment reaches the running keyring (and the
// screen) without a restart; a broken file changes nothing.
func TestWatchKeyring(t *testing.T) {
	path := filepath.Join(t.TempDir(), "supervisors.json")
	pubA, _, _ := ed25519.GenerateKey(rand.Reader)
	pubB, _, _ := ed25519.GenerateKey(rand.Reader)
	if err := EnrolFile(path, Enrolment{Name: "ann", PublicKey: pubA}); err != nil {
		t.Fatal(err)
	}
	kr, err := LoadKeyring(path)
	if err != nil {
		t.Fatal(err)
	}
	screen, err := NewScreen("T1", kr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		WatchKeyring(ctx, path, kr, 10*time.Millisecond, clock.Real, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	defer func() { cancel(); <-done }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not in 10s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	bob := []byte(`{"table":"T1","supervisor":"bob","id":"x"}`)
	if kr.HasName("bob") || screen.Check(bob, len(bob)) != CodeUnknownKey {
		t.Fatal("bob known before his enrolment")
	}
	if err := EnrolFile(path, Enrolment{Name: "bob", PublicKey: pubB}); err != nil {
		t.Fatal(err)
	}
	waitFor("bob's key", func() bool { return len(kr.Lookup("bob")) == 1 })
	if kr.Len() != 2 || screen.Check(bob, len(bob)) != "" || len(kr.Lookup("ann")) != 1 {
		t.Errorf("after the reload: %d keys, screen %q", kr.Len(), screen.Check(bob, len(bob)))
	}
	// A broken file: the keys in use stay.
	if err := os.WriteFile(path, []byte(`{"keys": [{"name": "x"`), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if kr.Len() != 2 {
		t.Errorf("a broken keyring file changed the keys: %d", kr.Len())
	}
	// Fixed, with bob gone: he is refused again.
	if err := os.WriteFile(path, []byte(`{"keys": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor("bob's removal", func() bool { return kr.Len() == 0 })
	if screen.Check(bob, len(bob)) != CodeUnknownKey {
		t.Error("bob still passes the screen")
	}
}
