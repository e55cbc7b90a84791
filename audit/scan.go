package audit

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"strconv"
	"strings"
	"sync"
)

// Verify reads every row of a trail. Row by row through database/sql, each
// row costs a dozen cgo calls (a step, then a type and a value for each of
// eight columns), which capped verification near 500,000 rows a second.
// scanTrail instead asks SQLite for a few thousand rows at a time as ONE
// text (group_concat of length-prefixed fields), on a goroutine of its own,
// while the caller hashes the chunk before: one cgo call per chunk, and the
// two halves on two cores.

// scanChunk is how many rows one chunk holds.
const scanChunk = 4096

// chunkQuery yields, for up to scanChunk rows after a seq: the row count,
// the last seq, whether every value has its stored type, and the rows as
// "seq shoe coup len(at) len(kind) len(body) len(prev) len(hash) " followed
// by the six texts, byte lengths throughout.
const chunkQuery = `SELECT count(*), max(seq), min(typed), group_concat(r, '' ORDER BY seq) FROM (
  SELECT seq,
    (typeof(seq) = 'integer' AND typeof(shoe) = 'integer' AND typeof(coup) = 'integer' AND typeof(at) = 'text'
      AND typeof(kind) = 'text' AND typeof(body) = 'text' AND typeof(prev_hash) = 'text' AND typeof(hash) = 'text') AS typed,
    seq || ' ' || shoe || ' ' || coup || ' ' || length(CAST(at AS BLOB)) || ' ' || length(CAST(kind AS BLOB)) || ' ' ||
      length(CAST(body AS BLOB)) || ' ' || length(CAST(prev_hash AS BLOB)) || ' ' || length(CAST(hash AS BLOB)) || ' ' ||
      at || kind || body || prev_hash || hash AS r
  FROM events WHERE seq > ? ORDER BY seq LIMIT ` + "4096" + `)`

// scanRowsQuery reads rows value by value: for a chunk whose values are
// not all of their stored types (a hostile file), or that does not parse.
const scanRowsQuery = `SELECT seq, at, kind, shoe, coup, body, prev_hash, hash FROM events WHERE seq > ? ORDER BY seq LIMIT ?`

// scanLooseOnly makes scanTrail read every row value by value (tests hold
// the two paths to the same findings).
var scanLooseOnly = false

// rawChunk is one chunk, or the rows of one chunk read value by value.
type rawChunk struct {
	text string
	rows [][8]any
	err  error
}

// scanTrail reads every row in seq order within q (one read transaction)
// and calls typed for each row whose values have their stored types, and
// loose for each other row, in order.
func scanTrail(ctx context.Context, q queryer,
	typed func(seq int64, at, kind string, shoe, coup int64, body, prev, hash string),
	loose func(seq, at, kind, shoe, coup, body, prev, hash any)) error {
	out := make(chan rawChunk, 2)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(out)
		send := func(c rawChunk) bool {
			select {
			case out <- c:
				return true
			case <-done:
				return false
			}
		}
		after := int64(-1 << 63)
		for {
			var n int64
			var last sql.NullInt64
			var typed sql.NullInt64
			var text sql.NullString
			if err := q.QueryRowContext(ctx, chunkQuery, after).Scan(&n, &last, &typed, &text); err != nil {
				send(rawChunk{err: err})
				return
			}
			if n == 0 {
				return
			}
			if typed.Int64 == 1 && text.Valid && !scanLooseOnly && validChunk(text.String, n) {
				if !send(rawChunk{text: text.String}) {
					return
				}
			} else {
				rows, err := scanLoose(ctx, q, after, n)
				if !send(rawChunk{rows: rows, err: err}) || err != nil {
					return
				}
			}
			if !last.Valid {
				return
			}
			after = last.Int64
		}
	}()
	defer wg.Wait()
	defer close(done)
	for c := range out {
		if c.err != nil {
			return c.err
		}
		if c.rows != nil {
			for _, r := range c.rows {
				loose(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7])
			}
			continue
		}
		for t := c.text; t != ""; {
			var r parsedRow
			r, t = parseChunkRow(t)
			typed(r.seq, r.at, r.kind, r.shoe, r.coup, r.body, r.prev, r.hash)
		}
	}
	return nil
}

// scanLoose reads n rows after seq value by value.
func scanLoose(ctx context.Context, q queryer, after, n int64) ([][8]any, error) {
	rows, err := q.QueryContext(ctx, scanRowsQuery, after, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][8]any
	for rows.Next() {
		var v [8]any
		if err := rows.Scan(&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]); err != nil {
			return out, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

type parsedRow struct {
	seq, shoe, coup            int64
	at, kind, body, prev, hash string
}

// validChunk checks that text parses into exactly n rows, so that
// parseChunkRow, which trusts it, cannot run off the end.
func validChunk(text string, n int64) bool {
	for ; n > 0; n-- {
		var nums [8]int64
		for i := range nums {
			sp := strings.IndexByte(text, ' ')
			if sp <= 0 {
				return false
			}
			v, err := strconv.ParseInt(text[:sp], 10, 64)
			if err != nil || (i >= 3 && v < 0) {
				return false
			}
			nums[i], text = v, text[sp+1:]
		}
		total := int64(0)
		for _, l := range nums[3:] {
			total += l
		}
		if total > int64(len(text)) {
			return false
		}
		text = text[total:]
	}
	return text == ""
}

// parseChunkRow takes one row off the front of a chunk validChunk passed.
func parseChunkRow(t string) (parsedRow, string) {
	var nums [8]int64
	for i := range nums {
		sp := strings.IndexByte(t, ' ')
		nums[i], _ = strconv.ParseInt(t[:sp], 10, 64)
		t = t[sp+1:]
	}
	r := parsedRow{seq: nums[0], shoe: nums[1], coup: nums[2]}
	take := func(n int64) string { s := t[:n]; t = t[n:]; return s }
	r.at, r.kind, r.body, r.prev, r.hash = take(nums[3]), take(nums[4]), take(nums[5]), take(nums[6]), take(nums[7])
	return r, t
}

// rowHashString is rowHash over strings, without copying the body.
func rowHashString(seq int64, at, kind string, shoe, coup int64, body string, prev Hash) Hash {
	var num [8]byte
	h := sha256.New()
	h.Write([]byte(hashDomain))
	binary.BigEndian.PutUint64(num[:], uint64(seq))
	h.Write(num[:])
	writeLenString(h, at)
	writeLenString(h, kind)
	binary.BigEndian.PutUint64(num[:], uint64(shoe))
	h.Write(num[:])
	binary.BigEndian.PutUint64(num[:], uint64(coup))
	h.Write(num[:])
	writeLenString(h, body)
	h.Write(prev[:])
	var out Hash
	h.Sum(out[:0])
	return out
}

func writeLenString(h interface{ Write([]byte) (int, error) }, s string) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(s)))
	h.Write(n[:])
	if sw, ok := h.(interface{ WriteString(string) (int, error) }); ok {
		sw.WriteString(s)
		return
	}
	h.Write([]byte(s))
}

// canonicalTime reports whether s is a time in the stored form.
func canonicalTime(s string) bool {
	_, err := parseTime(s)
	return err == nil
}
