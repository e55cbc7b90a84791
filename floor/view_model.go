package floor

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/display/mqttpub"
)

// RateWindow is the window over which the floor view gives each table's
// coups per hour: long enough for a dealer's pace (a coup a minute or
// so), short enough to show a table slowing down.
const RateWindow = 15 * time.Minute

// The bounds of one table's entry in the floor view, so a table under an
// alert storm sends a tile, not its alert list (one event of 3.07 MB was
// seen): the kinds shown, each with its count, and the words taken from
// the tables' messages.
const (
	maxGroups    = 12
	maxWords     = 200 // a message, a supervisor's note
	maxName      = 64  // a dealer, a supervisor, a kind
	maxTableSeen = 1000
	// MaxEntryBytes bounds one table's entry as encoded (a server-sent
	// event, a line of floor.json): what the bounds above make, with room.
	MaxEntryBytes = 16 << 10
)

// TableView is one table as the floor view shows it: a tile of words, not
// the table's raw messages.
type TableView struct {
	Table string `json:"table"`
	// PitView is the table's own pit view (the registry's pit_view).
	PitView string `json:"pit_view,omitempty"`
	// State is the table's state in words ("dealing", "suspended",
	// "offline"); Level is what colour the tile takes: ok, warn (suspended,
	// an alert), alarm (tamper, fork, shuffle), off (offline, not heard).
	State string `json:"state"`
	Level string `json:"level"`
	Shoe  int    `json:"shoe,omitempty"`
	Coup  int    `json:"coup,omitempty"`
	// Dealer is the dealer on duty, from the table's status.
	Dealer string `json:"dealer,omitempty"`
	// Suspension says why, by whom and since when a suspended table is.
	Suspension *Suspension `json:"suspension,omitempty"`
	// CoupsPerHour is the rate of coup results witnessed over the last
	// RateMinutes minutes.
	CoupsPerHour float64 `json:"coups_per_hour"`
	RateMinutes  int     `json:"rate_minutes"`
	// Alerts are the table's active alerts and the floor's open ones,
	// grouped by kind: alarms first, then the newest. MoreKinds counts
	// the kinds left out.
	Alerts    []AlertGroup `json:"alerts"`
	MoreKinds int          `json:"more_kinds,omitempty"`
	// Witnessed is how far the floor holds the table's trail without a
	// hole, MaxSeq the highest row witnessed.
	Witnessed int64 `json:"witnessed"`
	MaxSeq    int64 `json:"max_seq"`
	// CheckpointAt is when the last witnessed checkpoint was signed;
	// LastSeen when the floor last had a row or checkpoint of the table.
	CheckpointAt *time.Time `json:"checkpoint_at,omitempty"`
	LastSeen     *time.Time `json:"last_seen,omitempty"`
	// Updated is when this entry last changed, by the floor view's clock.
	Updated time.Time `json:"updated"`
}

// Suspension is why a table takes no cards.
type Suspension struct {
	// Why is the table's public reason in words ("a supervisor's check");
	// Note the supervisor's note or what the alert said, from the
	// witnessed rows.
	Why  string `json:"why"`
	Note string `json:"note,omitempty"`
	// By is the supervisor whose suspend command holds the table ("" when
	// an alert does, or the rows are not witnessed yet).
	By string `json:"by,omitempty"`
	// Since is when the table stopped taking cards, by its own clock
	// (the witnessed row's).
	Since *time.Time `json:"since,omitempty"`
}

// AlertGroup is one kind of alert on a table: how many are open, the
// first and the last, and the last one's words.
type AlertGroup struct {
	Kind  string `json:"kind"`
	Words string `json:"words"`
	// Source is where it comes from: the table's own (table, advantage,
	// audit, command, mqtt) or the floor's witness (floor).
	Source string     `json:"source"`
	Count  int        `json:"count"`
	First  *time.Time `json:"first,omitempty"`
	Last   *time.Time `json:"last,omitempty"`
	// Message is the newest alert's, clipped.
	Message string `json:"message,omitempty"`
	// LatestID is the newest alert's id (the table's, or the floor's
	// number).
	LatestID string `json:"latest_id,omitempty"`
	// Alarm marks a tamper, fork or shuffle alert: it stands out on the
	// page until acknowledged. Mark changes with every new alert of the
	// group, so an acknowledgement holds only for what was seen.
	Alarm bool   `json:"alarm,omitempty"`
	Mark  string `json:"mark"`
}

// phaseWords are the table's phases as the pit says them.
var phaseWords = map[coup.Phase]string{
	coup.PhaseNoShoe:        "no shoe",
	coup.PhaseBurn:          "burning cards",
	coup.PhaseBettingOpen:   "betting open",
	coup.PhaseBettingClosed: "no more bets",
	coup.PhaseDealing:       "dealing",
	coup.PhaseResult:        "result",
}

// reasonWords are the public reasons for a suspension (coup.PublicReasons).
var reasonWords = map[string]string{
	coup.ReasonTableCheck:  "a supervisor's check",
	coup.ReasonCardCheck:   "a card check",
	coup.ReasonShoeCheck:   "a shoe check",
	coup.ReasonSystemCheck: "a system check",
}

// kindWords are the alert kinds, the table's and the floor's, in words.
var kindWords = map[string]string{
	string(coup.AlertCardBettingOpen): "card while betting was open",
	string(coup.AlertCardSuspended):   "card drawn while suspended",
	string(coup.AlertCardNoCoup):      "card with no coup",
	string(coup.AlertExtraCard):       "extra card",
	string(coup.AlertUnreadableCard):  "unreadable card",
	string(coup.AlertImpossibleCard):  "impossible card",
	string(coup.AlertSequenceGap):     "shoe sentences missed",
	string(coup.AlertSequenceReused):  "shoe sentence reused",
	string(coup.AlertShoeOffline):     "shoe offline mid-coup",
	string(coup.AlertShoeRestarted):   "shoe restarted mid-coup",
	string(coup.AlertWrongBurn):       "wrong burn",
	string(coup.AlertAuditFailed):     "audit trail not written",
	string(coup.AlertTrailTampered):   "trail tampered with",
	string(coup.AlertShuffleSuspect):  "shoe not shuffled?",
	string(coup.AlertCoupIncomplete):  "coup left incomplete",
	string(coup.AlertShoeProtocol):    "shoe protocol unknown",
	string(coup.AlertSelfCheck):       "self-check failed",
	"advantage":                       "advantage bet",
	"disk_low":                        "disk low",
	"archive_failed":                  "archive failed",
	"command_rejected":                "command refused",
	"command_refusals":                "commands refused",
	"keyring_refused":                 "keyring refused",
	"oversized_dropped":               "message too big, dropped",
	string(AlertBrokenLink):           "tamper: broken chain",
	string(AlertFork):                 "tamper: fork",
	string(AlertCheckpointClash):      "tamper: checkpoint conflict",
	string(AlertCheckpointBack):       "tamper: checkpoint went back",
	string(AlertUnregistered):         "unregistered table",
	string(AlertQuarantined):          "unsigned messages quarantined",
	string(AlertGap):                  "rows missing (resync asked)",
	string(AlertSilent):               "silent",
	string(AlertStreamLost):           "the floor's stream lost",
	string(AlertWitnessStalled):       "witnesses stalled",
}

// words is a raw name (a kind, a phase) as the pit reads it: its known
// words, else the name with spaces.
func words(m map[string]string, name string) string {
	if w, ok := m[name]; ok {
		return w
	}
	return clip(strings.ReplaceAll(name, "_", " "), maxName)
}

// alarmKind reports whether an alert kind stands out until acknowledged:
// the trail tampered with (the floor's tamper kinds, the table's own
// finding), a fork, a shoe not shuffled.
func alarmKind(source, kind string, tamper bool) bool {
	switch kind {
	case string(coup.AlertTrailTampered), string(coup.AlertShuffleSuspect), string(coup.AlertSelfCheck):
		return true
	}
	return source == "floor" && tamper
}

// clip cuts s to at most n bytes on a rune boundary, with an ellipsis.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-len("…")]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// tableRaw is what the floor view holds of a table: the raw messages it
// summarises into a TableView.
type tableRaw struct {
	status  *mqttpub.Status
	active  []mqttpub.Alert
	byKind  map[string]int // the table's count of its active alerts by kind, when it summarised them
	seen    map[string]time.Time
	floor   map[int64]Alert // the floor's open alerts
	line    viewLine
	hold    *suspensionRows
	holdMax int64 // MaxSeq when hold was read
	// sent is the summary as last sent (without its time), view the same
	// with it.
	sent  []byte
	view  TableView
	entry []byte // view encoded, as sent
}

func newTableRaw() *tableRaw {
	return &tableRaw{seen: map[string]time.Time{}, floor: map[int64]Alert{}}
}

// summary is r as the floor view shows it at now.
func (r *tableRaw) summary(id, pitView string) TableView {
	tv := TableView{Table: id, PitView: pitView, Witnessed: r.line.contig, MaxSeq: r.line.max,
		CheckpointAt: r.line.cp, LastSeen: r.line.seen, RateMinutes: int(RateWindow / time.Minute),
		CoupsPerHour: coupsPerHour(r.line.coups, RateWindow)}
	tv.Alerts, tv.MoreKinds = r.groups()
	tv.State, tv.Level = "not heard from", "off"
	if st := r.status; st != nil {
		tv.Shoe, tv.Coup, tv.Dealer = st.Shoe, st.Coup, clip(st.Dealer, maxName)
		switch {
		case st.State == "offline":
			tv.State = "offline"
		case st.Suspended:
			tv.State, tv.Level = "suspended", "warn"
			tv.Suspension = r.suspension()
		default:
			tv.State, tv.Level = words(phaseWordsByName, string(st.Phase)), "ok"
			if st.State == "replay" {
				tv.State = "replaying its trail"
			}
		}
		if st.Audit == "failing" {
			tv.State, tv.Level = "audit trail failing", "warn"
		}
	}
	for _, g := range tv.Alerts {
		switch {
		case g.Alarm:
			tv.Level = "alarm"
		case g.Kind == string(AlertSilent) && tv.Level != "alarm":
			tv.State, tv.Level = "silent", "warn"
		case g.Source != mqttpub.SourceAdvantage && tv.Level == "ok":
			tv.Level = "warn"
		}
	}
	return tv
}

var phaseWordsByName = func() map[string]string {
	m := map[string]string{}
	for p, w := range phaseWords {
		m[string(p)] = w
	}
	return m
}()

// suspension is why the table is suspended: the public reason from its
// status, the rest from the witnessed rows when they are in.
func (r *tableRaw) suspension() *Suspension {
	s := &Suspension{Why: words(reasonWords, r.status.SuspendReason)}
	if r.status.SuspendReason == "" {
		s.Why = "suspended"
	}
	if h := r.hold; h != nil {
		s.Note, s.By = clip(h.note, maxWords), clip(h.by, maxName)
		if !h.since.IsZero() {
			t := h.since
			s.Since = &t
		}
	}
	return s
}

// coupsPerHour is coups over window, per hour.
func coupsPerHour(coups int64, window time.Duration) float64 {
	if window <= 0 {
		return 0
	}
	r := float64(coups) * float64(time.Hour) / float64(window)
	return float64(int64(r*10+0.5)) / 10
}

// groups are r's alerts by kind, at most maxGroups, and how many kinds
// were left out.
func (r *tableRaw) groups() ([]AlertGroup, int) {
	type key struct{ source, kind string }
	by := map[key]*AlertGroup{}
	newest := map[key]time.Time{}
	add := func(source, kind, msg, id string, at time.Time, tamper bool) *AlertGroup {
		k := key{source, kind}
		g := by[k]
		if g == nil {
			g = &AlertGroup{Kind: clip(kind, maxName), Words: words(kindWords, kind), Source: source, Alarm: alarmKind(source, kind, tamper)}
			by[k] = g
		}
		g.Count++
		if !at.IsZero() {
			if g.First == nil || at.Before(*g.First) {
				t := at
				g.First = &t
			}
			if g.Last == nil || !at.Before(*g.Last) {
				t := at
				g.Last = &t
			}
		}
		if n, ok := newest[k]; !ok || !at.Before(n) {
			newest[k] = at
			g.Message, g.LatestID = clip(msg, maxWords), clip(id, maxName)
		}
		return g
	}
	for _, a := range r.active {
		at := a.At
		if at.IsZero() {
			at = r.seen[a.ID] // the table's list gives no time: when the floor first saw it
		}
		source := a.Source
		if source == "" {
			source = mqttpub.SourceTable
		}
		add(source, a.Kind, a.Message, a.ID, at.UTC(), false)
	}
	// The table listed only its newest: count the rest of each kind,
	// and the kinds it left out.
	for kind, n := range r.byKind {
		var listed *AlertGroup
		for k, g := range by {
			if k.kind == kind {
				listed = g
			}
		}
		if listed == nil {
			listed = add(mqttpub.SourceTable, kind, "", "", time.Time{}, false)
		}
		listed.Count = max(listed.Count, n)
	}
	for _, a := range r.floor {
		add("floor", string(a.Kind), a.Message, fmt.Sprint(a.ID), a.At.UTC(), a.Tamper)
	}
	out := make([]AlertGroup, 0, len(by))
	for _, g := range by {
		last := ""
		if g.Last != nil {
			last = g.Last.Format(time.RFC3339Nano)
		}
		g.Mark = fmt.Sprintf("%s/%s/%s/%d/%s", g.Source, g.Kind, last, g.Count, g.LatestID)
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b AlertGroup) int {
		if a.Alarm != b.Alarm {
			if a.Alarm {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(timeOf(b.Last), timeOf(a.Last)); c != 0 {
			return c
		}
		return cmp.Compare(a.Source+a.Kind, b.Source+b.Kind)
	})
	if len(out) > maxGroups {
		return out[:maxGroups], len(out) - maxGroups
	}
	return out, 0
}

func timeOf(t *time.Time) int64 {
	if t == nil {
		return 0
	}
	return t.UnixNano()
}

// takeActive takes a table's pit/alerts/active at now: the list, and the
// time the floor first saw each alert (the list gives none).
func (r *tableRaw) takeActive(a mqttpub.ActiveAlerts, now time.Time) {
	r.active, r.byKind = a.Alerts, a.ByKind
	if r.active == nil {
		r.active = []mqttpub.Alert{}
	}
	ids := map[string]bool{}
	for _, x := range r.active {
		ids[x.ID] = true
		if _, ok := r.seen[x.ID]; !ok && len(r.seen) < maxTableSeen {
			r.seen[x.ID] = now.UTC()
		}
	}
	for id := range r.seen {
		if !ids[id] {
			delete(r.seen, id)
		}
	}
}
