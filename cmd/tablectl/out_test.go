package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/signedcmd"
)

// TestOutMakesItsFolder: every command that writes what --out names makes
// the folder first, as a newcomer's `--out ~/new-folder/...` expects
// (README's build key: `audit keygen --out ~/tablectl-build-key`).
func TestOutMakesItsFolder(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "keys", audit.PrivateKeyFile)
	if _, _, err := audit.GenerateKey(filepath.Dir(key)); err != nil {
		t.Fatal(err)
	}
	signer, err := audit.LoadPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// A trail with a checkpoint, for audit checkpoint to write out.
	trail := filepath.Join(dir, "trail.db")
	st, err := audit.Open(context.Background(), trail, audit.Options{Table: "T1", Key: signer, CheckpointEvery: 1, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(context.Background(), audit.Event{Kind: "card", Body: map[string]string{"card": "KH"}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// A keyring draft and the officer's key, for keyring sign.
	keyring := filepath.Join(dir, "supervisors.json")
	os.WriteFile(keyring, []byte(`{"keys":[]}`), 0o644)
	officer, _, err := signedcmd.GenerateAuthority(filepath.Join(dir, "officer"))
	if err != nil {
		t.Fatal(err)
	}
	exe, cfg := filepath.Join(dir, "tablectl"), filepath.Join(dir, "tablectl.json")
	os.WriteFile(exe, []byte("\x7fELF a program"), 0o755)
	os.WriteFile(cfg, []byte(`{"table_id":"T"}`), 0o644)
	cases := []struct {
		args  []string
		wrote string // under the new folder
	}{
		{[]string{"audit", "keygen", "--out", "{new}"}, audit.PrivateKeyFile},
		{[]string{"audit", "export", "--db", trail, "--out", "{new}/trail.jsonl"}, "trail.jsonl"},
		{[]string{"audit", "checkpoint", "--db", trail, "--out", "{new}/checkpoint.json"}, "checkpoint.json"},
		{[]string{"audit", "pubkey", "--key", key, "--out", "{new}/checkpoint.pub"}, "checkpoint.pub"},
		{[]string{"keygen", "--name", "carol", "--out", "{new}"}, "carol.key"},
		{[]string{"keyring", "keygen", "--out", "{new}"}, "officer.key"},
		{[]string{"keyring", "sign", "--keyring", keyring, "--key", officer, "--out", "{new}/supervisors.json"}, "supervisors.json"},
		{[]string{"manifest", "sign", "--key", key, "--exe", exe, "--config", cfg, "--out", "{new}/manifest.json"}, "manifest.json"},
	}
	for i, c := range cases {
		name := strings.Join(c.args[:2], " ")
		t.Run(name, func(t *testing.T) {
			// Two folders deep, neither there yet.
			fresh := filepath.Join(dir, "new", strings.ReplaceAll(name, " ", "-"), "folder")
			args := make([]string, len(c.args))
			for j, a := range c.args {
				args[j] = strings.ReplaceAll(a, "{new}", fresh)
			}
			var stdout, stderr bytes.Buffer
			if code := run(args, &stdout, &stderr); code != 0 {
				t.Fatalf("case %d: tablectl %s: exit %d\n%s", i, strings.Join(args, " "), code, stderr.String())
			}
			if _, err := os.Stat(filepath.Join(fresh, c.wrote)); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Every --out flag of the commands is a case here.
	flags := 0
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		flags += len(outFlag.FindAll(b, -1))
	}
	if flags != len(cases) {
		t.Errorf("the commands define %d --out flags and this test covers %d: add the new one", flags, len(cases))
	}
}

var outFlag = regexp.MustCompile(`\.String\("out",`)
