package sqlitebatch

import (
	"context"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"
)

// plainStmt is the fallback: the same query read through the driver's
// exported API (driver.Conn's prepared statement and driver.Rows, on the
// connection sql.Conn.Raw hands out, so in its transaction), each row
// encoded into the buffer as tb_fill encodes it, so Batch reads both the
// same. It is slower (a cgo call and the driver's values per row) but
// needs nothing of the driver's insides.
type plainStmt struct {
	st      driver.Stmt
	ncol    int
	rows    driver.Rows
	dest    []driver.Value
	pending bool // dest holds a row that did not fit the last batch
	done    bool
	buf     []byte
	max     int
}

// warnPlain says once per process that the fast path is not taken.
var warnPlain sync.Once

func preparePlain(dc any, query string, maxRows, bufBytes int, why error) (*plainStmt, error) {
	// go-sqlite3 hands back a statement for no statement at all, and
	// crashes running it.
	if strings.TrimSpace(query) == "" {
		return nil, errors.New("sqlitebatch: prepare: no statement in the query")
	}
	conn, ok := dc.(driver.Conn)
	if !ok {
		return nil, fmt.Errorf("sqlitebatch: %T is not a database/sql driver connection", dc)
	}
	st, err := conn.Prepare(query)
	if err != nil {
		return nil, fmt.Errorf("sqlitebatch: prepare: %w", err)
	}
	p := &plainStmt{st: st, buf: make([]byte, max(bufBytes, 64)), max: max(maxRows, 1)}
	// The driver tells a statement's columns only once it runs, and runs
	// its first step then: the columns are read off the query wrapped to
	// give no rows, its parameters NULL.
	probe, err := conn.Prepare("SELECT * FROM (" + query + ") LIMIT 0")
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("sqlitebatch: prepare: %w", err)
	}
	defer probe.Close()
	rows, err := (&plainStmt{st: probe}).query(make([]int64, max(probe.NumInput(), 0)), true)
	if err != nil {
		st.Close()
		return nil, err
	}
	p.ncol = len(rows.Columns())
	rows.Close()
	warnPlain.Do(func() {
		slog.Warn("sqlitebatch: reading rows through the driver's API, the slower way", "why", why.Error())
	})
	return p, nil
}

// query runs the statement with args bound (as NULL when null).
func (p *plainStmt) query(args []int64, null bool) (driver.Rows, error) {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1}
		if !null {
			nv[i].Value = a
		}
	}
	q, ok := p.st.(driver.StmtQueryContext)
	if !ok {
		return nil, fmt.Errorf("sqlitebatch: the driver's %T cannot query with a context", p.st)
	}
	rows, err := q.QueryContext(context.Background(), nv)
	if err != nil {
		return nil, fmt.Errorf("sqlitebatch: query: %w", err)
	}
	return rows, nil
}

func (p *plainStmt) run(args []int64) error {
	p.closeRows()
	p.pending, p.done = false, false
	if n := p.st.NumInput(); n >= 0 && n != len(args) {
		return fmt.Errorf("sqlitebatch: %d arguments for %d parameters", len(args), n)
	}
	rows, err := p.query(args, false)
	if err != nil {
		return err
	}
	p.rows = rows
	p.dest = make([]driver.Value, p.ncol)
	return nil
}

func (p *plainStmt) closeRows() {
	if p.rows != nil {
		p.rows.Close()
		p.rows = nil
	}
}

func (p *plainStmt) next() (Batch, bool, error) {
	if p.done || p.rows == nil {
		return Batch{}, false, nil
	}
	off, n := 0, 0
	for n < p.max {
		if !p.pending {
			err := p.rows.Next(p.dest)
			if errors.Is(err, io.EOF) {
				p.done = true
				break
			}
			if err != nil {
				p.done = true
				return Batch{}, false, fmt.Errorf("sqlitebatch: step: %w", err)
			}
			p.pending = true
		}
		need, err := encodedSize(p.dest)
		if err != nil {
			p.done = true
			return Batch{}, false, err
		}
		if off+need > len(p.buf) {
			if n > 0 {
				break // the row waits for the next batch
			}
			if need > maxRowBytes {
				p.done = true
				return Batch{}, false, fmt.Errorf("sqlitebatch: a row of %d bytes", need)
			}
			p.buf = make([]byte, need)
		}
		off = encodeRow(p.buf, off, p.dest)
		n++
		p.pending = false
	}
	if n == 0 {
		return Batch{}, false, nil
	}
	return Batch{buf: p.buf[:off], rows: n, ncol: p.ncol}, true, nil
}

func (p *plainStmt) close() error {
	p.closeRows()
	return p.st.Close()
}

// encodedSize is the bytes a row takes in tb_fill's encoding.
func encodedSize(vals []driver.Value) (int, error) {
	n := 0
	for _, v := range vals {
		n++
		switch v := v.(type) {
		case int64, float64, bool:
			n += 8
		case string:
			n += 4 + len(v)
		case []byte:
			n += 4 + len(v)
		case time.Time:
			n += 4 + len(v.Format(time.RFC3339Nano))
		case nil:
		default:
			return 0, fmt.Errorf("sqlitebatch: the driver gave a %T", v)
		}
	}
	return n, nil
}

// encodeRow writes vals at buf[off:] as tb_fill does and returns the end.
// The driver's values stand for SQLite's storage classes: int64 (and a
// column declared boolean's bool) an integer, float64 a float, string a
// text, []byte a blob, nil a null. A time (a column declared as one) is
// text in RFC 3339 form, not the bytes stored: no table of ours declares
// one.
func encodeRow(buf []byte, off int, vals []driver.Value) int {
	p := buf[off:]
	put := func(t Type, b []byte) {
		p[0] = byte(t)
		binary.NativeEndian.PutUint32(p[1:], uint32(len(b)))
		copy(p[5:], b)
		p = p[5+len(b):]
	}
	for _, v := range vals {
		switch v := v.(type) {
		case int64:
			p[0] = byte(Integer)
			binary.NativeEndian.PutUint64(p[1:], uint64(v))
			p = p[9:]
		case bool:
			p[0] = byte(Integer)
			var i uint64
			if v {
				i = 1
			}
			binary.NativeEndian.PutUint64(p[1:], i)
			p = p[9:]
		case float64:
			p[0] = byte(Float)
			binary.NativeEndian.PutUint64(p[1:], math.Float64bits(v))
			p = p[9:]
		case string:
			put(Text, []byte(v))
		case []byte:
			put(Blob, v)
		case time.Time:
			put(Text, []byte(v.Format(time.RFC3339Nano)))
		default:
			p[0] = byte(Null)
			p = p[1:]
		}
	}
	return len(buf) - len(p)
}
