package floor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tablectl/tablectl/base/clock"
)

// Alerts of the witness's own footing: the floor's, not a table's
// (published on floor/alerts and logged; Table is empty).
const (
	// AlertStreamLost: a stream or the shared consumer the witness reads
	// is gone or changed (deleted by someone the broker let, its
	// subjects or limits changed). Resolved once it is back as made.
	AlertStreamLost AlertKind = "stream_lost"
	// AlertWitnessStalled: messages wait in the stream and no witness
	// has acknowledged any for StallAfter.
	AlertWitnessStalled AlertKind = "witness_stalled"
)

// How often the witness checks its streams and its consumer (and at
// once after a fetch fails), and how long the consumer may stand still
// with messages waiting before it is stalled.
const (
	GuardEvery = 5 * time.Second
	StallAfter = 30 * time.Second
)

// guardState is what the guard knows between two checks.
type guardState struct {
	lost     map[string]bool // what is alerted lost, by name
	floorAck uint64          // the consumer's acknowledgement floor last seen
	movedAt  time.Time       // when it last moved, or nothing waited
	stalled  bool
}

// guardLoop checks the streams and the consumer every GuardEvery, and at
// once when kicked (a fetch failed), until ctx is done.
func (w *Witness) guardLoop(ctx context.Context, kick <-chan struct{}) {
	t := w.cfg.Clock.NewTicker(GuardEvery)
	defer t.Stop()
	g := &guardState{lost: map[string]bool{}, movedAt: w.cfg.Clock.Now()}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-kick:
		}
		w.guard(ctx, g)
	}
}

// guard checks once: each stream and the consumer there as the witness
// made them (made again where missing, set back where changed, as far as
// the witness's login may), and the consumer moving while messages wait.
func (w *Witness) guard(ctx context.Context, g *guardState) {
	ctx, cancel := context.WithTimeout(ctx, GuardEvery)
	defer cancel()
	want := StreamConfig(w.cfg.Stream, w.cfg.Subjects, w.cfg.Replicas, w.cfg.MaxAge)
	s, why := w.checkStream(ctx, want)
	w.lostOrBack(g, "stream "+w.cfg.Stream, why)
	sw := statusStreamConfig(w.cfg.StatusStream, w.cfg.Subjects, w.cfg.Replicas)
	_, swhy := w.checkStream(ctx, sw)
	w.lostOrBack(g, "stream "+w.cfg.StatusStream, swhy)
	if s == nil {
		return
	}
	cons, cwhy := w.checkConsumer(ctx, s)
	w.lostOrBack(g, "consumer "+w.cfg.Consumer, cwhy)
	if cons != nil {
		w.checkStall(ctx, g, cons)
	}
}

// checkStream finds the stream as want says, or makes it so; it returns
// the stream (nil: not there) and what was wrong ("" nothing).
func (w *Witness) checkStream(ctx context.Context, want jetstream.StreamConfig) (jetstream.Stream, string) {
	s, err := w.js.Stream(ctx, want.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		s, err = w.js.CreateStream(ctx, want)
		if err != nil {
			return nil, fmt.Sprintf("stream %s is gone, and the witness could not make it again: %v", want.Name, err)
		}
		w.rebase(s)
		return s, fmt.Sprintf("stream %s was gone; made again (what it held is lost: the tables' gaps are asked for again)", want.Name)
	case err != nil:
		return nil, fmt.Sprintf("stream %s: %v", want.Name, err)
	}
	have := s.CachedInfo().Config
	if diff := streamDiff(have, want); diff != "" {
		if _, err := w.js.UpdateStream(ctx, want); err != nil {
			return s, fmt.Sprintf("stream %s changed (%s), and the witness could not set it back: %v", want.Name, diff, err)
		}
		return s, fmt.Sprintf("stream %s changed (%s); set back", want.Name, diff)
	}
	return s, ""
}

// streamDiff names what of have is not as want says: what the witness
// relies on (which subjects are kept, how big a message, for how long).
func streamDiff(have, want jetstream.StreamConfig) string {
	a, b := slices.Clone(have.Subjects), slices.Clone(want.Subjects)
	slices.Sort(a)
	slices.Sort(b)
	switch {
	case !slices.Equal(a, b):
		return fmt.Sprintf("subjects %v, want %v", have.Subjects, want.Subjects)
	case limit(int64(have.MaxMsgSize)) != limit(int64(want.MaxMsgSize)):
		return fmt.Sprintf("max_msg_size %d, want %d", have.MaxMsgSize, want.MaxMsgSize)
	case want.MaxAge > 0 && have.MaxAge != want.MaxAge:
		return fmt.Sprintf("max_age %s, want %s", have.MaxAge, want.MaxAge)
	case limit(have.MaxMsgsPerSubject) != limit(want.MaxMsgsPerSubject):
		return fmt.Sprintf("max_msgs_per_subject %d, want %d", have.MaxMsgsPerSubject, want.MaxMsgsPerSubject)
	case have.Storage != want.Storage:
		return fmt.Sprintf("storage %s, want %s", have.Storage, want.Storage)
	}
	return ""
}

// limit is a JetStream limit with "none" one way (the server says -1
// for the 0 it was given).
func limit(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

// checkConsumer finds the shared consumer on s as the witness made it,
// or makes it again.
func (w *Witness) checkConsumer(ctx context.Context, s jetstream.Stream) (jetstream.Consumer, string) {
	c, err := s.Consumer(ctx, w.cfg.Consumer)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		c, pinned, err := ensureConsumer(ctx, s, w.nc.ConnectedServerVersion(), w.cfg)
		if err != nil {
			return nil, fmt.Sprintf("consumer %s is gone, and the witness could not make it again: %v", w.cfg.Consumer, err)
		}
		w.setConsumer(s, c, pinned)
		return c, fmt.Sprintf("consumer %s was gone; made again (the stream's messages come again, stored once)", w.cfg.Consumer)
	case err != nil:
		return nil, fmt.Sprintf("consumer %s: %v", w.cfg.Consumer, err)
	}
	cc := c.CachedInfo().Config
	want := jetstream.ConsumerConfig{}
	if w.cfg.Group != "" {
		want.FilterSubjects = w.cfg.Subjects.TablesStream(w.cfg.Registry.GroupTables(w.cfg.Group))
	}
	if cc.DeliverPolicy != jetstream.DeliverAllPolicy || !filtersFit(cc, want) ||
		(w.isPinned() && !isPinned(cc)) || (!w.isPinned() && cc.AckPolicy != jetstream.AckExplicitPolicy) {
		return c, fmt.Sprintf("consumer %s changed (deliver %s, ack %s, filter %q%v): it may skip rows; delete it to have it made again", w.cfg.Consumer, cc.DeliverPolicy, cc.AckPolicy, cc.FilterSubject, cc.FilterSubjects)
	}
	// The consumer the witness fetches from is kept: a pinned consumer's
	// handle holds the pin, and a new handle would lose it.
	if _, have := w.consumer(); have == nil || have.CachedInfo().Created != c.CachedInfo().Created {
		w.setConsumer(s, c, w.isPinned())
	}
	return c, ""
}

// checkStall finds the consumer standing still while messages wait.
func (w *Witness) checkStall(ctx context.Context, g *guardState, c jetstream.Consumer) {
	ci, err := c.Info(ctx)
	if err != nil {
		return
	}
	now := w.cfg.Clock.Now()
	waiting := ci.NumPending+uint64(ci.NumAckPending) > 0
	if !waiting || ci.AckFloor.Stream != g.floorAck {
		g.floorAck, g.movedAt = ci.AckFloor.Stream, now
		if g.stalled {
			g.stalled = false
			w.floorAlert("resolved", AlertWitnessStalled, fmt.Sprintf("the witnesses move again (acknowledged to stream seq %d)", ci.AckFloor.Stream))
		}
		return
	}
	if !g.stalled && now.Sub(g.movedAt) >= StallAfter {
		g.stalled = true
		w.floorAlert("raised", AlertWitnessStalled, fmt.Sprintf("no message acknowledged for %s while %d wait and %d are given out (acknowledged to stream seq %d): the tables are not being witnessed",
			now.Sub(g.movedAt).Round(time.Second), ci.NumPending, ci.NumAckPending, ci.AckFloor.Stream))
	}
}

// lostOrBack raises stream_lost for what is wrong, once until it is
// right again, and resolves it then.
func (w *Witness) lostOrBack(g *guardState, name, why string) {
	switch {
	case why != "" && !g.lost[name]:
		g.lost[name] = true
		w.floorAlert("raised", AlertStreamLost, why)
	case why == "" && g.lost[name]:
		delete(g.lost, name)
		w.floorAlert("resolved", AlertStreamLost, name+" is back as the witness made it")
	}
}

// floorAlert publishes an alert of the floor itself.
func (w *Witness) floorAlert(state string, kind AlertKind, msg string) {
	if state == "raised" {
		w.log.Error("floor alert", "kind", kind, "message", msg)
	}
	w.publish([]Alert{{State: state, Kind: kind, Message: msg, Tamper: false, Witness: w.cfg.Name, At: w.cfg.Clock.Now().UTC()}})
}

// rebase: the stream was made again, its sequences start over.
func (w *Witness) rebase(s jetstream.Stream) {
	w.sm.Lock()
	w.stream = s
	w.sm.Unlock()
	w.mu.Lock()
	w.acked, w.ackedAt = 0, time.Time{}
	w.mu.Unlock()
}

// setConsumer makes c the consumer the witness fetches from.
func (w *Witness) setConsumer(s jetstream.Stream, c jetstream.Consumer, pinned bool) {
	w.sm.Lock()
	changed := w.cons == nil || w.cons.CachedInfo().Created != c.CachedInfo().Created
	w.stream, w.cons, w.pinned = s, c, pinned
	w.sm.Unlock()
	if changed {
		w.mu.Lock()
		w.acked, w.ackedAt = 0, time.Time{}
		w.mu.Unlock()
	}
}

// consumer is the consumer the witness fetches from, and its stream.
func (w *Witness) consumer() (jetstream.Stream, jetstream.Consumer) {
	w.sm.Lock()
	defer w.sm.Unlock()
	return w.stream, w.cons
}

func (w *Witness) isPinned() bool {
	w.sm.Lock()
	defer w.sm.Unlock()
	return w.pinned
}

// retry calls f until it succeeds, ctx is done or tries run out, waiting
// wait between tries on the clock; each try bounded by per.
func retry(ctx context.Context, clk clock.Clock, tries int, per, wait time.Duration, f func(context.Context) error) error {
	var err error
	for try := 0; try < tries; try++ {
		tctx, cancel := context.WithTimeout(ctx, per)
		err = f(tctx)
		cancel()
		if err == nil || ctx.Err() != nil || try == tries-1 {
			return err // no wait after the last try
		}
		if clock.Sleep(ctx, clk, wait) != nil {
			return err
		}
	}
	return err
}
