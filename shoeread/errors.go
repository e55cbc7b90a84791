package shoeread

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tablectl/tablectl/coup"
)

// Why bytes were rejected. A protocol-error event's Err wraps one of these
// (or coup.ErrBadCard), so callers can count rejections by reason with
// errors.Is or Reason.
var (
	// ErrNoise is bytes outside any sentence or token: line noise, or the
	// tail of something already rejected.
	ErrNoise = errors.New("line noise")
	// ErrFraming is a sentence or token cut short or badly delimited: no
	// checksum, a checksum that is not two hex digits, CR without LF, a new
	// start byte before the end.
	ErrFraming = errors.New("bad framing")
	// ErrChecksum is a v1 sentence whose checksum does not match its bytes.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrOversize is a sentence or token longer than the protocol allows.
	ErrOversize = errors.New("too long")
	// ErrNonPrintable is a control or non-ASCII byte inside a sentence or token.
	ErrNonPrintable = errors.New("non-printable byte")
	// ErrUnknownType is a sentence type, item or section the driver does not know.
	ErrUnknownType = errors.New("unknown type")
	// ErrMalformed is a known sentence with missing, extra or bad fields.
	ErrMalformed = errors.New("malformed sentence")
	// ErrBadSeq is a sequence number that is zero, not decimal or too large.
	ErrBadSeq = errors.New("bad sequence number")
	// ErrVersion is a HELO announcing a protocol version the driver does not speak.
	ErrVersion = errors.New("unsupported protocol version")
	// ErrDuplicate is a sentence carrying the same sequence number as the one
	// before it, and the same content (reported by the Sequencer; the
	// sentence is not delivered twice).
	ErrDuplicate = errors.New("duplicate sequence number")
	// ErrSeqReused is a sentence carrying the sequence number of the one
	// before it with other content (reported by the Sequencer, which
	// delivers the sentence all the same: one of the two is not what the
	// shoe sent, and a card either names may be in play; the table
	// suspends).
	ErrSeqReused = errors.New("sequence number reused with other content")
	// ErrSeqBackwards is a sequence number lower than expected without a HELO
	// announcing a restart (reported by the Sequencer).
	ErrSeqBackwards = errors.New("sequence number went backwards")
)

// reasons names every rejection reason, in the order Reason tries them.
var reasons = []struct {
	err  error
	name string
}{
	{ErrNoise, "noise"},
	{ErrFraming, "framing"},
	{ErrChecksum, "checksum"},
	{ErrOversize, "oversize"},
	{ErrNonPrintable, "non_printable"},
	{ErrUnknownType, "unknown_type"},
	{ErrMalformed, "malformed"},
	{ErrBadSeq, "bad_seq"},
	{ErrVersion, "version"},
	{ErrDuplicate, "duplicate"},
	{ErrSeqReused, coup.ReasonSeqReused},
	{ErrSeqBackwards, "backwards"},
	{coup.ErrBadCard, "bad_card"},
}

// Reason names why a protocol-error event's bytes were rejected ("checksum",
// "noise", "bad_card", ...), a short stable label for metrics and logs. It
// returns "other" for an error that wraps none of this package's reasons and
// "" for nil.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return "other"
}

// rawMax bounds the bytes of a rejected run kept in Event.Raw: one maximal
// v1 sentence is enough to see what went wrong without storing a flood.
const rawMax = v1MaxSentence

// maxRejectRun bounds one rejected run: a flood of noise is reported every
// maxRejectRun bytes rather than once at its end, so the controller hears of
// it while it lasts.
const maxRejectRun = 1024

// rejectRun accumulates one run of rejected bytes until it is reported.
type rejectRun struct {
	n       int    // bytes in the run
	head    []byte // its first rawMax bytes, for Event.Raw
	clipped bool   // bytes were left out of head for want of room
	err     error  // why; nil until the run starts
}

// active reports whether a run has started.
func (r *rejectRun) active() bool { return r.n > 0 }

// begin starts a run for the reason err, unless one is already under way
// (then the first reason stands).
func (r *rejectRun) begin(err error) {
	if r.n == 0 {
		r.err = err
	}
}

// add appends bytes to the run.
func (r *rejectRun) add(p ...byte) {
	r.n += len(p)
	room := rawMax - len(r.head)
	if len(p) > room {
		r.clipped = true
	}
	r.head = append(r.head, p[:min(max(room, 0), len(p))]...)
}

// full reports whether the run has reached maxRejectRun and must be reported.
func (r *rejectRun) full() bool { return r.n >= maxRejectRun }

// flush reports the run, if any, as one protocol-error event and resets it.
func (r *rejectRun) flush(out []Event, st *Stats) []Event {
	if r.n == 0 {
		return out
	}
	raw := escapeRaw(r.head)
	if r.clipped {
		raw += "..."
	}
	err := r.err
	if errors.Is(err, ErrNoise) {
		// Noise has no sentence to name, so say how much there was.
		err = fmt.Errorf("%w: %d bytes outside any sentence", err, r.n)
	}
	out = append(out, Event{Kind: KindProtocolError, Err: err, Rejected: r.n, Raw: raw})
	st.RejectedRuns++
	st.RejectedBytes += uint64(r.n)
	r.n = 0
	r.head = r.head[:0]
	r.clipped = false
	r.err = nil
	return out
}

// escapeRaw writes bytes from the line for a log or an audit row: printable
// ASCII as is, everything else as a Go escape, so a rejected run never puts
// control bytes or invalid UTF-8 into a record.
func escapeRaw(p []byte) string {
	var b strings.Builder
	b.Grow(len(p))
	for _, c := range p {
		switch {
		case c == '\\':
			b.WriteString(`\\`)
		case c >= 0x20 && c <= 0x7e:
			b.WriteByte(c)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		default:
			fmt.Fprintf(&b, `\x%02x`, c)
		}
	}
	return b.String()
}

// printable reports whether c is printable ASCII (space to tilde).
func printable(c byte) bool { return c >= 0x20 && c <= 0x7e }

// clipRaw shortens text quoted in an error message.
func clipRaw(s string) string {
	const max = 24
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
