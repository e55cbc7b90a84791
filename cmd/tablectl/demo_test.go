package main

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/internal/controller"
)

// The demo's banner says where everything is, with a mosquitto_sub line a
// newcomer can paste.
func TestPrintDemo(t *testing.T) {
	var b strings.Builder
	i := controller.DemoInfo{Table: "DEMO", MQTT: "tcp://127.0.0.1:41883", HTTP: "http://127.0.0.1:48080", Prefix: "tablectl/DEMO",
		Trail: "/d/demo.db", Shoe: "/dev/pts/9", Key: "/d/keys/demo.key", Keyring: "/d/supervisors.json", PitPassword: "bpw",
		PitBrokerUser: "pit", PitBrokerPassword: "bpw", PitBrokerPasswordFile: "/d/keys/pit-broker.password", SetAside: "/d/demo.20250101-120000.db"}
	printDemo(&b, i)
	for _, want := range []string{"table DEMO", "tcp://127.0.0.1:41883   (WebSocket: off)", "mosquitto_sub -h 127.0.0.1 -p 41883 -u pit -P bpw -t 'tablectl/DEMO/#'",
		"mosquitto_sub -h 127.0.0.1 -p 41883 -t 'tablectl/DEMO/public/#' -t 'tablectl/DEMO/status'",
		"http://127.0.0.1:48080/metrics", "audit verify --db /d/demo.db", "/dev/pts/9", "/pit   and http://127.0.0.1:48080/recall   (user pit, password bpw: the pit's login, here and at the broker)",
		"the last demo's trail was moved aside to /d/demo.20250101-120000.db", "suspend --broker tcp://127.0.0.1:41883 --username pit --password-file /d/keys/pit-broker.password --table DEMO --key /d/keys/demo.key", "Ctrl-C"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the banner does not say %q:\n%s", want, b.String())
		}
	}
	// /recall needs the pit's login: never offered without it.
	if strings.Count(b.String(), "/recall") != 1 {
		t.Errorf("/recall offered without the pit's login:\n%s", b.String())
	}
}

// TestDemoFlags: a demo that cannot be meant is refused before anything
// starts (exit 2); a floor view's address in use fails at once.
func TestDemoFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--tables", "-3"}, "tablectl demo: --tables -3: want a number of tables, 1 or more"},
		{[]string{"demo", "--tables", "0"}, "tablectl demo: --tables 0: want 1 or more"},
		{[]string{"demo", "--floor-http", "127.0.0.1:1"}, "tablectl demo: --floor-http is for a floor: give --tables N too"},
		{[]string{"demo", "--shoes", "0"}, "tablectl demo: --shoes 0: want 1 or more"},
	} {
		var out, errb strings.Builder
		if code := run(tt.args, &out, &errb); code != 2 || !strings.HasPrefix(errb.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, firstLine(errb.String()), tt.want)
		}
	}
}

// TestFloorDemoBusyPort: --tables with a floor view's address in use
// fails at once, naming the flag, before any table or node starts.
func TestFloorDemoBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var out, errb strings.Builder
	dir := t.TempDir()
	code := run([]string{"demo", "--tables", "2", "--dir", dir, "--floor-http", ln.Addr().String()}, &out, &errb)
	if code != 1 || !strings.HasPrefix(errb.String(), "tablectl demo: --floor-http: listen tcp "+ln.Addr().String()) {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
	// Nothing of the floor was started: its folder was never made.
	if _, err := os.Stat(filepath.Join(dir, "floor")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the floor started before the view's port was tried: %v", err)
	}
}
