package floor_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/floor"
	"github.com/tablectl/tablectl/internal/floortest"
	"github.com/tablectl/tablectl/internal/freeport"
	"github.com/tablectl/tablectl/internal/logtail"
	"github.com/tablectl/tablectl/internal/mosquitto"
	"github.com/tablectl/tablectl/internal/natsserver"
	"github.com/tablectl/tablectl/internal/testenv"
)

// shippedSetting is a setting's value in deploy/mosquitto/mosquitto.conf,
// the table box's Mosquitto as the package ships it.
func shippedSetting(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../deploy/mosquitto/mosquitto.conf")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			return f[1]
		}
	}
	t.Fatalf("deploy/mosquitto/mosquitto.conf sets no %s", name)
	return ""
}

// TestBridgeOversized (issue 32): one message too big for the floor must
// not wedge a table's uplink. Before, a 1,068,720-byte pit/alerts/active
// went through the box's Mosquitto; NATS refused it ("maximum payload
// exceeded") and closed the bridge, and Mosquitto sent it again on every
// reconnect, so no row after it reached the floor. Now the table's
// publisher keeps every message under mqttpub.MaxEventPayload, and the
// box's Mosquitto (its max_packet_size as shipped) refuses anything
// larger from any client, so the bridge never carries what the floor
// refuses: the rows behind the oversized message all arrive.
func TestBridgeOversized(t *testing.T) {
	testenv.Long(t, "a bridge and an oversized message (a NATS node, Mosquitto)")
	testenv.Command(t, "mosquitto", "mosquitto")
	limit := shippedSetting(t, "max_packet_size")
	cluster := floortest.Cluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, err := nats.Connect(cluster.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream, err := floor.EnsureStream(ctx, js, "BRIDGESIZE", floor.Subjects{}, 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := startBridgedBox(t, []string{cluster.Nodes[0].MQTTAddr()}, "max_packet_size "+limit+"\n")
	connect := func(id string) paho.Client {
		cl := paho.NewClient(paho.NewClientOptions().AddBroker(fmt.Sprintf("tcp://127.0.0.1:%d", port)).SetClientID(id).SetAutoReconnect(false))
		if tok := cl.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatal("connect:", tok.Error())
		}
		return cl
	}
	table := connect("tablectl-BAC-07")
	defer table.Disconnect(100)
	seq := 0
	publish := func(n int) {
		t.Helper()
		for range n {
			seq++
			if tok := table.Publish("tablectl/BAC-07/pit/events", 1, false, fmt.Sprintf(`{"seq":%d}`, seq)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Fatal("publish:", tok.Error())
			}
		}
	}
	publish(50)
	// The largest message the table itself makes goes through; one over
	// the floor's 1 MiB, from another client of the box, is refused at the
	// box (that client is disconnected), never bridged.
	big := connect("other-client")
	big.Publish("tablectl/BAC-07/pit/alerts/active", 1, true, bytes.Repeat([]byte("x"), mqttpub.MaxEventPayload)).WaitTimeout(10 * time.Second)
	// The largest the box takes under its shipped max_packet_size, and one
	// the size of the (1,068,720 bytes).
	n, _ := strconv.Atoi(limit)
	for _, size := range []int{n - len("tablectl/BAC-07/pit/alerts/active") - 16, 1068720} {
		big.Publish("tablectl/BAC-07/pit/alerts/active", 1, true, bytes.Repeat([]byte("x"), size)).WaitTimeout(10 * time.Second)
		if !big.IsConnected() {
			big = connect("other-client")
		}
	}
	big.Disconnect(100)
	publish(50)
	// Every row, the 50 behind the oversized message too, reaches the
	// stream.
	testenv.Eventually(t, 30*time.Second, "the 100 rows in the floor's stream", func() bool {
		return rowsIn(ctx, stream, 100) == 100
	})
}

// rowsIn is how many of the rows 1..want the stream holds.
func rowsIn(ctx context.Context, stream jetstream.Stream, want int) int {
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := stream.Info(tctx)
	if err != nil {
		return 0
	}
	seen := map[int]bool{}
	for sq := info.State.FirstSeq; sq > 0 && sq <= info.State.LastSeq; sq++ {
		m, err := stream.GetMsg(tctx, sq)
		if err != nil {
			return len(seen)
		}
		var row struct{ Seq int }
		if json.Unmarshal(m.Data, &row) == nil && row.Seq >= 1 && row.Seq <= want {
			seen[row.Seq] = true
		}
	}
	return len(seen)
}

// startBridgedBox starts a table box's Mosquitto on a loopback port with
// deploy/mosquitto/bridge.conf bridging BAC-07 to the floor at addrs, and
// the extra settings; it returns the port and the process. Its log is
// shown if the test fails.
func startBridgedBox(t *testing.T, addrs []string, extra string) (int, *mosquitto.Process) {
	t.Helper()
	text, err := os.ReadFile("../deploy/mosquitto/bridge.conf")
	if err != nil {
		t.Fatal(err)
	}
	bridge, err := natsserver.Bridge(string(text), "BAC-07", addrs)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := freeport.Loopback()
	conf := filepath.Join(t.TempDir(), "mosquitto.conf")
	os.WriteFile(conf, fmt.Appendf(nil, "listener %d 127.0.0.1\nallow_anonymous true\npersistence false\nlog_dest stderr\nlog_type all\n%s%s", port, extra, bridge), 0o644)
	mq, err := mosquitto.Start(conf, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Mosquitto:\n%s", logtail.Lines(mq.Log(), 60))
		}
		mq.Kill()
	})
	return port, mq
}
