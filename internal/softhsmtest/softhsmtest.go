// Package softhsmtest makes a SoftHSM2 token holding an Ed25519 checkpoint
// key, for tests of the key in a token: in a temporary directory of its
// own (SOFTHSM2_CONF), with the commands docs/audit.md gives (softhsm2-util
// makes the token, OpenSC's pkcs11-tool the key pair), so those commands
// are tested too. It is for tests only.
package softhsmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/internal/testenv"
)

// Module is where Debian's softhsm2 package puts SoftHSM2's PKCS#11 module.
const Module = "/usr/lib/softhsm/libsofthsm2.so"

// The token and key Token makes.
const (
	TokenLabel = "tablectl"
	KeyLabel   = "checkpoint"
	UserPIN    = "4321"
	SOPIN      = "87654321"
)

// Token is a SoftHSM2 token with one Ed25519 key pair, KeyLabel.
type Token struct {
	// Dir holds the token and the PIN file.
	Dir string
	// PINFile holds UserPIN.
	PINFile string
	// URI names the key with module-path and pin-source, as
	// audit.checkpoint_key does; PublicURI without the PIN, as a verifier
	// does.
	URI, PublicURI string
}

// Dir points SoftHSM2 at a fresh, empty token directory of its own
// (SOFTHSM2_CONF, for the rest of the test) and writes pin to a PIN file.
// It skips, or fails under TABLECTL_TEST_ALL=1, without SoftHSM2's module.
func Dir(t testing.TB, pin string) (dir, pinFile string) {
	t.Helper()
	if _, err := os.Stat(Module); err != nil {
		testenv.Missing(t, "SoftHSM2's module "+Module+" (Debian package softhsm2)")
	}
	dir = t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.Mkdir(tokens, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "softhsm2.conf")
	if err := os.WriteFile(conf, []byte("directories.tokendir = "+tokens+"\nobjectstore.backend = file\nlog.level = ERROR\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SOFTHSM2_CONF", conf)
	pinFile = filepath.Join(dir, "hsm.pin")
	if err := os.WriteFile(pinFile, []byte(pin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, pinFile
}

// New makes the token and the key, pointing SOFTHSM2_CONF at it for the
// rest of the test (so the test may not be parallel). It skips, or fails
// under TABLECTL_TEST_ALL=1, without softhsm2 or opensc.
func New(t testing.TB) Token {
	t.Helper()
	softhsm := testenv.Command(t, "softhsm2-util", "softhsm2")
	tool := testenv.Command(t, "pkcs11-tool", "opensc")
	dir, pinFile := Dir(t, UserPIN)
	for _, args := range [][]string{
		{softhsm, "--init-token", "--free", "--label", TokenLabel, "--so-pin", SOPIN, "--pin", UserPIN},
		{tool, "--module", Module, "--token-label", TokenLabel, "--login", "--pin", UserPIN,
			"--keypairgen", "--key-type", "EC:edwards25519", "--usage-sign", "--label", KeyLabel, "--id", "01"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	pub := "pkcs11:token=" + TokenLabel + ";object=" + KeyLabel + "?module-path=" + Module
	return Token{Dir: dir, PINFile: pinFile, URI: pub + "&pin-source=file:" + pinFile, PublicURI: pub}
}
