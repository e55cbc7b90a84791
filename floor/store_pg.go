package floor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PGStore is the floor's PostgreSQL database: one schema holding every
// witnessed row, fork, checkpoint, alert and each table's line.
type PGStore struct {
	sqlStore
	pool   *pgxpool.Pool
	schema string // quoted
	name   string // unquoted
	own    bool   // the pool is the store's (Open)
}

// OpenStore uses pool and the schema name (created when missing, with its
// tables: docs/floor.md).
func OpenStore(ctx context.Context, pool *pgxpool.Pool, schema string) (*PGStore, error) {
	if schema == "" {
		schema = "floor"
	}
	s := &PGStore{pool: pool, schema: pgx.Identifier{schema}.Sanitize(), name: schema}
	s.sqlStore = sqlStore{d: s}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("floor database: %w", err)
	}
	defer conn.Release()
	// Two witnesses starting together would race on CREATE ... IF NOT
	// EXISTS (it is not atomic in PostgreSQL); one at a time.
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1, 0))`, "tablectl-floor-schema/"+schema); err != nil {
		return nil, fmt.Errorf("floor database: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, "tablectl-floor-schema/"+schema)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+s.schema+";"+s.sql(schemaSQL+viewIndexSQL)); err != nil {
		return nil, fmt.Errorf("floor database: create schema %s: %w", schema, err)
	}
	return s, nil
}

// viewIndexSQL indexes the few rows the floor view reads by kind, each
// refresh: coup results by when they were witnessed (the rate), and a
// suspension's rows (view_hold.go). Without them every refresh read every
// row of every table: 0.36 s at 141,000 rows of 500 tables, growing with
// the floor's history. Partial, so the rows' inserts (a catch-up's) pay
// only for the rows they hold. Made on an existing floor when a witness
// or view starts (a scan of the rows table under a lock writes wait for).
var viewIndexSQL = `
CREATE INDEX IF NOT EXISTS rows_coup_results ON S.rows (table_id, witnessed_at) WHERE kind = ` + coupResultSQL + `;
CREATE INDEX IF NOT EXISTS rows_suspensions ON S.rows (table_id, seq) WHERE kind IN (` + suspensionKindsSQL + `);
`

// schemaSQL is the floor's schema; "S." is the schema's name.
const schemaSQL = `
CREATE TABLE IF NOT EXISTS S.tables (
	table_id     text PRIMARY KEY,
	contig       bigint NOT NULL DEFAULT 0,   -- rows 1..contig are all witnessed
	max_seq      bigint NOT NULL DEFAULT 0,
	last_seen    timestamptz,                 -- when the floor last had a row or checkpoint
	hole_since   timestamptz,                 -- since when contig < max_seq
	resync_asked timestamptz,
	silent       boolean NOT NULL DEFAULT false,
	cp_seq       bigint NOT NULL DEFAULT 0,   -- the latest checkpoint witnessed
	cp_signed_at timestamptz
);
CREATE TABLE IF NOT EXISTS S.rows (
	table_id     text NOT NULL,
	seq          bigint NOT NULL,
	at           text NOT NULL,
	kind         text NOT NULL,
	shoe         bigint NOT NULL,
	coup         bigint NOT NULL,
	body         bytea NOT NULL,
	prev_hash    bytea NOT NULL,
	hash         bytea NOT NULL,
	witnessed_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (table_id, seq)
);
CREATE TABLE IF NOT EXISTS S.forks (
	table_id     text NOT NULL,
	seq          bigint NOT NULL,
	at           text NOT NULL,
	kind         text NOT NULL,
	shoe         bigint NOT NULL,
	coup         bigint NOT NULL,
	body         bytea NOT NULL,
	prev_hash    bytea NOT NULL,
	hash         bytea NOT NULL,
	witnessed_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (table_id, seq, hash)
);
CREATE TABLE IF NOT EXISTS S.checkpoints (
	table_id     text NOT NULL,
	seq          bigint NOT NULL,
	head_hash    bytea NOT NULL,
	signed_at    text NOT NULL,
	signed_ns    bigint NOT NULL,
	key_id       text NOT NULL,
	signature    bytea NOT NULL,
	verified     boolean NOT NULL,
	witnessed_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (table_id, seq, head_hash, signed_ns)
);
CREATE INDEX IF NOT EXISTS checkpoints_by_time ON S.checkpoints (table_id, signed_ns);
CREATE TABLE IF NOT EXISTS S.pending (       -- rows held until a checkpoint the table signed covers them
	table_id     text NOT NULL,
	seq          bigint NOT NULL,
	at           text NOT NULL,
	kind         text NOT NULL,
	shoe         bigint NOT NULL,
	coup         bigint NOT NULL,
	body         bytea NOT NULL,
	prev_hash    bytea NOT NULL,
	hash         bytea NOT NULL,
	since        timestamptz NOT NULL,
	stream_at    timestamptz,
	source       text NOT NULL,
	PRIMARY KEY (table_id, seq, hash)
);
CREATE TABLE IF NOT EXISTS S.quarantine (    -- what no key of the table signed, counted
	table_id     text NOT NULL,
	reason       text NOT NULL,
	count        bigint NOT NULL,
	last_source  text NOT NULL,
	last_detail  text NOT NULL,
	last_at      timestamptz NOT NULL,
	PRIMARY KEY (table_id, reason)
);
CREATE TABLE IF NOT EXISTS S.alerts (
	id          bigserial PRIMARY KEY,
	table_id    text NOT NULL,
	kind        text NOT NULL,
	key         text NOT NULL,
	seq         bigint NOT NULL,
	message     text NOT NULL,
	tamper      boolean NOT NULL,
	witness     text NOT NULL,
	raised_at   timestamptz NOT NULL DEFAULT now(),
	resolved_at timestamptz,
	UNIQUE (table_id, kind, key)
);
`

// Pool is the store's connection pool.
func (s *PGStore) Pool() *pgxpool.Pool { return s.pool }

// Schema is the store's schema name, quoted for SQL.
func (s *PGStore) Schema() string { return s.schema }

// sql replaces "S." in q with the schema.
func (s *PGStore) sql(q string) string { return strings.ReplaceAll(q, "S.", s.schema+".") }

// The dialect: PostgreSQL's.

func (s *PGStore) stamp(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func (s *PGStore) each(ctx context.Context, q string, args []any, read func(scanFunc) error) error {
	rows, err := s.pool.Query(ctx, s.sql(q), args...)
	if err != nil {
		return err
	}
	return readRows(rows, read)
}

func (s *PGStore) exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := s.pool.Exec(ctx, s.sql(q), args...)
	return tag.RowsAffected(), err
}

// readRows calls read with each row of rows, and closes them.
func readRows(rows pgx.Rows, read func(scanFunc) error) error {
	defer rows.Close()
	for rows.Next() {
		if read == nil {
			continue
		}
		if err := read(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (s *PGStore) begin(ctx context.Context) (applyTx, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return nil, err
	}
	return &pgTx{s: s, tx: tx, b: &pgx.Batch{}}, nil
}

// pgTx is a batch's transaction on PostgreSQL: what is queued goes as one
// pgx batch, one round trip.
type pgTx struct {
	s     *PGStore
	tx    pgx.Tx
	b     *pgx.Batch
	reads []queued
}

// queued is a queued statement's name and the reader of its answer.
type queued struct {
	what string
	read func(scanFunc) error
}

func (t *pgTx) queue(what, q string, args []any, read func(scanFunc) error) {
	t.b.Queue(t.s.sql(q), args...)
	t.reads = append(t.reads, queued{what, read})
}

func (t *pgTx) flush(ctx context.Context) error {
	if t.b.Len() == 0 {
		return nil
	}
	br := t.tx.SendBatch(ctx, t.b)
	reads := t.reads
	t.b, t.reads = &pgx.Batch{}, nil
	for _, r := range reads {
		rows, err := br.Query()
		if err == nil {
			err = readRows(rows, r.read)
		}
		if err != nil {
			br.Close()
			return fmt.Errorf("floor database: %s: %w", r.what, err)
		}
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("floor database: %w", err)
	}
	return nil
}

func (t *pgTx) commit(ctx context.Context) error { return t.tx.Commit(ctx) }

func (t *pgTx) rollback(ctx context.Context) { t.tx.Rollback(ctx) }

// lock takes an advisory lock on each table's name for the transaction,
// one statement for them all: the aggregate calls the lock for each name
// in the array's order, which is the tables' (name order, so two
// witnesses never deadlock).
func (t *pgTx) lock(tables []string) {
	keys := make([]string, len(tables))
	for i, table := range tables {
		keys[i] = t.s.name + "/" + table
	}
	t.queue("locks of the batch's tables", `SELECT count(pg_advisory_xact_lock(hashtextextended(k, 0))) FROM unnest($1::text[]) AS k`, []any{keys}, nil)
}

// readHeld and readLines read every table of the batch in one statement
// each, the answers' first column naming the table.
func (t *pgTx) readHeld(tables []string, reads []tableRead) {
	t.queue("pending rows", `SELECT table_id, seq, at, kind, shoe, coup, body, prev_hash, hash, since, stream_at, source FROM S.pending WHERE table_id = ANY($1::text[])`,
		[]any{tables}, readHeld(pickByTable(tables, reads)))
}

func (t *pgTx) readLines(tables []string, reads []tableRead) {
	t.queue("tables' lines", `SELECT table_id, contig, max_seq, silent, cp_seq, cp_signed_at, hole_since, last_seen, resync_asked FROM S.tables WHERE table_id = ANY($1::text[])`,
		[]any{tables}, readLine(pickByTable(tables, reads)))
}

// readAround reads the seqs asked for as runs (table, lo..hi): a batch's
// rows of a table are mostly consecutive, so a range scan of the key per
// run reads exactly what an index probe per seq did, and one statement of
// each kind asks for every table. OFFSET 0 keeps each run its own index
// scan: joined flat, a generic plan scans every row of the table.
func (t *pgTx) readAround(tables []string, asks []around, reads []tableRead) {
	var rows, cps, ns tableRuns
	for i, table := range tables {
		rows.add(table, asks[i].seqs, 1)
		cps.add(table, asks[i].cpSeqs, 1)
		// The checkpoints signed just before and after each of the
		// batch's: per run of its signing times (a gap of a minute or
		// more ends a run), those signed within the run and the nearest
		// on each side. A superset of each one's two neighbours, which
		// judge orders, read with one range scan and two probes per run
		// instead of two probes per checkpoint (most of a catch-up
		// batch's read).
		ns.add(table, asks[i].cpNs, int64(time.Minute))
	}
	pick := pickByTable(tables, reads)
	t.queue("rows", `SELECT q.t, r.seq, r.prev_hash, r.hash FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS q(t, lo, hi),
		LATERAL (SELECT seq, prev_hash, hash FROM S.rows WHERE table_id = q.t AND seq BETWEEN q.lo AND q.hi OFFSET 0) r`, rows.args(), readNeighbour(pick))
	t.queue("checkpoints", `SELECT q.t, c.seq, c.head_hash, c.signed_ns FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS q(t, lo, hi),
		LATERAL (SELECT seq, head_hash, signed_ns FROM S.checkpoints WHERE table_id = q.t AND verified AND seq BETWEEN q.lo AND q.hi OFFSET 0) c`, cps.args(), readCheckpointAt(pick))
	t.queue("forks", `SELECT DISTINCT q.t, f.seq FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS q(t, lo, hi),
		LATERAL (SELECT seq FROM S.forks WHERE table_id = q.t AND seq BETWEEN q.lo AND q.hi OFFSET 0) f`, rows.args(), readFork(pick))
	t.queue("checkpoints", `SELECT q.t, c.seq, c.head_hash, c.signed_ns FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS q(t, lo, hi),
		LATERAL (SELECT seq, head_hash, signed_ns FROM S.checkpoints c WHERE c.table_id = q.t AND c.verified AND c.signed_ns BETWEEN q.lo AND q.hi OFFSET 0) c
		UNION
		SELECT q.t, p.seq, p.head_hash, p.signed_ns FROM unnest($1::text[], $2::bigint[]) AS q(t, lo),
		LATERAL (SELECT seq, head_hash, signed_ns FROM S.checkpoints c WHERE c.table_id = q.t AND c.verified AND c.signed_ns < q.lo ORDER BY signed_ns DESC LIMIT 1) p
		UNION
		SELECT q.t, n.seq, n.head_hash, n.signed_ns FROM unnest($1::text[], $3::bigint[]) AS q(t, hi),
		LATERAL (SELECT seq, head_hash, signed_ns FROM S.checkpoints c WHERE c.table_id = q.t AND c.verified AND c.signed_ns > q.hi ORDER BY signed_ns LIMIT 1) n`,
		ns.args(), readCheckpointAside(pick))
}

// tableRuns are runs of values (lo..hi) of many tables, as three arrays.
type tableRuns struct {
	tables []string
	lo, hi []int64
}

// add appends table's values as runs in which each is at most gap above
// the one before.
func (r *tableRuns) add(table string, vals []int64, gap int64) {
	lo, hi := runs(vals, gap)
	for range lo {
		r.tables = append(r.tables, table)
	}
	r.lo, r.hi = append(r.lo, lo...), append(r.hi, hi...)
}

func (r *tableRuns) args() []any { return []any{r.tables, r.lo, r.hi} }

// insertRows inserts every table's rows in one statement, as arrays.
func (t *pgTx) insertRows(writes []tableWrite, now time.Time) {
	var table, at, kind []string
	var seq, shoe, cp []int64
	var body, prev, hash [][]byte
	for _, w := range writes {
		for _, row := range w.ins {
			table, seq, at, kind = append(table, w.table), append(seq, row.Seq), append(at, row.At), append(kind, row.Kind)
			shoe, cp, body = append(shoe, row.Shoe), append(cp, row.Coup), append(body, row.Body)
			prev, hash = append(prev, row.PrevHash[:]), append(hash, row.Hash[:])
		}
	}
	if len(table) == 0 {
		return
	}
	t.queue("rows", `INSERT INTO S.rows (table_id, seq, at, kind, shoe, coup, body, prev_hash, hash, witnessed_at)
		SELECT *, $10 FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::bytea[], $8::bytea[], $9::bytea[])`,
		[]any{table, seq, at, kind, shoe, cp, body, prev, hash, now}, nil)
}

// insertCheckpoints inserts every table's checkpoints in one statement,
// as arrays.
func (t *pgTx) insertCheckpoints(writes []tableWrite, now time.Time) {
	var table, at, kid []string
	var seq, ns []int64
	var head, sig [][]byte
	var verified []bool
	for _, w := range writes {
		for k, c := range w.insCP {
			table, seq, head = append(table, w.table), append(seq, c.Seq), append(head, c.HeadHash[:])
			at, ns = append(at, c.SignedAt.UTC().Format(time.RFC3339Nano)), append(ns, c.SignedAt.UnixNano())
			kid, sig, verified = append(kid, c.KeyID), append(sig, c.Signature), append(verified, w.verified[k])
		}
	}
	if len(table) == 0 {
		return
	}
	t.queue("checkpoints", `INSERT INTO S.checkpoints (table_id, seq, head_hash, signed_at, signed_ns, key_id, signature, verified, witnessed_at)
		SELECT *, $9 FROM unnest($1::text[], $2::bigint[], $3::bytea[], $4::text[], $5::bigint[], $6::text[], $7::bytea[], $8::boolean[]) ON CONFLICT DO NOTHING`,
		[]any{table, seq, head, at, ns, kid, sig, verified, now}, nil)
}

// release deletes the pending rows every table released, in one statement.
func (t *pgTx) release(writes []tableWrite) {
	var table []string
	var seq []int64
	var hash [][]byte
	for _, w := range writes {
		for _, h := range w.release {
			table, seq, hash = append(table, w.table), append(seq, h.row.Seq), append(hash, h.row.Hash[:])
		}
	}
	if len(table) == 0 {
		return
	}
	t.queue("pending rows", `DELETE FROM S.pending p USING unnest($1::text[], $2::bigint[], $3::bytea[]) AS q(t, seq, hash)
		WHERE p.table_id = q.t AND p.seq = q.seq AND p.hash = q.hash`, []any{table, seq, hash}, nil)
}

// hold keeps the rows every table holds pending, in one statement.
func (t *pgTx) hold(writes []tableWrite) {
	var table, at, kind, src []string
	var seq, shoe, cp []int64
	var body, prev, hash [][]byte
	var since []time.Time
	var streamAt []*time.Time
	for _, w := range writes {
		for _, h := range w.hold {
			row := h.row
			table, seq, at, kind = append(table, w.table), append(seq, row.Seq), append(at, row.At), append(kind, row.Kind)
			shoe, cp, body = append(shoe, row.Shoe), append(cp, row.Coup), append(body, row.Body)
			prev, hash, src = append(prev, row.PrevHash[:]), append(hash, row.Hash[:]), append(src, h.src)
			since, streamAt = append(since, h.since), append(streamAt, orNil(h.at))
		}
	}
	if len(table) == 0 {
		return
	}
	t.queue("pending rows", `INSERT INTO S.pending (table_id, seq, at, kind, shoe, coup, body, prev_hash, hash, since, stream_at, source)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::bytea[], $8::bytea[], $9::bytea[], $10::timestamptz[], $11::timestamptz[], $12::text[])
		ON CONFLICT DO NOTHING`, []any{table, seq, at, kind, shoe, cp, body, prev, hash, since, streamAt, src}, nil)
}

// putLines writes the lines of every table that has one, in one statement.
func (t *pgTx) putLines(writes []tableWrite) {
	var table []string
	var contig, maxSeq, cpSeq []int64
	var seen, hole, cpAt []*time.Time
	for _, w := range writes {
		if w.noLine {
			continue
		}
		table, contig, maxSeq, cpSeq = append(table, w.table), append(contig, w.contig), append(maxSeq, w.maxSeq), append(cpSeq, w.cpSeq)
		seen, hole, cpAt = append(seen, orNil(w.seenAt)), append(hole, w.holeSince), append(cpAt, w.cpSignedAt)
	}
	if len(table) == 0 {
		return
	}
	t.queue("tables' lines", `INSERT INTO S.tables (table_id, contig, max_seq, last_seen, hole_since, silent, cp_seq, cp_signed_at)
		SELECT t, c, m, s, h, false, cs, ca FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::timestamptz[], $5::timestamptz[], $6::bigint[], $7::timestamptz[]) AS u(t, c, m, s, h, cs, ca) `+lineUpsert,
		[]any{table, contig, maxSeq, seen, hole, cpSeq, cpAt}, nil)
}

// orNil is t, nil for the zero time (NULL).
func orNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// runs is vals as runs lo..hi in which each value is at most gap above the
// one before.
func runs(vals []int64, gap int64) (lo, hi []int64) {
	s := slices.Clone(vals)
	slices.Sort(s)
	for _, q := range slices.Compact(s) {
		if n := len(hi); n > 0 && hi[n-1]+gap >= q {
			hi[n-1] = q
			continue
		}
		lo, hi = append(lo, q), append(hi, q)
	}
	return lo, hi
}

// Close closes the pool if Open made it; the pool given to OpenStore is
// the caller's.
func (s *PGStore) Close() {
	if s.own {
		s.pool.Close()
	}
}
