package controller

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/audit/stats"
	"github.com/tablectl/tablectl/base/threadprio"
	"github.com/tablectl/tablectl/display"
)

// dealerStats keeps the figures per dealer for the pit view: the trail's
// rows up to the head at start, read in the background at nice 19 once the
// controller runs (reading them before dealing made start-up grow with the
// history: 14-17 s on a 10M-row trail), then every commit. Commits that
// come while the history is read wait in pending, so every row is taken
// once and in order.
type dealerStats struct {
	upTo int64 // the rows load reads: seq 1 to upTo

	mu      sync.Mutex
	col     *stats.Collator // nil until the history is in it; commits then go straight in
	pending []audit.Record  // the rows of the figures' kinds committed before then, in order
	err     error           // the first row the figures could not take, or the history's read failure
}

// newDealerStats makes the figures of a trail whose head is upTo; load
// reads the history.
func newDealerStats(upTo int64) *dealerStats { return &dealerStats{upTo: upTo} }

// load reads the rows up to d.upTo (rows reads them; Store.Events with
// Query{To: d.upTo, Kinds: stats.Kinds}), on a thread of its own at nice
// 19, then takes the commits that came meanwhile. It returns early,
// leaving the figures unready, when ctx ends.
func (d *dealerStats) load(ctx context.Context, rows iter.Seq2[audit.Record, error]) error {
	threadprio.Lowest()
	hist, err := stats.NewCollator(stats.Options{By: stats.ByDealer})
	if err != nil {
		return err
	}
	var readErr error
	if d.upTo > 0 {
		for r, err := range rows {
			if err != nil {
				readErr = fmt.Errorf("dealer statistics: %w", err)
				break
			}
			if readErr = hist.Take(r); readErr != nil {
				break
			}
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil {
		d.err = readErr
	}
	d.col = hist
	d.take(d.pending)
	d.pending = nil
	return readErr
}

// commit takes a commit's rows; it never blocks for long (OnCommit).
func (d *dealerStats) commit(c audit.Commit) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.col == nil {
		for _, r := range c.Records {
			if slices.Contains(stats.Kinds, r.Kind) {
				d.pending = append(d.pending, r)
			}
		}
		return
	}
	d.take(c.Records)
}

// take gives rs to the figures, keeping the first row they could not
// take. The caller holds d.mu.
func (d *dealerStats) take(rs []audit.Record) {
	for _, r := range rs {
		if err := d.col.Take(r); err != nil && d.err == nil {
			d.err = err
		}
	}
}

// report is the figures now, or display.ErrNotReady while the history is
// read.
func (d *dealerStats) report() (stats.Report, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return stats.Report{}, d.err
	}
	if d.col == nil {
		return stats.Report{}, fmt.Errorf("%w: the dealer figures are being read from the trail's %d rows", display.ErrNotReady, d.upTo)
	}
	return d.col.Report(), nil
}

// loadDealerStats reads the history of the dealer figures (a part of Run).
func (ctl *Controller) loadDealerStats(ctx context.Context) {
	d := ctl.dealers.Load()
	began := time.Now()
	err := d.load(ctx, ctl.rec.Store().Events(ctx, audit.Query{To: d.upTo, Kinds: stats.Kinds}))
	switch {
	case ctx.Err() != nil:
	case err != nil:
		ctl.log.Error("dealer figures: the trail's rows could not be read; the pit view shows the error", "err", err)
	default:
		ctl.log.Info("dealer figures read from the trail", "rows_to", d.upTo, "took", time.Since(began).Round(time.Millisecond))
	}
}
