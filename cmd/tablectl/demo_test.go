package main

import (
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
// starts (exit 2); a floor (--tables) is sent to the floor's binary.
func TestDemoFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--tables", "3"}, "tablectl demo: --tables 3: a floor is the floor's binary's: go run ./cmd/tablectl-floor demo --tables 3"},
		{[]string{"demo", "--tables", "0"}, "tablectl demo: --tables 0: a floor is the floor's binary's: go run ./cmd/tablectl-floor demo --tables 1"},
		{[]string{"demo", "--floor-http", "127.0.0.1:1"}, "tablectl demo: unknown flag --floor-http"},
		{[]string{"demo", "--shoes", "0"}, "tablectl demo: --shoes 0: want 1 or more"},
	} {
		var out, errb strings.Builder
		if code := run(tt.args, &out, &errb); code != 2 || !strings.HasPrefix(errb.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, firstLine(errb.String()), tt.want)
		}
	}
}
