package floor

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/mattn/go-sqlite3" // the SQLite store
)

// Open opens the floor's database named by db: a postgres:// or
// postgresql:// URL is PostgreSQL (the floor's; schema names its schema),
// anything else a SQLite file (the laptop demo's; schema unused). Close
// it when done.
func Open(ctx context.Context, db, schema string) (Store, error) {
	if strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://") {
		pool, err := pgxpool.New(ctx, db)
		if err != nil {
			return nil, fmt.Errorf("floor database: %w", err)
		}
		s, err := OpenStore(ctx, pool, schema)
		if err != nil {
			pool.Close()
			return nil, err
		}
		s.own = true
		return s, nil
	}
	return OpenSQLiteStore(ctx, strings.TrimPrefix(db, "sqlite:"))
}

// SQLiteStore is the floor's database in one SQLite file: the laptop
// demo's (tablectl-floor demo --tables N without --floor-db), nothing to
// install. The tables and their meaning are PostgreSQL's (docs/floor.md);
// times are Unix nanoseconds. Every write transaction is BEGIN IMMEDIATE:
// one writer at a time holds the whole file, which is the per-table lock
// PostgreSQL takes, and more. It is made for one machine: witnesses in
// one process or a few on one disk, not a floor's.
type SQLiteStore struct {
	sqlStore
	db   *sql.DB
	path string
}

// OpenSQLiteStore opens (creating when missing) the floor's database at
// path, fsync on as the trail's.
func OpenSQLiteStore(ctx context.Context, path string) (*SQLiteStore, error) {
	q := url.Values{}
	q.Set("_txlock", "immediate")
	q.Set("_busy_timeout", "10000")
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	db, err := sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("floor database %s: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	if _, err := db.ExecContext(ctx, sqliteSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("floor database %s: create: %w", path, err)
	}
	s := &SQLiteStore{db: db, path: path}
	s.sqlStore = sqlStore{d: s}
	return s, nil
}

// sqliteSchema is schemaSQL in SQLite's words.
const sqliteSchema = `
CREATE TABLE IF NOT EXISTS tables (
	table_id     TEXT PRIMARY KEY,
	contig       INTEGER NOT NULL DEFAULT 0,
	max_seq      INTEGER NOT NULL DEFAULT 0,
	last_seen    INTEGER,
	hole_since   INTEGER,
	resync_asked INTEGER,
	silent       INTEGER NOT NULL DEFAULT 0,
	cp_seq       INTEGER NOT NULL DEFAULT 0,
	cp_signed_at INTEGER
);
CREATE TABLE IF NOT EXISTS rows (
	table_id     TEXT NOT NULL,
	seq          INTEGER NOT NULL,
	at           TEXT NOT NULL,
	kind         TEXT NOT NULL,
	shoe         INTEGER NOT NULL,
	coup         INTEGER NOT NULL,
	body         BLOB NOT NULL,
	prev_hash    BLOB NOT NULL,
	hash         BLOB NOT NULL,
	witnessed_at INTEGER NOT NULL,
	PRIMARY KEY (table_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rows_by_kind ON rows (table_id, kind, witnessed_at);
CREATE TABLE IF NOT EXISTS forks (
	table_id     TEXT NOT NULL,
	seq          INTEGER NOT NULL,
	at           TEXT NOT NULL,
	kind         TEXT NOT NULL,
	shoe         INTEGER NOT NULL,
	coup         INTEGER NOT NULL,
	body         BLOB NOT NULL,
	prev_hash    BLOB NOT NULL,
	hash         BLOB NOT NULL,
	witnessed_at INTEGER NOT NULL,
	PRIMARY KEY (table_id, seq, hash)
);
CREATE TABLE IF NOT EXISTS checkpoints (
	table_id     TEXT NOT NULL,
	seq          INTEGER NOT NULL,
	head_hash    BLOB NOT NULL,
	signed_at    TEXT NOT NULL,
	signed_ns    INTEGER NOT NULL,
	key_id       TEXT NOT NULL,
	signature    BLOB NOT NULL,
	verified     INTEGER NOT NULL,
	witnessed_at INTEGER NOT NULL,
	PRIMARY KEY (table_id, seq, head_hash, signed_ns)
);
CREATE INDEX IF NOT EXISTS checkpoints_by_time ON checkpoints (table_id, signed_ns);
CREATE TABLE IF NOT EXISTS pending (
	table_id     TEXT NOT NULL,
	seq          INTEGER NOT NULL,
	at           TEXT NOT NULL,
	kind         TEXT NOT NULL,
	shoe         INTEGER NOT NULL,
	coup         INTEGER NOT NULL,
	body         BLOB NOT NULL,
	prev_hash    BLOB NOT NULL,
	hash         BLOB NOT NULL,
	since        INTEGER NOT NULL,
	stream_at    INTEGER NOT NULL,
	source       TEXT NOT NULL,
	PRIMARY KEY (table_id, seq, hash)
);
CREATE TABLE IF NOT EXISTS quarantine (
	table_id     TEXT NOT NULL,
	reason       TEXT NOT NULL,
	count        INTEGER NOT NULL,
	last_source  TEXT NOT NULL,
	last_detail  TEXT NOT NULL,
	last_at      INTEGER NOT NULL,
	PRIMARY KEY (table_id, reason)
);
CREATE TABLE IF NOT EXISTS alerts (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	table_id    TEXT NOT NULL,
	kind        TEXT NOT NULL,
	key         TEXT NOT NULL,
	seq         INTEGER NOT NULL,
	message     TEXT NOT NULL,
	tamper      INTEGER NOT NULL,
	witness     TEXT NOT NULL,
	raised_at   INTEGER NOT NULL,
	resolved_at INTEGER,
	UNIQUE (table_id, kind, key)
);
`

// Path is the database's file.
func (s *SQLiteStore) Path() string { return s.path }

// Close closes the database.
func (s *SQLiteStore) Close() { s.db.Close() }

// DB is the database, for tests and tools.
func (s *SQLiteStore) DB() *sql.DB { return s.db }

// jsonInts is seqs as a JSON array, for json_each: a set in one
// parameter.
func jsonInts(v []int64) string {
	if v == nil {
		v = []int64{}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// The dialect: SQLite's.

// sqliteWords turns the shared SQL into SQLite's: no schema, ?n for $n.
var sqliteWords = strings.NewReplacer("S.", "", "$", "?")

func (s *SQLiteStore) sql(q string) string { return sqliteWords.Replace(q) }

// stamp is t in Unix nanoseconds (0: none).
func (s *SQLiteStore) stamp(t time.Time) any {
	if t.IsZero() {
		return int64(0)
	}
	return t.UnixNano()
}

func (s *SQLiteStore) each(ctx context.Context, q string, args []any, read func(scanFunc) error) error {
	return query(ctx, s.db, read, s.sql(q), args...)
}

func (s *SQLiteStore) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.sql(q), args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (s *SQLiteStore) begin(ctx context.Context) (applyTx, error) {
	tx, err := s.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the writer's lock
	if err != nil {
		return nil, err
	}
	return &sqliteTx{s: s, tx: tx}, nil
}

// sqliteTx is a batch's transaction on SQLite: what is queued runs in
// order when flushed.
type sqliteTx struct {
	s     *SQLiteStore
	tx    *sql.Tx
	steps []sqliteStep
}

// sqliteStep is a queued statement: its name and what runs it.
type sqliteStep struct {
	what string
	run  func(ctx context.Context, tx *sql.Tx) error
}

func (t *sqliteTx) queue(what, q string, args []any, read func(scanFunc) error) {
	q = t.s.sql(q)
	t.steps = append(t.steps, sqliteStep{what, func(ctx context.Context, tx *sql.Tx) error {
		if read == nil {
			_, err := tx.ExecContext(ctx, q, args...)
			return err
		}
		return query(ctx, tx, read, q, args...)
	}})
}

func (t *sqliteTx) flush(ctx context.Context) error {
	steps := t.steps
	t.steps = nil
	for _, st := range steps {
		if err := st.run(ctx, t.tx); err != nil {
			return fmt.Errorf("floor database: %s: %w", st.what, err)
		}
	}
	return nil
}

func (t *sqliteTx) commit(context.Context) error { return t.tx.Commit() }

func (t *sqliteTx) rollback(context.Context) { t.tx.Rollback() }

// lock: BEGIN IMMEDIATE holds the whole file for the transaction.
func (t *sqliteTx) lock([]string) {}

// readHeld, readLines and readAround ask a table at a time: SQLite has no
// arrays, and a statement costs it no round trip.
func (t *sqliteTx) readHeld(tables []string, reads []tableRead) {
	for i, table := range tables {
		t.queue("pending rows of "+table, `SELECT seq, at, kind, shoe, coup, body, prev_hash, hash, since, stream_at, source FROM S.pending WHERE table_id = $1`,
			[]any{table}, readHeld(pickOne(&reads[i])))
	}
}

func (t *sqliteTx) readLines(tables []string, reads []tableRead) {
	for i, table := range tables {
		t.queue("table "+table, `SELECT contig, max_seq, silent, cp_seq, cp_signed_at, hole_since, last_seen, resync_asked FROM S.tables WHERE table_id = $1`,
			[]any{table}, readLine(pickOne(&reads[i])))
	}
}

// readAround reads each set of seqs as one JSON parameter (json_each).
func (t *sqliteTx) readAround(tables []string, asks []around, reads []tableRead) {
	for i, table := range tables {
		a, pick := asks[i], pickOne(&reads[i])
		t.queue("rows of "+table, `SELECT seq, prev_hash, hash FROM S.rows WHERE table_id = $1 AND seq IN (SELECT value FROM json_each($2))`,
			[]any{table, jsonInts(a.seqs)}, readNeighbour(pick))
		t.queue("checkpoints of "+table, `SELECT seq, head_hash, signed_ns FROM S.checkpoints WHERE table_id = $1 AND verified AND seq IN (SELECT value FROM json_each($2))`,
			[]any{table, jsonInts(a.cpSeqs)}, readCheckpointAt(pick))
		t.queue("forks of "+table, `SELECT DISTINCT seq FROM S.forks WHERE table_id = $1 AND seq IN (SELECT value FROM json_each($2))`,
			[]any{table, jsonInts(a.seqs)}, readFork(pick))
		// The checkpoints signed just before and just after each of the
		// batch's: their signing times first, two index probes each, then
		// the checkpoints at those times. (Joined the other way round,
		// SQLite read every checkpoint of the table for each of the
		// batch's: a catch-up slowed as the table grew.)
		t.queue("checkpoints of "+table, `SELECT c.seq, c.head_hash, c.signed_ns FROM S.checkpoints c WHERE c.table_id = $1 AND c.verified AND c.signed_ns IN (
		SELECT (SELECT max(signed_ns) FROM S.checkpoints p WHERE p.table_id = $1 AND p.verified AND p.signed_ns < t.value) FROM json_each($2) t
		UNION
		SELECT (SELECT min(signed_ns) FROM S.checkpoints n WHERE n.table_id = $1 AND n.verified AND n.signed_ns > t.value) FROM json_each($2) t)`,
			[]any{table, jsonInts(a.cpNs)}, readCheckpointAside(pick))
	}
}

// insertRows inserts the rows one by one through one prepared statement.
func (t *sqliteTx) insertRows(writes []tableWrite, now time.Time) {
	t.steps = append(t.steps, sqliteStep{"rows", func(ctx context.Context, tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT INTO rows (table_id, seq, at, kind, shoe, coup, body, prev_hash, hash, witnessed_at) VALUES (?,?,?,?,?,?,?,?,?,?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, w := range writes {
			for _, row := range w.ins {
				if _, err := st.ExecContext(ctx, w.table, row.Seq, row.At, row.Kind, row.Shoe, row.Coup, row.Body, row.PrevHash[:], row.Hash[:], now.UnixNano()); err != nil {
					return fmt.Errorf("row %d of %s: %w", row.Seq, w.table, err)
				}
			}
		}
		return nil
	}})
}

// insertCheckpoints inserts the checkpoints one by one.
func (t *sqliteTx) insertCheckpoints(writes []tableWrite, now time.Time) {
	for _, w := range writes {
		for k, c := range w.insCP {
			t.queue("checkpoints of "+w.table, `INSERT INTO S.checkpoints (table_id, seq, head_hash, signed_at, signed_ns, key_id, signature, verified, witnessed_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9) ON CONFLICT DO NOTHING`,
				[]any{w.table, c.Seq, c.HeadHash[:], c.SignedAt.UTC().Format(time.RFC3339Nano), c.SignedAt.UnixNano(), c.KeyID, c.Signature, w.verified[k], now.UnixNano()}, nil)
		}
	}
}

func (t *sqliteTx) release(writes []tableWrite) {
	for _, w := range writes {
		for _, h := range w.release {
			t.queue("pending rows of "+w.table, `DELETE FROM S.pending WHERE table_id = $1 AND seq = $2 AND hash = $3`, []any{w.table, h.row.Seq, h.row.Hash[:]}, nil)
		}
	}
}

func (t *sqliteTx) hold(writes []tableWrite) {
	for _, w := range writes {
		for _, h := range w.hold {
			row := h.row
			t.queue("pending rows of "+w.table, `INSERT INTO S.pending (table_id, seq, at, kind, shoe, coup, body, prev_hash, hash, since, stream_at, source) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12) ON CONFLICT DO NOTHING`,
				[]any{w.table, row.Seq, row.At, row.Kind, row.Shoe, row.Coup, row.Body, row.PrevHash[:], row.Hash[:], t.s.stamp(h.since), t.s.stamp(h.at), h.src}, nil)
		}
	}
}

func (t *sqliteTx) putLines(writes []tableWrite) {
	for _, w := range writes {
		if w.noLine {
			continue
		}
		t.queue("table "+w.table, `INSERT INTO S.tables (table_id, contig, max_seq, last_seen, hole_since, silent, cp_seq, cp_signed_at) VALUES ($1,$2,$3,$4,$5,false,$6,$7) `+lineUpsert,
			[]any{w.table, w.contig, w.maxSeq, t.s.stamp(w.seenAt), t.s.maybe(w.holeSince), w.cpSeq, t.s.maybe(w.cpSignedAt)}, nil)
	}
}

// querier is a database or a transaction.
type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// query calls read with each row of q.
func query(ctx context.Context, db querier, read func(scanFunc) error, q string, args ...any) error {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := read(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}
