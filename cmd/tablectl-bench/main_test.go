package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/internal/bench"
	"github.com/tablectl/tablectl/internal/floorbench"
	"github.com/tablectl/tablectl/internal/natsserver"
	"github.com/tablectl/tablectl/internal/testenv"
)

// TestMain lets this test binary serve as the bench's subscriber process,
// as tablectl-bench does.
func TestMain(m *testing.M) {
	bench.ServeSubscriber()
	floorbench.ServeWitness()
	os.Exit(m.Run())
}

// TestBenchQuick runs `tablectl-bench --quick` against the real parts (a
// pseudo-terminal, SQLite files, a Mosquitto it starts, a `tablectl run`
// child of the tablectl it builds from this checkout, as a user's run
// would) and checks that the table has every row, each with a result and a
// verdict, so the command cannot rot unnoticed. It asserts no speed: the
// goals are the benchmark's to judge, not a test's.
func TestBenchQuick(t *testing.T) {
	testenv.Command(t, "mosquitto", "mosquitto") // the bench starts its own
	testenv.Long(t, "tablectl-bench --quick builds tablectl and runs every benchmark at tiny sizes")
	var out, errOut bytes.Buffer
	if code := run([]string{"--quick"}, &out, &errOut); code != 0 {
		t.Fatalf("tablectl-bench --quick: exit %d\nstderr:\n%s\nstdout:\n%s", code, errOut.String(), out.String())
	}
	text := out.String()
	for _, want := range []string{"Machine: ", "| what | result | goal | pass/fail |", "Details:"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	want := []string{
		"Card to display (PTY → reader → audit commit → MQTT QoS 1 subscriber)",
		"Floor: one SQLite FULL commit + one QoS 1 publish to subscriber, no controller",
		"Card to table display (… → public/coup and public/shoe at QoS 0, as the web display takes them)",
		"Throughput, whole path: paced at the goal, then at full speed",
		"Audit verify",
		"Audit verify --every-signature",
		"Audit replay",
		"Exact odds after each coup (coup.Analyze)",
		// --quick starts on trails of 5,000 and 50,000 rows (and the
		// recorder's first two).
		"Start-up on a trail of 5,001 rows (ready to deal; first publish)",
		"Start-up on a trail of 50,001 rows (ready to deal; first publish)",
		"Segment cut-over (the decision to cut to the first row of play in the new segment)",
		"Resident memory, simulated 12-hour session",
		"CPU time, simulated 12-hour session",
	}
	var rows [][]string
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "| ") || strings.HasPrefix(l, "| what |") || strings.HasPrefix(l, "| --- |") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "| "), " | ")
		if len(cells) != 4 {
			t.Fatalf("row %q: %d cells, want 4", l, len(cells))
		}
		rows = append(rows, cells)
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(want), text)
	}
	for i, r := range rows {
		if r[0] != want[i] {
			t.Errorf("row %d is %q, want %q", i+1, r[0], want[i])
		}
		if r[1] == "" || strings.HasPrefix(r[1], "error") || r[2] == "" {
			t.Errorf("row %q: result %q, goal %q", r[0], r[1], r[2])
		}
		switch r[3] {
		case bench.VerdictPass, bench.VerdictFail, bench.VerdictInfo:
		default:
			t.Errorf("row %q: verdict %q", r[0], r[3])
		}
	}
}

// TestBenchOnly: --only runs the parts named and prints their rows alone;
// a part that does not exist is refused.
func TestBenchOnly(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--quick", "--only", "odds"}, &out, &errOut); code != 0 {
		t.Fatalf("tablectl-bench --quick --only odds: exit %d\nstderr:\n%s", code, errOut.String())
	}
	var rows []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| what |") && !strings.HasPrefix(l, "| --- |") {
			rows = append(rows, l)
		}
	}
	if len(rows) != 1 || !strings.HasPrefix(rows[0], "| Exact odds after each coup") {
		t.Fatalf("rows %q, want the odds row alone:\n%s", rows, out.String())
	}
	errOut.Reset()
	if code := run([]string{"--only", "odds,speed"}, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), `no part "speed"`) {
		t.Fatalf("--only speed: exit %d, stderr %q; want a refusal naming it", code, errOut.String())
	}
}

// TestBenchFloorQuick runs `tablectl-bench --quick --only floor` against
// the real parts (a 3-node nats-server cluster, PostgreSQL, two witness
// processes, 20 simulated tables signing their checkpoints: the one count
// is also the last, so it runs the soak and the outage too) and checks
// the report's shape: every floor row, each with a result, a goal and a
// verdict, and every figure measured above zero. It asserts no speed.
func TestBenchFloorQuick(t *testing.T) {
	if _, err := natsserver.Binary(); err != nil {
		testenv.Missing(t, err.Error())
	}
	testenv.Listening(t, "127.0.0.1:5432", "PostgreSQL (database test, trust auth for 127.0.0.1)")
	testenv.Long(t, "tablectl-bench --quick --only floor runs a floor of 20 tables for about half a minute")
	var out, errOut bytes.Buffer
	if code := run([]string{"--quick", "--only", "floor", "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("tablectl-bench --quick --only floor: exit %d\nstderr:\n%s\nstdout:\n%s", code, errOut.String(), out.String())
	}
	var rep bench.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("the report: %v\n%s", err, out.String())
	}
	want := map[string]string{ // row: the figure it carries (none: its result alone)
		"floor_witnessed": "rows_per_s_20", "floor_catchup": "catchup_rows_per_s_20", "floor_alert": "alert_p99_ms_20",
		"floor_cpu": "cores_per_100_20", "floor_memory": "rss_mib_20", "floor_memory_time": "rss_last_third_mib_20",
	}
	if len(rep.Rows) != len(want) {
		t.Fatalf("%d rows, want the %d of the floor: %+v", len(rep.Rows), len(want), rep.Rows)
	}
	for _, r := range rep.Rows {
		value, ok := want[r.ID]
		if !ok {
			t.Errorf("row %q is not the floor's", r.ID)
			continue
		}
		if r.What == "" || r.Goal == "" || !strings.HasPrefix(r.Result, "20 tables: ") {
			t.Errorf("row %s: what %q, result %q, goal %q", r.ID, r.What, r.Result, r.Goal)
		}
		switch r.Verdict {
		case bench.VerdictPass, bench.VerdictFail, bench.VerdictInfo:
		default:
			t.Errorf("row %s: verdict %q", r.ID, r.Verdict)
		}
		if v := r.Values[value]; value != "" && !(v > 0) {
			t.Errorf("row %s: %s = %v, want a figure above zero (%s)", r.ID, value, v, r.Result)
		}
	}
}
