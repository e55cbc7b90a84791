package main

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// TestConfigCheckWholeTruth (issue 35): a shoe port that is not there is
// said, and the last line does not claim the table deals; a mistyped key
// gets the key it may have meant; findings come in the file's order.
func TestConfigCheckWholeTruth(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "box.json")
	os.WriteFile(cfg, []byte(`{"table_id": "T", "profile": "vip",
 "shoe": {"port": {"path": "/dev/ttyNOPE"}},
 "audit": {"path": "t.db"},
 "mqtt": {"disabled": true}}`), 0o600)
	var out, errb bytes.Buffer
	code := run([]string{"config", "check", cfg}, &out, &errb)
	if code != 0 || !strings.Contains(out.String(), cfg+":2:20: warning: shoe.port.path: not there: /dev/ttyNOPE does not exist") ||
		strings.Contains(out.String(), "would start and deal") || !strings.Contains(out.String(), "it deals once the shoe's port is there") {
		t.Errorf("a missing shoe port: exit %d\n%s%s", code, out.String(), errb.String())
	}
	// Findings in the file's order: shoe (line 2) before audit (line 3)
	// before mqtt (line 4), whatever their keys.
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := 0
	for _, l := range lines[:len(lines)-1] {
		var n int
		rest := strings.TrimPrefix(l, cfg+":")
		if _, err := fmt.Sscanf(rest, "%d:", &n); err != nil {
			continue // no line: after those that have one
		}
		if n < last {
			t.Errorf("findings out of the file's order:\n%s", out.String())
		}
		last = n
	}
	typo := filepath.Join(dir, "typo.json")
	os.WriteFile(typo, []byte(`{"table_id": "T", "profile": "vip", "shoe": {"port": {"path": "/dev/null"}},
 "audit": {"dir": "trail", "segment_cuttover": "06:00"},
 "segment_zone": "UTC",
 "mqtt": {"disabled": true}}`), 0o600)
	out.Reset()
	code = run([]string{"config", "check", typo}, &out, &errb)
	for _, want := range []string{
		typo + ":2:28: error: audit.segment_cuttover: unknown key (did you mean audit.segment_cutover?)",
		typo + ":3:2: error: segment_zone: unknown key (did you mean audit.segment_zone?)",
	} {
		if code != 1 || !strings.Contains(out.String(), want) {
			t.Errorf("typos: exit %d, want %q in\n%s", code, want, out.String())
		}
	}
	if strings.Index(out.String(), "segment_cuttover") > strings.Index(out.String(), "segment_zone:") {
		t.Errorf("not in the file's order:\n%s", out.String())
	}
}
