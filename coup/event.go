package coup

// EventKind names what the table derived from an input. Events are recorded
// in the audit trail right after the input that caused them, and published.
type EventKind string

// The events the table emits.
const (
	EvShoeStarted    EventKind = "shoe_started"      // a new shoe: composition full, burn expected
	EvBurnCard       EventKind = "burn_card"         // a card of the burn (the first is exposed)
	EvBurnDone       EventKind = "burn_done"         // the burn is complete
	EvBettingOpened  EventKind = "betting_opened"    // a coup takes bets
	EvBettingClosed  EventKind = "betting_closed"    // no more bets (button, timer or game server)
	EvCardDealt      EventKind = "card_dealt"        // a card placed by the tableau
	EvCardsRevealed  EventKind = "cards_revealed"    // hidden cards turned for the public
	EvCoupResult     EventKind = "coup_result"       // the coup is complete: result and what each spot pays
	EvCoupVoided     EventKind = "coup_voided"       // a supervisor voided a coup: its bets are returned
	EvCutCard        EventKind = "cut_card"          // the cut card came out; LastCoup is the shoe's last coup
	EvShoeEnded      EventKind = "shoe_ended"        // the shoe is over
	EvAlert          EventKind = "alert"             // a misdeal or fault: the table is suspended
	EvAlertResolved  EventKind = "alert_resolved"    // an alert no longer holds the table
	EvSuspended      EventKind = "suspended"         // the table stopped taking cards
	EvResumed        EventKind = "resumed"           // the table is live again
	EvCommandDone    EventKind = "command_accepted"  // a command was carried out
	EvCommandRefused EventKind = "command_refused"   // a command was refused, with why
	EvIgnored        EventKind = "input_ignored"     // an input that changed nothing, with why
	EvShoeStatus     EventKind = "shoe_status"       // the shoe reported its status or link state
	EvSelfCheck      EventKind = "self_check"        // the controller checked its program and config (Status: the result)
	EvDealerIn       EventKind = "dealer_signed_in"  // a dealer signed in (Dealer)
	EvDealerOut      EventKind = "dealer_signed_out" // the dealer on duty signed out (Dealer)
)

// AlertKind names a misdeal or fault.
type AlertKind string

// The misdeals product.md lists, and the faults that also stop the game.
const (
	AlertCardBettingOpen AlertKind = "card_while_betting_open" // a card before no more bets
	AlertCardSuspended   AlertKind = "card_while_suspended"    // a card while the table was suspended
	AlertCardNoCoup      AlertKind = "card_without_coup"       // a card with no shoe or coup in progress
	AlertExtraCard       AlertKind = "extra_card"              // a card beyond the tableau
	AlertUnreadableCard  AlertKind = "unreadable_card"         // the shoe could not read a card
	AlertImpossibleCard  AlertKind = "impossible_card"         // a card the shoe cannot hold
	AlertSequenceGap     AlertKind = "sequence_gap"            // shoe sentences were missed
	AlertSequenceReused  AlertKind = "sequence_reused"         // a shoe sentence reused the number of the one before with other content
	AlertShoeOffline     AlertKind = "shoe_offline"            // the shoe link dropped mid-coup
	AlertShoeRestarted   AlertKind = "shoe_restarted"          // the shoe rebooted mid-coup
	AlertWrongBurn       AlertKind = "wrong_burn"              // burn done before (or after) the required count
	AlertAuditFailed     AlertKind = "audit_write_failed"      // the trail could not be written
	AlertTrailTampered   AlertKind = "trail_tampered"          // the trail holds rows the controller did not write
	AlertShuffleSuspect  AlertKind = "shuffle_suspect"         // the shoe looks unshuffled or re-used
	AlertCoupIncomplete  AlertKind = "coup_incomplete"         // the dealer moved on while the tableau wanted a card
	AlertShoeProtocol    AlertKind = "shoe_protocol_version"   // the shoe speaks a protocol version the driver does not
	AlertSelfCheck       AlertKind = "self_check_failed"       // the program or config differs from the signed manifest
)

// Alert is one active fault holding the table suspended.
type Alert struct {
	ID   int       `json:"id"`
	Kind AlertKind `json:"kind"`
	Shoe int       `json:"shoe"`
	Coup int       `json:"coup"`
	// Message says what happened, for the supervisor.
	Message string `json:"message"`
	// Needs says what clears it: "void" (the coup in progress must be
	// voided), "card" (a manual card entry, or a void), "link" (the shoe
	// link must come back, then resume) or "resume".
	Needs string `json:"needs"`
	// ShoeSeq is the shoe sentence that raised it, when known.
	ShoeSeq uint32 `json:"shoe_seq,omitempty"`
	// Dealer is the dealer on duty when it was raised, "" when none.
	Dealer string `json:"dealer,omitempty"`
}

// What clears an alert.
const (
	NeedsResume = "resume"
	NeedsVoid   = "void"
	NeedsCard   = "card"
	NeedsLink   = "link"
	// NeedsSelfCheck: only a passing self-check clears it (restart the
	// controller from the certified build); no supervisor can.
	NeedsSelfCheck = "self_check"
)

// DealtCard is one card of a coup as the pit sees it.
type DealtCard struct {
	Position Position `json:"-"`
	// Card is the card; zero while unreadable and not yet entered.
	Card       Card   `json:"card,omitzero"`
	Unreadable bool   `json:"unreadable,omitempty"`
	Impossible bool   `json:"impossible,omitempty"`
	Manual     bool   `json:"manual,omitempty"`
	Hidden     bool   `json:"hidden,omitempty"`
	ShoeSeq    uint32 `json:"shoe_seq,omitempty"`
}

// Event is one thing the table derived. Only the fields of its Kind are set.
type Event struct {
	Kind EventKind `json:"-"`
	Shoe int       `json:"shoe"`
	Coup int       `json:"coup,omitempty"`

	Phase    Phase      `json:"phase,omitempty"`
	Card     *DealtCard `json:"card,omitempty"`
	Position string     `json:"position,omitempty"`
	// Cards are cards revealed, or a voided coup's cards.
	Cards    []Card          `json:"cards,omitempty"`
	Result   *Result         `json:"result,omitempty"`
	Outcomes map[Bet]Outcome `json:"outcomes,omitempty"`
	Alert    *Alert          `json:"alert,omitempty"`
	By       string          `json:"by,omitempty"`
	Command  string          `json:"command,omitempty"`
	Action   string          `json:"action,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	Burn     *BurnState      `json:"burn,omitempty"`
	LastCoup int             `json:"last_coup,omitempty"`
	Status   string          `json:"status,omitempty"`
	// Dealer is the dealer on duty, on the events that are put against a
	// dealer: coup results, voids, alerts, betting opened, shoe start and
	// end, and the sign-ins and outs themselves. "" when none is signed in.
	Dealer string `json:"dealer,omitempty"`
}

// BurnState is the burn in progress or done.
type BurnState struct {
	// First is the exposed first card; its value sets the count.
	First    *Card `json:"first,omitempty"`
	Required int   `json:"required"`
	Burned   int   `json:"burned"`
}
