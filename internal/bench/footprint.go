package bench

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tablectl/tablectl/base/clock"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/shoeread"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

// benchScaledClock is the simulator's clock for a session compressed ratio
// times: each pause of the dealer's, and each idle second between
// heartbeats, takes 1/ratio of its length in wall time. Virtual time moves
// only when a timer fires, by the timer's length, so the session deals the
// same shoes however the machine keeps up. A timer that would take virtual
// time past end calls over (which cancels the simulator's context) instead
// of running.
type benchScaledClock struct {
	ratio float64
	end   time.Time
	over  context.CancelFunc

	mu  sync.Mutex
	now time.Time
}

// Now is the virtual time.
func (c *benchScaledClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer runs for d/ratio of wall time and then moves the virtual time on
// by d.
func (c *benchScaledClock) NewTimer(d time.Duration) clock.Timer {
	t := &scaledTimer{c: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// NewTicker ticks every d/ratio of wall time; ticks do not move the
// virtual time (the simulator waits on timers only).
func (c *benchScaledClock) NewTicker(d time.Duration) clock.Ticker {
	return clock.Real.NewTicker(c.wall(d))
}

func (c *benchScaledClock) wall(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.ratio)
}

type scaledTimer struct {
	c  *benchScaledClock
	ch chan time.Time

	mu sync.Mutex
	t  *time.Timer
}

func (t *scaledTimer) C() <-chan time.Time { return t.ch }

func (t *scaledTimer) Stop() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	was := t.t != nil && t.t.Stop()
	t.drain()
	return was
}

func (t *scaledTimer) Reset(d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	was := t.t != nil && t.t.Stop()
	t.drain()
	t.t = nil
	if !t.c.Now().Add(d).Before(t.c.end) {
		t.c.over()
		return was
	}
	t.t = time.AfterFunc(t.c.wall(d), func() {
		t.c.mu.Lock()
		t.c.now = t.c.now.Add(d)
		now := t.c.now
		t.c.mu.Unlock()
		select {
		case t.ch <- now:
		default:
		}
	})
	return was
}

func (t *scaledTimer) drain() {
	select {
	case <-t.ch:
	default:
	}
}

// benchProc reads a process's memory and CPU from /proc.
type benchProc struct{ pid int }

// rss is VmRSS and VmHWM (the peak), in bytes.
func (p benchProc) rss() (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	return rss, hwm, nil
}

// cpu is user plus system time so far, from /proc/PID/stat (clock ticks of
// 1/100 s, USER_HZ on Linux).
func (p benchProc) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, errors.New("stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("stat: too few fields")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("stat: %w", err)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }

// benchFootprint runs `tablectl run` as a process of its own on a fresh
// trail and deals it a session of o.Session at a human pace (the
// simulator's defaults: a card or button every second, five seconds of
// betting before each coup, a heartbeat whenever the line is idle for a
// second) compressed into o.SessionWall, sampling the child's resident
// memory as it goes.
func benchFootprint(ctx context.Context, o Options, dir string) ([]Row, error) {
	if o.Tablectl == "" {
		return nil, errors.New("the footprint runs the tablectl binary: say where it is (tablectl-bench --tablectl)")
	}
	p, err := coup.BuiltinProfile(o.Profile)
	if err != nil {
		return nil, err
	}
	privPath, key, err := benchKey(dir)
	if err != nil {
		return nil, err
	}
	pty, err := shoesim.OpenPTY(filepath.Join(dir, "shoe"))
	if err != nil {
		return nil, err
	}
	defer pty.Close()
	sub, err := subscribeBench(ctx, o.Broker, false)
	if err != nil {
		return nil, err
	}
	defer sub.close()
	prefix := sub.prefix

	ratio := float64(o.Session) / float64(o.SessionWall)
	trail := filepath.Join(dir, "trail.db")
	// The result stands 1 ms, not 3 s: compressed, the next coup's NO
	// MORE BETS comes 5 s / ratio after REVEAL, and a result still
	// standing then would turn it away.
	cfg := map[string]any{
		"table_id": benchTrailTable,
		"profile":  o.Profile,
		"table":    map[string]any{"result_time": "1ms"},
		"shoe":     map[string]any{"driver": shoesim.ProtocolV1, "port": map[string]any{"path": pty.Link(), "baud": shoesim.DefaultBaud[shoesim.ProtocolV1]}},
		"audit":    map[string]any{"path": trail, "checkpoint_key": privPath},
		"mqtt":     map[string]any{"broker": o.Broker, "prefix": prefix, "client_id": "tablectl-bench-" + benchID()},
	}
	cfgData, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "tablectl.json")
	if err := os.WriteFile(cfgPath, cfgData, 0o644); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "tablectl.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()

	cmd := exec.Command(o.Tablectl, "run", "--config", cfgPath)
	cmd.Env = append(os.Environ(), o.TablectlEnv...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	stopped := false
	defer func() {
		if !stopped {
			cmd.Process.Kill()
			<-exited
		}
	}()
	// Watching for the child's death turns a failed start into an error
	// rather than a long wait.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-exited:
			cancel()
		case <-cctx.Done():
		}
	}()
	if err := sub.wait(cctx, time.Minute, "the controller to start and open the shoe", func(s *benchState) bool { return s.links > 0 }); err != nil {
		return nil, fmt.Errorf("tablectl run: %w (its log: %s)", err, tailOf(logf.Name()))
	}
	proc := benchProc{pid: cmd.Process.Pid}
	rss0, _, err := proc.rss()
	if err != nil {
		return nil, err
	}
	cpu0, err := proc.cpu()
	if err != nil {
		return nil, err
	}

	type sample struct {
		t   time.Time
		rss int64
	}
	samples := []sample{{time.Now(), rss0}}
	var smu sync.Mutex
	sctx, stopSampling := context.WithCancel(cctx)
	defer stopSampling()
	var sampled sync.WaitGroup
	sampled.Add(1)
	go func() {
		defer sampled.Done()
		tick := time.NewTicker(o.Sample)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case t := <-tick.C:
				if r, _, err := proc.rss(); err == nil {
					smu.Lock()
					samples = append(samples, sample{t, r})
					smu.Unlock()
				}
			}
		}
	}()

	// Enough shoes for the session; the clock stops the dealing at its end.
	one, err := shoesim.NewPlan(shoesim.Options{Seed: o.Seed, Decks: p.Decks, CardPace: shoesim.DefaultCardPace, CoupPace: shoesim.DefaultCoupPace})
	if err != nil {
		return nil, err
	}
	perShoe := shoesim.DefaultCoupPace
	for _, st := range one.Steps {
		perShoe += st.For
	}
	var (
		lastSeq       uint32
		cards, coups  int
		firstShoeSeen bool
		shoes         int
	)
	line, err := newBenchLine(pty, func(ev shoeread.Event, _ time.Time) error {
		if _, ok := ev.Input(time.Time{}); ok {
			lastSeq = ev.Seq
		}
		switch {
		case ev.Kind == shoeread.KindCard:
			cards++
		case ev.Kind == shoeread.KindButton && ev.Button == shoeread.ButtonNoMoreBets:
			coups++
		case ev.Kind == shoeread.KindButton && ev.Button == shoeread.ButtonNewShoe:
			shoes++
			firstShoeSeen = true
		case ev.Kind == shoeread.KindButton && ev.Button == shoeread.ButtonReveal:
			// The one place where compressed time could change what
			// happens: the result stands until the controller's timer
			// ticks, and NO MORE BETS must find betting open, as it
			// always does five real seconds later. A controller briefly
			// behind (a slow fsync) would otherwise read both from one
			// chunk before its timer fired.
			return sub.wait(cctx, time.Minute, fmt.Sprintf("the tick after REVEAL (shoe sentence %d)", ev.Seq), func(s *benchState) bool {
				row, ok := s.rowOf[ev.Seq]
				return ok && s.lastTick > row
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	simCtx, over := context.WithCancel(cctx)
	defer over()
	v0 := time.Now()
	simClock := &benchScaledClock{ratio: ratio, now: v0, end: v0.Add(o.Session), over: over}
	sim, err := shoesim.New(shoesim.Options{Seed: o.Seed, Decks: p.Decks, Shoes: int(o.Session/perShoe) + 2,
		CardPace: shoesim.DefaultCardPace, CoupPace: shoesim.DefaultCoupPace}, line, simClock, quietLog())
	if err != nil {
		return nil, err
	}
	began := time.Now()
	simErr := sim.Run(simCtx, false)
	if errors.Is(simErr, context.Canceled) && cctx.Err() == nil {
		simErr = nil // the session is over
	}
	virtual := simClock.Now().Sub(v0)
	if simErr == nil && firstShoeSeen {
		simErr = sub.wait(cctx, 5*time.Minute, "the last sentence's row", func(s *benchState) bool {
			_, ok := s.arrived[lastSeq]
			return ok
		})
	}
	wall := time.Since(began)
	stopSampling()
	sampled.Wait()
	if simErr != nil {
		return nil, fmt.Errorf("session: %w (controller log: %s)", simErr, tailOf(logf.Name()))
	}
	rssEnd, hwm, err1 := proc.rss()
	cpu1, err2 := proc.cpu()
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	var alerts int
	sub.read(func(s *benchState) { alerts = s.alerts })

	// A clean stop, as systemd would: SIGTERM.
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-exited
	}
	stopped = true
	var total time.Duration
	if st := cmd.ProcessState; st != nil {
		total = st.UserTime() + st.SystemTime()
	}
	if waitErr != nil {
		return nil, fmt.Errorf("tablectl run exited: %v (its log: %s)", waitErr, tailOf(logf.Name()))
	}
	rep, err := audit.Verify(ctx, trail, audit.VerifyOptions{PublicKeys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}})
	if err != nil {
		return nil, err
	}
	if !rep.OK() {
		return nil, fmt.Errorf("the session's trail does not verify: %d findings", len(rep.Findings))
	}

	// Flat: the peak of the second half of the session is within 10% of
	// the first half's.
	var max1, max2, maxAll int64
	for i, s := range samples {
		maxAll = max(maxAll, s.rss)
		if i < len(samples)/2 {
			max1 = max(max1, s.rss)
		} else {
			max2 = max(max2, s.rss)
		}
	}
	growth := float64(max2-max1) / float64(max(1, max1))
	flat := growth <= 0.10
	session := cpu1 - cpu0
	hours := virtual.Hours()
	return []Row{{
		ID:      "memory",
		Result:  fmt.Sprintf("start %s, max %s, end %s", mb(rss0), mb(maxAll), mb(rssEnd)),
		Goal:    "flat, < 50 MB",
		Verdict: verdict(flat && maxAll < 50<<20 && hwm < 50<<20),
		Detail: fmt.Sprintf("`tablectl run` as a child: %.1f h of play (%d shoes, %d coups, %d cards, heartbeats every idle second) "+
			"in %s of wall time (%.0f× compressed); %d VmRSS samples; peak of the second half %+.1f%% on the first half's; "+
			"VmHWM %s; %s rows, trail verifies; %d alerts",
			hours, shoes, coups, cards, wall.Round(time.Second), ratio, len(samples), 100*growth, mb(hwm), commas(rep.Events), alerts),
		Values: map[string]float64{"rss_start_mb": float64(rss0) / (1 << 20), "rss_max_mb": float64(maxAll) / (1 << 20),
			"rss_end_mb": float64(rssEnd) / (1 << 20), "vmhwm_mb": float64(hwm) / (1 << 20), "growth": growth, "hours": hours},
	}, {
		ID:      "cpu",
		Result:  fmt.Sprintf("%.1f s over %.1f h of play", session.Seconds(), hours),
		Goal:    "none set (report)",
		Verdict: VerdictInfo,
		Detail: fmt.Sprintf("user + system time of the child while dealing (%.1f%% of one core at %.0f× compression; "+
			"%.2f s per hour of play); %.1f s in all with start and stop",
			100*session.Seconds()/wall.Seconds(), ratio, session.Seconds()/max(hours, 1e-9), total.Seconds()),
		Values: map[string]float64{"cpu_s": session.Seconds(), "cpu_total_s": total.Seconds(), "hours": hours, "wall_s": wall.Seconds()},
	}}, nil
}

// tailOf is the last lines of a log file, for an error.
func tailOf(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return strings.Join(lines, " | ")
}
