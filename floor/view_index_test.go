package floor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/internal/floortest"
)

// TestViewReadsByIndex: the floor view's reads by kind (the coups of the
// rate window, a suspended table's suspension rows), run every refresh,
// read only the rows they count through the partial indexes, not every row
// of every table. Before the indexes, at 141,000 rows of 500 tables, a
// refresh took 0.36 s of PostgreSQL's CPU and grew with the floor's
// history. The plans of a floor with 200,000 rows of 50 tables, a coup
// result every sixth row and a suspension every 5,000, must name them.
func TestViewReadsByIndex(t *testing.T) {
	ctx := context.Background()
	pool, schema := floortest.Postgres(t)
	s, err := OpenStore(ctx, pool, schema)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, s.sql(`
		INSERT INTO S.rows (table_id, seq, at, kind, shoe, coup, body, prev_hash, hash, witnessed_at)
		SELECT 'T' || (i % 50), i / 50, '', CASE WHEN i % 5000 = 0 THEN 'suspended' WHEN i % 6 = 0 THEN 'coup_result' ELSE 'card_dealt' END,
			1, i / 300, '\x'::bytea, '\x'::bytea, '\x'::bytea, now() - (200000 - i) * interval '100 ms'
		FROM generate_series(1, 200000) AS i;
		INSERT INTO S.tables (table_id, contig, max_seq) SELECT DISTINCT table_id, 0, 0 FROM S.rows;
		ANALYZE S.rows; ANALYZE S.tables`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, sql string
		args      []any
		index     string
	}{
		{"the rate window's coups", viewLinesSQL, []any{time.Now().Add(-RateWindow)}, "rows_coup_results"},
		{"a table's suspension", suspensionSQL, []any{"T7"}, "rows_suspensions"},
	} {
		var plan strings.Builder
		rows, err := pool.Query(ctx, "EXPLAIN "+s.sql(c.sql), c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(line + "\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !strings.Contains(plan.String(), c.index) {
			t.Errorf("%s: the plan does not use %s:\n%s", c.name, c.index, plan.String())
		}
	}
	// And the answers are the rows the queries count.
	lines, err := s.viewLines(ctx, time.Now().Add(-RateWindow))
	if err != nil {
		t.Fatal(err)
	}
	var coups int64
	for _, l := range lines {
		coups += l.coups
	}
	// The last 15 minutes: 9,000 rows, every sixth a coup result (less the
	// suspensions among them).
	var want int64
	if err := pool.QueryRow(ctx, s.sql(`SELECT count(*) FROM S.rows WHERE kind = 'coup_result' AND witnessed_at > $1`), time.Now().Add(-RateWindow)).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if coups != want || want < 1400 {
		t.Errorf("coups in the rate window: the view counted %d, the rows hold %d (about 1,500)", coups, want)
	}
}
