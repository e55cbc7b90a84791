package floor

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tablectl/tablectl/coup"
)

// storedPrint is a row of shoe_prints.
type storedPrint struct {
	table   string
	shoe    int64
	cards   []uint8
	lastSeq int64
	first   time.Time
}

// shoeStore keeps the shoe watch's prints, one row a shoe, apart from the
// witnessed rows: the shoe_prints table of docs/floor.md.
type shoeStore interface {
	// loadPrints is every print written since since whose first card was
	// witnessed at keepFrom or later.
	loadPrints(ctx context.Context, since, keepFrom time.Time) ([]storedPrint, error)
	// tablePrint is table's newest shoe's print.
	tablePrint(ctx context.Context, table string) (storedPrint, bool, error)
	// savePrints writes prints, each unless the one stored holds a later
	// card already.
	savePrints(ctx context.Context, ps []storedPrint, now time.Time) error
	// prunePrints deletes the prints whose first card was witnessed
	// before before.
	prunePrints(ctx context.Context, before time.Time) error
}

// shoeStoreOf is the shoe watch's part of a store, its table made.
func shoeStoreOf(ctx context.Context, s Store) (shoeStore, error) {
	switch s := s.(type) {
	case *PGStore:
		st := pgShoes{s}
		return st, st.ensure(ctx)
	case *SQLiteStore:
		st := sqliteShoes{s}
		return st, st.ensure(ctx)
	}
	return nil, fmt.Errorf("the shoe watch keeps its prints in a PGStore or a SQLiteStore, not a %T", s)
}

func parseStored(sp *storedPrint, cards string) error {
	p, err := coup.ParsePrint(cards)
	if err != nil {
		return fmt.Errorf("shoe %d of %s: %w", sp.shoe, sp.table, err)
	}
	sp.cards = p
	return nil
}

// ---- PostgreSQL ----

type pgShoes struct{ s *PGStore }

const pgShoeSchema = `
CREATE TABLE IF NOT EXISTS S.shoe_prints (
	table_id   text NOT NULL,
	shoe       bigint NOT NULL,
	cards      text NOT NULL,        -- its cards in the order they came out (coup.FormatPrint)
	last_seq   bigint NOT NULL,      -- the row of its last card
	first_at   timestamptz NOT NULL, -- when its first card was witnessed
	updated_at timestamptz NOT NULL,
	PRIMARY KEY (table_id, shoe)
);
CREATE INDEX IF NOT EXISTS shoe_prints_by_update ON S.shoe_prints (updated_at);
`

func (p pgShoes) ensure(ctx context.Context) error {
	conn, err := p.s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("floor database: %w", err)
	}
	defer conn.Release()
	// As OpenStore: CREATE ... IF NOT EXISTS is not atomic.
	lock := "tablectl-floor-schema/" + p.s.name
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1, 0))`, lock); err != nil {
		return fmt.Errorf("floor database: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, lock)
	if _, err := conn.Exec(ctx, p.s.sql(pgShoeSchema)); err != nil {
		return fmt.Errorf("floor database: create shoe_prints: %w", err)
	}
	return nil
}

func (p pgShoes) scan(rows pgx.Rows) ([]storedPrint, error) {
	defer rows.Close()
	var out []storedPrint
	for rows.Next() {
		var sp storedPrint
		var cards string
		if err := rows.Scan(&sp.table, &sp.shoe, &cards, &sp.lastSeq, &sp.first); err != nil {
			return nil, err
		}
		if err := parseStored(&sp, cards); err != nil {
			return nil, err
		}
		out = append(out, sp)
	}
	return out, rows.Err()
}

func (p pgShoes) loadPrints(ctx context.Context, since, keepFrom time.Time) ([]storedPrint, error) {
	rows, err := p.s.pool.Query(ctx, p.s.sql(`SELECT table_id, shoe, cards, last_seq, first_at FROM S.shoe_prints WHERE updated_at >= $1 AND first_at >= $2`), since, keepFrom)
	if err != nil {
		return nil, fmt.Errorf("floor database: %w", err)
	}
	out, err := p.scan(rows)
	if err != nil {
		return nil, fmt.Errorf("floor database: shoe_prints: %w", err)
	}
	return out, nil
}

func (p pgShoes) tablePrint(ctx context.Context, table string) (storedPrint, bool, error) {
	rows, err := p.s.pool.Query(ctx, p.s.sql(`SELECT table_id, shoe, cards, last_seq, first_at FROM S.shoe_prints WHERE table_id = $1 ORDER BY shoe DESC LIMIT 1`), table)
	if err != nil {
		return storedPrint{}, false, fmt.Errorf("floor database: %w", err)
	}
	out, err := p.scan(rows)
	if err != nil || len(out) == 0 {
		return storedPrint{}, false, err
	}
	return out[0], true, nil
}

func (p pgShoes) savePrints(ctx context.Context, ps []storedPrint, now time.Time) error {
	tables, cards := make([]string, len(ps)), make([]string, len(ps))
	shoes, seqs := make([]int64, len(ps)), make([]int64, len(ps))
	firsts := make([]time.Time, len(ps))
	for i, sp := range ps {
		tables[i], shoes[i], cards[i], seqs[i], firsts[i] = sp.table, sp.shoe, coup.FormatPrint(sp.cards), sp.lastSeq, sp.first
	}
	_, err := p.s.pool.Exec(ctx, p.s.sql(`
INSERT INTO S.shoe_prints (table_id, shoe, cards, last_seq, first_at, updated_at)
SELECT t, s, c, q, f, $6 FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::timestamptz[]) AS u(t, s, c, q, f)
ON CONFLICT (table_id, shoe) DO UPDATE SET cards = EXCLUDED.cards, last_seq = EXCLUDED.last_seq, updated_at = EXCLUDED.updated_at
	WHERE S.shoe_prints.last_seq < EXCLUDED.last_seq`), tables, shoes, cards, seqs, firsts, now)
	if err != nil {
		return fmt.Errorf("floor database: shoe_prints: %w", err)
	}
	return nil
}

func (p pgShoes) prunePrints(ctx context.Context, before time.Time) error {
	if _, err := p.s.pool.Exec(ctx, p.s.sql(`DELETE FROM S.shoe_prints WHERE first_at < $1`), before); err != nil {
		return fmt.Errorf("floor database: shoe_prints: %w", err)
	}
	return nil
}

// ---- SQLite ----

type sqliteShoes struct{ s *SQLiteStore }

const sqliteShoeSchema = `
CREATE TABLE IF NOT EXISTS shoe_prints (
	table_id   TEXT NOT NULL,
	shoe       INTEGER NOT NULL,
	cards      TEXT NOT NULL,
	last_seq   INTEGER NOT NULL,
	first_at   INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (table_id, shoe)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS shoe_prints_by_update ON shoe_prints (updated_at);
`

func (q sqliteShoes) ensure(ctx context.Context) error {
	if _, err := q.s.db.ExecContext(ctx, sqliteShoeSchema); err != nil {
		return fmt.Errorf("floor database %s: create shoe_prints: %w", q.s.path, err)
	}
	return nil
}

func (q sqliteShoes) scan(rows *sql.Rows, err error) ([]storedPrint, error) {
	if err != nil {
		return nil, fmt.Errorf("floor database: %w", err)
	}
	defer rows.Close()
	var out []storedPrint
	for rows.Next() {
		var sp storedPrint
		var cards string
		var first int64
		if err := rows.Scan(&sp.table, &sp.shoe, &cards, &sp.lastSeq, &first); err != nil {
			return nil, fmt.Errorf("floor database: shoe_prints: %w", err)
		}
		sp.first = time.Unix(0, first).UTC()
		if err := parseStored(&sp, cards); err != nil {
			return nil, fmt.Errorf("floor database: shoe_prints: %w", err)
		}
		out = append(out, sp)
	}
	return out, rows.Err()
}

func (q sqliteShoes) loadPrints(ctx context.Context, since, keepFrom time.Time) ([]storedPrint, error) {
	return q.scan(q.s.db.QueryContext(ctx, `SELECT table_id, shoe, cards, last_seq, first_at FROM shoe_prints WHERE updated_at >= ? AND first_at >= ?`,
		since.UnixNano(), keepFrom.UnixNano()))
}

func (q sqliteShoes) tablePrint(ctx context.Context, table string) (storedPrint, bool, error) {
	out, err := q.scan(q.s.db.QueryContext(ctx, `SELECT table_id, shoe, cards, last_seq, first_at FROM shoe_prints WHERE table_id = ? ORDER BY shoe DESC LIMIT 1`, table))
	if err != nil || len(out) == 0 {
		return storedPrint{}, false, err
	}
	return out[0], true, nil
}

func (q sqliteShoes) savePrints(ctx context.Context, ps []storedPrint, now time.Time) (err error) {
	tx, err := q.s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("floor database: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	for _, sp := range ps {
		if _, err = tx.ExecContext(ctx, `
INSERT INTO shoe_prints (table_id, shoe, cards, last_seq, first_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (table_id, shoe) DO UPDATE SET cards = excluded.cards, last_seq = excluded.last_seq, updated_at = excluded.updated_at
	WHERE shoe_prints.last_seq < excluded.last_seq`, sp.table, sp.shoe, coup.FormatPrint(sp.cards), sp.lastSeq, sp.first.UnixNano(), now.UnixNano()); err != nil {
			return fmt.Errorf("floor database: shoe_prints: %w", err)
		}
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("floor database: %w", err)
	}
	return nil
}

func (q sqliteShoes) prunePrints(ctx context.Context, before time.Time) error {
	if _, err := q.s.db.ExecContext(ctx, `DELETE FROM shoe_prints WHERE first_at < ?`, before.UnixNano()); err != nil {
		return fmt.Errorf("floor database: shoe_prints: %w", err)
	}
	return nil
}
