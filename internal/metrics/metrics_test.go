package metrics

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/netlimit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/shoeread"
)

// scrape is one GET /metrics through the real handler, parsed.
type scrape map[string]*dto.MetricFamily

func scrapeOf(t *testing.T, h http.Handler) scrape {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the scrape does not parse: %v", err)
	}
	return fams
}

// value is the sample of name whose labels are exactly labels ("k=v"
// pairs); ok is false when there is none.
func (s scrape) value(name string, labels ...string) (float64, bool) {
	f, found := s[name]
	if !found {
		return 0, false
	}
	sort.Strings(labels)
	for _, m := range f.Metric {
		var got []string
		for _, l := range m.Label {
			got = append(got, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(got)
		if !slices.Equal(got, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// want checks samples: name{labels} = value.
func (s scrape) want(t *testing.T, want ...sample) {
	t.Helper()
	for _, w := range want {
		got, ok := s.value(w.name, w.labels...)
		if !ok {
			t.Errorf("%s%v: no such sample", w.name, w.labels)
			continue
		}
		if got != w.v {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.v)
		}
	}
}

type sample struct {
	name   string
	labels []string
	v      float64
}

func s(name string, v float64, labels ...string) sample { return sample{name, labels, v} }

func TestMetricsFollowTheConventions(t *testing.T) {
	m := New()
	problems, err := promlint.NewWithMetricFamilies(gather(t, m)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

func gather(t *testing.T, m *Metrics) []*dto.MetricFamily {
	t.Helper()
	fams, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func card(t *testing.T, s string) *coup.Card {
	t.Helper()
	c, err := coup.ParseCard(s)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// Everything fed to Metrics comes out of the scrape with the counts worked
// out here by hand.
func TestEventsAreCounted(t *testing.T) {
	m := New()
	// The line: two cards, a heartbeat, a button; a checksum failure of 21
	// bytes and two runs of noise (1024 and 7 bytes); a duplicate the
	// Sequencer dropped (no bytes of its own); a gap, which is no sentence.
	m.ShoeEvents([]shoeread.Event{
		{Kind: shoeread.KindCard, Seq: 1}, {Kind: shoeread.KindHeartbeat, Seq: 1},
		{Kind: shoeread.KindProtocolError, Err: fmt.Errorf("%w: sentence says *1F", shoeread.ErrChecksum), Rejected: 21},
		{Kind: shoeread.KindProtocolError, Err: fmt.Errorf("%w: 1024 bytes outside any sentence", shoeread.ErrNoise), Rejected: 1024},
	})
	m.ShoeEvents([]shoeread.Event{
		{Kind: shoeread.KindProtocolError, Err: shoeread.ErrNoise, Rejected: 7},
		{Kind: shoeread.KindGap, GapFrom: 3, GapTo: 4},
		{Kind: shoeread.KindCard, Seq: 5}, {Kind: shoeread.KindButton, Seq: 6, Button: shoeread.ButtonReveal},
		{Kind: shoeread.KindProtocolError, Err: shoeread.ErrDuplicate},
	})
	// The table: three cards from the shoe, a manual entry (a command, not
	// a card from the shoe), a Banker win, a voided coup, two alerts.
	m.Commit(audit.Commit{Input: coup.Input{Kind: coup.InCard, Card: card(t, "KH")}})
	m.Commit(audit.Commit{Input: coup.Input{Kind: coup.InCard, Unreadable: true}, Events: []coup.Event{
		{Kind: coup.EvAlert, Alert: &coup.Alert{Kind: coup.AlertUnreadableCard}}, {Kind: coup.EvSuspended},
	}})
	m.Commit(audit.Commit{Input: coup.Input{Kind: coup.InCmd, Command: &coup.Command{Action: coup.ActionCard, Card: card(t, "2S")}}})
	m.Commit(audit.Commit{Input: coup.Input{Kind: coup.InButton, Button: coup.ButtonReveal}, Events: []coup.Event{
		{Kind: coup.EvCardsRevealed}, {Kind: coup.EvCoupResult, Result: &coup.Result{Winner: coup.SideBanker}},
	}})
	m.Commit(audit.Commit{Input: coup.Input{Kind: coup.InCard, Card: card(t, "9D")}, Events: []coup.Event{
		{Kind: coup.EvAlert, Alert: &coup.Alert{Kind: coup.AlertCardBettingOpen}},
	}})
	m.Commit(audit.Commit{Input: coup.Input{Kind: coup.InCmd}, Events: []coup.Event{{Kind: coup.EvCoupVoided}}})
	// A row that is no input (a refused command's).
	m.Commit(audit.Commit{Records: []audit.Record{{Seq: 9, Kind: audit.KindRejected}}})

	m.ObserveCommit(3*time.Millisecond, 2)
	m.ObserveCommit(400*time.Microsecond, 1)
	m.ObservePublish(7 * time.Millisecond)
	m.WriteFailure(errors.New("disk full"))
	m.WriteFailure(errors.New("disk full"))
	m.Command("accepted", "", false)
	m.Command("refused", "malformed", false)
	m.Command("refused", "malformed", true)
	m.Command("refused", "oversized", true)
	m.Command("refused", "table", false)

	sc := scrapeOf(t, m.Handler())
	sc.want(t,
		s("tablectl_shoe_sentences_total", 2, "kind=card"),
		s("tablectl_shoe_sentences_total", 1, "kind=heartbeat"),
		s("tablectl_shoe_sentences_total", 1, "kind=button"),
		s("tablectl_shoe_sentences_total", 0, "kind=hello"),
		s("tablectl_shoe_rejected_total", 1, "reason=checksum"),
		s("tablectl_shoe_rejected_bytes_total", 21, "reason=checksum"),
		s("tablectl_shoe_rejected_total", 2, "reason=noise"),
		s("tablectl_shoe_rejected_bytes_total", 1031, "reason=noise"),
		s("tablectl_shoe_rejected_total", 1, "reason=duplicate"),
		s("tablectl_shoe_rejected_bytes_total", 0, "reason=duplicate"),
		s("tablectl_shoe_rejected_total", 0, "reason=framing"),
		s("tablectl_cards_total", 3),
		s("tablectl_coups_total", 1, "result=banker"),
		s("tablectl_coups_total", 0, "result=player"),
		s("tablectl_coups_total", 0, "result=tie"),
		s("tablectl_coups_total", 1, "result=voided"),
		s("tablectl_alerts_total", 1, "kind=unreadable_card"),
		s("tablectl_alerts_total", 1, "kind=card_while_betting_open"),
		s("tablectl_alerts_total", 0, "kind=shoe_offline"),
		s("tablectl_audit_commit_seconds", 2),
		s("tablectl_publish_latency_seconds", 1),
		s("tablectl_audit_write_failures_total", 2),
		s("tablectl_commands_total", 1, "result=accepted", "code="),
		s("tablectl_commands_total", 2, "result=refused", "code=malformed"),
		s("tablectl_commands_total", 1, "result=refused", "code=oversized"),
		s("tablectl_commands_total", 1, "result=refused", "code=table"),
		s("tablectl_command_refusals_summarised_total", 2),
	)
	if _, ok := sc.value("tablectl_shoe_sentences_total", "kind=gap"); ok {
		t.Error("a gap counted as a sentence")
	}
	// The histograms put each observation in its bucket.
	h := sc["tablectl_audit_commit_seconds"].Metric[0].Histogram
	if got := h.GetSampleSum(); got < 0.0034-1e-9 || got > 0.0034+1e-9 {
		t.Errorf("commit seconds sum %v, want 0.0034", got)
	}
	for _, b := range h.Bucket {
		var want uint64
		switch {
		case b.GetUpperBound() >= 0.003:
			want = 2
		case b.GetUpperBound() >= 0.0004:
			want = 1
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("commit seconds bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	// The runtime's and the process's own metrics are there too.
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if _, ok := sc[name]; !ok {
			t.Errorf("no %s", name)
		}
	}
}

// fakeLink is a shoe link in a state the test sets.
type fakeLink struct {
	mu     sync.Mutex
	status device.Status
	stats  device.Stats
}

func (l *fakeLink) Status() device.Status { l.mu.Lock(); defer l.mu.Unlock(); return l.status }
func (l *fakeLink) Stats() device.Stats   { l.mu.Lock(); defer l.mu.Unlock(); return l.stats }

type fakeTable struct {
	failing error
	pit     coup.View
}

func (f fakeTable) Failing() error                { return f.failing }
func (f fakeTable) View() (public, pit coup.View) { return coup.View{}, f.pit }

type fakeBroker struct {
	up      bool
	dropped uint64
}

func (b fakeBroker) Connection() (bool, <-chan struct{}) { return b.up, nil }
func (b fakeBroker) Dropped() uint64                     { return b.dropped }

type fakeBacklog int64

type fakeListener struct {
	name  string
	stats netlimit.Stats
}

func (l fakeListener) Name() string          { return l.name }
func (l fakeListener) Stats() netlimit.Stats { return l.stats }

func (b fakeBacklog) Waiting() int64 { return int64(b) }

func TestWatchReadsTheSourcesAtScrape(t *testing.T) {
	tests := []struct {
		name string
		src  Sources
		want []sample
		none []string // metrics left out
	}{
		{
			name: "nothing running",
			none: []string{"tablectl_shoe_link_state", "tablectl_audit_writable", "tablectl_broker_link_state", "tablectl_publish_waiting_rows", "tablectl_shoe_gaps_total"},
		},
		{
			name: "the port not yet tried",
			src:  Sources{Link: &fakeLink{}},
			want: []sample{
				s("tablectl_shoe_link_state", 0, "state=connected"), s("tablectl_shoe_link_state", 0, "state=silent"),
				s("tablectl_shoe_link_state", 0, "state=disconnected"), s("tablectl_shoe_link_opens_total", 0),
			},
		},
		{
			name: "all well",
			src: Sources{
				Link: &fakeLink{status: device.Status{State: device.Connected},
					stats: device.Stats{Opens: 2, OpenFailures: 5, Disconnects: 1, Bytes: 4096, Silences: 3, Stalls: 4}},
				Sequence: func() shoeread.SequenceStats { return shoeread.SequenceStats{Gaps: 2, Missing: 7, Duplicates: 1} },
				Table:    fakeTable{},
				Broker:   fakeBroker{up: true, dropped: 12},
				Backlog:  fakeBacklog(3),
				Listeners: []ListenerSource{fakeListener{"http", netlimit.Stats{Open: 7, AcceptErrors: 2,
					Refused: map[string]uint64{netlimit.RefusedTotal: 3, netlimit.RefusedPerClient: 40}}}},
			},
			want: []sample{
				s("tablectl_shoe_link_state", 1, "state=connected"), s("tablectl_shoe_link_state", 0, "state=silent"),
				s("tablectl_shoe_link_state", 0, "state=disconnected"),
				s("tablectl_shoe_link_opens_total", 2), s("tablectl_shoe_link_open_failures_total", 5),
				s("tablectl_shoe_link_disconnects_total", 1), s("tablectl_shoe_bytes_total", 4096),
				s("tablectl_shoe_link_silences_total", 3), s("tablectl_shoe_link_stalls_total", 4),
				s("tablectl_shoe_gaps_total", 2), s("tablectl_shoe_missing_sentences_total", 7),
				s("tablectl_audit_writable", 1), s("tablectl_table_suspended", 0),
				s("tablectl_alerts_active", 0, "kind=sequence_gap"),
				s("tablectl_broker_link_state", 1, "state=connected"), s("tablectl_broker_link_state", 0, "state=disconnected"),
				s("tablectl_mqtt_commands_dropped_total", 12), s("tablectl_publish_waiting_rows", 3),
				s("tablectl_listener_connections", 7, "listener=http"), s("tablectl_listener_accept_errors_total", 2, "listener=http"),
				s("tablectl_listener_refused_total", 3, "limit=total", "listener=http"),
				s("tablectl_listener_refused_total", 40, "limit=per_client", "listener=http"),
				s("tablectl_listener_refused_total", 0, "limit=budget", "listener=http"),
			},
		},
		{
			name: "everything down",
			src: Sources{
				Link:   &fakeLink{status: device.Status{State: device.Silent}},
				Table:  fakeTable{failing: errors.New("disk full"), pit: coup.View{Suspended: true, Alerts: []coup.Alert{{Kind: coup.AlertShoeOffline}, {Kind: coup.AlertSequenceGap}, {Kind: coup.AlertShoeOffline}}}},
				Broker: fakeBroker{},
			},
			want: []sample{
				s("tablectl_shoe_link_state", 0, "state=connected"), s("tablectl_shoe_link_state", 1, "state=silent"),
				s("tablectl_audit_writable", 0), s("tablectl_table_suspended", 1),
				s("tablectl_alerts_active", 2, "kind=shoe_offline"), s("tablectl_alerts_active", 1, "kind=sequence_gap"),
				s("tablectl_alerts_active", 0, "kind=extra_card"),
				s("tablectl_broker_link_state", 0, "state=connected"), s("tablectl_broker_link_state", 1, "state=disconnected"),
			},
			none: []string{"tablectl_publish_waiting_rows"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			if err := m.Watch(tt.src); err != nil {
				t.Fatal(err)
			}
			sc := scrapeOf(t, m.Handler())
			sc.want(t, tt.want...)
			for _, name := range tt.none {
				if _, ok := sc[name]; ok {
					t.Errorf("%s exported with no source for it", name)
				}
			}
		})
	}
}

// A scrape sees the link as it is at that moment, not as it was watched.
func TestWatchFollowsTheLink(t *testing.T) {
	m := New()
	l := &fakeLink{status: device.Status{State: device.Connected}}
	if err := m.Watch(Sources{Link: l}); err != nil {
		t.Fatal(err)
	}
	for _, st := range []device.State{device.Connected, device.Disconnected, device.Silent, device.Connected} {
		l.mu.Lock()
		l.status.State = st
		l.mu.Unlock()
		sc := scrapeOf(t, m.Handler())
		for _, other := range []device.State{device.Connected, device.Silent, device.Disconnected} {
			want := 0.0
			if other == st {
				want = 1
			}
			sc.want(t, s("tablectl_shoe_link_state", want, "state="+other.String()))
		}
	}
	if err := m.Watch(Sources{Link: l}); err == nil {
		t.Error("a second Watch registered the same metrics again")
	}
}

// Counting goes on while Prometheus scrapes: run with -race.
func TestConcurrentCountingAndScraping(t *testing.T) {
	m := New()
	l := &fakeLink{status: device.Status{State: device.Connected}}
	if err := m.Watch(Sources{Link: l}); err != nil {
		t.Fatal(err)
	}
	const writers, each = 4, 500
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				m.ShoeEvents([]shoeread.Event{{Kind: shoeread.KindCard}})
				m.Commit(audit.Commit{Input: coup.Input{Kind: coup.InCard}})
				m.ObserveCommit(time.Duration(i)*time.Microsecond, 1)
				l.mu.Lock()
				l.stats.Bytes++
				l.mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for scraping := true; scraping; {
		select {
		case <-done:
			scraping = false
		default:
		}
		scrapeOf(t, m.Handler())
	}
	scrapeOf(t, m.Handler()).want(t,
		s("tablectl_shoe_sentences_total", writers*each, "kind=card"),
		s("tablectl_cards_total", writers*each),
		s("tablectl_audit_commit_seconds", writers*each),
		s("tablectl_shoe_bytes_total", writers*each),
	)
}

// The exposition names every metric docs/operations.md lists, and the
// documentation lists every metric of ours.
func TestEveryMetricIsDocumented(t *testing.T) {
	doc := readDoc(t)
	m := New()
	if err := m.Watch(Sources{Link: &fakeLink{}, Sequence: func() shoeread.SequenceStats { return shoeread.SequenceStats{} },
		Table: fakeTable{}, Broker: fakeBroker{}, Backlog: fakeBacklog(0), Listeners: []ListenerSource{fakeListener{name: "http"}}}); err != nil {
		t.Fatal(err)
	}
	m.ObservePublish(time.Millisecond) // histograms show up once observed
	m.ObserveCommit(time.Millisecond, 1)
	var ours []string
	for _, f := range gather(t, m) {
		if strings.HasPrefix(f.GetName(), namespace+"_") {
			ours = append(ours, f.GetName())
			if !strings.Contains(doc, "`"+f.GetName()+"`") {
				t.Errorf("docs/operations.md does not list %s", f.GetName())
			}
		}
	}
	if len(ours) < 25 {
		t.Fatalf("only %d metrics of ours: %v", len(ours), ours)
	}
	for _, name := range documented(doc) {
		if !slices.Contains(ours, name) {
			t.Errorf("docs/operations.md lists %s, which is not exported", name)
		}
	}
}

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// documented are the metric names docs/operations.md lists, in backquotes.
func documented(doc string) []string {
	var out []string
	for _, m := range regexp.MustCompile("`(tablectl_[a-z_]+)`").FindAllStringSubmatch(doc, -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}
