package signedcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

func TestRefusalBucket(t *testing.T) {
	l := RefusalLimit{Burst: 3, Every: time.Second, Summary: 10 * time.Second}
	t0 := time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)
	steps := []struct {
		at   time.Duration // since t0
		own  bool
		what string
	}{
		{0, true, "the burst"}, {0, true, "the burst"}, {0, true, "the burst"},
		{0, false, "the burst is spent"},
		{500 * time.Millisecond, false, "half a token"},
		{time.Second, true, "a token a second"},
		{time.Second, false, "spent again"},
		{30 * time.Second, true, "refilled"}, {30 * time.Second, true, "refilled"}, {30 * time.Second, true, "refilled"},
		{30 * time.Second, false, "no more than the burst, however long the wait"},
		{25 * time.Second, false, "the clock stepped back gives nothing"},
		{31 * time.Second, true, "and time goes on from the latest reading"},
	}
	var b refusalBucket
	for i, st := range steps {
		if got := b.take(l, t0.Add(st.at)); got != st.own {
			t.Fatalf("step %d (%s, at %s): own row %v, want %v", i, st.what, st.at, got, st.own)
		}
	}
}

func TestRefusalLimitDefaults(t *testing.T) {
	got := RefusalLimit{}.withDefaults()
	if got != (RefusalLimit{Burst: 10, Every: time.Second, Summary: 10 * time.Second}) {
		t.Fatalf("defaults %+v", got)
	}
	if got := (RefusalLimit{Burst: 2, Every: time.Minute, Summary: time.Hour}).withDefaults(); got.Burst != 2 || got.Every != time.Minute || got.Summary != time.Hour {
		t.Fatalf("set values changed: %+v", got)
	}
}

// outcomes collects what the handler tells the metrics.
type outcomes struct {
	mu  sync.Mutex
	all []Outcome
}

func (o *outcomes) add(x Outcome) { o.mu.Lock(); o.all = append(o.all, x); o.mu.Unlock() }

func (o *outcomes) count(f func(Outcome) bool) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, x := range o.all {
		if f(x) {
			n++
		}
	}
	return n
}

// junk is hostile input: random bytes, broken JSON, unknown fields,
// forged signatures; about one in four is oversized (size beyond MaxBytes,
// payload cut at MaxBytes+1 as the connection cuts it).
func junk(r *rand.Rand, i int) (payload []byte, size int) {
	switch i % 8 {
	case 0, 4:
		big := bytes.Repeat([]byte("A"), MaxBytes+1)
		return big, MaxBytes + 1 + r.IntN(1<<20)
	case 1:
		b := make([]byte, r.IntN(300))
		for j := range b {
			b[j] = byte(r.UintN(256))
		}
		return b, 0
	case 2:
		return []byte(`{"table":"BAC-07","id":"x","action":"void"`), 0
	case 3:
		return []byte(`{"table":"BAC-07","id":"x","action":"void","evil":true}`), 0
	case 5:
		return []byte(`[1,2,3]`), 0
	case 6:
		return []byte{0xff, 0xfe, '{', '}'}, 0
	default:
		return []byte(`{"id":` + string(bytes.Repeat([]byte("["), 200))), 0
	}
}

// A storm of junk writes Burst rows and one summary, and a real command in
// the middle of it is carried out as always.
func TestStormOfRefusalsIsSummarised(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	rec := openRecorder(t, filepath.Join(t.TempDir(), "trail.db"), clock)
	defer rec.Close()
	var outs outcomes
	limit := RefusalLimit{Burst: 5, Every: time.Second, Summary: 10 * time.Second}
	h := &Handler{Verifier: newTestVerifier(t, clock), Recorder: rec, Clock: clock, Logger: quiet(), Limit: limit, Observe: outs.add}

	start := rec.Store().Head().Seq
	r := rand.New(rand.NewPCG(7, 7))
	const storm = 2000
	var bytesSent int64
	oversized := 0
	for i := range storm {
		p, size := junk(r, i)
		if i == storm/2 {
			h.Handle(ctx, wire(t, signed(t, clock, "alice", "suspend", func(c *Command) { c.Reason = "flood on cmd" })), 0)
		}
		h.Handle(ctx, p, size)
		bytesSent += int64(max(size, len(p)))
		if size > MaxBytes {
			oversized++
		}
	}
	// The clock has not moved: no token came back and no summary is due.
	due, ok := h.SummaryDue()
	if !ok || !due.Equal(clock.Now().Add(limit.Summary)) {
		t.Fatalf("summary due %s %v, want %s", due, ok, clock.Now().Add(limit.Summary))
	}
	got := rows(t, rec, start+1)
	var kinds []string
	for _, r := range got {
		kinds = append(kinds, r.Kind)
	}
	want := []string{audit.KindRejected, audit.KindRejected, audit.KindRejected, audit.KindRejected, audit.KindRejected,
		"in.cmd", "command_accepted", "suspended"}
	if len(kinds) != len(want) {
		t.Fatalf("rows %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("rows %v, want %v", kinds, want)
		}
	}
	if _, pit := rec.View(); !pit.Suspended || pit.SuspendReason != "flood on cmd" {
		t.Fatalf("the command in the storm was not carried out: %+v", pit)
	}

	// Ten seconds on, the next refusal has a token again, and the summary
	// falls due and is written.
	from := clock.Now()
	clock.Advance(limit.Summary)
	h.Handle(ctx, []byte("not json"), 0)
	got = rows(t, rec, start+1)
	if n := len(got); n != len(want)+2 {
		t.Fatalf("%d rows after the summary, want %d", n, len(want)+2)
	}
	if got[len(got)-2].Kind != audit.KindRejected || got[len(got)-1].Kind != KindRefusals {
		t.Fatalf("last rows %s, %s", got[len(got)-2].Kind, got[len(got)-1].Kind)
	}
	var b RefusalsBody
	if err := json.Unmarshal(got[len(got)-1].Body, &b); err != nil {
		t.Fatal(err)
	}
	summarised := int64(storm - limit.Burst)
	if b.Count != summarised || !b.From.Equal(from) || !b.To.Equal(from) {
		t.Fatalf("summary %+v: want %d refusals at %s", b, summarised, from)
	}
	var byCode int64
	for _, n := range b.Codes {
		byCode += n
	}
	if byCode != b.Count || b.Codes[CodeOversized] == 0 || b.Codes[CodeMalformed] == 0 || len(b.Codes) != 2 {
		t.Fatalf("summary codes %v for %d", b.Codes, b.Count)
	}
	// The bytes of the five with their own rows are in those rows.
	var ownBytes int64
	for _, r := range got {
		if r.Kind == audit.KindRejected {
			var rb RejectedBody
			json.Unmarshal(r.Body, &rb)
			ownBytes += int64(rb.Bytes)
		}
	}
	if ownBytes+b.Bytes != bytesSent+int64(len("not json")) {
		t.Fatalf("bytes: %d in rows + %d summarised, %d sent", ownBytes, b.Bytes, bytesSent+int64(len("not json")))
	}
	if _, ok := h.SummaryDue(); ok {
		t.Fatal("a summary still due after it was written")
	}
	if _, ok := ReplyFor(got[len(got)-1]); ok {
		t.Fatal("a summary calls for a reply")
	}

	// What the metrics heard.
	if n := outs.count(func(o Outcome) bool { return o.Result == Accepted && o.Code == "" && !o.Summarised }); n != 1 {
		t.Errorf("%d accepted", n)
	}
	if n := outs.count(func(o Outcome) bool { return o.Result == Refused && o.Summarised }); n != int(summarised) {
		t.Errorf("%d summarised, want %d", n, summarised)
	}
	if n := outs.count(func(o Outcome) bool { return o.Result == Refused && !o.Summarised }); n != limit.Burst+1 {
		t.Errorf("%d refused with a row, want %d", n, limit.Burst+1)
	}
	if n := outs.count(func(o Outcome) bool { return o.Code == CodeOversized }); n != oversized {
		t.Errorf("%d oversized, want %d", n, oversized)
	}
}

// Accepted commands take no token: a supervisor's burst of real commands
// leaves the refusals their rows.
func TestAcceptedCommandsTakeNoToken(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	rec := openRecorder(t, filepath.Join(t.TempDir(), "trail.db"), clock)
	defer rec.Close()
	h := &Handler{Verifier: newTestVerifier(t, clock), Recorder: rec, Clock: clock, Logger: quiet(), Limit: RefusalLimit{Burst: 2}}
	start := rec.Store().Head().Seq
	for range 5 {
		h.Handle(ctx, wire(t, signed(t, clock, "alice", "suspend", nil)), 0)
		h.Handle(ctx, wire(t, signed(t, clock, "alice", "resume", nil)), 0)
	}
	h.Handle(ctx, []byte("junk"), 0)
	h.Handle(ctx, []byte("junk"), 0)
	h.Handle(ctx, []byte("junk"), 0) // the third: summarised
	rejected, inputs := 0, 0
	for _, r := range rows(t, rec, start+1) {
		switch r.Kind {
		case audit.KindRejected:
			rejected++
		case string(coup.InCmd):
			inputs++
		}
	}
	if rejected != 2 || inputs != 10 {
		t.Fatalf("%d rejected rows, %d commands; want 2 and 10", rejected, inputs)
	}
}

// flakyRecorder refuses writes while down.
type flakyRecorder struct {
	Recorder
	mu   sync.Mutex
	down bool
}

func (f *flakyRecorder) setDown(d bool) { f.mu.Lock(); f.down = d; f.mu.Unlock() }

func (f *flakyRecorder) Record(ctx context.Context, e audit.Event) (audit.Record, error) {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		return audit.Record{}, errDiskFull
	}
	return f.Recorder.Record(ctx, e)
}

// A summary the trail refuses is kept and merged into the next, tried a
// Summary later rather than at every refusal.
func TestSummaryTheTrailRefusedIsKept(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	rec := openRecorder(t, filepath.Join(t.TempDir(), "trail.db"), clock)
	defer rec.Close()
	fr := &flakyRecorder{Recorder: rec}
	limit := RefusalLimit{Burst: 1, Every: time.Hour, Summary: 10 * time.Second}
	h := &Handler{Verifier: newTestVerifier(t, clock), Recorder: fr, Clock: clock, Logger: quiet(), Limit: limit}
	start := rec.Store().Head().Seq
	for range 4 {
		h.Handle(ctx, []byte("junk"), 0) // one row, three gathered
	}
	fr.setDown(true)
	clock.Advance(limit.Summary)
	h.Handle(ctx, []byte("junk"), 0) // due: the write fails
	if err := h.Flush(ctx); !errors.Is(err, errDiskFull) {
		t.Fatalf("flush on a full disk: %v", err)
	}
	due, ok := h.SummaryDue()
	if !ok || !due.Equal(clock.Now().Add(limit.Summary)) {
		t.Fatalf("after a failed write the summary is due %s %v; want a Summary later, %s", due, ok, clock.Now().Add(limit.Summary))
	}
	h.Handle(ctx, []byte("junk"), 0)
	fr.setDown(false)
	if err := h.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var sums []RefusalsBody
	for _, r := range rows(t, rec, start+1) {
		if r.Kind == KindRefusals {
			var b RefusalsBody
			json.Unmarshal(r.Body, &b)
			sums = append(sums, b)
		}
	}
	if len(sums) != 1 || sums[0].Count != 5 || sums[0].Codes[CodeMalformed] != 5 || sums[0].Bytes != 5*4 {
		t.Fatalf("summaries %+v, want one of 5 refusals", sums)
	}
}

// Run writes a summary when its timer fires, and what is left on the way
// out.
func TestRunWritesSummaries(t *testing.T) {
	clock := newFakeClock()
	rec := openRecorder(t, filepath.Join(t.TempDir(), "trail.db"), clock)
	defer rec.Close()
	committed := make(chan audit.Record, 16)
	limit := RefusalLimit{Burst: 1, Every: time.Hour, Summary: 10 * time.Second}
	h := &Handler{Verifier: newTestVerifier(t, clock), Recorder: notify{rec, committed}, Clock: clock, Logger: quiet(), Limit: limit}
	in := make(chan Message)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx, in); close(done) }()

	in <- Message{Payload: []byte("junk 1")}
	if r := <-committed; r.Kind != audit.KindRejected {
		t.Fatalf("first refusal: %s", r.Kind)
	}
	// No timer while nothing is gathered; one after each command once
	// something is, for the time left.
	in <- Message{Payload: []byte("junk 2")}
	armed := func(d time.Duration) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := clock.WaitArmed(ctx, d); err != nil {
			t.Fatalf("summary timer: %v", err)
		}
	}
	armed(limit.Summary)
	clock.Advance(4 * time.Second)
	in <- Message{Payload: []byte("junk 3")}
	armed(limit.Summary - 4*time.Second)
	clock.Advance(6 * time.Second)
	r := <-committed
	var b RefusalsBody
	if r.Kind != KindRefusals || json.Unmarshal(r.Body, &b) != nil || b.Count != 2 {
		t.Fatalf("on the timer: %s %s", r.Kind, r.Body)
	}
	in <- Message{Payload: []byte("junk 4")}
	armed(limit.Summary)
	cancel()
	<-done
	r = <-committed
	if r.Kind != KindRefusals || json.Unmarshal(r.Body, &b) != nil || b.Count != 1 {
		t.Fatalf("on the way out: %s %s", r.Kind, r.Body)
	}
	if run := clock.Running(); len(run) != 0 {
		t.Fatalf("timers %v running with nothing gathered", run)
	}
}

// notify passes rows on to a channel as they are committed.
type notify struct {
	*audit.Recorder
	ch chan audit.Record
}

func (n notify) Record(ctx context.Context, e audit.Event) (audit.Record, error) {
	r, err := n.Recorder.Record(ctx, e)
	if err == nil {
		n.ch <- r
	}
	return r, err
}

// BenchmarkRefusalSummarised is the cost of one refusal beyond the limit:
// how fast the handler drains a flood (one core).
func BenchmarkRefusalSummarised(b *testing.B) {
	clock := newFakeClock()
	rec, err := audit.OpenRecorder(context.Background(), filepath.Join(b.TempDir(), "trail.db"), audit.RecorderOptions{
		Table: "BAC-07", Config: coup.DefaultTableConfig(mustVIP(b)), Clock: clock, Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Close()
	h := &Handler{Verifier: newTestVerifier(b, clock), Recorder: rec, Clock: clock, Logger: quiet()}
	for range DefaultRefusalBurst {
		h.Handle(context.Background(), []byte("junk"), 0)
	}
	payloads := [][]byte{
		[]byte(`{"table":"BAC-07","id":"x","action":"void","sig":"AAAA","unknown":1}`),
		bytes.Repeat([]byte{'{'}, MaxBytes+1),
		[]byte{0xff, 0xfe},
	}
	b.ResetTimer()
	for i := range b.N {
		h.Handle(context.Background(), payloads[i%len(payloads)], 0)
	}
}

func mustVIP(tb testing.TB) coup.Profile {
	p, err := coup.BuiltinProfile(coup.ProfileVIP)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
