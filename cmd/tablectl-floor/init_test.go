package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInit: init makes a password file per table of the registry, per
// witness and the admin's (0600), and nodes' authorization block with
// their hashes only; run again, it keeps every password and adds the
// new table's.
func TestInit(t *testing.T) {
	dir := t.TempDir()
	pub, _, _ := ed25519.GenerateKey(nil)
	k := base64.StdEncoding.EncodeToString(pub)
	writeReg := func(tables ...string) string {
		var e []string
		for _, tb := range tables {
			e = append(e, fmt.Sprintf(`%q: {"public_keys": [%q]}`, tb, k))
		}
		p := filepath.Join(dir, "floor.json")
		if err := os.WriteFile(p, []byte(`{"tables": {`+strings.Join(e, ",")+`}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	logins := filepath.Join(dir, "logins")
	var out bytes.Buffer
	if err := runInit([]string{"--registry", writeReg("BAC-07", "BAC-08"), "--dir", logins}, &out); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(logins, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	files := []string{"admin.password", "witness-w1.password", "witness-w2.password", "bridge-BAC-07.password", "bridge-BAC-08.password"}
	first := map[string]string{}
	for _, f := range files {
		first[f] = read(f)
		if fi, _ := os.Stat(filepath.Join(logins, f)); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, fi.Mode().Perm())
		}
		if strings.Contains(read("nats-auth.conf"), strings.TrimSpace(first[f])) {
			t.Errorf("nats-auth.conf holds %s's password", f)
		}
	}
	auth := read("nats-auth.conf")
	for _, want := range []string{`user: "bridge-BAC-07"`, `"tablectl.BAC-07.>"`, `user: "witness-w1"`, `"$JS.API.CONSUMER.MSG.NEXT.TABLECTL.witness"`, `user: "admin"`} {
		if !strings.Contains(auth, want) {
			t.Errorf("nats-auth.conf does not say %s:\n%s", want, auth)
		}
	}
	if err := runInit([]string{"--registry", writeReg("BAC-07", "BAC-08", "BAC-09"), "--dir", logins}, &out); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if read(f) != first[f] {
			t.Errorf("%s changed on the second run", f)
		}
	}
	if read("bridge-BAC-09.password") == "" || !strings.Contains(read("nats-auth.conf"), `"bridge-BAC-09"`) {
		t.Error("the new table has no login")
	}
}
