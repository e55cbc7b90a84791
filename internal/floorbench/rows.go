package floorbench

import (
	"fmt"
	"strings"
	"time"

	"github.com/tablectl/tablectl/internal/bench"
)

// Goals of issue 32.
const (
	goalCatchUp = 20_000 // rows a second after an outage
	goalAlert   = time.Second
)

// rows are the floor's rows of the table: one per measure, each giving
// every table count.
func rows(o Options, res []result) []bench.Row {
	each := func(f func(r result) string) string {
		var parts []string
		for _, r := range res {
			parts = append(parts, fmt.Sprintf("%d tables: %s", r.tables, f(r)))
		}
		return strings.Join(parts, "; ")
	}
	values := func(name string, f func(r result) float64) map[string]float64 {
		v := map[string]float64{}
		for _, r := range res {
			v[fmt.Sprintf("%s_%d", name, r.tables)] = f(r)
		}
		return v
	}
	return []bench.Row{
		{ID: "floor_witnessed", Verdict: bench.VerdictInfo, Goal: "keeps up: witnessed = offered",
			Result: each(func(r result) string {
				return fmt.Sprintf("%.1f rows/s witnessed of %.1f offered, %d behind at the end; floor alerts: %s", r.witnessed, r.offered, r.lag, r.floorAlerts)
			}),
			Detail: fmt.Sprintf("each table a row every %s (±20%%) and a signed checkpoint every %d rows, for %s with both witnesses up; the stream holds %s", o.Pace, o.CheckpointEvery, o.Duration,
				each(func(r result) string { return fmt.Sprintf("%.0f bytes a row on each node", r.streamBytes) })),
			Values: values("rows_per_s", func(r result) float64 { return r.witnessed })},
		catchUpRow(o, res, each, values),
		alertRow(res, each, values),
		{ID: "floor_cpu", Verdict: bench.VerdictInfo, Goal: "—",
			Result: each(func(r result) string {
				return fmt.Sprintf("%.3f cores per 100 tables (the NATS nodes: %.3f)", r.cores*100/float64(r.tables), r.natsCores*100/float64(r.tables))
			}),
			Detail: "both witness processes' CPU time (/proc/PID/stat) over the steady window, per second of it, scaled to 100 tables; the three NATS nodes' together beside it",
			Values: values("cores_per_100", func(r result) float64 { return r.cores * 100 / float64(r.tables) })},
		{ID: "floor_memory", Verdict: bench.VerdictInfo, Goal: "—",
			Result: each(func(r result) string {
				return fmt.Sprintf("%d MiB for both, %.1f MiB per 100 tables", r.rss>>20, float64(r.rss)/(1<<20)*100/float64(r.tables))
			}),
			Detail: "both witness processes' resident memory (VmRSS) at the end of the steady window; per 100 tables includes each process's fixed part",
			Values: values("rss_mib", func(r result) float64 { return float64(r.rss) / (1 << 20) })},
		memoryTimeRow(o, res, each),
	}
}

type eachFunc func(func(r result) string) string
type valuesFunc func(string, func(r result) float64) map[string]float64

func catchUpRow(o Options, res []result, each eachFunc, values valuesFunc) bench.Row {
	verdict := bench.VerdictPass
	for _, r := range res {
		if r.catchUp < goalCatchUp {
			verdict = bench.VerdictFail
		}
	}
	return bench.Row{ID: "floor_catchup", Verdict: verdict, Goal: fmt.Sprintf("≥ %d rows/s", goalCatchUp),
		Result: each(func(r result) string {
			if r.firstRow == 0 {
				return fmt.Sprintf("%.0f rows/s (%d rows, all taken at once: the witnesses' start included)", r.catchUp, r.backlog)
			}
			return fmt.Sprintf("%.0f rows/s (%d rows, the first taken %s after the start)", r.catchUp, r.backlog, r.firstRow.Round(time.Millisecond))
		}),
		Detail: fmt.Sprintf("both witness processes killed (SIGKILL) for %s while the tables dealt on, then started again: the rows taken from the first poll (every 20 ms) that saw some to the one that saw them all, over the time between; a backlog taken at once is timed from the witnesses' start", o.Outage),
		Values: values("catchup_rows_per_s", func(r result) float64 { return r.catchUp })}
}

func alertRow(res []result, each eachFunc, values valuesFunc) bench.Row {
	verdict := bench.VerdictPass
	for _, r := range res {
		if r.alerts == 0 || r.lost > 0 || r.p99 >= goalAlert {
			verdict = bench.VerdictFail
		}
	}
	return bench.Row{ID: "floor_alert", Verdict: verdict, Goal: "p99 < 1 s",
		Result: each(func(r result) string {
			return fmt.Sprintf("p50 %s, p99 %s (n=%d, %d lost)", ms(r.p50), ms(r.p99), r.alerts, r.lost)
		}),
		Detail: "a table's new alert on its pit.alerts.active subject, through the status stream, to the floor view's server-sent event, while the floor deals",
		Values: values("alert_p99_ms", func(r result) float64 { return float64(r.p99.Microseconds()) / 1000 })}
}

// memoryTimeRow: the witnesses' memory over the steady window, sampled.
func memoryTimeRow(o Options, res []result, each eachFunc) bench.Row {
	return bench.Row{ID: "floor_memory_time", Verdict: bench.VerdictInfo, Goal: "flat",
		Result: each(func(r result) string {
			if len(r.mem) == 0 {
				return "no samples"
			}
			lo, hi := r.mem[0], r.mem[0]
			for _, m := range r.mem {
				lo, hi = min(lo, m), max(hi, m)
			}
			last := r.mem[len(r.mem)-1]
			return fmt.Sprintf("%d→%d MiB (min %d, max %d, %d samples)", r.mem[0]>>20, last>>20, lo>>20, hi>>20, len(r.mem))
		}),
		Detail: fmt.Sprintf("both witness processes' resident memory every %s over %s", o.Sample, o.Duration)}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000) }
