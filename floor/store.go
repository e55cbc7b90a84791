package floor

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/tablectl/tablectl/audit"
)

// Alert kinds the witness raises. The first group says a trail was
// tampered with (or a table's box lies); the second is operations.
const (
	AlertBadHash         = "bad_hash"    // a row whose hash is not the hash of its fields
	AlertBrokenLink      = "broken_link" // a row's prev_hash is not the witnessed row before it
	AlertFork            = "fork"        // a seq seen with two hashes
	AlertCheckpointSig   = "checkpoint_bad_signature"
	AlertCheckpointClash = "checkpoint_conflict"  // a checkpoint's head is not the witnessed row, or not another checkpoint's at that seq
	AlertCheckpointBack  = "checkpoint_backwards" // a checkpoint signed later names a lower seq
	AlertUnregistered    = "unregistered_table"   // no key to check the table's checkpoints with
	AlertMalformed       = "malformed"            // a message that is not a row or a checkpoint

	AlertGap    = "gap"    // rows missing below ones witnessed; a resync was asked for
	AlertSilent = "silent" // nothing from the table for longer than its heartbeat
)

// Tamper reports whether an alert kind says the trail was tampered with.
func Tamper(kind string) bool {
	switch kind {
	case AlertGap, AlertSilent, AlertUnregistered, AlertShuffleSuspect:
		return false
	}
	return true
}

// Alert is a floor alert, as stored and as published on floor/alerts.
type Alert struct {
	ID    int64  `json:"id"`
	State string `json:"state"` // raised, resolved
	Table string `json:"table"`
	Kind  string `json:"kind"`
	// Seq is the row or checkpoint seq the alert is about (0: none).
	Seq     int64     `json:"seq"`
	Message string    `json:"message"`
	Tamper  bool      `json:"tamper"`
	Witness string    `json:"witness"`
	At      time.Time `json:"at"`
	// key makes the alert unique per table and kind in the database: a
	// second witness raising the same one stores nothing.
	key string
	// over is when an alert raised already over is resolved, stored with
	// it (a silence found once the table has spoken again).
	over time.Time
}

// settled is a, raised and resolved at once, as the two alerts a witness
// publishes for it.
func (a Alert) settled() []Alert {
	if a.over.IsZero() {
		return []Alert{a}
	}
	r := a
	r.State, r.At = "resolved", a.over
	return []Alert{a, r}
}

// overAt is when a is resolved as stored with it (nil: open).
func (a Alert) overAt() *time.Time {
	if a.over.IsZero() {
		return nil
	}
	return &a.over
}

// Store is the floor's database: every witnessed row, fork, checkpoint,
// alert and each table's line. PostgreSQL (OpenStore) is the floor's: two
// or more witnesses on several machines share it. SQLite (OpenSQLiteStore)
// is the laptop demo's, one process, nothing to install. The judging is
// the same code for both (judge); a store reads and writes.
type Store interface {
	// apply stores one batch in one transaction and returns the alerts it
	// raised and resolved (to publish once committed). Every table of
	// the batch is locked for the transaction, so two witnesses never
	// judge one table's rows at once.
	apply(ctx context.Context, items []item, reg *Registry, witness string, now time.Time) ([]Alert, error)
	// lines is every table's line (the gap and silence scan).
	lines(ctx context.Context) ([]tableLine, error)
	// claimResync marks table's gap asked for now, unless another witness
	// asked since before, and returns the first missing seq and the first
	// seq witnessed above it (or max+1).
	claimResync(ctx context.Context, table string, now, before time.Time) (from, upTo int64, ok bool, err error)
	// markSilent marks table silent if it was last seen at seen and is not
	// already.
	markSilent(ctx context.Context, table string, seen time.Time) (bool, error)
	// raise stores a, unless the same alert (table, kind, key) is stored;
	// it returns a with its id, and whether it was stored.
	raise(ctx context.Context, a Alert) (Alert, bool, error)
	// resolve resolves table's unresolved alerts of kind.
	resolve(ctx context.Context, table, kind string, now time.Time) ([]Alert, error)
	// viewLines is every table as the floor view shows it, coups counted
	// since since; openAlerts every unresolved alert.
	viewLines(ctx context.Context, since time.Time) ([]viewLine, error)
	openAlerts(ctx context.Context) ([]Alert, error)
	// witnessed calls f with each witnessed row of table, in seq order.
	witnessed(ctx context.Context, table string, f func(seq int64, hash audit.Hash) error) error
	// forkedSeqs counts table's seqs seen with two hashes; tamperAlerts
	// are its tamper alerts, oldest first.
	forkedSeqs(ctx context.Context, table string) (int64, error)
	tamperAlerts(ctx context.Context, table string) ([]Alert, error)
	// Close closes what the store opened itself.
	Close()
}

// tableLine is a table's line as the gap and silence scan reads it.
type tableLine struct {
	table             string
	contig, max       int64
	hole, seen, asked *time.Time
	silent            bool
}

// viewLine is a table's line as the floor view reads it.
type viewLine struct {
	table       string
	contig, max int64
	seen, cp    *time.Time
	coups       int64
}

// item is one message of a batch: a row or a checkpoint of a table.
type item struct {
	table string
	row   *Row
	cp    *audit.Checkpoint
	bad   string // why the message could not be read (an alert)
	// sig is the checkpoint's signature check, done before the
	// transaction (in parallel: it is most of a witness's CPU).
	sig     error
	sigDone bool
	// at is when the floor's stream stored it: the table's last word is
	// judged by this, not by when a witness got round to it.
	at time.Time
}

// tableState is a table's line, read under its lock.
type tableState struct {
	known       bool
	contig, max int64
	silent      bool
	cpSeq       int64
	cpSignedAt  *time.Time
	holeSince   *time.Time
	lastSeen    *time.Time
	resyncAsked *time.Time
}

// neighbour is a witnessed row's hashes.
type neighbour struct{ prev, hash audit.Hash }

// cpRef is a checkpoint as needed to compare it with others.
type cpRef struct {
	seq  int64
	head audit.Hash
	ns   int64
}

// tableRead is what a store read of a table, under its lock, before
// judging a batch's rows and checkpoints of it.
type tableRead struct {
	st tableState
	// rows are the witnessed rows at, before and after the batch's seqs.
	rows map[int64]neighbour
	// forkAt are the seqs (of those) with a fork kept.
	forkAt map[int64]bool
	// cpsAt are the checkpoints witnessed at the batch's seqs; cpsAside
	// those signed just before and just after each of the batch's
	// checkpoints.
	cpsAt    map[int64][]cpRef
	cpsAside []cpRef
}

func newTableRead() tableRead {
	return tableRead{rows: map[int64]neighbour{}, cpsAt: map[int64][]cpRef{}, forkAt: map[int64]bool{}}
}

// tableWrite is what a store writes of a table once a batch is judged.
type tableWrite struct {
	table          string
	ins, forks     []*Row
	insCP          []*audit.Checkpoint
	verified       []bool
	contig, maxSeq int64
	seenAt         time.Time
	holeSince      *time.Time
	cpSeq          int64
	cpSignedAt     *time.Time
	// rescan: a hole was filled below rows witnessed earlier; the store
	// walks contig up to the next hole.
	rescan bool
	// resolveSilent: the table spoke again after it was found silent.
	resolveSilent bool
}

// batchTables groups a batch's items by table, the tables in name order
// (the order their locks are taken in, so two witnesses never deadlock).
func batchTables(items []item) ([]string, map[string][]item) {
	byTable := map[string][]item{}
	for _, it := range items {
		byTable[it.table] = append(byTable[it.table], it)
	}
	tables := make([]string, 0, len(byTable))
	for t := range byTable {
		tables = append(tables, t)
	}
	slices.Sort(tables)
	return tables, byTable
}

// judge decides, in memory and the same for every store, what a batch
// does to each table given what was read of it: the rows and checkpoints
// to store, the forks to keep aside, the table's new line and the alerts
// raised.
func judge(tables []string, byTable map[string][]item, reads []tableRead, reg *Registry, witness string, now time.Time) ([]tableWrite, []Alert) {
	var alerts []Alert
	raise := func(table, kind, key string, seq int64, msg string) {
		alerts = append(alerts, Alert{State: "raised", Table: table, Kind: kind, Seq: seq, Message: msg, Tamper: Tamper(kind), Witness: witness, At: now, key: key})
	}
	out := make([]tableWrite, len(tables))
	for i, t := range tables {
		r := &reads[i]
		st := r.st
		w := &out[i]
		w.table = t
		if _, ok := reg.Tables[t]; !ok && !st.known {
			raise(t, AlertUnregistered, "", 0, fmt.Sprintf("table %s is not in the floor's registry: its checkpoints cannot be checked", t))
		}
		// Rows, in seq order.
		var rows []*Row
		var cps []*audit.Checkpoint
		sigs := map[*audit.Checkpoint]item{}
		for _, it := range byTable[t] {
			switch {
			case it.row != nil:
				rows = append(rows, it.row)
			case it.cp != nil:
				cps = append(cps, it.cp)
				sigs[it.cp] = it
			default:
				raise(t, AlertMalformed, strconv.FormatInt(now.UnixNano(), 10), 0, it.bad)
			}
		}
		slices.SortStableFunc(rows, func(a, b *Row) int { return int(a.Seq - b.Seq) })
		var ins, forks []*Row
		for _, row := range rows {
			if got := row.ComputeHash(); got != row.Hash {
				raise(t, AlertBadHash, row.seqKey(), row.Seq, fmt.Sprintf("row %d of %s: hash %s is not the hash of its fields (%s)", row.Seq, t, short(row.Hash), short(got)))
				continue
			}
			if have, ok := r.rows[row.Seq]; ok {
				if have.hash != row.Hash {
					// One alert for a run of forked rows (a rewritten
					// stretch sent again): the forks table keeps each.
					if !r.forkAt[row.Seq-1] {
						raise(t, AlertFork, row.seqKey(), row.Seq, fmt.Sprintf("row %d of %s seen with two hashes: %s witnessed, now %s (and the rows after it that differ too, kept aside)", row.Seq, t, short(have.hash), short(row.Hash)))
					}
					r.forkAt[row.Seq] = true
					forks = append(forks, row)
				}
				continue // a redelivery
			}
			// The links, to what was witnessed before and what this batch
			// brings.
			if row.Seq == 1 && row.PrevHash != (audit.Hash{}) {
				raise(t, AlertBrokenLink, row.seqKey(), row.Seq, fmt.Sprintf("row 1 of %s: prev_hash %s, want zero", t, short(row.PrevHash)))
			}
			if p, ok := r.rows[row.Seq-1]; ok && p.hash != row.PrevHash {
				raise(t, AlertBrokenLink, row.seqKey(), row.Seq, fmt.Sprintf("row %d of %s: prev_hash %s, but row %d was witnessed with hash %s", row.Seq, t, short(row.PrevHash), row.Seq-1, short(p.hash)))
			}
			if n, ok := r.rows[row.Seq+1]; ok && n.prev != row.Hash {
				raise(t, AlertBrokenLink, strconv.FormatInt(row.Seq+1, 10), row.Seq+1, fmt.Sprintf("row %d of %s: prev_hash %s, but row %d arrived with hash %s", row.Seq+1, t, short(n.prev), row.Seq, short(row.Hash)))
			}
			for _, c := range r.cpsAt[row.Seq] {
				if c.head != row.Hash {
					raise(t, AlertCheckpointClash, "row-"+row.seqKey(), row.Seq, fmt.Sprintf("row %d of %s has hash %s, but a checkpoint witnessed earlier signed head %s", row.Seq, t, short(row.Hash), short(c.head)))
				}
			}
			r.rows[row.Seq] = neighbour{prev: row.PrevHash, hash: row.Hash}
			ins = append(ins, row)
		}

		// Checkpoints: signature, the row at its seq, other checkpoints at
		// its seq and those signed just before and after it.
		var insCP []*audit.Checkpoint
		var verified []bool
		seen := map[cpRef]bool{}
		for _, c := range cps {
			ref := cpRef{seq: c.Seq, head: c.HeadHash, ns: c.SignedAt.UnixNano()}
			dup := seen[ref]
			for _, o := range r.cpsAt[c.Seq] {
				if o == ref {
					dup = true
				}
			}
			if dup {
				continue
			}
			seen[ref] = true
			ok := true
			if c.Table != t {
				raise(t, AlertCheckpointSig, "table-"+cpKey(c), c.Seq, fmt.Sprintf("a checkpoint of table %q arrived on %s's topic", c.Table, t))
				ok = false
			} else if err := cpSig(reg, t, c, sigs); err != nil {
				if _, known := reg.Tables[t]; known {
					raise(t, AlertCheckpointSig, cpKey(c), c.Seq, fmt.Sprintf("checkpoint %d of %s: %v", c.Seq, t, err))
				}
				ok = false
			}
			if ok {
				if row, have := r.rows[c.Seq]; have && row.hash != c.HeadHash && !r.forkAt[c.Seq] {
					raise(t, AlertCheckpointClash, cpKey(c), c.Seq, fmt.Sprintf("checkpoint %d of %s signs head %s, but row %d was witnessed with hash %s", c.Seq, t, short(c.HeadHash), c.Seq, short(row.hash)))
				}
				for _, o := range r.cpsAt[c.Seq] {
					if o.head != c.HeadHash {
						raise(t, AlertCheckpointClash, cpKey(c), c.Seq, fmt.Sprintf("checkpoint %d of %s signs head %s, another witnessed at that seq signed %s", c.Seq, t, short(c.HeadHash), short(o.head)))
						break
					}
				}
				r.cpsAt[c.Seq] = append(r.cpsAt[c.Seq], ref)
			}
			insCP = append(insCP, c)
			verified = append(verified, ok)
			if ok {
				r.cpsAside = append(r.cpsAside, ref)
			}
		}
		// Backwards: in signing order, a seq lower than the one before.
		if len(insCP) > 0 {
			order := slices.Clone(r.cpsAside)
			slices.SortFunc(order, func(a, b cpRef) int {
				if a.ns != b.ns {
					return cmpInt(a.ns, b.ns)
				}
				return cmpInt(a.seq, b.seq)
			})
			order = slices.Compact(order)
			for k := 1; k < len(order); k++ {
				if order[k].seq < order[k-1].seq && seen[order[k]] || order[k].seq < order[k-1].seq && seen[order[k-1]] {
					c := order[k]
					raise(t, AlertCheckpointBack, "back-"+strconv.FormatInt(c.seq, 10)+"-"+strconv.FormatInt(c.ns, 10), c.seq,
						fmt.Sprintf("checkpoint of %s signed at %s names seq %d, below seq %d of the one signed before it", t, time.Unix(0, c.ns).UTC().Format(time.RFC3339Nano), c.seq, order[k-1].seq))
				}
			}
		}

		w.ins, w.forks, w.insCP, w.verified = ins, forks, insCP, verified
		for k, c := range insCP {
			if verified[k] && c.Seq >= st.cpSeq {
				st.cpSeq, st.cpSignedAt = c.Seq, &c.SignedAt
			}
		}
		for _, q := range streamSilences(st, byTable[t], reg.heartbeat(t)) {
			alerts = append(alerts, Alert{State: "raised", Table: t, Kind: AlertSilent, Seq: q.seq, Witness: witness, At: now, over: now,
				key: strconv.FormatInt(q.from.UnixNano(), 10),
				Message: fmt.Sprintf("nothing from %s in the floor stream from %s to %s (%s; heartbeat %s): found when row %d was witnessed, after it",
					t, q.from.Format(time.RFC3339), q.to.Format(time.RFC3339), q.to.Sub(q.from).Round(time.Millisecond), reg.heartbeat(t), q.seq+1)})
		}
		seenAt := time.Time{}
		for _, it := range byTable[t] {
			if it.at.After(seenAt) {
				seenAt = it.at
			}
		}
		if seenAt.IsZero() {
			seenAt = now
		}
		// The table's line: how far it is contiguous, its highest seq.
		contig, maxSeq := st.contig, st.max
		for _, row := range ins {
			maxSeq = max(maxSeq, row.Seq)
		}
		// A signed checkpoint says the table has rows up to its seq: rows
		// lost at the tail (the last ones before the table went quiet) are
		// a gap too, asked for like any other.
		for k, c := range insCP {
			if verified[k] {
				maxSeq = max(maxSeq, c.Seq)
			}
		}
		for {
			if _, ok := r.rows[contig+1]; !ok {
				break
			}
			contig++
		}
		rescan := contig < maxSeq && contig > st.contig && st.max > st.contig
		holeSince := st.holeSince
		if contig >= maxSeq {
			holeSince = nil
		} else if st.holeSince == nil {
			holeSince = &now
		}
		w.contig, w.maxSeq, w.seenAt, w.holeSince, w.cpSeq, w.cpSignedAt, w.rescan = contig, maxSeq, seenAt, holeSince, st.cpSeq, st.cpSignedAt, rescan
		// A message stored before the silence (a redelivery) does not end
		// it; one the table sent since does.
		w.resolveSilent = st.silent && (st.lastSeen == nil || seenAt.After(*st.lastSeen))
	}
	return out, alerts
}

// quiet is a silence found in the floor stream's own time: nothing from
// a table between from and to; seq is its last row before.
type quiet struct {
	from, to time.Time
	seq      int64
}

// streamSilences are the silences longer than hb that a batch's rows of a
// table show in the stream's own time (when the stream stored each
// message), against the table's line st: the scan finds a silence only
// while it lasts and a witness is caught up, and a witness working
// through a backlog, or one held up while a dead witness's messages wait
// out the ack wait, would miss one that is over before it looks.
//
// A row counts only when it is the table's next (seq max+1, then
// max+2, ...): a table sends in order, so no row of it came between, and
// the checkpoints between are those of its rows before, sent with them.
// Judging stops at the first row out of order (a gap, a resend), at a
// message not from the stream, and where the table is already silent
// (the scan found it; its next word resolves it).
func streamSilences(st tableState, items []item, hb time.Duration) []quiet {
	if st.silent || st.lastSeen == nil || hb <= 0 {
		return nil
	}
	its := slices.Clone(items)
	slices.SortStableFunc(its, func(a, b item) int { return a.at.Compare(b.at) })
	var out []quiet
	last, next := *st.lastSeen, st.max+1
	for _, it := range its {
		if it.at.IsZero() {
			return out
		}
		if it.row != nil {
			switch {
			case it.row.Seq > next:
				return out
			case it.row.Seq == next:
				if it.at.Sub(last) > hb {
					out = append(out, quiet{from: last, to: it.at, seq: next - 1})
				}
				next++
			}
		}
		if it.at.After(last) {
			last = it.at
		}
	}
	return out
}

// cpSig is c's signature check: the one done before the transaction, or
// now.
func cpSig(reg *Registry, table string, c *audit.Checkpoint, pre map[*audit.Checkpoint]item) error {
	if it, ok := pre[c]; ok && it.sigDone {
		return it.sig
	}
	return reg.verify(table, *c)
}

// seqKey is the alert key of a row's seq.
func (r *Row) seqKey() string { return strconv.FormatInt(r.Seq, 10) }

func cpKey(c *audit.Checkpoint) string {
	return strconv.FormatInt(c.Seq, 10) + "-" + strconv.FormatInt(c.SignedAt.UnixNano(), 10) + "-" + c.HeadHash.String()[:16]
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func toHash(b []byte) audit.Hash {
	var h audit.Hash
	copy(h[:], b)
	return h
}

func short(h audit.Hash) string { return h.String()[:16] }

// Take stores rows and checkpoints of tables that did not come from the
// stream (an `audit export` file taken off a box, a test), judged as the
// witness judges the stream's, and returns the alerts raised.
func Take(ctx context.Context, s Store, reg *Registry, witness string, rows []Row, cps []audit.Checkpoint) ([]Alert, error) {
	items := make([]item, 0, len(rows)+len(cps))
	for i := range rows {
		if err := checkTable(rows[i].Table); err != nil {
			return nil, err
		}
		items = append(items, item{table: rows[i].Table, row: &rows[i]})
	}
	for i := range cps {
		if err := checkTable(cps[i].Table); err != nil {
			return nil, err
		}
		items = append(items, item{table: cps[i].Table, cp: &cps[i]})
	}
	return s.apply(ctx, items, reg, witness, time.Now().UTC())
}
