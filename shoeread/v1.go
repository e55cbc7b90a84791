package shoeread

import (
	"bytes"
	"fmt"
	"math"

	"github.com/tablectl/tablectl/coup"
)

// v1State is where the V1 decoder is within the byte stream.
type v1State uint8

const (
	v1Hunt    v1State = iota // between sentences, looking for '$'
	v1In                     // inside a sentence, after '$'
	v1CR                     // a sentence's CR has arrived; LF must follow
	v1Discard                // dropping the rest of a rejected sentence
)

// v1MaxBody bounds a sentence from '$' to the checksum's last digit: the
// CRLF after it makes v1MaxSentence.
const v1MaxBody = v1MaxSentence - 2

// V1 decodes tablectl shoe protocol v1 (docs/shoe-protocol.md), one byte at
// a time, so a sentence may arrive split across any number of Decode calls.
// It keeps at most one sentence (80 bytes before the line end) of
// unfinished input. Create it with NewV1.
type V1 struct {
	state v1State
	buf   []byte // the sentence so far: '$' and the bytes after it, no line end
	n     int    // bytes of the sentence so far, line end included
	run   rejectRun
	stats Stats
}

// NewV1 returns a decoder for tablectl shoe protocol v1.
func NewV1() *V1 {
	return &V1{
		buf: make([]byte, 0, v1MaxSentence),
		run: rejectRun{head: make([]byte, 0, rawMax)},
	}
}

// Name is "v1".
func (d *V1) Name() string { return "v1" }

// Guarantees: v1 numbers, checksums and heartbeats every sentence.
func (d *V1) Guarantees() Guarantees {
	return Guarantees{Sequenced: true, Checksummed: true, Heartbeat: true}
}

// Stats counts what has been read and rejected so far.
func (d *V1) Stats() Stats { return d.stats }

// pending is how many bytes of unfinished input the decoder holds; the fuzz
// tests assert it stays bounded.
func (d *V1) pending() int { return len(d.buf) + len(d.run.head) }

// Decode consumes p and returns the events it completes, in order.
func (d *V1) Decode(p []byte) []Event {
	d.stats.Bytes += uint64(len(p))
	var out []Event
	for _, c := range p {
		out = d.step(c, out)
	}
	return out
}

// step advances the state machine by one byte.
func (d *V1) step(c byte, out []Event) []Event {
	switch d.state {
	case v1Hunt:
		return d.hunt(c, out)

	case v1In:
		if c == '$' {
			// A new sentence began before this one ended: keep the new one.
			out = d.reject(out, fmt.Errorf("%w: sentence %q cut short by a new '$'", ErrFraming, clipRaw(string(d.buf))))
			return d.begin(out)
		}
		d.n++
		switch {
		case c == '\r':
			d.state = v1CR
		case c == '\n':
			// LF alone ends a sentence too: a lenient reader costs nothing here.
			return d.complete(out)
		case !printable(c):
			return d.discard(out, c, fmt.Errorf("%w: 0x%02x inside sentence %q", ErrNonPrintable, c, clipRaw(string(d.buf))))
		case len(d.buf) == v1MaxBody:
			return d.discard(out, c, fmt.Errorf("%w: more than %d bytes before the line end", ErrOversize, v1MaxBody))
		default:
			d.buf = append(d.buf, c)
		}
		return out

	case v1CR:
		if c == '\n' {
			d.n++
			return d.complete(out)
		}
		// CR must be followed by LF; the byte after it starts afresh.
		out = d.reject(out, fmt.Errorf("%w: CR not followed by LF after %q", ErrFraming, clipRaw(string(d.buf))))
		return d.hunt(c, out)

	case v1Discard:
		switch c {
		case '$':
			out = d.run.flush(out, &d.stats)
			return d.begin(out)
		case '\n':
			d.run.add(c)
			d.state = v1Hunt
			return d.run.flush(out, &d.stats)
		}
		d.run.add(c)
		if d.run.full() {
			err := d.run.err
			out = d.run.flush(out, &d.stats)
			d.run.begin(err)
		}
		return out
	}
	return out
}

// hunt handles a byte between sentences.
func (d *V1) hunt(c byte, out []Event) []Event {
	d.state = v1Hunt
	switch c {
	case '$':
		out = d.run.flush(out, &d.stats)
		return d.begin(out)
	case '\r', '\n':
		if !d.run.active() {
			return out // a blank line end between sentences is harmless
		}
		d.run.add(c)
		if c == '\n' {
			out = d.run.flush(out, &d.stats)
		}
		return out
	}
	d.run.begin(ErrNoise)
	d.run.add(c)
	if d.run.full() {
		out = d.run.flush(out, &d.stats)
	}
	return out
}

// begin starts a sentence at its '$'.
func (d *V1) begin(out []Event) []Event {
	d.state = v1In
	d.buf = append(d.buf[:0], '$')
	d.n = 1
	return out
}

// reject reports the sentence so far (d.n bytes) as rejected for err.
func (d *V1) reject(out []Event, err error) []Event {
	d.run.begin(err)
	d.run.n += d.n - len(d.buf) // the line-end bytes, which buf does not hold
	d.run.add(d.buf...)
	d.buf = d.buf[:0]
	d.n = 0
	d.state = v1Hunt
	return d.run.flush(out, &d.stats)
}

// discard rejects the sentence so far plus c for err and drops everything up
// to the next line end or '$', holding none of it.
func (d *V1) discard(out []Event, c byte, err error) []Event {
	d.run.begin(err)
	d.run.add(d.buf...)
	d.run.add(c)
	d.buf = d.buf[:0]
	d.n = 0
	d.state = v1Discard
	if c == '\n' {
		d.state = v1Hunt
		return d.run.flush(out, &d.stats)
	}
	return out
}

// complete parses a sentence whose line end has arrived.
func (d *V1) complete(out []Event) []Event {
	e, err := parseV1(d.buf)
	if err != nil {
		return d.reject(out, err)
	}
	e.Raw = string(d.buf)
	d.stats.Sentences++
	d.buf = d.buf[:0]
	d.n = 0
	d.state = v1Hunt
	return append(out, e)
}

// parseV1 reads one sentence, '$' to the checksum, line end stripped.
func parseV1(s []byte) (Event, error) {
	star := bytes.IndexByte(s, '*')
	if star < 0 {
		return Event{}, fmt.Errorf("%w: sentence %q has no '*' checksum", ErrFraming, clipRaw(string(s)))
	}
	body, hex := s[1:star], s[star+1:]
	want, ok := parseHex2(hex)
	if !ok {
		return Event{}, fmt.Errorf("%w: checksum %q after '*' is not two hex digits", ErrFraming, clipRaw(string(hex)))
	}
	if got := v1Checksum(body); got != want {
		return Event{}, fmt.Errorf("%w: sentence %q says *%02X but its bytes XOR to %02X", ErrChecksum, clipRaw(string(s)), want, got)
	}
	f := bytes.Split(body, []byte{','})
	typ := string(f[0])
	var e Event
	switch typ {
	case v1Hello:
		e.Kind = KindHello
	case v1Card:
		e.Kind = KindCard
	case v1Cut:
		e.Kind = KindCutCard
	case v1Button:
		e.Kind = KindButton
	case v1Status:
		e.Kind = KindStatus
	case v1Heartbeat:
		e.Kind = KindHeartbeat
	default:
		return Event{}, fmt.Errorf("%w: %q (want HELO, CARD, CUT, BTN, STAT or HB)", ErrUnknownType, clipRaw(typ))
	}
	if len(f) < 2 || len(f[1]) == 0 {
		return Event{}, fmt.Errorf("%w: %s has no sequence number", ErrBadSeq, typ)
	}
	seq, err := parseSeq(f[1])
	if err != nil {
		return Event{}, fmt.Errorf("%s: %w", typ, err)
	}
	e.Seq = seq
	args := f[2:]
	want2 := func(n int, form string) error {
		if len(args) != n {
			return fmt.Errorf("%w: %s takes %s, got %d fields after the sequence number", ErrMalformed, typ, form, len(args))
		}
		return nil
	}

	switch e.Kind {
	case KindHello:
		if err := want2(2, "a version and a shoe id"); err != nil {
			return Event{}, err
		}
		v, ok := parseDecimal(args[0])
		if !ok {
			return Event{}, fmt.Errorf("%w: HELO version %q is not a decimal number", ErrMalformed, clipRaw(string(args[0])))
		}
		if v != V1Version {
			return Event{}, fmt.Errorf("%w: the shoe speaks version %d, this driver speaks %d", ErrVersion, v, V1Version)
		}
		if len(args[1]) == 0 {
			return Event{}, fmt.Errorf("%w: HELO has an empty shoe id", ErrMalformed)
		}
		e.Text = string(args[1])

	case KindCard:
		if err := want2(1, "one card"); err != nil {
			return Event{}, err
		}
		c := args[0]
		if string(c) == "??" {
			e.Unreadable = true
			break
		}
		card, ok := parseV1Card(c)
		if !ok {
			return Event{}, fmt.Errorf("CARD: %w: %q: want rank %s then suit %s in upper case, or ?? when unreadable",
				coup.ErrBadCard, clipRaw(string(c)), "A23456789TJQK", "SHDC")
		}
		e.Card = card

	case KindCutCard, KindHeartbeat:
		if err := want2(0, "no fields"); err != nil {
			return Event{}, err
		}

	case KindButton:
		if err := want2(1, "one button name"); err != nil {
			return Event{}, err
		}
		b, ok := v1ButtonByName(string(args[0]))
		if !ok {
			return Event{}, fmt.Errorf("%w: unknown button %q (want NEWSHOE, BURNDONE, NOMOREBETS or REVEAL)", ErrMalformed, clipRaw(string(args[0])))
		}
		e.Button = b

	case KindStatus:
		if len(args) < 1 {
			return Event{}, fmt.Errorf("%w: STAT has no status code", ErrMalformed)
		}
		if !validStatusCode(string(args[0])) {
			return Event{}, fmt.Errorf("%w: status code %q: want 1 to %d of A-Z a-z 0-9 _ -", ErrMalformed, clipRaw(string(args[0])), maxStatusCode)
		}
		e.Status = string(args[0])
		if len(args) > 1 {
			// The text is the rest of the sentence: commas belong to it.
			e.Text = string(bytes.Join(args[1:], []byte{','}))
			if e.Text == "" {
				// Read as no text, it would be recorded as a sentence the
				// shoe did not send: one form for each meaning.
				return Event{}, fmt.Errorf("%w: STAT has a comma after its code but no text (a status without text has no comma)", ErrMalformed)
			}
		}
	}
	return e, nil
}

// parseSeq reads a sequence number: decimal, no sign, no leading zero,
// 1 to 4294967295.
func parseSeq(b []byte) (uint32, error) {
	v, ok := parseDecimal(b)
	switch {
	case !ok:
		return 0, fmt.Errorf("%w: %q is not a decimal number", ErrBadSeq, clipRaw(string(b)))
	case len(b) > 1 && b[0] == '0':
		return 0, fmt.Errorf("%w: %q has a leading zero", ErrBadSeq, clipRaw(string(b)))
	case v == 0:
		return 0, fmt.Errorf("%w: 0 is never used; sequence numbers start at 1", ErrBadSeq)
	case v > math.MaxUint32:
		return 0, fmt.Errorf("%w: %q exceeds %d", ErrBadSeq, clipRaw(string(b)), uint32(math.MaxUint32))
	}
	return uint32(v), nil
}

// parseDecimal reads 1 to 11 decimal digits (enough to tell a number just
// past uint32 from one that fits, and never overflow uint64).
func parseDecimal(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 11 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, true
}

// parseHex2 reads exactly two hex digits, either case.
func parseHex2(b []byte) (byte, bool) {
	if len(b) != 2 {
		return 0, false
	}
	hi, ok1 := hexDigit(b[0])
	lo, ok2 := hexDigit(b[1])
	return hi<<4 | lo, ok1 && ok2
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// parseV1Card reads a v1 card: exactly rank then suit, upper case. v1 is
// stricter than coup.ParseCard so every card has one spelling on the wire.
func parseV1Card(b []byte) (coup.Card, bool) {
	if len(b) != 2 || isLower(b[0]) || isLower(b[1]) {
		return coup.Card{}, false
	}
	r, ok1 := coup.ParseRank(b[0])
	s, ok2 := coup.ParseSuit(b[1])
	return coup.Card{Rank: r, Suit: s}, ok1 && ok2
}

func isLower(c byte) bool { return c >= 'a' && c <= 'z' }

// v1ButtonByName maps a BTN field to its button.
func v1ButtonByName(name string) (Button, bool) {
	for b, n := range v1Buttons {
		if n == name {
			return b, true
		}
	}
	return "", false
}

// maxStatusCode bounds a STAT code, which is a label, not prose.
const maxStatusCode = 16

// validStatusCode reports whether s is 1 to maxStatusCode of A-Z a-z 0-9 _ -.
func validStatusCode(s string) bool {
	if len(s) == 0 || len(s) > maxStatusCode {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
