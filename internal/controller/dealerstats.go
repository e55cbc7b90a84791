package controller

import (
	"context"
	"fmt"
	"sync"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/audit/stats"
)

// dealerStats keeps the figures per dealer for the pit view: read from the
// trail at start, then kept up by every commit.
type dealerStats struct {
	mu  sync.Mutex
	col *stats.Collator
	err error // the first row the figures could not take
}

// loadDealerStats reads the trail's rows the figures need.
func loadDealerStats(ctx context.Context, st *audit.Store) (*dealerStats, error) {
	col, err := stats.NewCollator(stats.Options{By: stats.ByDealer})
	if err != nil {
		return nil, err
	}
	for r, err := range st.Events(ctx, audit.Query{Kinds: stats.Kinds}) {
		if err != nil {
			return nil, fmt.Errorf("dealer statistics: %w", err)
		}
		if err := col.Take(r); err != nil {
			return nil, err
		}
	}
	return &dealerStats{col: col}, nil
}

// commit takes a commit's rows; it never blocks for long (OnCommit).
func (d *dealerStats) commit(c audit.Commit) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range c.Records {
		if err := d.col.Take(r); err != nil && d.err == nil {
			d.err = err
		}
	}
}

// report is the figures now.
func (d *dealerStats) report() (stats.Report, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return stats.Report{}, d.err
	}
	return d.col.Report(), nil
}
