package bench

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/controller"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

// benchOdds prices the remaining shoe after every coup of o.OddsShoes
// shoes, as the publisher does: coup.Analyze on the shoe as each coup left
// it, one core.
func benchOdds(ctx context.Context, o Options) ([]Row, error) {
	p, err := coup.BuiltinProfile(o.Profile)
	if err != nil {
		return nil, err
	}
	d, err := newBenchDealer(coup.DefaultTableConfig(p), o.Seed, time.Now())
	if err != nil {
		return nil, err
	}
	var took, cpu []time.Duration
	short := 0
	// The thread's own CPU clock says what the analysis costs whatever
	// else the machine runs; the wall clock, what a card waits.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for range o.OddsShoes {
		err := d.dealShoe(func(_ coup.Input, _, _ int, derived []coup.Event) error {
			for _, e := range derived {
				if e.Kind != coup.EvCoupResult {
					continue
				}
				rem := d.table.Remaining()
				c0 := threadCPU()
				t := time.Now()
				_, err := coup.Analyze(&rem, &p)
				dt := time.Since(t)
				dc := threadCPU() - c0
				switch {
				case errors.Is(err, coup.ErrShortShoe):
					// Fewer cards than a coup may need: nothing to price,
					// as pit/shoe says.
					short++
					continue
				case err != nil:
					return fmt.Errorf("analyze shoe %d coup %d: %w", e.Shoe, e.Coup, err)
				}
				took = append(took, dt)
				cpu = append(cpu, dc)
			}
			return ctx.Err()
		})
		if err != nil {
			return nil, err
		}
	}
	dist, cdist := distOf(took), distOf(cpu)
	vals := dist.values("wall_")
	for k, v := range cdist.values("cpu_") {
		vals[k] = v
	}
	return []Row{{
		ID:      "odds",
		Result:  fmt.Sprintf("CPU p50 %s, max %s (wall p50 %s, max %s)", ms(cdist.P50), ms(cdist.Max), ms(dist.P50), ms(dist.Max)),
		Goal:    "< 10 ms of CPU per analysis",
		Verdict: verdict(cdist.N > 0 && cdist.Max < 10*time.Millisecond),
		Detail: fmt.Sprintf("%d coups of %d %d-deck shoes, dealt to the cut card and one more, profile %s (%d bets), one core; "+
			"CPU time is the thread's own clock (CLOCK_THREAD_CPUTIME_ID), wall time includes being preempted by whatever else "+
			"runs (wall p99 %s); %d compositions too short to price (fewer than 6 cards) skipped",
			dist.N, o.OddsShoes, p.Decks, o.Profile, len(p.Bets), ms(dist.P99), short),
		Values: vals,
	}}, nil
}

// threadCPU is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// benchTrailTable is the table id of the benchmarks' trails.
const benchTrailTable = "BENCH"

// benchTrail builds a trail of o.TrailRows rows as the controller would
// have written them over many shoes, then times audit verify and replay on
// it, and a controller starting on it.
func benchTrail(ctx context.Context, o Options, dir string) ([]Row, error) {
	p, err := coup.BuiltinProfile(o.Profile)
	if err != nil {
		return nil, err
	}
	tc := coup.DefaultTableConfig(p)
	_, key, err := benchKey(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "trail.db")
	t := time.Now()
	rows, shoes, where, err := buildRecordedTrail(ctx, path, tc, key, o.Seed, o.TrailRows)
	if err != nil {
		return nil, fmt.Errorf("build the trail: %w", err)
	}
	built := time.Since(t)
	fmt.Fprintf(o.Progress, "bench: trail of %s rows (%d shoes) built %sin %s\n", commas(rows), shoes, where, built.Round(100*time.Millisecond))
	var out []Row

	// Verify, as `tablectl audit verify` and the controller's start do:
	// the chain, every checkpoint's head, the newest one's signature.
	pub := []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	t = time.Now()
	rep, err := audit.Verify(ctx, path, audit.VerifyOptions{PublicKeys: pub})
	if err != nil {
		return out, fmt.Errorf("verify: %w", err)
	}
	took := time.Since(t)
	if !rep.OK() || rep.Events != rows {
		return out, fmt.Errorf("verify: %d rows, %d findings, want %d rows and none", rep.Events, len(rep.Findings), rows)
	}
	rate := float64(rows) / took.Seconds()
	out = append(out, Row{ID: "verify", Result: fmt.Sprintf("%s events/s", commas(int64(rate))), Goal: "≥ 1,000,000 events/s",
		Verdict: verdict(rate >= 1_000_000),
		Detail: fmt.Sprintf("%s rows in %s, a commit and a signed checkpoint per input as the recorder writes them: hash chain, "+
			"every one of %s checkpoints' heads held to it, the newest's signature (covering every row), schema and triggers; "+
			"%s earlier signatures not checked (the next row checks them)",
			commas(rows), took.Round(time.Millisecond), commas(int64(rep.Checkpoints)), commas(int64(rep.SignaturesUnchecked))),
		Values: map[string]float64{"events_per_s": rate, "rows": float64(rows), "seconds": took.Seconds(), "checkpoints": float64(rep.Checkpoints)}})

	// The forensic mode, and the controller's background history check:
	// every signature, on every core.
	t = time.Now()
	rep, err = audit.Verify(ctx, path, audit.VerifyOptions{PublicKeys: pub, EverySignature: true})
	if err != nil {
		return out, fmt.Errorf("verify --every-signature: %w", err)
	}
	took = time.Since(t)
	if !rep.OK() || rep.Events != rows {
		return out, fmt.Errorf("verify --every-signature: %d rows, %d findings, want %d rows and none", rep.Events, len(rep.Findings), rows)
	}
	rate = float64(rows) / took.Seconds()
	out = append(out, Row{ID: "verify_every", Result: fmt.Sprintf("%s events/s", commas(int64(rate))), Goal: "none (forensic mode)",
		Verdict: VerdictInfo,
		Detail: fmt.Sprintf("%s rows in %s: as above, and every one of %s checkpoints' Ed25519 signatures, on %d cores",
			commas(rows), took.Round(time.Millisecond), commas(int64(rep.SignaturesVerified)), runtime.GOMAXPROCS(0)),
		Values: map[string]float64{"events_per_s": rate, "rows": float64(rows), "seconds": took.Seconds(), "signatures": float64(rep.SignaturesVerified)}})

	// Replay, as `tablectl replay` and the controller's rebuild do.
	r, err := audit.OpenReader(ctx, path)
	if err != nil {
		return out, err
	}
	t = time.Now()
	rp, err := audit.Replay(r.Events(ctx, audit.Query{}), tc, audit.ReplayVisitor{})
	took = time.Since(t)
	r.Close()
	if err != nil {
		return out, fmt.Errorf("replay: %w", err)
	}
	if d := rp.Differences(); len(d) > 0 || rp.Rows() != rows {
		return out, fmt.Errorf("replay: %d rows, %d differences (first: %+v)", rp.Rows(), len(d), d)
	}
	rate = float64(rows) / took.Seconds()
	out = append(out, Row{ID: "replay", Result: fmt.Sprintf("%s events/s", commas(int64(rate))), Goal: "≥ 200,000 events/s",
		Verdict: verdict(rate >= 200_000),
		Detail: fmt.Sprintf("%s rows in %s: every input through coup.Table.Apply, every derived event compared in canonical JSON",
			commas(rows), took.Round(time.Millisecond)),
		Values: map[string]float64{"events_per_s": rate, "rows": float64(rows), "seconds": took.Seconds()}})

	return out, nil
}

// buildRecordedTrail builds the trail as the recorder writes it (a commit
// and a signed checkpoint per input) at path. One fsync'd commit per input
// takes about 0.4 ms on a disk, minutes for a million rows, and the
// fsyncs are not what is measured: when /dev/shm is tmpfs the trail is
// written there through the same store and copied to path (database and
// WAL), so verify then reads a file on the disk. where says which.
func buildRecordedTrail(ctx context.Context, path string, tc coup.TableConfig, key ed25519.PrivateKey, seed uint64, want int) (rows int64, shoes int, where string, err error) {
	const shm = "/dev/shm"
	if !isTmpfs(shm) {
		rows, shoes, err = buildBenchTrail(ctx, path, tc, key, seed, want, asRecorded)
		return rows, shoes, "", err
	}
	scratch, err := os.MkdirTemp(shm, "tablectl-bench-trail-")
	if err != nil {
		return 0, 0, "", err
	}
	defer os.RemoveAll(scratch)
	tmp := filepath.Join(scratch, "trail.db")
	if rows, shoes, err = buildBenchTrail(ctx, tmp, tc, key, seed, want, asRecorded); err != nil {
		return rows, shoes, "", err
	}
	for _, suffix := range []string{"", "-wal"} {
		if err := copyFile(tmp+suffix, path+suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return rows, shoes, "", err
		}
	}
	return rows, shoes, "on tmpfs and copied to the disk ", nil
}

// copyFile copies from to to and syncs it.
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// benchStartups builds a trail of each size in o.StartupRows (with a
// snapshot every audit.SnapshotEvery rows, as the recorder writes them) and
// times a controller starting on it.
func benchStartups(ctx context.Context, o Options, dir string) ([]Row, error) {
	p, err := coup.BuiltinProfile(o.Profile)
	if err != nil {
		return nil, err
	}
	tc := coup.DefaultTableConfig(p)
	privPath, key, err := benchKey(dir)
	if err != nil {
		return nil, err
	}
	var out []Row
	for i, want := range o.StartupRows {
		sub := filepath.Join(dir, fmt.Sprintf("startup-%d", want))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return out, err
		}
		path := filepath.Join(sub, "trail.db")
		t := time.Now()
		rows, shoes, err := buildBenchTrail(ctx, path, tc, key, o.Seed, want, batched)
		if err != nil {
			return out, fmt.Errorf("build the trail: %w", err)
		}
		fmt.Fprintf(o.Progress, "bench: trail of %s rows (%d shoes) built in %s\n", commas(rows), shoes, time.Since(t).Round(100*time.Millisecond))
		id := "startup"
		if i > 0 {
			id = "startup_long"
		}
		row, err := benchStartup(ctx, o, sub, path, privPath, tc, rows)
		if err != nil {
			return out, fmt.Errorf("start-up on %s rows: %w", commas(rows), err)
		}
		row.ID = id
		row.What = fmt.Sprintf("Start-up on a trail of %s rows (ready to deal; first publish)", commas(rows))
		out = append(out, row)
		if !o.Keep {
			os.Remove(path)
			os.Remove(path + "-wal")
			os.Remove(path + "-shm")
		}
	}
	return out, nil
}

// trailShape is how buildBenchTrail commits.
type trailShape int

const (
	// asRecorded is one commit per input with its derived events (and a
	// snapshot when due), each carrying a signed checkpoint of its own head:
	// what the recorder writes (issue 12), so verify's signature work is
	// the real one.
	asRecorded trailShape = iota
	// batched is commits of about 1,000 rows, one checkpoint each: the
	// same rows in far fewer transactions and signatures, for the start-up
	// trails (10M rows), whose start verifies only the tail after the last
	// snapshot.
	batched
)

// buildBenchTrail writes at least want rows (and whole inputs) through
// audit.Store, as a controller would have recorded dealing shoe after shoe
// at a human pace, committed as shape says.
func buildBenchTrail(ctx context.Context, path string, tc coup.TableConfig, key ed25519.PrivateKey, seed uint64, want int, shape trailShape) (rows int64, shoes int, err error) {
	// Virtual time ends before now, as a trail's would.
	d, err := newBenchDealer(tc, seed, time.Now().Add(-365*24*time.Hour).Truncate(time.Hour))
	if err != nil {
		return 0, 0, err
	}
	st, err := audit.Open(ctx, path, audit.Options{Table: benchTrailTable, Clock: d.clock, Key: key, CheckpointEvery: 1, Logger: quietLog()})
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if cerr := st.Close(); err == nil {
			err = cerr
		}
	}()
	// The rows a recorder writes when it first opens a trail.
	first := []audit.Event{{Kind: audit.KindConfig, Body: tc}, {Kind: audit.KindStart, Body: map[string]any{
		"table": benchTrailTable, "rows_replayed": 0, "phase": coup.PhaseNoShoe, "suspended": false}}}
	if _, err := st.AppendBatch(ctx, first); err != nil {
		return 0, 0, err
	}
	rows = int64(len(first))
	batch := 1000
	if shape == asRecorded {
		batch = 1
	}
	buf := make([]audit.Event, 0, batch+32)
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		if _, err := st.AppendBatch(ctx, buf); err != nil {
			return err
		}
		rows += int64(len(buf))
		buf = buf[:0]
		return ctx.Err()
	}
	shoes = 0
	lastSnap := int64(0)
	for rows+int64(len(buf)) < int64(want) {
		shoes++
		err := d.dealShoe(func(in coup.Input, shoe, coupN int, derived []coup.Event) error {
			if rows+int64(len(buf)) >= int64(want) {
				return errBenchStop
			}
			buf = benchRows(buf, in, shoe, coupN, derived)
			if n := rows + int64(len(buf)); n-lastSnap >= audit.SnapshotEvery {
				// As the recorder does: the table after the input, in the
				// same commit.
				ev, err := audit.SnapshotEvent(d.table, in.At)
				if err != nil {
					return err
				}
				buf = append(buf, ev)
				lastSnap = n + 1
			}
			if len(buf) >= batch {
				return flush()
			}
			return nil
		})
		if errors.Is(err, errBenchStop) {
			break
		}
		if err != nil {
			return rows, shoes, err
		}
	}
	err = flush()
	return rows, shoes, err
}

// benchStartup times startController on the trail: verify, rebuild, open
// the trail for writing, connect to the broker; then how long until the
// publisher, which rebuilds its own copy of the table in the background,
// has published the start row.
func benchStartup(ctx context.Context, o Options, dir, trail, key string, tc coup.TableConfig, rows int64) (Row, error) {
	pty, err := shoesim.OpenPTY(filepath.Join(dir, "shoe"))
	if err != nil {
		return Row{}, err
	}
	defer pty.Close()
	sub, err := subscribeBench(ctx, o.Broker, false)
	if err != nil {
		return Row{}, err
	}
	defer sub.close()
	prefix := sub.prefix
	c := benchConfig(o, pty.Link(), trail, key, prefix)
	t := time.Now()
	ctl, err := controller.Start(ctx, c, tc, quietLog(), controller.Hooks{})
	if err != nil {
		return Row{}, err
	}
	ready := time.Since(t)
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var runErr error
	wg.Add(1)
	go func() { defer wg.Done(); runErr = ctl.Run(rctx) }()
	werr := sub.wait(ctx, 5*time.Minute, "the start row on pit/events", func(s *benchState) bool { return s.started > 0 })
	publishing := time.Since(t)
	// The history before the snapshot, verified in the background while
	// the table deals.
	hctx, hcancel := context.WithTimeout(ctx, 15*time.Minute)
	hdone, herr := ctl.WaitHistoryCheck(hctx)
	hcancel()
	history := "no history check: the start verified the whole trail"
	switch {
	case herr != nil:
		history = "history check: " + herr.Error()
	case hdone:
		history = fmt.Sprintf("the full verify and replay of the history in the background at nice 19 found it clean, %.1f s after the start", time.Since(t).Seconds())
	}
	cancel()
	wg.Wait()
	if err := errors.Join(werr, runErr, herr); err != nil {
		return Row{}, err
	}
	st := ctl.StartInfo()
	ok := ready <= time.Second && publishing <= 2*time.Second
	return Row{ID: "startup", Result: fmt.Sprintf("ready %.2f s, first publish %.2f s", ready.Seconds(), publishing.Seconds()),
		Goal: "ready ≤ 1 s, first publish ≤ 2 s", Verdict: verdict(ok),
		Detail: fmt.Sprintf("%s rows: startController until ready to deal (%s; verify %s rows and the signed head; "+
			"replay %s rows; open), then until the publisher, which restores its own copy the same way, has published the start row; %s",
			commas(rows), snapNote(st.Snapshot), commas(st.Verified), commas(st.Replayed), history),
		Values: map[string]float64{"seconds": ready.Seconds(), "publishing_seconds": publishing.Seconds(), "rows": float64(rows),
			"rows_verified": float64(st.Verified), "rows_replayed": float64(st.Replayed)}}, nil
}

func snapNote(seq int64) string {
	if seq == 0 {
		return "no snapshot in the trail: from row 1"
	}
	return "restore the newest snapshot, row " + commas(seq)
}

// benchConfig is the controller's configuration for the benchmarks: the
// shoe on the pseudo-terminal at link, the trail with checkpoints signed
// every 1,000 rows, MQTT to o.Broker under prefix with a client id of its
// own, no HTTP.
func benchConfig(o Options, link, trail, key, prefix string) config.Config {
	profile, _ := json.Marshal(o.Profile)
	c := config.Config{
		TableID: benchTrailTable,
		Profile: profile,
		Shoe:    config.ShoeSection{Driver: shoesim.ProtocolV1, Port: device.Config{Path: link, Baud: shoesim.DefaultBaud[shoesim.ProtocolV1]}.WithDefaults()},
		Audit:   config.AuditSection{Path: trail, CheckpointKey: key},
		MQTT:    &config.MQTTSection{Broker: o.Broker, Prefix: prefix, ClientID: "tablectl-bench-" + benchID()},
	}
	c.MQTT.Complete(c.TableID, "") // nothing in it can be wrong
	return c
}
