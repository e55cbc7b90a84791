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
// AlertKind is what a floor alert says, as the table's alerts have their
// coup.AlertKind: a fixed list, so a consumer can switch on it.
type AlertKind string

// The floor's alert kinds.
const (
	AlertBrokenLink      AlertKind = "broken_link"          // a row's prev_hash is not the witnessed row before it
	AlertFork            AlertKind = "fork"                 // a seq seen with two hashes
	AlertCheckpointClash AlertKind = "checkpoint_conflict"  // a checkpoint's head is not the witnessed row, or not another checkpoint's at that seq
	AlertCheckpointBack  AlertKind = "checkpoint_backwards" // a checkpoint signed later names a lower seq
	// AlertUnregistered: messages on the subjects of tables not in the
	// registry, dropped (one alert an interval for all of them, published,
	// not stored: invented table ids must not fill the database).
	AlertUnregistered AlertKind = "unregistered_table"
	// AlertQuarantined: messages of a registered table that no key of it
	// signed (an unsigned or malformed row, a checkpoint with another
	// key's signature), kept out of the witnessed copy and counted; one
	// alert per table, reason and interval, naming the source. Not
	// tamper: anyone who reaches the table's subject could send them.
	AlertQuarantined AlertKind = "quarantined"

	AlertGap    AlertKind = "gap"    // rows missing below ones witnessed; a resync was asked for
	AlertSilent AlertKind = "silent" // nothing from the table for longer than its heartbeat
)

// Tamper reports whether an alert kind says the trail was tampered with.
func Tamper(kind AlertKind) bool {
	switch kind {
	case AlertGap, AlertSilent, AlertUnregistered, AlertQuarantined, AlertShuffleSuspect:
		return false
	}
	return true
}

// Alert is a floor alert, as stored and as published on floor/alerts.
type Alert struct {
	ID    int64     `json:"id"`
	State string    `json:"state"` // raised, resolved
	Table string    `json:"table"`
	Kind  AlertKind `json:"kind"`
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
	resolve(ctx context.Context, table string, kind AlertKind, now time.Time) ([]Alert, error)
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
	// src names where it came from, for a quarantine's alert: the
	// subject and the stream's sequence (with logins, the subject says
	// which login could publish it).
	src string
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
	// held are the table's rows held pending until a checkpoint signed
	// by the table covers them (judge.go).
	held []heldRow
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
	// hold are rows to keep pending, release pending rows to delete
	// (witnessed now, or quarantined); quarantined the counts of what
	// was kept out, by reason.
	hold       []heldRow
	release    []heldRow
	quarantine []quarantined
	// noLine: nothing the table signed came, and it has no line yet:
	// nothing unsigned makes one.
	noLine bool
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
		items = append(items, item{table: rows[i].Table, row: &rows[i], src: witness})
	}
	for i := range cps {
		if err := checkTable(cps[i].Table); err != nil {
			return nil, err
		}
		items = append(items, item{table: cps[i].Table, cp: &cps[i], src: witness})
	}
	for _, it := range items {
		if reg.Tables[it.table].Keys == nil {
			return nil, fmt.Errorf("table %s is not in the floor's registry: nothing of it is witnessed", it.table)
		}
	}
	return s.apply(ctx, items, reg, witness, time.Now().UTC())
}

// scanCPRef reads a checkpoint's seq, head hash and signing time from a
// row of either store's query.
func scanCPRef(row interface{ Scan(dest ...any) error }) (cpRef, error) {
	var c cpRef
	var head []byte
	if err := row.Scan(&c.seq, &head, &c.ns); err != nil {
		return cpRef{}, err
	}
	c.head = toHash(head)
	return c, nil
}
