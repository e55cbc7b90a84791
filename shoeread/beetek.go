package shoeread

import (
	"fmt"
	"strings"

	"github.com/tablectl/tablectl/coup"
)

// Bee-Tek token bounds. The longest token public integrations show is an
// alarm ("<Alarm:E3 Card Not Read>"); anything far longer is noise.
const (
	beetekMaxSection = 32 // between '[' and ']'
	beetekMaxItem    = 64 // between '<' and '>'
)

// Bee-Tek sections, compared without regard to case.
const (
	beetekGame      = "Game"
	beetekBurn      = "Manual Burn Cards"
	beetekGameAlarm = "GameAlarm"
)

// beetekState is where the Bee-Tek decoder is within the byte stream.
type beetekState uint8

const (
	btIdle         beetekState = iota // between tokens
	btSection                         // after '[', reading a section name
	btAfterSection                    // after ']', waiting for the section's '<'
	btItem                            // after '<', reading an item
	btDiscard                         // dropping the rest of a rejected token
)

// Beetek decodes the text a Bee-Tek baccarat shoe prints at 9600 baud 8N1,
// as public integrations read it: a section in brackets then an item in
// angle brackets, separated by spaces, with no framing, checksum, sequence
// number or heartbeat:
//
//	[Game]<Card:4S>               a card (rank then suit, or suit then rank; 10 or T for ten)
//	[Manual Burn Cards]<Card:9H>  a card burned in the shoe's burn mode (Event.Burn)
//	[Game]<Game>                  a card the shoe could not read
//	<Alarm:E3 Card Not Read>      an alarm (status E3), in any known section or none
//	<W0x01>                       a warning (status W0x01)
//
// Anything else (an unknown section or item, a section with no item, a
// token too long or holding a control byte, bytes between tokens) is
// rejected and reported, never ignored: with no checksum, an unknown token
// may be a mangled card. Create it with NewBeetek.
type Beetek struct {
	state   beetekState
	section []byte // the section name so far, or the pending section's name
	item    []byte // the item so far
	hasSect bool   // a complete section awaits its item
	n       int    // bytes of the token so far ('[' or '<' to here)
	run     rejectRun
	stats   Stats
}

// NewBeetek returns a decoder for the Bee-Tek shoe's text protocol.
func NewBeetek() *Beetek {
	return &Beetek{
		section: make([]byte, 0, beetekMaxSection),
		item:    make([]byte, 0, beetekMaxItem),
		run:     rejectRun{head: make([]byte, 0, rawMax)},
	}
}

// Name is "beetek".
func (d *Beetek) Name() string { return "beetek" }

// Guarantees: none. Bee-Tek has no sequence numbers (a lost card goes
// unnoticed), no checksum (noise can forge a card) and no heartbeat (silence
// cannot be told from an idle dealer).
func (d *Beetek) Guarantees() Guarantees { return Guarantees{} }

// Stats counts what has been read and rejected so far.
func (d *Beetek) Stats() Stats { return d.stats }

// pending is how many bytes of unfinished input the decoder holds.
func (d *Beetek) pending() int { return len(d.section) + len(d.item) + len(d.run.head) }

// Decode consumes p and returns the events it completes, in order.
func (d *Beetek) Decode(p []byte) []Event {
	d.stats.Bytes += uint64(len(p))
	var out []Event
	for _, c := range p {
		out = d.step(c, out)
	}
	return out
}

func beetekSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// step advances the state machine by one byte.
func (d *Beetek) step(c byte, out []Event) []Event {
	switch d.state {
	case btIdle:
		return d.idle(c, out)

	case btSection:
		switch {
		case c == '[' || c == '<':
			out = d.reject(out, fmt.Errorf("%w: section %q cut short by %q", ErrFraming, clipRaw(d.text()), c))
			return d.idle(c, out)
		case c == ']':
			d.n++
			d.hasSect = true
			d.state = btAfterSection
		case !printable(c):
			return d.discard(out, c, fmt.Errorf("%w: 0x%02x inside %q", ErrNonPrintable, c, clipRaw(d.text())))
		case len(d.section) == beetekMaxSection:
			return d.discard(out, c, fmt.Errorf("%w: section longer than %d bytes", ErrOversize, beetekMaxSection))
		default:
			d.n++
			d.section = append(d.section, c)
		}
		return out

	case btAfterSection:
		switch {
		case beetekSpace(c):
			d.n++
		case c == '<':
			d.n++
			d.state = btItem
		default:
			// A section must lead to its item: say so, and look at c afresh.
			out = d.reject(out, fmt.Errorf("%w: section [%s] with no item", ErrFraming, clipRaw(string(d.section))))
			return d.idle(c, out)
		}
		return out

	case btItem:
		switch {
		case c == '[' || c == '<':
			out = d.reject(out, fmt.Errorf("%w: item %q cut short by %q", ErrFraming, clipRaw(d.text()), c))
			return d.idle(c, out)
		case c == '>':
			d.n++
			return d.complete(out)
		case !printable(c):
			return d.discard(out, c, fmt.Errorf("%w: 0x%02x inside %q", ErrNonPrintable, c, clipRaw(d.text())))
		case len(d.item) == beetekMaxItem:
			return d.discard(out, c, fmt.Errorf("%w: item longer than %d bytes", ErrOversize, beetekMaxItem))
		default:
			d.n++
			d.item = append(d.item, c)
		}
		return out

	case btDiscard:
		switch {
		case c == '[' || c == '<':
			out = d.run.flush(out, &d.stats)
			return d.idle(c, out)
		case beetekSpace(c):
			d.state = btIdle
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

// idle handles a byte between tokens.
func (d *Beetek) idle(c byte, out []Event) []Event {
	d.state = btIdle
	switch {
	case c == '[' || c == '<':
		out = d.run.flush(out, &d.stats)
		d.section = d.section[:0]
		d.item = d.item[:0]
		d.hasSect = false
		d.n = 1
		d.state = btSection
		if c == '<' {
			d.state = btItem
		}
		return out
	case beetekSpace(c):
		// Tokens are space-separated, so a space ends a run of noise and
		// the controller hears of it without waiting for the next token.
		return d.run.flush(out, &d.stats)
	}
	d.run.begin(ErrNoise)
	d.run.add(c)
	if d.run.full() {
		out = d.run.flush(out, &d.stats)
	}
	return out
}

// text rebuilds the token so far, for Raw and error messages.
func (d *Beetek) text() string {
	var b strings.Builder
	if d.hasSect || d.state == btSection {
		b.WriteByte('[')
		b.Write(d.section)
		if d.hasSect {
			b.WriteByte(']')
		}
	}
	if d.state == btItem {
		b.WriteByte('<')
		b.Write(d.item)
	}
	return b.String()
}

// reset forgets the token in progress.
func (d *Beetek) reset() {
	d.section = d.section[:0]
	d.item = d.item[:0]
	d.hasSect = false
	d.n = 0
	d.state = btIdle
}

// reject reports the token so far (d.n bytes) as rejected for err.
func (d *Beetek) reject(out []Event, err error) []Event {
	t := d.text()
	d.run.begin(err)
	d.run.n += d.n - len(t) // spaces between section and item, not in t
	d.run.add([]byte(t)...)
	d.reset()
	return d.run.flush(out, &d.stats)
}

// discard rejects the token so far plus c for err and drops bytes up to the
// next space or token start, holding none of them.
func (d *Beetek) discard(out []Event, c byte, err error) []Event {
	t := d.text()
	d.run.begin(err)
	d.run.n += d.n - len(t)
	d.run.add([]byte(t)...)
	d.run.add(c)
	d.reset()
	d.state = btDiscard
	if d.run.full() {
		out = d.run.flush(out, &d.stats)
		d.run.begin(err)
	}
	return out
}

// complete interprets a token whose '>' has arrived.
func (d *Beetek) complete(out []Event) []Event {
	d.state = btIdle // text() must not print the item's '<' twice
	raw := d.rawToken()
	e, err := beetekEvent(string(d.section), d.hasSect, string(d.item))
	if err != nil {
		d.run.begin(err)
		d.run.n += d.n - len(raw)
		d.run.add([]byte(raw)...)
		d.reset()
		return d.run.flush(out, &d.stats)
	}
	e.Raw = raw
	d.stats.Sentences++
	d.reset()
	return append(out, e)
}

// rawToken writes the completed token as "[section]<item>".
func (d *Beetek) rawToken() string {
	var b strings.Builder
	if d.hasSect {
		b.WriteByte('[')
		b.Write(d.section)
		b.WriteByte(']')
	}
	b.WriteByte('<')
	b.Write(d.item)
	b.WriteByte('>')
	return b.String()
}

// beetekEvent interprets one item and the section before it, if any.
func beetekEvent(section string, hasSection bool, item string) (Event, error) {
	cardSection := !hasSection || strings.EqualFold(section, beetekGame) || strings.EqualFold(section, beetekBurn)
	known := cardSection || strings.EqualFold(section, beetekGameAlarm)
	if !known {
		return Event{}, fmt.Errorf("%w: section [%s]", ErrUnknownType, clipRaw(section))
	}
	burn := hasSection && strings.EqualFold(section, beetekBurn)

	switch {
	case hasPrefixFold(item, "Card:"):
		if !cardSection {
			return Event{}, fmt.Errorf("%w: a card in section [%s]", ErrUnknownType, section)
		}
		c, err := parseBeetekCard(item[len("Card:"):])
		if err != nil {
			return Event{}, err
		}
		return Event{Kind: KindCard, Card: c, Burn: burn}, nil

	case strings.EqualFold(item, "Game"):
		if !cardSection {
			return Event{}, fmt.Errorf("%w: an unreadable card in section [%s]", ErrUnknownType, section)
		}
		return Event{Kind: KindCard, Unreadable: true, Burn: burn}, nil

	case hasPrefixFold(item, "Alarm:"):
		code, text, _ := strings.Cut(strings.TrimSpace(item[len("Alarm:"):]), " ")
		if code == "" {
			return Event{}, fmt.Errorf("%w: alarm with no code", ErrMalformed)
		}
		return Event{Kind: KindStatus, Status: code, Text: strings.TrimSpace(text)}, nil

	case beetekWarning(item):
		return Event{Kind: KindStatus, Status: item}, nil
	}
	return Event{}, fmt.Errorf("%w: item <%s>", ErrUnknownType, clipRaw(item))
}

// beetekWarning reports whether item is a warning code, W0x and hex digits.
func beetekWarning(item string) bool {
	if len(item) < 4 || !hasPrefixFold(item, "W0x") {
		return false
	}
	for i := 3; i < len(item); i++ {
		if _, ok := hexDigit(item[i]); !ok {
			return false
		}
	}
	return true
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// parseBeetekCard reads a card as Bee-Tek integrations see it: rank then
// suit ("4S") or suit then rank ("S4"), ten as "10" or "T", either case.
// Ranks and suits share no letter, so the order is never ambiguous.
func parseBeetekCard(s string) (coup.Card, error) {
	rank := func(r string) (coup.Rank, bool) {
		if r == "10" {
			return coup.Ten, true
		}
		if len(r) != 1 {
			return 0, false
		}
		return coup.ParseRank(r[0])
	}
	if len(s) == 2 || len(s) == 3 {
		if r, ok := rank(s[:len(s)-1]); ok {
			if su, ok := coup.ParseSuit(s[len(s)-1]); ok {
				return coup.Card{Rank: r, Suit: su}, nil
			}
		}
		if su, ok := coup.ParseSuit(s[0]); ok {
			if r, ok := rank(s[1:]); ok {
				return coup.Card{Rank: r, Suit: su}, nil
			}
		}
	}
	return coup.Card{}, fmt.Errorf("%w: <Card:%s>: want rank and suit, like 4S, S4, 10H or TH", coup.ErrBadCard, clipRaw(s))
}
