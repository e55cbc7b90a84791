package config

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/signedcmd"
)

// writeSignedKeyring writes a keyring of entries at path, signed by a
// security officer's key made for the test, and returns the public key file
// (mqtt.keyring_authority).
func writeSignedKeyring(t testing.TB, path string, entries ...[]byte) (officer any, authority string) {
	t.Helper()
	priv, pub, err := signedcmd.GenerateAuthority(t.TempDir()) // kept off the box, as in production
	if err != nil {
		t.Fatal(err)
	}
	key, err := audit.LoadPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]json.RawMessage, len(entries))
	for i, e := range entries {
		raw[i] = e
	}
	doc, _ := json.Marshal(map[string]any{"keys": raw})
	signed, _, err := signedcmd.SignKeyring(doc, key, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, signed, 0o644); err != nil {
		t.Fatal(err)
	}
	return key, pub
}
