package mqttpub

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/signedcmd"
)

// roadKeeper keeps public/roads. Apply sees every row the publisher applies, in
// order, with the table as that row's commit left it, and says whether the
// roads changed; Payload encodes them as they are now. The two are apart
// because a publisher that has fallen behind applies many rows between two
// publishes of the retained topics, and encoding a whole shoe's roads for
// each coup it will not publish is waste.
type roadKeeper interface {
	Apply(rec audit.Record, t *coup.Table) (changed bool)
	Seed(t *coup.Table)
	Payload() ([]byte, error)
}

// engine turns rows into messages: it is the part of publishing that both
// the live Publisher and Republish share. It holds a copy of the table,
// rebuilt row by row with audit.Replayer, and the last payload of every
// retained topic, so a retained topic is only published when it changes.
type engine struct {
	topics Topics
	table  string
	driver string
	state  string // "online" or "replay"
	roads  roadKeeper
	log    *slog.Logger

	rp  *audit.Replayer
	seq int64 // the last row applied
	at  time.Time

	last        map[string][]byte // retained payloads as last published
	roadsJSON   []byte
	roadsDirty  bool // the roads changed since roadsJSON was encoded
	checkpoint  []byte
	shoeDue     bool
	pricing     *shoeState         // the newest end of a coup not yet priced
	shoe        PitShoe            // the last analysis
	shoeJSON    []byte             // shoe encoded, nil until it is again after an analysis
	shoeAlerts  []Message          // advantage alerts raised or resolved by it, not yet published
	quiet       bool               // rebuilding: no analysis until publishing starts
	advantage   map[coup.Bet]Alert // the bets now in the player's favour
	auditFail   string             // why the trail cannot be written, "" when it can
	auditSince  int64              // the head when it failed
	auditAt     time.Time          // when it failed
	auditReason string             // the last failure, kept for its resolution
	tampered    bool               // the failure is rows the controller did not write
	auditRaised bool
}

func newEngine(topics Topics, table, driver, state string, cfg coup.TableConfig, log *slog.Logger) (*engine, error) {
	rp, err := audit.NewReplayer(cfg, audit.ReplayVisitor{})
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return &engine{
		topics: topics, table: table, driver: driver, state: state, roads: newRoads(log), log: log,
		rp: rp, last: map[string][]byte{}, roadsJSON: []byte("{}"), shoeDue: true,
		advantage: map[coup.Bet]Alert{},
	}, nil
}

// restore starts the engine at a snapshot row of the trail instead of at
// row 1: the table it holds, and the roads that table's shoe has made.
func (e *engine) restore(snap audit.Record) error {
	rp, err := audit.NewReplayerFrom(snap, audit.ReplayVisitor{})
	if err != nil {
		return err
	}
	e.rp, e.seq, e.at = rp, snap.Seq, snap.At
	e.shoeDue = true
	if e.roads != nil {
		e.roads.Seed(rp.Table())
		e.roadsDirty = true
	}
	return nil
}

// apply moves the table copy on by one row. Rows must come in order.
func (e *engine) apply(rec audit.Record) {
	if e.shoeDue && !e.quiet && (coup.IsInput(rec.Kind) || strings.HasPrefix(rec.Kind, "ctl.")) {
		// The commit that made the analysis due is complete: keep the
		// shoe as it left it, to price when the retained topics go out.
		e.capture()
	}
	e.rp.Row(rec)
	e.seq, e.at = rec.Seq, rec.At
	switch coup.EventKind(rec.Kind) {
	case coup.EvCoupResult, coup.EvCoupVoided, coup.EvShoeStarted, coup.EvShoeEnded, coup.EvBurnDone:
		e.shoeDue = true
	}
	if rec.Kind == audit.KindConfig {
		e.shoeDue = true
	}
	if e.auditFail != "" && rec.Seq > e.auditSince {
		// The trail took a row: it is writable again. Keep the message for
		// the resolved alert.
		e.auditFail = ""
	}
	if e.roads != nil && e.roads.Apply(rec, e.rp.Table()) {
		e.roadsDirty = true
	}
	if rec.Checkpoint != nil {
		e.setCheckpoint(*rec.Checkpoint)
	}
}

func (e *engine) setCheckpoint(c audit.Checkpoint) {
	b, err := json.Marshal(c)
	if err != nil {
		e.log.Warn("checkpoint does not encode", "seq", c.Seq, "err", err)
		return
	}
	e.checkpoint = b
}

func (e *engine) msg(topic string, qos byte, retained bool, v any) (Message, bool) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only a bug makes a payload unencodable; say so and carry on.
		e.log.Error("payload does not encode", "topic", topic, "err", err)
		return Message{}, false
	}
	return Message{Topic: e.topics.Topic(topic), QoS: qos, Retained: retained, Payload: b}, true
}

// eventMessage is the pit/events message of a row. The body goes out as
// stored, byte for byte ('<', '>' and '&' are not escaped as json.Marshal
// would), so a witness recomputes the row's hash from the payload alone.
func (e *engine) eventMessage(rec audit.Record) Message {
	b, err := MarshalEvent(EventOf(rec))
	if err != nil {
		e.log.Error("payload does not encode", "topic", TopicPitEvents, "err", err)
		return Message{}
	}
	return Message{Topic: e.topics.Topic(TopicPitEvents), QoS: 1, Retained: false, Payload: b}
}

// rowMessages are the messages a row calls for besides its event: the
// alert it raises or resolves, and the reply to the command it records.
// They depend on the row alone, so they can be made again when a row must
// be sent again.
func (e *engine) rowMessages(rec audit.Record) []Message {
	var out []Message
	add := func(m Message, ok bool) {
		if ok {
			out = append(out, m)
		}
	}
	switch rec.Kind {
	case string(coup.EvAlert), string(coup.EvAlertResolved):
		var ev struct {
			Alert *coup.Alert `json:"alert"`
			By    string      `json:"by"`
		}
		if json.Unmarshal(rec.Body, &ev) == nil && ev.Alert != nil {
			a := tableAlert(*ev.Alert, rec)
			if rec.Kind == string(coup.EvAlertResolved) {
				a.State, a.By = AlertResolved, ev.By
			}
			add(e.msg(TopicPitAlerts, 1, false, a))
		}
	case audit.KindRejected:
		var b signedcmd.RejectedBody
		if json.Unmarshal(rec.Body, &b) == nil {
			add(e.msg(TopicPitAlerts, 1, false, Alert{
				State: AlertNotice, ID: fmt.Sprintf("command-%d", rec.Seq), Source: SourceCommand, Kind: "command_rejected",
				Message: fmt.Sprintf("command %s from %q refused: %s: %s", orNone(b.Action), b.Supervisor, b.Code, b.Reason),
				By:      b.Supervisor, Seq: rec.Seq, At: rec.At, Command: b.ID, Code: b.Code,
			}))
		}
	case audit.KindDiskLow, audit.KindDiskOK:
		var b audit.DiskBody
		if json.Unmarshal(rec.Body, &b) == nil {
			a := Alert{State: AlertRaised, ID: "disk", Source: SourceAudit, Kind: "disk_low", Seq: rec.Seq, At: rec.At,
				Message: fmt.Sprintf("%d MiB free under the audit trail, below the floor of %d MiB: about %.0f days of play left; move the trail off the box or make room",
					b.FreeBytes>>20, b.FloorBytes>>20, b.DaysLeft)}
			if rec.Kind == audit.KindDiskOK {
				a.State = AlertResolved
				a.Message = fmt.Sprintf("%d MiB free under the audit trail again (floor %d MiB)", b.FreeBytes>>20, b.FloorBytes>>20)
			}
			add(e.msg(TopicPitAlerts, 1, false, a))
		}
	case audit.KindArchiveFailed:
		var b audit.ArchiveFailedBody
		if json.Unmarshal(rec.Body, &b) == nil {
			add(e.msg(TopicPitAlerts, 1, false, Alert{
				State: AlertNotice, ID: fmt.Sprintf("archive-%d", rec.Seq), Source: SourceAudit, Kind: "archive_failed",
				Message: fmt.Sprintf("sealed audit segment %s not archived (%s): it stays on the box and is tried again every hour; fix the archive before the disk fills", b.Segment, b.Error),
				Seq:     rec.Seq, At: rec.At,
			}))
		}
	case signedcmd.KindKeyringRefused:
		var b signedcmd.KeyringRefusedBody
		if json.Unmarshal(rec.Body, &b) == nil {
			add(e.msg(TopicPitAlerts, 1, false, Alert{
				State: AlertNotice, ID: fmt.Sprintf("keyring-%d", rec.Seq), Source: SourceCommand, Kind: "keyring_refused",
				Message: fmt.Sprintf("supervisors' keyring %s refused (%s): the keys in use stay; a keyring takes effect only signed by the security officer", b.Path, b.Error),
				Seq:     rec.Seq, At: rec.At,
			}))
		}
	case signedcmd.KindRefusals:
		var b signedcmd.RefusalsBody
		if json.Unmarshal(rec.Body, &b) == nil {
			add(e.msg(TopicPitAlerts, 1, false, Alert{
				State: AlertNotice, ID: fmt.Sprintf("command-%d", rec.Seq), Source: SourceCommand, Kind: "command_refusals",
				Message: fmt.Sprintf("%d commands refused without a reply each, from %s to %s: a flood on cmd? (by code: %s)",
					b.Count, b.From.UTC().Format(time.RFC3339), b.To.UTC().Format(time.RFC3339), codeCounts(b.Codes)),
				Seq: rec.Seq, At: rec.At,
			}))
		}
	}
	if r, ok := signedcmd.ReplyFor(rec); ok {
		add(e.msg(TopicCmdReply, 1, false, r))
	}
	return out
}

// codeCounts writes refusal counts by code, in code order.
func codeCounts(m map[string]int64) string {
	var parts []string
	for _, code := range slices.Sorted(mapsKeys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", code, m[code]))
	}
	return strings.Join(parts, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func tableAlert(a coup.Alert, rec audit.Record) Alert {
	return Alert{
		State: AlertRaised, ID: fmt.Sprintf("table-%d", a.ID), Source: SourceTable, Kind: string(a.Kind), Suspends: true,
		Shoe: a.Shoe, Coup: a.Coup, Message: a.Message, Needs: a.Needs, Seq: rec.Seq, At: rec.At,
	}
}

// failing records that the trail cannot be written (since the row head).
func (e *engine) failing(reason string, head int64, at time.Time, tampered bool) {
	if e.auditFail == "" {
		e.auditAt = at.UTC()
	}
	e.auditFail, e.auditSince, e.auditReason = reason, head, reason
	e.tampered = e.tampered || tampered
}

// retainedMessages are the retained topics whose payload changed since they
// were last published (all of them with force, after a reconnect), and the
// alerts that the shoe analysis and the audit state raise or resolve.
func (e *engine) retainedMessages(force bool) []Message {
	return append(e.viewMessages(force), e.shoeMessages()...)
}

// viewMessages are the retained topics of retainedMessages that need no
// pricing: status, the table's views, the roads and the checkpoint.
func (e *engine) viewMessages(force bool) []Message {
	if force {
		clear(e.last)
	}
	t := e.rp.Table()
	pub, pit := t.PublicView(), t.PitView()
	var out []Message
	put := func(topic string, v any) {
		m, ok := e.msg(topic, 1, true, v)
		if ok && !bytes.Equal(e.last[topic], m.Payload) {
			e.last[topic] = m.Payload
			out = append(out, m)
		}
	}
	putRaw := func(topic string, b []byte) {
		if !bytes.Equal(e.last[topic], b) {
			e.last[topic] = b
			out = append(out, Message{Topic: e.topics.Topic(topic), QoS: 1, Retained: true, Payload: b})
		}
	}
	st := Status{State: e.state, Table: e.table, Phase: pub.Phase, Shoe: pub.Shoe, Coup: pub.Coup,
		Suspended: pub.Suspended, SuspendReason: pub.SuspendReason, ShoeDriver: e.driver, ShoeLink: pub.Link, Audit: "ok",
		Dealer: pub.Dealer}
	if e.auditFail != "" {
		// The public reads a reason of the fixed list; what failed is the
		// pit's (pit/alerts).
		// Tampered or failing alike: which it is (rows another program
		// wrote) is for the pit and surveillance, not the public screen.
		st.Audit, st.Suspended, st.SuspendReason = "failing", true, coup.ReasonSystemCheck
	}
	put(TopicStatus, st)
	put(TopicPublicCoup, pub)
	put(TopicPitCoup, pit)
	put(TopicPublicShoe, PublicShoe{Shoe: pub.Shoe, Coup: pub.Coup, Phase: pub.Phase, CardsDealt: pub.CardsDealt,
		CardsRemaining: pub.Remaining, CutCardSeen: pub.CutCardSeen, LastCoup: pub.LastCoup})
	if e.roadsDirty {
		e.roadsDirty = false
		if p, err := e.roads.Payload(); err != nil {
			e.log.Error("roads: snapshot does not encode", "err", err)
		} else if len(p) > 0 {
			e.roadsJSON = p
		}
	}
	putRaw(TopicPublicRoads, e.roadsJSON)
	if e.checkpoint != nil {
		putRaw(TopicPitCheckpoint, e.checkpoint)
	}
	return out
}

// shoeMessages are the rest of retainedMessages, what needs the shoe
// priced: pit/shoe, the alerts its analysis and the audit state raise or
// resolve, and pit/alerts/active. They are apart so that pricing (about a
// millisecond) comes after the table's views are on their way.
func (e *engine) shoeMessages() []Message {
	var out []Message
	putRaw := func(topic string, b []byte) {
		if !bytes.Equal(e.last[topic], b) {
			e.last[topic] = b
			out = append(out, Message{Topic: e.topics.Topic(topic), QoS: 1, Retained: true, Payload: b})
		}
	}
	if e.shoeDue {
		e.capture()
	}
	if e.pricing != nil {
		e.analyseNow()
	}
	out = append(out, e.shoeAlerts...)
	e.shoeAlerts = nil
	if e.shoeJSON == nil {
		// pit/shoe changes once a coup; encoding it after every row cost
		// the publisher more than any other payload.
		if m, ok := e.msg(TopicPitShoe, 1, true, e.shoe); ok {
			e.shoeJSON = m.Payload
		}
	}
	if e.shoeJSON != nil {
		putRaw(TopicPitShoe, e.shoeJSON)
	}
	out = append(out, e.auditAlert()...)
	if m, ok := e.msg(TopicPitAlertsActive, 1, true, e.active(e.rp.Table())); ok {
		putRaw(TopicPitAlertsActive, m.Payload)
	}
	return out
}

// auditAlert raises or resolves the alert for a trail that cannot be
// written. The table records the outage as its own alert once it can.
func (e *engine) auditAlert() []Message {
	switch {
	case e.auditFail != "" && !e.auditRaised:
		e.auditRaised = true
		m, ok := e.msg(TopicPitAlerts, 1, false, e.auditAlertPayload(AlertRaised))
		if ok {
			return []Message{m}
		}
	case e.auditFail == "" && e.auditRaised:
		e.auditRaised = false
		m, ok := e.msg(TopicPitAlerts, 1, false, e.auditAlertPayload(AlertResolved))
		if ok {
			return []Message{m}
		}
	}
	return nil
}

func (e *engine) auditAlertPayload(state string) Alert {
	a := Alert{State: state, ID: "audit", Source: SourceAudit, Kind: string(coup.AlertAuditFailed), Suspends: true,
		Message: "the audit trail cannot be written: " + e.auditReason, At: e.auditAt}
	if e.tampered {
		// Never resolved by this controller: the trail goes to surveillance.
		a.Kind, a.Message = string(coup.AlertTrailTampered), "the audit trail holds rows this controller did not write: "+e.auditReason
	}
	if state == AlertResolved {
		a.Message = "the audit trail is written again after: " + e.auditReason
		a.Seq, a.At = e.seq, e.at
	}
	return a
}

func (e *engine) active(t *coup.Table) ActiveAlerts {
	a := ActiveAlerts{Alerts: []Alert{}}
	for _, al := range t.Alerts() {
		x := tableAlert(al, audit.Record{})
		a.Alerts = append(a.Alerts, x)
	}
	for _, b := range slices.Sorted(mapsKeys(e.advantage)) {
		a.Alerts = append(a.Alerts, e.advantage[b])
	}
	if e.auditRaised {
		a.Alerts = append(a.Alerts, e.auditAlertPayload(AlertRaised))
	}
	return summarise(a)
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// shoeState is what pricing the shoe reads of the table at the end of a
// coup: kept when the coup ends, priced when the retained topics go out.
type shoeState struct {
	seq        int64 // the last row of the commit that ended the coup
	at         time.Time
	shoe, coup int
	phase      coup.Phase
	comp       coup.Shoe
	profile    coup.Profile
}

// capture keeps the table as it stands for pricing. A publisher that is
// behind applies many coups between two publishes of its retained topics:
// only the newest is priced (pit/shoe is the shoe as it stands, and each
// analysis takes about a millisecond, as long as publishing a coup's rows).
func (e *engine) capture() {
	t := e.rp.Table()
	e.pricing = &shoeState{seq: e.seq, at: e.at, shoe: t.ShoeNumber(), coup: t.CoupNumber(), phase: t.Phase(),
		comp: t.Remaining(), profile: t.Config().Profile}
	e.shoeDue = false
}

// pricingDue reports whether shoeMessages would price the shoe.
func (e *engine) pricingDue() bool { return e.shoeDue || e.pricing != nil }

func (e *engine) analyseNow() {
	shoe, alerts := e.analyse(e.pricing)
	e.pricing, e.shoe, e.shoeJSON = nil, shoe, nil
	e.shoeAlerts = append(e.shoeAlerts, alerts...)
}

// analyse prices every bet on the remaining shoe and raises or resolves an
// advantage alert for each bet whose EV crossed zero. Advantage alerts are
// information for the pit: they do not suspend the table.
func (e *engine) analyse(t *shoeState) (PitShoe, []Message) {
	comp := t.comp
	ps := PitShoe{Seq: t.seq, Shoe: t.shoe, Coup: t.coup, Phase: t.phase, Decks: comp.Decks(), CardsRemaining: comp.Remaining(),
		Ranks: map[string]int{}, Cards: map[string]int{}, Bets: []BetEV{}, Advantage: []coup.Bet{}}
	counts := comp.Counts()
	for i, n := range counts {
		c := coup.CardAt(i)
		ps.Cards[c.String()] += int(n)
		ps.Ranks[c.String()[:1]] += int(n)
	}
	positive := map[coup.Bet]BetEV{}
	switch {
	case t.shoe == 0:
		ps.Note = "no shoe yet"
	case t.phase == coup.PhaseNoShoe:
		ps.Note = "the shoe is over"
	default:
		an, err := coup.Analyze(&comp, &t.profile)
		if err != nil {
			ps.Note = err.Error()
			break
		}
		for _, b := range an.Bets {
			x := BetEV{Bet: b.Bet, PWin: b.PWin, PPush: b.PPush, Priced: b.Priced}
			if b.Priced {
				ev := b.EV
				x.EV = &ev
				// A hair above zero from rounding is not an advantage.
				x.Advantage = ev > 1e-12
			}
			if x.Advantage {
				ps.Advantage = append(ps.Advantage, b.Bet)
				positive[b.Bet] = x
			}
			ps.Bets = append(ps.Bets, x)
		}
	}
	var out []Message
	for _, b := range slices.Sorted(mapsKeys(e.advantage)) {
		if _, still := positive[b]; !still {
			a := e.advantage[b]
			a.State, a.Seq, a.At = AlertResolved, t.seq, t.at
			a.Message = fmt.Sprintf("%s is back in the house's favour", b)
			delete(e.advantage, b)
			if m, ok := e.msg(TopicPitAlerts, 1, false, a); ok {
				out = append(out, m)
			}
		}
	}
	for _, b := range slices.Sorted(mapsKeys(positive)) {
		if _, already := e.advantage[b]; already {
			continue
		}
		ev := *positive[b].EV
		a := Alert{State: AlertRaised, ID: fmt.Sprintf("advantage-%d-%s", ps.Shoe, b), Source: SourceAdvantage, Kind: "advantage",
			Shoe: ps.Shoe, Coup: ps.Coup, Bet: b, EV: ev, Seq: t.seq, At: t.at,
			Message: fmt.Sprintf("%s now favours the player: EV %+.2f%% per unit with %d cards left", b, 100*ev, ps.CardsRemaining)}
		e.advantage[b] = a
		if m, ok := e.msg(TopicPitAlerts, 1, false, a); ok {
			out = append(out, m)
		}
	}
	return ps, out
}

// offline is the status payload of the last will and a clean stop.
func offline(table string) []byte {
	b, _ := json.Marshal(Status{State: "offline", Table: table})
	return b
}

// resyncOf reads a resync row.
func resyncOf(rec audit.Record) (signedcmd.AcceptedBody, bool) {
	if rec.Kind != signedcmd.KindAccepted {
		return signedcmd.AcceptedBody{}, false
	}
	var b signedcmd.AcceptedBody
	if json.Unmarshal(rec.Body, &b) != nil || !strings.EqualFold(b.Action, signedcmd.ActionResync) {
		return signedcmd.AcceptedBody{}, false
	}
	return b, true
}
