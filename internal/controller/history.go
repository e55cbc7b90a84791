package controller

import (
	"context"

	"github.com/tablectl/tablectl/audit"
)

// StartInfo says how the table was rebuilt at start: from which snapshot
// row, with how many rows verified and replayed.
func (ctl *Controller) StartInfo() audit.StartInfo { return ctl.rec.Start() }

// WaitHistoryCheck waits for the background verification of the history
// before the snapshot the start used (see audit.Recorder.WaitHistoryCheck).
func (ctl *Controller) WaitHistoryCheck(ctx context.Context) (done bool, err error) {
	return ctl.rec.WaitHistoryCheck(ctx)
}
