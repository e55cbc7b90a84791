package shoeread

import "time"

// HeartbeatEvery is how often a v1 shoe sends HB (docs/shoe-protocol.md,
// section 4.6): at least once a second, idle or dealing.
const HeartbeatEvery = time.Second

// BacklogDrained is the pause between two reads that says the port's
// buffer is empty: a backlog comes back to back, in reads microseconds
// apart.
const BacklogDrained = 250 * time.Millisecond

// Backlog gives the sentences that waited in the port's buffer while the
// controller was down the time the shoe sent them, estimated from the
// heartbeats between them (one a second), so that the table judges each
// at its own time: a NOMOREBETS pressed after the result time, read in a
// burst after a restart, closes the next coup's betting instead of landing
// in the old result. It ends when the buffer is drained (a pause between
// reads) or the heartbeats have caught up with the present; after that
// every sentence is stamped when it is read. Not safe for concurrent use.
type Backlog struct {
	shoe     time.Time // the shoe's time as the heartbeats tell it
	lastRead time.Time
	done     bool
	late     int
}

// NewBacklog starts estimating from since, when the controller last
// recorded anything (the shoe's buffer holds what came after), for a port
// opened at opened. A zero since (a new trail) has no backlog.
func NewBacklog(since, opened time.Time) *Backlog {
	return &Backlog{shoe: since, lastRead: opened, done: since.IsZero()}
}

// Stamp returns, for each event of one read that arrived at arrived, the
// time the shoe sent it, or the zero time once the backlog is over (the
// recorder then stamps it on arrival). ended is true for the read that
// ended the backlog.
func (b *Backlog) Stamp(evs []Event, arrived time.Time) (times []time.Time, ended bool) {
	if b.done {
		return nil, false
	}
	if arrived.Sub(b.lastRead) > BacklogDrained {
		b.done = true
		return nil, true
	}
	b.lastRead = arrived
	times = make([]time.Time, len(evs))
	for i, e := range evs {
		if e.Kind == KindHeartbeat {
			b.shoe = b.shoe.Add(HeartbeatEvery)
		}
		t := b.shoe
		if t.After(arrived) {
			t = arrived
		}
		times[i] = t
		if e.Kind != KindHeartbeat && arrived.Sub(t) >= HeartbeatEvery {
			b.late++
		}
	}
	if !arrived.After(b.shoe.Add(HeartbeatEvery)) {
		b.done = true
		return times, true
	}
	return times, false
}

// Done reports whether the backlog is over.
func (b *Backlog) Done() bool { return b.done }

// End ends the backlog (nothing came).
func (b *Backlog) End() { b.done = true }

// Late is how many sentences (heartbeats aside) came at least a heartbeat
// after the shoe sent them.
func (b *Backlog) Late() int { return b.late }
