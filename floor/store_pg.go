package floor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tablectl/tablectl/audit"
)

// PGStore is the floor's PostgreSQL database: one schema holding every
// witnessed row, fork, checkpoint, alert and each table's line.
type PGStore struct {
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
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+s.schema+";"+s.sql(schemaSQL)); err != nil {
		return nil, fmt.Errorf("floor database: create schema %s: %w", schema, err)
	}
	return s, nil
}

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

// lockAndHeld takes each table's lock for the transaction, in name
// order, and reads the rows each holds pending.
func (s *PGStore) lockAndHeld(ctx context.Context, tx pgx.Tx, tables []string) ([][]heldRow, error) {
	b := &pgx.Batch{}
	for _, t := range tables {
		b.Queue(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, s.name+"/"+t)
		b.Queue(s.sql(`SELECT seq, at, kind, shoe, coup, body, prev_hash, hash, since, stream_at, source FROM S.pending WHERE table_id = $1`), t)
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	out := make([][]heldRow, len(tables))
	for i, t := range tables {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("floor database: lock %s: %w", t, err)
		}
		rows, err := br.Query()
		if err != nil {
			return nil, fmt.Errorf("floor database: pending rows of %s: %w", t, err)
		}
		for rows.Next() {
			h := heldRow{row: &Row{Table: t}}
			var prev, hash []byte
			var at *time.Time
			if err := rows.Scan(&h.row.Seq, &h.row.At, &h.row.Kind, &h.row.Shoe, &h.row.Coup, &h.row.Body, &prev, &hash, &h.since, &at, &h.src); err != nil {
				rows.Close()
				return nil, fmt.Errorf("floor database: pending rows of %s: %w", t, err)
			}
			h.row.PrevHash, h.row.Hash = toHash(prev), toHash(hash)
			if at != nil {
				h.at = *at
			}
			out[i] = append(out[i], h)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("floor database: pending rows of %s: %w", t, err)
		}
	}
	return out, br.Close()
}

// queueHold queues a table's pending rows and quarantine counts.
func (s *PGStore) queueHold(wr *pgx.Batch, w tableWrite, now time.Time) {
	t := w.table
	for _, h := range w.release {
		wr.Queue(s.sql(`DELETE FROM S.pending WHERE table_id = $1 AND seq = $2 AND hash = $3`), t, h.row.Seq, h.row.Hash[:])
	}
	for _, h := range w.hold {
		var at *time.Time
		if !h.at.IsZero() {
			at = &h.at
		}
		row := h.row
		wr.Queue(s.sql(`INSERT INTO S.pending (table_id, seq, at, kind, shoe, coup, body, prev_hash, hash, since, stream_at, source) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12) ON CONFLICT DO NOTHING`),
			t, row.Seq, row.At, row.Kind, row.Shoe, row.Coup, row.Body, row.PrevHash[:], row.Hash[:], h.since, at, h.src)
	}
	for _, q := range w.quarantine {
		wr.Queue(s.sql(`INSERT INTO S.quarantine (table_id, reason, count, last_source, last_detail, last_at) VALUES ($1,$2,$3,$4,$5,$6)
			ON CONFLICT (table_id, reason) DO UPDATE SET count = S.quarantine.count + excluded.count, last_source = excluded.last_source,
			last_detail = excluded.last_detail, last_at = excluded.last_at`), t, q.reason, q.n, q.src, q.detail, now)
	}
}

// Pool is the store's connection pool.
func (s *PGStore) Pool() *pgxpool.Pool { return s.pool }

// Schema is the store's schema name, quoted for SQL.
func (s *PGStore) Schema() string { return s.schema }

// sql replaces "S." in q with the schema.
func (s *PGStore) sql(q string) string { return strings.ReplaceAll(q, "S.", s.schema+".") }

// apply stores one batch in one transaction and returns the alerts it
// raised and resolved (to publish once committed). Every table of the
// batch is locked for the transaction, in name order, so two witnesses
// never judge one table's rows at once and never deadlock.
func (s *PGStore) apply(ctx context.Context, items []item, reg *Registry, witness string, now time.Time) ([]Alert, error) {
	tables, byTable := batchTables(items)

	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return nil, fmt.Errorf("floor database: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))

	// Read: each table's lock, line, the rows around the batch's rows and
	// the checkpoints around the batch's checkpoints, in one round trip.
	// First each table's lock and the rows it holds pending (what else
	// is read depends on them), then the rest.
	held, err := s.lockAndHeld(ctx, tx, tables)
	if err != nil {
		return nil, err
	}
	reads, err := s.readLines(ctx, tx, tables, byTable, held)
	if err != nil {
		return nil, err
	}
	// Judge, in memory, then write in one round trip.
	writes, alerts := judge(tables, byTable, reads, reg, witness, now)
	wr, resolveSilent := s.queueWrites(writes, alerts, now)
	out, err := sendWrites(ctx, tx, wr, alerts, resolveSilent, witness, now)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("floor database: commit: %w", err)
	}
	return out, nil
}

// readLines reads, for each table of the batch, its line and what the
// judging compares the batch with, in one round trip.
func (s *PGStore) readLines(ctx context.Context, tx pgx.Tx, tables []string, byTable map[string][]item, held [][]heldRow) ([]tableRead, error) {
	rd := &pgx.Batch{}
	for i, t := range tables {
		rd.Queue(s.sql(`SELECT contig, max_seq, silent, cp_seq, cp_signed_at, hole_since, last_seen, resync_asked FROM S.tables WHERE table_id = $1`), t)
		seqs, cpSeqs, cpNs := readSeqs(byTable[t], held[i])
		// The seqs asked for as runs (lo..hi): a batch's rows of a table
		// are mostly consecutive, so a range scan of the key per run reads
		// exactly what an index probe per seq did. OFFSET 0 keeps each run
		// its own index scan: joined flat, a generic plan scans every row
		// of the table.
		lo, hi := seqRuns(seqs)
		cpLo, cpHi := seqRuns(cpSeqs)
		rd.Queue(s.sql(`SELECT r.seq, r.prev_hash, r.hash FROM unnest($2::bigint[], $3::bigint[]) AS q(lo, hi),
			LATERAL (SELECT seq, prev_hash, hash FROM S.rows WHERE table_id = $1 AND seq BETWEEN q.lo AND q.hi OFFSET 0) r`), t, lo, hi)
		rd.Queue(s.sql(`SELECT c.seq, c.head_hash, c.signed_ns FROM unnest($2::bigint[], $3::bigint[]) AS q(lo, hi),
			LATERAL (SELECT seq, head_hash, signed_ns FROM S.checkpoints WHERE table_id = $1 AND verified AND seq BETWEEN q.lo AND q.hi OFFSET 0) c`), t, cpLo, cpHi)
		rd.Queue(s.sql(`SELECT DISTINCT f.seq FROM unnest($2::bigint[], $3::bigint[]) AS q(lo, hi),
			LATERAL (SELECT seq FROM S.forks WHERE table_id = $1 AND seq BETWEEN q.lo AND q.hi OFFSET 0) f`), t, lo, hi)
		// The checkpoints signed just before and after each of the batch's:
		// per run of its signing times (a gap of a minute or more ends a
		// run), those signed within the run and the nearest on each side.
		// A superset of each one's two neighbours, which judge orders, read
		// with one range scan and two probes per run instead of two probes
		// per checkpoint (most of a catch-up batch's read).
		nsLo, nsHi := runs(cpNs, int64(time.Minute))
		rd.Queue(s.sql(`SELECT c.seq, c.head_hash, c.signed_ns FROM unnest($2::bigint[], $3::bigint[]) AS q(lo, hi),
			LATERAL (SELECT seq, head_hash, signed_ns FROM S.checkpoints c WHERE c.table_id = $1 AND c.verified AND c.signed_ns BETWEEN q.lo AND q.hi OFFSET 0) c
			UNION
			SELECT p.seq, p.head_hash, p.signed_ns FROM unnest($2::bigint[]) AS q(lo),
			LATERAL (SELECT seq, head_hash, signed_ns FROM S.checkpoints c WHERE c.table_id = $1 AND c.verified AND c.signed_ns < q.lo ORDER BY signed_ns DESC LIMIT 1) p
			UNION
			SELECT n.seq, n.head_hash, n.signed_ns FROM unnest($3::bigint[]) AS q(hi),
			LATERAL (SELECT seq, head_hash, signed_ns FROM S.checkpoints c WHERE c.table_id = $1 AND c.verified AND c.signed_ns > q.hi ORDER BY signed_ns LIMIT 1) n`), t, nsLo, nsHi)
	}
	return scanLines(tx.SendBatch(ctx, rd), tables, held)
}

// scanLines reads the answers readLines queued, table by table.
func scanLines(br pgx.BatchResults, tables []string, held [][]heldRow) ([]tableRead, error) {
	reads := make([]tableRead, len(tables))
	for i := range tables {
		reads[i] = newTableRead()
		reads[i].held = held[i]
		if err := scanLine(br, tables[i], &reads[i]); err != nil {
			br.Close()
			return nil, err
		}
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("floor database: read: %w", err)
	}
	return reads, nil
}

// scanLine reads one table's answers: its line, the rows, then the
// checkpoints at the batch's seqs, the forks, and the checkpoints aside.
func scanLine(br pgx.BatchResults, table string, r *tableRead) error {
	err := br.QueryRow().Scan(&r.st.contig, &r.st.max, &r.st.silent, &r.st.cpSeq, &r.st.cpSignedAt, &r.st.holeSince, &r.st.lastSeen, &r.st.resyncAsked)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fmt.Errorf("floor database: table %s: %w", table, err)
	default:
		r.st.known = true
	}
	if err := scanNeighbours(br, table, r); err != nil {
		return err
	}
	for q := 0; q < 3; q++ {
		if err := scanCheckpoints(br, table, q, r); err != nil {
			return err
		}
	}
	return nil
}

// scanNeighbours reads the witnessed rows around the batch's.
func scanNeighbours(br pgx.BatchResults, table string, r *tableRead) error {
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("floor database: rows of %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var prev, hash []byte
		if err := rows.Scan(&seq, &prev, &hash); err != nil {
			return fmt.Errorf("floor database: rows of %s: %w", table, err)
		}
		r.rows[seq] = neighbour{prev: toHash(prev), hash: toHash(hash)}
	}
	return rows.Err()
}

// scanCheckpoints reads answer q of a table's three after its rows: the
// checkpoints at the batch's seqs (0), the forks (1), the checkpoints
// signed around the batch's (2).
func scanCheckpoints(br pgx.BatchResults, table string, q int, r *tableRead) error {
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("floor database: checkpoints of %s: %w", table, err)
	}
	defer rows.Close()
	for q == 1 && rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			return fmt.Errorf("floor database: forks of %s: %w", table, err)
		}
		r.forkAt[seq] = true
	}
	for rows.Next() {
		c, err := scanCPRef(rows)
		if err != nil {
			return fmt.Errorf("floor database: checkpoints of %s: %w", table, err)
		}
		if q == 0 {
			r.cpsAt[c.seq] = append(r.cpsAt[c.seq], c)
		} else {
			r.cpsAside = append(r.cpsAside, c)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("floor database: checkpoints of %s: %w", table, err)
	}
	return nil
}

// queueWrites queues the judged writes and the alerts to store; it
// returns the batch and the tables whose silence to resolve.
func (s *PGStore) queueWrites(writes []tableWrite, alerts []Alert, now time.Time) (*pgx.Batch, []string) {
	wr := &pgx.Batch{}
	var resolveSilent []string
	for _, w := range writes {
		t, ins, forks, insCP, verified := w.table, w.ins, w.forks, w.insCP, w.verified
		// Writes.
		if len(ins) > 0 {
			n := len(ins)
			seq, at, kind, shoe, cp, body, prev, hash := make([]int64, n), make([]string, n), make([]string, n), make([]int64, n), make([]int64, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
			for k, row := range ins {
				seq[k], at[k], kind[k], shoe[k], cp[k], body[k] = row.Seq, row.At, row.Kind, row.Shoe, row.Coup, row.Body
				prev[k], hash[k] = row.PrevHash[:], row.Hash[:]
			}
			wr.Queue(s.sql(`INSERT INTO S.rows (table_id, seq, at, kind, shoe, coup, body, prev_hash, hash, witnessed_at)
				SELECT $1, * , $10 FROM unnest($2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::bytea[], $8::bytea[], $9::bytea[])`),
				t, seq, at, kind, shoe, cp, body, prev, hash, now)
		}
		for _, row := range forks {
			wr.Queue(s.sql(`INSERT INTO S.forks (table_id, seq, at, kind, shoe, coup, body, prev_hash, hash, witnessed_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10) ON CONFLICT DO NOTHING`),
				t, row.Seq, row.At, row.Kind, row.Shoe, row.Coup, row.Body, row.PrevHash[:], row.Hash[:], now)
		}
		if n := len(insCP); n > 0 {
			seq, head, at, ns, kid, sig := make([]int64, n), make([][]byte, n), make([]string, n), make([]int64, n), make([]string, n), make([][]byte, n)
			for k, c := range insCP {
				seq[k], head[k], at[k], ns[k], kid[k], sig[k] = c.Seq, c.HeadHash[:], c.SignedAt.UTC().Format(time.RFC3339Nano), c.SignedAt.UnixNano(), c.KeyID, c.Signature
			}
			wr.Queue(s.sql(`INSERT INTO S.checkpoints (table_id, seq, head_hash, signed_at, signed_ns, key_id, signature, verified, witnessed_at)
				SELECT $1, *, $9 FROM unnest($2::bigint[], $3::bytea[], $4::text[], $5::bigint[], $6::text[], $7::bytea[], $8::boolean[]) ON CONFLICT DO NOTHING`),
				t, seq, head, at, ns, kid, sig, verified, now)
		}
		s.queueHold(wr, w, now)
		if w.noLine {
			continue
		}
		wr.Queue(s.sql(`INSERT INTO S.tables (table_id, contig, max_seq, last_seen, hole_since, silent, cp_seq, cp_signed_at) VALUES ($1,$2,$3,$4,$5,false,$6,$7)
			ON CONFLICT (table_id) DO UPDATE SET contig = excluded.contig, max_seq = excluded.max_seq, last_seen = GREATEST(S.tables.last_seen, excluded.last_seen),
			hole_since = excluded.hole_since, cp_seq = excluded.cp_seq, cp_signed_at = excluded.cp_signed_at,
			silent = S.tables.silent AND excluded.last_seen <= S.tables.last_seen`),
			t, w.contig, w.maxSeq, w.seenAt, w.holeSince, w.cpSeq, w.cpSignedAt)
		if w.rescan {
			// A hole was filled below rows witnessed earlier: walk up to the
			// next hole.
			wr.Queue(s.sql(`UPDATE S.tables SET contig = coalesce((SELECT min(r.seq) FROM S.rows r WHERE r.table_id = $1 AND r.seq >= $2
				AND NOT EXISTS (SELECT 1 FROM S.rows n WHERE n.table_id = $1 AND n.seq = r.seq + 1)), contig),
				hole_since = CASE WHEN max_seq <= coalesce((SELECT min(r.seq) FROM S.rows r WHERE r.table_id = $1 AND r.seq >= $2
				AND NOT EXISTS (SELECT 1 FROM S.rows n WHERE n.table_id = $1 AND n.seq = r.seq + 1)), contig) THEN NULL ELSE hole_since END
				WHERE table_id = $1`), t, w.contig)
		}
		if w.resolveSilent {
			resolveSilent = append(resolveSilent, t)
		}
	}
	// Alerts: stored once (the key makes a second witness's copy of the
	// same alert a no-op), published by whoever stored it.
	for _, a := range alerts {
		wr.Queue(s.sql(`INSERT INTO S.alerts (table_id, kind, key, seq, message, tamper, witness, raised_at, resolved_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)
			ON CONFLICT (table_id, kind, key) DO NOTHING RETURNING id`), a.Table, a.Kind, a.key, a.Seq, a.Message, a.Tamper, a.Witness, a.At, a.overAt())
	}
	for _, t := range resolveSilent {
		wr.Queue(s.sql(`UPDATE S.alerts SET resolved_at = $2 WHERE table_id = $1 AND kind = 'silent' AND resolved_at IS NULL RETURNING id, seq, message`), t, now)
	}
	return wr, resolveSilent
}

// sendWrites sends the writes in one round trip and reads back the alerts
// stored (a second witness's copy of one stores nothing) and resolved.
func sendWrites(ctx context.Context, tx pgx.Tx, wr *pgx.Batch, alerts []Alert, resolveSilent []string, witness string, now time.Time) ([]Alert, error) {
	nAlerts := len(alerts)
	bw := tx.SendBatch(ctx, wr)
	for k := 0; k < wr.Len()-nAlerts-len(resolveSilent); k++ {
		if _, err := bw.Exec(); err != nil {
			bw.Close()
			return nil, fmt.Errorf("floor database: write: %w", err)
		}
	}
	var out []Alert
	for k := range nAlerts {
		var id int64
		err := bw.QueryRow().Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // stored already
		}
		if err != nil {
			bw.Close()
			return nil, fmt.Errorf("floor database: alert: %w", err)
		}
		a := alerts[k]
		a.ID = id
		out = append(out, a.settled()...)
	}
	for _, t := range resolveSilent {
		rows, err := bw.Query()
		if err != nil {
			bw.Close()
			return nil, fmt.Errorf("floor database: resolve: %w", err)
		}
		for rows.Next() {
			a := Alert{State: "resolved", Table: t, Kind: AlertSilent, Witness: witness, At: now}
			if err := rows.Scan(&a.ID, &a.Seq, &a.Message); err != nil {
				rows.Close()
				bw.Close()
				return nil, fmt.Errorf("floor database: resolve: %w", err)
			}
			out = append(out, a)
		}
		rows.Close()
	}
	if err := bw.Close(); err != nil {
		return nil, fmt.Errorf("floor database: write: %w", err)
	}
	return out, nil
}

// seqRuns is seqs (any order, repeats allowed) as the runs of consecutive
// seqs they cover: lo[k]..hi[k].
func seqRuns(seqs []int64) (lo, hi []int64) { return runs(seqs, 1) }

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

func (s *PGStore) lines(ctx context.Context) ([]tableLine, error) {
	rows, err := s.pool.Query(ctx, s.sql(`SELECT table_id, contig, max_seq, hole_since, last_seen, resync_asked, silent FROM S.tables`))
	if err != nil {
		return nil, fmt.Errorf("floor database: %w", err)
	}
	defer rows.Close()
	var lines []tableLine
	for rows.Next() {
		var l tableLine
		if err := rows.Scan(&l.table, &l.contig, &l.max, &l.hole, &l.seen, &l.asked, &l.silent); err != nil {
			return nil, fmt.Errorf("floor database: %w", err)
		}
		lines = append(lines, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("floor database: %w", err)
	}
	return lines, nil
}

func (s *PGStore) claimResync(ctx context.Context, table string, now, before time.Time) (from, upTo int64, ok bool, err error) {
	// One witness asks: the one whose update wins.
	var maxSeq int64
	err = s.pool.QueryRow(ctx, s.sql(`UPDATE S.tables SET resync_asked = $2 WHERE table_id = $1 AND contig < max_seq
		AND (resync_asked IS NULL OR resync_asked <= $3) RETURNING contig + 1, max_seq`), table, now, before).Scan(&from, &maxSeq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("floor database: %w", err)
	}
	if err := s.pool.QueryRow(ctx, s.sql(`SELECT coalesce(min(seq), $3) FROM S.rows WHERE table_id = $1 AND seq > $2`), table, from, maxSeq+1).Scan(&upTo); err != nil {
		return 0, 0, false, fmt.Errorf("floor database: %w", err)
	}
	return from, upTo, true, nil
}

func (s *PGStore) markSilent(ctx context.Context, table string, seen time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, s.sql(`UPDATE S.tables SET silent = true WHERE table_id = $1 AND NOT silent AND last_seen = $2`), table, seen)
	if err != nil {
		return false, fmt.Errorf("floor database: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

func (s *PGStore) raise(ctx context.Context, a Alert) (Alert, bool, error) {
	err := s.pool.QueryRow(ctx, s.sql(`INSERT INTO S.alerts (table_id, kind, key, seq, message, tamper, witness, raised_at, resolved_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)
		ON CONFLICT (table_id, kind, key) DO NOTHING RETURNING id`), a.Table, a.Kind, a.key, a.Seq, a.Message, a.Tamper, a.Witness, a.At, a.overAt()).Scan(&a.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, false, nil
	}
	if err != nil {
		return a, false, fmt.Errorf("floor database: alert: %w", err)
	}
	return a, true, nil
}

func (s *PGStore) resolve(ctx context.Context, table string, kind AlertKind, now time.Time) ([]Alert, error) {
	rows, err := s.pool.Query(ctx, s.sql(`UPDATE S.alerts SET resolved_at = $3 WHERE table_id = $1 AND kind = $2 AND resolved_at IS NULL RETURNING id, seq, message`), table, kind, now)
	if err != nil {
		return nil, fmt.Errorf("floor database: %w", err)
	}
	defer rows.Close()
	var out []Alert
	for rows.Next() {
		a := Alert{State: "resolved", Table: table, Kind: kind, At: now, Tamper: Tamper(kind)}
		if err := rows.Scan(&a.ID, &a.Seq, &a.Message); err != nil {
			return nil, fmt.Errorf("floor database: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func (s *PGStore) viewLines(ctx context.Context, since time.Time) ([]viewLine, error) {
	rows, err := s.pool.Query(ctx, s.sql(`SELECT t.table_id, t.contig, t.max_seq, t.last_seen, t.cp_signed_at,
		(SELECT count(*) FROM S.rows r WHERE r.table_id = t.table_id AND r.kind = 'coup_result' AND r.witnessed_at > $1)
		FROM S.tables t`), since)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var lines []viewLine
	for rows.Next() {
		var l viewLine
		if err := rows.Scan(&l.table, &l.contig, &l.max, &l.seen, &l.cp, &l.coups); err != nil {
			return nil, err
		}
		lines = append(lines, l)
	}
	return lines, rows.Err()
}

func (s *PGStore) openAlerts(ctx context.Context) ([]Alert, error) {
	rows, err := s.pool.Query(ctx, s.sql(`SELECT id, table_id, kind, seq, message, tamper, witness, raised_at FROM S.alerts WHERE resolved_at IS NULL ORDER BY id`))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Alert
	for rows.Next() {
		a := Alert{State: "raised"}
		if err := rows.Scan(&a.ID, &a.Table, &a.Kind, &a.Seq, &a.Message, &a.Tamper, &a.Witness, &a.At); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func (s *PGStore) witnessed(ctx context.Context, table string, f func(int64, audit.Hash) error) error {
	rows, err := s.pool.Query(ctx, s.sql(`SELECT seq, hash FROM S.rows WHERE table_id = $1 ORDER BY seq`), table)
	if err != nil {
		return fmt.Errorf("floor database: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var h []byte
		if err := rows.Scan(&seq, &h); err != nil {
			return fmt.Errorf("floor database: %w", err)
		}
		if err := f(seq, toHash(h)); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("floor database: %w", err)
	}
	return nil
}

func (s *PGStore) forkedSeqs(ctx context.Context, table string) (n int64, err error) {
	if err := s.pool.QueryRow(ctx, s.sql(`SELECT count(DISTINCT seq) FROM S.forks WHERE table_id = $1`), table).Scan(&n); err != nil {
		return 0, fmt.Errorf("floor database: %w", err)
	}
	return n, nil
}

func (s *PGStore) tamperAlerts(ctx context.Context, table string) ([]Alert, error) {
	rows, err := s.pool.Query(ctx, s.sql(`SELECT kind, seq FROM S.alerts WHERE table_id = $1 AND tamper ORDER BY id`), table)
	if err != nil {
		return nil, fmt.Errorf("floor database: %w", err)
	}
	defer rows.Close()
	var out []Alert
	for rows.Next() {
		a := Alert{Table: table, Tamper: true}
		if err := rows.Scan(&a.Kind, &a.Seq); err != nil {
			return nil, fmt.Errorf("floor database: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("floor database: %w", err)
	}
	return out, nil
}
