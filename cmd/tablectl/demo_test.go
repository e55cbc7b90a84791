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
		Trail: "/d/demo.db", Shoe: "/dev/pts/9", Key: "/d/keys/demo.key", Keyring: "/d/supervisors.json", PitPassword: "pw",
		PitBrokerUser: "pit", PitBrokerPassword: "bpw", PitBrokerPasswordFile: "/d/keys/pit-broker.password"}
	printDemo(&b, i)
	for _, want := range []string{"table DEMO", "tcp://127.0.0.1:41883   (WebSocket: off)", "mosquitto_sub -h 127.0.0.1 -p 41883 -u pit -P bpw -t 'tablectl/DEMO/#'",
		"mosquitto_sub -h 127.0.0.1 -p 41883 -t 'tablectl/DEMO/public/#' -t 'tablectl/DEMO/status'",
		"http://127.0.0.1:48080/metrics", "audit verify --db /d/demo.db", "/dev/pts/9", "password pw", "suspend --broker tcp://127.0.0.1:41883 --username pit --password-file /d/keys/pit-broker.password --table DEMO --key /d/keys/demo.key", "Ctrl-C"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the banner does not say %q:\n%s", want, b.String())
		}
	}
}
