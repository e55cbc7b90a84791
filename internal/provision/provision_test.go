package provision

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/internal/supervisor"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/internal/floorbridge"
	"github.com/tablectl/tablectl/internal/mqtttest"
	"github.com/tablectl/tablectl/signedcmd"
)

// box is a config like deploy/tablectl.json with its paths in a temporary folder.
func box(t *testing.T) (Options, string) {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile("../../deploy/tablectl.json")
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.ReplaceAll(data, []byte("/etc/tablectl"), []byte(filepath.Join(dir, "etc")))
	data = bytes.ReplaceAll(data, []byte("/var/lib/tablectl"), []byte(filepath.Join(dir, "var")))
	cfg := filepath.Join(dir, "tablectl.json")
	if err := os.WriteFile(cfg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return Options{Config: cfg, Supervisor: "alice.martin", Handoff: filepath.Join(dir, "handoff"),
		Mosquitto: filepath.Join(dir, "mosquitto"), MosquittoACL: "../../deploy/mosquitto/acl"}, dir
}

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestRun: a first run makes every file the example config names, with
// the modes the service and the handoff need; a second run changes
// nothing and says each file was kept.
func TestRun(t *testing.T) {
	o, dir := box(t)
	etc := filepath.Join(dir, "etc")
	r, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	for path, m := range map[string]os.FileMode{
		etc + "/keys/checkpoint.key":              0o640,
		etc + "/keys/checkpoint.pub":              0o644,
		etc + "/mqtt.password":                    0o640,
		etc + "/supervisors.json":                 0o640,
		etc + "/keys/officer.pub":                 0o640,
		o.Handoff + "/officer.key":                0o600,
		o.Handoff + "/alice.martin.key":           0o600,
		etc + "/display-1.password":               0o640,
		etc + "/pit-BAC-07.password":              0o640,
		etc + "/pit.password":                     0o640,
		o.Handoff + "/replay-BAC-07.password":     0o600,
		o.Handoff + "/supervisor-BAC-07.password": 0o600,
		o.Mosquitto + "/tablectl.passwd":          0o600,
		o.Mosquitto + "/tablectl/acl":             0o644,
		dir + "/client.json":                      0o600,
	} {
		if got := mode(t, path); got != m {
			t.Errorf("%s: mode %v, want %v", path, got, m)
		}
	}
	if got := mode(t, o.Handoff); got != 0o700 {
		t.Errorf("handoff mode %v", got)
	}
	if _, err := audit.LoadPrivateKey(etc + "/keys/checkpoint.key"); err != nil {
		t.Error(err)
	}
	// The keyring is signed by the officer's key, whose public half is
	// the box's authority and whose private half is handed off.
	auth, err := signedcmd.LoadAuthorities(etc + "/keys/officer.pub")
	if err != nil {
		t.Fatal(err)
	}
	if kr, _, err := signedcmd.LoadSignedKeyring(etc+"/supervisors.json", auth); err != nil || len(kr.Lookup("alice.martin")) != 1 {
		t.Errorf("keyring: %v", err)
	}
	// The supervisors' commands on the box find the broker, the table and
	// their login in the client config.
	cc, err := supervisor.LoadClientConfig(dir + "/client.json")
	if err != nil || cc.Broker != "tcp://127.0.0.1:1883" || cc.Table != "BAC-07" || cc.Prefix != "tablectl/BAC-07" ||
		cc.Username != "supervisor-BAC-07" || cc.PasswordFile != o.Handoff+"/supervisor-BAC-07.password" {
		t.Errorf("client config %+v: %v", cc, err)
	}
	if !slices.ContainsFunc(r.Handoff, func(h Handoff) bool {
		return h.Path == o.Handoff+"/officer.key" && strings.Contains(h.To, "security officer")
	}) {
		t.Errorf("the officer's key is not handed off: %+v", r.Handoff)
	}
	var out bytes.Buffer
	r.Print(&out)
	for _, want := range []string{"table BAC-07", "copy off the box:", "alice.martin.key\n      -> alice.martin alone", "checkpoint.pub\n      -> surveillance"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	before := snapshot(t, dir)
	r2, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range r2.Steps {
		if !s.Kept {
			t.Errorf("second run made %s", s.Path)
		}
	}
	if after := snapshot(t, dir); after != before {
		t.Error("a second run changed files")
	}
}

func snapshot(t *testing.T, dir string) string {
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			data, _ := os.ReadFile(p)
			b.WriteString(p + "\n" + string(data))
		}
		return nil
	})
	return b.String()
}

// TestMosquittoPasswords: Debian's Mosquitto takes the password file init
// writes, with the passwords init hands off, and refuses a wrong one.
func TestMosquittoPasswords(t *testing.T) {
	o, dir := box(t)
	if _, err := Run(o); err != nil {
		t.Fatal(err)
	}
	m := mqtttest.StartMosquitto(t, "allow_anonymous false\npassword_file "+filepath.Join(o.Mosquitto, "tablectl.passwd"))
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	for login, file := range map[string]string{
		"tablectl":          filepath.Join(dir, "etc/mqtt.password"),
		"display-1":         filepath.Join(dir, "etc/display-1.password"),
		"supervisor-BAC-07": o.Handoff + "/supervisor-BAC-07.password",
		"pit-BAC-07":        filepath.Join(dir, "etc/pit-BAC-07.password"),
		"replay-BAC-07":     o.Handoff + "/replay-BAC-07.password",
	} {
		if err := mqtttest.Connect(t, m.URL, login, read(file)); err != nil {
			t.Errorf("%s: %v", login, err)
		}
	}
	if err := mqtttest.Connect(t, m.URL, "tablectl", "wrong"); err == nil {
		t.Error("a wrong password got in")
	}
}

func TestMosquittoHashForm(t *testing.T) {
	l, err := MosquittoHash("u", "p", rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(l, "$")
	if !strings.HasPrefix(l, "u:$7$101$") || len(parts) != 5 || len(parts[3]) != 16 || len(parts[4]) != 88 {
		t.Errorf("%q", l)
	}
}

func TestRunRefuses(t *testing.T) {
	o, _ := box(t)
	o.Supervisor = ""
	if _, err := Run(o); err == nil {
		t.Error("no supervisor accepted")
	}
	o, _ = box(t)
	o.Supervisor = "bad name!"
	if _, err := Run(o); err == nil {
		t.Error("a bad supervisor name accepted")
	}
}

// TestRunOfficerOffBox: the officer made the key off the box and the
// authority's public half is installed: init makes no officer key, leaves
// the keyring a draft the controller refuses, and says the officer signs it.
func TestRunOfficerOffBox(t *testing.T) {
	o, dir := box(t)
	etc := filepath.Join(dir, "etc")
	off := t.TempDir()
	_, pub, err := signedcmd.GenerateAuthority(off)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(pub)
	os.MkdirAll(etc+"/keys", 0o750)
	if err := os.WriteFile(etc+"/keys/officer.pub", b, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(o.Handoff + "/officer.key"); err == nil {
		t.Error("an officer key was made with the authority already there")
	}
	kr, err := signedcmd.LoadKeyring(etc + "/supervisors.json")
	if err != nil || kr.Meta().Signature != nil || len(kr.Lookup("alice.martin")) != 1 {
		t.Fatalf("keyring: %+v %v", kr.Meta(), err)
	}
	if !slices.ContainsFunc(r.Next, func(s string) bool { return strings.Contains(s, "tablectl keyring sign") }) {
		t.Errorf("next steps: %v", r.Next)
	}
	auth, _ := signedcmd.LoadAuthorities(etc + "/keys/officer.pub")
	if _, err := kr.VerifySignature(auth); err == nil {
		t.Error("the draft verifies")
	}
	if _, err := signedcmd.SignKeyringFile(etc+"/supervisors.json", "", mustKey(t, off+"/officer.key"), 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := signedcmd.LoadSignedKeyring(etc+"/supervisors.json", auth); err != nil {
		t.Errorf("signed by the officer: %v", err)
	}
}

func mustKey(t *testing.T, path string) ed25519.PrivateKey {
	t.Helper()
	k, err := audit.LoadPrivateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestFloorBridge: with the table's floor login, init writes Mosquitto's
// bridge to the floor (0600) as internal/floorbridge makes it for the
// floor's proof: every node over TLS verified with the floor's CA (copied
// beside the ACL), the table's login, a client id with a random part;
// run again, it is kept; another table's login file is refused.
func TestFloorBridge(t *testing.T) {
	o, dir := box(t)
	floorDir := filepath.Join(dir, "floor")
	os.MkdirAll(floorDir, 0o700)
	login := filepath.Join(floorDir, "bridge-BAC-07.password")
	password := strings.ToLower(rand.Text())
	if err := os.WriteFile(login, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(floorDir, "ca.crt")
	if err := os.WriteFile(caFile, selfSigned(t), 0o644); err != nil {
		t.Fatal(err)
	}
	nodes := []string{"floor-nats-1.casino.internal:8883", "floor-nats-2.casino.internal:8883", "floor-nats-3.casino.internal:8883"}
	o.FloorLogin, o.FloorCA, o.FloorNodes, o.Bridge = login, caFile, nodes, "../../deploy/mosquitto/bridge.conf"
	if _, err := Run(o); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(o.Mosquitto, BridgeFile)
	if m := mode(t, conf); m != 0o600 {
		t.Errorf("%s: mode %v, want 0600 (it holds the password)", conf, m)
	}
	written, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	v := floorbridge.Values(string(written))
	ca := filepath.Join(o.Mosquitto, "tablectl", "floor-ca.crt")
	for k, want := range map[string]string{"address": strings.Join(nodes, " "), "remote_username": "bridge-BAC-07", "remote_password": password,
		"bridge_cafile": ca, "bridge_insecure": "false"} {
		if v[k] != want {
			t.Errorf("%s %q, want %q", k, v[k], want)
		}
	}
	if id := v["remote_clientid"]; !strings.HasPrefix(id, "bridge-BAC-07-") || len(id) < len("bridge-BAC-07-")+10 || strings.Contains(id, "CHANGE-ME") {
		t.Errorf("remote_clientid %q: want bridge-BAC-07- and a random part", id)
	}
	if strings.Contains(string(written), "CHANGE-ME") || !strings.Contains(string(written), "topic tablectl/BAC-07/pit/# out 1") {
		t.Errorf("the bridge still has the template's placeholders, or not the table's topics:\n%s", written)
	}
	if b, _ := os.ReadFile(ca); !bytes.Equal(b, selfSignedPEM) {
		t.Error("the floor's CA was not copied as given")
	}
	// What the floor's proof runs: the same generator on the same template.
	tmpl, _ := os.ReadFile(o.Bridge)
	same, err := floorbridge.Conf(string(tmpl), floorbridge.Options{Table: "BAC-07", Addrs: nodes, User: "bridge-BAC-07", Password: password, CAFile: ca, ClientID: v["remote_clientid"]})
	if err != nil || same != string(written) {
		t.Errorf("the written bridge is not floorbridge.Conf's (%v):\n%s\n---\n%s", err, written, same)
	}
	// Run again: kept.
	r, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(r.Steps, func(s Step) bool { return s.Path == conf && s.Kept }) {
		t.Errorf("the bridge was not reported kept: %+v", r.Steps)
	}
	if again, _ := os.ReadFile(conf); !bytes.Equal(again, written) {
		t.Error("the bridge changed on the second run")
	}
	// Another table's login: refused, naming both.
	other := filepath.Join(floorDir, "bridge-BAC-08.password")
	os.WriteFile(other, []byte(password+"\n"), 0o600)
	os.Remove(conf)
	o.FloorLogin = other
	if _, err := Run(o); err == nil || !strings.Contains(err.Error(), "bridge-BAC-08") || !strings.Contains(err.Error(), "bridge-BAC-07") {
		t.Errorf("another table's login: %v", err)
	}
}

var selfSignedPEM []byte

// selfSigned is a CA certificate's PEM, standing for the floor's.
func selfSigned(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "floor CA"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	selfSignedPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return selfSignedPEM
}
