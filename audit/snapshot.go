package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tablectl/tablectl/coup"
)

// KindSnapshot is a row holding the whole table as it stood after the
// commit it ends (coup.Table.Snapshot) and the time of the last input. It is
// a row of the chain like any other, so the checkpoints sign it; a
// controller starts from the newest one instead of replaying the whole
// trail, and every full replay checks that each one is exactly the table
// the rows before it build (a Difference otherwise).
const KindSnapshot = "ctl.snapshot"

// SnapshotEvery is how many rows the recorder lets pass between two
// snapshots by default: start-up replays at most about this many rows.
const SnapshotEvery = 20000

// snapshotBody is a snapshot row's body.
type snapshotBody struct {
	// LastAt is the time of the last input recorded: inputs never go back
	// before it.
	LastAt time.Time       `json:"last_at"`
	Table  json.RawMessage `json:"table"`
}

// SnapshotEvent is the row that snapshots t; lastAt is the last input's time.
func SnapshotEvent(t *coup.Table, lastAt time.Time) (Event, error) {
	b, err := t.Snapshot()
	if err != nil {
		return Event{}, err
	}
	return Event{Kind: KindSnapshot, Shoe: int64(t.ShoeNumber()), Body: snapshotBody{LastAt: lastAt.UTC(), Table: b}}, nil
}

// RestoreSnapshot rebuilds the table a snapshot row holds, with the time of
// the last input before it.
func RestoreSnapshot(rec Record) (*coup.Table, time.Time, error) {
	if rec.Kind != KindSnapshot {
		return nil, time.Time{}, fmt.Errorf("row %d is a %s, not a %s", rec.Seq, rec.Kind, KindSnapshot)
	}
	var b snapshotBody
	if err := json.Unmarshal(rec.Body, &b); err != nil {
		return nil, time.Time{}, fmt.Errorf("snapshot row %d: %w", rec.Seq, err)
	}
	t, err := coup.RestoreSnapshot(b.Table)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("snapshot row %d: %w", rec.Seq, err)
	}
	return t, b.LastAt, nil
}

// snapshotMatches reports whether a snapshot row holds exactly table t (and
// lastAt), in the canonical form the row stores.
func (r *Replayer) snapshotMatches(rec Record) error {
	ev, err := SnapshotEvent(r.table, r.lastAt)
	if err != nil {
		return err
	}
	want, err := r.enc.encode(ev.Body)
	if err != nil {
		return err
	}
	if !bytes.Equal(want, rec.Body) {
		return fmt.Errorf("the snapshot is not the table its rows build: recorded %.300s, the rules build %.300s", rec.Body, want)
	}
	return nil
}

// NewReplayerFrom starts a replay at a snapshot row: the table is the one
// it holds, and rows after it come next.
func NewReplayerFrom(snap Record, v ReplayVisitor) (*Replayer, error) {
	t, lastAt, err := RestoreSnapshot(snap)
	if err != nil {
		return nil, err
	}
	return &Replayer{table: t, lastAt: lastAt, visitor: v, maxDiff: 1000, enc: newCanonEncoder()}, nil
}

// LastSnapshot returns the newest snapshot row at or before seq to (0: the
// head); ok is false when there is none. It reads back from to, so it costs
// the rows since that snapshot, not the trail's length.
func (r *Reader) LastSnapshot(ctx context.Context, to int64) (rec Record, ok bool, err error) {
	return r.LastOfKind(ctx, KindSnapshot, to)
}

// LastOfKind returns the newest row of kind at or before seq to (0: the
// head), if the trail holds one. It reads back from to, so it is quick for
// a kind written often (a snapshot, the keyring at each segment's start).
func (r *Reader) LastOfKind(ctx context.Context, kind string, to int64) (rec Record, ok bool, err error) {
	if r.parts != nil {
		for i := len(r.parts) - 1; i >= 0; i-- {
			if rec, ok, err := r.parts[i].LastOfKind(ctx, kind, to); err != nil || ok {
				return rec, ok, err
			}
		}
		return Record{}, false, nil
	}
	if to <= 0 {
		to = 1<<63 - 1
	}
	rows, err := r.db.QueryContext(ctx, `SELECT seq, at, kind, shoe, coup, body, prev_hash, hash FROM events WHERE kind = ? AND seq <= ? ORDER BY seq DESC LIMIT 1`, kind, to)
	if err != nil {
		return Record{}, false, fmt.Errorf("read audit trail %s: last %s: %w", r.path, kind, err)
	}
	defer rows.Close()
	if !rows.Next() {
		return Record{}, false, rows.Err()
	}
	rec, err = scanRecord(rows)
	if err != nil {
		return Record{}, false, fmt.Errorf("read audit trail %s: last %s: %w", r.path, kind, err)
	}
	return rec, true, nil
}

// LastSnapshot is Reader.LastSnapshot on the store's trail.
func (s *Store) LastSnapshot(ctx context.Context, to int64) (Record, bool, error) {
	return s.LastOfKind(ctx, KindSnapshot, to)
}

// LastOfKind is Reader.LastOfKind on the rows still on the box.
func (s *Store) LastOfKind(ctx context.Context, kind string, to int64) (Record, bool, error) {
	if s.seg != nil {
		return s.seg.lastOfKind(ctx, kind, to)
	}
	return s.r.LastOfKind(ctx, kind, to)
}

// VerifyFrom checks what a start from row from needs, in time that does not
// grow with the trail: the schema and triggers; every row from from-1 to the
// head (hash, link, sequence); every checkpoint from there on; and, when
// keys are given, that the last checkpoint signs the head with one of them.
// The signed head's hash covers, through the chain, every row back to from,
// so a snapshot at from is as trustworthy as the key. The rows before from-1
// are left to a full Verify, which the controller runs in the background.
func (r *Reader) VerifyFrom(ctx context.Context, from int64, keys []ed25519.PublicKey) (*Report, error) {
	if r.parts != nil {
		return r.verifyPartsFrom(ctx, from, keys)
	}
	v := &verifyFromRun{r: r, rep: &Report{Path: r.path, Table: r.table, SignaturesChecked: len(keys) > 0}, hashes: map[int64]Hash{}}
	tx, err := r.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", r.path, err)
	}
	defer tx.Rollback()
	if err := checkSchemaObjects(ctx, tx, v.add); err != nil {
		return nil, fmt.Errorf("verify %s: %w", r.path, err)
	}
	if r.baseErr != nil {
		v.add(Finding{Kind: FindingMalformed, Detail: "the chain's base in meta: " + r.baseErr.Error()})
	}
	first := max(from-1, r.base.Seq+1)
	done, err := v.checkRows(ctx, tx, first)
	if err != nil || done {
		return v.report(err)
	}
	cps, bad, err := readCheckpointsFrom(ctx, tx, r.table, first)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", r.path, err)
	}
	for _, f := range bad {
		v.add(f)
	}
	byID := map[string]ed25519.PublicKey{}
	for _, k := range keys {
		byID[KeyID(k)] = k
	}
	last := v.checkCheckpoints(cps, byID)
	v.checkNewestSignature(last, byID, len(cps))
	if len(keys) > 0 {
		v.checkUnsignedTail(last)
	}
	return v.rep, nil
}

// verifyFromRun is one VerifyFrom: its report, the chain as read, and the
// hash of every row read (for the checkpoints that name them).
type verifyFromRun struct {
	r      *Reader
	rep    *Report
	prev   Head
	hashes map[int64]Hash
}

func (v *verifyFromRun) add(f Finding) { v.rep.add(1000, f) }

func (v *verifyFromRun) report(err error) (*Report, error) {
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", v.r.path, err)
	}
	return v.rep, nil
}

// checkRows checks every row from first to the head: hash, link and
// sequence. done says a row did not even read, which ends the check with
// what it found.
func (v *verifyFromRun) checkRows(ctx context.Context, tx *sql.Tx, first int64) (done bool, err error) {
	rows, err := tx.QueryContext(ctx, `SELECT seq, at, kind, shoe, coup, body, prev_hash, hash FROM events WHERE seq >= ? ORDER BY seq`, first)
	if err != nil {
		return false, fmt.Errorf("read events: %w", err)
	}
	defer rows.Close()
	v.prev = v.r.base
	started := false
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			v.add(Finding{FindingMalformed, v.prev.Seq + 1, err.Error()})
			return true, nil
		}
		v.checkRow(rec, first, started)
		started = true
		v.hashes[rec.Seq] = rec.Hash
		v.prev = Head{Seq: rec.Seq, Hash: rec.Hash}
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("read events: %w", err)
	}
	v.rep.Head = v.prev
	return false, nil
}

// checkRow checks one row against its fields and the row before it.
func (v *verifyFromRun) checkRow(rec Record, first int64, started bool) {
	prev, base := v.prev, v.r.base
	v.rep.Events++
	if rec.ComputeHash() != rec.Hash {
		v.add(Finding{FindingEdited, rec.Seq, fmt.Sprintf("stored hash %s, fields hash to %s", rec.Hash, rec.ComputeHash())})
	}
	switch {
	case !started && rec.Seq != first:
		v.add(Finding{FindingGap, first, fmt.Sprintf("rows %d to %d are missing", first, rec.Seq-1)})
	case started && rec.Seq != prev.Seq+1:
		v.add(Finding{FindingGap, prev.Seq + 1, fmt.Sprintf("rows %d to %d are missing", prev.Seq+1, rec.Seq-1)})
	case started && rec.PrevHash != prev.Hash:
		v.add(Finding{FindingBrokenLink, rec.Seq, fmt.Sprintf("prev_hash %s, row %d has hash %s", rec.PrevHash, prev.Seq, prev.Hash)})
	}
	if rec.Seq == base.Seq+1 && rec.PrevHash != base.Hash {
		v.add(Finding{FindingBrokenLink, rec.Seq, fmt.Sprintf("the file's first row does not link to its base (seq %d, hash %s)", base.Seq, base.Hash)})
	}
}

// checkCheckpoints checks that every checkpoint from first on names a row
// read, with its hash, under a key given; it returns the newest.
func (v *verifyFromRun) checkCheckpoints(cps []Checkpoint, byID map[string]ed25519.PublicKey) (last *Checkpoint) {
	for i := range cps {
		c := &cps[i]
		v.rep.Checkpoints++
		h, ok := v.hashes[c.Seq]
		switch {
		case c.Seq > v.prev.Seq:
			v.add(Finding{FindingTruncated, c.Seq, fmt.Sprintf("stored checkpoint names seq %d but the trail ends at seq %d", c.Seq, v.prev.Seq)})
		case !ok:
			v.add(Finding{FindingCheckpointMismatch, c.Seq, fmt.Sprintf("stored checkpoint names seq %d, which is missing", c.Seq)})
		case h != c.HeadHash:
			v.add(Finding{FindingCheckpointMismatch, c.Seq, fmt.Sprintf("stored checkpoint says hash %s, the row has %s", c.HeadHash, h)})
		}
		if len(byID) > 0 {
			if _, ok := byID[c.KeyID]; !ok {
				v.add(Finding{FindingUnknownKey, c.Seq, fmt.Sprintf("stored checkpoint signed by key %s, which is not among the keys given", c.KeyID)})
			}
		}
		if last == nil || c.Seq > last.Seq {
			last = c
		}
	}
	return last
}

// checkNewestSignature checks only the newest checkpoint's signature, as
// Verify does by default: its head covers, through the chain checked, every
// row back to from. The background history check verifies every
// signature.
func (v *verifyFromRun) checkNewestSignature(last *Checkpoint, byID map[string]ed25519.PublicKey, stored int) {
	if last != nil {
		v.rep.newest = last.Seq
	}
	k, ok := byID[keyIDOf(last)]
	if !ok {
		return
	}
	v.rep.SignaturesVerified = 1
	v.rep.SignaturesUnchecked = stored - 1
	if err := last.VerifySignature(k); err != nil {
		v.add(Finding{FindingBadSignature, last.Seq, err.Error()})
	} else if h, ok := v.hashes[last.Seq]; ok && h == last.HeadHash {
		v.rep.SignedHead = last.Seq
	}
}

// checkUnsignedTail finds rows after the newest checkpoint, which the
// controller (signing every commit) did not write.
func (v *verifyFromRun) checkUnsignedTail(last *Checkpoint) {
	base, head := v.r.base, v.prev
	if head.Seq <= base.Seq || (last != nil && last.Seq >= head.Seq) {
		return
	}
	from := base.Seq + 1
	if last != nil {
		from = last.Seq + 1
	}
	v.add(Finding{FindingUnsignedRows, from, fmt.Sprintf("rows %d to %d come after the last checkpoint: the controller signs every commit, so it did not write them", from, head.Seq)})
}

func keyIDOf(c *Checkpoint) string {
	if c == nil {
		return ""
	}
	return c.KeyID
}

// readCheckpointsFrom reads the stored checkpoints from seq from on; rows
// that do not parse come back as malformed findings rather than errors.
func readCheckpointsFrom(ctx context.Context, q queryer, table string, from int64) ([]Checkpoint, []Finding, error) {
	rows, err := q.QueryContext(ctx, `SELECT seq, head_hash, signed_at, key_id, signature FROM checkpoints WHERE seq >= ? ORDER BY seq`, from)
	if err != nil {
		return nil, nil, fmt.Errorf("read checkpoints: %w", err)
	}
	defer rows.Close()
	var out []Checkpoint
	var bad []Finding
	for rows.Next() {
		var seq, head, at, keyID, sig any
		if err := rows.Scan(&seq, &head, &at, &keyID, &sig); err != nil {
			return nil, nil, fmt.Errorf("read checkpoints: %w", err)
		}
		c, err := decodeCheckpointRow(table, seq, head, at, keyID, sig)
		if err != nil {
			s, _ := seq.(int64)
			bad = append(bad, Finding{Kind: FindingMalformed, Seq: s, Detail: "stored checkpoint: " + err.Error()})
			continue
		}
		out = append(out, c)
	}
	return out, bad, rows.Err()
}

// ErrHistory: the background check of the history before the snapshot a
// controller started from found something wrong. Like ErrTampered, the
// table is suspended and the trail left to surveillance.
var ErrHistory = errors.New("audit trail history fails verification")
