package mqttpub

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// Status is the status payload (retained). The broker publishes
// {"state":"offline","table":...} in its place when the controller's
// connection dies (the last will).
type Status struct {
	// State is "online", "offline", or "replay" on a republished trail.
	State string     `json:"state"`
	Table string     `json:"table"`
	Phase coup.Phase `json:"phase,omitempty"`
	Shoe  int        `json:"shoe,omitempty"`
	Coup  int        `json:"coup,omitempty"`
	// Suspended is true while the table takes no cards; SuspendReason is
	// what the public may read of why: one of coup.PublicReasons, never a
	// supervisor's note or an alert's message.
	Suspended     bool   `json:"suspended"`
	SuspendReason string `json:"suspend_reason,omitempty"`
	ShoeDriver    string `json:"shoe_driver,omitempty"`
	ShoeLink      string `json:"shoe_link,omitempty"`
	// Audit is "ok", or "failing" while the trail cannot be written or
	// holds rows the controller did not write (which of the two is on
	// pit/alerts: status is public).
	Audit string `json:"audit,omitempty"`
	// Dealer is the dealer on duty (as on public/coup), "" when none is
	// signed in: the floor view shows it.
	Dealer string `json:"dealer,omitempty"`
}

// Event is a pit/events payload: one audit row.
type Event struct {
	Seq      int64           `json:"seq"`
	At       time.Time       `json:"at"`
	Kind     string          `json:"kind"`
	Shoe     int64           `json:"shoe"`
	Coup     int64           `json:"coup"`
	Body     json.RawMessage `json:"body"`
	PrevHash audit.Hash      `json:"prev_hash"`
	Hash     audit.Hash      `json:"hash"`
}

// MarshalEvent is the pit/events payload's bytes: the body exactly as
// stored (no HTML escaping), the time in the stored form.
func MarshalEvent(ev Event) ([]byte, error) {
	if b, ok := appendEvent(ev); ok {
		return b, nil
	}
	return marshalEventJSON(ev)
}

// marshalEventJSON is MarshalEvent through encoding/json: the reference, and
// the way for what appendEvent leaves to it.
func marshalEventJSON(ev Event) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// EventOf is the pit/events payload of a row.
func EventOf(r audit.Record) Event {
	return Event{Seq: r.Seq, At: r.At.UTC(), Kind: r.Kind, Shoe: r.Shoe, Coup: r.Coup, Body: r.Body, PrevHash: r.PrevHash, Hash: r.Hash}
}

// PublicShoe is the public/shoe payload.
type PublicShoe struct {
	Shoe           int        `json:"shoe"`
	Coup           int        `json:"coup"`
	Phase          coup.Phase `json:"phase"`
	CardsDealt     int        `json:"cards_dealt"`
	CardsRemaining int        `json:"cards_remaining"`
	CutCardSeen    bool       `json:"cut_card_seen"`
	LastCoup       int        `json:"last_coup,omitempty"`
}

// Alert states on pit/alerts.
const (
	AlertRaised   = "raised"
	AlertResolved = "resolved"
	// AlertNotice is a one-off that nothing resolves (a refused command).
	AlertNotice = "notice"
)

// Alert sources.
const (
	SourceTable     = "table"     // a misdeal or fault: the table is suspended
	SourceCommand   = "command"   // a command refused before the table saw it
	SourceAdvantage = "advantage" // a bet turned in the player's favour
	SourceAudit     = "audit"     // the trail cannot be written
)

// Alert is a pit/alerts payload, and an entry of pit/alerts/active.
type Alert struct {
	State  string `json:"state"`
	ID     string `json:"id"`
	Source string `json:"source"`
	Kind   string `json:"kind"`
	// Suspends is true for alerts that hold the table suspended.
	Suspends bool   `json:"suspends"`
	Shoe     int    `json:"shoe,omitempty"`
	Coup     int    `json:"coup,omitempty"`
	Message  string `json:"message"`
	// Needs says what clears a table alert (void, card, link, resume).
	Needs string `json:"needs,omitempty"`
	// By is who resolved it, or who sent a refused command.
	By string `json:"by,omitempty"`
	// Seq is the audit row that raised or resolved it; 0 for alerts no row
	// records (advantage, audit failure).
	Seq int64     `json:"seq,omitempty"`
	At  time.Time `json:"at,omitzero"`
	// Advantage alerts: the bet and its EV per unit staked.
	Bet coup.Bet `json:"bet,omitempty"`
	EV  float64  `json:"ev,omitempty"`
	// Command alerts: the command's id and the refusal code.
	Command string `json:"command,omitempty"`
	Code    string `json:"code,omitempty"`
}

// ActiveAlerts is the pit/alerts/active payload. Past MaxActiveAlerts it
// lists the newest; Omitted says how many more are active and ByKind
// counts every active alert by kind (both absent when all are listed).
type ActiveAlerts struct {
	Alerts  []Alert        `json:"alerts"`
	Omitted int            `json:"omitted,omitempty"`
	ByKind  map[string]int `json:"by_kind,omitempty"`
}

// PitShoe is the pit/shoe payload: the remaining shoe and the exact odds of
// every bet the profile offers, for the next coup.
type PitShoe struct {
	// Seq is the row the analysis follows.
	Seq            int64          `json:"seq"`
	Shoe           int            `json:"shoe"`
	Coup           int            `json:"coup"`
	Phase          coup.Phase     `json:"phase"`
	Decks          int            `json:"decks"`
	CardsRemaining int            `json:"cards_remaining"`
	Ranks          map[string]int `json:"ranks"`
	Cards          map[string]int `json:"cards"`
	Bets           []BetEV        `json:"bets"`
	// Advantage lists the bets whose EV is positive.
	Advantage []coup.Bet `json:"advantage"`
	// Note says why there are no bets (no shoe, too few cards).
	Note string `json:"note,omitempty"`
}

// BetEV is one bet's exact odds in pit/shoe.
type BetEV struct {
	Bet   coup.Bet `json:"bet"`
	PWin  float64  `json:"p_win"`
	PPush float64  `json:"p_push"`
	// EV is per unit staked; omitted for a bet whose pay table is not
	// configured (Priced false).
	EV        *float64 `json:"ev,omitempty"`
	Priced    bool     `json:"priced"`
	Advantage bool     `json:"advantage"`
}

// appendEvent writes ev field by field, byte for byte as marshalEventJSON
// would (a payload for every row is the publisher's largest piece of
// encoding), when that is plain: the time in UTC with a four-digit year, a
// kind of printable ASCII with nothing to escape. It compacts and checks
// the body as encoding/json does. Anything else it leaves (ok false).
func appendEvent(ev Event) (b []byte, ok bool) {
	if y := ev.At.Year(); y < 0 || y > 9999 || ev.At.Location() != time.UTC {
		return nil, false
	}
	for i := 0; i < len(ev.Kind); i++ {
		if c := ev.Kind[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return nil, false
		}
	}
	buf := bytes.NewBuffer(make([]byte, 0, 256+len(ev.Body)))
	b = buf.AvailableBuffer()
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, ev.Seq, 10)
	b = append(b, `,"at":"`...)
	b = ev.At.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","kind":"`...)
	b = append(b, ev.Kind...)
	b = append(b, `","shoe":`...)
	b = strconv.AppendInt(b, ev.Shoe, 10)
	b = append(b, `,"coup":`...)
	b = strconv.AppendInt(b, ev.Coup, 10)
	b = append(b, `,"body":`...)
	buf.Write(b)
	if ev.Body == nil {
		buf.WriteString("null")
	} else if err := json.Compact(buf, ev.Body); err != nil {
		return nil, false
	}
	b = buf.AvailableBuffer()
	b = append(b, `,"prev_hash":"`...)
	b = hex.AppendEncode(b, ev.PrevHash[:])
	b = append(b, `","hash":"`...)
	b = hex.AppendEncode(b, ev.Hash[:])
	b = append(b, `"}`...)
	buf.Write(b)
	return buf.Bytes(), true
}
