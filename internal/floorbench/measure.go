package floorbench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tablectl/tablectl/internal/natsserver"
)

// result is what one floor of n tables measured.
type result struct {
	tables int
	// soak: this count ran the soak (window is Soak, not Duration) and
	// the outage; the catch-up and the memory verdict are its alone.
	soak   bool
	window time.Duration
	// offered and witnessed are rows a second the tables published and
	// the floor took over the steady window; lag is what it still had to
	// take at the window's end.
	offered, witnessed float64
	lag                int64
	// backlog is the rows waiting when the witnesses came back; catchUp
	// their rate from the first row taken to the last; firstRow the
	// time from the witnesses' start to that first row (soak only).
	backlog  int64
	catchUp  float64
	firstRow time.Duration
	// p50 and p99 of a table's alert to the floor view's event; alerts
	// timed, lost not seen within 10 s.
	p50, p99     time.Duration
	alerts, lost int
	// cores is the two witness processes' CPU seconds a second over the
	// window; rss their resident memory at its end; mem its samples.
	cores float64
	// natsCores is the three NATS nodes' CPU seconds a second over the
	// window, together.
	natsCores float64
	// streamBytes is the stream's bytes per row published (its messages
	// are the rows and their checkpoints), on each node.
	streamBytes float64
	rss         int64
	mem         []int64
	// floorAlerts are the alerts the witnesses stored, by kind: an honest
	// floor raises none but the silences of the outage, if any.
	floorAlerts string
}

func (r result) summary() string {
	s := fmt.Sprintf("%.1f rows/s witnessed of %.1f offered; alert p50 %s p99 %s (n=%d); witnesses %.3f cores, %d MiB",
		r.witnessed, r.offered, r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.alerts, r.cores, r.rss>>20)
	if r.soak {
		s += fmt.Sprintf("; catch-up %.0f rows/s (%d rows)", r.catchUp, r.backlog)
	}
	return s
}

// runFloor measures a floor of n tables over the steady window, and with
// soak over the soak's and then the outage's.
func runFloor(ctx context.Context, o Options, dir string, cluster *natsserver.Cluster, pool *pgxpool.Pool, n int, soak bool) (result, error) {
	g := &rig{o: o, n: n, nm: newNames(n), cluster: cluster, pool: pool}
	defer g.close()
	if err := g.setup(ctx, dir); err != nil {
		return result{}, err
	}
	seen, err := g.view(ctx)
	if err != nil {
		return result{}, err
	}
	if err := g.startWitnesses(); err != nil {
		return result{}, err
	}
	stop := g.deal(ctx)
	defer stop()
	// Warm: the floor holds as many rows as there are tables (about one
	// pace of dealing): the witnesses are up and taking.
	if _, err := g.waitHeld(ctx, int64(n), 2*time.Minute); err != nil {
		return result{}, fmt.Errorf("warming up: %w", err)
	}
	res := result{tables: n, soak: soak, window: o.Duration}
	if soak {
		res.window = o.Soak
	}
	if err := g.steady(ctx, &res, seen); err != nil {
		return res, err
	}
	if soak {
		if err := g.outage(ctx, &res); err != nil {
			return res, err
		}
	}
	if res.floorAlerts, err = g.alertKinds(ctx); err != nil {
		return res, err
	}
	res.streamBytes, err = g.streamBytes(ctx)
	return res, err
}

// steady measures the floor dealing with its witnesses up for res.window:
// the rates, the alerts, the witnesses' CPU and memory.
func (g *rig) steady(ctx context.Context, res *result, seen <-chan string) error {
	actx, stopAlerts := context.WithCancel(ctx)
	var al alertLatencies
	alertsDone := make(chan struct{})
	go func() {
		defer close(alertsDone)
		al.alert(actx, g.nc, g.nm.root+"."+g.tables[0].id+".pit.alerts.active", seen, g.o.AlertEvery)
	}()
	held0, err := g.held(ctx)
	if err != nil {
		stopAlerts()
		return err
	}
	pub0, cpu0, nats0, start := g.published.Load(), time.Duration(0), g.natsCPU(), time.Now()
	if cpu0, _, err = g.witnessUse(); err != nil {
		stopAlerts()
		return err
	}
	err = g.sampleMemory(ctx, res, start.Add(res.window))
	stopAlerts()
	<-alertsDone
	if err != nil {
		return err
	}
	el := time.Since(start).Seconds()
	held1, err := g.held(ctx)
	if err != nil {
		return err
	}
	cpu1, rss, err := g.witnessUse()
	if err != nil {
		return err
	}
	pub1 := g.published.Load()
	res.offered, res.witnessed = float64(pub1-pub0)/el, float64(held1-held0)/el
	res.lag = pub1 - held1
	res.cores, res.rss = (cpu1-cpu0).Seconds()/el, rss
	res.natsCores = (g.natsCPU() - nats0).Seconds() / el
	res.p50, res.p99, res.alerts, res.lost = al.quantiles()
	return nil
}

// sampleMemory reads the witnesses' resident memory every Sample until end.
func (g *rig) sampleMemory(ctx context.Context, res *result, end time.Time) error {
	for {
		_, rss, err := g.witnessUse()
		if err != nil {
			return err
		}
		res.mem = append(res.mem, rss)
		wait := min(g.o.Sample, time.Until(end))
		if wait <= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// outage stops both witnesses for Outage while the tables deal on, then
// starts them again and times their catch-up of what piled up.
func (g *rig) outage(ctx context.Context, res *result) error {
	g.killWitnesses()
	fmt.Fprintf(g.o.Progress, "bench: floor: %d tables: witnesses down for %s\n", g.n, g.o.Outage)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(g.o.Outage):
	}
	target := g.published.Load()
	held, err := g.held(ctx)
	if err != nil {
		return err
	}
	res.backlog = target - held
	start := time.Now()
	if err := g.startWitnesses(); err != nil {
		return err
	}
	m, err := g.waitHeld(ctx, target, 2*time.Minute)
	if err != nil {
		return fmt.Errorf("catching up: %w", err)
	}
	if m.first.IsZero() || !m.done.After(m.first) {
		m.first, m.firstN = start, held // it all came in one poll
	}
	res.firstRow = m.first.Sub(start)
	// From the first poll that saw rows taken to the last: the rows taken
	// between them over the time between them.
	res.catchUp = float64(target-m.firstN) / m.done.Sub(m.first).Seconds()
	return nil
}
