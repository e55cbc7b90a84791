package floor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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
	case AlertGap, AlertSilent, AlertUnregistered:
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
}

// Store is the floor's PostgreSQL database: one schema holding every
// witnessed row, fork, checkpoint, alert and each table's head.
type Store struct {
	pool   *pgxpool.Pool
	schema string // quoted
	name   string // unquoted
}

// OpenStore uses pool and the schema name (created when missing, with its
// tables: docs/floor.md).
func OpenStore(ctx context.Context, pool *pgxpool.Pool, schema string) (*Store, error) {
	if schema == "" {
		schema = "floor"
	}
	s := &Store{pool: pool, schema: pgx.Identifier{schema}.Sanitize(), name: schema}
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
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Schema is the store's schema name, quoted for SQL.
func (s *Store) Schema() string { return s.schema }

// sql replaces "S." in q with the schema.
func (s *Store) sql(q string) string { return strings.ReplaceAll(q, "S.", s.schema+".") }

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

// apply stores one batch in one transaction and returns the alerts it
// raised and resolved (to publish once committed). Every table of the
// batch is locked for the transaction, in name order, so two witnesses
// never judge one table's rows at once and never deadlock.
func (s *Store) apply(ctx context.Context, items []item, reg *Registry, witness string, now time.Time) ([]Alert, error) {
	byTable := map[string][]item{}
	for _, it := range items {
		byTable[it.table] = append(byTable[it.table], it)
	}
	tables := make([]string, 0, len(byTable))
	for t := range byTable {
		tables = append(tables, t)
	}
	slices.Sort(tables)

	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return nil, fmt.Errorf("floor database: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))

	// Read: each table's lock, line, the rows around the batch's rows and
	// the checkpoints around the batch's checkpoints, in one round trip.
	rd := &pgx.Batch{}
	for _, t := range tables {
		rd.Queue(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, s.name+"/"+t)
		rd.Queue(s.sql(`SELECT contig, max_seq, silent, cp_seq, cp_signed_at, hole_since, last_seen, resync_asked FROM S.tables WHERE table_id = $1`), t)
		var seqs, cpSeqs, cpNs []int64
		for _, it := range byTable[t] {
			if it.row != nil {
				seqs = append(seqs, it.row.Seq-1, it.row.Seq, it.row.Seq+1)
				cpSeqs = append(cpSeqs, it.row.Seq)
			}
			if it.cp != nil {
				seqs = append(seqs, it.cp.Seq)
				cpSeqs = append(cpSeqs, it.cp.Seq)
				cpNs = append(cpNs, it.cp.SignedAt.UnixNano())
			}
		}
		rd.Queue(s.sql(`SELECT seq, prev_hash, hash FROM S.rows WHERE table_id = $1 AND seq = ANY($2)`), t, seqs)
		rd.Queue(s.sql(`SELECT seq, head_hash, signed_ns FROM S.checkpoints WHERE table_id = $1 AND seq = ANY($2)`), t, cpSeqs)
		rd.Queue(s.sql(`SELECT DISTINCT seq FROM S.forks WHERE table_id = $1 AND seq = ANY($2)`), t, seqs)
		rd.Queue(s.sql(`SELECT p.seq, p.head_hash, p.signed_ns FROM unnest($2::bigint[]) AS t(ns),
			LATERAL (SELECT seq, head_hash, signed_ns FROM S.checkpoints c WHERE c.table_id = $1 AND c.signed_ns < t.ns ORDER BY signed_ns DESC LIMIT 1) p
			UNION
			SELECT n.seq, n.head_hash, n.signed_ns FROM unnest($2::bigint[]) AS t(ns),
			LATERAL (SELECT seq, head_hash, signed_ns FROM S.checkpoints c WHERE c.table_id = $1 AND c.signed_ns > t.ns ORDER BY signed_ns LIMIT 1) n`), t, cpNs)
	}
	type read struct {
		st       tableState
		rows     map[int64]neighbour
		forkAt   map[int64]bool
		cpsAt    map[int64][]cpRef
		cpsAside []cpRef
	}
	reads := make([]read, len(tables))
	br := tx.SendBatch(ctx, rd)
	for i := range tables {
		r := &reads[i]
		r.rows, r.cpsAt, r.forkAt = map[int64]neighbour{}, map[int64][]cpRef{}, map[int64]bool{}
		if _, err := br.Exec(); err != nil {
			br.Close()
			return nil, fmt.Errorf("floor database: lock %s: %w", tables[i], err)
		}
		err := br.QueryRow().Scan(&r.st.contig, &r.st.max, &r.st.silent, &r.st.cpSeq, &r.st.cpSignedAt, &r.st.holeSince, &r.st.lastSeen, &r.st.resyncAsked)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			br.Close()
			return nil, fmt.Errorf("floor database: table %s: %w", tables[i], err)
		default:
			r.st.known = true
		}
		rows, err := br.Query()
		if err != nil {
			br.Close()
			return nil, fmt.Errorf("floor database: rows of %s: %w", tables[i], err)
		}
		for rows.Next() {
			var seq int64
			var prev, hash []byte
			if err := rows.Scan(&seq, &prev, &hash); err != nil {
				rows.Close()
				br.Close()
				return nil, fmt.Errorf("floor database: rows of %s: %w", tables[i], err)
			}
			r.rows[seq] = neighbour{prev: toHash(prev), hash: toHash(hash)}
		}
		rows.Close()
		for q := 0; q < 3; q++ {
			rows, err := br.Query()
			if err != nil {
				br.Close()
				return nil, fmt.Errorf("floor database: checkpoints of %s: %w", tables[i], err)
			}
			for q == 1 && rows.Next() {
				var seq int64
				if err := rows.Scan(&seq); err != nil {
					rows.Close()
					br.Close()
					return nil, fmt.Errorf("floor database: forks of %s: %w", tables[i], err)
				}
				r.forkAt[seq] = true
			}
			for rows.Next() {
				var c cpRef
				var head []byte
				if err := rows.Scan(&c.seq, &head, &c.ns); err != nil {
					rows.Close()
					br.Close()
					return nil, fmt.Errorf("floor database: checkpoints of %s: %w", tables[i], err)
				}
				c.head = toHash(head)
				if q == 0 {
					r.cpsAt[c.seq] = append(r.cpsAt[c.seq], c)
				} else {
					r.cpsAside = append(r.cpsAside, c)
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				br.Close()
				return nil, fmt.Errorf("floor database: checkpoints of %s: %w", tables[i], err)
			}
		}
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("floor database: read: %w", err)
	}

	// Judge, in memory, then write in one round trip.
	wr := &pgx.Batch{}
	var alerts []Alert
	raise := func(table, kind, key string, seq int64, msg string) {
		alerts = append(alerts, Alert{State: "raised", Table: table, Kind: kind, Seq: seq, Message: msg, Tamper: Tamper(kind), Witness: witness, At: now, key: key})
	}
	var resolveSilent []string
	for i, t := range tables {
		r := &reads[i]
		st := r.st
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
				if verified[k] && c.Seq >= st.cpSeq {
					st.cpSeq, st.cpSignedAt = c.Seq, &c.SignedAt
				}
			}
			wr.Queue(s.sql(`INSERT INTO S.checkpoints (table_id, seq, head_hash, signed_at, signed_ns, key_id, signature, verified, witnessed_at)
				SELECT $1, *, $9 FROM unnest($2::bigint[], $3::bytea[], $4::text[], $5::bigint[], $6::text[], $7::bytea[], $8::boolean[]) ON CONFLICT DO NOTHING`),
				t, seq, head, at, ns, kid, sig, verified, now)
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
		var holeSince any = st.holeSince
		if contig >= maxSeq {
			holeSince = nil
		} else if st.holeSince == nil {
			holeSince = now
		}
		wr.Queue(s.sql(`INSERT INTO S.tables (table_id, contig, max_seq, last_seen, hole_since, silent, cp_seq, cp_signed_at) VALUES ($1,$2,$3,$4,$5,false,$6,$7)
			ON CONFLICT (table_id) DO UPDATE SET contig = excluded.contig, max_seq = excluded.max_seq, last_seen = GREATEST(S.tables.last_seen, excluded.last_seen),
			hole_since = excluded.hole_since, cp_seq = excluded.cp_seq, cp_signed_at = excluded.cp_signed_at,
			silent = S.tables.silent AND excluded.last_seen <= S.tables.last_seen`),
			t, contig, maxSeq, seenAt, holeSince, st.cpSeq, st.cpSignedAt)
		if rescan {
			// A hole was filled below rows witnessed earlier: walk up to the
			// next hole.
			wr.Queue(s.sql(`UPDATE S.tables SET contig = coalesce((SELECT min(r.seq) FROM S.rows r WHERE r.table_id = $1 AND r.seq >= $2
				AND NOT EXISTS (SELECT 1 FROM S.rows n WHERE n.table_id = $1 AND n.seq = r.seq + 1)), contig),
				hole_since = CASE WHEN max_seq <= coalesce((SELECT min(r.seq) FROM S.rows r WHERE r.table_id = $1 AND r.seq >= $2
				AND NOT EXISTS (SELECT 1 FROM S.rows n WHERE n.table_id = $1 AND n.seq = r.seq + 1)), contig) THEN NULL ELSE hole_since END
				WHERE table_id = $1`), t, contig)
		}
		// A message stored before the silence (a redelivery) does not end
		// it; one the table sent since does.
		if st.silent && (st.lastSeen == nil || seenAt.After(*st.lastSeen)) {
			resolveSilent = append(resolveSilent, t)
		}
	}
	// Alerts: stored once (the key makes a second witness's copy of the
	// same alert a no-op), published by whoever stored it.
	nAlerts := len(alerts)
	for _, a := range alerts {
		wr.Queue(s.sql(`INSERT INTO S.alerts (table_id, kind, key, seq, message, tamper, witness, raised_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)
			ON CONFLICT (table_id, kind, key) DO NOTHING RETURNING id`), a.Table, a.Kind, a.key, a.Seq, a.Message, a.Tamper, a.Witness, a.At)
	}
	for _, t := range resolveSilent {
		wr.Queue(s.sql(`UPDATE S.alerts SET resolved_at = $2 WHERE table_id = $1 AND kind = 'silent' AND resolved_at IS NULL RETURNING id, seq, message`), t, now)
	}
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
		out = append(out, a)
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
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("floor database: commit: %w", err)
	}
	return out, nil
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
func (s *Store) Take(ctx context.Context, reg *Registry, witness string, rows []Row, cps []audit.Checkpoint) ([]Alert, error) {
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
