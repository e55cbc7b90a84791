package shoeread

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/coup"
)

// line builds a v1 sentence from its body with a checksum computed here,
// independently of the package's own, and CRLF.
func line(body string) string {
	var x byte
	for i := 0; i < len(body); i++ {
		x ^= body[i]
	}
	return fmt.Sprintf("$%s*%02X\r\n", body, x)
}

// raw is the Raw a decoder records for a line: the sentence without its end.
func raw(l string) string { return strings.TrimRight(l, "\r\n") }

// card parses notation for test tables; the test fails on a typo.
func card(t testing.TB, s string) coup.Card {
	t.Helper()
	c, err := coup.ParseCard(s)
	if err != nil {
		t.Fatalf("test table: %v", err)
	}
	return c
}

// sameEvents compares decoded events with expected ones. An expected Err is
// a sentinel the got Err must wrap, or an error with the same text (when
// two decodings are compared); everything else must be equal.
func sameEvents(t testing.TB, got, want []Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d:\ngot:  %s\nwant: %s", len(got), len(want), fmtEvents(got), fmtEvents(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if (w.Err == nil) != (g.Err == nil) || w.Err != nil && !errors.Is(g.Err, w.Err) && g.Err.Error() != w.Err.Error() {
			t.Errorf("event %d: err %v, want one wrapping %v", i, g.Err, w.Err)
		}
		g.Err, w.Err = nil, nil
		if g != w {
			t.Errorf("event %d:\ngot  %s raw=%q\nwant %s raw=%q", i, fmtEvent(g), g.Raw, fmtEvent(w), w.Raw)
		}
	}
}

func fmtEvents(evs []Event) string {
	s := make([]string, len(evs))
	for i, e := range evs {
		s[i] = fmtEvent(e)
	}
	return "[" + strings.Join(s, "; ") + "]"
}

// fmtEvent writes an event in the notation docs/shoe-protocol.md uses for
// its examples: the kind, then key=value for each field that is set, in a
// fixed order. It is test code on purpose: the doc's text is the expected
// value and this only renders what the decoder produced.
func fmtEvent(e Event) string {
	var b strings.Builder
	b.WriteString(e.Kind.String())
	kv := func(k, v string) { fmt.Fprintf(&b, " %s=%s", k, v) }
	if e.Seq != 0 {
		kv("seq", strconv.FormatUint(uint64(e.Seq), 10))
	}
	if e.Card != (coup.Card{}) {
		kv("card", e.Card.String())
	}
	if e.Unreadable {
		b.WriteString(" unreadable")
	}
	if e.Burn {
		b.WriteString(" burn")
	}
	if e.Button != "" {
		kv("button", string(e.Button))
	}
	if e.Status != "" {
		kv("status", e.Status)
	}
	if e.Text != "" {
		kv("text", strconv.Quote(e.Text))
	}
	if e.Err != nil {
		kv("err", Reason(e.Err))
	}
	if e.Rejected != 0 {
		kv("rejected", strconv.Itoa(e.Rejected))
	}
	if e.Kind == KindGap {
		kv("from", strconv.FormatUint(uint64(e.GapFrom), 10))
		kv("to", strconv.FormatUint(uint64(e.GapTo), 10))
	}
	return b.String()
}

// decodeSplit feeds p to a fresh driver in pieces cut at the given offsets.
func decodeSplit(d Driver, p []byte, cuts ...int) []Event {
	var out []Event
	prev := 0
	for _, c := range cuts {
		out = append(out, d.Decode(p[prev:c])...)
		prev = c
	}
	return append(out, d.Decode(p[prev:])...)
}

// pendingOf exposes a driver's unfinished-input size to the tests.
func pendingOf(d Driver) int {
	switch d := d.(type) {
	case *V1:
		return d.pending()
	case *Beetek:
		return d.pending()
	}
	panic(fmt.Sprintf("pendingOf: unknown driver %T", d))
}

// maxPending is the most unfinished input each driver may hold.
var maxPending = map[string]int{
	"v1":     v1MaxSentence + rawMax,
	"beetek": beetekMaxSection + beetekMaxItem + rawMax,
}

// newRand is a seeded source, so property tests are repeatable.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x5eed)) }

var statusCodes = []string{"LID_OPEN", "LID_CLOSED", "SENSOR", "JAM", "E3", "low-light"}

// randomV1Event makes a random event AppendV1 can encode.
func randomV1Event(r *rand.Rand, seq uint32) Event {
	e := Event{Seq: seq}
	switch r.IntN(6) {
	case 0:
		e.Kind, e.Text = KindHello, "SHOE-"+strconv.Itoa(r.IntN(10000))
	case 1:
		e.Kind = KindCard
		if r.IntN(10) == 0 {
			e.Unreadable = true
		} else {
			e.Card = coup.CardAt(r.IntN(coup.CardCount))
		}
	case 2:
		e.Kind = KindCutCard
	case 3:
		e.Kind = KindButton
		e.Button = []Button{ButtonNewShoe, ButtonBurnDone, ButtonNoMoreBets, ButtonReveal}[r.IntN(4)]
	case 4:
		e.Kind, e.Status = KindStatus, statusCodes[r.IntN(len(statusCodes))]
		if r.IntN(2) == 0 {
			e.Text = "text, with a comma " + strconv.Itoa(r.IntN(100))
		}
	default:
		e.Kind = KindHeartbeat
	}
	return e
}

// randomNoise is 1 to 40 arbitrary bytes.
func randomNoise(r *rand.Rand) []byte {
	b := make([]byte, 1+r.IntN(40))
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return b
}
