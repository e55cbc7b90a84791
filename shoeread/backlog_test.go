package shoeread

import (
	"fmt"
	"testing"
	"time"

	"github.com/tablectl/tablectl/coup"
)

var t0 = time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)

func TestRejectLog(t *testing.T) {
	l := NewRejectLog()
	bad := Event{Kind: KindProtocolError, Err: fmt.Errorf("%w: x", ErrChecksum), Rejected: 10, Raw: "$CARD,1,KH*00"}
	verbatim := 0
	for i := range 1000 { // a flood within one second
		if in, ok := l.Take(bad, t0.Add(time.Duration(i)*time.Microsecond)); ok {
			verbatim++
			if in.Kind != coup.InRejected || in.Rejected.Reason != "checksum" || in.Rejected.Raw != bad.Raw || in.Rejected.Count != 1 {
				t.Fatalf("verbatim %+v", in.Rejected)
			}
		}
	}
	if verbatim != RejectBurst {
		t.Fatalf("%d recorded one by one in a flood, want %d", verbatim, RejectBurst)
	}
	if _, ok := l.Summary(t0.Add(500*time.Millisecond), false); ok {
		t.Fatal("a summary before its second was over")
	}
	// A version mismatch is always recorded: it suspends the table.
	v := Event{Kind: KindProtocolError, Err: fmt.Errorf("%w: 2", ErrVersion), Raw: "$HELO,1,2,X*00"}
	if in, ok := l.Take(v, t0.Add(time.Millisecond)); !ok || in.Rejected.Reason != coup.ReasonVersion {
		t.Fatalf("version mismatch counted, not recorded: %+v %v", in, ok)
	}
	in, ok := l.Summary(t0.Add(1100*time.Millisecond), false)
	if !ok || in.Rejected.Count != 1000-RejectBurst || in.Rejected.Bytes != 10*(1000-RejectBurst) || in.Rejected.Reasons["checksum"] != 1000-RejectBurst {
		t.Fatalf("summary %+v %v", in.Rejected, ok)
	}
	if _, ok := l.Summary(t0.Add(time.Hour), true); ok {
		t.Fatal("a second summary of nothing")
	}
	// The budget refills at one a second.
	if _, ok := l.Take(bad, t0.Add(3*time.Second)); !ok {
		t.Fatal("no verbatim row after three quiet seconds")
	}
}

func TestBacklog(t *testing.T) {
	hb := Event{Kind: KindHeartbeat}
	card := Event{Kind: KindCard}
	since := t0
	opened := t0.Add(20 * time.Second)
	arrived := opened.Add(time.Millisecond)
	b := NewBacklog(since, opened)
	// Five seconds of heartbeats, a card, three more, a card: read at once.
	evs := []Event{hb, hb, hb, hb, hb, card, hb, hb, hb, card}
	times, ended := b.Stamp(evs, arrived)
	if ended || times[5] != since.Add(5*time.Second) || times[9] != since.Add(8*time.Second) {
		t.Fatalf("times %v ended %v", times, ended)
	}
	if b.Late() != 2 {
		t.Fatalf("late %d, want 2", b.Late())
	}
	// The next read comes after a pause: the buffer was drained.
	if times, ended := b.Stamp([]Event{card}, arrived.Add(time.Second)); times != nil || !ended || !b.Done() {
		t.Fatalf("after a pause: times %v ended %v", times, ended)
	}
	// A new trail has no backlog.
	if !NewBacklog(time.Time{}, opened).Done() {
		t.Fatal("a backlog on a new trail")
	}
	// Heartbeats that catch up with the present end it, times never
	// ahead of arrival.
	b = NewBacklog(opened.Add(-1500*time.Millisecond), opened)
	times, ended = b.Stamp([]Event{hb, hb, card}, arrived)
	if !ended || times[2].After(arrived) {
		t.Fatalf("caught up: times %v ended %v", times, ended)
	}
}
