package floor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tablectl/tablectl/floor"
	"github.com/tablectl/tablectl/internal/floorsim"
	"github.com/tablectl/tablectl/internal/floortest"
	"github.com/tablectl/tablectl/internal/testenv"
)

// TestBridgeQueue: a table's Mosquitto, bridged to the floor's cluster
// by deploy/mosquitto/bridge.conf through a link the test cuts, queues
// the rows published while the link is down and delivers every one to
// the stream when it comes back. Then the same while the node the bridge
// comes back to has just restarted: NATS acknowledges an MQTT QoS 1
// PUBLISH before the stream has it, so what it cannot store then is lost
// past the bridge (the floor's resync covers it; docs/floor.md). The
// second part reports, it does not fail: it measures the cluster, not
// our code.
func TestBridgeQueue(t *testing.T) {
	testenv.Long(t, "the bridge's queue (a NATS cluster, Mosquitto)")
	testenv.Command(t, "mosquitto", "mosquitto")
	cluster := floortest.Cluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	nc, err := nats.Connect(cluster.URLs(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream, err := floor.EnsureStream(ctx, js, "BRIDGE", floor.Subjects{}, 3, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := floorsim.NewProxy(cluster) // dials the nodes in order: n1 first
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	port, mq := startBridgedBox(t, []string{proxy.Addr()}, "max_queued_messages 200000\nmax_inflight_messages 100\n")
	cl := paho.NewClient(paho.NewClientOptions().AddBroker(fmt.Sprintf("tcp://127.0.0.1:%d", port)).SetClientID("tablectl-BAC-07"))
	if tok := cl.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal("connect:", tok.Error())
	}
	defer cl.Disconnect(100)
	bridgeState := watchBridge(t, cl, "tablectl/BAC-07/bridge/state")
	seq := 0
	publish := func(n int) {
		t.Helper()
		for range n {
			seq++
			if tok := cl.Publish("tablectl/BAC-07/pit/events", 1, false, fmt.Sprintf(`{"seq":%d}`, seq)); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Fatal("publish:", tok.Error())
			}
		}
	}
	last := uint64(0)
	stored := func() uint64 {
		// Bounded: while a node restarts a request may go unanswered.
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if info, err := stream.Info(tctx); err == nil {
			last = info.State.Msgs
		}
		return last
	}
	// rows is how many of the rows 1..want the stream holds, each counted
	// once, and how many messages it holds beyond those (the bridge is
	// QoS 1, at least once: a PUBLISH in flight when the link drops is
	// sent again, and the witness drops the copy by its hash).
	rows := func(want int) (held, extra int) {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		info, err := stream.Info(tctx)
		if err != nil {
			return 0, 0
		}
		seen := make(map[int]bool, want)
		for sq := info.State.FirstSeq; sq > 0 && sq <= info.State.LastSeq; sq++ {
			m, err := stream.GetMsg(tctx, sq)
			if err != nil {
				return len(seen), extra
			}
			var row struct{ Seq int }
			if json.Unmarshal(m.Data, &row) != nil || row.Seq < 1 || row.Seq > want || seen[row.Seq] {
				extra++
				continue
			}
			seen[row.Seq] = true
		}
		return len(seen), extra
	}
	waitRows := func(want int, d time.Duration) (held, extra int) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		// The caller says what is missing when the wait runs out.
		_ = testenv.WaitFor(ctx, fmt.Sprintf("%d rows in the stream", want), func() bool {
			held, extra = rows(want)
			return held >= want
		})
		if extra > 0 {
			t.Logf("%d messages in the stream were copies sent again by the bridge", extra)
		}
		return held, extra
	}
	// The link up.
	publish(100)
	if n, _ := waitRows(100, 30*time.Second); n != 100 {
		t.Fatalf("link up: %d of 100 rows in the stream", n)
	}
	// Cut: the rows queue in Mosquitto, and all of them arrive once mended.
	proxy.SetCut(true)
	bridgeState.wait(t, "0") // the bridge knows it is down: nothing more passes
	before := stored()
	publish(500)
	// Nothing may arrive while cut: the wait is the test (no message can
	// mark the end of what never comes).
	time.Sleep(3 * time.Second)
	if n := stored(); n != before {
		t.Fatalf("with the link cut, the stream grew from %d to %d messages", before, n)
	}
	proxy.SetCut(false)
	if n, _ := waitRows(600, 60*time.Second); n != 600 {
		t.Fatalf("the bridge's queue: %d of the 500 rows queued while cut reached the stream", n-100)
	}
	// Cut again; the node the bridge comes back to is killed and started
	// again, and the link mended as soon as the node listens.
	proxy.SetCut(true)
	bridgeState.wait(t, "0")
	publish(500)
	cluster.Kill(0)
	if err := cluster.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	proxy.SetCut(false)
	n, _ := waitRows(1100, 60*time.Second)
	t.Logf("mended onto a node just restarted: %d of the 500 rows queued while cut reached the stream", n-600)
	t.Logf("Mosquitto's bridge said:\n%s", grepLines(mq.Log(), "bridge", 30))
}

// grepLines is the last n lines of s holding sub.
func grepLines(s, sub string, n int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(strings.ToLower(l), sub) {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, "\n")
}

// bridgeWatch follows a bridge's state as Mosquitto announces it on its
// notification topic ("1" up, "0" down).
type bridgeWatch struct {
	mu    sync.Mutex
	state string
}

func watchBridge(t *testing.T, cl paho.Client, topic string) *bridgeWatch {
	t.Helper()
	w := &bridgeWatch{}
	tok := cl.Subscribe(topic, 1, func(_ paho.Client, m paho.Message) {
		w.mu.Lock()
		w.state = string(m.Payload())
		w.mu.Unlock()
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal("subscribe:", tok.Error())
	}
	return w
}

// wait waits until the bridge's announced state is state.
func (w *bridgeWatch) wait(t *testing.T, state string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "the bridge's state "+state, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.state == state
	})
}
