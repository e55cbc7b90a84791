package floor

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/internal/floortest"
	"github.com/tablectl/tablectl/internal/freeport"
	"github.com/tablectl/tablectl/internal/mosquitto"
	"github.com/tablectl/tablectl/internal/natsserver"
	"github.com/tablectl/tablectl/internal/testenv"
)

// BenchmarkAlertToFloorView: a table's alert from its Mosquitto, over the
// bridge of deploy/mosquitto/bridge.conf, through a three-node NATS
// cluster, to the floor view's stream of changes as a browser reads it
// (server-sent events). The time is from the alert's at (stamped as the
// table publishes it) to the floor view's event arriving; p50 and p99 in
// ms (issue 32: p99 under a second).
//
//   - quiet: the table publishes nothing else;
//
//   - dealing: the table deals fast at the same time, publishing as a
//     controller does (a row on pit/events and its retained topics for
//     every card, a signed checkpoint every second row), over the bridge
//     as shipped (bridge_outgoing_retain false);
//
//   - dealing-retained: the same over the bridge before issue 32, which
//     forwarded the retain flag: every retained publish then waits for a
//     three-replica write of NATS's retained-message store in the MQTT
//     listener, and the alert queues behind them.
//
//     TABLECTL_TEST_ALL=1 go test -run '^$' -bench AlertToFloorView -benchtime 300x ./floor/
func BenchmarkAlertToFloorView(b *testing.B) {
	bridgeText, err := os.ReadFile("../deploy/mosquitto/bridge.conf")
	if err != nil {
		b.Fatal(err)
	}
	shipped := string(bridgeText)
	if !strings.Contains(shipped, "\nbridge_outgoing_retain false\n") {
		b.Fatal("deploy/mosquitto/bridge.conf no longer says bridge_outgoing_retain false")
	}
	retained := strings.Replace(shipped, "\nbridge_outgoing_retain false\n", "\n", 1)
	for _, c := range []struct {
		name    string
		bridge  string
		dealing int
	}{
		{"quiet", shipped, 0},
		{"dealing-4", shipped, 4},
		{"dealing-4-retained", retained, 4},
	} {
		b.Run(c.name, func(b *testing.B) { alertToFloorView(b, c.bridge, c.dealing) })
	}
}

func alertToFloorView(b *testing.B, bridgeText string, dealing int) {
	testenv.Command(b, "mosquitto", "mosquitto")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cluster := floortest.Cluster(b, 3)
	pool, schema := floortest.Postgres(b)
	store, err := OpenStore(ctx, pool, schema)
	if err != nil {
		b.Fatal(err)
	}
	var addrs []string
	for _, nd := range cluster.Nodes {
		addrs = append(addrs, nd.MQTTAddr())
	}
	table := "BENCH-" + strings.ToUpper(schema[2:8])
	port := tableBroker(b, bridgeText, table, addrs)

	nc, err := nats.Connect(cluster.URLs())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	// The streams a floor has (a witness makes them): the rows' and
	// checkpoints' stream is where the dealing's QoS 1 traffic lands; the
	// view follows the tables' alerts through the status stream.
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := EnsureStream(ctx, js, DefaultStream, Subjects{}, 3, time.Hour); err != nil {
		b.Fatal(err)
	}
	if _, err := EnsureStatusStream(ctx, js, DefaultStatusStream, Subjects{}, 3); err != nil {
		b.Fatal(err)
	}
	v := NewView(store, nil, Subjects{}, nil, quietLog())
	go v.Run(ctx, nc, DefaultStatusStream, time.Second)
	srv := httptest.NewServer(v)
	defer srv.Close()
	seen, stopFollowing := followAlerts(b, srv.URL+"/floor/events", table)
	defer stopFollowing() // before the server's Close, which waits for it

	cl := mqttClient(b, port, "tablectl-"+table)
	defer cl.Disconnect(100)
	topic := "tablectl/" + table + "/pit/alerts/active"
	// The bridge and the subscription are up once a first alert arrives.
	testenv.EventuallyErr(b, 30*time.Second, "a first alert on the floor view", func() error {
		publishAlert(b, cl, topic, "warm-up", time.Now())
		select {
		case <-seen:
			return nil
		case <-time.After(500 * time.Millisecond):
			return fmt.Errorf("no alert on the floor view")
		}
	})
	// How long the dealing tables' checkpoints take to reach the floor
	// (a NATS subscriber, as the stream has them).
	var cpMu sync.Mutex
	var cpLat []time.Duration
	sub, err := nc.Subscribe("tablectl.*.pit.checkpoint", func(m *nats.Msg) {
		var p struct{ At int64 }
		if json.Unmarshal(m.Data, &p) == nil && p.At > 0 {
			cpMu.Lock()
			cpLat = append(cpLat, time.Since(time.Unix(0, p.At)))
			cpMu.Unlock()
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	// The alerting table deals, and others beside it, each through its
	// own Mosquitto and bridge.
	var wg sync.WaitGroup
	deal, stop := context.WithCancel(ctx)
	for i := range dealing {
		t, p := table, port
		if i > 0 {
			t = fmt.Sprintf("%s-%d", table, i)
			p = tableBroker(b, bridgeText, t, addrs)
		}
		dealer := mqttClient(b, p, "dealer-"+t)
		wg.Add(1)
		go func() { defer wg.Done(); defer dealer.Disconnect(100); dealFast(deal, dealer, "tablectl/"+t) }()
	}
	defer wg.Wait()
	defer stop()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("table-%d", i)
		at := time.Now()
		publishAlert(b, cl, topic, id, at)
		if err := waitAlert(seen, id, 10*time.Second); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(at))
		// Alerts come one at a time, as a dealer's mistakes do, not in a
		// flood: the pace is the thing measured under, not a wait.
		time.Sleep(50 * time.Millisecond)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
	cpMu.Lock()
	defer cpMu.Unlock()
	if len(cpLat) > 0 {
		slices.Sort(cpLat)
		b.ReportMetric(float64(cpLat[len(cpLat)*99/100].Microseconds())/1000, "checkpoint-p99-ms")
	}
}

// tableBroker starts a table's Mosquitto, bridged to the floor's MQTT
// listeners addrs by bridgeText (deploy/mosquitto/bridge.conf), and gives
// its port.
func tableBroker(b *testing.B, bridgeText, table string, addrs []string) int {
	bridge, err := natsserver.Bridge(bridgeText, table, addrs)
	if err != nil {
		b.Fatal(err)
	}
	port, err := freeport.Loopback()
	if err != nil {
		b.Fatal(err)
	}
	conf := b.TempDir() + "/mosquitto.conf"
	if err := os.WriteFile(conf, fmt.Appendf(nil, "listener %d 127.0.0.1\nallow_anonymous true\nlog_dest stderr\nlog_type information\n%s", port, bridge), 0o644); err != nil {
		b.Fatal(err)
	}
	mq, err := mosquitto.Start(conf, 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(mq.Kill)
	return port
}

// followAlerts reads the floor view's server-sent events and passes on
// each alert of table until stop.
func followAlerts(b *testing.B, url, table string) (seen <-chan mqttpub.Alert, stop func()) {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	alerts := make(chan mqttpub.Alert, 1024)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var tv TableView
			if json.Unmarshal([]byte(data), &tv) != nil || tv.Table != table {
				continue
			}
			for _, a := range tv.Alerts {
				select {
				case alerts <- mqttpub.Alert{ID: a.LatestID}:
				default: // nobody waiting for it: the benchmark has ended
				}
			}
		}
	}()
	return alerts, func() { resp.Body.Close() }
}

func waitAlert(seen <-chan mqttpub.Alert, id string, within time.Duration) error {
	timeout := time.After(within)
	for {
		select {
		case a := <-seen:
			if a.ID == id {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("alert %s not on the floor view after %s", id, within)
		}
	}
}

func mqttClient(b *testing.B, port int, id string) paho.Client {
	opts := paho.NewClientOptions().AddBroker(fmt.Sprintf("tcp://127.0.0.1:%d", port)).SetClientID(id)
	cl := paho.NewClient(opts)
	if tok := cl.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		b.Fatal("connect", tok.Error())
	}
	return cl
}

// dealFast publishes under prefix what a controller dealing fast does
// (docs/mqtt.md): for every card a row on pit/events and the retained
// coup on public/coup and pit/coup; every second row the signed
// checkpoint (retained); every sixth the remaining shoe (retained) and
// the status. About 14 rows a second, the pace one bridged table carried
// in issue 32's floor.
func dealFast(ctx context.Context, cl paho.Client, prefix string) {
	pad := strings.Repeat("x", 300)
	tick := time.NewTicker(70 * time.Millisecond)
	defer tick.Stop()
	for seq := 1; ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pub := func(topic string, retained bool) {
			cl.Publish(prefix+"/"+topic, 1, retained, fmt.Sprintf(`{"seq":%d,"at":%d,"pad":%q}`, seq, time.Now().UnixNano(), pad))
		}
		pub("pit/events", false)
		pub("public/coup", true)
		pub("pit/coup", true)
		if seq%2 == 0 {
			pub("pit/checkpoint", true)
		}
		if seq%6 == 0 {
			pub("pit/shoe", true)
			pub("status", true)
		}
	}
}

func publishAlert(b *testing.B, cl paho.Client, topic, id string, at time.Time) {
	p, _ := json.Marshal(map[string]any{"alerts": []mqttpub.Alert{{State: mqttpub.AlertRaised, ID: id, Source: mqttpub.SourceTable,
		Kind: "extra_card", Suspends: true, Message: "9H drawn after coup 1 was complete", Needs: "resume", At: at.UTC()}}})
	if tok := cl.Publish(topic, 1, true, p); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		b.Fatal("publish", tok.Error())
	}
}
