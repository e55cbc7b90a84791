package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

	"github.com/tablectl/tablectl/internal/controller"
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
	deadline := time.Now().Add(60 * time.Second)
	for url == "" {
		// floor view       http://ADDR/   (user U, password P, in FILE)
		if i := strings.Index(out.String(), "floor view       http://"); i >= 0 {
			f := strings.Fields(strings.NewReplacer("(", " ", ",", " ").Replace(strings.SplitN(out.String()[i+len("floor view       "):], "\n", 2)[0]))
			if len(f) >= 5 && f[1] == "user" && f[3] == "password" {
				url, user, password = f[0], f[2], f[4]
			}
		}
		select {
		case err := <-done:
			t.Fatalf("the demo stopped: %v\n%s", err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no floor view after 60s:\n%s", out.String())
		}
	}
	// Without the login, or with another password: 401.
	for _, pw := range []string{"", password + "x"} {
		req, _ := http.NewRequest("GET", url+"floor.json", nil)
		if pw != "" {
			req.SetBasicAuth(user, pw)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("floor.json with password %q: %s, want 401", pw, resp.Status)
		}
	}
	for {
		req, _ := http.NewRequest("GET", url+"floor.json", nil)
		req.SetBasicAuth(user, password)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
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
		if ok {
			break
		}
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatalf("the floor view does not show three tables dealing and witnessed: %s", b)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// No anonymous client on the demo's floor broker: NATS and MQTT.
	line := strings.Fields(strings.SplitN(out.String()[strings.Index(out.String(), "floor broker     "):], "\n", 2)[0])
	if nc, err := nats.Connect(line[2]); err == nil {
		nc.Close()
		t.Fatalf("an anonymous NATS client connected to %s", line[2])
	}
	mq := mqtt.NewClient(mqtt.NewClientOptions().AddBroker("tcp://" + line[7]).SetClientID("tablectl-FLOOR-01").SetConnectRetry(false))
	if tok := mq.Connect(); tok.WaitTimeout(10*time.Second) && tok.Error() == nil {
		mq.Disconnect(0)
		t.Fatalf("an anonymous MQTT client took the table's client id at %s", line[7])
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
	line = strings.Fields(strings.SplitN(out.String()[i:], "\n", 2)[0])
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
