package coup

import (
	"fmt"
	"time"
)

// InputKind names what reached the table: a shoe event, a supervisor or game
// server command, a timer tick. Inputs are recorded in the audit trail; the
// table's state is a pure function of the inputs applied to it in order.
type InputKind string

// The inputs the table takes.
const (
	InCard   InputKind = "in.card"   // a card left the shoe
	InCut    InputKind = "in.cut"    // the cut card came out
	InButton InputKind = "in.button" // a dealer button on the shoe
	InStatus InputKind = "in.status" // a shoe status report
	InHello  InputKind = "in.hello"  // the shoe powered up or was reloaded
	InGap    InputKind = "in.gap"    // shoe sequence numbers were skipped
	InLink   InputKind = "in.link"   // the shoe link changed state
	InTick   InputKind = "in.tick"   // time passed a deadline the table set
	InCmd    InputKind = "in.cmd"    // a command (supervisor or game server)
	// InAuditFailed records, once the trail can be written again, that it
	// could not be for a while: inputs were lost (GapFrom..GapTo are the
	// shoe sentences among them, when known).
	InAuditFailed InputKind = "in.audit_failed"
	// InRejected records what the shoe sent that its driver rejected: one
	// sentence with its bytes, or a count of many (a flood of noise is
	// summarised, not recorded byte for byte).
	InRejected InputKind = "in.rejected"
	// InSelfCheck is the result of the controller's check of its own
	// program and configuration against the signed manifest (at start and
	// periodically): a failed check suspends the table until one passes.
	InSelfCheck InputKind = "in.self_check"
)

// IsInput reports whether an audit kind is an input (as opposed to an event
// the table derived from one).
func IsInput(kind string) bool {
	switch InputKind(kind) {
	case InCard, InCut, InButton, InStatus, InHello, InGap, InLink, InTick, InCmd, InAuditFailed, InRejected, InSelfCheck:
		return true
	}
	return false
}

// Dealer buttons, as the table knows them (shoe drivers map theirs to these).
const (
	ButtonNewShoe    = "new_shoe"
	ButtonBurnDone   = "burn_done"
	ButtonNoMoreBets = "no_more_bets"
	ButtonReveal     = "reveal"
)

// Link states of the shoe's serial link.
const (
	LinkConnected    = "connected"
	LinkDisconnected = "disconnected"
	LinkSilent       = "silent"
)

// Input is one thing that reached the table. Only the fields of its Kind
// are set.
type Input struct {
	Kind InputKind `json:"kind"`
	// At is when the controller received it; the table reads no clock.
	At time.Time `json:"at"`
	// ShoeSeq is the shoe's own sequence number, 0 when the protocol has none.
	ShoeSeq uint32 `json:"shoe_seq,omitempty"`

	Card       *Card  `json:"card,omitempty"`       // InCard, unless Unreadable
	Unreadable bool   `json:"unreadable,omitempty"` // InCard: the shoe could not read it
	Burn       bool   `json:"burn,omitempty"`       // InCard: the shoe reports it burned (Bee-Tek)
	Button     string `json:"button,omitempty"`     // InButton
	Status     string `json:"status,omitempty"`     // InStatus code
	Text       string `json:"text,omitempty"`       // InStatus, InHello: the shoe's words
	GapFrom    uint32 `json:"gap_from,omitempty"`   // InGap: first missing number
	GapTo      uint32 `json:"gap_to,omitempty"`     // InGap: last missing number
	Link       string `json:"link,omitempty"`       // InLink: connected, disconnected, silent
	Reason     string `json:"reason,omitempty"`     // InLink: why

	Command *Command `json:"command,omitempty"` // InCmd

	Rejected *Rejected `json:"rejected,omitempty"` // InRejected

	Check *SelfCheck `json:"check,omitempty"` // InSelfCheck
}

// SelfCheck is one check of the controller's own program and
// configuration against the manifest signed at build time.
type SelfCheck struct {
	// Result is SelfCheckOK, SelfCheckUnsigned or SelfCheckFailed.
	Result string `json:"result"`
	// Start marks the start-up check (the others are periodic).
	Start bool `json:"start,omitempty"`
	// Detail says what differed or could not be checked, for the supervisor.
	Detail string `json:"detail,omitempty"`
	// Manifest is the SHA-256 of the manifest file, Key the id of the key
	// that signed it (both hex; empty when there is none).
	Manifest string `json:"manifest,omitempty"`
	Key      string `json:"key,omitempty"`
	// Files are the hashes found, for a test lab to compare with the
	// certified build's.
	Files []FileHash `json:"files,omitempty"`
}

// FileHash is the SHA-256 of one file a self-check hashed.
type FileHash struct {
	// Role is "executable", "config" or "file".
	Role   string `json:"role"`
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// Self-check results.
const (
	// SelfCheckOK: every file matches the signed manifest.
	SelfCheckOK = "ok"
	// SelfCheckUnsigned: a development build with no manifest, allowed to
	// deal because the configuration does not require one.
	SelfCheckUnsigned = "unsigned"
	// SelfCheckFailed: a file differs from the manifest, or the manifest
	// is missing (when required), unreadable or not validly signed.
	SelfCheckFailed = "failed"
)

// Rejected is what a shoe driver rejected. One rejected sentence (Count
// 1) carries its reason and bytes; a summary (Count > 1) the rejections
// beyond those recorded one by one, by reason, since Since.
type Rejected struct {
	// Reason is the driver's reason ("checksum", "version", ...), empty
	// for a summary; Raw the bytes, escaped and bounded.
	Reason string `json:"reason,omitempty"`
	Raw    string `json:"raw,omitempty"`
	// Bytes is how many bytes were rejected in all.
	Bytes   int            `json:"bytes"`
	Count   int            `json:"count"`
	Reasons map[string]int `json:"reasons,omitempty"`
	Since   time.Time      `json:"since,omitzero"`
}

// ReasonVersion is the rejection of a HELO announcing a protocol version
// the driver does not speak.
const ReasonVersion = "version"

// ReasonSeqReused is the rejection of a shoe sentence that carries the
// sequence number of the sentence before it with other content (the
// reader delivers it all the same: a card it names may have left the
// shoe).
const ReasonSeqReused = "reused"

// Command actions.
const (
	ActionVoid       = "void"
	ActionSuspend    = "suspend"
	ActionResume     = "resume"
	ActionCard       = "card"
	ActionShoeStart  = "shoe-start"
	ActionShoeEnd    = "shoe-end"
	ActionBetsClosed = "bets-closed"
	// ActionDealerIn signs a dealer in at the table (Command.Dealer); the
	// dealer on duty before is signed out. ActionDealerOut signs the dealer
	// on duty out. Neither is taken while a coup is being dealt.
	ActionDealerIn  = "dealer-in"
	ActionDealerOut = "dealer-out"
)

// Command is a supervisor's or game server's instruction, already
// authenticated by the caller (signatures are checked outside coup).
type Command struct {
	ID     string `json:"id"`
	Action string `json:"action"`
	// By is who signed it.
	By string `json:"by,omitempty"`
	// Coup names the coup a void or bets-closed is for; 0 is the coup in
	// progress.
	Coup int `json:"coup,omitempty"`
	// Card is the card a manual entry puts in place of an unreadable one.
	Card *Card `json:"card,omitempty"`
	// Reason is the supervisor's words, kept in the trail.
	Reason string `json:"reason,omitempty"`
	// Dealer is the dealer a dealer-in signs in.
	Dealer string `json:"dealer,omitempty"`
	// Signed is the exact bytes the key signed, Sig the signature (standard
	// base64) and KeyID the signing key's id. The table ignores them; they
	// are kept so the trail's record of a command can be re-verified
	// against the keyring long after (a row forged into the trail cannot
	// carry a signature that verifies).
	Signed string `json:"signed,omitempty"`
	Sig    string `json:"sig,omitempty"`
	KeyID  string `json:"key_id,omitempty"`
	// Key is the keyring's label of the signing key, when the supervisor
	// holds more than one (the signed keyring names each); the table
	// ignores it.
	Key string `json:"key,omitempty"`
}

func (in Input) String() string {
	switch in.Kind {
	case InCard:
		if in.Unreadable || in.Card == nil {
			return "card ??"
		}
		return "card " + in.Card.String()
	case InButton:
		return "button " + in.Button
	case InRejected:
		if in.Rejected != nil {
			return fmt.Sprintf("rejected %s x%d", in.Rejected.Reason, in.Rejected.Count)
		}
	case InCmd:
		if in.Command != nil {
			return "command " + in.Command.Action
		}
	case InGap:
		return fmt.Sprintf("gap %d-%d", in.GapFrom, in.GapTo)
	case InLink:
		return "link " + in.Link
	case InSelfCheck:
		if in.Check != nil {
			return "self-check " + in.Check.Result
		}
	}
	return string(in.Kind)
}
