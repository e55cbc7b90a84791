package shoeread

import (
	"fmt"
	"strconv"
	"strings"
)

// V1 sentence types. See docs/shoe-protocol.md.
const (
	v1Hello     = "HELO" // $HELO,seq,version,shoe-id: powered up or loaded; seq restarts at 1
	v1Card      = "CARD" // $CARD,seq,KH or $CARD,seq,?? when unreadable
	v1Cut       = "CUT"  // $CUT,seq: the cut card came out
	v1Button    = "BTN"  // $BTN,seq,NEWSHOE|BURNDONE|NOMOREBETS|REVEAL
	v1Status    = "STAT" // $STAT,seq,CODE[,text]
	v1Heartbeat = "HB"   // $HB,seq: at least once a second; seq is the last sentence's, not a new number
)

// V1Version is the protocol version tablectl speaks and announces in HELO.
const V1Version = 1

// v1MaxSentence bounds one sentence, '$' to '\n' inclusive, as NMEA 0183 does.
const v1MaxSentence = 82

var v1Buttons = map[Button]string{
	ButtonNewShoe:    "NEWSHOE",
	ButtonBurnDone:   "BURNDONE",
	ButtonNoMoreBets: "NOMOREBETS",
	ButtonReveal:     "REVEAL",
}

// v1Checksum is the XOR of every byte between '$' and '*'.
func v1Checksum(body []byte) byte {
	var x byte
	for _, b := range body {
		x ^= b
	}
	return x
}

// AppendV1 appends e as one v1 sentence ("$CARD,12,KH*14\r\n") to dst. e.Seq
// must be set: v1 numbers every sentence from 1, and a heartbeat carries the
// number of the last sentence before it (the caller's count; AppendV1 only
// writes what it is given). For KindHello, Text is the
// shoe's id (not empty, no comma). For KindStatus, Status is a code of 1 to
// 16 of A-Z a-z 0-9 _ - and Text, optional, is free text. v1 has no burn
// marker, so Burn is not written. Protocol errors and gaps are the reader's,
// not the shoe's, and cannot be encoded. Whatever AppendV1 writes, V1 decodes
// back to the same event.
func AppendV1(dst []byte, e Event) ([]byte, error) {
	if e.Seq == 0 {
		return dst, fmt.Errorf("v1 %s: sequence number must be 1 or more", e.Kind)
	}
	body := make([]byte, 0, 64)
	field := func(typ string) {
		body = append(body, typ...)
		body = append(body, ',')
		body = strconv.AppendUint(body, uint64(e.Seq), 10)
	}
	switch e.Kind {
	case KindHello:
		// The shoe id is one field: a comma would split it.
		if e.Text == "" || strings.IndexByte(e.Text, ',') >= 0 {
			return dst, fmt.Errorf("v1 hello: shoe id %q must be non-empty and hold no comma", e.Text)
		}
		field(v1Hello)
		body = append(body, ',')
		body = strconv.AppendInt(body, V1Version, 10)
		body = append(body, ',')
		body = append(body, e.Text...)
	case KindCard:
		field(v1Card)
		body = append(body, ',')
		if e.Unreadable {
			body = append(body, "??"...)
		} else if e.Card.Valid() {
			body = append(body, e.Card.String()...)
		} else {
			return dst, fmt.Errorf("v1 card: invalid card %v", e.Card)
		}
	case KindCutCard:
		field(v1Cut)
	case KindButton:
		name, ok := v1Buttons[e.Button]
		if !ok {
			return dst, fmt.Errorf("v1 button: unknown button %q", e.Button)
		}
		field(v1Button)
		body = append(body, ',')
		body = append(body, name...)
	case KindStatus:
		if !validStatusCode(e.Status) {
			return dst, fmt.Errorf("v1 status: code %q must be 1 to %d of A-Z a-z 0-9 _ -", e.Status, maxStatusCode)
		}
		field(v1Status)
		body = append(body, ',')
		body = append(body, e.Status...)
		if e.Text != "" {
			body = append(body, ',')
			body = append(body, e.Text...)
		}
	case KindHeartbeat:
		field(v1Heartbeat)
	default:
		return dst, fmt.Errorf("v1: %s is not a shoe sentence", e.Kind)
	}
	for _, b := range body {
		if b < 0x20 || b > 0x7e || b == '$' || b == '*' {
			return dst, fmt.Errorf("v1 %s: byte %q not allowed in a sentence", e.Kind, b)
		}
	}
	if n := len(body) + 6; n > v1MaxSentence { // $ + body + *HH + CRLF
		return dst, fmt.Errorf("v1 %s: sentence of %d bytes exceeds %d", e.Kind, n, v1MaxSentence)
	}
	dst = append(dst, '$')
	dst = append(dst, body...)
	dst = fmt.Appendf(dst, "*%02X\r\n", v1Checksum(body))
	return dst, nil
}

// AppendBeetek appends e as the Bee-Tek shoe prints it: " [Game]<Card:4S> ",
// " [Manual Burn Cards]<Card:9H> " for a burn, " [Game]<Game> " for an
// unreadable card; a status as a warning " <W0x01> " when its code is W0x
// and hex digits and it has no text, else as an alarm " [GameAlarm]<Alarm:E3 Card Not Read> ".
// Bee-Tek has no sequence numbers, buttons or heartbeats, so Seq is not
// written and other kinds cannot be encoded.
func AppendBeetek(dst []byte, e Event) ([]byte, error) {
	if e.Kind == KindStatus {
		return appendBeetekStatus(dst, e)
	}
	if e.Kind != KindCard {
		return dst, fmt.Errorf("beetek: %s cannot be encoded (the protocol reports only cards and alarms)", e.Kind)
	}
	section := "Game"
	if e.Burn {
		section = "Manual Burn Cards"
	}
	switch {
	case e.Unreadable:
		return fmt.Appendf(dst, " [%s]<Game> ", section), nil
	case e.Card.Valid():
		return fmt.Appendf(dst, " [%s]<Card:%s> ", section, e.Card), nil
	}
	return dst, fmt.Errorf("beetek card: invalid card %v", e.Card)
}

// appendBeetekStatus writes a warning or an alarm. The code must be one word
// and the whole item must fit the decoder's bound, or it would not read back.
func appendBeetekStatus(dst []byte, e Event) ([]byte, error) {
	if beetekWarning(e.Status) && e.Text == "" {
		if len(e.Status) > beetekMaxItem {
			return dst, fmt.Errorf("beetek warning: code of %d bytes exceeds %d", len(e.Status), beetekMaxItem)
		}
		return fmt.Appendf(dst, " <%s> ", e.Status), nil
	}
	item := "Alarm:" + e.Status
	if e.Text != "" {
		item += " " + e.Text
	}
	// The bytes that would end or cut the item short; a ']' is only a
	// section's end outside an item, and the decoder reads it inside one.
	for i := 0; i < len(item); i++ {
		if c := item[i]; !printable(c) || c == '<' || c == '>' || c == '[' {
			return dst, fmt.Errorf("beetek alarm: byte %q not allowed", c)
		}
	}
	switch {
	case e.Status == "" || strings.IndexByte(e.Status, ' ') >= 0:
		return dst, fmt.Errorf("beetek alarm: code %q must be one word", e.Status)
	case e.Text != strings.TrimSpace(e.Text):
		return dst, fmt.Errorf("beetek alarm %s: text %q has leading or trailing spaces", e.Status, e.Text)
	case len(item) > beetekMaxItem:
		return dst, fmt.Errorf("beetek alarm: item of %d bytes exceeds %d", len(item), beetekMaxItem)
	}
	return fmt.Appendf(dst, " [%s]<%s> ", beetekGameAlarm, item), nil
}
