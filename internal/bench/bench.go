// Package bench is the performance harness behind tablectl-bench: each
// benchmark runs the real parts (pseudo-terminal, device.Link, shoeread,
// the recorder on a SQLite file with fsync, the MQTT publisher, a Mosquitto
// broker it starts, the tablectl binary as a process of its own) and yields
// one or more rows of the table docs/benchmarks.md keeps. It lives apart
// from the controller so that nothing of it is linked into the binary that
// runs at the table.
package bench

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"golang.org/x/sys/unix"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/display/mqttpub"
)

// Options size and place the benchmarks. Zero sizes take the full or
// the quick defaults (Sizes).
type Options struct {
	Broker  string
	Dir     string // where trails go; "" picks one on a real disk
	Keep    bool   // keep the files
	Profile string
	Seed    uint64

	Cards           int           // card to display: cards measured
	Floor           int           // floor samples
	Gap             time.Duration // card to display: rest after each arrival
	ThroughputCards int           // cards dealt in each throughput run
	ThroughputRate  float64       // cards a second of the paced throughput run
	TrailRows       int           // rows of the trail verified and replayed
	StartupRows     []int         // the trails started on: a short and a long history
	SegmentRows     int           // rows of the segment the cut-over seals
	OddsShoes       int           // shoes whose coups are priced
	Session         time.Duration // footprint: virtual length of the session
	SessionWall     time.Duration // footprint: real time it is compressed into
	Sample          time.Duration // footprint: RSS sampling interval
	// Only names the parts to run (Parts); empty runs them all but the
	// floor, which runs only when named.
	Only []string
	// FloorPart runs the floor's part (internal/floorbench, which
	// tablectl-bench wires in: this package links nothing of the floor).
	FloorPart func(ctx context.Context, dir string) ([]Row, error)

	// Tablectl is the tablectl binary the footprint runs as `tablectl run`
	// (required for the footprint part); TablectlEnv is added to its
	// environment.
	Tablectl    string
	TablectlEnv []string

	Progress io.Writer
}

// Sizes fills the zero sizes: the full run, or --quick.
func (o *Options) Sizes(quick bool) {
	set := func(p *int, full, q int) {
		if *p == 0 {
			*p = full
			if quick {
				*p = q
			}
		}
	}
	setD := func(p *time.Duration, full, q time.Duration) {
		if *p == 0 {
			*p = full
			if quick {
				*p = q
			}
		}
	}
	set(&o.Cards, 10_000, 150)
	set(&o.Floor, 10_000, 150)
	set(&o.ThroughputCards, 20_000, 400)
	if o.ThroughputRate == 0 {
		o.ThroughputRate = 4000
	}
	set(&o.TrailRows, 1_000_000, 20_000)
	if len(o.StartupRows) == 0 {
		o.StartupRows = []int{100_000, 10_000_000}
		if quick {
			o.StartupRows = []int{5_000, 50_000}
		}
	}
	set(&o.OddsShoes, 8, 1)
	set(&o.SegmentRows, 1_000_000, 20_000)
	setD(&o.Gap, 2*time.Millisecond, time.Millisecond)
	setD(&o.Session, 12*time.Hour, 30*time.Minute)
	setD(&o.SessionWall, 150*time.Second, 5*time.Second)
	setD(&o.Sample, 500*time.Millisecond, 100*time.Millisecond)
	if o.Profile == "" {
		o.Profile = coup.ProfileVIP
	}
	if o.Seed == 0 {
		o.Seed = 7
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// Verdicts of a row.
const (
	VerdictPass  = "pass"
	VerdictFail  = "fail"
	VerdictInfo  = "info" // a reference or a figure with no goal
	verdictError = "error"
)

// Row is one line of the table.
type Row struct {
	ID      string             `json:"id"`
	What    string             `json:"what"`
	Result  string             `json:"result"`
	Goal    string             `json:"goal"`
	Verdict string             `json:"verdict"`
	Detail  string             `json:"detail,omitempty"`
	Values  map[string]float64 `json:"values,omitempty"`
}

// The rows, in the table's order. The test checks every one is printed.
var benchRowIDs = []string{
	"card_to_display", "floor", "card_to_view", "throughput", "verify", "verify_every", "replay", "odds", "startup", "startup_long", "segment_cutover", "memory", "cpu",
	"floor_witnessed", "floor_catchup", "floor_alert", "floor_cpu", "floor_memory", "floor_memory_time",
}

// floorRowIDs are the floor part's rows (--only floor).
var floorRowIDs = []string{"floor_witnessed", "floor_catchup", "floor_alert", "floor_cpu", "floor_memory", "floor_memory_time"}

// benchRowWhat names each row in the table.
var benchRowWhat = map[string]string{
	"card_to_display": "Card to display (PTY → reader → audit commit → MQTT QoS 1 subscriber)",
	"floor":           "Floor: one SQLite FULL commit + one QoS 1 publish to subscriber, no controller",
	"card_to_view":    "Card to table display (… → public/coup and public/shoe at QoS 0, as the web display takes them)",
	"throughput":      "Throughput, whole path: paced at the goal, then at full speed",
	"verify":          "Audit verify",
	"verify_every":    "Audit verify --every-signature",
	"replay":          "Audit replay",
	"odds":            "Exact odds after each coup (coup.Analyze)",
	"startup":         "Start-up on a short history (ready to deal; first publish)",
	"startup_long":    "Start-up on a long history (ready to deal; first publish)",
	"segment_cutover": "Segment cut-over (the decision to cut to the first row of play in the new segment)",
	"memory":          "Resident memory, simulated 12-hour session",
	"cpu":             "CPU time, simulated 12-hour session",

	"floor_witnessed":   "Floor: rows witnessed a second, tables dealing at a dealer's pace (2 witnesses, 3 NATS nodes, PostgreSQL)",
	"floor_catchup":     "Floor: catch-up after a witness outage",
	"floor_alert":       "Floor: a table's alert to the floor view's event",
	"floor_cpu":         "Floor: witness CPU",
	"floor_memory":      "Floor: witness memory",
	"floor_memory_time": "Floor: witness memory flat over the soak (the last table count)",
}

// Machine is what the numbers were measured on.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	Memory    string `json:"memory"`
	Disk      string `json:"disk"`
	Go        string `json:"go"`
	Mosquitto string `json:"mosquitto"`
	Date      string `json:"date"`
	Load      string `json:"load_before"`
}

// Report is everything the command prints.
type Report struct {
	Machine Machine  `json:"machine"`
	Options Settings `json:"options"`
	Rows    []Row    `json:"rows"`
	Elapsed string   `json:"elapsed"`
}

// Settings are the sizes used, as printed.
type Settings struct {
	Cards           int     `json:"cards"`
	Floor           int     `json:"floor_samples"`
	ThroughputCards int     `json:"throughput_cards"`
	ThroughputRate  float64 `json:"throughput_rate"`
	TrailRows       int     `json:"trail_rows"`
	OddsShoes       int     `json:"odds_shoes"`
	Session         string  `json:"session"`
	SessionWall     string  `json:"session_wall"`
	Profile         string  `json:"profile"`
	Broker          string  `json:"broker"`
}

// Run runs every benchmark. A benchmark that fails is an error
// row, the others still run; the error returned joins their errors.
func Run(ctx context.Context, o Options) (*Report, error) {
	start := time.Now()
	dir, cleanup, err := benchDir(o.Dir, o.Keep)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	rep := &Report{Machine: benchMachineInfo(dir), Options: Settings{
		Cards: o.Cards, Floor: o.Floor, ThroughputCards: o.ThroughputCards, ThroughputRate: o.ThroughputRate, TrailRows: o.TrailRows, OddsShoes: o.OddsShoes,
		Session: o.Session.String(), SessionWall: o.SessionWall.String(), Profile: o.Profile, Broker: o.Broker,
	}}
	if o.Broker == "" && needsBroker(o.Only) {
		b, err := startBenchBroker(dir)
		if err != nil {
			return nil, err
		}
		defer b.stop()
		o.Broker = b.url
		rep.Options.Broker = "a Mosquitto of its own on " + b.url + " (max_queued_messages 0, max_inflight_messages 100)"
		defer func() {
			if b.dropped() {
				fmt.Fprintf(o.Progress, "bench: the broker dropped messages:\n%s", b.output())
			}
		}()
	}
	rows := map[string]Row{}
	var errs []error
	step := func(name string, ids []string, f func(context.Context, string) ([]Row, error)) {
		if ctx.Err() != nil || !o.runs(benchPartName(name)) {
			return
		}
		fmt.Fprintf(o.Progress, "bench: %s ...\n", name)
		t := time.Now()
		cpu0, cpuOK := readCPUTimes()
		sub := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		var out []Row
		err := os.MkdirAll(sub, 0o755)
		if err == nil {
			out, err = f(ctx, sub)
		}
		cpu1, cpuOK1 := readCPUTimes()
		for _, r := range out {
			if cpuOK && cpuOK1 {
				steal := cpu1.stealSince(cpu0)
				if r.Values == nil {
					r.Values = map[string]float64{}
				}
				r.Values["steal_pct"] = steal
				if r.Detail != "" {
					r.Detail += "; "
				}
				r.Detail += fmt.Sprintf("CPU steal during this part %.1f%% (the hypervisor ran others while this machine waited)", steal)
			}
			rows[r.ID] = r
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			for _, id := range ids {
				if _, ok := rows[id]; !ok {
					rows[id] = Row{ID: id, Verdict: verdictError, Result: "error: " + oneLine(err.Error())}
				}
			}
		}
		fmt.Fprintf(o.Progress, "bench: %s done in %s\n", name, time.Since(t).Round(100*time.Millisecond))
	}
	step("odds", []string{"odds"}, func(ctx context.Context, _ string) ([]Row, error) { return benchOdds(ctx, o) })
	step("trail", []string{"verify", "verify_every", "replay"}, func(ctx context.Context, d string) ([]Row, error) {
		return benchTrail(ctx, o, d)
	})
	step("startup", []string{"startup", "startup_long"}, func(ctx context.Context, d string) ([]Row, error) {
		return benchStartups(ctx, o, d)
	})
	step("segment", []string{"segment_cutover"}, func(ctx context.Context, d string) ([]Row, error) {
		return benchCutover(ctx, o, d)
	})
	step("card to display", []string{"card_to_display", "floor"}, func(ctx context.Context, d string) ([]Row, error) {
		return benchLatency(ctx, o, d)
	})
	step("display", []string{"card_to_view"}, func(ctx context.Context, d string) ([]Row, error) {
		return benchDisplay(ctx, o, d)
	})
	step("throughput", []string{"throughput"}, func(ctx context.Context, d string) ([]Row, error) {
		return benchThroughput(ctx, o, d)
	})
	step("footprint", []string{"memory", "cpu"}, func(ctx context.Context, d string) ([]Row, error) {
		return benchFootprint(ctx, o, d)
	})
	if o.FloorPart != nil {
		step("floor", floorRowIDs, o.FloorPart)
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	for _, id := range benchRowIDs {
		r, ok := rows[id]
		if !ok && (len(o.Only) > 0 || slices.Contains(floorRowIDs, id)) {
			continue // not asked for
		}
		if !ok {
			r = Row{ID: id, Verdict: verdictError, Result: "not run"}
		}
		if r.What == "" {
			r.What = benchRowWhat[id]
		}
		rep.Rows = append(rep.Rows, r)
	}
	rep.Elapsed = time.Since(start).Round(time.Second).String()
	return rep, errors.Join(errs...)
}

// Parts are the parts --only may name, in the order they run.
var Parts = []string{"odds", "trail", "startup", "segment", "latency", "display", "throughput", "footprint", "floor"}

// runs says whether part is to run: every part but the floor when Only
// is empty (the floor needs a nats-server cluster and PostgreSQL, and its
// full size takes over an hour), else those Only names.
func (o *Options) runs(part string) bool {
	if len(o.Only) == 0 {
		return part != "floor"
	}
	return slices.Contains(o.Only, part)
}

// benchPartName is the --only name of a step.
// brokerless are the parts that publish nothing: run alone, the bench
// starts no broker for them (so `--only odds` runs where Mosquitto is not
// installed).
var brokerless = []string{"odds", "floor"}

// needsBroker says whether the parts only names (all, when empty) need the
// bench's broker.
func needsBroker(only []string) bool {
	for _, p := range only {
		if !slices.Contains(brokerless, p) {
			return true
		}
	}
	return len(only) == 0
}

func benchPartName(step string) string {
	if step == "card to display" {
		return "latency"
	}
	return step
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// benchDir makes the folder the trails go in: under --dir, or the system's
// temporary folder unless that is tmpfs (fsync there is free, and the
// numbers would flatter the disk), in which case under the working folder.
func benchDir(parent string, keep bool) (string, func(), error) {
	if parent == "" {
		parent = os.TempDir()
		if isTmpfs(parent) {
			parent = "."
		}
	}
	dir, err := os.MkdirTemp(parent, "tablectl-bench-")
	if err != nil {
		return "", nil, fmt.Errorf("bench folder: %w", err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return "", nil, err
	}
	if isTmpfs(dir) {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("bench folder %s is on tmpfs: fsync would cost nothing; give --dir on a disk", dir)
	}
	cleanup := func() {
		if !keep {
			os.RemoveAll(dir)
		}
	}
	return dir, cleanup, nil
}

func isTmpfs(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false
	}
	return st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC
}

// benchMachineInfo describes the machine, from /proc and the tools.
func benchMachineInfo(dir string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), Date: time.Now().UTC().Format("2006-01-02 15:04 MST")}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				var kb int64
				fmt.Sscan(f[1], &kb)
				m.Memory = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			}
		}
	}
	m.Disk = benchDisk(dir)
	if out, err := exec.Command("mosquitto", "-h").CombinedOutput(); len(out) > 0 {
		first, _, _ := strings.Cut(string(out), "\n")
		m.Mosquitto = strings.TrimSpace(first)
	} else if err != nil {
		m.Mosquitto = "not found locally (" + err.Error() + ")"
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 3 {
			m.Load = strings.Join(f[:3], " ")
		}
	}
	return m
}

// benchDisk names the filesystem and device under dir, from /proc/mounts
// (the longest mount point that is a prefix of dir).
func benchDisk(dir string) string {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return "unknown"
	}
	best, out := "", "unknown"
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		mp := f[1]
		if (dir == mp || strings.HasPrefix(dir, strings.TrimSuffix(mp, "/")+"/")) && len(mp) > len(best) {
			best, out = mp, fmt.Sprintf("%s on %s (%s)", f[2], f[0], mp)
		}
	}
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) == nil {
		out += fmt.Sprintf(", %.0f GiB", float64(st.Blocks)*float64(st.Bsize)/(1<<30))
	}
	return out
}

// ---- numbers ----

// benchDist is a distribution of durations.
type benchDist struct {
	N             int
	P50, P99, Max time.Duration
}

func distOf(d []time.Duration) benchDist {
	if len(d) == 0 {
		return benchDist{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return benchDist{N: len(s), P50: rank(s, 0.50), P99: rank(s, 0.99), Max: s[len(s)-1]}
}

// rank is the nearest-rank percentile of sorted s.
func rank(s []time.Duration, p float64) time.Duration {
	i := int(float64(len(s))*p+0.9999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (b benchDist) String() string {
	return fmt.Sprintf("p50 %s, p99 %s, max %s", ms(b.P50), ms(b.P99), ms(b.Max))
}

func (b benchDist) values(prefix string) map[string]float64 {
	return map[string]float64{prefix + "p50_ms": msf(b.P50), prefix + "p99_ms": msf(b.P99), prefix + "max_ms": msf(b.Max), prefix + "n": float64(b.N)}
}

func verdict(ok bool) string {
	if ok {
		return VerdictPass
	}
	return VerdictFail
}

// commas writes n with thousands separators.
func commas(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + commas(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func benchID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// benchKey makes a checkpoint key in dir/keys.
func benchKey(dir string) (string, ed25519.PrivateKey, error) {
	keys := filepath.Join(dir, "keys")
	if err := os.MkdirAll(keys, 0o700); err != nil {
		return "", nil, err
	}
	path, _, err := audit.GenerateKey(keys)
	if err != nil {
		return "", nil, err
	}
	key, err := audit.LoadPrivateKey(path)
	return path, key, err
}

// quietLog drops everything below errors: the benchmarks measure the
// controller, not its log handler.
func quietLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))
}

// ---- the subscriber ----

// benchState is what the subscriber has received so far.
type benchState struct {
	// arrived maps the shoe sequence number of each input row received to
	// when it arrived.
	arrived map[uint32]time.Time
	// rowOf maps the same to the row's sequence number in the trail.
	rowOf map[uint32]int64
	// lastTick is the row of the last in.tick received.
	lastTick int64
	// floor maps the floor messages received, by number, to their arrival.
	floor     map[int64]time.Time
	cards     int
	lastCard  time.Time
	links     int // in.link connected rows
	started   int // ctl.start rows
	alerts    int
	lastEvent time.Time
}

// benchSub is a QoS 1 subscriber, in a process of its own (subproc.go),
// that timestamps each message as paho hands it over, before decoding
// it. Each has a fresh topic prefix for the controller it watches; close
// clears what was retained under it.
type benchSub struct {
	proc   *subProc
	broker string
	prefix string
	floorT string // "" when there is no floor

	mu     sync.Mutex
	st     benchState
	notify chan struct{}
}

// subscribeBench subscribes to <prefix>/pit/events (the table's rows) under
// a fresh prefix, and with floor to <prefix>/floor as well, and returns
// once the broker granted both.
func subscribeBench(ctx context.Context, broker string, floor bool) (*benchSub, error) {
	prefix := "tablectl-bench/" + benchID()
	floorTopic := ""
	if floor {
		floorTopic = prefix + "/floor"
	}
	s := &benchSub{broker: broker, prefix: prefix, floorT: floorTopic, notify: make(chan struct{}),
		st: benchState{arrived: map[uint32]time.Time{}, rowOf: map[uint32]int64{}, floor: map[int64]time.Time{}}}
	filters := map[string]byte{prefix + "/pit/events": 1}
	if floorTopic != "" {
		filters[floorTopic] = 1
	}
	var err error
	s.proc, err = startSubscriber(ctx, subSpec{Broker: broker, ClientID: "tablectl-bench-sub-" + benchID(), Filters: filters, Rows: true}, s.receive)
	if err != nil {
		return nil, fmt.Errorf("subscriber: %w", err)
	}
	return s, nil
}

func errOr(err error, s string) any {
	if err != nil {
		return err
	}
	return s
}

// close clears the retained messages under the prefix, then disconnects.
func (s *benchSub) close() {
	clearRetained(s.broker, s.prefix)
	s.proc.close()
}

// clearRetained removes the retained messages a controller left under
// prefix (an empty retained publish each), so that runs leave nothing
// behind on a shared broker.
func clearRetained(broker, prefix string) {
	c := paho.NewClient(paho.NewClientOptions().AddBroker(broker).SetClientID("tablectl-bench-clear-" + benchID()).
		SetCleanSession(true).SetAutoReconnect(false).SetConnectTimeout(5 * time.Second))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return
	}
	defer c.Disconnect(100)
	topics := mqttpub.Topics{Prefix: prefix}
	for _, t := range []string{mqttpub.TopicStatus, mqttpub.TopicPublicCoup, mqttpub.TopicPublicShoe, mqttpub.TopicPublicRoads,
		mqttpub.TopicPitCoup, mqttpub.TopicPitShoe, mqttpub.TopicPitAlertsActive, mqttpub.TopicPitCheckpoint} {
		c.Publish(topics.Topic(t), 1, true, []byte{}).WaitTimeout(5 * time.Second)
	}
}

func (s *benchSub) receive(topic string, at time.Time, fields []byte) error {
	p, err := parseRowFields(fields)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &s.st
	switch {
	case topic == s.floorT:
		st.floor[p.Seq] = at
	case coup.IsInput(p.Kind):
		if p.Body.ShoeSeq > 0 {
			if _, dup := st.arrived[p.Body.ShoeSeq]; !dup {
				st.arrived[p.Body.ShoeSeq] = at
				st.rowOf[p.Body.ShoeSeq] = p.Seq
			}
		}
		switch coup.InputKind(p.Kind) {
		case coup.InCard:
			st.cards++
			st.lastCard = at
		case coup.InTick:
			st.lastTick = p.Seq
		case coup.InLink:
			if p.Body.Link == coup.LinkConnected {
				st.links++
			}
		}
	case p.Kind == "ctl.start":
		st.started++
	case p.Kind == string(coup.EvAlert):
		st.alerts++
	}
	st.lastEvent = at
	close(s.notify)
	s.notify = make(chan struct{})
	return nil
}

// wait waits until ok holds of what has been received; timeout only turns
// a hang into an error.
func (s *benchSub) wait(ctx context.Context, timeout time.Duration, what string, ok func(*benchState) bool) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		s.mu.Lock()
		done, ch := ok(&s.st), s.notify
		s.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.proc.done:
			return fmt.Errorf("waiting for %s: %w", what, s.proc.err)
		case <-t.C:
			return fmt.Errorf("waited %s for %s", timeout, what)
		}
	}
}

// read runs f on the state under the lock.
func (s *benchSub) read(f func(*benchState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.st)
}

// WriteTable prints the report as Markdown: the machine, the table, then
// each row's details.
func WriteTable(w io.Writer, r *Report) error {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "Machine: %d CPUs (%s), %s memory, disk %s; %s; %s; %s; load average before %s.\n\n",
		m.CPUs, m.CPUModel, m.Memory, m.Disk, m.Go, m.Mosquitto, m.Date, m.Load)
	o := r.Options
	fmt.Fprintf(&b, "Sizes: %d cards (floor %d samples), %d cards paced at %.0f cards/s and %d at full speed, a trail of %d rows, %d shoes priced, "+
		"a %s session in %s; profile %s; broker %s. Run took %s.\n\n",
		o.Cards, o.Floor, o.ThroughputCards, o.ThroughputRate, o.ThroughputCards, o.TrailRows, o.OddsShoes, o.Session, o.SessionWall, o.Profile, o.Broker, r.Elapsed)
	b.WriteString("| what | result | goal | pass/fail |\n| --- | --- | --- | --- |\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(row.What), cell(row.Result), cell(row.Goal), cell(row.Verdict))
	}
	b.WriteString("\nDetails:\n\n")
	for _, row := range r.Rows {
		if row.Detail != "" {
			fmt.Fprintf(&b, "- %s: %s\n", row.ID, row.Detail)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cell keeps a table cell on one line and its pipes escaped.
func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}
