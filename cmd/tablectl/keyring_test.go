package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/signedcmd"
)

// TestKeyringSteps: the officer's steps by the command line: the officer's
// key, a supervisor's key and enrolment request (keygen), the request
// enrolled into a draft, the draft refused by show --authority as the
// controller would, then signed and shown as the controller takes it.
func TestKeyringSteps(t *testing.T) {
	officer, sup := t.TempDir(), t.TempDir()
	ring := filepath.Join(t.TempDir(), "supervisors.json")
	runOK := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	if out := runOK("keyring", "keygen", "--out", officer); !strings.Contains(out, "officer.key") || !strings.Contains(out, "authority ") {
		t.Errorf("keygen: %q", out)
	}
	runOK("keygen", "--name", "ann", "--out", sup)
	req := filepath.Join(sup, "ann.request.json")
	if b, err := os.ReadFile(req); err != nil {
		t.Fatal(err)
	} else if r, _, err := signedcmd.ParseRequest(b); err != nil || r.Name != "ann" {
		t.Fatalf("ann's request: %+v %v", r, err)
	}
	if out := runOK("enrol", "--keyring", ring, "--request", req, "--actions", "void,resume"); !strings.Contains(out, "enrolled ann") || !strings.Contains(out, "now unsigned") {
		t.Errorf("enrol: %q", out)
	}
	authority := filepath.Join(officer, "officer.pub")
	var out, errb bytes.Buffer
	if code := run([]string{"keyring", "show", "--keyring", ring, "--authority", authority}, &out, &errb); code != 1 ||
		!strings.Contains(out.String(), "UNSIGNED") || !strings.Contains(errb.String(), "the controller would refuse it") {
		t.Fatalf("show of the draft: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	if out := runOK("keyring", "sign", "--keyring", ring, "--key", filepath.Join(officer, "officer.key")); !strings.Contains(out, "serial 1, signed ") {
		t.Errorf("sign: %q", out)
	}
	if out := runOK("keyring", "show", "--keyring", ring, "--authority", authority); !strings.Contains(out, "signature: ok") || !strings.Contains(out, "  ann  ") || !strings.Contains(out, "void,resume") {
		t.Errorf("show: %q", out)
	}
	// A request altered on its way is refused.
	b, _ := os.ReadFile(req)
	bad := filepath.Join(sup, "bad.json")
	os.WriteFile(bad, bytes.Replace(b, []byte(`"ann"`), []byte(`"bob"`), 1), 0o644)
	if code := run([]string{"enrol", "--keyring", ring, "--request", bad}, &out, &errb); code != 1 {
		t.Errorf("an altered request: exit %d", code)
	}
}
