package floor

import (
	"context"
	"fmt"
	"time"

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
		st := pgShoes{shoePrints{s.sqlStore}, s}
		return st, st.ensure(ctx)
	case *SQLiteStore:
		st := sqliteShoes{shoePrints{s.sqlStore}, s}
		return st, st.ensure(ctx)
	}
	return nil, fmt.Errorf("the shoe watch keeps its prints in a PGStore or a SQLiteStore, not a %T", s)
}

// shoePrints is the shoe watch's reads and pruning, one SQL for both
// databases (the store's dialect); each keeps its table's making and its
// write.
type shoePrints struct{ s sqlStore }

// prints runs q and reads its answer's prints.
func (p shoePrints) prints(ctx context.Context, q string, args ...any) ([]storedPrint, error) {
	var out []storedPrint
	err := p.s.d.each(ctx, q, args, func(scan scanFunc) error {
		var sp storedPrint
		var cards string
		if err := scan(&sp.table, &sp.shoe, &cards, &sp.lastSeq, stampOf{&sp.first}); err != nil {
			return err
		}
		c, err := coup.ParsePrint(cards)
		if err != nil {
			return fmt.Errorf("shoe %d of %s: %w", sp.shoe, sp.table, err)
		}
		sp.cards = c
		out = append(out, sp)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("floor database: shoe_prints: %w", err)
	}
	return out, nil
}

func (p shoePrints) loadPrints(ctx context.Context, since, keepFrom time.Time) ([]storedPrint, error) {
	return p.prints(ctx, `SELECT table_id, shoe, cards, last_seq, first_at FROM S.shoe_prints WHERE updated_at >= $1 AND first_at >= $2`, p.s.d.stamp(since), p.s.d.stamp(keepFrom))
}

func (p shoePrints) tablePrint(ctx context.Context, table string) (storedPrint, bool, error) {
	out, err := p.prints(ctx, `SELECT table_id, shoe, cards, last_seq, first_at FROM S.shoe_prints WHERE table_id = $1 ORDER BY shoe DESC LIMIT 1`, table)
	if err != nil || len(out) == 0 {
		return storedPrint{}, false, err
	}
	return out[0], true, nil
}

func (p shoePrints) prunePrints(ctx context.Context, before time.Time) error {
	if _, err := p.s.d.exec(ctx, `DELETE FROM S.shoe_prints WHERE first_at < $1`, p.s.d.stamp(before)); err != nil {
		return fmt.Errorf("floor database: shoe_prints: %w", err)
	}
	return nil
}

// ---- PostgreSQL ----

type pgShoes struct {
	shoePrints
	s *PGStore
}

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

// ---- SQLite ----

type sqliteShoes struct {
	shoePrints
	s *SQLiteStore
}

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
