package main

import (
	"bytes"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/internal/mqttbroker"
	"github.com/tablectl/tablectl/internal/mqtttest"
	"github.com/tablectl/tablectl/internal/supervisor"
	"github.com/tablectl/tablectl/signedcmd"
)

// supervisorKey makes a supervisor's key pair as keygen does.
func supervisorKey(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, _, _, err := signedcmd.GenerateKey(dir, "ann"); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "ann.key")
}

// noConfigs are flags that keep the box's own configs (if this machine
// has them) out of a test.
func noConfigs(*testing.T) []string {
	return []string{"--client-config", "", "--config", ""}
}

// TestSuperviseUsage: what can be checked before sending is checked
// before anything is sent (no broker is there to take it: a command that
// got past the checks would fail with "connection refused", exit 1).
func TestSuperviseUsage(t *testing.T) {
	key := supervisorKey(t)
	absent := "tcp://" + closedPort(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"suspend", "--table", "T"}, "tablectl suspend: --key is required"},
		{[]string{"card", "--table", "T", "--key", key, "--card", "ZZ"}, "tablectl card: --card ZZ: "},
		{[]string{"card", "--table", "T", "--key", key}, "tablectl card: --card is required"},
		{[]string{"dealer-in", "--table", "T", "--key", key}, "tablectl dealer-in: --dealer is required"},
		{[]string{"dealer-in", "--table", "T", "--key", key, "--dealer", "d 1042"}, "tablectl dealer-in: --dealer \"d 1042\": want"},
		{[]string{"resync", "--table", "T", "--key", key}, "tablectl resync: --from is required"},
		{[]string{"suspend", "--table", "T", "--key", key, "--card", "KH"}, "tablectl suspend: --card is not for suspend (it is for card)"},
		{[]string{"resume", "--table", "T", "--key", key, "--coup", "3"}, "tablectl resume: --coup is not for resume (it is for bets-closed and void)"},
		{[]string{"void", "--table", "T", "--key", key, "--coup", "-1"}, "tablectl void: --coup -1: want 0"},
		{[]string{"suspend", "--key", key}, "tablectl suspend: --table is required"},
		{[]string{"suspend", "--table", "T", "--key", key, "stray"}, "tablectl suspend: unexpected arguments: stray"},
	} {
		var out, errb bytes.Buffer
		args := append(append([]string{}, tt.args...), append(noConfigs(t), "--broker", absent)...)
		if code := run(args, &out, &errb); code != 2 || !strings.HasPrefix(errb.String(), tt.want) || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tt.args, code, out.String(), firstLine(errb.String()), tt.want)
		}
	}
	// A missing key file is a failure, not a usage error.
	var out, errb bytes.Buffer
	if code := run(append([]string{"suspend", "--table", "T", "--key", key + ".absent", "--broker", absent}, noConfigs(t)...), &out, &errb); code != 1 || !strings.HasPrefix(errb.String(), "tablectl suspend: --key: ") {
		t.Errorf("a missing key file: exit %d, %q", code, errb.String())
	}
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// closedPort is a loopback address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestSuperviseWhyNot: each way a command fails to reach the table is told
// apart, in one line that says what to do, and at once (not after the
// timeout) where the broker says so.
func TestSuperviseWhyNot(t *testing.T) {
	key := supervisorKey(t)
	b, err := mqttbroker.Start(mqttbroker.Options{TCP: "127.0.0.1:0", Writer: "tablectl", WriterPassword: "controller-secret"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	dir := t.TempDir()
	wrong := filepath.Join(dir, "wrong.password")
	os.WriteFile(wrong, []byte("not-the-password\n"), 0o600)
	tlsSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0)
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"connection refused", []string{"--broker", "tcp://" + closedPort(t)}, "connection refused: nothing listens at tcp://"},
		{"TLS to a plain port", []string{"--broker", "ssl://" + strings.TrimPrefix(b.URL(), "tcp://")}, "TLS failed: ssl://"},
		{"TLS untrusted", []string{"--broker", "ssl://" + tlsSrv.Listener.Addr().String()}, "TLS failed: ssl://" + tlsSrv.Listener.Addr().String() + ": the broker's certificate is not signed by a CA this command trusts: give its CA with --tls-ca"},
		{"login refused", []string{"--broker", b.URL(), "--username", "tablectl", "--password-file", wrong}, "login refused: the broker at " + b.URL() + " refused user tablectl"},
		{"not allowed", []string{"--broker", b.URL()}, "not allowed by the broker: " + b.URL() + " lets this login in but not on table T's topics"},
	} {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			var out, errb bytes.Buffer
			start := time.Now()
			// A timeout far longer than the bound below: an answer the
			// broker gave is told at once, not after waiting it out.
			args := append([]string{"suspend", "--table", "T", "--key", key, "--timeout", "5m"}, append(noConfigs(t), tt.args...)...)
			code := run(args, &out, &errb)
			if code != 1 || !strings.HasPrefix(errb.String(), "tablectl suspend: "+tt.want) || strings.Count(strings.TrimSpace(errb.String()), "\n") != 0 {
				t.Errorf("exit %d, stderr %q; want exit 1 and one line %q...", code, errb.String(), "tablectl suspend: "+tt.want)
			}
			if d := time.Since(start); d > time.Minute {
				t.Errorf("took %v: the broker's answer was not taken at once", d)
			}
		})
	}
}

// TestSuperviseClientConfig: the command finds the table's broker, table
// and login in a client config (as init writes one), relative paths from
// the file's folder; flags override it. A table that does not answer is
// "no reply" after the timeout.
func TestSuperviseClientConfig(t *testing.T) {
	key := supervisorKey(t)
	url := mqtttest.Shared(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "client.json")
	if err := supervisor.WriteClientConfig(cfg, supervisor.ClientConfig{Broker: url, Table: "NOBODY-" + mqtttest.ClientID(t, "t")}); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"suspend", "--client-config", cfg, "--key", key, "--timeout", "1s"}, &out, &errb)
	if code != 1 || !strings.HasPrefix(errb.String(), "tablectl suspend: no reply in 1s from table NOBODY-") || out.Len() != 0 {
		t.Errorf("a table that does not answer: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	// --broker overrides the file's.
	errb.Reset()
	code = run([]string{"suspend", "--client-config", cfg, "--key", key, "--broker", "tcp://" + closedPort(t)}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "connection refused") {
		t.Errorf("--broker over the client config: exit %d, %q", code, errb.String())
	}
	// A client config with a key it does not have is refused, by name.
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"broker": "tcp://127.0.0.1:1883", "tabel": "T"}`), 0o600)
	errb.Reset()
	if code := run([]string{"suspend", "--client-config", bad, "--key", key}, &out, &errb); code != 1 || !strings.Contains(errb.String(), `unknown field "tabel"`) {
		t.Errorf("a mistyped client config: exit %d, %q", code, errb.String())
	}
	// Without a client config, the installed controller config says where
	// the broker is and which table (not the login: the controller's own).
	ctl := filepath.Join(dir, "tablectl.json")
	os.WriteFile(ctl, []byte(`{"table_id": "BAC-99", "mqtt": {"broker": "tcp://`+closedPort(t)+`", "username": "tablectl"}}`), 0o600)
	errb.Reset()
	if code := run([]string{"suspend", "--client-config", "", "--config", ctl, "--key", key}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "connection refused") {
		t.Errorf("from the installed config: exit %d, %q", code, errb.String())
	}
}
