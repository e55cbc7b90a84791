// Package metrics is the controller's Prometheus metrics: what came off
// the shoe's line and what was rejected, cards, coups and alerts, the state
// of the shoe's and the broker's links, how long commits and publishes take,
// how far publishing lags the trail, and what became of supervisors'
// commands. docs/operations.md lists every metric.
//
// Metrics keeps its own registry (not Prometheus' global one), so two
// controllers in one process, as in tests, never share a count. The
// controller feeds it what happens (ShoeEvents, Commit, ObserveCommit,
// ObservePublish, WriteFailure, Command) and hands it, with Watch, the
// parts whose state and counters are read at scrape time.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/shoeread"
)

// namespace prefixes every metric of the controller's own.
const namespace = "tablectl"

// Metrics holds the controller's metrics. Its methods are safe for
// concurrent use and never block.
type Metrics struct {
	reg *prometheus.Registry

	shoeSentences     *prometheus.CounterVec
	shoeRejected      *prometheus.CounterVec
	shoeRejectedBytes *prometheus.CounterVec
	cards             prometheus.Counter
	coups             *prometheus.CounterVec
	alerts            *prometheus.CounterVec
	commitSeconds     prometheus.Histogram
	publishSeconds    prometheus.Histogram
	writeFailures     prometheus.Counter
	commands          *prometheus.CounterVec
	summarised        prometheus.Counter
	screened          *prometheus.CounterVec
	selfCheck         selfCheckMetrics
}

// screenCodes are the refusal codes of commands dropped before they were
// queued (command.Screen's, command.CodeQueueFull, CodeRateLimited and
// CodeRetained),
// exported as 0 from the start.
var screenCodes = []string{"oversized", "malformed", "unknown_key", "wrong_table", "queue_full", "rate_limited", "retained"}

// Results of a coup, as the coups metric labels them.
const (
	ResultPlayer = "player"
	ResultBanker = "banker"
	ResultTie    = "tie"
	ResultVoided = "voided"
)

// alertKinds are the alerts the table raises, so that each is exported
// (as 0) before it first happens and a rate over it is never empty.
var alertKinds = []coup.AlertKind{
	coup.AlertCardBettingOpen, coup.AlertCardSuspended, coup.AlertCardNoCoup, coup.AlertExtraCard,
	coup.AlertUnreadableCard, coup.AlertImpossibleCard, coup.AlertSequenceGap, coup.AlertShoeOffline,
	coup.AlertShoeRestarted, coup.AlertWrongBurn, coup.AlertAuditFailed, coup.AlertSelfCheck, coup.AlertSequenceReused,
}

// rejectReasons are shoeread's reasons for rejecting bytes.
var rejectReasons = []error{
	shoeread.ErrNoise, shoeread.ErrFraming, shoeread.ErrChecksum, shoeread.ErrOversize, shoeread.ErrNonPrintable,
	shoeread.ErrUnknownType, shoeread.ErrMalformed, shoeread.ErrBadSeq, shoeread.ErrVersion, shoeread.ErrDuplicate,
	shoeread.ErrSeqReused, shoeread.ErrSeqBackwards, coup.ErrBadCard,
}

// New makes the metrics, with the Go runtime's and the process's own in
// the same registry.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		shoeSentences: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "shoe_sentences_total",
			Help: "Sentences read from the shoe and passed on, by kind (card, cut_card, button, status, heartbeat, hello).",
		}, []string{"kind"}),
		shoeRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "shoe_rejected_total",
			Help: "Rejections on the shoe's line, by reason: a bad sentence or a run of noise each count once (a long run once per 1024 bytes).",
		}, []string{"reason"}),
		shoeRejectedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "shoe_rejected_bytes_total",
			Help: "Bytes from the shoe's line rejected, by reason.",
		}, []string{"reason"}),
		cards: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "cards_total",
			Help: "Cards from the shoe recorded in the trail (burned and unreadable ones included).",
		}),
		coups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "coups_total",
			Help: "Coups completed, by result (player, banker, tie), and coups voided (voided).",
		}, []string{"result"}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "alerts_total",
			Help: "Alerts the table raised, by kind (docs/operations.md).",
		}, []string{"kind"}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "audit_commit_seconds",
			Help: "Time to commit one input and its events to the trail: apply, append and fsync.",
			// 250 us to 2 s: an fsync on an SSD to a disk in trouble.
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 14),
		}),
		publishSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "publish_latency_seconds",
			Help:    "Time from a row's commit to the broker's acknowledgement of every message it called for (rows published as committed; rows read back from the trail are not timed).",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16),
		}),
		writeFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "audit_write_failures_total",
			Help: "Writes the trail refused (disk full, read-only, I/O error): each is an input or a row not recorded.",
		}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "commands_total",
			Help: "Supervisors' commands, by result (accepted, refused) and refusal code (docs/mqtt.md; empty when accepted).",
		}, []string{"result", "code"}),
		summarised: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "command_refusals_summarised_total",
			Help: "Refused commands beyond the refusal limit: no row or reply of their own, counted in a ctl.command_refusals row.",
		}),
		screened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "commands_screened_total",
			Help: "Commands dropped in the MQTT client's handler before they were queued, by refusal code: junk the screen refused beyond the refusal limit, commands whose queue was full (queue_full), and those the embedded broker dropped for a client publishing too fast (rate_limited). Each is also in commands_total and command_refusals_summarised_total.",
		}, []string{"code"}),
	}
	for _, c := range screenCodes {
		m.screened.WithLabelValues(c)
	}
	for _, r := range rejectReasons {
		m.shoeRejected.WithLabelValues(shoeread.Reason(r))
		m.shoeRejectedBytes.WithLabelValues(shoeread.Reason(r))
	}
	for _, k := range alertKinds {
		m.alerts.WithLabelValues(string(k))
	}
	for _, r := range []string{ResultPlayer, ResultBanker, ResultTie, ResultVoided} {
		m.coups.WithLabelValues(r)
	}
	for _, k := range []shoeread.Kind{shoeread.KindCard, shoeread.KindCutCard, shoeread.KindButton,
		shoeread.KindStatus, shoeread.KindHeartbeat, shoeread.KindHello} {
		m.shoeSentences.WithLabelValues(k.String())
	}
	m.commands.WithLabelValues("accepted", "")
	m.reg.MustRegister(m.shoeSentences, m.shoeRejected, m.shoeRejectedBytes, m.cards, m.coups, m.alerts,
		m.commitSeconds, m.publishSeconds, m.writeFailures, m.commands, m.summarised, m.screened,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.selfCheck = newSelfCheckMetrics(m.reg)
	return m
}

// Handler serves the metrics in Prometheus' exposition formats, for
// /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Gatherer is the registry, for tests and for serving elsewhere.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }

// ShoeEvents counts what the shoe reader made of some bytes: sentences by
// kind, rejections and their bytes by reason. Gaps are not sentences:
// Watch reads them from the Sequencer.
func (m *Metrics) ShoeEvents(evs []shoeread.Event) {
	for _, e := range evs {
		switch e.Kind {
		case shoeread.KindProtocolError:
			reason := shoeread.Reason(e.Err)
			m.shoeRejected.WithLabelValues(reason).Inc()
			m.shoeRejectedBytes.WithLabelValues(reason).Add(float64(e.Rejected))
		case shoeread.KindGap:
		default:
			m.shoeSentences.WithLabelValues(e.Kind.String()).Inc()
		}
	}
}

// Commit counts what one commit recorded: a card from the shoe, coups
// completed or voided, alerts raised. Give it every audit.Commit
// (audit.RecorderOptions.OnCommit).
func (m *Metrics) Commit(c audit.Commit) {
	if c.Input.Kind == coup.InCard {
		m.cards.Inc()
	}
	m.selfCheck.observe(c.Input)
	for _, e := range c.Events {
		switch e.Kind {
		case coup.EvCoupResult:
			if e.Result != nil {
				m.coups.WithLabelValues(e.Result.Winner.String()).Inc()
			}
		case coup.EvCoupVoided:
			m.coups.WithLabelValues(ResultVoided).Inc()
		case coup.EvAlert:
			if e.Alert != nil {
				m.alerts.WithLabelValues(string(e.Alert.Kind)).Inc()
			}
		}
	}
}

// ObserveCommit times one commit (audit.RecorderOptions.ObserveCommit).
func (m *Metrics) ObserveCommit(d time.Duration, _ int) { m.commitSeconds.Observe(d.Seconds()) }

// ObservePublish times one row from commit to the broker's acknowledgement
// (mqttpub.Options.ObservePublish).
func (m *Metrics) ObservePublish(d time.Duration) { m.publishSeconds.Observe(d.Seconds()) }

// WriteFailure counts a write the trail refused
// (audit.RecorderOptions.OnWriteFailure).
func (m *Metrics) WriteFailure(error) { m.writeFailures.Inc() }

// CommandScreened counts a command dropped before it was queued, by its
// refusal code (command.Outcome.Screened); Command counts it too.
func (m *Metrics) CommandScreened(code string) { m.screened.WithLabelValues(code).Inc() }

// Command counts one command's outcome: result is "accepted" or "refused",
// code the refusal code, summarised whether the refusal went without a row
// of its own (command.Outcome).
func (m *Metrics) Command(result, code string, summarised bool) {
	m.commands.WithLabelValues(result, code).Inc()
	if summarised {
		m.summarised.Inc()
	}
}
