package controller

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"maps"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/freeport"
	"github.com/tablectl/tablectl/internal/mosquitto"
	"github.com/tablectl/tablectl/internal/mqtttest"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/signedcmd"
)

// deployedMosquitto runs Debian's Mosquitto as a table installs it: the
// package's own /etc/mosquitto/mosquitto.conf
// (testdata/debian/mosquitto.conf, from mosquitto 2.0.11-1.2+deb12u2) with
// deploy/mosquitto/mosquitto.conf as conf.d/tablectl.conf and
// deploy/mosquitto/acl. Only paths and ports are rewritten, to the test's
// own; the TLS listeners get a certificate made for the test. It returns
// the loopback listener's URL and the broker's log so far.
func deployedMosquitto(t *testing.T, users map[string]string) (url string, proc *mosquitto.Process) {
	t.Helper()
	testenv.Command(t, "mosquitto", "mosquitto")
	dir := t.TempDir()
	confd := filepath.Join(dir, "conf.d")
	if err := os.Mkdir(confd, 0o755); err != nil {
		t.Fatal(err)
	}
	stock, err := os.ReadFile("testdata/debian/mosquitto.conf")
	if err != nil {
		t.Fatal(err)
	}
	main := strings.NewReplacer("/run/mosquitto/mosquitto.pid", filepath.Join(dir, "mosquitto.pid"),
		"/var/lib/mosquitto/", dir+"/", "/var/log/mosquitto/mosquitto.log", filepath.Join(dir, "mosquitto.log"),
		"/etc/mosquitto/conf.d", confd).Replace(string(stock))
	snippet, err := os.ReadFile("../../deploy/mosquitto/mosquitto.conf")
	if err != nil {
		t.Fatal(err)
	}
	var ports [3]int
	for i := range ports {
		if ports[i], err = freeport.Loopback(); err != nil {
			t.Fatal(err)
		}
	}
	crt, key := testCert(t, dir)
	passwd := filepath.Join(dir, "passwd")
	acl, err := filepath.Abs("../../deploy/mosquitto/acl")
	if err != nil {
		t.Fatal(err)
	}
	conf := strings.NewReplacer(
		"listener 1883 127.0.0.1", fmt.Sprintf("listener %d 127.0.0.1", ports[0]),
		"listener 8883\n", fmt.Sprintf("listener %d 127.0.0.1\n", ports[1]),
		"listener 8884\n", fmt.Sprintf("listener %d 127.0.0.1\n", ports[2]),
		"/etc/mosquitto/certs/table.crt", crt, "/etc/mosquitto/certs/table.key", key, "/etc/mosquitto/certs/ca.crt", crt,
		"/etc/mosquitto/tablectl.passwd", passwd, "/etc/mosquitto/tablectl/acl", acl).Replace(string(snippet))
	// The bridge too, as a bridged table installs it; its central brokers
	// are an address nothing listens on, so it only retries.
	bridge, err := os.ReadFile("../../deploy/mosquitto/bridge.conf")
	if err != nil {
		t.Fatal(err)
	}
	bridgeConf := strings.NewReplacer(
		"address floor-nats-1.casino.internal:8883 floor-nats-2.casino.internal:8883 floor-nats-3.casino.internal:8883", "address 127.0.0.1:1",
		"/etc/mosquitto/tablectl/floor-ca.crt", crt).Replace(string(bridge))
	files := map[string]string{
		filepath.Join(dir, "mosquitto.conf"):         main,
		filepath.Join(confd, "tablectl.conf"):        conf,
		filepath.Join(confd, "tablectl-bridge.conf"): bridgeConf,
		// The test's own: root keeps its files, and the log comes to stderr.
		filepath.Join(confd, "zz-test.conf"): "user root\nlog_dest stderr\nlog_type all\n",
	}
	for path, body := range files {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	first := true
	for _, u := range slices.Sorted(maps.Keys(users)) {
		args := []string{"-b", passwd, u, users[u]}
		if first {
			args = append([]string{"-c"}, args...)
			first = false
		}
		if out, err := exec.Command(testenv.Command(t, "mosquitto_passwd", "mosquitto"), args...).CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_passwd: %v\n%s", err, out)
		}
	}
	proc, err = mosquitto.Start(filepath.Join(dir, "mosquitto.conf"), 10*time.Second)
	if err != nil {
		t.Fatalf("Debian's Mosquitto with the shipped snippet: %v", err)
	}
	t.Cleanup(proc.Kill)
	for _, line := range strings.Split(proc.Log(), "\n") {
		// The bridge's failed connects to its unreachable central brokers
		// are expected; anything else said as a warning or an error is not.
		bridgeRetry := strings.Contains(line, "bridge") || strings.Contains(line, "Connection refused") || strings.Contains(line, "central")
		if (strings.Contains(line, "Warning") || strings.Contains(line, "Error")) && !strings.Contains(line, "should not be run as root") && !bridgeRetry {
			t.Errorf("Mosquitto said: %s", line)
		}
	}
	return fmt.Sprintf("tcp://127.0.0.1:%d", ports[0]), proc
}

// testCert writes a self-signed certificate and its key for 127.0.0.1.
func testCert(t *testing.T, dir string) (crtFile, keyFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "table"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	crtFile, keyFile = filepath.Join(dir, "table.crt"), filepath.Join(dir, "table.key")
	if err := os.WriteFile(crtFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		t.Fatal(err)
	}
	return crtFile, keyFile
}

// TestDeployMosquittoACL runs Debian's Mosquitto as a table installs it
// (deployedMosquitto) and proves what the ACL promises: a display reads
// public/# and status only and cannot send a command or forge state; the
// table's pit reads everything of its table and may send its commands;
// another table's pit can do neither; tablectl writes the rest.
func TestDeployMosquittoACL(t *testing.T) {
	users := map[string]string{"tablectl": "tc-secret", "display-1": "display-secret", "pit-BAC-07": "pit-secret", "pit-BAC-08": "other-pit"}
	url, proc := deployedMosquitto(t, users)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Mosquitto's log:\n%s", proc.Log())
		}
	})
	const prefix = "tablectl/BAC-07"
	topic := func(s string) string { return prefix + "/" + s }

	display := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: url, Username: "display-1", Password: users["display-1"],
		Topics: []string{"tablectl/#", topic("pit/#"), topic("pit/events")}})
	pit := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: url, Username: "pit-BAC-07", Password: users["pit-BAC-07"], Topics: []string{"tablectl/#"}})
	other := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: url, Username: "pit-BAC-08", Password: users["pit-BAC-08"], Topics: []string{"tablectl/#", topic("pit/#")}})
	ctl := mqtttest.Subscribe(t, mqtttest.SubOptions{URL: url, Username: "tablectl", Password: users["tablectl"], Topics: []string{topic("cmd")}})

	// Forgeries, each acknowledged by the broker (as Mosquitto does for a
	// denied QoS 1 publish) before anything else is sent. Each login
	// publishes on its own connection: a login is its client id.
	display.Publish(topic("cmd"), 1, []byte(`{"forged":"display command"}`))
	display.Publish(topic("status"), 1, []byte(`{"forged":"status"}`))
	display.Publish(topic("public/coup"), 1, []byte(`{"forged":"coup"}`))
	pit.Publish(topic("pit/events"), 1, []byte(`{"forged":"pit event"}`))
	other.Publish(topic("cmd"), 1, []byte(`{"forged":"another table's pit"}`))
	// What tablectl and the pit may do, in order: the pit tree first, the
	// status last.
	ctl.Publish(topic("pit/events"), 1, []byte(`{"seq":1}`))
	ctl.Publish(topic("pit/coup"), 1, []byte(`{"hidden card":"KH"}`))
	ctl.Publish(topic("pit/shoe"), 1, []byte(`{"ev":"..."}`))
	ctl.Publish(topic("public/coup"), 1, []byte(`{"coup":1}`))
	pit.Publish(topic("cmd"), 1, []byte(`{"pit":"command"}`))
	ctl.Publish(topic("status"), 1, []byte(`{"state":"online"}`))

	onlyPublic := func(who string, s *mqtttest.Subscriber) {
		t.Helper()
		ms := s.Wait(mqWait, "the status", func(ms []mqtttest.Msg) bool {
			_, ok := mqtttest.Last(ms, topic("status"))
			return ok
		})
		for _, msg := range ms {
			if !strings.HasPrefix(msg.Topic, topic("public/")) && msg.Topic != topic("status") {
				t.Errorf("%s read %s: %s", who, msg.Topic, msg.Payload)
			}
			if strings.Contains(string(msg.Payload), "forged") {
				t.Errorf("a forgery reached %s: %s %s", who, msg.Topic, msg.Payload)
			}
		}
		if got := len(ms); got != 2 {
			t.Errorf("%s got %d messages, want public/coup and status", who, got)
		}
	}
	onlyPublic("the display", display)
	pm := pit.Wait(mqWait, "the status", func(ms []mqtttest.Msg) bool {
		_, ok := mqtttest.Last(ms, topic("status"))
		return ok
	})
	var pitTopics []string
	for _, msg := range pm {
		if strings.Contains(string(msg.Payload), "forged") {
			t.Errorf("a forgery reached the pit: %s %s", msg.Topic, msg.Payload)
		}
		if msg.Topic == topic("bridge/state") {
			continue // the bridge's own notification that it is (not) connected
		}
		pitTopics = append(pitTopics, strings.TrimPrefix(msg.Topic, prefix+"/"))
	}
	if want := "pit/events pit/coup pit/shoe public/coup cmd status"; strings.Join(pitTopics, " ") != want {
		t.Errorf("the pit read %v, want %s", pitTopics, want)
	}
	// Another table's pit was granted nothing of this table; by now its
	// messages, had it any, would have arrived with the pit's.
	if om := other.Messages(); len(om) != 0 {
		t.Errorf("another table's pit read %d messages of this table, the first %s", len(om), om[0].Topic)
	}
	cm := ctl.Wait(mqWait, "the pit's command", func(ms []mqtttest.Msg) bool { return len(ms) >= 1 })
	if len(cm) != 1 || string(cm[0].Payload) != `{"pit":"command"}` {
		t.Errorf("the controller's commands: %+v", cm)
	}
	// And no login, or a wrong password, is no access.
	if err := mqtttest.Connect(t, url, "", ""); err == nil {
		t.Error("anonymous login accepted")
	}
	if err := mqtttest.Connect(t, url, "display-1", "guess"); err == nil {
		t.Error("a wrong password accepted")
	}
}

// TestDeployMosquittoClientID: on the shipped config a login cannot take
// the controller's session by connecting with its client id. The
// controller stays connected through 20 tries by a display (with the id it
// asked for, and with its login as id) and by the pit.
func TestDeployMosquittoClientID(t *testing.T) {
	users := map[string]string{"tablectl": "tc-secret", "display-1": "display-secret", "pit-BAC-07": "pit-secret"}
	url, _ := deployedMosquitto(t, users)
	lost := make(chan error, 64)
	ctl := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID("tablectl-BAC-07").
		SetUsername("tablectl").SetPassword(users["tablectl"]).SetAutoReconnect(false).
		SetConnectionLostHandler(func(_ paho.Client, err error) { lost <- err }))
	if tok := ctl.Connect(); !tok.WaitTimeout(mqWait) || tok.Error() != nil {
		t.Fatalf("the controller's login: %v", tok.Error())
	}
	defer ctl.Disconnect(100)
	tries := 0
	for i := range 20 {
		for _, who := range []struct{ user, id string }{{"display-1", "tablectl-BAC-07"}, {"display-1", "tablectl"}, {"pit-BAC-07", "tablectl"}} {
			c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(who.id).
				SetUsername(who.user).SetPassword(users[who.user]).SetAutoReconnect(false).SetConnectRetry(false))
			if tok := c.Connect(); tok.WaitTimeout(mqWait) && tok.Error() == nil {
				c.Disconnect(0)
			}
			tries++
			_ = i
		}
	}
	// The controller's connection still works: a round trip on it.
	if tok := ctl.Publish("tablectl/BAC-07/status", 1, false, []byte(`{"state":"online"}`)); !tok.WaitTimeout(mqWait) || tok.Error() != nil {
		t.Fatalf("the controller's connection after %d tries: %v", tries, tok.Error())
	}
	select {
	case err := <-lost:
		t.Fatalf("the controller was knocked off (%v) by a login using its client id", err)
	default:
	}
	t.Logf("%d takeover tries, the controller never lost its connection", tries)
}

// TestDeploySystemdUnit checks the unit with systemd-analyze and that the
// hardening the issue asks for is there.
func TestDeploySystemdUnit(t *testing.T) {
	unit, err := os.ReadFile("../../deploy/tablectl.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"User=tablectl", "Group=tablectl", "SupplementaryGroups=dialout", "ProtectSystem=strict", "StateDirectory=tablectl",
		"Restart=on-failure", "NoNewPrivileges=yes", "CapabilityBoundingSet=", "ExecStart=/usr/bin/tablectl run --config /etc/tablectl/tablectl.json"} {
		if !strings.Contains(string(unit), want+"\n") {
			t.Errorf("unit lacks %s", want)
		}
	}
	// A dynamic user could not read the root-owned 0640 files in
	// /etc/tablectl (issue 15): the package's user reads them by its group.
	if strings.Contains(string(unit), "DynamicUser=yes") {
		t.Error("unit has DynamicUser=yes")
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(t.TempDir(), "tablectl.service")
	if err := os.WriteFile(local, []byte(strings.ReplaceAll(string(unit), "/usr/bin/tablectl", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	sa := testenv.Command(t, "systemd-analyze", "systemd")
	out, err := exec.Command(sa, "verify", local).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	// The exposure docs/operations.md reports, held: 1.6 at this commit.
	out, err = exec.Command(sa, "security", "--offline=true", "--no-pager", local).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for tablectl.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	if x, _ := strconv.ParseFloat(string(m[1]), 64); x > 2.0 {
		t.Errorf("exposure %.1f, above 2.0:\n%s", x, out)
	}
	t.Logf("systemd-analyze security: exposure %s", m[1])
}

// TestDeployFilesAgree: the example config's MQTT section parses, points at
// the table-local Mosquitto, and the udev rule names the port the config
// reads.
func TestDeployFilesAgree(t *testing.T) {
	data, err := os.ReadFile("../../deploy/tablectl.json")
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := config.Parse(data, "/etc/tablectl")
	if err != nil {
		t.Fatal(err)
	}
	if c.MQTT == nil || c.MQTT.Broker != "tcp://127.0.0.1:1883" || c.MQTT.Username != "tablectl" || c.MQTT.Prefix != "tablectl/BAC-07" ||
		c.MQTT.Keyring != "/etc/tablectl/supervisors.json" {
		t.Fatalf("mqtt section %+v", c.MQTT)
	}
	// The shipped Mosquitto makes each login its client id: the
	// controller's is its login, and the ACL grants that login this
	// table's tree.
	acl, err := os.ReadFile("../../deploy/mosquitto/acl")
	if err != nil {
		t.Fatal(err)
	}
	if c.MQTT.ClientID != c.MQTT.Username || !strings.Contains(string(acl), "user "+c.MQTT.Username+"\ntopic write "+c.MQTT.Prefix+"/#\n") ||
		!strings.Contains(string(acl), "user pit-"+c.TableID+"\n") {
		t.Errorf("tablectl.json's mqtt login %q (client id %q, prefix %s) and deploy/mosquitto/acl do not agree", c.MQTT.Username, c.MQTT.ClientID, c.MQTT.Prefix)
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
	// The example keyring shows a signed one (by a key made for the
	// example and thrown away: no table takes it).
	if kr, err := signedcmd.LoadKeyring("../../deploy/supervisors.json"); err != nil || kr.Meta().Signature == nil || kr.Meta().Serial < 1 {
		t.Fatalf("supervisors.json: %v", err)
	}
	if c.MQTT.KeyringAuthority != "/etc/tablectl/keys/officer.pub" {
		t.Errorf("mqtt.keyring_authority %q", c.MQTT.KeyringAuthority)
	}
}

// TestDeployMosquittoPitReplies: on the shipped config a command reply
// that follows a view reaches the pit console at once when the console
// takes every topic at QoS 1, as display/web/app.js subscribes it. Taken
// at QoS 0, the view gets no PUBACK, so the console's kernel acknowledges
// it late (Linux delays an acknowledgement up to 40 ms once a connection
// also sends data), and Mosquitto, with Nagle's algorithm on (its
// default, kept: set_tcp_nodelay costs the card's path, docs/mqtt.md),
// holds the reply until then: 39-46 ms every time on Debian's Mosquitto
// 2.0.11, against about 0.1 ms. The median of 20 is judged: the first
// message after the subscription can still wait once.
func TestDeployMosquittoPitReplies(t *testing.T) {
	users := map[string]string{"tablectl": "tc-secret", "pit-BAC-07": "pit-secret"}
	url, _ := deployedMosquitto(t, users)
	const prefix = "tablectl/BAC-07/"
	arrived, viewed := make(chan time.Time, 64), make(chan struct{}, 64)
	pit := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID("pit-BAC-07").
		SetUsername("pit-BAC-07").SetPassword(users["pit-BAC-07"]).SetAutoReconnect(false))
	if tok := pit.Connect(); !tok.WaitTimeout(mqWait) || tok.Error() != nil {
		t.Fatalf("the pit's login: %v", tok.Error())
	}
	defer pit.Disconnect(100)
	subs := map[string]byte{prefix + "pit/coup": 1, prefix + "cmd/reply": 1}
	if tok := pit.SubscribeMultiple(subs, func(_ paho.Client, m paho.Message) {
		switch m.Topic() {
		case prefix + "cmd/reply":
			arrived <- time.Now()
		case prefix + "pit/coup":
			viewed <- struct{}{}
		}
	}); !tok.WaitTimeout(mqWait) || tok.Error() != nil {
		t.Fatalf("the pit's subscription: %v", tok.Error())
	}
	ctl := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID("tablectl").
		SetUsername("tablectl").SetPassword(users["tablectl"]).SetAutoReconnect(false))
	if tok := ctl.Connect(); !tok.WaitTimeout(mqWait) || tok.Error() != nil {
		t.Fatalf("the controller's login: %v", tok.Error())
	}
	defer ctl.Disconnect(100)
	var took []time.Duration
	for i := range 20 {
		if tok := ctl.Publish(prefix+"pit/coup", 1, false, fmt.Appendf(nil, `{"coup":%d}`, i)); !tok.WaitTimeout(mqWait) || tok.Error() != nil {
			t.Fatalf("pit/coup: %v", tok.Error())
		}
		select { // the view is delivered; its acknowledgement is due
		case <-viewed:
		case <-time.After(mqWait):
			t.Fatalf("view %d never reached the pit", i)
		}
		sent := time.Now()
		if tok := ctl.Publish(prefix+"cmd/reply", 1, false, fmt.Appendf(nil, `{"id":"%d"}`, i)); !tok.WaitTimeout(mqWait) || tok.Error() != nil {
			t.Fatalf("cmd/reply: %v", tok.Error())
		}
		select {
		case at := <-arrived:
			took = append(took, at.Sub(sent))
		case <-time.After(mqWait):
			t.Fatalf("reply %d never reached the pit", i)
		}
		// Not synchronisation: views come to a console a few milliseconds
		// apart, as a table sends them.
		time.Sleep(5 * time.Millisecond)
	}
	slices.Sort(took)
	if med := took[len(took)/2]; med > 10*time.Millisecond {
		t.Errorf("a reply after a view took %v at the median (all: %v): the broker held it back", med, took)
	} else {
		t.Logf("a reply after a view: median %v, max %v", med, took[len(took)-1])
	}
}
