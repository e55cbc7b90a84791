package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
)

// schemaVersion is the trail's PRAGMA user_version of new files. A change
// to the tables, the triggers or the hash encoding is a new version.
// Version 2 (sealed segments) lets a file's chain start after row 1: its
// meta holds base_seq and base_hash, the seq and hash of the row before
// its first (0 and the zero hash for a trail's first file, the sealed
// segment's head for the next), and the append-only trigger links the
// first row to them. Version 1 files (no base: row 1 links to the zero
// hash) are read, verified and written as they are, with their own
// triggers.
const schemaVersion = 2

// The meta keys of a version 2 file's base.
const (
	metaBaseSeq  = "base_seq"
	metaBaseHash = "base_hash"
)

// zeroHashHex is the prev_hash of row 1.
var zeroHashHex = Hash{}.String()

// schemaTables creates the tables. STRICT makes SQLite refuse a value of
// the wrong type even from the sqlite3 shell.
var schemaTables = []schemaObject{
	{"meta", `CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) STRICT`},
	{"events", `CREATE TABLE events (
	seq       INTEGER PRIMARY KEY CHECK (seq >= 1),
	at        TEXT    NOT NULL,
	kind      TEXT    NOT NULL,
	shoe      INTEGER NOT NULL,
	coup      INTEGER NOT NULL,
	body      TEXT    NOT NULL,
	prev_hash TEXT    NOT NULL,
	hash      TEXT    NOT NULL
) STRICT`},
	{"events_shoe_coup", `CREATE INDEX events_shoe_coup ON events (shoe, coup)`},
	{"checkpoints", `CREATE TABLE checkpoints (
	seq       INTEGER PRIMARY KEY CHECK (seq >= 1),
	head_hash TEXT NOT NULL,
	signed_at TEXT NOT NULL,
	key_id    TEXT NOT NULL,
	signature TEXT NOT NULL
) STRICT`},
}

// schemaObject is a table or index: its name in sqlite_schema and the
// statement that creates it.
type schemaObject struct{ name, sql string }

// schemaTriggers are the append-only rules, by name; Verify reports any
// that is missing or differs from this text. The INSERT triggers matter as
// much as the UPDATE and DELETE ones: INSERT OR REPLACE deletes the row it
// replaces without firing a DELETE trigger.
var schemaTriggers = map[string]string{
	"events_append_only": `CREATE TRIGGER events_append_only BEFORE INSERT ON events
WHEN NEW.seq IS NOT coalesce((SELECT max(seq) FROM events), 0) + 1
  OR NEW.prev_hash IS NOT coalesce((SELECT hash FROM events WHERE seq = NEW.seq - 1), '` + zeroHashHex + `')
BEGIN SELECT RAISE(ABORT, 'audit: an event must take the next seq and link to the previous hash'); END`,
	"events_no_update": `CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'audit: events are append-only: UPDATE refused'); END`,
	"events_no_delete": `CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'audit: events are append-only: DELETE refused'); END`,
	"checkpoints_at_event": `CREATE TRIGGER checkpoints_at_event BEFORE INSERT ON checkpoints
WHEN NEW.head_hash IS NOT (SELECT hash FROM events WHERE seq = NEW.seq)
  OR EXISTS (SELECT 1 FROM checkpoints WHERE seq = NEW.seq)
BEGIN SELECT RAISE(ABORT, 'audit: a checkpoint must name an existing row and its hash, once'); END`,
	"checkpoints_no_update": `CREATE TRIGGER checkpoints_no_update BEFORE UPDATE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'audit: checkpoints are append-only: UPDATE refused'); END`,
	"checkpoints_no_delete": `CREATE TRIGGER checkpoints_no_delete BEFORE DELETE ON checkpoints
BEGIN SELECT RAISE(ABORT, 'audit: checkpoints are append-only: DELETE refused'); END`,
	"meta_insert_once": `CREATE TRIGGER meta_insert_once BEFORE INSERT ON meta
WHEN EXISTS (SELECT 1 FROM meta WHERE key = NEW.key)
BEGIN SELECT RAISE(ABORT, 'audit: meta is append-only: key exists'); END`,
	"meta_no_update": `CREATE TRIGGER meta_no_update BEFORE UPDATE ON meta
BEGIN SELECT RAISE(ABORT, 'audit: meta is append-only: UPDATE refused'); END`,
	"meta_no_delete": `CREATE TRIGGER meta_no_delete BEFORE DELETE ON meta
BEGIN SELECT RAISE(ABORT, 'audit: meta is append-only: DELETE refused'); END`,
}

// schemaTriggersV2 are version 2's rules: version 1's, with the first
// row of the file taking base_seq + 1 and linking to base_hash.
var schemaTriggersV2 = func() map[string]string {
	m := maps.Clone(schemaTriggers)
	m["events_append_only"] = `CREATE TRIGGER events_append_only BEFORE INSERT ON events
WHEN NEW.seq IS NOT coalesce((SELECT max(seq) FROM events), (SELECT CAST(value AS INTEGER) FROM meta WHERE key = '` + metaBaseSeq + `')) + 1
  OR NEW.prev_hash IS NOT coalesce((SELECT hash FROM events WHERE seq = NEW.seq - 1), (SELECT value FROM meta WHERE key = '` + metaBaseHash + `'))
BEGIN SELECT RAISE(ABORT, 'audit: an event must take the next seq and link to the previous hash'); END`
	return m
}()

// triggersFor returns the rules of a schema version.
func triggersFor(version int) map[string]string {
	if version == 1 {
		return schemaTriggers
	}
	return schemaTriggersV2
}

// metaTable is the meta key holding the table id.
const metaTable = "table"

// normSQL collapses runs of white space so that a trigger is compared by
// its text, not its layout.
func normSQL(s string) string { return strings.Join(strings.Fields(s), " ") }

// createSchema lays down a new trail inside tx, its chain starting after
// base.
func createSchema(ctx context.Context, tx *sql.Tx, table string, base Head) error {
	return createSchemaVersion(ctx, tx, table, schemaVersion, base)
}

// createSchemaVersion lays down a trail of the given schema version (1 only
// in tests of old files, whose base is row 0).
func createSchemaVersion(ctx context.Context, tx *sql.Tx, table string, version int, base Head) error {
	for _, o := range schemaTables {
		if _, err := tx.ExecContext(ctx, o.sql); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
	}
	triggers := triggersFor(version)
	for _, name := range sortedKeys(triggers) {
		if _, err := tx.ExecContext(ctx, triggers[name]); err != nil {
			return fmt.Errorf("create trigger %s: %w", name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)`, metaTable, table); err != nil {
		return fmt.Errorf("record table id: %w", err)
	}
	if version >= 2 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?), (?, ?)`,
			metaBaseSeq, strconv.FormatInt(base.Seq, 10), metaBaseHash, base.Hash.String()); err != nil {
			return fmt.Errorf("record the chain's base: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", version)); err != nil {
		return fmt.Errorf("set schema version: %w", err)
	}
	return nil
}

// queryer is what *sql.DB, *sql.Conn and *sql.Tx share.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// schemaState reports the trail's user_version and whether it has any
// table at all (a new, empty file has none).
func schemaState(ctx context.Context, q queryer) (version int, empty bool, err error) {
	if err := q.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return 0, false, fmt.Errorf("read schema version: %w", err)
	}
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
		return 0, false, fmt.Errorf("read schema: %w", err)
	}
	return version, n == 0, nil
}

// checkSchema confirms an existing file is a trail this code can read.
func checkSchema(ctx context.Context, q queryer) error {
	v, empty, err := schemaState(ctx, q)
	if err != nil {
		return err
	}
	switch {
	case empty:
		return errEmptyFile
	case v == 0:
		return fmt.Errorf("not an audit trail: schema version 0 and tables of something else")
	case v != 1 && v != schemaVersion:
		return fmt.Errorf("audit trail schema version %d, this build reads 1 and %d", v, schemaVersion)
	}
	return nil
}

// readTableID returns the table id recorded at creation.
func readTableID(ctx context.Context, q queryer) (string, error) {
	var id string
	err := q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, metaTable).Scan(&id)
	if err == sql.ErrNoRows {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read table id: %w", err)
	}
	return id, nil
}

// headQuery reads the last row's seq and hash.
const headQuery = `SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1`

// dbHead reads the last row's seq and hash.
func dbHead(ctx context.Context, q queryer) (Head, error) {
	return scanHead(q.QueryRowContext(ctx, headQuery))
}

// stmtHead is dbHead through a prepared statement.
func stmtHead(ctx context.Context, st *sql.Stmt) (Head, error) {
	return scanHead(st.QueryRowContext(ctx))
}

func scanHead(row *sql.Row) (Head, error) {
	var seq int64
	var hash string
	err := row.Scan(&seq, &hash)
	if err == sql.ErrNoRows {
		return Head{}, nil
	}
	if err != nil {
		return Head{}, fmt.Errorf("read head: %w", err)
	}
	h, err := ParseHash(hash)
	if err != nil {
		return Head{}, fmt.Errorf("head row %d: %w", seq, err)
	}
	return Head{Seq: seq, Hash: h}, nil
}

// readBase returns where a file's chain starts: the row before its first
// (row 0 and the zero hash for a version 1 file). A version 2 file without
// a readable base is an error: its first row cannot be placed.
func readBase(ctx context.Context, q queryer) (Head, error) {
	var v int
	if err := q.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return Head{}, fmt.Errorf("read schema version: %w", err)
	}
	if v < 2 {
		return Head{}, nil
	}
	var seqText, hashText string
	if err := q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, metaBaseSeq).Scan(&seqText); err != nil {
		return Head{}, fmt.Errorf("read %s: %w", metaBaseSeq, err)
	}
	if err := q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, metaBaseHash).Scan(&hashText); err != nil {
		return Head{}, fmt.Errorf("read %s: %w", metaBaseHash, err)
	}
	seq, err := strconv.ParseInt(seqText, 10, 64)
	if err != nil || seq < 0 {
		return Head{}, fmt.Errorf("%s %q is not a seq", metaBaseSeq, seqText)
	}
	h, err := ParseHash(hashText)
	if err != nil {
		return Head{}, fmt.Errorf("%s: %w", metaBaseHash, err)
	}
	if seq == 0 && h != (Hash{}) {
		return Head{}, fmt.Errorf("%s is 0 but %s is not the zero hash", metaBaseSeq, metaBaseHash)
	}
	return Head{Seq: seq, Hash: h}, nil
}

// errEmptyFile is a database file with nothing in it: a trail whose
// creation never committed (a segment cut over when the power went).
var errEmptyFile = errors.New("not an audit trail: the database is empty")
