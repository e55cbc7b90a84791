package signedcmd

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"iter"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// Forgery is a recorded command (an in.cmd row) that does not stand up
// against the keyring.
type Forgery struct {
	Seq    int64
	Detail string
}

// CheckTrail re-verifies every command the trail recorded against kr, long
// after the fact: each in.cmd row must carry the signed bytes, a signature
// that verifies with the key the row names, a key the keyring holds for
// that supervisor (valid when the command was issued, permitted its
// action), signed for table, and saying what the row says. rows are the
// trail's rows (any kinds; only in.cmd rows are checked). It returns how
// many commands it checked and one Forgery per row that fails; err is a
// failure to read the trail.
func CheckTrail(rows iter.Seq2[audit.Record, error], table string, kr *Keyring) (checked int, forged []Forgery, err error) {
	for rec, err := range rows {
		if err != nil {
			return checked, forged, fmt.Errorf("check recorded commands: %w", err)
		}
		if rec.Kind != string(coup.InCmd) {
			continue
		}
		checked++
		if why := checkRecorded(rec.Body, table, kr); why != "" {
			forged = append(forged, Forgery{Seq: rec.Seq, Detail: why})
		}
	}
	return checked, forged, nil
}

// checkRecorded says why one in.cmd body is not a command the keyring's
// key signed, or "" when it is.
func checkRecorded(body []byte, table string, kr *Keyring) string {
	var in coup.Input
	if err := json.Unmarshal(body, &in); err != nil || in.Command == nil {
		return "the row is not a recorded command"
	}
	rc := in.Command
	if rc.Signed == "" || rc.Sig == "" {
		return fmt.Sprintf("command %s (%s by %s) was recorded without its signature", rc.ID, rc.Action, rc.By)
	}
	canon, ok := bytes.CutPrefix([]byte(rc.Signed), []byte(SigningDomain))
	if !ok {
		return fmt.Sprintf("command %s: the recorded signed bytes are not a command's", rc.ID)
	}
	var w Command
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return fmt.Sprintf("command %s: the recorded signed bytes do not read: %v", rc.ID, err)
	}
	w.Sig = rc.Sig
	payload, err := w.Marshal()
	if err != nil {
		return fmt.Sprintf("command %s: %v", rc.ID, err)
	}
	p := parse(payload) // the same strict reading the controller gave it
	switch {
	case p.refusal != nil:
		return fmt.Sprintf("command %s: the recorded command would be refused: %v", rc.ID, p.refusal)
	case !bytes.Equal(p.signed, []byte(rc.Signed)):
		return fmt.Sprintf("command %s: the recorded signed bytes are not in canonical form", rc.ID)
	case w.Table != table:
		return fmt.Sprintf("command %s was signed for table %q, the trail is %q's", rc.ID, w.Table, table)
	case w.ID != rc.ID || w.Action != rc.Action || w.Supervisor != rc.By || w.Coup != rc.Coup || w.Reason != rc.Reason || w.Dealer != rc.Dealer || !sameCard(p.card, rc.Card):
		return fmt.Sprintf("command %s: the row says %s by %s (coup %d), the signed command %s by %s (coup %d)",
			rc.ID, rc.Action, rc.By, rc.Coup, w.Action, w.Supervisor, w.Coup)
	}
	key, ok := kr.ByID(w.Supervisor, rc.KeyID)
	if !ok {
		return fmt.Sprintf("command %s (%s by %s): key %s is not %s's in the keyring", rc.ID, rc.Action, rc.By, rc.KeyID, w.Supervisor)
	}
	if rc.Key != "" && rc.Key != key.Label {
		return fmt.Sprintf("command %s (%s by %s): the row names key %q, the keyring labels key %s %q", rc.ID, rc.Action, rc.By, rc.Key, rc.KeyID, key.Label)
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(rc.Sig)
	if err != nil || !ed25519.Verify(key.PublicKey, p.signed, sig) {
		return fmt.Sprintf("command %s (%s by %s): the signature does not verify with key %s", rc.ID, rc.Action, rc.By, rc.KeyID)
	}
	if !key.ValidAt(p.issued) {
		return fmt.Sprintf("command %s (%s by %s): issued %s, when key %s was not valid (%s)", rc.ID, rc.Action, rc.By, w.IssuedAt, rc.KeyID, key.validity())
	}
	if !key.Permits(w.Action) {
		return fmt.Sprintf("command %s: %s's key %s may not sign %s", rc.ID, w.Supervisor, rc.KeyID, w.Action)
	}
	return ""
}

func sameCard(a, b *coup.Card) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
