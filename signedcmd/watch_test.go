package signedcmd

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/internal/testenv"
)

// TestWatchKeyring: a keyring the officer signed reaches the running
// keyring (and the screen) without a restart; an enrolment made on the box
// (unsigned), a keyring signed by another key, one edited after signing,
// a broken file and one Take refuses change nothing, each refusal heard
// with its reason.
func TestWatchKeyring(t *testing.T) {
	path := filepath.Join(t.TempDir(), "supervisors.json")
	pubA, _, _ := ed25519.GenerateKey(rand.Reader)
	pubB, _, _ := ed25519.GenerateKey(rand.Reader)
	officerPub, officer, _ := ed25519.GenerateKey(rand.Reader)
	_, stranger, _ := ed25519.GenerateKey(rand.Reader)
	authorities := []ed25519.PublicKey{officerPub}
	sign := func(key ed25519.PrivateKey) {
		t.Helper()
		if _, err := SignKeyringFile(path, "", key, 0, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if err := EnrolFile(path, Enrolment{Name: "ann", PublicKey: pubA}); err != nil {
		t.Fatal(err)
	}
	sign(officer)
	kr, _, err := LoadSignedKeyring(path, authorities)
	if err != nil {
		t.Fatal(err)
	}
	screen, err := NewScreen("T1", kr)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var refused []error
	var taken []int64
	veto := false
	w := &KeyringWatch{Path: path, Keys: kr, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Load: func(p string) (*Keyring, error) { k, _, err := LoadSignedKeyring(p, authorities); return k, err },
		Take: func(next *Keyring) error {
			mu.Lock()
			defer mu.Unlock()
			if veto {
				return errors.New("vetoed")
			}
			taken = append(taken, next.Meta().Serial)
			return nil
		},
		Refused: func(err error, sum string) {
			mu.Lock()
			defer mu.Unlock()
			refused = append(refused, err)
		},
	}
	w.Check() // as the controller does once it has loaded the keyring
	// The watch looks only when the test moves its clock, and every change
	// is stamped with a modification time of its own: a file replaced
	// within one tick of the filesystem's clock, same size, on a reused
	// inode, is still seen, and never seen twice.
	const every = 10 * time.Millisecond
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		WatchKeyring(ctx, w, every, clk)
	}()
	defer func() { cancel(); <-done }()
	if _, err := clk.WaitArmed(ctx, every); err != nil { // its first look is taken
		t.Fatal(err)
	}
	stamp := time.Unix(1_600_000_000, 0)
	changed := func() {
		t.Helper()
		stamp = stamp.Add(time.Second)
		if err := os.Chtimes(path, stamp, stamp); err != nil {
			t.Fatal(err)
		}
		clk.Advance(every)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, what, cond)
	}
	refusals := func() int { mu.Lock(); defer mu.Unlock(); return len(refused) }
	lastRefusal := func() error { mu.Lock(); defer mu.Unlock(); return refused[len(refused)-1] }
	expectRefused := func(what string, do func(), want error, text string) {
		t.Helper()
		n, keys := refusals(), kr.Len()
		do()
		changed()
		waitFor(what+" refused", func() bool { return refusals() > n })
		if err := lastRefusal(); (want != nil && !errors.Is(err, want)) || !strings.Contains(err.Error(), text) {
			t.Errorf("%s: refused with %v, want %v (%q)", what, err, want, text)
		}
		if kr.Len() != keys {
			t.Errorf("%s: the keys changed", what)
		}
	}
	bob := []byte(`{"table":"T1","supervisor":"bob","id":"x"}`)
	if kr.HasName("bob") || screen.Check(bob, len(bob)) != CodeUnknownKey {
		t.Fatal("bob known before his enrolment")
	}
	// Enrolled on the box: an unsigned draft.
	expectRefused("bob enrolled, unsigned", func() {
		if err := EnrolFile(path, Enrolment{Name: "bob", PublicKey: pubB}); err != nil {
			t.Fatal(err)
		}
	}, ErrKeyringUnsigned, "tablectl keyring sign")
	// Signed by a key that is not the authority.
	expectRefused("bob signed by a stranger", func() { sign(stranger) }, ErrKeyringAuthority, "the authorities here")
	// The officer signs it: bob is in.
	sign(officer)
	changed()
	waitFor("bob's key", func() bool { return len(kr.Lookup("bob")) == 1 })
	if kr.Len() != 2 || screen.Check(bob, len(bob)) != "" || len(kr.Lookup("ann")) != 1 {
		t.Errorf("after the reload: %d keys, screen %q", kr.Len(), screen.Check(bob, len(bob)))
	}
	// An entry slipped into the signed keyring: the signature no longer
	// covers it.
	signed, _ := os.ReadFile(path)
	pubC, _, _ := ed25519.GenerateKey(rand.Reader)
	entry, _ := Entry("mallory", pubC, []string{ActionsAll})
	edited := strings.Replace(string(signed), `"keys": [`, `"keys": [`+string(entry)+",", 1)
	expectRefused("an entry added after signing", func() { writeSigned(t, path, []byte(edited)) }, ErrKeyringSignature, "changed after it was signed")
	if kr.HasName("mallory") {
		t.Fatal("mallory's entry was taken")
	}
	// A broken file.
	expectRefused("a broken file", func() { writeSigned(t, path, []byte(`{"keys": [{"name": "x"`)) }, nil, "keyring")
	// Signed, bob gone, but the taker vetoes it (the trail cannot record
	// it): the keys stay.
	mu.Lock()
	veto = true
	mu.Unlock()
	dir := t.TempDir()
	draft := func(serial string) string {
		p := filepath.Join(dir, "draft-"+serial+".json")
		writeSigned(t, p, []byte(`{"keys": [], "serial": `+serial+`}`))
		if _, err := SignKeyringFile(p, "", officer, 0, time.Now()); err != nil {
			t.Fatal(err)
		}
		return p
	}
	vetoed, taken9 := draft("7"), draft("8")
	expectRefused("bob removed, vetoed", func() { os.Rename(vetoed, path) }, nil, "vetoed")
	mu.Lock()
	veto = false
	mu.Unlock()
	os.Rename(taken9, path)
	changed()
	waitFor("bob's removal", func() bool { return kr.Len() == 0 })
	if screen.Check(bob, len(bob)) != CodeUnknownKey {
		t.Error("bob still passes the screen")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(taken) != 2 || taken[0] != 3 || taken[1] != 9 {
		t.Errorf("serials taken: %v, want [3 9] (1 signed before, 2 by a stranger)", taken)
	}
}

// writeSigned replaces the file at path whole, as tablectl does.
func writeSigned(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := writeFileAtomic(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
