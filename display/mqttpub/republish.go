package mqttpub

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"time"

	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/base/mqttconn"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// RepublishOptions configure Republish.
type RepublishOptions struct {
	Client mqttconn.Client
	// Topics should name a replay prefix (tablectl/BAC-07/replay, say), so
	// nobody takes the replay for the live table.
	Topics Topics
	Table  string
	// Config is the table configuration until the rows record one.
	Config coup.TableConfig
	// Speed divides the recorded pauses: 1 is the recorded pace, 10 ten
	// times faster, 0 no pauses at all.
	Speed float64
	// MaxPause caps any one pause (after Speed), so a trail that sat idle
	// overnight does not hold the replay; 0 is no cap.
	MaxPause time.Duration
	Clock    clock.Clock
	// Window is how many publishes may be unacknowledged; 0 is 256.
	Window int
	Logger *slog.Logger
}

// Republish publishes stored rows again, as the live publisher did: every
// row on pit/events, its alerts and replies, and the retained topics (status
// says "replay") after each input, pausing between inputs as long as the
// trail recorded (divided by Speed). It rebuilds the table from the rows
// alone, so rows from the start of a shoe replay that shoe. It returns the
// number of rows published.
func Republish(ctx context.Context, opt RepublishOptions, rows iter.Seq2[audit.Record, error]) (int64, error) {
	if opt.Client == nil {
		return 0, fmt.Errorf("republish: no client")
	}
	if err := CheckPrefix(opt.Topics.Prefix); err != nil {
		return 0, err
	}
	if opt.Speed < 0 {
		return 0, fmt.Errorf("republish: speed %v: want 0 (no pauses) or more", opt.Speed)
	}
	opt.Clock = clock.Or(opt.Clock)
	if opt.Window <= 0 {
		opt.Window = 256
	}
	eng, err := newEngine(opt.Topics, opt.Table, "", "replay", opt.Config, opt.Logger)
	if err != nil {
		return 0, err
	}
	var inflight []mqttconn.Token
	send := func(m Message) error {
		if len(m.Payload) > boundOf(m.Topic) {
			// The live publisher's bound: a message the floor would refuse
			// is not sent (it would wedge the bridge).
			eng.log.Error("republish: message over the size bound, not published", "topic", m.Topic, "bytes", len(m.Payload), "bound", boundOf(m.Topic))
			return nil
		}
		inflight = append(inflight, opt.Client.Publish(m.Topic, m.QoS, m.Retained, m.Payload))
		for len(inflight) > opt.Window {
			if err := waitToken(ctx, inflight[0]); err != nil {
				return err
			}
			inflight = inflight[1:]
		}
		return nil
	}
	flush := func() error {
		for _, m := range eng.retainedMessages(false) {
			if err := send(m); err != nil {
				return err
			}
		}
		return nil
	}
	var n int64
	var prev time.Time
	for rec, err := range rows {
		if err != nil {
			return n, fmt.Errorf("republish: %w", err)
		}
		if coup.IsInput(rec.Kind) || strings.HasPrefix(rec.Kind, "ctl.") {
			// A new commit: the last one's state first, then the pause.
			if n > 0 {
				if err := flush(); err != nil {
					return n, err
				}
			}
			if !prev.IsZero() && opt.Speed > 0 && rec.At.After(prev) {
				d := time.Duration(float64(rec.At.Sub(prev)) / opt.Speed)
				if opt.MaxPause > 0 {
					d = min(d, opt.MaxPause)
				}
				if err := clock.Sleep(ctx, opt.Clock, d); err != nil {
					return n, err
				}
			}
			prev = rec.At
		}
		eng.apply(rec)
		if err := send(eng.eventMessage(rec)); err != nil {
			return n, err
		}
		for _, m := range eng.rowMessages(rec) {
			if err := send(m); err != nil {
				return n, err
			}
		}
		n++
	}
	if err := flush(); err != nil {
		return n, err
	}
	for _, t := range inflight {
		if err := waitToken(ctx, t); err != nil {
			return n, err
		}
	}
	return n, nil
}

func waitToken(ctx context.Context, t mqttconn.Token) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.Done():
		if err := t.Error(); err != nil {
			return fmt.Errorf("republish: publish: %w", err)
		}
		return nil
	}
}
