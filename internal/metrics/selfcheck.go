package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tablectl/tablectl/coup"
)

// selfCheckResults are the results a self-check may have.
var selfCheckResults = []string{coup.SelfCheckOK, coup.SelfCheckUnsigned, coup.SelfCheckFailed}

// selfCheckMetrics are the program self-authentication's: the last
// result, when it was, and how many checks had each result.
type selfCheckMetrics struct {
	state  *prometheus.GaugeVec
	last   prometheus.Gauge
	checks *prometheus.CounterVec
}

func newSelfCheckMetrics(reg *prometheus.Registry) selfCheckMetrics {
	s := selfCheckMetrics{
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "self_check",
			Help: "The last self-check's result: 1 on its result (ok, unsigned, failed), 0 on the others; all 0 before the first.",
		}, []string{"result"}),
		last: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "self_check_timestamp_seconds",
			Help: "When the last self-check was recorded, Unix seconds; 0 before the first.",
		}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "self_checks_total",
			Help: "Self-checks of the program and its configuration against the signed manifest, by result.",
		}, []string{"result"}),
	}
	for _, r := range selfCheckResults {
		s.state.WithLabelValues(r)
		s.checks.WithLabelValues(r)
	}
	reg.MustRegister(s.state, s.last, s.checks)
	return s
}

// observe takes a recorded self-check.
func (s selfCheckMetrics) observe(in coup.Input) {
	if in.Kind != coup.InSelfCheck || in.Check == nil {
		return
	}
	for _, r := range selfCheckResults {
		v := 0.0
		if r == in.Check.Result {
			v = 1
		}
		s.state.WithLabelValues(r).Set(v)
	}
	s.last.Set(float64(in.At.UnixNano()) / 1e9)
	s.checks.WithLabelValues(in.Check.Result).Inc()
}
