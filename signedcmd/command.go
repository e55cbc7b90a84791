package signedcmd

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// MaxBytes bounds a command on the wire. A real one is about 300 bytes;
// anything larger is refused unread.
const MaxBytes = 8 << 10

// maxReason bounds the supervisor's words, which go into the trail.
const maxReason = 1024

// SigningDomain opens the signed bytes, so a command signature can never be
// taken for a signature of anything else.
const SigningDomain = "tablectl-command-v1\n"

// ActionResync asks the publisher to send the audit rows from a sequence
// number again; the table itself does not see it.
const ActionResync = "resync"

// Actions are every action a command may carry.
var Actions = []string{
	coup.ActionVoid, coup.ActionSuspend, coup.ActionResume, coup.ActionCard,
	coup.ActionShoeStart, coup.ActionShoeEnd, coup.ActionBetsClosed, ActionResync,
	coup.ActionDealerIn, coup.ActionDealerOut,
}

// Command is one signed command as it travels on MQTT. Arguments that do
// not apply to the action are left out.
type Command struct {
	// Table is the table id the command is for; another table refuses it.
	Table string `json:"table"`
	// ID is unique per command (1 to 64 bytes of A-Z a-z 0-9 . _ : -);
	// the reply echoes it and a second command with the same id is refused.
	ID     string `json:"id"`
	Action string `json:"action"`
	// Supervisor names the keyring entry whose key signed the command.
	Supervisor string `json:"supervisor"`
	// IssuedAt is when it was signed, RFC 3339.
	IssuedAt string `json:"issued_at"`
	// Coup names the coup a void or bets-closed is for (0: in progress).
	Coup int `json:"coup,omitempty"`
	// Card is a manual entry's card, as "KH".
	Card string `json:"card,omitempty"`
	// From is the first audit sequence number a resync sends again.
	From int64 `json:"from,omitempty"`
	// To is the last one, when the asker knows where its hole ends (a
	// witness does); 0 sends up to the head.
	To int64 `json:"to,omitempty"`
	// Reason is the supervisor's words, kept in the trail.
	Reason string `json:"reason,omitempty"`
	// Dealer is the dealer a dealer-in signs in (a badge or staff id).
	Dealer string `json:"dealer,omitempty"`
	// Sig is the Ed25519 signature of SigningBytes, in standard base64.
	Sig string `json:"sig,omitempty"`
}

// fields are the members a command object may have.
var fields = []string{"table", "id", "action", "supervisor", "issued_at", "coup", "card", "from", "to", "reason", "dealer", "sig"}

// SigningBytes are the exact bytes signed: SigningDomain followed by the
// canonical JSON (see docs/audit.md, "Canonical JSON") of the command
// object without its "sig" member. Canonical JSON sorts keys, drops
// whitespace and writes strings with only '"', '\\' and control characters
// escaped, so any JSON library can reproduce it for a command (strings and
// integers only).
func (c Command) SigningBytes() ([]byte, error) {
	c.Sig = ""
	canon, err := audit.CanonicalJSON(c)
	if err != nil {
		return nil, fmt.Errorf("command: %w", err)
	}
	return append([]byte(SigningDomain), canon...), nil
}

// Sign sets c.Sig to key's signature of c's signing bytes.
func (c *Command) Sign(key ed25519.PrivateKey) error {
	if len(key) != ed25519.PrivateKeySize {
		return fmt.Errorf("command: signing key is %d bytes, want an Ed25519 private key", len(key))
	}
	msg, err := c.SigningBytes()
	if err != nil {
		return err
	}
	c.Sig = base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg))
	return nil
}

// Marshal encodes a signed command for the wire (canonical JSON).
func (c Command) Marshal() ([]byte, error) {
	return audit.CanonicalJSON(c)
}

// NewID returns a random command id: 32 hex digits.
func NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on the systems tablectl runs on.
		panic("command: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// FormatTime writes an issue time as commands carry it: RFC 3339, UTC,
// milliseconds.
func FormatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// parsed is a command read from the wire, with the bytes its signature
// must cover.
type parsed struct {
	cmd     Command
	signed  []byte
	sig     []byte
	issued  time.Time
	card    *coup.Card
	refusal *Refusal // set when it cannot be used
}

// parse reads a command strictly. On failure the refusal carries whatever
// identifying fields could be read, so the reply can still echo the id.
func parse(payload []byte) parsed {
	var p parsed
	canon, members, refusal := readObject(payload)
	if refusal != nil {
		p.refusal = refusal
		return p
	}
	p.cmd = identifying(members)
	fail := func(err error) parsed {
		r := refuse(CodeMalformed, "%v", err)
		r.identify(p.cmd)
		p.refusal = r
		return p
	}
	c, err := decodeStrict(canon, members)
	if err != nil {
		return fail(err)
	}
	p.cmd = c
	if err := checkFields(c); err != nil {
		return fail(err)
	}
	if p.issued, err = time.Parse(time.RFC3339Nano, c.IssuedAt); err != nil {
		return fail(fmt.Errorf("issued_at %q: want RFC 3339", clip(c.IssuedAt)))
	}
	if p.sig, err = base64.StdEncoding.Strict().DecodeString(c.Sig); err != nil || len(p.sig) != ed25519.SignatureSize {
		return fail(fmt.Errorf("sig: want %d bytes in standard base64", ed25519.SignatureSize))
	}
	if p.card, err = checkAction(c); err != nil {
		return fail(err)
	}
	if p.signed, err = signedBytes(members); err != nil {
		return fail(err)
	}
	return p
}

// readObject reads the payload as one JSON object, bounded and canonical,
// and its members; or the refusal that says why it is not one.
func readObject(payload []byte) (canon []byte, members map[string]json.RawMessage, _ *Refusal) {
	if len(payload) > MaxBytes {
		return nil, nil, refuse(CodeOversized, "the command is %d bytes or more; the limit is %d", len(payload), MaxBytes)
	}
	if !utf8.Valid(payload) {
		return nil, nil, refuse(CodeMalformed, "the command is not valid UTF-8")
	}
	canon, err := audit.Canonicalize(payload)
	if err != nil {
		return nil, nil, refuse(CodeMalformed, "the command is not one JSON object: %v", err)
	}
	if err := json.Unmarshal(canon, &members); err != nil || members == nil {
		return nil, nil, refuse(CodeMalformed, "the command is not a JSON object")
	}
	return canon, members, nil
}

// identifying reads what identifies the command first, for a refusal:
// whichever of id, action, supervisor and table are short strings.
func identifying(members map[string]json.RawMessage) Command {
	var c Command
	for name, dst := range map[string]*string{"id": &c.ID, "action": &c.Action, "supervisor": &c.Supervisor, "table": &c.Table} {
		if raw, ok := members[name]; ok {
			var s string
			if json.Unmarshal(raw, &s) == nil && utf8.ValidString(s) && len(s) <= 64 {
				*dst = s
			}
		}
	}
	return c
}

// decodeStrict decodes the command, refusing any member it does not know.
func decodeStrict(canon []byte, members map[string]json.RawMessage) (Command, error) {
	for name := range members {
		if !slices.Contains(fields, name) {
			return Command{}, fmt.Errorf("unknown field %q", clip(name))
		}
	}
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.DisallowUnknownFields()
	var c Command
	if err := dec.Decode(&c); err != nil {
		return Command{}, err
	}
	return c, nil
}

// checkFields checks the fields every command has.
func checkFields(c Command) error {
	switch {
	case c.Table == "":
		return errors.New("no table")
	case len(c.Table) > 64:
		return errors.New("table id longer than 64 bytes")
	case !validID(c.ID):
		return fmt.Errorf("id %q: want 1 to 64 bytes of A-Z a-z 0-9 . _ : -", clip(c.ID))
	case !slices.Contains(Actions, c.Action):
		return fmt.Errorf("unknown action %q", clip(c.Action))
	case !coup.ValidStaffName(c.Supervisor):
		return fmt.Errorf("supervisor %q: want 1 to 64 bytes of A-Z a-z 0-9 . _ @ -", clip(c.Supervisor))
	case c.Sig == "":
		return errors.New("no signature")
	case len(c.Reason) > maxReason:
		return fmt.Errorf("reason longer than %d bytes", maxReason)
	case c.Coup < 0:
		return fmt.Errorf("coup %d: want 0 or more", c.Coup)
	case c.From < 0:
		return fmt.Errorf("from %d: want 1 or more", c.From)
	case c.To < 0:
		return fmt.Errorf("to %d: want 1 or more", c.To)
	}
	return nil
}

// checkAction checks the fields that belong to one action: each is given
// where its action needs it and nowhere else. A card action's card comes
// back parsed.
func checkAction(c Command) (*coup.Card, error) {
	var card *coup.Card
	switch c.Action {
	case coup.ActionCard:
		cd, err := coup.ParseCard(c.Card)
		if err != nil {
			return nil, fmt.Errorf("card %q: %v", clip(c.Card), err)
		}
		card = &cd
	case ActionResync:
		if c.From < 1 {
			return nil, errors.New("resync needs from, the first sequence number to send")
		}
		if c.To != 0 && c.To < c.From {
			return nil, fmt.Errorf("to %d before from %d", c.To, c.From)
		}
	case coup.ActionDealerIn:
		if !coup.ValidStaffName(c.Dealer) {
			return nil, fmt.Errorf("dealer %q: want 1 to 64 bytes of A-Z a-z 0-9 . _ @ -", clip(c.Dealer))
		}
	}
	switch {
	case c.Dealer != "" && c.Action != coup.ActionDealerIn:
		return nil, errors.New("dealer is only for the dealer-in action")
	case c.Card != "" && c.Action != coup.ActionCard:
		return nil, errors.New("card is only for the card action")
	case (c.From != 0 || c.To != 0) && c.Action != ActionResync:
		return nil, errors.New("from and to are only for the resync action")
	}
	return card, nil
}

// signedBytes is what the signature covers: the object as received, less
// its signature, canonical, after the signing domain.
func signedBytes(members map[string]json.RawMessage) ([]byte, error) {
	rest := make(map[string]json.RawMessage, len(members))
	for k, v := range members {
		if k != "sig" {
			rest[k] = v
		}
	}
	obj, err := json.Marshal(rest)
	if err == nil {
		obj, err = audit.Canonicalize(obj)
	}
	if err != nil {
		return nil, err
	}
	return append([]byte(SigningDomain), obj...), nil
}

func validID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// clip shortens text from outside for messages.
func clip(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	if !utf8.ValidString(s) {
		s = fmt.Sprintf("%x", s)
	}
	return s
}
