package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/display"
	"github.com/tablectl/tablectl/shoeread"
)

// controller wires one table: the shoe's port, its protocol reader, the
// recorder that owns the table and the trail, and the HTTP endpoints.
type controller struct {
	cfg    Config
	log    *slog.Logger
	rec    *audit.Recorder
	reader *shoeread.Reader
	link   *device.Link
	http   *http.Server
	ln     net.Listener
}

// controllerHooks let callers (the demo, tests, MQTT) see commits.
type controllerHooks struct {
	OnCommit       func(audit.Commit)
	OnWriteFailure func(error, coup.View)
	Clock          audit.Clock
	DeviceClock    device.Clock
}

// startController verifies the trail and rebuilds the table from it, and
// only then opens the shoe's port.
func startController(ctx context.Context, c Config, tc coup.TableConfig, log *slog.Logger, hooks controllerHooks) (*controller, error) {
	var key ed25519.PrivateKey
	if c.Audit.CheckpointKey != "" {
		k, err := audit.LoadPrivateKey(c.Audit.CheckpointKey)
		if err != nil {
			return nil, fmt.Errorf("audit.checkpoint_key: %w", err)
		}
		key = k
	}
	onCommit := func(cm audit.Commit) {
		for _, r := range cm.Records {
			log.Info("recorded", "seq", r.Seq, "kind", r.Kind, "shoe", r.Shoe, "coup", r.Coup)
		}
		if hooks.OnCommit != nil {
			hooks.OnCommit(cm)
		}
	}
	onFail := func(err error, v coup.View) {
		log.Error("table suspended: the audit trail cannot be written", "err", err)
		if hooks.OnWriteFailure != nil {
			hooks.OnWriteFailure(err, v)
		}
	}
	rec, err := audit.OpenRecorder(ctx, c.Audit.Path, audit.RecorderOptions{
		Table: c.TableID, Config: tc, Clock: hooks.Clock, Key: key, CheckpointEvery: c.Audit.CheckpointEvery,
		Logger: log, OnCommit: onCommit, OnWriteFailure: onFail,
	})
	if err != nil {
		return nil, err
	}
	drv, err := shoeread.New(c.Shoe.Driver)
	if err != nil {
		rec.Close()
		return nil, err
	}
	ctl := &controller{cfg: c, log: log, rec: rec, reader: shoeread.NewReader(drv)}
	// Sentences the shoe sent while the controller was down show as a gap.
	if last := rec.LastShoeSeq(); last > 0 {
		ctl.reader.Sequencer().Resume(last)
	}
	ctl.link, err = device.NewLink(c.Shoe.Port, device.Options{
		OnData: ctl.onData, OnState: ctl.onState, Logger: log, Clock: hooks.DeviceClock,
	})
	if err != nil {
		rec.Close()
		return nil, err
	}
	if c.HTTP.Listen != "" {
		ln, err := net.Listen("tcp", c.HTTP.Listen)
		if err != nil {
			rec.Close()
			return nil, fmt.Errorf("http.listen %s: %w", c.HTTP.Listen, err)
		}
		ctl.ln = ln
		ctl.http = &http.Server{Handler: display.Handler(rec), ReadHeaderTimeout: 5 * time.Second}
	}
	return ctl, nil
}

// submit records one input; failures are already reported by the recorder.
func (ctl *controller) submit(in coup.Input) {
	if _, err := ctl.rec.Submit(context.Background(), in); err != nil {
		ctl.log.Warn("input not recorded", "input", in.String(), "err", err)
	}
}

func (ctl *controller) onData(p []byte) {
	for _, ev := range ctl.reader.Decode(p) {
		if ev.Kind == shoeread.KindProtocolError {
			ctl.log.Warn("shoe protocol error", "reason", shoeread.Reason(ev.Err), "err", ev.Err, "rejected_bytes", ev.Rejected, "raw", ev.Raw)
		}
		if in, ok := ev.Input(time.Time{}); ok {
			ctl.submit(in)
		}
	}
}

func (ctl *controller) onState(s device.Status) {
	in := coup.Input{Kind: coup.InLink}
	switch s.State {
	case device.Connected:
		in.Link = coup.LinkConnected
	case device.Silent:
		in.Link = coup.LinkSilent
	default:
		in.Link = coup.LinkDisconnected
	}
	if s.Err != nil {
		in.Reason = s.Err.Error()
	}
	// Stopping is not the shoe going away.
	if errors.Is(s.Err, device.ErrStopped) {
		return
	}
	ctl.log.Info("shoe link", "state", s.State, "port", s.Port, "err", s.Err)
	ctl.submit(in)
}

// run runs the shoe link, the table's timers and the HTTP endpoints until
// ctx is done, then signs a last checkpoint and closes the trail.
func (ctl *controller) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ctl.link.Run(ctx) }()
	go func() { defer wg.Done(); ctl.rec.RunTimers(ctx, time.After) }()
	if ctl.http != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ctl.http.Serve(ctl.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				ctl.log.Error("http", "err", err)
			}
		}()
		go func() {
			<-ctx.Done()
			sctx, c := context.WithTimeout(context.Background(), 2*time.Second)
			defer c()
			ctl.http.Shutdown(sctx)
		}()
	}
	<-ctx.Done()
	wg.Wait()
	return ctl.rec.Close()
}
