package provision

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/internal/supervisor"

	"github.com/tablectl/tablectl/audit"
	signedcmd "github.com/tablectl/tablectl/command"
	"github.com/tablectl/tablectl/internal/mqtttest"
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
	if kr, err := signedcmd.LoadKeyring(etc + "/supervisors.json"); err != nil || len(kr.Lookup("alice.martin")) != 1 {
		t.Errorf("keyring: %v", err)
	}
	// The supervisors' commands on the box find the broker, the table and
	// their login in the client config.
	cc, err := supervisor.LoadClientConfig(dir + "/client.json")
	if err != nil || cc.Broker != "tcp://127.0.0.1:1883" || cc.Table != "BAC-07" || cc.Prefix != "tablectl/BAC-07" ||
		cc.Username != "supervisor-BAC-07" || cc.PasswordFile != o.Handoff+"/supervisor-BAC-07.password" {
		t.Errorf("client config %+v: %v", cc, err)
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
