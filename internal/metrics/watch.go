package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tablectl/tablectl/base/netlimit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/shoeread"
)

// LinkSource is the shoe's serial link (*device.Link).
type LinkSource interface {
	Status() device.Status
	Stats() device.Stats
}

// TableSource is the table and its trail (*audit.Recorder).
type TableSource interface {
	Failing() error
	View() (public, pit coup.View)
}

// BrokerSource is the connection to the broker (*mqttconn.Conn).
type BrokerSource interface {
	Connection() (up bool, changed <-chan struct{})
	Dropped() uint64
}

// BacklogSource is the publisher (*mqttpub.Publisher).
type BacklogSource interface {
	Waiting() int64
}

// ListenerSource is a listener held to limits (*netlimit.Listener).
type ListenerSource interface {
	Name() string
	Stats() netlimit.Stats
}

// Sources are the parts Watch reads at every scrape. Any may be nil: that
// part is not running, and its metrics are left out.
type Sources struct {
	Link LinkSource
	// Sequence reads the shoe reader's Sequencer().Stats(). The reader is
	// not safe for concurrent use, so the caller serialises it with Decode.
	Sequence func() shoeread.SequenceStats
	Table    TableSource
	Broker   BrokerSource
	Backlog  BacklogSource
	// Listeners are the HTTP listener and the embedded broker's.
	Listeners []ListenerSource
}

// Watch registers the sources, to be read at every scrape. Call it once.
func (m *Metrics) Watch(s Sources) error {
	return m.reg.Register(&watcher{s: s})
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
}

// The metrics read at scrape time.
var (
	descShoeLinkState    = desc("shoe_link_state", "The shoe's link: 1 for the state it is in (connected, silent, disconnected), 0 for the others; all 0 before the port was first tried.", "state")
	descShoeOpens        = desc("shoe_link_opens_total", "Times the shoe's port was opened.")
	descShoeOpenFailures = desc("shoe_link_open_failures_total", "Failed attempts to open the shoe's port.")
	descShoeDisconnects  = desc("shoe_link_disconnects_total", "Times an open shoe port was lost (unplugged, hung up, read error).")
	descShoeSilences     = desc("shoe_link_silences_total", "Times the shoe went silent for longer than the silence window.")
	descShoeStalls       = desc("shoe_link_stalls_total", "Times reading the shoe paused because the controller fell behind.")
	descShoeBytes        = desc("shoe_bytes_total", "Bytes read from the shoe's port.")
	descShoeGaps         = desc("shoe_gaps_total", "Sequence gaps: runs of shoe sentences never received.")
	descShoeMissing      = desc("shoe_missing_sentences_total", "Shoe sentences never received, by their sequence numbers.")
	descAuditWritable    = desc("audit_writable", "1 while the audit trail takes writes, 0 while it refuses them (the table is suspended).")
	descSuspended        = desc("table_suspended", "1 while the table is suspended (an alert or a supervisor holds it), else 0.")
	descAlertsActive     = desc("alerts_active", "Alerts holding the table now, by kind.", "kind")
	descBrokerLinkState  = desc("broker_link_state", "The connection to the MQTT broker: 1 for the state it is in (connected, disconnected), 0 for the other.", "state")
	descCommandsDropped  = desc("mqtt_commands_dropped_total", "Messages on cmd dropped unread because too many waited for the command handler.")
	descPublishWaiting   = desc("publish_waiting_rows", "Rows in the trail the broker has not yet acknowledged: to publish, or in flight.")
	descListenerOpen     = desc("listener_connections", "Connections open through the listener (http, mqtt tcp, mqtt websocket).", "listener")
	descListenerRefused  = desc("listener_refused_total", "Connections closed as they came because a limit was reached: the listener's total, one client address's share, or the process's descriptor budget.", "listener", "limit")
	descListenerErrors   = desc("listener_accept_errors_total", "Failed accepts (out of descriptors, a client gone before it was accepted), each waited out.", "listener")
)

// watcher reads the sources at scrape time.
type watcher struct{ s Sources }

func (w *watcher) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descShoeLinkState, descShoeOpens, descShoeOpenFailures, descShoeDisconnects,
		descShoeSilences, descShoeStalls, descShoeBytes, descShoeGaps, descShoeMissing, descAuditWritable,
		descSuspended, descAlertsActive, descBrokerLinkState, descCommandsDropped, descPublishWaiting,
		descListenerOpen, descListenerRefused, descListenerErrors} {
		ch <- d
	}
}

func (w *watcher) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if l := w.s.Link; l != nil {
		state := l.Status().State
		for _, s := range []device.State{device.Connected, device.Silent, device.Disconnected} {
			gauge(descShoeLinkState, boolValue(state == s), s.String())
		}
		st := l.Stats()
		counter(descShoeOpens, st.Opens)
		counter(descShoeOpenFailures, st.OpenFailures)
		counter(descShoeDisconnects, st.Disconnects)
		counter(descShoeSilences, st.Silences)
		counter(descShoeStalls, st.Stalls)
		counter(descShoeBytes, st.Bytes)
	}
	if f := w.s.Sequence; f != nil {
		st := f()
		counter(descShoeGaps, st.Gaps)
		counter(descShoeMissing, st.Missing)
	}
	if t := w.s.Table; t != nil {
		gauge(descAuditWritable, boolValue(t.Failing() == nil))
		_, pit := t.View()
		gauge(descSuspended, boolValue(pit.Suspended))
		active := map[coup.AlertKind]int{}
		for _, k := range alertKinds {
			active[k] = 0
		}
		for _, a := range pit.Alerts {
			active[a.Kind]++
		}
		for k, n := range active {
			gauge(descAlertsActive, float64(n), string(k))
		}
	}
	if b := w.s.Broker; b != nil {
		up, _ := b.Connection()
		gauge(descBrokerLinkState, boolValue(up), "connected")
		gauge(descBrokerLinkState, boolValue(!up), "disconnected")
		counter(descCommandsDropped, b.Dropped())
	}
	if p := w.s.Backlog; p != nil {
		gauge(descPublishWaiting, float64(p.Waiting()))
	}
	for _, l := range w.s.Listeners {
		st := l.Stats()
		gauge(descListenerOpen, float64(st.Open), l.Name())
		for _, r := range []string{netlimit.RefusedTotal, netlimit.RefusedPerClient, netlimit.RefusedBudget} {
			counter(descListenerRefused, st.Refused[r], l.Name(), r)
		}
		counter(descListenerErrors, st.AcceptErrors, l.Name())
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
