package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigCheckCLI: exit 0 only for a config that would start; each
// finding on its own line as FILE:LINE:COL.
func TestConfigCheckCLI(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(good, []byte(`{"table_id":"T","profile":"vip","shoe":{"port":{"path":"/dev/ttyUSB0"}},"audit":{"path":"t.db"},"mqtt":{"disabled":true}}`), 0o600)
	os.WriteFile(bad, []byte("{\"table_id\":\"T\",\n \"profile\":\"vip\",\n \"audit\":{\"path\":\"t.db\", \"every\": 3}}"), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"config", "check", good}, &out, &errb); code != 0 || !strings.Contains(out.String(), "warning: audit.checkpoint_key") || !strings.Contains(out.String(), "ok, the controller would start") {
		t.Errorf("good: exit %d\n%s%s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run([]string{"config", "check", bad}, &out, &errb); code != 1 || !strings.Contains(out.String(), bad+":3:26: error: audit.every: unknown key") {
		t.Errorf("bad: exit %d\n%s", code, out.String())
	}
	out.Reset()
	if code := run([]string{"config", "check", "--json", bad}, &out, &errb); code != 1 || !json.Valid(out.Bytes()) {
		t.Errorf("json: exit %d %s", code, out.String())
	}
	if code := run([]string{"config", "check"}, &out, &errb); code != 2 {
		t.Errorf("no file: exit %d", code)
	}
}
