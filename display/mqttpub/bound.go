package mqttpub

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/tablectl/tablectl/base/mqttconn"
)

// MaxPayload bounds every message the table publishes, well under the
// floor's limit (NATS refuses more than 1 MiB and closes the bridge that
// sent it; Mosquitto then sends the same message again on every reconnect,
// and the table's uplink is wedged for good). A row's pit/events message is
// a few hundred bytes; only lists could grow past this, and the one that
// can (pit/alerts/active) is summarised first.
const MaxPayload = 64 << 10

// MaxEventPayload bounds a row's pit/events message instead: a row is never
// summarised (the witness recomputes its hash), and a snapshot row (the
// table's whole state, every 20,000 rows) can pass MaxPayload. It is still
// under the floor's 1 MiB, with room for the bridge's framing.
const MaxEventPayload = 960 << 10

// MaxActiveAlerts is how many alerts pit/alerts/active lists; past it the
// newest are listed and the rest are counted by kind.
const MaxActiveAlerts = 50

// SourceMQTT is the source of the alert that says a message was over the
// bound and not published.
const SourceMQTT = "mqtt"

// oversized counts messages dropped for their size.
type oversized struct{ n atomic.Int64 }

// Oversized is how many messages were not published because they were over
// MaxPayload.
func (p *Publisher) Oversized() int64 { return p.over.n.Load() }

// bounded says whether m may go out. One that may not is dropped, counted
// and logged, and a small alert on pit/alerts says which topic lost what
// (the alert itself is always far under the bound).
func (p *Publisher) bounded(m Message) bool {
	if len(m.Payload) <= boundOf(m.Topic) {
		return true
	}
	n := p.over.n.Add(1)
	p.log.Error("mqtt: message over the size bound, not published", "topic", m.Topic, "bytes", len(m.Payload), "bound", boundOf(m.Topic), "dropped", n)
	if a, ok := p.eng.msg(TopicPitAlerts, 1, false, oversizedAlert(m, n)); ok {
		p.opt.Client.Publish(a.Topic, a.QoS, a.Retained, a.Payload)
	}
	return false
}

// boundOf is the size bound of a topic's messages.
func boundOf(topic string) int {
	if strings.HasSuffix(topic, "/"+TopicPitEvents) {
		return MaxEventPayload
	}
	return MaxPayload
}

func oversizedAlert(m Message, n int64) Alert {
	return Alert{State: AlertRaised, ID: fmt.Sprintf("oversized-%d", n), Source: SourceMQTT, Kind: "oversized_dropped",
		Message: fmt.Sprintf("%s: %d bytes, over the bound of %d: not published (%d so far)", m.Topic, len(m.Payload), boundOf(m.Topic), n)}
}

// doneToken is the token of a message that was never sent: done at once,
// so the acknowledgement window moves on.
type doneToken struct{}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (doneToken) Done() <-chan struct{} { return closed }
func (doneToken) Error() error          { return nil }

var _ mqttconn.Token = doneToken{}

// summarise keeps pit/alerts/active within MaxActiveAlerts and within
// half of MaxPayload: the alerts with no row (advantage, the trail's
// failure) and the newest by row are listed, every alert is counted by
// kind, and Omitted says how many are not listed.
func summarise(a ActiveAlerts) ActiveAlerts {
	const budget = MaxPayload / 2 // the by-kind counts and the envelope fit in the rest
	if len(a.Alerts) <= MaxActiveAlerts && encodedSize(a.Alerts) <= budget {
		return a
	}
	byKind := map[string]int{}
	for _, x := range a.Alerts {
		byKind[x.Kind]++
	}
	newest := slices.Clone(a.Alerts)
	// Newest first: a row of 0 (no row records it) counts as newest.
	slices.SortStableFunc(newest, func(x, y Alert) int { return cmp.Compare(rank(y), rank(x)) })
	kept, size := newest[:0:0], 0
	for _, x := range newest {
		n := encodedSize([]Alert{x})
		if len(kept) == MaxActiveAlerts || size+n > budget {
			break
		}
		kept, size = append(kept, x), size+n
	}
	// Back in the table's order, for a stable display.
	slices.SortStableFunc(kept, func(x, y Alert) int { return cmp.Compare(rank(x), rank(y)) })
	return ActiveAlerts{Alerts: kept, Omitted: len(a.Alerts) - len(kept), ByKind: byKind}
}

// encodedSize is the bytes alerts take in a JSON list.
func encodedSize(alerts []Alert) int {
	n := 2
	for _, x := range alerts {
		b, err := json.Marshal(x)
		if err != nil {
			return MaxPayload // only a bug makes an alert unencodable
		}
		n += len(b) + 1
	}
	return n
}

func rank(a Alert) int64 {
	if a.Seq == 0 {
		return 1 << 62
	}
	return a.Seq
}
