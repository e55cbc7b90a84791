package floor

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/clock"
)

// quarantineOf is the table's quarantine counts by reason.
func quarantineOf(t *testing.T, s Store, table string) map[string]int64 {
	out := map[string]int64{}
	scanAll(t, s, func(scan func(...any) error) error {
		var reason string
		var n int64
		if err := scan(&reason, &n); err != nil {
			return err
		}
		out[reason] = n
		return nil
	}, `SELECT reason, count FROM S.quarantine WHERE table_id = $1`, table)
	return out
}

// pendingOf counts the table's rows held pending.
func pendingOf(t *testing.T, s Store, table string) int64 {
	var n int64
	scanAll(t, s, func(scan func(...any) error) error { return scan(&n) }, `SELECT count(*) FROM S.pending WHERE table_id = $1`, table)
	return n
}

// cpSeqOf is the table's last witnessed checkpoint's seq.
func cpSeqOf(t *testing.T, s Store, table string) int64 {
	var n int64
	scanAll(t, s, func(scan func(...any) error) error { return scan(&n) }, `SELECT cp_seq FROM S.tables WHERE table_id = $1`, table)
	return n
}

// TestStoreWitnessesOnlySigned: issue 30's attacks on the judging, by
// anyone who can publish on a table's subjects. Rows with the next seqs,
// a right hash and link but no checkpoint of the table over them are
// held, never witnessed: the table's own rows, signed, are. A checkpoint
// signed by another table's key, or naming another table, or garbage, is
// quarantined: no tamper alert against the table, its line unmoved, its
// next honest checkpoint judged as if nothing came. What was held past
// PendingGrace is quarantined and counted; one alert per reason and
// interval, not tamper.
func TestStoreWitnessesOnlySigned(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		reg := &Registry{Heartbeat: time.Minute, Tables: map[string]TableEntry{}}
		c := newChain(t, "FLOOR-01", 20)
		c.registry(reg)
		other := newChain(t, "FLOOR-02", 30)
		other.registry(reg)
		now := t0.Add(time.Hour)
		apply := func(its []item) {
			t.Helper()
			if _, err := s.apply(ctx, its, reg, "w", now); err != nil {
				t.Fatal(err)
			}
		}
		apply(c.sign(rowItems(c.rows)))
		forged := *c
		forged.rows = slices.Clone(c.rows)
		forged.extend(2, "anyone's")
		// FLOOR-02's key signing a checkpoint far ahead, on FLOOR-01's
		// subject and naming FLOOR-01; FLOOR-02's real checkpoint there;
		// a garbage signature; not JSON.
		ahead := audit.Checkpoint{Table: "FLOOR-01", Seq: 100115, HeadHash: forged.rows[21].Hash, SignedAt: now.Add(time.Hour), KeyID: "x"}
		ahead.Signature = ed25519.Sign(other.key, ahead.Message())
		theirs := other.checkpoint(25, now)
		garbage := c.checkpoint(20, now)
		garbage.Signature = []byte("not a signature at all, sixty-four bytes long, or near enough!!")
		attacks := append(rowItems(forged.rows[20:]),
			item{table: c.table, cp: &ahead, src: "subject tablectl.FLOOR-01.pit.checkpoint, stream seq 7"},
			item{table: c.table, cp: &theirs}, item{table: c.table, cp: &garbage},
			item{table: c.table, bad: "pit/events of FLOOR-01: not json"})
		apply(attacks)
		if a := alertsOf(t, s, c.table); !slices.Equal(a, []storedAlert{{AlertQuarantined, 0}, {AlertQuarantined, 0}, {AlertQuarantined, 0}}) {
			t.Fatalf("after the attacks: alerts %v, want three quarantine notices (bad_signature, other_table, malformed)", a)
		}
		if got := stored(t, s, c.table); len(got) != 20 {
			t.Fatalf("after the attacks: %d rows witnessed, want 20", len(got))
		}
		if contig, max := contigOf(t, s, c.table); contig != 20 || max != 20 || cpSeqOf(t, s, c.table) != 20 {
			t.Fatalf("after the attacks: contig %d max %d cp %d, want the line unmoved at 20", contig, max, cpSeqOf(t, s, c.table))
		}
		// The table's own next rows and checkpoints: witnessed, nothing
		// alerted (no fork with the forged rows, no checkpoint backwards
		// after the far one).
		c.extend(3, "")
		apply(c.sign(rowItems(c.rows[20:])))
		got := stored(t, s, c.table)
		for _, r := range c.rows {
			if got[r.Seq] != r.Hash {
				t.Fatalf("row %d: witnessed %s, want the table's %s", r.Seq, got[r.Seq], r.Hash)
			}
		}
		for _, a := range alertsOf(t, s, c.table) {
			if Tamper(a.kind) {
				t.Fatalf("a tamper alert against the honest table: %v", alertsOf(t, s, c.table))
			}
		}
		if contig, max := contigOf(t, s, c.table); contig != 23 || max != 23 || cpSeqOf(t, s, c.table) != 23 {
			t.Fatalf("contig %d max %d cp %d, want 23", contig, max, cpSeqOf(t, s, c.table))
		}
		// The forged rows are held until PendingGrace, then quarantined.
		if n := pendingOf(t, s, c.table); n != 2 {
			t.Fatalf("%d rows held, want the 2 forged", n)
		}
		now = now.Add(PendingGrace)
		c.extend(1, "")
		apply(c.sign(rowItems(c.rows[23:])))
		if n := pendingOf(t, s, c.table); n != 0 {
			t.Fatalf("%d rows held after PendingGrace, want none", n)
		}
		q := quarantineOf(t, s, c.table)
		want := map[string]int64{QuarantineBadSignature: 2, QuarantineOtherTable: 1, QuarantineMalformed: 1, QuarantineUnsigned: 2}
		if fmt.Sprint(q) != fmt.Sprint(want) {
			t.Fatalf("quarantined %v, want %v", q, want)
		}
		// FLOOR-02 was not touched by its checkpoint shown on FLOOR-01.
		if a := alertsOf(t, s, other.table); len(a) != 0 {
			t.Fatalf("FLOOR-02: %v", a)
		}
	})
}

// TestStorePendingBounded: a flood of unsigned rows on a table's subject
// holds at most PendingMax of them (pendingPerSeq at one seq); the rest
// is quarantined and counted, and the table's own rows are witnessed.
func TestStorePendingBounded(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		reg := &Registry{Heartbeat: time.Minute, Tables: map[string]TableEntry{}}
		c := newChain(t, "FLOOR-03", 5)
		c.registry(reg)
		if _, err := s.apply(ctx, c.sign(rowItems(c.rows)), reg, "w", t0); err != nil {
			t.Fatal(err)
		}
		flood := newChain(t, "FLOOR-03", PendingMax+10)
		var its []item
		for k := range 8 {
			// The same seq 6 eight times over.
			r := c.rows[4]
			r.Seq, r.Body = 6, fmt.Appendf(nil, `{"n":%d}`, k)
			r.Hash = r.ComputeHash()
			its = append(its, item{table: r.Table, row: &r})
		}
		its = append(its, rowItems(flood.rows[10:])...)
		for i := 0; i < len(its); i += 1000 {
			if _, err := s.apply(ctx, its[i:min(i+1000, len(its))], reg, "w", t0); err != nil {
				t.Fatal(err)
			}
		}
		if n := pendingOf(t, s, c.table); n != PendingMax {
			t.Fatalf("%d rows held, want PendingMax %d", n, PendingMax)
		}
		if q := quarantineOf(t, s, c.table); q[QuarantinePendingFull] != int64(len(its)-PendingMax) {
			t.Fatalf("quarantined %v, want %d pending_full", q, len(its)-PendingMax)
		}
		c.extend(2, "")
		if _, err := s.apply(ctx, c.sign(rowItems(c.rows[5:])), reg, "w", t0); err != nil {
			t.Fatal(err)
		}
		if contig, _ := contigOf(t, s, c.table); contig != 7 {
			t.Fatalf("contig %d during the flood, want 7", contig)
		}
	})
}

// TestWitnessDropsBeforeJudging: messages too big, on no table's subject
// or of an unregistered table are dropped before judging and counted,
// with one alert per reason per DropAlertEvery naming the first source;
// a registered table's pass.
func TestWitnessDropsBeforeJudging(t *testing.T) {
	clk := clock.NewFake(t0)
	var alerts []Alert
	reg := &Registry{Heartbeat: time.Minute, Tables: map[string]TableEntry{}}
	c := newChain(t, "FLOOR-01", 1)
	c.registry(reg)
	w := &Witness{cfg: Config{Registry: reg, Clock: clk, OnAlert: func(a Alert) { alerts = append(alerts, a) }}, log: quietLog()}
	w.cfg.defaults()
	ok := rowPayload(c.rows[0])
	for _, tc := range []struct {
		subject string
		data    []byte
		drop    bool
	}{
		{"tablectl.FLOOR-01.pit.events", ok, false},
		{"tablectl.FLOOR-01.pit.events", make([]byte, MaxMessageBytes+1), true},
		{"tablectl.INVENTED-1.pit.events", ok, true},
		{"tablectl.INVENTED-2.pit.events", ok, true},
		{"tablectl.pit.events", ok, true},
		{"tablectl.FLOOR-01.pit.events", []byte("not json"), false}, // the table's: quarantined by the judging
	} {
		_, dropped := w.admit(tc.subject, tc.data, "subject "+tc.subject)
		if dropped != tc.drop {
			t.Errorf("%s (%d bytes): dropped %v, want %v", tc.subject, len(tc.data), dropped, tc.drop)
		}
	}
	// A flood of invented tables within the interval: counted, no more alerts.
	for i := range 1000 {
		w.admit(fmt.Sprintf("tablectl.INV-%d.pit.events", i), ok, "flood")
	}
	if st := w.Stats(); st.Dropped != 1004 {
		t.Fatalf("dropped %d, want 1004", st.Dropped)
	}
	var kinds []AlertKind
	for _, a := range alerts {
		kinds = append(kinds, a.Kind)
		if a.Tamper {
			t.Errorf("a tamper alert for a dropped message: %+v", a)
		}
	}
	if !slices.Equal(kinds, []AlertKind{AlertQuarantined, AlertUnregistered, AlertQuarantined}) {
		t.Fatalf("alerts %v, want one per reason (oversized, unregistered, no table)", kinds)
	}
	clk.Advance(DropAlertEvery)
	w.admit("tablectl.INV-X.pit.events", ok, "later")
	if last := alerts[len(alerts)-1]; len(alerts) != 4 || !strings.Contains(last.Message, "1002 message(s)") || !strings.Contains(last.Message, "first from subject tablectl.INVENTED-2") {
		t.Fatalf("after the interval: %d alerts, last %+v, want one counting the flood", len(alerts), last)
	}
}
