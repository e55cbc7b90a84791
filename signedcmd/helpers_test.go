package signedcmd

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/tablectl/tablectl/base/clock"
)

// fakeClock is the clock the tests move by hand.
type fakeClock = clock.Fake

func newFakeClock() *fakeClock {
	return clock.NewFake(time.Date(2026, 11, 22, 14, 3, 7, 123000000, time.UTC))
}

// rfcKey is RFC 8032's test key 1, the key of testdata/keyring.json.
func rfcKey() ed25519.PrivateKey {
	seed := []byte{
		0x9d, 0x61, 0xb1, 0x9d, 0xef, 0xfd, 0x5a, 0x60, 0xba, 0x84, 0x4a, 0xf4, 0x92, 0xec, 0x2c, 0xc4,
		0x44, 0x49, 0xc5, 0x69, 0x7b, 0x32, 0x69, 0x19, 0x70, 0x3b, 0xac, 0x03, 0x1c, 0xae, 0x7f, 0x60,
	}
	return ed25519.NewKeyFromSeed(seed)
}

// keyFor derives a reproducible key from a name.
func keyFor(name string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("tablectl test key " + name))
	return ed25519.NewKeyFromSeed(seed[:])
}

// testKeyring: alice and bob may do anything, the game server may only
// close betting. mallory has a key but is not in the keyring.
func testKeyring(t testing.TB) *Keyring {
	t.Helper()
	entry := func(name string, actions string) string {
		pub := keyFor(name).Public().(ed25519.PublicKey)
		return fmt.Sprintf(`{"name":%q,"public_key":%q,"actions":%s}`, name, base64.StdEncoding.EncodeToString(pub), actions)
	}
	doc := `{"keys":[` + entry("alice", `["*"]`) + `,` + entry("bob", `["*"]`) + `,` + entry("game-server", `["bets-closed"]`) + `]}`
	kr, err := ParseKeyring([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// signed builds and signs a command for table BAC-07 issued at the clock's
// time.
func signed(t testing.TB, clock *fakeClock, by, action string, edit func(*Command)) Command {
	t.Helper()
	c := Command{Table: "BAC-07", ID: NewID(), Action: action, Supervisor: by, IssuedAt: FormatTime(clock.Now())}
	if edit != nil {
		edit(&c)
	}
	if err := c.Sign(keyFor(by)); err != nil {
		t.Fatal(err)
	}
	return c
}

func wire(t testing.TB, c Command) []byte {
	t.Helper()
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newTestVerifier(t testing.TB, clock *fakeClock) *Verifier {
	t.Helper()
	v, err := NewVerifier(VerifierOptions{Table: "BAC-07", Keys: testKeyring(t), Window: time.Minute, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return v
}
