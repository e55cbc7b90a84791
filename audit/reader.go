package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/url"
	"os"
	"strings"
)

// Reader reads a trail without ever writing to it: the file is opened
// read-only (mode=ro), so it can read a live trail beside the Store, or a
// copy on a surveillance machine.
type Reader struct {
	path  string
	db    *sql.DB
	table string
	base  Head // where the file's chain starts (version 2)
	// baseErr: the meta's base does not read (Verify reports it).
	baseErr error

	// parts are the segments of a trail read as one (OpenTrail): then db
	// is nil and every method reads across them.
	parts []*Reader
}

// OpenReader opens the trail at path read-only and checks it is a trail.
// A directory is a trail of segments (OpenTrail of its segment files), and
// so are files joined by commas ("a.db,b.db"), in that order.
func OpenReader(ctx context.Context, path string) (*Reader, error) {
	fi, err := os.Stat(path)
	if err != nil && strings.Contains(path, ",") {
		return OpenTrail(ctx, strings.Split(path, ",")...)
	}
	if err != nil {
		return nil, fmt.Errorf("open audit trail: %w", err)
	}
	if fi.IsDir() {
		return OpenTrail(ctx, path)
	}
	return openFileReader(ctx, path)
}

// openFileReader opens one trail file read-only.
func openFileReader(ctx context.Context, path string) (*Reader, error) {
	// _mutex=no: database/sql hands a connection to one goroutine at a
	// time, so SQLite's own locking of every call is only cost (about a
	// sixth of reading a row).
	dsn, err := sqliteDSN(path, url.Values{"mode": {"ro"}, "_busy_timeout": {"5000"}, "_mutex": {"no"}})
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("open audit trail %s: %w", path, err)
	}
	r := &Reader{path: path, db: db}
	if err := checkSchema(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("audit trail %s: %w", path, err)
	}
	if r.table, err = readTableID(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("audit trail %s: %w", path, err)
	}
	// A base that does not read is Verify's finding, not a file that
	// cannot be opened: the chain is then checked from row 0.
	r.base, r.baseErr = readBase(ctx, db)
	return r, nil
}

// Close closes the file.
func (r *Reader) Close() error {
	if r.db == nil {
		var errs []error
		for _, p := range r.parts {
			errs = append(errs, p.Close())
		}
		return errors.Join(errs...)
	}
	return r.db.Close()
}

// Base is where the trail's chain starts: the row before its first (row 0
// for a whole trail, a sealed segment's head for the next segment).
func (r *Reader) Base() Head {
	if r.parts != nil {
		return r.parts[0].base
	}
	return r.base
}

// Path returns the trail's file name.
func (r *Reader) Path() string { return r.path }

// Table returns the table id recorded in the trail.
func (r *Reader) Table() string { return r.table }

// Head returns the last row's seq and hash.
func (r *Reader) Head(ctx context.Context) (Head, error) {
	if r.parts != nil {
		return r.parts[len(r.parts)-1].Head(ctx)
	}
	h, err := dbHead(ctx, r.db)
	if err == nil && h.Seq == 0 {
		h = r.base
	}
	return h, err
}

// Query selects rows. The zero Query selects every row.
type Query struct {
	From int64 // first seq; 0 or 1 is the start
	To   int64 // last seq; 0 is the head
	// Shoe and Coup keep only rows with those ids; 0 keeps all. (Rows
	// outside any shoe or coup carry 0 and are kept only by an unset
	// filter.)
	Shoe, Coup int64
	// Kinds keeps only rows of these kinds; empty keeps all.
	Kinds []string
}

func (q Query) sql() (string, []any) {
	var where []string
	var args []any
	if q.From > 1 {
		where = append(where, "seq >= ?")
		args = append(args, q.From)
	}
	if q.To > 0 {
		where = append(where, "seq <= ?")
		args = append(args, q.To)
	}
	if q.Shoe != 0 {
		where = append(where, "shoe = ?")
		args = append(args, q.Shoe)
	}
	if q.Coup != 0 {
		where = append(where, "coup = ?")
		args = append(args, q.Coup)
	}
	if len(q.Kinds) > 0 {
		where = append(where, "kind IN (?"+strings.Repeat(", ?", len(q.Kinds)-1)+")")
		for _, k := range q.Kinds {
			args = append(args, k)
		}
	}
	s := `SELECT seq, at, kind, shoe, coup, body, prev_hash, hash FROM events`
	if len(where) > 0 {
		s += " WHERE " + strings.Join(where, " AND ")
	}
	return s + " ORDER BY seq", args
}

// Events streams the rows q selects in seq order, one at a time, from one
// consistent snapshot of the file. A row that cannot be decoded ends the
// stream with an error; Events does not check hashes (Verify does), so
// code rebuilding state verifies the trail first.
func (r *Reader) Events(ctx context.Context, q Query) iter.Seq2[Record, error] {
	if r.parts != nil {
		return partsEvents(ctx, r.parts, q)
	}
	return func(yield func(Record, error) bool) {
		query, args := q.sql()
		rows, err := r.db.QueryContext(ctx, query, args...)
		if err != nil {
			yield(Record{}, fmt.Errorf("read audit trail %s: %w", r.path, err))
			return
		}
		defer rows.Close()
		for rows.Next() {
			rec, err := scanRecord(rows)
			if err != nil {
				yield(Record{}, fmt.Errorf("read audit trail %s: %w", r.path, err))
				return
			}
			if !yield(rec, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(Record{}, fmt.Errorf("read audit trail %s: %w", r.path, err))
		}
	}
}

func scanRecord(rows *sql.Rows) (Record, error) {
	var (
		rec            Record
		at, prev, hash string
		body           []byte
	)
	if err := rows.Scan(&rec.Seq, &at, &rec.Kind, &rec.Shoe, &rec.Coup, &body, &prev, &hash); err != nil {
		return Record{}, fmt.Errorf("row: %w", err)
	}
	var err error
	if rec.At, err = parseTime(at); err != nil {
		return Record{}, fmt.Errorf("row %d: %w", rec.Seq, err)
	}
	if rec.PrevHash, err = ParseHash(prev); err != nil {
		return Record{}, fmt.Errorf("row %d prev_hash: %w", rec.Seq, err)
	}
	if rec.Hash, err = ParseHash(hash); err != nil {
		return Record{}, fmt.Errorf("row %d hash: %w", rec.Seq, err)
	}
	rec.Body = body
	return rec, nil
}

// Checkpoints returns the stored checkpoints in seq order.
func (r *Reader) Checkpoints(ctx context.Context) ([]Checkpoint, error) {
	if r.parts != nil {
		var all []Checkpoint
		for _, p := range r.parts {
			cps, err := p.Checkpoints(ctx)
			if err != nil {
				return nil, err
			}
			all = append(all, cps...)
		}
		return all, nil
	}
	cps, bad, err := readCheckpoints(ctx, r.db, r.table)
	if err != nil {
		return nil, fmt.Errorf("audit trail %s: %w", r.path, err)
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("audit trail %s: checkpoint seq %d: %s", r.path, bad[0].Seq, bad[0].Detail)
	}
	return cps, nil
}

// LastCheckpoint returns the newest stored checkpoint; ok is false if there
// is none.
func (r *Reader) LastCheckpoint(ctx context.Context) (c Checkpoint, ok bool, err error) {
	cps, err := r.Checkpoints(ctx)
	if err != nil || len(cps) == 0 {
		return Checkpoint{}, false, err
	}
	return cps[len(cps)-1], true, nil
}

// readCheckpoints reads the checkpoints table; rows that do not parse come
// back as malformed findings rather than errors, for Verify.
func readCheckpoints(ctx context.Context, q queryer, table string) ([]Checkpoint, []Finding, error) {
	return readCheckpointsFrom(ctx, q, table, 0)
}

func decodeCheckpointRow(table string, seq, head, at, keyID, sig any) (Checkpoint, error) {
	c := Checkpoint{Table: table}
	var ok bool
	if c.Seq, ok = seq.(int64); !ok {
		return c, fmt.Errorf("seq is %T, not an integer", seq)
	}
	var err error
	if c.HeadHash, err = ParseHash(asText(head)); err != nil {
		return c, err
	}
	if c.SignedAt, err = parseTime(asText(at)); err != nil {
		return c, err
	}
	c.KeyID = asText(keyID)
	if err := checkKeyID(c.KeyID); err != nil {
		return c, err
	}
	if c.Signature, err = parseSignature(asText(sig)); err != nil {
		return c, err
	}
	return c, nil
}

// asText renders a column value as text, whatever SQLite stored.
func asText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// Export writes the rows q selects as JSON lines, one Record per line:
// {"seq":1,"at":"...","kind":"...","shoe":1,"coup":2,"body":{...},
// "prev_hash":"...","hash":"..."}. The body is the stored canonical JSON,
// byte for byte, so each line's hash can be recomputed from it. Export
// returns the number of rows written.
func (r *Reader) Export(ctx context.Context, w io.Writer, q Query) (int64, error) {
	return exportRows(r.Events(ctx, q), w)
}

// exportRows writes rows as Export does.
func exportRows(rows iter.Seq2[Record, error], w io.Writer) (int64, error) {
	enc := json.NewEncoder(w)
	// Keep '<', '>' and '&' in bodies as stored: the hash covers them.
	enc.SetEscapeHTML(false)
	var n int64
	for rec, err := range rows {
		if err != nil {
			return n, err
		}
		if err := enc.Encode(rec); err != nil {
			return n, fmt.Errorf("export row %d: %w", rec.Seq, err)
		}
		n++
	}
	return n, nil
}
