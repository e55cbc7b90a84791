package controller

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/internal/mqtttest"
	"github.com/tablectl/tablectl/internal/testenv"
)

// TestDeployMosquittoACL runs Mosquitto with deploy/mosquitto/acl as it is
// and users made with mosquitto_passwd, and proves what the ACL promises:
// a display reads public/# and status only and cannot send a command or
// forge state; the pit reads everything and may send commands; tablectl
// writes the rest.
func TestDeployMosquittoACL(t *testing.T) {
	acl, err := filepath.Abs("../../deploy/mosquitto/acl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	users := map[string]string{"tablectl": "tc-secret", "display": "display-secret", "pit": "pit-secret"}
	first := true
	for u, p := range users {
		args := []string{"-b", passwd, u, p}
		if first {
			args = append([]string{"-c"}, args...)
			first = false
		}
		if out, err := exec.Command(testenv.Command(t, "mosquitto_passwd", "mosquitto"), args...).CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_passwd (in the mosquitto package): %v\n%s", err, out)
		}
	}
	m := mqtttest.StartMosquitto(t, fmt.Sprintf("per_listener_settings false\nallow_anonymous false\npassword_file %s\nacl_file %s\n", passwd, acl))
	const prefix = "tablectl/ACL-1"
	topic := func(s string) string { return prefix + "/" + s }

	display := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: m.URL, Username: "display", Password: users["display"],
		Topics: []string{"tablectl/#", topic("pit/#"), topic("pit/events")}})
	pit := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: m.URL, Username: "pit", Password: users["pit"], Topics: []string{"tablectl/#"}})
	ctl := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: m.URL, Username: "tablectl", Password: users["tablectl"], Topics: []string{topic("cmd")}})

	// A display's forgeries, each acknowledged by the broker (as Mosquitto
	// does for a denied QoS 1 publish) before anything else is sent.
	mqtttest.Publish(t, m.URL, "display", users["display"], topic("cmd"), 1, []byte(`{"forged":"display command"}`))
	mqtttest.Publish(t, m.URL, "display", users["display"], topic("status"), 1, []byte(`{"forged":"status"}`))
	mqtttest.Publish(t, m.URL, "display", users["display"], topic("public/coup"), 1, []byte(`{"forged":"coup"}`))
	// The pit may not forge the controller's topics either.
	mqtttest.Publish(t, m.URL, "pit", users["pit"], topic("pit/events"), 1, []byte(`{"forged":"pit event"}`))
	// What tablectl and the pit may do, in order: the pit tree first, the
	// status last.
	mqtttest.Publish(t, m.URL, "tablectl", users["tablectl"], topic("pit/events"), 1, []byte(`{"seq":1}`))
	mqtttest.Publish(t, m.URL, "tablectl", users["tablectl"], topic("pit/coup"), 1, []byte(`{"hidden card":"KH"}`))
	mqtttest.Publish(t, m.URL, "tablectl", users["tablectl"], topic("pit/shoe"), 1, []byte(`{"ev":"..."}`))
	mqtttest.Publish(t, m.URL, "tablectl", users["tablectl"], topic("public/coup"), 1, []byte(`{"coup":1}`))
	mqtttest.Publish(t, m.URL, "pit", users["pit"], topic("cmd"), 1, []byte(`{"pit":"command"}`))
	mqtttest.Publish(t, m.URL, "tablectl", users["tablectl"], topic("status"), 1, []byte(`{"state":"online"}`))

	dm := display.Wait(mqWait, "the status", func(ms []mqtttest.Msg) bool {
		_, ok := mqtttest.Last(ms, topic("status"))
		return ok
	})
	for _, msg := range dm {
		if !strings.HasPrefix(msg.Topic, topic("public/")) && msg.Topic != topic("status") {
			t.Errorf("the display read %s: %s", msg.Topic, msg.Payload)
		}
		if strings.Contains(string(msg.Payload), "forged") {
			t.Errorf("a forgery reached the display: %s %s", msg.Topic, msg.Payload)
		}
	}
	if got := len(dm); got != 2 {
		t.Errorf("the display got %d messages, want public/coup and status", got)
	}
	pm := pit.Wait(mqWait, "the status", func(ms []mqtttest.Msg) bool {
		_, ok := mqtttest.Last(ms, topic("status"))
		return ok
	})
	var pitTopics []string
	for _, msg := range pm {
		if strings.Contains(string(msg.Payload), "forged") {
			t.Errorf("a forgery reached the pit: %s %s", msg.Topic, msg.Payload)
		}
		pitTopics = append(pitTopics, strings.TrimPrefix(msg.Topic, prefix+"/"))
	}
	if want := "pit/events pit/coup pit/shoe public/coup cmd status"; strings.Join(pitTopics, " ") != want {
		t.Errorf("the pit read %v, want %s", pitTopics, want)
	}
	cm := ctl.Wait(mqWait, "the pit's command", func(ms []mqtttest.Msg) bool { return len(ms) >= 1 })
	if len(cm) != 1 || string(cm[0].Payload) != `{"pit":"command"}` {
		t.Errorf("the controller's commands: %+v", cm)
	}
	// And no login, or a wrong password, is no access.
	if err := mqtttest.Connect(t, m.URL, "", ""); err == nil {
		t.Error("anonymous login accepted")
	}
	if err := mqtttest.Connect(t, m.URL, "display", "guess"); err == nil {
		t.Error("a wrong password accepted")
	}
}

// TestDeploySystemdUnit checks the unit with systemd-analyze and that the
// hardening the issue asks for is there.
func TestDeploySystemdUnit(t *testing.T) {
	unit, err := os.ReadFile("../../deploy/tablectl.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"DynamicUser=yes", "SupplementaryGroups=dialout", "ProtectSystem=strict", "StateDirectory=tablectl",
		"Restart=on-failure", "NoNewPrivileges=yes", "ExecStart=/usr/local/bin/tablectl run --config /etc/tablectl/tablectl.json"} {
		if !strings.Contains(string(unit), want+"\n") {
			t.Errorf("unit lacks %s", want)
		}
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(t.TempDir(), "tablectl.service")
	if err := os.WriteFile(local, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/tablectl", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(testenv.Command(t, "systemd-analyze", "systemd"), "verify", local).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestDeployFilesAgree: the example config's MQTT section parses, points at
// the table-local Mosquitto, and the udev rule names the port the config
// reads.
func TestDeployFilesAgree(t *testing.T) {
	data, err := os.ReadFile("../../deploy/tablectl.json")
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := ParseConfig(data, "/etc/tablectl")
	if err != nil {
		t.Fatal(err)
	}
	if c.MQTT == nil || c.MQTT.Broker != "tcp://127.0.0.1:1883" || c.MQTT.Username != "tablectl" || c.MQTT.Prefix != "tablectl/BAC-07" ||
		c.MQTT.Keyring != "/etc/tablectl/supervisors.json" {
		t.Fatalf("mqtt section %+v", c.MQTT)
	}
	rule, err := os.ReadFile("../../deploy/99-tablectl-shoe.rules")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rule), `SYMLINK+="`+strings.TrimPrefix(c.Shoe.Port.Path, "/dev/")+`"`) || !strings.Contains(string(rule), `GROUP="dialout"`) {
		t.Fatalf("the udev rule does not name %s for dialout", c.Shoe.Port.Path)
	}
	bridge, err := os.ReadFile("../../deploy/mosquitto/bridge.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cleansession false", "topic tablectl/BAC-07/pit/# out 1", "topic tablectl/BAC-07/cmd in 1"} {
		if !strings.Contains(string(bridge), want) {
			t.Errorf("bridge.conf lacks %q", want)
		}
	}
	var kr json.RawMessage
	if data, err := os.ReadFile("../../deploy/supervisors.json"); err != nil || json.Unmarshal(data, &kr) != nil {
		t.Fatalf("supervisors.json: %v", err)
	}
}
