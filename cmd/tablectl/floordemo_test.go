package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tablectl/tablectl/internal/controller"
	"github.com/tablectl/tablectl/internal/floortest"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/shoeread/shoesim"
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

// TestFloorDemo: `tablectl demo --tables 3` deals on three tables, and
// its floor view shows each of them dealing, witnessed and without a
// floor alert.
func TestFloorDemo(t *testing.T) {
	testenv.Long(t, "the floor demo (a NATS cluster, three controllers, PostgreSQL)")
	_, schema := floortest.Postgres(t)
	floortest.Cluster(t, 1) // nats-server is there, or this skips (fails under TABLECTL_TEST_ALL)
	t.Setenv(mainEnv, "1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fl := floorDemoOptions{tables: new(int), db: new(string), schema: new(string), view: new(string)}
	*fl.tables, *fl.db, *fl.schema, *fl.view = 3, floortest.PostgresURL(), schema, "127.0.0.1:0"
	o := controller.DemoOptions{Dir: t.TempDir(), Pace: 50 * time.Millisecond, CoupPace: -1, Seed: 17, Profile: "classic"}
	out := &lockedBuffer{}
	done := make(chan error, 1)
	go func() { done <- floorDemo(ctx, fl, o, out) }()
	var url string
	deadline := time.Now().Add(60 * time.Second)
	for url == "" {
		if i := strings.Index(out.String(), "floor view       http://"); i >= 0 {
			url = strings.Fields(out.String()[i+len("floor view       "):])[0]
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
	for {
		resp, err := http.Get(url + "floor.json")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var snap struct {
			Tables []struct {
				Table     string `json:"table"`
				Status    *struct{ Phase string }
				Witnessed int64            `json:"witnessed"`
				Floor     []map[string]any `json:"floor_alerts"`
			}
		}
		if err := json.Unmarshal(b, &snap); err != nil {
			t.Fatalf("floor.json: %v: %s", err, b)
		}
		ok := len(snap.Tables) == 3
		for _, tb := range snap.Tables {
			if len(tb.Floor) > 0 {
				t.Fatalf("%s has floor alerts on an honest floor: %s", tb.Table, b)
			}
			ok = ok && tb.Status != nil && tb.Witnessed > 50
		}
		if ok {
			break
		}
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatalf("the floor view does not show three tables dealing and witnessed: %s", b)
		}
		time.Sleep(500 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_ = shoesim.DefaultCardPace
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
