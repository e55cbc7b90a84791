package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/base/mqttconn"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/internal/controller"
	"github.com/tablectl/tablectl/shoeread"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

// benchLine is the simulator's line to the controller: the pseudo-terminal,
// with a hand on every write. after runs once a sentence is on the line,
// with the time taken right after the write returned; an error from it
// stops the simulator.
type benchLine struct {
	pty   *shoesim.PTY
	dec   shoeread.Driver
	after func(ev shoeread.Event, wrote time.Time) error
}

func newBenchLine(pty *shoesim.PTY, after func(shoeread.Event, time.Time) error) (*benchLine, error) {
	dec, err := shoeread.New(shoesim.ProtocolV1)
	if err != nil {
		return nil, err
	}
	return &benchLine{pty: pty, dec: dec, after: after}, nil
}

// Write writes one sentence and hands it to after.
func (l *benchLine) Write(ctx context.Context, p []byte) error {
	// Decoded before the write, so the clock is read right after it.
	evs := l.dec.Decode(p)
	if err := l.pty.Write(ctx, p); err != nil {
		return err
	}
	wrote := time.Now()
	for _, ev := range evs {
		if err := l.after(ev, wrote); err != nil {
			return err
		}
	}
	return nil
}

// Unplug and Replug pass through; the benchmarks do not unplug.
func (l *benchLine) Unplug() error { return l.pty.Unplug() }

// Replug passes through.
func (l *benchLine) Replug() error { return l.pty.Replug() }

// benchLive is a controller in this process on a fresh trail, its shoe on a
// pseudo-terminal, publishing to the broker, with a subscriber watching.
type benchLive struct {
	ctl *controller.Controller
	pty *shoesim.PTY
	sub *benchSub

	cancel context.CancelFunc
	wg     sync.WaitGroup
	runErr error

	mu            sync.Mutex
	committed     map[uint32]time.Time // shoe sequence number -> when its input was committed
	lastCommitted atomic.Uint32        // the last shoe sequence number committed
}

// startBenchLive starts the controller on sub's prefix and waits for the
// shoe link to come up. The table's result stands for no time (ResultTime
// 0): the simulator deals the next coup at once, and a timer racing it
// would measure the race.
func startBenchLive(ctx context.Context, o Options, dir, prefix string, sub *benchSub) (*benchLive, error) {
	p, err := coup.BuiltinProfile(o.Profile)
	if err != nil {
		return nil, err
	}
	tc := coup.DefaultTableConfig(p)
	tc.ResultTime = 0
	key, _, err := benchKey(dir)
	if err != nil {
		return nil, err
	}
	pty, err := shoesim.OpenPTY(filepath.Join(dir, "shoe"))
	if err != nil {
		return nil, err
	}
	l := &benchLive{pty: pty, sub: sub, committed: map[uint32]time.Time{}}
	hooks := controller.Hooks{OnCommit: func(c audit.Commit) {
		if c.Input.ShoeSeq > 0 {
			now := time.Now()
			l.lastCommitted.Store(c.Input.ShoeSeq)
			l.mu.Lock()
			l.committed[c.Input.ShoeSeq] = now
			l.mu.Unlock()
		}
	}}
	c := benchConfig(o, pty.Link(), filepath.Join(dir, "trail.db"), key, prefix)
	ctl, err := controller.Start(ctx, c, tc, quietLog(), hooks)
	if err != nil {
		pty.Close()
		return nil, err
	}
	l.ctl = ctl
	rctx, cancel := context.WithCancel(ctx)
	l.cancel = cancel
	l.wg.Add(1)
	go func() { defer l.wg.Done(); l.runErr = ctl.Run(rctx) }()
	if err := sub.wait(ctx, time.Minute, "the shoe link to come up", func(s *benchState) bool { return s.links > 0 }); err != nil {
		l.stop()
		return nil, err
	}
	return l, nil
}

func (l *benchLive) commitAt(seq uint32) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.committed[seq]
	return t, ok
}

// stop stops the controller and closes the pseudo-terminal.
func (l *benchLive) stop() error {
	l.cancel()
	l.wg.Wait()
	l.pty.Close()
	return l.runErr
}

// shoesFor is how many shoes deal at least cards cards.
func shoesFor(cards, decks int) int {
	perShoe := decks*coup.CardCount - shoesim.DefaultCut - 2*6 // what is left after the cut card, less a coup's margin
	return cards/perShoe + 2
}

// dealOneByOne deals o.Cards cards of seeded shoes into live's shoe,
// calling after once each sentence is on the line (newBenchLine), until
// after returns errBenchStop (which is not an error) or another error.
func dealOneByOne(ctx context.Context, o Options, live *benchLive, after func(shoeread.Event, time.Time) error) error {
	p, err := coup.BuiltinProfile(o.Profile)
	if err != nil {
		return err
	}
	line, err := newBenchLine(live.pty, after)
	if err != nil {
		return err
	}
	sim, err := shoesim.New(shoesim.Options{Seed: o.Seed, Decks: p.Decks, Shoes: shoesFor(o.Cards, p.Decks)}, line, clock.Real, quietLog())
	if err != nil {
		return err
	}
	if err := sim.Run(ctx, false); !errors.Is(err, errBenchStop) {
		return err
	}
	return nil
}

// benchLatency measures card to display and, interleaved with it so that
// both see the same machine, the floor: every sentence is written only
// once the row of the one before has reached the subscriber (and the path
// has rested o.Gap), so nothing queues and each card's time is the path's
// own; after each card, one floor sample runs while the controller idles.
func benchLatency(ctx context.Context, o Options, dir string) ([]Row, error) {
	sub, err := subscribeBench(ctx, o.Broker, true)
	if err != nil {
		return nil, err
	}
	defer sub.close()
	prefix, floorTopic := sub.prefix, sub.floorT
	floor, err := openBenchFloor(ctx, o, dir, floorTopic, sub)
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	defer floor.close()
	live, err := startBenchLive(ctx, o, filepath.Join(dir, "controller"), prefix, sub)
	if err != nil {
		return nil, err
	}
	var total, toCommit, fromCommit, floorTook, floorCommit, floorPub []time.Duration
	floorOne := func() error {
		d, c, err := floor.sample(ctx)
		floorTook = append(floorTook, d)
		floorCommit, floorPub = append(floorCommit, c), append(floorPub, d-c)
		time.Sleep(o.Gap)
		return err
	}
	simErr := dealOneByOne(ctx, o, live, func(ev shoeread.Event, wrote time.Time) error {
		if _, ok := ev.Input(time.Time{}); !ok {
			return nil // a heartbeat: nothing is recorded
		}
		var arrived time.Time
		err := sub.wait(ctx, 30*time.Second, fmt.Sprintf("the row of shoe sentence %d", ev.Seq), func(s *benchState) bool {
			var ok bool
			arrived, ok = s.arrived[ev.Seq]
			return ok
		})
		if err != nil {
			return err
		}
		time.Sleep(o.Gap)
		if ev.Kind != shoeread.KindCard {
			return nil
		}
		total = append(total, arrived.Sub(wrote))
		if c, ok := live.commitAt(ev.Seq); ok {
			toCommit = append(toCommit, c.Sub(wrote))
			fromCommit = append(fromCommit, arrived.Sub(c))
		}
		if len(floorTook) < o.Floor {
			if err := floorOne(); err != nil {
				return fmt.Errorf("floor: %w", err)
			}
		}
		if len(total) >= o.Cards {
			return errBenchStop
		}
		return nil
	})
	var alerts int
	sub.read(func(s *benchState) { alerts = s.alerts })
	if err := errors.Join(simErr, live.stop()); err != nil {
		return nil, err
	}
	if len(total) < o.Cards {
		return nil, fmt.Errorf("the simulator dealt %d cards, want %d", len(total), o.Cards)
	}
	for len(floorTook) < o.Floor {
		if err := floorOne(); err != nil {
			return nil, fmt.Errorf("floor: %w", err)
		}
	}
	fd, fc, fp := distOf(floorTook), distOf(floorCommit), distOf(floorPub)
	floorVals := fd.values("")
	maps.Copy(floorVals, fc.values("commit_"))
	floorRow := Row{ID: "floor", Result: fd.String(), Goal: "reference", Verdict: VerdictInfo,
		Detail: fmt.Sprintf("%d samples, taken between the cards: INSERT of a card row in its own transaction (WAL, synchronous=FULL) "+
			"in a file beside the controller's trail, then a QoS 1 publish of its pit/events payload through the same broker, "+
			"until the subscriber has it; commit %s; commit to subscriber %s", fd.N, fc, fp),
		Values: floorVals}
	d, dc, dp := distOf(total), distOf(toCommit), distOf(fromCommit)
	vals := d.values("")
	maps.Copy(vals, dc.values("commit_"))
	vals["floor_p99_ms"] = msf(fd.P99)
	row := Row{ID: "card_to_display", Result: d.String(),
		Goal:    fmt.Sprintf("p99 ≤ 1.5 × floor p99 (%s), p50 ≤ floor p50 + 0.3 ms (%s)", ms(fd.P99*3/2), ms(fd.P50+300*time.Microsecond)),
		Verdict: verdict(d.P99 <= fd.P99*3/2 && d.P50 <= fd.P50+300*time.Microsecond),
		Detail: fmt.Sprintf("%d cards, each written once the row before had arrived and %s had passed; "+
			"write to commit (read, decode, apply, fsync) %s; commit to subscriber %s; p99 %.1f× the floor's; %d alerts",
			d.N, o.Gap, dc, dp, float64(d.P99)/float64(max(1, fd.P99)), alerts),
		Values: vals}
	return []Row{row, floorRow}, nil
}

// benchFloor is the least any controller could take for a card: one
// SQLite commit with fsync and one QoS 1 round trip through the broker,
// one after the other, nothing else.
type benchFloor struct {
	db    *sql.DB
	ins   *sql.Stmt
	conn  *mqttconn.Conn
	sub   *benchSub
	topic string
	body  []byte
	n     int64
}

func openBenchFloor(ctx context.Context, o Options, dir, topic string, sub *benchSub) (_ *benchFloor, err error) {
	f := &benchFloor{sub: sub, topic: topic}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	path := filepath.Join(dir, "floor.db")
	if f.db, err = sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_synchronous=FULL&_txlock=immediate"); err != nil {
		return nil, err
	}
	f.db.SetMaxOpenConns(1)
	if _, err := f.db.ExecContext(ctx, `CREATE TABLE events (seq INTEGER PRIMARY KEY, at TEXT NOT NULL, kind TEXT NOT NULL,
		shoe INTEGER NOT NULL, coup INTEGER NOT NULL, body TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL)`); err != nil {
		return nil, err
	}
	var mode string
	var sync int
	if err := f.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return nil, err
	}
	if err := f.db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		return nil, err
	}
	if mode != "wal" || sync != 2 {
		return nil, fmt.Errorf("floor trail: journal_mode %s, synchronous %d; want wal and 2 (FULL)", mode, sync)
	}
	if f.ins, err = f.db.PrepareContext(ctx, "INSERT INTO events (seq, at, kind, shoe, coup, body, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"); err != nil {
		return nil, err
	}
	if f.conn, err = mqttconn.Dial(mqttconn.ConnOptions{Broker: o.Broker, ClientID: "tablectl-bench-floor-" + benchID(), Logger: quietLog()}); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := f.conn.WaitConnected(cctx); err != nil {
		return nil, err
	}
	// A card row as the controller would publish it.
	card := coup.Card{Rank: coup.King, Suit: coup.Hearts}
	f.body, err = audit.CanonicalJSON(coup.Input{Kind: coup.InCard, At: time.Now().UTC(), ShoeSeq: 118, Card: &card})
	return f, err
}

func (f *benchFloor) close() {
	if f.conn != nil {
		f.conn.Close(time.Second)
	}
	if f.ins != nil {
		f.ins.Close()
	}
	if f.db != nil {
		f.db.Close()
	}
}

// sample commits one row, publishes it, and returns the time until the
// subscriber had it, and of that the time to commit; it returns once the
// broker has acknowledged it too.
func (f *benchFloor) sample(ctx context.Context) (took, commit time.Duration, err error) {
	f.n++
	i := f.n
	rec := audit.Record{Seq: i, At: time.Now().UTC().Truncate(time.Microsecond), Kind: string(coup.InCard), Shoe: 3, Coup: 41, Body: f.body}
	rec.Hash = rec.ComputeHash()
	payload, err := json.Marshal(mqttpub.EventOf(rec))
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, err
	}
	if _, err := tx.StmtContext(ctx, f.ins).ExecContext(ctx, rec.Seq, rec.At.Format(time.RFC3339Nano), rec.Kind, rec.Shoe, rec.Coup,
		string(rec.Body), rec.PrevHash.String(), rec.Hash.String()); err != nil {
		tx.Rollback()
		return 0, 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, err
	}
	commit = time.Since(start)
	tok := f.conn.Publish(f.topic, 1, false, payload)
	var arrived time.Time
	if err := f.sub.wait(ctx, 30*time.Second, fmt.Sprintf("floor message %d", i), func(s *benchState) bool {
		var ok bool
		arrived, ok = s.floor[i]
		return ok
	}); err != nil {
		return 0, 0, err
	}
	select {
	case <-tok.Done():
		if err := tok.Error(); err != nil {
			return 0, 0, fmt.Errorf("publish: %w", err)
		}
	case <-time.After(30 * time.Second):
		return 0, 0, errors.New("publish: no PUBACK in 30s")
	}
	return arrived.Sub(start), commit, nil
}

// benchThroughput runs the whole path twice on fresh trails: paced at
// o.ThroughputRate cards a second for o.ThroughputCards cards, to show that
// rate is sustained with no backlog growing (the goal), and then with the
// simulated shoe writing as fast as the terminal takes it, for the most the
// path carries on this machine.
func benchThroughput(ctx context.Context, o Options, dir string) ([]Row, error) {
	paced, err := throughputRun(ctx, o, filepath.Join(dir, "paced"), o.ThroughputCards, o.ThroughputRate)
	if err != nil {
		return nil, fmt.Errorf("paced at %.0f cards/s: %w", o.ThroughputRate, err)
	}
	full, err := throughputRun(ctx, o, filepath.Join(dir, "full"), o.ThroughputCards, 0)
	if err != nil {
		return nil, fmt.Errorf("full speed: %w", err)
	}
	// Paced, the shoe wrote at the rate asked (the terminal holds a writer
	// back when the controller does not read) and neither backlog grew.
	sustained := paced.written >= 0.98*o.ThroughputRate && !paced.growing()
	vals := map[string]float64{"target_cards_per_s": o.ThroughputRate}
	for k, v := range paced.values() {
		vals["paced_"+k] = v
	}
	for k, v := range full.values() {
		vals["full_"+k] = v
	}
	vals["cards_per_s"] = full.rate
	return []Row{{ID: "throughput",
		Result: fmt.Sprintf("%s cards/s sustained (publisher lag mean %.0f → %.0f rows, max %d); %s cards/s at full speed",
			commas(int64(paced.written)), paced.pubFirst, paced.pubLast, paced.pubMax, commas(int64(full.rate))),
		Goal:    fmt.Sprintf("paced at %s cards/s with no backlog growth; ≥ %s cards/s at full speed", commas(int64(o.ThroughputRate)), commas(int64(fullSpeedGoal))),
		Verdict: verdict(sustained && full.rate >= fullSpeedGoal),
		Detail: fmt.Sprintf("paced: %s; full speed: %s. Backlog growth is the mean of the last third of the run "+
			"over twice the first third's plus 50 rows, for the publisher (rows committed, not yet acknowledged by the broker) "+
			"and for the shoe (sentences written, not yet committed)", paced.detail(), full.detail()),
		Values: vals}}, nil
}

// fullSpeedGoal is the throughput goal at full speed (issue 16): headroom
// over the paced rate.
const fullSpeedGoal = 5000.0

// throughputResult is one run of the whole path.
type throughputResult struct {
	paced                    bool
	cards                    int
	rows                     int64
	took                     time.Duration // first card written to last card received
	rate                     float64       // cards received per second over took
	written                  float64       // cards written per second, first to last
	pubFirst, pubLast        float64       // mean publisher lag, first and last thirds
	shoeFirst, shoeLast      float64       // mean shoe backlog, first and last thirds
	pubMax, pubAtEnd, shoeMx int64
	tail                     time.Duration // last write to last row arrived
	stalls                   uint64
	alerts                   int
}

func (r throughputResult) growing() bool {
	return r.pubLast > 2*r.pubFirst+50 || r.shoeLast > 2*r.shoeFirst+50
}

func (r throughputResult) detail() string {
	how := "the shoe writing as fast as the terminal takes it"
	if r.paced {
		how = fmt.Sprintf("written at %s cards/s", commas(int64(r.written)))
	}
	return fmt.Sprintf("%d cards (%s rows) %s, received in %s (%s cards/s); publisher lag mean %.1f in the first third, %.1f in the last, "+
		"max %d, %d when the shoe wrote its last card; shoe backlog mean %.1f in the first third, %.1f in the last, max %d; "+
		"the last row arrived %s after the last write; shoe reader stalls %d; %d alerts",
		r.cards, commas(r.rows), how, r.took.Round(time.Millisecond), commas(int64(r.rate)), r.pubFirst, r.pubLast, r.pubMax, r.pubAtEnd,
		r.shoeFirst, r.shoeLast, r.shoeMx, r.tail.Round(time.Millisecond), r.stalls, r.alerts)
}

func (r throughputResult) values() map[string]float64 {
	return map[string]float64{"cards_per_s": r.rate, "written_cards_per_s": r.written, "cards": float64(r.cards), "rows": float64(r.rows),
		"publisher_lag_max": float64(r.pubMax), "publisher_lag_end": float64(r.pubAtEnd),
		"publisher_lag_mean_first_third": r.pubFirst, "publisher_lag_mean_last_third": r.pubLast,
		"shoe_backlog_max": float64(r.shoeMx), "shoe_backlog_mean_first_third": r.shoeFirst, "shoe_backlog_mean_last_third": r.shoeLast}
}

// throughputRun deals cards through a fresh controller, paced at rate
// cards a second (0: as fast as the terminal takes them), and samples both
// backlogs every 10 ms.
func throughputRun(ctx context.Context, o Options, dir string, cards int, rate float64) (throughputResult, error) {
	res := throughputResult{paced: rate > 0}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	sub, err := subscribeBench(ctx, o.Broker, false)
	if err != nil {
		return res, err
	}
	defer sub.close()
	prefix := sub.prefix
	live, err := startBenchLive(ctx, o, dir, prefix, sub)
	if err != nil {
		return res, err
	}
	p, _ := coup.BuiltinProfile(o.Profile)
	var (
		dealt     int
		firstCard time.Time
		lastWrite time.Time
		lastSeq   atomic.Uint32 // the last sentence written that makes a row
	)
	line, err := newBenchLine(live.pty, func(ev shoeread.Event, wrote time.Time) error {
		if _, ok := ev.Input(time.Time{}); ok {
			lastSeq.Store(ev.Seq)
		}
		if ev.Kind != shoeread.KindCard {
			return nil
		}
		if dealt == 0 {
			firstCard = wrote
		}
		lastWrite = wrote
		if dealt++; dealt >= cards {
			return errBenchStop
		}
		if rate > 0 {
			// Card n is due n/rate after the first; sleep only when more
			// than a millisecond early, so timer slack does not slow the
			// pace.
			due := firstCard.Add(time.Duration(float64(dealt) / rate * float64(time.Second)))
			if d := time.Until(due); d > time.Millisecond {
				time.Sleep(d)
			}
		}
		return nil
	})
	if err != nil {
		live.stop()
		return res, err
	}
	sim, err := shoesim.New(shoesim.Options{Seed: o.Seed + 1000, Decks: p.Decks, Shoes: shoesFor(cards, p.Decks)},
		line, clock.Real, quietLog())
	if err != nil {
		live.stop()
		return res, err
	}
	type backlog struct {
		t         time.Time
		shoe, pub int64
	}
	var samples []backlog
	sctx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	var sampled sync.WaitGroup
	sampled.Add(1)
	go func() {
		defer sampled.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case t := <-tick.C:
				samples = append(samples, backlog{t, max(0, int64(lastSeq.Load())-int64(live.lastCommitted.Load())),
					live.ctl.Recorder().Store().Head().Seq - live.ctl.Publisher().Acked()})
			}
		}
	}()
	simErr := sim.Run(ctx, false)
	wroteAll := time.Now()
	if errors.Is(simErr, errBenchStop) {
		simErr = nil
	}
	var lastArrived time.Time
	if simErr == nil {
		last := lastSeq.Load()
		simErr = sub.wait(ctx, 5*time.Minute, "every card row", func(s *benchState) bool {
			var ok bool
			lastArrived, ok = s.arrived[last]
			return ok && s.cards >= dealt
		})
	}
	stopSampling()
	sampled.Wait()
	var endCard time.Time
	sub.read(func(s *benchState) { endCard, res.alerts = s.lastCard, s.alerts })
	res.stalls = live.ctl.Link().Stats().Stalls
	res.rows = live.ctl.Recorder().Store().Head().Seq
	if err := errors.Join(simErr, live.stop()); err != nil {
		return res, err
	}
	res.cards = dealt
	res.took = endCard.Sub(firstCard)
	res.rate = float64(dealt) / res.took.Seconds()
	if w := lastWrite.Sub(firstCard); w > 0 {
		res.written = float64(dealt-1) / w.Seconds()
	}
	res.tail = lastArrived.Sub(wroteAll)
	// Each backlog's mean in the first and last thirds of the run: a part
	// that cannot keep up lags more and more.
	var pubFirst, pubLast, shoeFirst, shoeLast []int64
	for _, b := range samples {
		if b.t.Before(firstCard) || b.t.After(endCard) {
			continue
		}
		res.shoeMx, res.pubMax = max(res.shoeMx, b.shoe), max(res.pubMax, b.pub)
		if !b.t.After(wroteAll) {
			res.pubAtEnd = b.pub
		}
		switch f := float64(b.t.Sub(firstCard)) / float64(res.took); {
		case f < 1.0/3:
			pubFirst, shoeFirst = append(pubFirst, b.pub), append(shoeFirst, b.shoe)
		case f >= 2.0/3:
			pubLast, shoeLast = append(pubLast, b.pub), append(shoeLast, b.shoe)
		}
	}
	res.pubFirst, res.pubLast = mean(pubFirst), mean(pubLast)
	res.shoeFirst, res.shoeLast = mean(shoeFirst), mean(shoeLast)
	return res, nil
}

func mean(v []int64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s int64
	for _, x := range v {
		s += x
	}
	return float64(s) / float64(len(v))
}
