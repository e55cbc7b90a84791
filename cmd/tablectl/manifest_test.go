package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/audit"
)

// tablectl manifest sign writes a manifest that manifest check passes,
// and check fails once a byte of the executable changes.
func TestManifestCommands(t *testing.T) {
	dir := t.TempDir()
	exe, cfg := filepath.Join(dir, "tablectl"), filepath.Join(dir, "tablectl.json")
	os.WriteFile(exe, []byte("\x7fELF a program"), 0o755)
	os.WriteFile(cfg, []byte(`{"table_id":"T"}`), 0o644)
	key, pub := filepath.Join(dir, "build.key"), filepath.Join(dir, "manifest.pub")
	if _, err := audit.WriteKeyPair(key, pub); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "manifest.json")
	var out bytes.Buffer
	if err := runManifest([]string{"sign", "--key", key, "--exe", exe + "=/usr/bin/tablectl", "--config", cfg, "--out", manifest}, &out); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(manifest)
	if !strings.Contains(string(data), `"path": "/usr/bin/tablectl"`) || !strings.Contains(string(data), `"role": "config"`) {
		t.Fatalf("manifest:\n%s", data)
	}
	check := []string{"check", "--manifest", manifest, "--pubkey", pub, "--exe", exe, "--config", cfg}
	if err := runManifest(check, &out); err != nil {
		t.Fatalf("check: %v\n%s", err, out.String())
	}
	os.WriteFile(exe, []byte("\x7fELF a progrAm"), 0o755)
	out.Reset()
	if err := runManifest(check, &out); err == nil || !strings.Contains(out.String(), `"result": "failed"`) {
		t.Fatalf("a changed executable passed: %v\n%s", err, out.String())
	}
	for _, args := range [][]string{{}, {"seal"}, {"sign", "--exe", exe}, {"sign", "--key", key, "--config", cfg}, {"check"}} {
		if err := runManifest(args, &out); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}
