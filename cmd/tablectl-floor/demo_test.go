package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/nats-io/nats.go"

	"github.com/tablectl/tablectl/floor"
	"github.com/tablectl/tablectl/internal/controller"
	"github.com/tablectl/tablectl/internal/floortest"
	"github.com/tablectl/tablectl/internal/natsserver"
	"github.com/tablectl/tablectl/internal/testenv"
)

// mainEnv makes the test binary act as tablectl itself (its controllers
// are `tablectl run --config` processes of the demo's own binary).
const mainEnv = "TABLECTL_MAIN_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestFloorDemo: `tablectl-floor demo --tables 3`, on a machine with no
// nats-server binary and no PostgreSQL (PATH without the system's sbin,
// the binary's override pointing nowhere, no --floor-db), deals on three
// tables, and its floor view shows each of them dealing, witnessed and
// without a floor alert; a table's trail then verifies against the
// demo's witnessed copy, as the demo says to.
func TestFloorDemo(t *testing.T) {
	testenv.Long(t, "the floor demo (an embedded NATS cluster, three controllers, SQLite)")
	var path []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(d, "nats-server")); err != nil && !strings.HasSuffix(d, "sbin") {
			path = append(path, d)
		}
	}
	t.Setenv("PATH", strings.Join(path, string(filepath.ListSeparator)))
	t.Setenv(natsserver.BinaryEnv, filepath.Join(t.TempDir(), "no-nats-server"))
	if _, err := exec.LookPath("nats-server"); err == nil {
		t.Fatal("nats-server still on PATH")
	}
	t.Setenv(mainEnv, "1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fl := floorDemoOptions{tables: new(int), db: new(string), schema: new(string), view: new(string)}
	*fl.tables, *fl.view = 3, "127.0.0.1:0"
	o := controller.DemoOptions{Dir: t.TempDir(), Pace: 50 * time.Millisecond, CoupPace: -1, Seed: 17, Profile: "classic"}
	out := &lockedBuffer{}
	done := make(chan error, 1)
	go func() { done <- floorDemo(ctx, fl, o, out) }()
	var url, user, password string
	testenv.Eventually(t, 60*time.Second, "the floor view's address, user and password printed", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the demo stopped: %v\n%s", err, out.String())
		default:
		}
		// floor view       https://ADDR/   (user U, password P, in FILE)
		if i := strings.Index(out.String(), "floor view       https://"); i >= 0 {
			f := strings.Fields(strings.NewReplacer("(", " ", ",", " ").Replace(strings.SplitN(out.String()[i+len("floor view       "):], "\n", 2)[0]))
			if len(f) >= 5 && f[1] == "user" && f[3] == "password" {
				url, user, password = f[0], f[2], f[4]
			}
		}
		return url != ""
	})
	field := func(label string, n int) string {
		i := strings.Index(out.String(), label)
		if i < 0 {
			t.Fatalf("no %q line:\n%s", label, out.String())
		}
		return strings.Fields(strings.SplitN(out.String()[i:], "\n", 2)[0])[n]
	}
	caFile := field("floor CA ", 2)
	caTLS, err := floor.ClientTLS(caFile)
	if err != nil {
		t.Fatal(err)
	}
	web := &http.Client{Transport: &http.Transport{TLSClientConfig: caTLS}, Timeout: 10 * time.Second}
	// Without the login, or with another password: 401.
	for _, pw := range []string{"", password + "x"} {
		req, _ := http.NewRequest("GET", url+"floor.json", nil)
		if pw != "" {
			req.SetBasicAuth(user, pw)
		}
		resp, err := web.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("floor.json with password %q: %s, want 401", pw, resp.Status)
		}
	}
	var last []byte
	testenv.EventuallyErr(t, 90*time.Second, "the floor view shows three tables dealing and witnessed", func() error {
		req, _ := http.NewRequest("GET", url+"floor.json", nil)
		req.SetBasicAuth(user, password)
		resp, err := web.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		last = b
		var snap struct {
			Tables []struct {
				Table     string `json:"table"`
				Level     string `json:"level"`
				Witnessed int64  `json:"witnessed"`
				Alerts    []struct {
					Source string `json:"source"`
				} `json:"alerts"`
			}
		}
		if err := json.Unmarshal(b, &snap); err != nil {
			t.Fatalf("floor.json: %v: %s", err, b)
		}
		ok := len(snap.Tables) == 3
		for _, tb := range snap.Tables {
			for _, a := range tb.Alerts {
				if a.Source == "floor" {
					t.Fatalf("%s has floor alerts on an honest floor: %s", tb.Table, b)
				}
			}
			ok = ok && tb.Level != "off" && tb.Witnessed > 50
		}
		if !ok {
			return fmt.Errorf("floor.json: %s", last)
		}
		return nil
	})
	// No plaintext and no anonymous client anywhere on the demo's floor:
	// the broker's client port and MQTT listener, and the floor view.
	natsURL, mqttURL := field("floor broker ", 2), field("floor broker ", 7)
	// In clear, as a client written from the protocol's text (a library
	// would switch to TLS when the server asks).
	natsAddr := strings.TrimPrefix(strings.Split(natsURL, ",")[0], "tls://")
	if said, taken := floortest.PlaintextNATS(natsAddr, "", ""); taken {
		t.Errorf("an anonymous NATS client in plaintext was taken at %s", natsAddr)
	} else {
		t.Logf("NATS in plaintext, anonymous: refused: %s", said)
	}
	for _, c := range []struct {
		what string
		opts []nats.Option
		url  string
	}{
		{"over TLS, anonymous", []nats.Option{nats.RootCAs(caFile)}, natsURL},
		{"over TLS, a wrong password", []nats.Option{nats.RootCAs(caFile), nats.UserInfo("bridge-FLOOR-01", "not-the-password-at-all")}, natsURL},
	} {
		if nc, err := nats.Connect(c.url, append(c.opts, nats.Timeout(10*time.Second))...); err == nil {
			nc.Close()
			t.Errorf("a NATS client %s connected to %s", c.what, c.url)
		} else {
			t.Logf("NATS %s: refused: %v", c.what, err)
		}
	}
	if !strings.HasPrefix(mqttURL, "ssl://") {
		t.Fatalf("the MQTT listener %s is not TLS", mqttURL)
	}
	mqttAddr := strings.TrimPrefix(mqttURL, "ssl://")
	if said, taken := floortest.PlaintextMQTT(mqttAddr, "tablectl-FLOOR-01", "", ""); taken {
		t.Errorf("an anonymous MQTT client in plaintext was taken at %s", mqttAddr)
	} else {
		t.Logf("MQTT in plaintext, anonymous: refused: %s", said)
	}
	for _, c := range []struct{ what, broker string }{
		{"in plaintext", "tcp://" + mqttAddr},
		{"over TLS", mqttURL},
	} {
		mq := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(c.broker).SetTLSConfig(caTLS).SetClientID("tablectl-FLOOR-01").SetConnectRetry(false).SetConnectTimeout(10 * time.Second))
		if tok := mq.Connect(); tok.WaitTimeout(15*time.Second) && tok.Error() == nil {
			mq.Disconnect(0)
			t.Errorf("an anonymous MQTT client %s took the table's client id at %s", c.what, c.broker)
		} else {
			t.Logf("MQTT anonymous %s: refused: %v", c.what, tok.Error())
		}
	}
	// The floor view in plaintext, even with its password: not served.
	req, _ := http.NewRequest("GET", "http://"+strings.TrimPrefix(url, "https://")+"floor.json", nil)
	req.SetBasicAuth(user, password)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(b), "FLOOR-01") {
			t.Errorf("the floor view answered plain HTTP: %s %s", resp.Status, b)
		}
		t.Logf("the floor view in plain HTTP: %s", resp.Status)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "stopped;") {
		t.Fatalf("no 'stopped;' after the stop:\n%s", out.String())
	}
	// The demo's own line for verifying a trail against the witness.
	i := strings.Index(out.String(), "tablectl-floor verify ")
	if i < 0 {
		t.Fatalf("no verify line:\n%s", out.String())
	}
	line := strings.Fields(strings.SplitN(out.String()[i:], "\n", 2)[0])
	if !slices.Contains(line, "--witness") || strings.HasPrefix(line[slices.Index(line, "--witness")+1], "postgres") {
		t.Fatalf("the verify line names no SQLite witness: %q", line)
	}
	var rep bytes.Buffer
	if err := runVerify(line[2:], &rep); err != nil {
		t.Fatalf("%q: %v\n%s", line, err, rep.String())
	}
	if !strings.Contains(rep.String(), "matches the witness") {
		t.Fatalf("no comparison with the witness:\n%s", rep.String())
	}
	t.Logf("%s", rep.String())
	// A witness file that is not there is an error, not an empty witness.
	line[len(line)-1] += ".missing"
	if err := runVerify(line[2:], &rep); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("verify against a missing witness file: %v", err)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
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
	if code != 1 || !strings.HasPrefix(errb.String(), "tablectl-floor demo: --floor-http: listen tcp "+ln.Addr().String()) {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
	// Nothing of the floor was started: its folder was never made.
	if _, err := os.Stat(filepath.Join(dir, "floor")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the floor started before the view's port was tried: %v", err)
	}
}
