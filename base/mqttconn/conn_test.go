package mqttconn

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tablectl/tablectl/internal/mqttbroker"
)

// TestConnLanes: Sort puts each received message in its lane, or drops it
// before it is copied; a full lane drops the message, tells Lost and counts
// it, and the other lane still takes messages.
func TestConnLanes(t *testing.T) {
	b, err := mqttbroker.Start(mqttbroker.Options{TCP: "127.0.0.1:0", Logger: quiet(), Anonymous: mqttbroker.Access{Read: []string{"lanes/cmd"}, Write: []string{"lanes/cmd"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	var mu sync.Mutex
	sorted := 0
	lost := map[Lane]int{}
	conn, err := Dial(ConnOptions{Broker: b.URL(), ClientID: "lanes", Subscribe: []string{"lanes/cmd"}, Logger: quiet(),
		Inbox: 2, PriorityInbox: 3,
		Sort: func(topic string, p []byte) Lane {
			mu.Lock()
			sorted++
			mu.Unlock()
			switch {
			case bytes.HasPrefix(p, []byte("known")):
				return LanePriority
			case bytes.HasPrefix(p, []byte("junk")):
				return LaneNone
			}
			return LaneInbox
		},
		Lost: func(l Lane, size int) { mu.Lock(); lost[l] += size; mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(100 * time.Millisecond) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := conn.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	pub, err := Dial(ConnOptions{Broker: b.URL(), ClientID: "lanes-pub", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close(100 * time.Millisecond) })
	if err := pub.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	// Nobody reads: 100 junk (dropped by Sort), 5 for the inbox (2 fit),
	// 4 known (3 fit).
	var payloads []string
	for i := range 100 {
		payloads = append(payloads, fmt.Sprintf("junk %d", i))
	}
	for i := range 5 {
		payloads = append(payloads, fmt.Sprintf("other %d", i))
	}
	for i := range 4 {
		payloads = append(payloads, fmt.Sprintf("known %d", i))
	}
	for _, p := range payloads {
		tok := pub.Publish("lanes/cmd", 1, false, []byte(p))
		select {
		case <-tok.Done():
		case <-ctx.Done():
			t.Fatalf("publish %q: no acknowledgement", p)
		}
		if tok.Error() != nil {
			t.Fatal(tok.Error())
		}
	}
	for {
		mu.Lock()
		n := sorted
		mu.Unlock()
		if n == len(payloads) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d messages sorted", n, len(payloads))
		case <-time.After(5 * time.Millisecond):
		}
	}
	drain := func(ch <-chan InMessage) []string {
		var got []string
		for {
			select {
			case m := <-ch:
				got = append(got, string(m.Payload))
			default:
				return got
			}
		}
	}
	if got := fmt.Sprint(drain(conn.Priority())); got != "[known 0 known 1 known 2]" {
		t.Errorf("priority lane %s", got)
	}
	if got := fmt.Sprint(drain(conn.Messages())); got != "[other 0 other 1]" {
		t.Errorf("inbox %s", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := map[Lane]int{LaneInbox: 3 * len("other 0"), LanePriority: len("known 3")}; fmt.Sprint(lost) != fmt.Sprint(want) || conn.Dropped() != 4 {
		t.Errorf("lost %v, dropped %d; want %v and 4", lost, conn.Dropped(), want)
	}
}
