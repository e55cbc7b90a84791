package audit

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"sync"
	"time"

	"github.com/tablectl/tablectl/base/threadprio"
	"github.com/tablectl/tablectl/coup"
)

// historyCheck is the full verification a recorder runs in the background
// after starting from a snapshot: the chain, checkpoints and every
// checkpoint's signature of the whole trail (Verify with EverySignature), and a replay of every row from row 1 through the
// rules, which also holds every snapshot row to the table the rows before
// it build. It runs on a thread of its own at the lowest CPU priority, so
// it takes what the table does not use. A finding suspends the table as
// rows another program wrote do: the store refuses further writes, and
// OnWriteFailure raises trail_tampered naming the first finding.
type historyCheck struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	finished bool
	err      error // the finding or failure, nil when the history is clean
	took     time.Duration
}

func (h *historyCheck) start(r *Recorder, keys []ed25519.PublicKey, snapSeq int64) {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan struct{})
	go func() {
		defer close(h.done)
		threadprio.Lowest()
		began := time.Now()
		err := checkHistory(ctx, r.store.TrailPath(), r.opt.Config, keys)
		if ctx.Err() != nil {
			return // stopped by Close: not a finding
		}
		h.mu.Lock()
		h.finished, h.err, h.took = true, err, time.Since(began)
		h.mu.Unlock()
		if err == nil {
			r.log.Info("audit trail history verified in the background", "path", r.store.TrailPath(), "snapshot", snapSeq, "took", time.Since(began).Round(time.Millisecond))
			return
		}
		r.historyFailed(err)
	}()
}

func (h *historyCheck) stop() {
	if h.cancel != nil {
		h.cancel()
		<-h.done
	}
}

// checkHistory verifies and replays the whole trail at path. The replay
// reads on this goroutine (no Prefetch), so all of it runs at the priority
// of this thread.
func checkHistory(ctx context.Context, path string, cfg coup.TableConfig, keys []ed25519.PublicKey) error {
	rd, err := OpenReader(ctx, path)
	if err != nil {
		return fmt.Errorf("history check: %w", err)
	}
	defer rd.Close()
	// Every signature, not only the newest checkpoint's as a start checks:
	// this runs at nice 19 off the table's path, and it is the one place a
	// checkpoint badly signed by the signer itself (behind a valid chain,
	// so nothing else shows it) is found without someone asking.
	rep, err := rd.Verify(ctx, VerifyOptions{PublicKeys: keys, EverySignature: true})
	if err != nil {
		return fmt.Errorf("history check: %w", err)
	}
	if !rep.OK() {
		if len(rep.Findings) == 0 {
			return &HistoryError{Path: path, Kind: "unverifiable", Detail: rep.Unverifiable, Count: 1}
		}
		f := rep.Findings[0]
		return &HistoryError{Path: path, Seq: f.Seq, Kind: string(f.Kind), Detail: f.Detail, Count: int64(len(rep.Findings)) + rep.Omitted}
	}
	// The rows Verify saw: rows committed since are the live table's.
	rp, err := NewReplayer(cfg, ReplayVisitor{})
	if err != nil {
		return fmt.Errorf("history check: %w", err)
	}
	for rec, err := range rd.Events(ctx, Query{To: rep.Head.Seq}) {
		if err != nil {
			return fmt.Errorf("history check: %w", err)
		}
		rp.Row(rec)
	}
	rp.Finish()
	if d := rp.Differences(); len(d) > 0 {
		return &HistoryError{Path: path, Seq: d[0].Seq, Kind: "replay_differs", Detail: d[0].Detail, Count: int64(len(d))}
	}
	return nil
}

// HistoryError is what the background check of the history found. It
// matches ErrHistory, ErrTampered and ErrWriteFailed: nothing more is
// recorded or signed.
type HistoryError struct {
	Path   string
	Seq    int64
	Kind   string // the first finding's kind, or "replay" for a difference
	Detail string
	Count  int64 // findings in all
}

func (e *HistoryError) Error() string {
	return fmt.Sprintf("%v: %s: %d findings, first at seq %d: %s: %s: nothing more is recorded or signed", ErrHistory, e.Path, e.Count, e.Seq, e.Kind, e.Detail)
}

// Is makes a HistoryError match ErrHistory, ErrTampered and ErrWriteFailed.
func (e *HistoryError) Is(target error) bool {
	return target == ErrHistory || target == ErrTampered || target == ErrWriteFailed
}

// historyFailed suspends the table on a finding in its history.
func (r *Recorder) historyFailed(err error) {
	r.log.Error("audit trail history fails verification: the table is suspended and nothing more is recorded or signed", "path", r.store.TrailPath(), "err", err)
	r.store.quarantine(err)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail(err)
}

// HistoryCheck reports the background check of the history: done is false
// while it runs (or when none was needed); err is what it found.
func (r *Recorder) HistoryCheck() (done bool, err error) {
	r.history.mu.Lock()
	defer r.history.mu.Unlock()
	return r.history.finished, r.history.err
}

// WaitHistoryCheck waits for the background check of the history, if one
// runs, and returns what HistoryCheck then says.
func (r *Recorder) WaitHistoryCheck(ctx context.Context) (bool, error) {
	if r.history.done == nil {
		return false, nil
	}
	select {
	case <-r.history.done:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	return r.HistoryCheck()
}
