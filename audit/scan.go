package audit

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/tablectl/tablectl/audit/internal/sqlitebatch"
	"github.com/tablectl/tablectl/base/threadprio"
)

// Verify's time is reading, not hashing: SQLite stepping through the rows
// costs about three times what SHA-256 (SHA-NI) costs. Through the driver,
// each row's eight values also became five strings and eight interface
// values on the heap, about as much again with the collector's work; the
// readers now take their rows in batches straight from SQLite
// (audit/internal/sqlitebatch), the texts hashed where they lie in the batch's
// buffer. (A chunked read that had SQLite concatenate rows into one text
// did three times SQLite's work and was slower.) And two cores: scanTrail
// reads ranges of seq on two connections at once when both are proven to
// see the same snapshot, each reader parsing and hashing its own rows
// (prepareRow), while the checks that depend on order (sequence, links,
// checkpoints) run on the caller's goroutine in seq order.

// scanRange is how many seqs one range spans; scanBatchRows how many rows
// a reader hands over at a time. A reader's channel holds a whole range, so
// a reader ahead of the caller reads its range to the end instead of
// waiting for the other's (about 5 MB a range). Variables so tests can
// cross many ranges.
//
// scanCgoRows is how many rows one call into SQLite copies out, fewer than
// a hand-over: 32 rows take SQLite about 15 µs. A cgo call the runtime's
// monitor finds still running on its next look (20 µs or more) loses its
// processor to a goroutine waiting for one, and must wait for one back when
// it returns; with three readers on two cores that was every call of 256
// rows. 32 rows a call took verify from about 0.95 s to 0.8 s a million
// rows (docs/benchmarks.md, issue 16).
var (
	scanRange      int64 = 8192
	scanBatchRows        = 256
	scanCgoRows          = 32
	scanBatchBytes       = 256 << 10 // a call's buffer: 32 rows of about 400 bytes fit many times over; a bigger row grows it
)

// cgoRows is how many rows a reader asks SQLite for at a time.
func cgoRows() int { return max(1, min(scanCgoRows, scanBatchRows)) }

// scanReaders is how many connections read at once: more than the two a
// table box has gains nothing, one is enough on one core.
func scanReaders() int { return min(2, runtime.GOMAXPROCS(0)) }

// scanReference makes Verify read every row through database/sql on one
// goroutine and check it value by value, the simplest way: tests hold the
// fast path to the same report.
var scanReference = false

// scanForceRanges makes scanTrail take the fast path even on an events
// table not the store's (tests feed it values of every type).
var scanForceRanges = false

// scanPinHook, when set, runs after the first connection's snapshot is
// taken and before the second's (tests commit a row there).
var scanPinHook func()

// rangeQuery reads a range of rows. (Concatenating the five texts in SQL
// so the driver makes one Go string a row instead of five costs SQLite
// more than it saves Go.)
const rangeQuery = `SELECT seq, at, kind, shoe, coup, body, prev_hash, hash FROM events WHERE seq >= ? AND seq <= ? ORDER BY seq`

// scanRow is one row as read. Typed rows (every value of its stored type)
// carry their fields and what prepareRow found; others carry the values.
type scanRow struct {
	seq   int64
	at    string
	loose *[8]any
	p     preparedRow
}

// preparedRow is everything about a row that does not depend on the rows
// around it.
type preparedRow struct {
	prev, hash       Hash
	errPrev, errHash error
	canonAt          bool
	want             Hash // the hash of the fields, when both hashes parse
}

// prepScratch is a reader's scratch space, reused across rows, and what it
// knows of the row before: its hash text parsed (the next row's prev_hash
// is usually the same text) and its time checked (rows of one commit share
// it).
type prepScratch struct {
	buf      []byte
	lastHash []byte // copies: a row's texts may be views of a buffer reused
	lastH    Hash
	lastAt   []byte
	lastOK   bool
}

// prepareRow parses a row's hashes, checks its time and hashes its fields.
func prepareRow(sc *prepScratch, seq int64, at, kind string, shoe, coup int64, body, prevText, hashText string) preparedRow {
	var p preparedRow
	if len(sc.lastHash) > 0 && string(sc.lastHash) == prevText {
		p.prev = sc.lastH
	} else {
		p.prev, p.errPrev = ParseHash(prevText)
	}
	p.hash, p.errHash = ParseHash(hashText)
	if p.errHash == nil {
		sc.lastHash, sc.lastH = append(sc.lastHash[:0], hashText...), p.hash
	} else {
		sc.lastHash = sc.lastHash[:0]
	}
	if p.errPrev == nil && p.errHash == nil {
		if string(sc.lastAt) != at || at == "" {
			sc.lastAt, sc.lastOK = append(sc.lastAt[:0], at...), canonicalTime(at)
		}
		p.canonAt = sc.lastOK
		p.want = rowHashInto(&sc.buf, seq, at, kind, shoe, coup, body, p.prev)
	}
	return p
}

// batchRow makes a scanRow of one row's values as read, preparing it if
// every value has its stored type. The values' bytes are the batch
// buffer's, reused for the next batch: the row keeps none of them (its
// time only when it is not canonical, for the finding; a copy).
func batchRow(sc *prepScratch, v *[8]sqlitebatch.Value) scanRow {
	const I, T = sqlitebatch.Integer, sqlitebatch.Text
	if v[0].Type != I || v[1].Type != T || v[2].Type != T || v[3].Type != I || v[4].Type != I ||
		v[5].Type != T || v[6].Type != T || v[7].Type != T {
		var l [8]any
		for i := range l {
			l[i] = v[i].Any()
		}
		return scanRow{loose: &l}
	}
	seq, at := v[0].Int, view(v[1].Bytes)
	r := scanRow{seq: seq, p: prepareRow(sc, seq, at, view(v[2].Bytes), v[3].Int, v[4].Int, view(v[5].Bytes), view(v[6].Bytes), view(v[7].Bytes))}
	if !r.p.canonAt {
		r.at = strings.Clone(at)
	}
	return r
}

// view is b as a string, no copy: only for as long as b's bytes stay put.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// scanJob is one range of seqs; its reader sends the rows on out in
// order, then closes it.
type scanJob struct {
	from, to int64
	out      chan scanBatch
}

type scanBatch struct {
	rows []scanRow
	err  error
}

// snapshotConns returns the connections that will read the rows: first,
// whose transaction (begun by begin) every other check uses, and a second
// one when it is proven to see the same snapshot (snapshotPeers).
func snapshotConns(ctx context.Context, db *sql.DB, first *sql.Conn, begin func() error) (second *sql.Conn, secondTx *sql.Tx, err error) {
	n := 0
	if scanReaders() > 1 {
		n = 1
	}
	conns, txs, err := snapshotPeers(ctx, db, first, n, begin)
	if err != nil || len(conns) == 0 {
		return nil, nil, err
	}
	return conns[0], txs[0], nil
}

// snapshotPeers returns up to n more connections proven to see first's
// snapshot, each in a transaction. begin must take first's snapshot (a
// read inside its transaction). The proof: PRAGMA data_version on a
// connection changes when anyone else committed since that connection
// last looked. Each other connection looks before the first's snapshot is
// taken and again once its own is: unchanged, nothing was committed
// between, so both snapshots are the same. Changed (the live table
// committed in that instant), that connection is dropped, and the first
// reads more alone.
func snapshotPeers(ctx context.Context, db *sql.DB, first *sql.Conn, n int, begin func() error) (conns []*sql.Conn, txs []*sql.Tx, err error) {
	var dvs []int64
	if scanReference {
		n = 0
	}
	for range n {
		// Bounded: a pool allowed one connection would wait forever, and
		// one reader is always enough.
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := db.Conn(cctx)
		cancel()
		if err != nil {
			break
		}
		var dv int64
		if err := c.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&dv); err != nil {
			c.Close()
			break
		}
		conns, dvs = append(conns, c), append(dvs, dv)
	}
	if err := begin(); err != nil {
		for _, c := range conns {
			c.Close()
		}
		return nil, nil, err
	}
	if len(conns) == 0 {
		return nil, nil, nil
	}
	if scanPinHook != nil {
		scanPinHook()
	}
	var kept []*sql.Conn
	for i, c := range conns {
		tx, err := c.BeginTx(ctx, nil)
		if err != nil {
			c.Close()
			continue
		}
		var one, dv2 int64
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&one); err != nil {
			tx.Rollback()
			c.Close()
			continue
		}
		if err := tx.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&dv2); err != nil || dv2 != dvs[i] {
			tx.Rollback()
			c.Close()
			continue
		}
		kept, txs = append(kept, c), append(txs, tx)
	}
	return kept, txs, nil
}

// scanTrail calls visit for every row of the events table in seq order.
// tx is conns[0]'s transaction; every connection in conns sees the same
// snapshot (snapshotConns).
func scanTrail(ctx context.Context, tx *sql.Tx, conns []*sql.Conn, visit func(*scanRow)) error {
	if scanReference || !scanForceRanges && !ownEventsTable(ctx, tx) {
		return scanTrailReference(ctx, tx, visit)
	}
	return scanTrailRanges(ctx, tx, conns, visit)
}

// ownEventsTable reports whether the events table is the one the store
// creates: STRICT, seq the rowid. Only then are ranges of seq ranges of
// rows and every value of its declared type.
func ownEventsTable(ctx context.Context, tx *sql.Tx) bool {
	var got string
	if err := tx.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'events'`).Scan(&got); err != nil {
		return false
	}
	for _, o := range schemaTables {
		if o.name == "events" {
			return normSQL(got) == normSQL(o.sql)
		}
	}
	return false
}

// scanTrailRanges is scanTrail's fast path.
func scanTrailRanges(ctx context.Context, tx *sql.Tx, conns []*sql.Conn, visit func(*scanRow)) error {
	var lo, hi sql.NullInt64
	// Two subqueries: min and max in one would scan the whole table.
	if err := tx.QueryRowContext(ctx, `SELECT (SELECT min(seq) FROM events), (SELECT max(seq) FROM events)`).Scan(&lo, &hi); err != nil {
		return err
	}
	if !lo.Valid || !hi.Valid {
		return nil
	}
	// Ranges by seq, as offsets from lo (unsigned: any two int64s); a
	// hostile file with a vast spread of seqs is read as one range on one
	// connection rather than as billions of empty ones.
	span := uint64(hi.Int64) - uint64(lo.Int64)
	step := uint64(scanRange)
	if span/step > 1<<20 {
		step, conns = 0, conns[:1]
	}

	done := make(chan struct{})
	jobs := make(chan *scanJob, len(conns))
	order := make(chan *scanJob, len(conns)+1)
	perRange := int(scanRange)/scanBatchRows + 2 // batches of a range, and its error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // hands out the ranges, in order
		defer wg.Done()
		defer close(jobs)
		defer close(order)
		for off := uint64(0); ; {
			end := off + step - 1
			if step == 0 || end < off || end > span {
				end = span
			}
			j := &scanJob{from: int64(uint64(lo.Int64) + off), to: int64(uint64(lo.Int64) + end), out: make(chan scanBatch, perRange)}
			select {
			case order <- j:
			case <-done:
				return
			}
			select {
			case jobs <- j:
			case <-done:
				return
			}
			if end == span {
				return
			}
			off = end + 1
		}
	}()
	// Batches visited go back to the readers: made new, they were a third
	// of the bytes a verify allocated (large objects, zeroed), and so of
	// the collector's work.
	free := make(chan []scanRow, (len(conns)+1)*perRange)
	nice := threadprio.Nice()
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			threadprio.Same(nice)
			readRanges(ctx, c, jobs, done, free)
		}()
	}
	defer wg.Wait()
	defer close(done)
	for j := range order {
		for b := range j.out {
			if b.err != nil {
				return b.err
			}
			for i := range b.rows {
				visit(&b.rows[i])
			}
			select {
			case free <- b.rows:
			default:
			}
		}
	}
	return ctx.Err()
}

// readRanges reads the jobs' ranges on c until there are none or done is
// closed, in batches from SQLite (database/sql's Scan and the driver's
// values added nothing here but time).
func readRanges(ctx context.Context, c *sql.Conn, jobs <-chan *scanJob, done <-chan struct{}, free chan []scanRow) {
	newBatch := func() []scanRow {
		select {
		case b := <-free:
			return b[:0]
		default:
			return make([]scanRow, 0, scanBatchRows)
		}
	}
	send := func(j *scanJob, b scanBatch) bool {
		select {
		case j.out <- b:
			return true
		case <-done:
			return false
		}
	}
	err := c.Raw(func(dc any) error {
		st, err := sqlitebatch.Prepare(dc, rangeQuery, cgoRows(), scanBatchBytes)
		if err != nil {
			return err
		}
		defer st.Close()
		if st.Columns() != 8 {
			return fmt.Errorf("%d columns, want 8", st.Columns())
		}
		var sc prepScratch
		var v [8]sqlitebatch.Value
		var batch []scanRow // rows not yet handed over
		for j := range jobs {
			if err := ctx.Err(); err != nil {
				send(j, scanBatch{err: err})
				return nil
			}
			if err := st.Run(j.from, j.to); err != nil {
				send(j, scanBatch{err: err})
				return nil
			}
			for {
				b, ok, err := st.Next()
				if err != nil {
					send(j, scanBatch{err: err})
					return nil
				}
				if !ok {
					// The range's last rows, fewer than a batch.
					if batch != nil && !send(j, scanBatch{rows: batch}) {
						return nil
					}
					batch = nil
					break
				}
				if batch == nil {
					batch = newBatch()
				}
				off := 0
				for range b.Rows() {
					off = b.Row(off, v[:])
					batch = append(batch, batchRow(&sc, &v))
				}
				if len(batch) < scanBatchRows {
					continue
				}
				if !send(j, scanBatch{rows: batch}) {
					return nil
				}
				batch = nil
				if err := ctx.Err(); err != nil {
					send(j, scanBatch{err: err})
					return nil
				}
			}
			close(j.out)
		}
		return nil
	})
	if err != nil {
		// The connection could not be had: the range in hand, if any, is
		// unsent; fail whatever job comes next so the caller stops.
		for j := range jobs {
			send(j, scanBatch{err: err})
			return
		}
	}
}

// scanTrailReference reads the rows the plain way: the whole table in seq
// order through database/sql, each row value by value. Verify reads so a
// trail whose events table is not the one the store creates (its seq may
// not be the rowid, its values of any type), and tests hold the fast path
// to it.
func scanTrailReference(ctx context.Context, tx *sql.Tx, visit func(*scanRow)) error {
	rows, err := tx.QueryContext(ctx, `SELECT seq, at, kind, shoe, coup, body, prev_hash, hash FROM events ORDER BY seq`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var v [8]any
		if err := rows.Scan(&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]); err != nil {
			return err
		}
		visit(&scanRow{loose: &v})
	}
	return rows.Err()
}

// rowHashInto is rowHash with the encoding built in *buf, reused (verify
// hashes the body as the driver's string, the store as its bytes).
func rowHashInto[B ~string | ~[]byte](buf *[]byte, seq int64, at, kind string, shoe, coup int64, body B, prev Hash) Hash {
	b := append((*buf)[:0], hashDomain...)
	b = binary.BigEndian.AppendUint64(b, uint64(seq))
	b = binary.BigEndian.AppendUint32(b, uint32(len(at)))
	b = append(b, at...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(kind)))
	b = append(b, kind...)
	b = binary.BigEndian.AppendUint64(b, uint64(shoe))
	b = binary.BigEndian.AppendUint64(b, uint64(coup))
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	b = append(b, body...)
	b = append(b, prev[:]...)
	*buf = b
	return sha256.Sum256(b)
}

// canonicalTime reports whether s is a time in the stored form (what
// parseTime accepts), without allocating. Verify checks one per commit
// and one per checkpoint: the common form, 2006-01-02T15:04:05.999999999Z
// with the fraction's trailing zeros cut, is checked by hand; anything
// else (and any doubt: year 0, a leap second) by time.Parse.
func canonicalTime(s string) bool {
	if plainCanonicalTime(s) {
		return true
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return false
	}
	var b [64]byte
	return string(t.UTC().AppendFormat(b[:0], time.RFC3339Nano)) == s
}

// plainCanonicalTime reports whether s is a UTC time of years 1 to 9999 in
// the stored form. False says only that the slow check must decide.
func plainCanonicalTime(s string) bool {
	n := len(s)
	if n < 20 || n > 30 || n == 21 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[n-1] != 'Z' {
		return false
	}
	num := func(i, j int) int {
		v := 0
		for ; i < j; i++ {
			c := s[i]
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	year, month, day := num(0, 4), num(5, 7), num(8, 10)
	hour, minute, sec := num(11, 13), num(14, 16), num(17, 19)
	if year < 1 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return false
	}
	days := [13]int{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[month]
	if month == 2 && year%4 == 0 && (year%100 != 0 || year%400 == 0) {
		days = 29
	}
	if day > days {
		return false
	}
	if n == 20 {
		return true
	}
	// A fraction of 1 to 9 digits, the last not 0.
	return s[19] == '.' && num(20, n-1) >= 0 && s[n-2] != '0'
}
