package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	signedcmd "github.com/tablectl/tablectl/command"
	"github.com/tablectl/tablectl/internal/mqtttest"
)

// The supervisor's commands from the command line: what is required, and a
// table that does not answer (the controller's tests send accepted and
// refused commands through the same internal/supervisor).
func TestSuperviseCommandLine(t *testing.T) {
	dir := t.TempDir()
	if _, _, _, err := signedcmd.GenerateKey(dir, "ann"); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "ann.key")
	var out bytes.Buffer
	if err := runSupervise("suspend", []string{"--key", key}, &out); err == nil || !strings.Contains(err.Error(), "--table and --key are required") {
		t.Errorf("no --table: %v", err)
	}
	if err := runSupervise("suspend", []string{"--table", "T", "--key", filepath.Join(dir, "absent.key")}, &out); err == nil {
		t.Error("a missing key file was taken")
	}
	url := mqtttest.Shared(t)
	err := runSupervise("suspend", []string{"--broker", url, "--table", "NOBODY-" + mqtttest.ClientID(t, "t"), "--key", key, "--timeout", "1s"}, &out)
	if err == nil || !strings.Contains(err.Error(), "no reply") {
		t.Fatalf("a table that does not answer: %v", err)
	}
	if out.Len() != 0 {
		t.Errorf("printed %q with no reply", out.String())
	}
}
