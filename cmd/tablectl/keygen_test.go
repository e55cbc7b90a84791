package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/signedcmd"
)

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := runKeygen([]string{"--name", "carol", "--out", dir}, &out); err != nil {
		t.Fatal(err)
	}
	kr, err := signedcmd.ParseKeyring([]byte(fmt.Sprintf(`{"keys":[%s]}`, bytes.TrimSpace(out.Bytes()))))
	if err != nil || len(kr.Lookup("carol")) != 1 {
		t.Fatalf("entry %q: %v", out.String(), err)
	}
	if _, err := audit.LoadPrivateKey(filepath.Join(dir, "carol.key")); err != nil {
		t.Fatal(err)
	}
	if err := runKeygen([]string{"--out", dir}, &out); err == nil {
		t.Fatal("no --name accepted")
	}
}
