package floor

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
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
// is the laptop demo's, one process, nothing to install. Both are one code
// (sqlStore: a batch's transaction, apply, and the floor's reads, judged
// by judge) over a small dialect each: its SQL's words, its times, how it
// sends statements.
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
	table string
	st    tableState
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

func newTableRead(table string) tableRead {
	return tableRead{table: table, rows: map[int64]neighbour{}, cpsAt: map[int64][]cpRef{}, forkAt: map[int64]bool{}}
}

// picker scans a row of an answer into dest and says whose read it is:
// one table's (SQLite asks a table at a time), or the table the answer's
// first column names (PostgreSQL asks for every table of a batch at once:
// a statement per table cost a floor of 500 tables more of PostgreSQL's
// CPU than the rows themselves).
type picker func(scan scanFunc, dest ...any) (*tableRead, error)

// pickOne is the picker of a statement that asks one table.
func pickOne(r *tableRead) picker {
	return func(scan scanFunc, dest ...any) (*tableRead, error) { return r, scan(dest...) }
}

// pickByTable is the picker of a statement that asks every table of a
// batch, the table's id its answer's first column.
func pickByTable(tables []string, reads []tableRead) picker {
	idx := make(map[string]*tableRead, len(tables))
	for i, t := range tables {
		idx[t] = &reads[i]
	}
	return func(scan scanFunc, dest ...any) (*tableRead, error) {
		var t string
		if err := scan(append([]any{&t}, dest...)...); err != nil {
			return nil, err
		}
		r, ok := idx[t]
		if !ok {
			return nil, fmt.Errorf("an answer for table %q, which was not asked for", t)
		}
		return r, nil
	}
}

// readHeld reads a row the table holds pending: seq, at, kind, shoe,
// coup, body, prev_hash, hash, since, stream_at, source.
func readHeld(pick picker) func(scanFunc) error {
	return func(scan scanFunc) error {
		h := heldRow{row: &Row{}}
		var prev, hash []byte
		r, err := pick(scan, &h.row.Seq, &h.row.At, &h.row.Kind, &h.row.Shoe, &h.row.Coup, &h.row.Body, &prev, &hash, stampOf{&h.since}, stampOf{&h.at}, &h.src)
		if err != nil {
			return err
		}
		h.row.Table, h.row.PrevHash, h.row.Hash = r.table, toHash(prev), toHash(hash)
		r.held = append(r.held, h)
		return nil
	}
}

// readLine reads the table's line: contig, max_seq, silent, cp_seq,
// cp_signed_at, hole_since, last_seen, resync_asked (none: not known).
func readLine(pick picker) func(scanFunc) error {
	return func(scan scanFunc) error {
		st := tableState{known: true}
		r, err := pick(scan, &st.contig, &st.max, &st.silent, &st.cpSeq, maybeStamp{&st.cpSignedAt}, maybeStamp{&st.holeSince}, maybeStamp{&st.lastSeen}, maybeStamp{&st.resyncAsked})
		if err != nil {
			return err
		}
		r.st = st
		return nil
	}
}

// readNeighbour reads a witnessed row: seq, prev_hash, hash.
func readNeighbour(pick picker) func(scanFunc) error {
	return func(scan scanFunc) error {
		var seq int64
		var prev, hash []byte
		r, err := pick(scan, &seq, &prev, &hash)
		if err != nil {
			return err
		}
		r.rows[seq] = neighbour{prev: toHash(prev), hash: toHash(hash)}
		return nil
	}
}

// readFork reads the seq of a fork kept.
func readFork(pick picker) func(scanFunc) error {
	return func(scan scanFunc) error {
		var seq int64
		r, err := pick(scan, &seq)
		if err != nil {
			return err
		}
		r.forkAt[seq] = true
		return nil
	}
}

// readCheckpointAt reads a checkpoint witnessed at one of the batch's
// seqs, readCheckpointAside one signed around one of its checkpoints:
// seq, head_hash, signed_ns.
func readCheckpointAt(pick picker) func(scanFunc) error {
	return func(scan scanFunc) error {
		c, r, err := scanCPRef(pick, scan)
		if err == nil {
			r.cpsAt[c.seq] = append(r.cpsAt[c.seq], c)
		}
		return err
	}
}

func readCheckpointAside(pick picker) func(scanFunc) error {
	return func(scan scanFunc) error {
		c, r, err := scanCPRef(pick, scan)
		if err == nil {
			r.cpsAside = append(r.cpsAside, c)
		}
		return err
	}
}

// scanCPRef reads a checkpoint's seq, head hash and signing time.
func scanCPRef(pick picker, scan scanFunc) (cpRef, *tableRead, error) {
	var c cpRef
	var head []byte
	r, err := pick(scan, &c.seq, &head, &c.ns)
	if err != nil {
		return cpRef{}, nil, err
	}
	c.head = toHash(head)
	return c, r, nil
}

// around is what a batch reads of a table around its own: the witnessed
// rows and forks at seqs, the checkpoints at cpSeqs, and those signed just
// before and after each time of cpNs.
type around struct{ seqs, cpSeqs, cpNs []int64 }

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

// scanFunc scans the current row of an answer into dest.
type scanFunc = func(dest ...any) error

// dialect is what the floor's two databases do differently, and no more:
// their words for the shared SQL, how they store a time, how they run a
// statement and a batch's transaction. The SQL is written once, in
// PostgreSQL's words ("S." before each of the floor's tables, $n for the
// parameters), except the few statements whose shape differs, which
// applyTx names.
type dialect interface {
	// sql is q in the database's words.
	sql(q string) string
	// stamp is t as the database stores a time; the zero time is none
	// (PostgreSQL's NULL, SQLite's 0: its column stream_at is NOT NULL).
	stamp(t time.Time) any
	// each runs q (the shared words) and calls read with each row of its
	// answer.
	each(ctx context.Context, q string, args []any, read func(scanFunc) error) error
	// exec runs q (the shared words) and returns how many rows it changed.
	exec(ctx context.Context, q string, args ...any) (int64, error)
	// begin starts a batch's transaction.
	begin(ctx context.Context) (applyTx, error)
}

// applyTx is a batch's transaction as apply drives it: statements are
// queued, then sent at once (flush): PostgreSQL's as one pgx batch, one
// round trip, SQLite's one after another in its file's one writer's
// transaction. Each queued statement's answer is read, in the order
// queued, by the function queued with it.
type applyTx interface {
	// queue queues q (the shared words) with args; read, when not nil,
	// reads each row of its answer; what names it in an error.
	queue(what, q string, args []any, read func(scanFunc) error)
	// flush sends what is queued and reads the answers.
	flush(ctx context.Context) error
	commit(ctx context.Context) error
	rollback(ctx context.Context)

	// The statements whose shape differs between the databases.

	// Each asks for every table of a batch: PostgreSQL in one statement
	// (its arrays), SQLite a statement per table. reads[i] is what was
	// read of tables[i].

	// lock queues taking each table's lock for the transaction, in the
	// order given (SQLite's BEGIN IMMEDIATE holds the whole file already).
	lock(tables []string)
	// readHeld queues reading the rows each table holds pending;
	// readLines each table's line.
	readHeld(tables []string, reads []tableRead)
	readLines(tables []string, reads []tableRead)
	// readAround queues reading what asks[i] names of tables[i].
	readAround(tables []string, asks []around, reads []tableRead)
	// insertRows and insertCheckpoints queue the tables' new rows and
	// checkpoints, witnessed now; release and hold the pending rows
	// deleted and kept; putLines the lines of the tables that have one.
	insertRows(writes []tableWrite, now time.Time)
	insertCheckpoints(writes []tableWrite, now time.Time)
	release(writes []tableWrite)
	hold(writes []tableWrite)
	putLines(writes []tableWrite)
}

// sqlStore is the store both databases are, over their dialect: a batch's
// transaction (apply) and the floor's reads.
type sqlStore struct{ d dialect }

// apply stores one batch in one transaction and returns the alerts it
// raised and resolved (to publish once committed). Every table of the
// batch is locked for the transaction, in name order, so two witnesses
// never judge one table's rows at once and never deadlock. Three sends
// whatever the batch's size (on PostgreSQL three round trips, and one
// statement of each kind for all the batch's tables however many): the
// locks and the rows each table holds pending, the reads that depend on
// them, the writes.
func (s sqlStore) apply(ctx context.Context, items []item, reg *Registry, witness string, now time.Time) ([]Alert, error) {
	tables, byTable := batchTables(items)
	tx, err := s.d.begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("floor database: begin: %w", err)
	}
	defer tx.rollback(context.WithoutCancel(ctx))
	reads, err := s.read(ctx, tx, tables, byTable)
	if err != nil {
		return nil, err
	}
	writes, alerts := judge(tables, byTable, reads, reg, witness, now)
	out, err := s.write(ctx, tx, writes, alerts, witness, now)
	if err != nil {
		return nil, err
	}
	if err := tx.commit(ctx); err != nil {
		return nil, fmt.Errorf("floor database: commit: %w", err)
	}
	return out, nil
}

// read takes each table's lock and reads its line and what the judging
// compares the batch with: the rows it holds pending, then (the seqs to
// read depend on those) the witnessed rows, forks and checkpoints around
// the batch's.
func (s sqlStore) read(ctx context.Context, tx applyTx, tables []string, byTable map[string][]item) ([]tableRead, error) {
	reads := make([]tableRead, len(tables))
	for i, t := range tables {
		reads[i] = newTableRead(t)
	}
	tx.lock(tables)
	tx.readHeld(tables, reads)
	if err := tx.flush(ctx); err != nil {
		return nil, err
	}
	asks := make([]around, len(tables))
	for i, t := range tables {
		asks[i].seqs, asks[i].cpSeqs, asks[i].cpNs = readSeqs(byTable[t], reads[i].held)
	}
	tx.readLines(tables, reads)
	tx.readAround(tables, asks, reads)
	if err := tx.flush(ctx); err != nil {
		return nil, err
	}
	return reads, nil
}

// write queues what the judging wrote of each table and the alerts it
// raised, resolves the silence of the tables that spoke again, and sends
// it all; it returns the alerts stored (a second witness's copy of one
// stores nothing) and resolved.
func (s sqlStore) write(ctx context.Context, tx applyTx, writes []tableWrite, alerts []Alert, witness string, now time.Time) ([]Alert, error) {
	s.queueWrites(tx, writes, now)
	var spoke []string
	for _, w := range writes {
		if !w.noLine && w.resolveSilent {
			spoke = append(spoke, w.table)
		}
	}
	// Alerts: stored once (the key makes a second witness's copy of the
	// same alert a no-op), published by whoever stored it.
	var raised, resolved []Alert
	for _, a := range alerts {
		tx.queue("alert of "+a.Table, raiseSQL, s.alertArgs(a), func(scan scanFunc) error {
			if err := scan(&a.ID); err != nil {
				return err
			}
			raised = append(raised, a.settled()...)
			return nil
		})
	}
	for _, t := range spoke {
		tx.queue("resolving "+t, `UPDATE S.alerts SET resolved_at = $2 WHERE table_id = $1 AND kind = 'silent' AND resolved_at IS NULL RETURNING id, seq, message`,
			[]any{t, s.d.stamp(now)}, func(scan scanFunc) error {
				a := Alert{State: "resolved", Table: t, Kind: AlertSilent, Witness: witness, At: now}
				if err := scan(&a.ID, &a.Seq, &a.Message); err != nil {
					return err
				}
				resolved = append(resolved, a)
				return nil
			})
	}
	if err := tx.flush(ctx); err != nil {
		return nil, err
	}
	return append(raised, resolved...), nil
}

// queueWrites queues the judged tables' writes: their rows, forks and
// checkpoints, the rows they hold and release, what was quarantined, their
// lines. Each kind for every table at once (in the dialect's shape), in
// this order: a rescan reads the rows inserted before it.
func (s sqlStore) queueWrites(tx applyTx, writes []tableWrite, now time.Time) {
	at := s.d.stamp(now)
	tx.insertRows(writes, now)
	for _, w := range writes {
		for _, row := range w.forks {
			tx.queue("fork of "+w.table, `INSERT INTO S.forks (table_id, seq, at, kind, shoe, coup, body, prev_hash, hash, witnessed_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10) ON CONFLICT DO NOTHING`,
				[]any{w.table, row.Seq, row.At, row.Kind, row.Shoe, row.Coup, row.Body, row.PrevHash[:], row.Hash[:], at}, nil)
		}
	}
	tx.insertCheckpoints(writes, now)
	tx.release(writes)
	tx.hold(writes)
	for _, w := range writes {
		for _, q := range w.quarantine {
			tx.queue("quarantine of "+w.table, `INSERT INTO S.quarantine (table_id, reason, count, last_source, last_detail, last_at) VALUES ($1,$2,$3,$4,$5,$6)
			ON CONFLICT (table_id, reason) DO UPDATE SET count = S.quarantine.count + excluded.count, last_source = excluded.last_source,
			last_detail = excluded.last_detail, last_at = excluded.last_at`, []any{w.table, q.reason, q.n, q.src, q.detail, at}, nil)
		}
	}
	tx.putLines(writes)
	for _, w := range writes {
		if w.noLine || !w.rescan {
			continue
		}
		// A hole was filled below rows witnessed earlier: walk up to the
		// next hole.
		tx.queue("table "+w.table, `UPDATE S.tables SET contig = coalesce((SELECT min(r.seq) FROM S.rows r WHERE r.table_id = $1 AND r.seq >= $2
			AND NOT EXISTS (SELECT 1 FROM S.rows n WHERE n.table_id = $1 AND n.seq = r.seq + 1)), contig),
			hole_since = CASE WHEN max_seq <= coalesce((SELECT min(r.seq) FROM S.rows r WHERE r.table_id = $1 AND r.seq >= $2
			AND NOT EXISTS (SELECT 1 FROM S.rows n WHERE n.table_id = $1 AND n.seq = r.seq + 1)), contig) THEN NULL ELSE hole_since END
			WHERE table_id = $1`, []any{w.table, w.contig}, nil)
	}
}

// lineUpsert ends both dialects' insert of a table's line (putLines): a
// line known already takes the new one's, its last word the later of the
// two, and stays silent only if nothing newer came.
const lineUpsert = `ON CONFLICT (table_id) DO UPDATE SET contig = excluded.contig, max_seq = excluded.max_seq,
		last_seen = CASE WHEN S.tables.last_seen IS NULL OR excluded.last_seen > S.tables.last_seen THEN excluded.last_seen ELSE S.tables.last_seen END,
		hole_since = excluded.hole_since, cp_seq = excluded.cp_seq, cp_signed_at = excluded.cp_signed_at,
		silent = S.tables.silent AND coalesce(excluded.last_seen <= S.tables.last_seen, false)`

// raiseSQL stores an alert unless the same one (table, kind, key) is.
const raiseSQL = `INSERT INTO S.alerts (table_id, kind, key, seq, message, tamper, witness, raised_at, resolved_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)
	ON CONFLICT (table_id, kind, key) DO NOTHING RETURNING id`

func (s sqlStore) alertArgs(a Alert) []any {
	return []any{a.Table, a.Kind, a.key, a.Seq, a.Message, a.Tamper, a.Witness, s.d.stamp(a.At), s.maybe(a.overAt())}
}

// maybe is t as stored, NULL for none.
func (s sqlStore) maybe(t *time.Time) any {
	if t == nil {
		return nil
	}
	return s.d.stamp(*t)
}

// stampOf scans a time as either database stores it (PostgreSQL's
// timestamptz, SQLite's Unix nanoseconds), the zero time for none.
type stampOf struct{ t *time.Time }

func (s stampOf) Scan(src any) error {
	t, err := scanStamp(src)
	if t != nil {
		*s.t = *t
	}
	return err
}

// maybeStamp scans a time as either database stores it, nil for none.
type maybeStamp struct{ t **time.Time }

func (s maybeStamp) Scan(src any) error {
	t, err := scanStamp(src)
	*s.t = t
	return err
}

func scanStamp(src any) (*time.Time, error) {
	switch v := src.(type) {
	case nil:
		return nil, nil
	case time.Time:
		v = v.UTC()
		return &v, nil
	case int64:
		if v == 0 {
			return nil, nil
		}
		t := time.Unix(0, v).UTC()
		return &t, nil
	}
	return nil, fmt.Errorf("a time stored as %T", src)
}

// lines is every table's line (the gap and silence scan).
func (s sqlStore) lines(ctx context.Context) ([]tableLine, error) {
	var out []tableLine
	err := s.d.each(ctx, `SELECT table_id, contig, max_seq, hole_since, last_seen, resync_asked, silent FROM S.tables`, nil, func(scan scanFunc) error {
		var l tableLine
		if err := scan(&l.table, &l.contig, &l.max, maybeStamp{&l.hole}, maybeStamp{&l.seen}, maybeStamp{&l.asked}, &l.silent); err != nil {
			return err
		}
		out = append(out, l)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("floor database: %w", err)
	}
	return out, nil
}

func (s sqlStore) claimResync(ctx context.Context, table string, now, before time.Time) (from, upTo int64, ok bool, err error) {
	// One witness asks: the one whose update wins.
	var maxSeq int64
	err = s.d.each(ctx, `UPDATE S.tables SET resync_asked = $2 WHERE table_id = $1 AND contig < max_seq
		AND (resync_asked IS NULL OR resync_asked <= $3) RETURNING contig + 1, max_seq`, []any{table, s.d.stamp(now), s.d.stamp(before)}, func(scan scanFunc) error {
		ok = true
		return scan(&from, &maxSeq)
	})
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("floor database: %w", err)
		}
		return 0, 0, false, err
	}
	err = s.d.each(ctx, `SELECT coalesce(min(seq), $3) FROM S.rows WHERE table_id = $1 AND seq > $2`, []any{table, from, maxSeq + 1}, func(scan scanFunc) error {
		return scan(&upTo)
	})
	if err != nil {
		return 0, 0, false, fmt.Errorf("floor database: %w", err)
	}
	return from, upTo, true, nil
}

func (s sqlStore) markSilent(ctx context.Context, table string, seen time.Time) (bool, error) {
	n, err := s.d.exec(ctx, `UPDATE S.tables SET silent = true WHERE table_id = $1 AND NOT silent AND last_seen = $2`, table, s.d.stamp(seen))
	if err != nil {
		return false, fmt.Errorf("floor database: %w", err)
	}
	return n == 1, nil
}

func (s sqlStore) raise(ctx context.Context, a Alert) (Alert, bool, error) {
	stored := false
	err := s.d.each(ctx, raiseSQL, s.alertArgs(a), func(scan scanFunc) error {
		stored = true
		return scan(&a.ID)
	})
	if err != nil {
		return a, false, fmt.Errorf("floor database: alert: %w", err)
	}
	return a, stored, nil
}

func (s sqlStore) resolve(ctx context.Context, table string, kind AlertKind, now time.Time) ([]Alert, error) {
	var out []Alert
	err := s.d.each(ctx, `UPDATE S.alerts SET resolved_at = $3 WHERE table_id = $1 AND kind = $2 AND resolved_at IS NULL RETURNING id, seq, message`,
		[]any{table, kind, s.d.stamp(now)}, func(scan scanFunc) error {
			a := Alert{State: "resolved", Table: table, Kind: kind, At: now, Tamper: Tamper(kind)}
			if err := scan(&a.ID, &a.Seq, &a.Message); err != nil {
				return err
			}
			out = append(out, a)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("floor database: %w", err)
	}
	return out, nil
}

// coupResultSQL is the kind of a coup's result as an SQL literal, the one
// spelling the view's rate query and its partial index (rows_coup_results)
// share: a literal, so PostgreSQL plans the query on the index.
const coupResultSQL = "'" + string(coup.EvCoupResult) + "'"

// viewLinesSQL reads every table's line and its coups witnessed since $1.
const viewLinesSQL = `SELECT t.table_id, t.contig, t.max_seq, t.last_seen, t.cp_signed_at,
		(SELECT count(*) FROM S.rows r WHERE r.table_id = t.table_id AND r.kind = ` + coupResultSQL + ` AND r.witnessed_at > $1)
		FROM S.tables t`

func (s sqlStore) viewLines(ctx context.Context, since time.Time) ([]viewLine, error) {
	var out []viewLine
	err := s.d.each(ctx, viewLinesSQL, []any{s.d.stamp(since)}, func(scan scanFunc) error {
		var l viewLine
		if err := scan(&l.table, &l.contig, &l.max, maybeStamp{&l.seen}, maybeStamp{&l.cp}, &l.coups); err != nil {
			return err
		}
		out = append(out, l)
		return nil
	})
	return out, err
}

func (s sqlStore) openAlerts(ctx context.Context) ([]Alert, error) {
	var out []Alert
	err := s.d.each(ctx, `SELECT id, table_id, kind, seq, message, tamper, witness, raised_at FROM S.alerts WHERE resolved_at IS NULL ORDER BY id`, nil, func(scan scanFunc) error {
		a := Alert{State: "raised"}
		if err := scan(&a.ID, &a.Table, &a.Kind, &a.Seq, &a.Message, &a.Tamper, &a.Witness, stampOf{&a.At}); err != nil {
			return err
		}
		out = append(out, a)
		return nil
	})
	return out, err
}

func (s sqlStore) witnessed(ctx context.Context, table string, f func(int64, audit.Hash) error) error {
	err := s.d.each(ctx, `SELECT seq, hash FROM S.rows WHERE table_id = $1 ORDER BY seq`, []any{table}, func(scan scanFunc) error {
		var seq int64
		var h []byte
		if err := scan(&seq, &h); err != nil {
			return err
		}
		return f(seq, toHash(h))
	})
	if err != nil {
		return fmt.Errorf("floor database: %w", err)
	}
	return nil
}

func (s sqlStore) forkedSeqs(ctx context.Context, table string) (n int64, err error) {
	err = s.d.each(ctx, `SELECT count(DISTINCT seq) FROM S.forks WHERE table_id = $1`, []any{table}, func(scan scanFunc) error { return scan(&n) })
	if err != nil {
		return 0, fmt.Errorf("floor database: %w", err)
	}
	return n, nil
}

func (s sqlStore) tamperAlerts(ctx context.Context, table string) ([]Alert, error) {
	var out []Alert
	err := s.d.each(ctx, `SELECT kind, seq FROM S.alerts WHERE table_id = $1 AND tamper ORDER BY id`, []any{table}, func(scan scanFunc) error {
		a := Alert{Table: table, Tamper: true}
		if err := scan(&a.Kind, &a.Seq); err != nil {
			return err
		}
		out = append(out, a)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("floor database: %w", err)
	}
	return out, nil
}
