package floor

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/mattn/go-sqlite3" // the SQLite store

	"github.com/tablectl/tablectl/audit"
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
	return &SQLiteStore{db: db, path: path}, nil
}

// sqliteHold writes a table's pending rows and quarantine counts.
func sqliteHold(ctx context.Context, tx *sql.Tx, w tableWrite, now time.Time) error {
	t := w.table
	for _, h := range w.release {
		if _, err := tx.ExecContext(ctx, `DELETE FROM pending WHERE table_id = ? AND seq = ? AND hash = ?`, t, h.row.Seq, h.row.Hash[:]); err != nil {
			return fmt.Errorf("floor database: pending row %d of %s: %w", h.row.Seq, t, err)
		}
	}
	for _, h := range w.hold {
		var at int64
		if !h.at.IsZero() {
			at = h.at.UnixNano()
		}
		row := h.row
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO pending (table_id, seq, at, kind, shoe, coup, body, prev_hash, hash, since, stream_at, source) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`,
			t, row.Seq, row.At, row.Kind, row.Shoe, row.Coup, row.Body, row.PrevHash[:], row.Hash[:], h.since.UnixNano(), at, h.src); err != nil {
			return fmt.Errorf("floor database: pending row %d of %s: %w", row.Seq, t, err)
		}
	}
	for _, q := range w.quarantine {
		if _, err := tx.ExecContext(ctx, `INSERT INTO quarantine (table_id, reason, count, last_source, last_detail, last_at) VALUES (?,?,?,?,?,?)
			ON CONFLICT (table_id, reason) DO UPDATE SET count = quarantine.count + excluded.count, last_source = excluded.last_source,
			last_detail = excluded.last_detail, last_at = excluded.last_at`, t, q.reason, q.n, q.src, q.detail, now.UnixNano()); err != nil {
			return fmt.Errorf("floor database: quarantine of %s: %w", t, err)
		}
	}
	return nil
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

// ns is t as stored: Unix nanoseconds, NULL for none.
func ns(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}

// fromNS is a stored time.
func fromNS(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := time.Unix(0, v.Int64).UTC()
	return &t
}

// jsonInts is seqs as a JSON array, for json_each: a set in one
// parameter.
func jsonInts(v []int64) string {
	if v == nil {
		v = []int64{}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func (s *SQLiteStore) apply(ctx context.Context, items []item, reg *Registry, witness string, now time.Time) ([]Alert, error) {
	tables, byTable := batchTables(items)
	tx, err := s.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the writer's lock
	if err != nil {
		return nil, fmt.Errorf("floor database: begin: %w", err)
	}
	defer tx.Rollback()
	reads := make([]tableRead, len(tables))
	for i, t := range tables {
		reads[i] = newTableRead()
		if err := readLine(ctx, tx, t, byTable[t], &reads[i]); err != nil {
			return nil, err
		}
	}

	writes, alerts := judge(tables, byTable, reads, reg, witness, now)
	insRow, err := tx.PrepareContext(ctx, `INSERT INTO rows (table_id, seq, at, kind, shoe, coup, body, prev_hash, hash, witnessed_at) VALUES (?,?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		return nil, fmt.Errorf("floor database: %w", err)
	}
	defer insRow.Close()
	var out []Alert
	for _, w := range writes {
		resolved, err := writeTable(ctx, tx, insRow, w, witness, now)
		if err != nil {
			return nil, err
		}
		out = append(out, resolved...)
	}
	// Alerts: stored once, published by whoever stored it.
	var raised []Alert
	for _, a := range alerts {
		a, stored, err := raiseIn(ctx, tx, a)
		if err != nil {
			return nil, err
		}
		if stored {
			raised = append(raised, a.settled()...)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("floor database: commit: %w", err)
	}
	return append(raised, out...), nil
}

// readLine reads table t's line and what the judging compares the batch's
// items with: the rows it holds pending, the witnessed rows and
// checkpoints at the batch's seqs, the forks, and the checkpoints signed
// just before and after the batch's.
func readLine(ctx context.Context, tx *sql.Tx, t string, items []item, r *tableRead) error {
	var cpAt, hole, seen, asked sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT contig, max_seq, silent, cp_seq, cp_signed_at, hole_since, last_seen, resync_asked FROM tables WHERE table_id = ?`, t).
		Scan(&r.st.contig, &r.st.max, &r.st.silent, &r.st.cpSeq, &cpAt, &hole, &seen, &asked)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("floor database: table %s: %w", t, err)
	default:
		r.st.known = true
		r.st.cpSignedAt, r.st.holeSince, r.st.lastSeen, r.st.resyncAsked = fromNS(cpAt), fromNS(hole), fromNS(seen), fromNS(asked)
	}
	err = query(ctx, tx, func(rows *sql.Rows) error {
		h := heldRow{row: &Row{Table: t}}
		var prev, hash []byte
		var since, at int64
		if err := rows.Scan(&h.row.Seq, &h.row.At, &h.row.Kind, &h.row.Shoe, &h.row.Coup, &h.row.Body, &prev, &hash, &since, &at, &h.src); err != nil {
			return err
		}
		h.row.PrevHash, h.row.Hash, h.since = toHash(prev), toHash(hash), time.Unix(0, since).UTC()
		if at != 0 {
			h.at = time.Unix(0, at).UTC()
		}
		r.held = append(r.held, h)
		return nil
	}, `SELECT seq, at, kind, shoe, coup, body, prev_hash, hash, since, stream_at, source FROM pending WHERE table_id = ?`, t)
	if err != nil {
		return fmt.Errorf("floor database: pending rows of %s: %w", t, err)
	}
	seqs, cpSeqs, cpNs := readSeqs(items, r.held)
	err = query(ctx, tx, func(rows *sql.Rows) error {
		var seq int64
		var prev, hash []byte
		if err := rows.Scan(&seq, &prev, &hash); err != nil {
			return err
		}
		r.rows[seq] = neighbour{prev: toHash(prev), hash: toHash(hash)}
		return nil
	}, `SELECT seq, prev_hash, hash FROM rows WHERE table_id = ? AND seq IN (SELECT value FROM json_each(?))`, t, jsonInts(seqs))
	if err != nil {
		return fmt.Errorf("floor database: rows of %s: %w", t, err)
	}
	err = query(ctx, tx, func(rows *sql.Rows) error {
		c, err := scanCPRef(rows)
		if err != nil {
			return err
		}
		r.cpsAt[c.seq] = append(r.cpsAt[c.seq], c)
		return nil
	}, `SELECT seq, head_hash, signed_ns FROM checkpoints WHERE table_id = ? AND verified AND seq IN (SELECT value FROM json_each(?))`, t, jsonInts(cpSeqs))
	if err != nil {
		return fmt.Errorf("floor database: checkpoints of %s: %w", t, err)
	}
	err = query(ctx, tx, func(rows *sql.Rows) error {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			return err
		}
		r.forkAt[seq] = true
		return nil
	}, `SELECT DISTINCT seq FROM forks WHERE table_id = ? AND seq IN (SELECT value FROM json_each(?))`, t, jsonInts(seqs))
	if err != nil {
		return fmt.Errorf("floor database: forks of %s: %w", t, err)
	}
	// The checkpoints signed just before and just after each of the
	// batch's.
	err = query(ctx, tx, func(rows *sql.Rows) error {
		c, err := scanCPRef(rows)
		if err != nil {
			return err
		}
		r.cpsAside = append(r.cpsAside, c)
		return nil
	}, `SELECT c.seq, c.head_hash, c.signed_ns FROM json_each(?2) t, checkpoints c
		WHERE c.table_id = ?1 AND c.verified AND c.signed_ns = (SELECT max(signed_ns) FROM checkpoints p WHERE p.table_id = ?1 AND p.verified AND p.signed_ns < t.value)
		UNION
		SELECT c.seq, c.head_hash, c.signed_ns FROM json_each(?2) t, checkpoints c
		WHERE c.table_id = ?1 AND c.verified AND c.signed_ns = (SELECT min(signed_ns) FROM checkpoints n WHERE n.table_id = ?1 AND n.verified AND n.signed_ns > t.value)`, t, jsonInts(cpNs))
	if err != nil {
		return fmt.Errorf("floor database: checkpoints of %s: %w", t, err)
	}
	return nil
}

// writeTable writes one table's judged rows, forks, checkpoints, held
// rows and line, and resolves its silence when the judging says so.
func writeTable(ctx context.Context, tx *sql.Tx, insRow *sql.Stmt, w tableWrite, witness string, now time.Time) ([]Alert, error) {
	t := w.table
	var out []Alert
	for _, row := range w.ins {
		if _, err := insRow.ExecContext(ctx, t, row.Seq, row.At, row.Kind, row.Shoe, row.Coup, row.Body, row.PrevHash[:], row.Hash[:], now.UnixNano()); err != nil {
			return nil, fmt.Errorf("floor database: row %d of %s: %w", row.Seq, t, err)
		}
	}
	for _, row := range w.forks {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO forks (table_id, seq, at, kind, shoe, coup, body, prev_hash, hash, witnessed_at) VALUES (?,?,?,?,?,?,?,?,?,?)`,
			t, row.Seq, row.At, row.Kind, row.Shoe, row.Coup, row.Body, row.PrevHash[:], row.Hash[:], now.UnixNano()); err != nil {
			return nil, fmt.Errorf("floor database: fork %d of %s: %w", row.Seq, t, err)
		}
	}
	for k, c := range w.insCP {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO checkpoints (table_id, seq, head_hash, signed_at, signed_ns, key_id, signature, verified, witnessed_at) VALUES (?,?,?,?,?,?,?,?,?)`,
			t, c.Seq, c.HeadHash[:], c.SignedAt.UTC().Format(time.RFC3339Nano), c.SignedAt.UnixNano(), c.KeyID, c.Signature, w.verified[k], now.UnixNano()); err != nil {
			return nil, fmt.Errorf("floor database: checkpoint %d of %s: %w", c.Seq, t, err)
		}
	}
	if err := sqliteHold(ctx, tx, w, now); err != nil {
		return nil, err
	}
	if w.noLine {
		return out, nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO tables (table_id, contig, max_seq, last_seen, hole_since, silent, cp_seq, cp_signed_at) VALUES (?1,?2,?3,?4,?5,0,?6,?7)
		ON CONFLICT (table_id) DO UPDATE SET contig = excluded.contig, max_seq = excluded.max_seq, last_seen = max(coalesce(tables.last_seen, excluded.last_seen), excluded.last_seen),
		hole_since = excluded.hole_since, cp_seq = excluded.cp_seq, cp_signed_at = excluded.cp_signed_at,
		silent = tables.silent AND coalesce(excluded.last_seen <= tables.last_seen, 0)`,
		t, w.contig, w.maxSeq, w.seenAt.UnixNano(), ns(w.holeSince), w.cpSeq, ns(w.cpSignedAt)); err != nil {
		return nil, fmt.Errorf("floor database: table %s: %w", t, err)
	}
	if w.rescan {
		// A hole was filled below rows witnessed earlier: walk up to the
		// next hole.
		if _, err := tx.ExecContext(ctx, `UPDATE tables SET contig = coalesce((SELECT min(r.seq) FROM rows r WHERE r.table_id = ?1 AND r.seq >= ?2
			AND NOT EXISTS (SELECT 1 FROM rows n WHERE n.table_id = ?1 AND n.seq = r.seq + 1)), contig),
			hole_since = CASE WHEN max_seq <= coalesce((SELECT min(r.seq) FROM rows r WHERE r.table_id = ?1 AND r.seq >= ?2
			AND NOT EXISTS (SELECT 1 FROM rows n WHERE n.table_id = ?1 AND n.seq = r.seq + 1)), contig) THEN NULL ELSE hole_since END
			WHERE table_id = ?1`, t, w.contig); err != nil {
			return nil, fmt.Errorf("floor database: table %s: %w", t, err)
		}
	}
	if w.resolveSilent {
		err := query(ctx, tx, func(rows *sql.Rows) error {
			a := Alert{State: "resolved", Table: t, Kind: AlertSilent, Witness: witness, At: now}
			if err := rows.Scan(&a.ID, &a.Seq, &a.Message); err != nil {
				return err
			}
			out = append(out, a)
			return nil
		}, `UPDATE alerts SET resolved_at = ? WHERE table_id = ? AND kind = 'silent' AND resolved_at IS NULL RETURNING id, seq, message`, now.UnixNano(), t)
		if err != nil {
			return nil, fmt.Errorf("floor database: resolve: %w", err)
		}
	}
	return out, nil
}

// querier is a database or a transaction.
type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// query calls f for each row of q.
func query(ctx context.Context, db querier, f func(*sql.Rows) error, q string, args ...any) error {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

func raiseIn(ctx context.Context, db querier, a Alert) (Alert, bool, error) {
	found := false
	err := query(ctx, db, func(rows *sql.Rows) error {
		found = true
		return rows.Scan(&a.ID)
	}, `INSERT INTO alerts (table_id, kind, key, seq, message, tamper, witness, raised_at, resolved_at) VALUES (?,?,?,?,?,?,?,?,?)
		ON CONFLICT (table_id, kind, key) DO NOTHING RETURNING id`, a.Table, a.Kind, a.key, a.Seq, a.Message, a.Tamper, a.Witness, a.At.UnixNano(), ns(a.overAt()))
	if err != nil {
		return a, false, fmt.Errorf("floor database: alert: %w", err)
	}
	return a, found, nil
}

func (s *SQLiteStore) lines(ctx context.Context) ([]tableLine, error) {
	var out []tableLine
	err := query(ctx, s.db, func(rows *sql.Rows) error {
		var l tableLine
		var hole, seen, asked sql.NullInt64
		if err := rows.Scan(&l.table, &l.contig, &l.max, &hole, &seen, &asked, &l.silent); err != nil {
			return err
		}
		l.hole, l.seen, l.asked = fromNS(hole), fromNS(seen), fromNS(asked)
		out = append(out, l)
		return nil
	}, `SELECT table_id, contig, max_seq, hole_since, last_seen, resync_asked, silent FROM tables`)
	if err != nil {
		return nil, fmt.Errorf("floor database: %w", err)
	}
	return out, nil
}

func (s *SQLiteStore) claimResync(ctx context.Context, table string, now, before time.Time) (from, upTo int64, ok bool, err error) {
	var maxSeq int64
	err = query(ctx, s.db, func(rows *sql.Rows) error {
		ok = true
		return rows.Scan(&from, &maxSeq)
	}, `UPDATE tables SET resync_asked = ?2 WHERE table_id = ?1 AND contig < max_seq
		AND (resync_asked IS NULL OR resync_asked <= ?3) RETURNING contig + 1, max_seq`, table, now.UnixNano(), before.UnixNano())
	if err != nil || !ok {
		return 0, 0, false, err
	}
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce(min(seq), ?3) FROM rows WHERE table_id = ?1 AND seq > ?2`, table, from, maxSeq+1).Scan(&upTo); err != nil {
		return 0, 0, false, fmt.Errorf("floor database: %w", err)
	}
	return from, upTo, true, nil
}

func (s *SQLiteStore) markSilent(ctx context.Context, table string, seen time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE tables SET silent = 1 WHERE table_id = ? AND NOT silent AND last_seen = ?`, table, seen.UnixNano())
	if err != nil {
		return false, fmt.Errorf("floor database: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (s *SQLiteStore) raise(ctx context.Context, a Alert) (Alert, bool, error) {
	return raiseIn(ctx, s.db, a)
}

func (s *SQLiteStore) resolve(ctx context.Context, table string, kind AlertKind, now time.Time) ([]Alert, error) {
	var out []Alert
	err := query(ctx, s.db, func(rows *sql.Rows) error {
		a := Alert{State: "resolved", Table: table, Kind: kind, At: now, Tamper: Tamper(kind)}
		if err := rows.Scan(&a.ID, &a.Seq, &a.Message); err != nil {
			return err
		}
		out = append(out, a)
		return nil
	}, `UPDATE alerts SET resolved_at = ?3 WHERE table_id = ?1 AND kind = ?2 AND resolved_at IS NULL RETURNING id, seq, message`, table, kind, now.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("floor database: %w", err)
	}
	return out, nil
}

func (s *SQLiteStore) viewLines(ctx context.Context, since time.Time) ([]viewLine, error) {
	var out []viewLine
	err := query(ctx, s.db, func(rows *sql.Rows) error {
		var l viewLine
		var seen, cp sql.NullInt64
		if err := rows.Scan(&l.table, &l.contig, &l.max, &seen, &cp, &l.coups); err != nil {
			return err
		}
		l.seen, l.cp = fromNS(seen), fromNS(cp)
		out = append(out, l)
		return nil
	}, `SELECT t.table_id, t.contig, t.max_seq, t.last_seen, t.cp_signed_at,
		(SELECT count(*) FROM rows r WHERE r.table_id = t.table_id AND r.kind = 'coup_result' AND r.witnessed_at > ?)
		FROM tables t`, since.UnixNano())
	return out, err
}

func (s *SQLiteStore) openAlerts(ctx context.Context) ([]Alert, error) {
	var out []Alert
	err := query(ctx, s.db, func(rows *sql.Rows) error {
		a := Alert{State: "raised"}
		var at int64
		if err := rows.Scan(&a.ID, &a.Table, &a.Kind, &a.Seq, &a.Message, &a.Tamper, &a.Witness, &at); err != nil {
			return err
		}
		a.At = time.Unix(0, at).UTC()
		out = append(out, a)
		return nil
	}, `SELECT id, table_id, kind, seq, message, tamper, witness, raised_at FROM alerts WHERE resolved_at IS NULL ORDER BY id`)
	return out, err
}

func (s *SQLiteStore) witnessed(ctx context.Context, table string, f func(int64, audit.Hash) error) error {
	err := query(ctx, s.db, func(rows *sql.Rows) error {
		var seq int64
		var h []byte
		if err := rows.Scan(&seq, &h); err != nil {
			return err
		}
		return f(seq, toHash(h))
	}, `SELECT seq, hash FROM rows WHERE table_id = ? ORDER BY seq`, table)
	if err != nil {
		return fmt.Errorf("floor database: %w", err)
	}
	return nil
}

func (s *SQLiteStore) forkedSeqs(ctx context.Context, table string) (n int64, err error) {
	if err := s.db.QueryRowContext(ctx, `SELECT count(DISTINCT seq) FROM forks WHERE table_id = ?`, table).Scan(&n); err != nil {
		return 0, fmt.Errorf("floor database: %w", err)
	}
	return n, nil
}

func (s *SQLiteStore) tamperAlerts(ctx context.Context, table string) ([]Alert, error) {
	var out []Alert
	err := query(ctx, s.db, func(rows *sql.Rows) error {
		a := Alert{Table: table, Tamper: true}
		if err := rows.Scan(&a.Kind, &a.Seq); err != nil {
			return err
		}
		out = append(out, a)
		return nil
	}, `SELECT kind, seq FROM alerts WHERE table_id = ? AND tamper ORDER BY id`, table)
	if err != nil {
		return nil, fmt.Errorf("floor database: %w", err)
	}
	return out, nil
}
