// Package shoeread turns the bytes a dealing shoe sends into shoe events.
//
// Each shoe protocol is a Driver behind one interface: bytes in, events out
// (card drawn or unreadable, cut card, button, status, heartbeat, protocol
// error). Drivers never block, never panic on hostile input and keep a
// bounded amount of unfinished input; every byte run they reject is counted
// and reported as a protocol-error event. New makes a driver from its config
// name: "v1", tablectl's own protocol (docs/shoe-protocol.md), or "beetek".
//
// A Reader puts a Sequencer behind a driver, so that sentences lost between
// the shoe and the controller show up as gap events.
package shoeread

import (
	"encoding/json"
	"fmt"

	"github.com/tablectl/tablectl/coup"
)

// Kind is what a shoe event says.
type Kind uint8

// The kinds of shoe event.
const (
	KindCard          Kind = iota + 1 // a card left the shoe (Card, or Unreadable)
	KindCutCard                       // the cut card came out
	KindButton                        // a dealer button was pressed (Button)
	KindStatus                        // a status report (Status, Text)
	KindHeartbeat                     // the shoe is alive
	KindHello                         // the shoe powered up or was loaded: its sequence restarts
	KindProtocolError                 // bytes were rejected (Err, Rejected)
	KindGap                           // sequence numbers were skipped (GapFrom..GapTo missing)
)

func (k Kind) String() string {
	switch k {
	case KindCard:
		return "card"
	case KindCutCard:
		return "cut_card"
	case KindButton:
		return "button"
	case KindStatus:
		return "status"
	case KindHeartbeat:
		return "heartbeat"
	case KindHello:
		return "hello"
	case KindProtocolError:
		return "protocol_error"
	case KindGap:
		return "gap"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// MarshalText writes the kind's name.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Button is a dealer button on the shoe.
type Button string

// The dealer buttons every driver maps to.
const (
	ButtonNewShoe    Button = "new_shoe"     // a freshly shuffled shoe is loaded
	ButtonBurnDone   Button = "burn_done"    // the burn is complete
	ButtonNoMoreBets Button = "no_more_bets" // betting closes
	ButtonReveal     Button = "reveal"       // turn the face-down cards
)

// Event is one thing the shoe said.
type Event struct {
	Kind Kind `json:"kind"`
	// Seq is the shoe's own sequence number; 0 when the protocol has none.
	Seq uint32 `json:"seq,omitempty"`
	// Card is the card drawn (KindCard, unless Unreadable).
	Card       coup.Card `json:"-"`
	Unreadable bool      `json:"unreadable,omitempty"`
	// Burn marks a card the shoe itself reports as burned (Bee-Tek's
	// "Manual Burn Cards").
	Burn   bool   `json:"burn,omitempty"`
	Button Button `json:"button,omitempty"`
	// Status is a short status code (KindStatus); Text is the shoe's words.
	Status string `json:"status,omitempty"`
	Text   string `json:"text,omitempty"`
	// Err says why bytes were rejected (KindProtocolError); Rejected counts them.
	Err      error `json:"-"`
	Rejected int   `json:"rejected,omitempty"`
	// GapFrom and GapTo bound the missing sequence numbers (KindGap).
	GapFrom uint32 `json:"gap_from,omitempty"`
	GapTo   uint32 `json:"gap_to,omitempty"`
	// Raw is the sentence as received, for the audit trail (bounded).
	Raw string `json:"raw,omitempty"`
}

// MarshalJSON writes the event with its card in notation ("card":"KH") and
// its error as text ("err":"..."), which the plain struct tags leave out
// because a zero Card and an error value have no JSON form of their own.
func (e Event) MarshalJSON() ([]byte, error) {
	type plain Event // no methods: no recursion
	var card, errText string
	if e.Kind == KindCard && !e.Unreadable && e.Card.Valid() {
		card = e.Card.String()
	}
	if e.Err != nil {
		errText = e.Err.Error()
	}
	return json.Marshal(struct {
		plain
		Card string `json:"card,omitempty"`
		Err  string `json:"err,omitempty"`
	}{plain(e), card, errText})
}

// Guarantees are what a protocol promises, so the controller can say how far
// it trusts the link.
type Guarantees struct {
	Sequenced   bool `json:"sequenced"`   // every sentence numbered: gaps are detectable
	Checksummed bool `json:"checksummed"` // line noise cannot forge a sentence
	Heartbeat   bool `json:"heartbeat"`   // silence means trouble, not an idle dealer
}

// Stats count what a driver has read and rejected.
type Stats struct {
	Bytes         uint64 `json:"bytes"`
	Sentences     uint64 `json:"sentences"`
	RejectedRuns  uint64 `json:"rejected_runs"`
	RejectedBytes uint64 `json:"rejected_bytes"`
}

// Driver decodes one shoe protocol.
type Driver interface {
	// Name is the protocol's config name ("v1", "beetek").
	Name() string
	// Guarantees says what the protocol promises.
	Guarantees() Guarantees
	// Decode consumes bytes and returns the events they complete, in order.
	// It never blocks, never panics and keeps at most a bounded tail of
	// unfinished input between calls.
	Decode(p []byte) []Event
	// Stats counts what has been read and rejected so far.
	Stats() Stats
}
