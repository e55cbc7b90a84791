package audit

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/tablectl/tablectl/audit/internal/sqlitebatch"
)

// A trail signs a checkpoint in every commit: hundreds of thousands per
// million rows. Verify holds every one's head to the chain but checks only
// a few signatures, so it reads the checkpoints as cpHeads (no pointer, no
// signature decoded) and keeps in full only those whose signatures it may
// check. The read runs on a connection of its own beside the rows'
// readers, handing the heads over as it goes (cpFeed): it was 1.2 s on one
// core before the first row was read.

// cpHead is a stored checkpoint as the chain check needs it. It holds no
// pointer, so the collector never scans a trail's worth of them.
type cpHead struct {
	seq  int64
	head Hash
	key  int32 // index into storedCheckpoints.keyIDs
	full int32 // index into storedCheckpoints.full, or -1
}

// cpHeads is a list of heads in chunks that never move once made: a slice
// of hundreds of thousands grown by append was a fifth of the read, in
// copies. A chunk is made whole and written by index, so a list handed to
// another goroutine stays valid (and race-free) below its length while
// more are added.
type cpHeads struct {
	chunks [][]cpHead
	n      int
}

const cpChunkBits = 12

func (l *cpHeads) len() int { return l.n }

func (l *cpHeads) at(i int) *cpHead {
	return &l.chunks[i>>cpChunkBits][i&(1<<cpChunkBits-1)]
}

func (l *cpHeads) add(h cpHead) {
	if l.n == len(l.chunks)<<cpChunkBits {
		l.chunks = append(l.chunks, make([]cpHead, 1<<cpChunkBits))
	}
	l.n++
	*l.at(l.n - 1) = h
}

// search is the index of the first head at seq or after.
func (l *cpHeads) search(seq int64) int {
	return sort.Search(l.n, func(i int) bool { return l.at(i).seq >= seq })
}

// storedCheckpoints is the checkpoints table as Verify reads it.
type storedCheckpoints struct {
	heads  cpHeads // in seq order
	keyIDs []string
	full   []Checkpoint // the ones kept whole, in seq order
	newest Checkpoint   // the newest, always whole
	bad    []Finding    // rows that do not decode
}

// checkpoint is the i'th head in full, if it was kept.
func (s *storedCheckpoints) checkpoint(i int) (Checkpoint, bool) {
	switch f := s.heads.at(i).full; {
	case f >= 0:
		return s.full[f], true
	case i == s.heads.len()-1:
		return s.newest, true
	}
	return Checkpoint{}, false
}

// cpFeed hands the heads read so far from the reader to Verify's ordered
// checks, which need only those up to the row in hand.
type cpFeed struct {
	mu    sync.Mutex
	heads cpHeads
	done  bool
	res   *storedCheckpoints
	err   error
	wake  chan struct{} // a send after each batch, closed when done
	ended chan struct{} // closed when done
}

func newCPFeed() *cpFeed {
	return &cpFeed{wake: make(chan struct{}, 1), ended: make(chan struct{})}
}

func (f *cpFeed) publish(heads cpHeads) {
	f.mu.Lock()
	f.heads = heads
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *cpFeed) finish(res *storedCheckpoints, err error) {
	f.mu.Lock()
	if res != nil {
		f.heads = res.heads
	}
	f.res, f.err, f.done = res, err, true
	f.mu.Unlock()
	close(f.wake)
	close(f.ended)
}

// more waits until more than have heads are published or the read is
// done; one goroutine only. Elements below the length returned are never written again, so
// the caller reads them without the lock.
func (f *cpFeed) more(have int) (heads cpHeads, done bool) {
	for {
		f.mu.Lock()
		heads, done = f.heads, f.done
		f.mu.Unlock()
		if heads.len() > have || done {
			return heads, done
		}
		<-f.wake
	}
}

// result waits for the whole read.
func (f *cpFeed) result() (*storedCheckpoints, error) {
	<-f.ended
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.res, f.err
}

// readStoredCheckpoints reads the checkpoints table on c, in the
// transaction open on it, publishing the heads on feed as it goes and
// finishing it. keep says which checkpoints to keep whole (their
// signatures may be checked); the newest always is.
func readStoredCheckpoints(ctx context.Context, c *sql.Conn, table string, keep func(seq int64) bool, feed *cpFeed) {
	res := &storedCheckpoints{}
	var last cpRowCopy // the newest row read, decoded whole at the end
	err := c.Raw(func(dc any) error {
		st, err := sqlitebatch.Prepare(dc, `SELECT seq, head_hash, signed_at, key_id, signature FROM checkpoints ORDER BY seq`, cgoRows(), scanBatchBytes)
		if err != nil {
			return err
		}
		defer st.Close()
		if st.Columns() != 5 {
			return fmt.Errorf("%d columns, want 5", st.Columns())
		}
		if err := st.Run(); err != nil {
			return err
		}
		var v [5]sqlitebatch.Value
		lastKey := int32(-1)
		for n := 0; ; {
			b, ok, err := st.Next()
			if err != nil || !ok {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			off := 0
			for range b.Rows() {
				off = b.Row(off, v[:])
				h, keyID, err := checkCheckpointValues(&v)
				if err != nil {
					var s int64
					if v[0].Type == sqlitebatch.Integer {
						s = v[0].Int
					}
					res.bad = append(res.bad, Finding{Kind: FindingMalformed, Seq: s, Detail: "stored checkpoint: " + err.Error()})
					continue
				}
				if k := res.heads.len(); k > 0 && h.seq < res.heads.at(k-1).seq {
					return fmt.Errorf("checkpoint seq %d after %d: not in seq order", h.seq, res.heads.at(k-1).seq)
				}
				if lastKey < 0 || res.keyIDs[lastKey] != keyID {
					i := slices.Index(res.keyIDs, keyID)
					if i < 0 {
						i = len(res.keyIDs)
						res.keyIDs = append(res.keyIDs, strings.Clone(keyID)) // keyID is a view of the batch
					}
					lastKey = int32(i)
				}
				h.key, h.full = lastKey, -1
				if keep(h.seq) {
					c, err := decodeCheckpointRow(table, v[0].Any(), v[1].Any(), v[2].Any(), v[3].Any(), v[4].Any())
					if err != nil {
						return fmt.Errorf("checkpoint seq %d: %w", h.seq, err)
					}
					h.full = int32(len(res.full))
					res.full = append(res.full, c)
				}
				last.set(&v)
				res.heads.add(h)
				if n++; n%4096 == 0 {
					feed.publish(res.heads)
				}
			}
		}
	})
	if err != nil {
		feed.finish(nil, fmt.Errorf("read checkpoints: %w", err))
		return
	}
	// The newest is always kept whole: its signature covers the chain.
	if n := res.heads.len(); n > 0 {
		if res.newest, err = decodeCheckpointRow(table, last.any(0), last.any(1), last.any(2), last.any(3), last.any(4)); err != nil {
			feed.finish(nil, fmt.Errorf("read checkpoints: seq %d: %w", res.heads.at(n-1).seq, err))
			return
		}
	}
	feed.finish(res, nil)
}

// cpRowCopy is a checkpoint row's values copied out of a batch, into
// buffers reused from row to row.
type cpRowCopy struct {
	v     [5]sqlitebatch.Value
	bytes [5][]byte
}

func (r *cpRowCopy) set(v *[5]sqlitebatch.Value) {
	for i := range v {
		r.bytes[i] = append(r.bytes[i][:0], v[i].Bytes...)
		r.v[i] = v[i]
		r.v[i].Bytes = r.bytes[i]
	}
}

func (r *cpRowCopy) any(i int) any { return r.v[i].Any() }

// checkCheckpointValues is checkCheckpointRow on a row as read in a
// batch: of the stored types, its texts are checked as views (no copy);
// of others, as the driver would have returned them. The key id returned
// may be a view of the batch.
func checkCheckpointValues(v *[5]sqlitebatch.Value) (cpHead, string, error) {
	const I, T = sqlitebatch.Integer, sqlitebatch.Text
	if v[0].Type == I && v[1].Type == T && v[2].Type == T && v[3].Type == T && v[4].Type == T {
		return checkCheckpointFields(v[0].Int, view(v[1].Bytes), view(v[2].Bytes), view(v[3].Bytes), view(v[4].Bytes))
	}
	return checkCheckpointRow(v[0].Any(), v[1].Any(), v[2].Any(), v[3].Any(), v[4].Any())
}

// checkCheckpointRow checks a stored checkpoint's values as
// decodeCheckpointRow does, with the same errors, without decoding the
// signature or the time.
func checkCheckpointRow(seq, head, at, keyID, sig any) (h cpHead, key string, err error) {
	s, ok := seq.(int64)
	if !ok {
		return h, "", fmt.Errorf("seq is %T, not an integer", seq)
	}
	return checkCheckpointFields(s, asText(head), asText(at), asText(keyID), asText(sig))
}

// checkCheckpointFields is checkCheckpointRow's checks once the values
// are an integer and texts.
func checkCheckpointFields(seq int64, head, a, key, sig string) (h cpHead, _ string, err error) {
	h.seq = seq
	if h.head, err = ParseHash(head); err != nil {
		return h, "", err
	}
	if !canonicalTime(a) {
		_, err := parseTime(a)
		if err == nil {
			err = fmt.Errorf("time %.80q is not in canonical form", a)
		}
		return h, "", err
	}
	if err := checkKeyID(key); err != nil {
		return h, "", err
	}
	if len(sig) != 2*ed25519.SignatureSize || !isLowerHex(sig) {
		_, err := parseSignature(sig)
		if err == nil {
			err = errors.New("signature: not lower-case hex")
		}
		return h, "", err
	}
	return h, key, nil
}

// cpMatch holds the stored checkpoints' heads to the rows as they stream
// by in seq order: a cursor follows the rows through the heads, taking
// more from the feed when it runs out.
type cpMatch struct {
	feed   *cpFeed
	heads  cpHeads
	done   bool
	state  []uint8 // per head: 0 no row, 1 the row's hash matches, 2 it differs
	differ map[int]Hash
	next   int
	last   int64
}

func newCPMatch(feed *cpFeed) *cpMatch { return &cpMatch{feed: feed, differ: map[int]Hash{}} }

// record notes h as the hash of row seq. Rows come in ascending seq;
// should one not, the cursor is found again by binary search.
func (m *cpMatch) record(seq int64, h Hash) {
	if seq < m.last {
		m.next = m.heads.search(seq)
	}
	m.last = seq
	for i := m.next; ; i++ {
		for i >= m.heads.len() && !m.done {
			m.heads, m.done = m.feed.more(m.heads.len())
		}
		if i >= m.heads.len() || m.heads.at(i).seq > seq {
			return
		}
		if m.heads.at(i).seq < seq {
			m.next = i + 1
			continue
		}
		// Named by this checkpoint (and by any other at the same seq).
		for len(m.state) <= i {
			m.state = append(m.state, 0)
		}
		if m.heads.at(i).head == h {
			m.state[i] = 1
		} else {
			m.state[i] = 2
			m.differ[i] = h
		}
	}
}

// get is the hash of the row head i names, or nil if no row had its seq.
func (m *cpMatch) get(i int) *Hash {
	if i >= len(m.state) || m.state[i] == 0 {
		return nil
	}
	if m.state[i] == 1 {
		return &m.heads.at(i).head
	}
	h := m.differ[i]
	return &h
}
