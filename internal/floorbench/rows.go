package floorbench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tablectl/tablectl/internal/bench"
)

// Goals of issue 32.
const (
	goalCatchUp = 20_000 // rows a second after an outage
	goalAlert   = time.Second
	// Memory flat over the soak: the median of the last third of the
	// samples at most the first third's plus 10 % of it or 8 MiB,
	// whichever is larger (the two witnesses hold 60-80 MiB, so 8 MiB
	// is what counts: room for the heap to settle, yet over a 30-minute
	// soak of 500 tables, 20 minutes and 240,000 rows apart, a leak of
	// about 35 bytes a row in the witness taking them reaches it).
	flatGrowthPercent = 10
	flatGrowthMin     = 8 << 20
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
			Detail: fmt.Sprintf("each table a row every %s (±20%%) and a signed checkpoint every %d rows, for %s with both witnesses up (the last count: its soak, %s); the stream holds %s", o.Pace, o.CheckpointEvery, o.Duration, o.Soak,
				each(func(r result) string { return fmt.Sprintf("%.0f bytes a row on each node", r.streamBytes) })),
			Values: values("rows_per_s", func(r result) float64 { return r.witnessed })},
		catchUpRow(o, res, each),
		alertRow(res, each, values),
		{ID: "floor_cpu", Verdict: bench.VerdictInfo, Goal: "—",
			Result: each(func(r result) string {
				return fmt.Sprintf("%.3f cores per 100 tables (the NATS nodes: %.3f)", r.cores*100/float64(r.tables), r.natsCores*100/float64(r.tables))
			}),
			Detail: "both witness processes' CPU time (/proc/PID/stat) over the steady window (the last count: the soak), per second of it, scaled to 100 tables; the three NATS nodes' together beside it",
			Values: values("cores_per_100", func(r result) float64 { return r.cores * 100 / float64(r.tables) })},
		{ID: "floor_memory", Verdict: bench.VerdictInfo, Goal: "—",
			Result: each(func(r result) string {
				return fmt.Sprintf("%d MiB for both, %.1f MiB per 100 tables", r.rss>>20, float64(r.rss)/(1<<20)*100/float64(r.tables))
			}),
			Detail: "both witness processes' resident memory (VmRSS) at the end of the steady window (the last count: the soak); per 100 tables includes each process's fixed part",
			Values: values("rss_mib", func(r result) float64 { return float64(r.rss) / (1 << 20) })},
		memoryFlatRow(o, res),
	}
}

type eachFunc func(func(r result) string) string
type valuesFunc func(string, func(r result) float64) map[string]float64

// soakResult is the last count's result, if the run got that far.
func soakResult(res []result) (result, bool) {
	if len(res) > 0 && res[len(res)-1].soak {
		return res[len(res)-1], true
	}
	return result{}, false
}

// catchUpRow: measured at the last count alone (after its soak), the
// verdict its.
func catchUpRow(o Options, res []result, each eachFunc) bench.Row {
	last := o.Tables[len(o.Tables)-1]
	s, ok := soakResult(res)
	verdict := bench.VerdictFail // not measured: the run stopped before the last count
	if ok && s.catchUp >= goalCatchUp {
		verdict = bench.VerdictPass
	}
	text := each(func(r result) string {
		switch {
		case !r.soak:
			return fmt.Sprintf("measured at %d tables", last)
		case r.firstRow == 0:
			return fmt.Sprintf("%.0f rows/s (%d rows, all taken at once: the witnesses' start included)", r.catchUp, r.backlog)
		}
		return fmt.Sprintf("%.0f rows/s (%d rows, the first taken %s after the start)", r.catchUp, r.backlog, r.firstRow.Round(time.Millisecond))
	})
	if !ok {
		text = strings.TrimPrefix(text+fmt.Sprintf("; %d tables: not measured, the run stopped before", last), "; ")
	}
	row := bench.Row{ID: "floor_catchup", Verdict: verdict, Goal: fmt.Sprintf("≥ %d rows/s", goalCatchUp), Result: text,
		Detail: fmt.Sprintf("at the last count (%d tables) after its soak: both witness processes killed (SIGKILL) for %s while the tables dealt on, then started again: the rows taken from the first poll (every 20 ms) that saw some to the one that saw them all, over the time between; a backlog taken at once is timed from the witnesses' start", last, o.Outage)}
	if ok {
		row.Values = map[string]float64{fmt.Sprintf("catchup_rows_per_s_%d", s.tables): s.catchUp}
	}
	return row
}

// alertRow: each count passes or fails on its own; the row passes if
// every one does.
func alertRow(res []result, each eachFunc, values valuesFunc) bench.Row {
	meets := func(r result) bool { return r.alerts > 0 && r.lost == 0 && r.p99 < goalAlert }
	verdict := bench.VerdictPass
	for _, r := range res {
		if !meets(r) {
			verdict = bench.VerdictFail
		}
	}
	return bench.Row{ID: "floor_alert", Verdict: verdict, Goal: "p99 < 1 s",
		Result: each(func(r result) string {
			v := bench.VerdictPass
			if !meets(r) {
				v = bench.VerdictFail
			}
			return fmt.Sprintf("p50 %s, p99 %s (n=%d, %d lost): %s", ms(r.p50), ms(r.p99), r.alerts, r.lost, v)
		}),
		Detail: "a table's new alert on its pit.alerts.active subject, through the status stream, to the floor view's server-sent event, while the floor deals (the last count: over its soak); a count passes with p99 under 1 s and none lost",
		Values: values("alert_p99_ms", func(r result) float64 { return float64(r.p99.Microseconds()) / 1000 })}
}

// memoryFlatRow judges the witnesses' memory over the last count's soak:
// the median of the last third of the samples against the first third's
// (the soak starts once the floor is warm: the witnesses up and taking).
// The medians, not the ends: one sample at a batch's peak moves neither.
func memoryFlatRow(o Options, res []result) bench.Row {
	row := bench.Row{ID: "floor_memory_time", Verdict: bench.VerdictFail,
		Goal: fmt.Sprintf("flat: last third ≤ first third + max(%d %%, %d MiB)", flatGrowthPercent, flatGrowthMin>>20)}
	var others []string
	for _, r := range res {
		if !r.soak && len(r.mem) > 0 {
			others = append(others, fmt.Sprintf("%d tables over %s: %d→%d MiB", r.tables, r.window, r.mem[0]>>20, r.mem[len(r.mem)-1]>>20))
		}
	}
	row.Detail = fmt.Sprintf("both witness processes' resident memory (VmRSS) every %s over the soak of the last count (%s); the medians of the first and last third of the samples", o.Sample, o.Soak)
	if len(others) > 0 {
		row.Detail += "; the shorter windows, not judged: " + strings.Join(others, ", ")
	}
	s, ok := soakResult(res)
	if !ok {
		row.Result = fmt.Sprintf("%d tables: not measured, the run stopped before", o.Tables[len(o.Tables)-1])
		return row
	}
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	var list []string
	for _, m := range s.mem {
		list = append(list, fmt.Sprint(m>>20))
	}
	samples := fmt.Sprintf("samples every %s: %s MiB", o.Sample, strings.Join(list, " "))
	if len(s.mem) < 3 {
		row.Verdict = bench.VerdictInfo
		row.Result = fmt.Sprintf("%d tables: over %s, too few samples to judge (%s)", s.tables, s.window, samples)
		return row
	}
	k := len(s.mem) / 3
	first, last := median(s.mem[:k]), median(s.mem[len(s.mem)-k:])
	bound := max(first*flatGrowthPercent/100, flatGrowthMin)
	if last-first <= bound {
		row.Verdict = bench.VerdictPass
	}
	row.Result = fmt.Sprintf("%d tables: over %s, first third %.1f MiB, last third %.1f MiB (%+.1f MiB, bound %.1f); %s",
		s.tables, s.window, mib(first), mib(last), mib(last-first), mib(bound), samples)
	row.Values = map[string]float64{
		fmt.Sprintf("rss_first_third_mib_%d", s.tables): mib(first),
		fmt.Sprintf("rss_last_third_mib_%d", s.tables):  mib(last),
		fmt.Sprintf("rss_growth_mib_%d", s.tables):      mib(last - first),
	}
	return row
}

// median of samples (the lower of the middle two for an even count).
func median(samples []int64) int64 {
	s := slices.Clone(samples)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000) }
