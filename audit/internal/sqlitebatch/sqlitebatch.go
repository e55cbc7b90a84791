// Package sqlitebatch reads a query's rows on a go-sqlite3 connection in
// batches, SQLite's C API copying each value straight into one reused
// buffer: one cgo call for many rows, and no Go allocation per value.
//
// Why it exists: `audit verify` reads every row of a trail, and through
// the driver each row cost a cgo call and, for its eight values, five
// strings and eight interface values made on the heap, then collected.
// That conversion and the collector's work were about half of verify's CPU
// (docs/benchmarks.md, issue 16). Here the values stay bytes in a buffer
// the caller reads before the next batch overwrites it.
//
// The statement runs on the connection database/sql handed out (the
// caller holds it with sql.Conn.Raw), so inside whatever transaction is
// open there: the same snapshot as the caller's other reads. The driver
// keeps that connection's sqlite3 handle unexported and offers no call
// that gives it; Prepare reaches it by reflection, never guessing: where
// the connection is not go-sqlite3's or its type has changed shape, it
// falls back, by itself, to the plain path (plain.go): the same query read
// through the driver's exported API (driver.Conn's statement and
// driver.Rows), encoded into the same batches, so callers read both alike
// and only speed differs (docs/benchmarks.md has both). A warning is
// logged once when the fallback is taken. SQLite's functions are declared
// below by hand, as sqlite3.h declares them (their ABI is stable across
// SQLite 3), and resolve to the SQLite go-sqlite3 compiles into the
// binary; tests force the fallback and hold both paths to the driver's
// own reading.
//
// Values arrive as SQLite stores them, whatever a column's declared type:
// a hostile file's wrong types are seen as such, never converted.
package sqlitebatch

/*
#include <stdint.h>
#include <string.h>
#include <stdlib.h>

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
int sqlite3_prepare_v2(sqlite3*, const char*, int, sqlite3_stmt**, const char**);
int sqlite3_step(sqlite3_stmt*);
int sqlite3_reset(sqlite3_stmt*);
int sqlite3_clear_bindings(sqlite3_stmt*);
int sqlite3_finalize(sqlite3_stmt*);
int sqlite3_bind_int64(sqlite3_stmt*, int, long long);
int sqlite3_bind_parameter_count(sqlite3_stmt*);
int sqlite3_column_count(sqlite3_stmt*);
typedef struct sqlite3_value sqlite3_value;
sqlite3_value *sqlite3_column_value(sqlite3_stmt*, int);
int sqlite3_value_type(sqlite3_value*);
long long sqlite3_value_int64(sqlite3_value*);
double sqlite3_value_double(sqlite3_value*);
const unsigned char *sqlite3_value_text(sqlite3_value*);
const void *sqlite3_value_blob(sqlite3_value*);
int sqlite3_value_bytes(sqlite3_value*);
const char *sqlite3_errmsg(sqlite3*);
const char *sqlite3_errstr(int);
sqlite3 *sqlite3_db_handle(sqlite3_stmt*);

enum { TB_ROW = 100, TB_DONE = 101, TB_INTEGER = 1, TB_FLOAT = 2, TB_TEXT = 3, TB_BLOB = 4, TB_NULL = 5 };

// TB_FULL: the row the statement stands on does not fit in an empty
// buffer; *need says how many bytes it takes.
#define TB_FULL (-1)

// tb_size is the bytes the current row takes in the encoding tb_fill
// writes: per column its type, then 8 bytes for a number, or a 4-byte
// length and the bytes for a text or a blob.
static int64_t tb_size(sqlite3_stmt *st, int ncol) {
	int64_t n = 0;
	for (int i = 0; i < ncol; i++) {
		n++;
		sqlite3_value *cv = sqlite3_column_value(st, i);
		int t = sqlite3_value_type(cv);
		switch (t) {
		case TB_INTEGER:
		case TB_FLOAT:
			n += 8;
			break;
		case TB_TEXT:
		case TB_BLOB:
			// The value in its form first, then its length (a text's in UTF-8).
			if (t == TB_TEXT) {
				sqlite3_value_text(cv);
			} else {
				sqlite3_value_blob(cv);
			}
			n += 4 + (int64_t)sqlite3_value_bytes(cv);
			break;
		}
	}
	return n;
}

static unsigned char *tb_put32(unsigned char *p, uint32_t v) {
	memcpy(p, &v, 4);
	return p + 4;
}

// tb_fill steps st and copies its rows into buf until the buffer cannot
// take the next row, maxrows are in, or the statement is done. *pending
// says the statement stands on a row not yet copied (a row that did not
// fit waits for the next call). It returns TB_ROW when the batch ended
// with rows to come, TB_DONE, TB_FULL, or SQLite's error code.
static int tb_fill(sqlite3_stmt *st, int ncol, unsigned char *buf, int64_t cap, int maxrows,
		int *pending, int *nrows, int64_t *used, int64_t *need) {
	int n = 0;
	int64_t off = 0;
	*nrows = 0;
	*used = 0;
	for (;;) {
		if (!*pending) {
			if (n == maxrows) {
				*nrows = n;
				*used = off;
				return TB_ROW;
			}
			int rc = sqlite3_step(st);
			if (rc != TB_ROW) {
				*nrows = n;
				*used = off;
				return rc;
			}
			*pending = 1;
		}
		// One pass, each value asked for once: a row that does not fit is
		// abandoned where it stood and waits for the next call (or, in an
		// empty buffer, is measured for a bigger one).
		unsigned char *p = buf + off, *end = buf + cap;
		int fits = 1;
		for (int i = 0; i < ncol && fits; i++) {
			// The column's value once, then its parts: each sqlite3_column_*
			// call looks the column up again and calls the connection's mutex
			// enter and leave (no-ops on a _mutex=no connection, but calls):
			// a sixth of verify's CPU (docs/benchmarks.md). The value is what
			// SQLite calls unprotected, read without the connection's mutex;
			// that is safe because only the goroutine holding the connection
			// (sql.Conn.Raw) touches it.
			sqlite3_value *cv = sqlite3_column_value(st, i);
			int t = sqlite3_value_type(cv);
			switch (t) {
			case TB_INTEGER:
			case TB_FLOAT: {
				if (end - p < 9) {
					fits = 0;
					break;
				}
				*p++ = (unsigned char)t;
				if (t == TB_INTEGER) {
					long long v = sqlite3_value_int64(cv);
					memcpy(p, &v, 8);
				} else {
					double v = sqlite3_value_double(cv);
					memcpy(p, &v, 8);
				}
				p += 8;
				break;
			}
			case TB_TEXT:
			case TB_BLOB: {
				// As in tb_size: the value in its form, then its length.
				const void *s = t == TB_TEXT ? (const void *)sqlite3_value_text(cv) : sqlite3_value_blob(cv);
				int k = sqlite3_value_bytes(cv);
				if (end - p < 5 + (int64_t)k) {
					fits = 0;
					break;
				}
				*p++ = (unsigned char)t;
				p = tb_put32(p, (uint32_t)k);
				if (k > 0) {
					memcpy(p, s, k);
				}
				p += k;
				break;
			}
			default:
				if (end - p < 1) {
					fits = 0;
					break;
				}
				*p++ = (unsigned char)t;
			}
		}
		if (!fits) {
			*nrows = n;
			*used = off;
			if (n > 0) {
				return TB_ROW;
			}
			*need = tb_size(st, ncol);
			return TB_FULL;
		}
		off = p - buf;
		n++;
		*pending = 0;
	}
}

// tb_reset readies st for new bindings.
static int tb_reset(sqlite3_stmt *st) {
	int rc = sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc;
}
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync/atomic"
	"unsafe"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// Type is a value's storage class, as SQLite numbers them.
type Type uint8

// The storage classes.
const (
	Integer Type = C.TB_INTEGER
	Float   Type = C.TB_FLOAT
	Text    Type = C.TB_TEXT
	Blob    Type = C.TB_BLOB
	Null    Type = C.TB_NULL
)

// Value is one value of a row. Bytes (a text's or a blob's) is a view of
// the batch's buffer: valid until the next call to Next.
type Value struct {
	Type  Type
	Int   int64
	Float float64
	Bytes []byte
}

// Any returns v as go-sqlite3 returns a value of a column declared TEXT,
// INTEGER or BLOB (not a time): int64, float64, string, []byte or nil,
// copied out of the buffer.
func (v Value) Any() any {
	switch v.Type {
	case Integer:
		return v.Int
	case Float:
		return v.Float
	case Text:
		return string(v.Bytes)
	case Blob:
		return append([]byte{}, v.Bytes...)
	}
	return nil
}

// maxRowBytes bounds the buffer one row may grow it to: SQLite's own
// limit on a value is 1e9 bytes by default, and a row of several such is
// not a trail's.
const maxRowBytes = 1 << 31

// Stmt is a prepared statement on a connection, read in batches. It is
// not safe for concurrent use, and must be closed before the connection
// is handed back.
type Stmt struct {
	plain   *plainStmt // the fallback, when the handle could not be had
	db      *C.sqlite3
	st      *C.sqlite3_stmt
	ncol    int
	pending C.int
	done    bool
	buf     []byte
	max     int
}

// ErrNoHandle means the connection is not go-sqlite3's, or its type no
// longer holds the handle where this package looks.
var ErrNoHandle = errors.New("sqlitebatch: no sqlite3 handle on this connection")

// handle returns the sqlite3 handle of dc, the driver connection
// sql.Conn.Raw hands out.
func handle(dc any) (*C.sqlite3, error) {
	c, ok := dc.(*sqlite3.SQLiteConn)
	if !ok || c == nil {
		return nil, fmt.Errorf("%w: %T", ErrNoHandle, dc)
	}
	f := reflect.ValueOf(c).Elem().FieldByName("db")
	if !f.IsValid() || f.Kind() != reflect.Pointer || !strings.HasSuffix(f.Type().Elem().Name(), "sqlite3") {
		return nil, fmt.Errorf("%w: go-sqlite3's SQLiteConn has no db *sqlite3 field", ErrNoHandle)
	}
	p := f.UnsafePointer()
	if p == nil {
		return nil, fmt.Errorf("%w: the connection is closed", ErrNoHandle)
	}
	return (*C.sqlite3)(p), nil
}

// Prepare prepares query on dc, the driver connection sql.Conn.Raw hands
// out, to read at most maxRows rows a batch into a buffer of bufBytes
// (grown when one row does not fit).
func Prepare(dc any, query string, maxRows, bufBytes int) (*Stmt, error) {
	db, err := handle(dc)
	if err == nil && forcePlain.Load() {
		err = fmt.Errorf("%w: the plain path forced (a test)", ErrNoHandle)
	}
	if err != nil {
		p, perr := preparePlain(dc, query, maxRows, bufBytes, err)
		if perr != nil {
			return nil, fmt.Errorf("%w; the plain path: %w", err, perr)
		}
		return &Stmt{plain: p, ncol: p.ncol}, nil
	}
	q := C.CString(query)
	defer C.free(unsafe.Pointer(q))
	var st *C.sqlite3_stmt
	if rc := C.sqlite3_prepare_v2(db, q, -1, &st, nil); rc != 0 {
		return nil, fmt.Errorf("sqlitebatch: prepare: %s", C.GoString(C.sqlite3_errmsg(db)))
	}
	if st == nil {
		return nil, errors.New("sqlitebatch: prepare: no statement in the query")
	}
	return &Stmt{db: db, st: st, ncol: int(C.sqlite3_column_count(st)), buf: make([]byte, max(bufBytes, 64)), max: max(maxRows, 1)}, nil
}

// Columns returns how many values each row has.
func (s *Stmt) Columns() int { return s.ncol }

// Fast reports whether the statement reads through SQLite's C API (else
// through the driver's API, the fallback).
func (s *Stmt) Fast() bool { return s.plain == nil }

// forcePlain makes Prepare take the fallback; tests set it (ForcePlain).
var forcePlain atomic.Bool

// ForcePlain makes every Prepare take the plain path until the returned
// function is called: for tests of callers, to hold the fallback to the
// fast path on a real driver.
func ForcePlain() (restore func()) {
	forcePlain.Store(true)
	return func() { forcePlain.Store(false) }
}

// Run resets the statement and binds args to its parameters in order,
// ready for Next.
func (s *Stmt) Run(args ...int64) error {
	if s.plain != nil {
		return s.plain.run(args)
	}
	C.tb_reset(s.st)
	s.pending, s.done = 0, false
	if n := int(C.sqlite3_bind_parameter_count(s.st)); n != len(args) {
		return fmt.Errorf("sqlitebatch: %d arguments for %d parameters", len(args), n)
	}
	for i, a := range args {
		if rc := C.sqlite3_bind_int64(s.st, C.int(i+1), C.longlong(a)); rc != 0 {
			return fmt.Errorf("sqlitebatch: bind %d: %s", i+1, C.GoString(C.sqlite3_errmsg(s.db)))
		}
	}
	return nil
}

// Next reads the next batch: at least one row unless the statement is
// done (then an empty batch, ok false). The batch's bytes are valid until
// the next call.
func (s *Stmt) Next() (b Batch, ok bool, err error) {
	if s.plain != nil {
		return s.plain.next()
	}
	if s.done {
		return Batch{}, false, nil
	}
	for {
		var nrows C.int
		var used, need C.int64_t
		rc := C.tb_fill(s.st, C.int(s.ncol), (*C.uchar)(unsafe.Pointer(&s.buf[0])), C.int64_t(len(s.buf)), C.int(s.max),
			&s.pending, &nrows, &used, &need)
		switch rc {
		case C.TB_FULL:
			if need > maxRowBytes {
				s.done = true
				return Batch{}, false, fmt.Errorf("sqlitebatch: a row of %d bytes", int64(need))
			}
			s.buf = make([]byte, int(need))
			continue
		case C.TB_ROW:
		case C.TB_DONE:
			s.done = true
		default:
			s.done = true
			return Batch{}, false, fmt.Errorf("sqlitebatch: step: %s (%s)", C.GoString(C.sqlite3_errmsg(s.db)), C.GoString(C.sqlite3_errstr(rc)))
		}
		if nrows == 0 {
			return Batch{}, false, nil
		}
		return Batch{buf: s.buf[:int(used)], rows: int(nrows), ncol: s.ncol}, true, nil
	}
}

// Close finalizes the statement.
func (s *Stmt) Close() error {
	if s.plain != nil {
		return s.plain.close()
	}
	if s.st == nil {
		return nil
	}
	C.sqlite3_finalize(s.st)
	s.st = nil
	return nil
}

// Batch is rows as tb_fill encoded them.
type Batch struct {
	buf  []byte
	rows int
	ncol int
}

// Rows returns how many rows the batch holds.
func (b Batch) Rows() int { return b.rows }

// Row decodes the row starting at off into vals (Columns long) and
// returns where the next row starts. Rows are read in order from 0.
func (b Batch) Row(off int, vals []Value) int {
	p := b.buf[off:]
	for i := range b.ncol {
		v := &vals[i]
		v.Type = Type(p[0])
		p = p[1:]
		switch v.Type {
		case Integer:
			v.Int, v.Bytes = int64(binary.NativeEndian.Uint64(p)), nil
			p = p[8:]
		case Float:
			v.Float, v.Bytes = math.Float64frombits(binary.NativeEndian.Uint64(p)), nil
			p = p[8:]
		case Text, Blob:
			n := binary.NativeEndian.Uint32(p)
			v.Bytes = p[4 : 4+n : 4+n]
			p = p[4+n:]
		default:
			v.Bytes = nil
		}
	}
	return len(b.buf) - len(p)
}
