package sqlitebatch

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3"
)

// openDB opens a SQLite file in the test's folder, fsync on.
func openDB(t testing.TB) *sql.DB {
	t.Helper()
	// A path, not a file: URI: a fuzz seed's folder has a '#' in its name.
	db, err := sql.Open("sqlite3", filepath.Join(t.TempDir(), "t.db")+"?_journal_mode=WAL&_synchronous=FULL")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE t (k INTEGER PRIMARY KEY, a, b TEXT, c BLOB)`); err != nil {
		t.Fatal(err)
	}
	return db
}

// viaDriver reads query's rows through go-sqlite3's own driver.Rows.
func viaDriver(t testing.TB, db *sql.DB, query string, args ...int64) [][]any {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out [][]any
	err = c.Raw(func(dc any) error {
		nv := make([]driver.NamedValue, len(args))
		for i, a := range args {
			nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
		}
		rows, err := dc.(driver.QueryerContext).QueryContext(context.Background(), query, nv)
		if err != nil {
			return err
		}
		defer rows.Close()
		for {
			v := make([]driver.Value, len(rows.Columns()))
			if err := rows.Next(v); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
			row := make([]any, len(v))
			for i := range v {
				row[i] = v[i]
			}
			out = append(out, row)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// bothPaths runs f on the fast path and on the fallback, forced.
func bothPaths(t *testing.T, f func(t *testing.T)) {
	t.Run("fast", f)
	t.Run("plain", func(t *testing.T) {
		defer ForcePlain()()
		f(t)
	})
}

// eachRow reads the rows of s's run batch by batch, decodes each into
// vals and calls f, until f returns false (the next Run starts afresh);
// it returns how many batches it read.
func eachRow(t testing.TB, s *Stmt, vals []Value, f func() bool) (batches int, err error) {
	for {
		b, ok, err := s.Next()
		if err != nil || !ok {
			return batches, err
		}
		batches++
		off := 0
		for range b.Rows() {
			off = b.Row(off, vals)
			if !f() {
				return batches, nil
			}
		}
		if off != len(b.buf) {
			t.Errorf("batch of %d rows: decoded %d of its %d bytes", b.Rows(), off, len(b.buf))
		}
	}
}

// viaBatches reads query's rows with this package, maxRows a batch into a
// buffer of bufBytes, and returns them with how many batches it took.
func viaBatches(t testing.TB, db *sql.DB, query string, maxRows, bufBytes int, args ...int64) (rows [][]any, batches int) {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Raw(func(dc any) error {
		s, err := Prepare(dc, query, maxRows, bufBytes)
		if err != nil {
			return err
		}
		defer s.Close()
		if s.Fast() == forcePlain.Load() {
			t.Errorf("Fast() is %v with the plain path forced %v", s.Fast(), forcePlain.Load())
		}
		if err := s.Run(args...); err != nil {
			return err
		}
		vals := make([]Value, s.Columns())
		batches, err = eachRow(t, s, vals, func() bool {
			row := make([]any, len(vals))
			for i, v := range vals {
				row[i] = v.Any()
			}
			rows = append(rows, row)
			return true
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows, batches
}

func TestAgreesWithDriver(t *testing.T) {
	db := openDB(t)
	big := strings.Repeat("x", 10_000)
	values := [][3]any{
		{int64(1), "text", []byte{1, 2, 3}},
		{int64(-1 << 63), "", []byte{}},
		{int64(math.MaxInt64), "nul\x00inside", []byte{0}},
		{1.5, nil, nil},
		{math.Inf(-1), "héllo ♠", "text in a blob column"},
		{"text in an untyped column", int64(7), int64(8)},
		{[]byte("blob"), 2.25, []byte(big)},
		{nil, big, nil},
		{int64(0), "0", []byte("0")},
	}
	for i, v := range values {
		if _, err := db.Exec(`INSERT INTO t VALUES (?, ?, ?, ?)`, i+1, v[0], v[1], v[2]); err != nil {
			t.Fatal(err)
		}
	}
	const all = `SELECT k, a, b, c FROM t ORDER BY k`
	want := viaDriver(t, db, all)
	if len(want) != len(values) {
		t.Fatalf("driver read %d rows, want %d", len(want), len(values))
	}
	for _, tc := range []struct {
		name              string
		maxRows, bufBytes int
		minBatches        int
	}{
		{"one batch", 1000, 1 << 20, 1},
		{"a row a batch", 1, 1 << 20, len(values)},
		{"three rows a batch", 3, 1 << 20, 3},
		{"a buffer smaller than a row grows", 1000, 64, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bothPaths(t, func(t *testing.T) {
				got, batches := viaBatches(t, db, all, tc.maxRows, tc.bufBytes)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("rows differ from the driver's:\n got %#v\nwant %#v", got, want)
				}
				if batches < tc.minBatches {
					t.Errorf("%d batches, want at least %d", batches, tc.minBatches)
				}
			})
		})
	}
}

// TestRunRebinds: one statement read for several ranges, as verify reads
// a trail, including a range stopped part-way.
func TestRunRebinds(t *testing.T) { bothPaths(t, testRunRebinds) }

func testRunRebinds(t *testing.T) {
	db := openDB(t)
	for i := 1; i <= 100; i++ {
		if _, err := db.Exec(`INSERT INTO t VALUES (?, ?, ?, ?)`, i, i*i, "row", nil); err != nil {
			t.Fatal(err)
		}
	}
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Raw(func(dc any) error {
		s, err := Prepare(dc, `SELECT k, a FROM t WHERE k >= ? AND k <= ? ORDER BY k`, 7, 4096)
		if err != nil {
			return err
		}
		defer s.Close()
		vals := make([]Value, 2)
		for _, r := range [][2]int64{{1, 10}, {50, 49}, {90, 200}, {5, 60}, {1, 100}} {
			if err := s.Run(r[0], r[1]); err != nil {
				return err
			}
			next := r[0]
			if _, err := eachRow(t, s, vals, func() bool {
				if vals[0].Int != next || vals[1].Int != next*next {
					t.Errorf("range %v: row %d, %d; want %d, %d", r, vals[0].Int, vals[1].Int, next, next*next)
				}
				next++
				return r != [2]int64{5, 60} || next <= 20 // stopped part-way: the next Run starts afresh
			}); err != nil {
				return err
			}
			if wantNext := min(r[1], 100) + 1; r != [2]int64{5, 60} && max(next, r[0]) != max(wantNext, r[0]) {
				t.Errorf("range %v ended before %d, want before %d", r, next, wantNext)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestInTransaction: the statement reads the snapshot of the transaction
// open on its connection, not rows committed since on another.
func TestInTransaction(t *testing.T) { bothPaths(t, testInTransaction) }

func testInTransaction(t *testing.T) {
	db := openDB(t)
	if _, err := db.Exec(`INSERT INTO t VALUES (1, 'before', NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil { // takes the snapshot
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO t VALUES (2, 'after', NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	var got []string
	err = c.Raw(func(dc any) error {
		s, err := Prepare(dc, `SELECT a FROM t ORDER BY k`, 10, 1024)
		if err != nil {
			return err
		}
		defer s.Close()
		if err := s.Run(); err != nil {
			return err
		}
		vals := make([]Value, 1)
		_, err = eachRow(t, s, vals, func() bool {
			got = append(got, string(vals[0].Bytes))
			return true
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []string{"before"}) {
		t.Errorf("read %q in the transaction, want only the row before it", got)
	}
}

func TestErrors(t *testing.T) { bothPaths(t, testErrors) }

func testErrors(t *testing.T) {
	db := openDB(t)
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Raw(func(dc any) error {
		if _, err := Prepare(dc, `SELECT nope FROM t`, 10, 1024); err == nil || !strings.Contains(err.Error(), "no such column") {
			t.Errorf("prepare of a bad query: %v, want SQLite's error", err)
		}
		if _, err := Prepare(dc, ``, 10, 1024); err == nil {
			t.Error("prepare of no statement: no error")
		}
		s, err := Prepare(dc, `SELECT k FROM t WHERE k > ?`, 10, 1024)
		if err != nil {
			return err
		}
		defer s.Close()
		if err := s.Run(); err == nil {
			t.Error("run with an argument missing: no error")
		}
		// A step that fails at run time: abs() of the smallest integer.
		if _, err := db.Exec(`INSERT INTO t VALUES (1, ?, NULL, NULL)`, int64(math.MinInt64)); err != nil {
			return err
		}
		s2, err := Prepare(dc, `SELECT abs(a) FROM t`, 10, 1024)
		if err != nil {
			return err
		}
		defer s2.Close()
		// The fast path steps in Next; the driver's API steps the first row
		// when the query runs: SQLite's error from either.
		err = s2.Run()
		if err == nil {
			_, _, err = s2.Next()
		}
		if err == nil || !strings.Contains(err.Error(), "integer overflow") {
			t.Errorf("a failing step: %v, want SQLite's error", err)
		}
		if _, ok, err := s2.Next(); ok || err != nil {
			t.Errorf("after a failed step: ok %v, err %v; want done", ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(struct{}{}, `SELECT 1`, 1, 1); !errors.Is(err, ErrNoHandle) {
		t.Errorf("no driver connection at all: %v, want ErrNoHandle", err)
	}
}

// foreignConn is a driver connection whose type is not go-sqlite3's, as
// the connection would look to this package if the driver changed shape.
type foreignConn struct{ driver.Conn }

// TestFallbackTakesOver: a connection of another shape is read the plain
// way, by itself, with the same rows as the driver's.
func TestFallbackTakesOver(t *testing.T) {
	db := openDB(t)
	for i := 1; i <= 50; i++ {
		if _, err := db.Exec(`INSERT INTO t VALUES (?, ?, ?, ?)`, i, i*3, "row", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	const all = `SELECT k, a, b, c FROM t WHERE k >= ? ORDER BY k`
	want := viaDriver(t, db, all, 5)
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got [][]any
	err = c.Raw(func(dc any) error {
		s, err := Prepare(foreignConn{dc.(driver.Conn)}, all, 7, 128)
		if err != nil {
			return err
		}
		defer s.Close()
		if s.Fast() {
			t.Error("a connection of another shape took the fast path")
		}
		if s.Columns() != 4 {
			t.Errorf("%d columns, want 4", s.Columns())
		}
		if err := s.Run(5); err != nil {
			return err
		}
		vals := make([]Value, s.Columns())
		_, err = eachRow(t, s, vals, func() bool {
			row := make([]any, len(vals))
			for i, v := range vals {
				row[i] = v.Any()
			}
			got = append(got, row)
			return true
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows differ from the driver's:\n got %#v\nwant %#v", got, want)
	}
}

// FuzzAgreesWithDriver stores whatever values the fuzzer makes, of every
// storage class, and holds the batches to the driver's reading of them.
func FuzzAgreesWithDriver(f *testing.F) {
	f.Add(int64(1), 0.5, "text", []byte("blob"), uint8(0), 4, 100)
	f.Add(int64(-5), math.NaN(), "", []byte{}, uint8(255), 1, 8)
	f.Add(int64(0), math.Copysign(0, -1), "nul\x00", []byte(nil), uint8(7), 2, 1)
	f.Fuzz(func(t *testing.T, i int64, fl float64, s string, b []byte, mix uint8, maxRows, bufBytes int) {
		if math.IsNaN(fl) {
			fl = 0 // SQLite stores NaN as NULL; the driver then reads nil
		}
		db := openDB(t)
		vals := []any{i, fl, s, b, nil}
		for k := range 6 {
			pick := func(j int) any { return vals[(int(mix)>>j+k+j)%len(vals)] }
			if _, err := db.Exec(`INSERT INTO t VALUES (?, ?, ?, ?)`, k+1, pick(0), pick(2), pick(4)); err != nil {
				t.Fatal(err)
			}
		}
		const all = `SELECT k, a, b, c FROM t ORDER BY k`
		want := viaDriver(t, db, all)
		got, _ := viaBatches(t, db, all, maxRows%10, bufBytes%2048)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("rows differ from the driver's:\n got %#v\nwant %#v", got, want)
		}
		restore := ForcePlain()
		got, _ = viaBatches(t, db, all, maxRows%10, bufBytes%2048)
		restore()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("the plain path's rows differ from the driver's:\n got %#v\nwant %#v", got, want)
		}
	})
}

func BenchmarkRead(b *testing.B) {
	db := openDB(b)
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	body := strings.Repeat("b", 250)
	const rows = 20_000
	for i := 1; i <= rows; i++ {
		if _, err := tx.Exec(`INSERT INTO t VALUES (?, ?, ?, ?)`, i, "2026-11-27T21:00:00.000000Z", body, strings.Repeat("h", 64)); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	const all = `SELECT k, a, b, c FROM t ORDER BY k`
	b.Run("driver", func(b *testing.B) {
		for b.Loop() {
			viaDriverCount(b, db, all)
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("batches", func(b *testing.B) {
		for b.Loop() {
			viaBatchesCount(b, db, all)
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("batches-plain", func(b *testing.B) {
		defer ForcePlain()()
		for b.Loop() {
			viaBatchesCount(b, db, all)
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

func viaDriverCount(b *testing.B, db *sql.DB, query string) {
	c, _ := db.Conn(context.Background())
	defer c.Close()
	c.Raw(func(dc any) error {
		rows, err := dc.(driver.QueryerContext).QueryContext(context.Background(), query, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer rows.Close()
		v := make([]driver.Value, 4)
		for rows.Next(v) == nil {
		}
		return nil
	})
}

func viaBatchesCount(b *testing.B, db *sql.DB, query string) {
	c, _ := db.Conn(context.Background())
	defer c.Close()
	c.Raw(func(dc any) error {
		s, err := Prepare(dc, query, 256, 256<<10)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		s.Run()
		_, err = eachRow(b, s, make([]Value, 4), func() bool { return true })
		return err
	})
}
