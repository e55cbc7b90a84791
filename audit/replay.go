package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"sync"
	"time"

	"github.com/tablectl/tablectl/coup"
)

// Kinds of row the controller writes besides the table's inputs and events.
const (
	// KindConfig records the table configuration in force from this row on.
	KindConfig = "ctl.config"
	// KindStart records that a controller started on this trail.
	KindStart = "ctl.start"
	// KindRejected records a command refused before it reached the table
	// (forged, stale, replayed, malformed).
	KindRejected = "ctl.command_rejected"
)

// Difference is a row whose recorded content is not what the rules derive
// from the inputs before it.
type Difference struct {
	Seq    int64  `json:"seq"`
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

// ReplayVisitor sees the replay as it goes. Any field may be nil.
type ReplayVisitor struct {
	// Input is called after each input row is applied, with the events the
	// rules derived from it.
	Input func(rec Record, in coup.Input, derived []coup.Event, t *coup.Table)
	// Other is called for every row that is neither an input nor derived.
	Other func(rec Record)
}

// Replayer runs a trail back through the rules: every input row is applied to
// a coup.Table and the events the rules derive are compared, byte for byte in
// canonical JSON, with the rows recorded after it. Restart recovery and
// tablectl replay are this same code.
type Replayer struct {
	table   *coup.Table
	want    []Event // events derived and not yet matched by rows
	wantAt  int64   // seq of the input row that derived them
	diffs   []Difference
	visitor ReplayVisitor
	maxDiff int
	rows    int64
	lastAt  time.Time // the last input's time, as a snapshot row records it
	enc     *canonEncoder
	fast    []byte // appendEventJSON's buffer

	// fresh: no row yet, and the table is a new one (not a snapshot's).
	// headless: the rows began after row 1 (a trail whose older segments
	// are archived): they are skipped up to the first snapshot, which gives
	// the table.
	fresh, headless bool
}

// NewReplayer starts a replay. cfg is the configuration to use until the
// trail records one (KindConfig rows take over as they come).
func NewReplayer(cfg coup.TableConfig, v ReplayVisitor) (*Replayer, error) {
	t, err := coup.NewTable(cfg)
	if err != nil {
		return nil, err
	}
	return &Replayer{table: t, visitor: v, maxDiff: 1000, enc: newCanonEncoder(), fresh: true}, nil
}

// Table is the table as rebuilt so far.
func (r *Replayer) Table() *coup.Table { return r.table }

// Differences are the rows that did not match, in order (at most 1000).
func (r *Replayer) Differences() []Difference { return r.diffs }

// Rows counts the rows replayed.
func (r *Replayer) Rows() int64 { return r.rows }

func (r *Replayer) differ(rec Record, format string, args ...any) {
	if len(r.diffs) < r.maxDiff {
		r.diffs = append(r.diffs, Difference{Seq: rec.Seq, Kind: rec.Kind, Detail: fmt.Sprintf(format, args...)})
	}
}

// Row replays one row. Rows must come in sequence order.
func (r *Replayer) Row(rec Record) {
	r.rows++
	if r.fresh {
		r.fresh, r.headless = false, rec.Seq > 1
	}
	if r.headless {
		r.startAt(rec)
		return
	}
	if coup.IsInput(rec.Kind) {
		r.flush(rec.Seq)
		var in coup.Input
		if err := json.Unmarshal(rec.Body, &in); err != nil {
			r.differ(rec, "input body does not decode: %v", err)
			return
		}
		if string(in.Kind) != rec.Kind {
			r.differ(rec, "row kind %s but body kind %s", rec.Kind, in.Kind)
			return
		}
		derived := r.table.Apply(in)
		r.lastAt = in.At
		r.want = tableEvents(derived)
		r.wantAt = rec.Seq
		if r.visitor.Input != nil {
			r.visitor.Input(rec, in, derived, r.table)
		}
		return
	}
	if strings.HasPrefix(rec.Kind, "ctl.") {
		r.flush(rec.Seq)
		if rec.Kind == KindConfig {
			var cfg coup.TableConfig
			if err := json.Unmarshal(rec.Body, &cfg); err != nil {
				r.differ(rec, "config does not decode: %v", err)
			} else if err := r.table.Reconfigure(cfg); err != nil {
				r.differ(rec, "config refused: %v", err)
			}
		}
		if rec.Kind == KindSnapshot {
			if err := r.snapshotMatches(rec); err != nil {
				r.differ(rec, "%v", err)
			}
		}
		if r.visitor.Other != nil {
			r.visitor.Other(rec)
		}
		return
	}
	if len(r.want) == 0 {
		r.differ(rec, "a %s row that no input derives", rec.Kind)
		return
	}
	w := r.want[0]
	r.want = r.want[1:]
	if ev, ok := w.Body.(coup.Event); ok && w.Kind == rec.Kind && w.Shoe == rec.Shoe && w.Coup == rec.Coup {
		// The fast path: the event written directly, as it nearly always
		// matches. Anything else is decided by the encoder below.
		var fine bool
		if r.fast, fine = appendEventJSON(r.fast[:0], &ev); fine && bytes.Equal(r.fast, rec.Body) {
			return
		}
	}
	body, err := r.enc.encode(w.Body)
	if err != nil {
		r.differ(rec, "derived event does not encode: %v", err)
		return
	}
	switch {
	case w.Kind != rec.Kind:
		r.differ(rec, "recorded %s, the rules derive %s from input %d", rec.Kind, w.Kind, r.wantAt)
	case w.Shoe != rec.Shoe || w.Coup != rec.Coup:
		r.differ(rec, "recorded shoe %d coup %d, the rules derive shoe %d coup %d", rec.Shoe, rec.Coup, w.Shoe, w.Coup)
	case !bytes.Equal(body, rec.Body):
		r.differ(rec, "recorded %s, the rules derive %s", rec.Body, body)
	}
}

// flush reports derived events that no row recorded.
func (r *Replayer) flush(seq int64) {
	for _, w := range r.want {
		r.diffs = append(r.diffs, Difference{Seq: seq, Kind: w.Kind,
			Detail: fmt.Sprintf("the rules derive a %s from input %d that the trail does not record", w.Kind, r.wantAt)})
	}
	r.want = nil
}

// Finish ends the replay; derived events with no row are differences.
func (r *Replayer) Finish() {
	if r.headless && len(r.diffs) < r.maxDiff {
		// Nothing was replayed: say so rather than report a clean replay.
		r.diffs = append(r.diffs, Difference{Kind: KindSnapshot, Detail: "the rows begin after row 1 and hold no snapshot to start the table from: none was replayed"})
	}
	r.flush(r.rows + 1)
}

// Replay runs every row of rows through a Replayer.
func Replay(rows iter.Seq2[Record, error], cfg coup.TableConfig, v ReplayVisitor) (*Replayer, error) {
	rp, err := NewReplayer(cfg, v)
	if err != nil {
		return nil, err
	}
	for rec, err := range Prefetch(rows) {
		if err != nil {
			return rp, err
		}
		rp.Row(rec)
	}
	rp.Finish()
	return rp, nil
}

// startAt skips a row of a replay that began after row 1, until the first
// snapshot, whose table the replay takes.
func (r *Replayer) startAt(rec Record) {
	if rec.Kind != KindSnapshot {
		return
	}
	t, lastAt, err := RestoreSnapshot(rec)
	if err != nil {
		r.differ(rec, "the first snapshot of the rows does not restore: %v", err)
		return
	}
	r.table, r.lastAt, r.headless = t, lastAt, false
	if r.visitor.Other != nil {
		r.visitor.Other(rec)
	}
}

// Headless reports whether the replay began after row 1 and has not yet
// reached a snapshot to start from.
func (r *Replayer) Headless() bool { return r.headless }

// Prefetch reads rows on a goroutine of its own, a few hundred at a time,
// so that reading the file (SQLite, through cgo) and what the caller does
// with each row run on two cores at once: replay is what a controller's
// restart waits for. Rows come out in the order they went in; stopping
// early stops the reader.
func Prefetch(rows iter.Seq2[Record, error]) iter.Seq2[Record, error] {
	// 256 rows a hand-over measured best: larger batches fall out of cache.
	const batch = 256
	type chunk struct {
		recs []Record
		err  error
	}
	return func(yield func(Record, error) bool) {
		out := make(chan chunk, 4)
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(out)
			send := func(c chunk) bool {
				select {
				case out <- c:
					return true
				case <-done:
					return false
				}
			}
			buf := make([]Record, 0, batch)
			for rec, err := range rows {
				if err != nil {
					if send(chunk{recs: buf}) {
						send(chunk{err: err})
					}
					return
				}
				buf = append(buf, rec)
				if len(buf) == batch {
					if !send(chunk{recs: buf}) {
						return
					}
					buf = make([]Record, 0, batch)
				}
			}
			send(chunk{recs: buf})
		}()
		defer wg.Wait()
		defer close(done)
		for c := range out {
			for _, rec := range c.recs {
				if !yield(rec, nil) {
					return
				}
			}
			if c.err != nil {
				yield(Record{}, c.err)
				return
			}
		}
	}
}

// tableEvents turns the table's events into audit events.
func tableEvents(evs []coup.Event) []Event {
	out := make([]Event, len(evs))
	for i, e := range evs {
		out[i] = Event{Kind: string(e.Kind), Shoe: int64(e.Shoe), Coup: int64(e.Coup), Body: e}
	}
	return out
}

// inputEvent turns an input into its audit event.
func inputEvent(in coup.Input, t *coup.Table) Event {
	return Event{Kind: string(in.Kind), Shoe: int64(t.ShoeNumber()), Coup: int64(t.CoupNumber()), Body: in}
}
