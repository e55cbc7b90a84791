package floor

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/tablectl/tablectl/audit"
)

// What a table's rows wait for, and how much of it the floor holds.
const (
	// PendingMax bounds the rows of one table held pending: past it, new
	// ones are quarantined (an honest table's are asked for again as a
	// gap once its next checkpoint names them).
	PendingMax = 4096
	// pendingPerSeq bounds the rows held at one seq: an honest table
	// sends one, the others are someone else's.
	pendingPerSeq = 4
	// PendingGrace is how long a row is held for a checkpoint of its
	// table to cover it before it is quarantined. An honest table signs
	// every commit (the controller's checkpoint_every is 1): its rows are
	// covered within the second.
	PendingGrace = 2 * time.Minute
	// QuarantineAlertEvery: one quarantine alert per table and reason in
	// each such interval; the counts go on in the quarantine table.
	QuarantineAlertEvery = 10 * time.Minute
)

// Reasons a message of a registered table is quarantined.
const (
	QuarantineMalformed    = "malformed"        // not a row or a checkpoint
	QuarantineBadHash      = "bad_hash"         // a row whose hash is not its fields'
	QuarantineUnsigned     = "unsigned"         // a row no checkpoint of the table covered within PendingGrace
	QuarantinePendingFull  = "pending_full"     // a row past PendingMax (or pendingPerSeq)
	QuarantineBadSignature = "bad_signature"    // a checkpoint no registered key of the table signed
	QuarantineOtherTable   = "other_table"      // a checkpoint naming another table than its subject's
	QuarantineOversized    = "oversized"        // more than MaxMessageBytes
	QuarantineUnregistered = "unregistered"     // a table not in the registry (counted by the witness only)
	QuarantineNoTable      = "no_table_subject" // a subject that names no table
)

// heldRow is a row held pending until a checkpoint its table signed
// covers it.
type heldRow struct {
	row   *Row
	since time.Time // when the floor first held it
	at    time.Time // when the stream stored it (zero: not known)
	src   string
}

// quarantined counts what a batch kept out of a table's witnessed copy
// for one reason.
type quarantined struct {
	reason, src, detail string
	n                   int64
}

// seqHash names a row by its seq and hash.
type seqHash struct {
	seq  int64
	hash audit.Hash
}

// judge decides, in memory and the same for every store, what a batch
// does to each table given what was read of it: the rows and checkpoints
// to store, the forks to keep aside, the rows to hold and to quarantine,
// the table's new line and the alerts raised.
//
// A row becomes the table's witnessed row only when something the table
// signed covers it: the head of a checkpoint signed by the table's
// registered key, or the prev_hash of a row so covered or witnessed
// already. Until then it is held (bounded, PendingGrace); what no key of
// the table signed never raises a tamper alert, never moves the table's
// line and never becomes a fork: it is quarantined and counted. Tamper
// is what the table signed contradicting what was witnessed.
func judge(tables []string, byTable map[string][]item, reads []tableRead, reg *Registry, witness string, now time.Time) ([]tableWrite, []Alert) {
	var alerts []Alert
	out := make([]tableWrite, len(tables))
	for i, t := range tables {
		var a []Alert
		out[i], a = judgeTable(t, byTable[t], &reads[i], reg, witness, now)
		alerts = append(alerts, a...)
	}
	return out, alerts
}

// judging is one table's judging of a batch.
type judging struct {
	t       string
	r       *tableRead
	reg     *Registry
	witness string
	now     time.Time
	alerts  []Alert
	quar    map[string]*quarantined
}

func (j *judging) raise(kind AlertKind, key string, seq int64, msg string) {
	j.alerts = append(j.alerts, Alert{State: "raised", Table: j.t, Kind: kind, Seq: seq, Message: msg, Tamper: Tamper(kind), Witness: j.witness, At: j.now, key: key})
}

// quarantine counts one message kept out, for reason.
func (j *judging) quarantine(reason, src, detail string) {
	q := j.quar[reason]
	if q == nil {
		q = &quarantined{reason: reason, src: src, detail: detail}
		j.quar[reason] = q
	}
	q.n++
}

// quarantineAlerts are the batch's quarantine alerts, one per reason,
// keyed by the interval so a flood raises one per QuarantineAlertEvery;
// raised and resolved at once: a notice, the count goes on in the
// quarantine table.
func (j *judging) quarantineAlerts() []quarantined {
	var out []quarantined
	for _, reason := range slices.Sorted(mapKeys(j.quar)) {
		q := j.quar[reason]
		out = append(out, *q)
		bucket := j.now.Truncate(QuarantineAlertEvery).Unix()
		j.alerts = append(j.alerts, Alert{State: "raised", Table: j.t, Kind: AlertQuarantined, Witness: j.witness, At: j.now, over: j.now,
			key: "q-" + reason + "-" + strconv.FormatInt(bucket, 10),
			Message: fmt.Sprintf("%d message(s) on %s's subjects quarantined (%s), not witnessed: no key of the table signed them; first from %s: %s",
				q.n, j.t, reason, q.src, q.detail)})
	}
	return out
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// judgeTable judges one table's items of a batch.
func judgeTable(t string, its []item, r *tableRead, reg *Registry, witness string, now time.Time) (tableWrite, []Alert) {
	w := tableWrite{table: t}
	if _, ok := reg.Tables[t]; !ok {
		// The witness drops these before judging (Witness.prepare, Take);
		// nothing of an unregistered table is stored.
		w.noLine = true
		return w, nil
	}
	j := &judging{t: t, r: r, reg: reg, witness: witness, now: now, quar: map[string]*quarantined{}}
	rows, cps, signedAt := j.sort(its)
	cps = j.newCheckpoints(cps)
	pool := j.pool(rows)
	covered := j.cover(pool, cps)
	ins, forks := j.rows(covered)
	j.checkpoints(cps)
	j.pending(&w, pool, covered)
	w.quarantine = j.quarantineAlerts()
	w.ins, w.forks = ins, forks
	for _, c := range cps {
		w.insCP = append(w.insCP, c)
		w.verified = append(w.verified, true)
	}
	j.line(&w, ins, cps, covered, signedAt)
	return w, j.alerts
}

// sort reads a table's items: rows whose hash is their fields', and
// checkpoints signed by a registered key of the table; the rest is
// quarantined. signedAt maps each item's stream time by what it is.
func (j *judging) sort(its []item) (rows []heldRow, cps []*audit.Checkpoint, at map[any]time.Time) {
	at = map[any]time.Time{}
	for _, it := range its {
		switch {
		case it.row != nil:
			if got := it.row.ComputeHash(); got != it.row.Hash {
				j.quarantine(QuarantineBadHash, it.src, fmt.Sprintf("row %d: hash %s is not the hash of its fields (%s)", it.row.Seq, short(it.row.Hash), short(got)))
				continue
			}
			rows = append(rows, heldRow{row: it.row, since: j.now, at: it.at, src: it.src})
		case it.cp != nil:
			c := it.cp
			if c.Table != j.t {
				j.quarantine(QuarantineOtherTable, it.src, fmt.Sprintf("a checkpoint of table %q on %s's subject", c.Table, j.t))
				continue
			}
			sig := it.sig
			if !it.sigDone {
				sig = j.reg.verify(j.t, *c)
			}
			if sig != nil {
				j.quarantine(QuarantineBadSignature, it.src, fmt.Sprintf("checkpoint %d: %v", c.Seq, sig))
				continue
			}
			cps = append(cps, c)
			at[c] = it.at
		default:
			j.quarantine(QuarantineMalformed, it.src, it.bad)
		}
	}
	return rows, cps, at
}

// newCheckpoints drops the checkpoints witnessed already (redeliveries)
// and those twice in the batch.
func (j *judging) newCheckpoints(cps []*audit.Checkpoint) []*audit.Checkpoint {
	seen := map[cpRef]bool{}
	var out []*audit.Checkpoint
	for _, c := range cps {
		ref := cpRef{seq: c.Seq, head: c.HeadHash, ns: c.SignedAt.UnixNano()}
		if seen[ref] || slices.Contains(j.r.cpsAt[c.Seq], ref) {
			continue
		}
		seen[ref] = true
		out = append(out, c)
	}
	return out
}

// pool is every row that may be covered: those held and the batch's,
// without the ones witnessed already (redeliveries) and twice.
func (j *judging) pool(rows []heldRow) map[seqHash]*heldRow {
	pool := map[seqHash]*heldRow{}
	for k := range j.r.held {
		h := &j.r.held[k]
		pool[seqHash{h.row.Seq, h.row.Hash}] = h
	}
	for k := range rows {
		h := &rows[k]
		key := seqHash{h.row.Seq, h.row.Hash}
		if have, ok := j.r.rows[h.row.Seq]; ok && have.hash == h.row.Hash {
			continue
		}
		if _, ok := pool[key]; !ok {
			pool[key] = h
		}
	}
	return pool
}

// cover walks down from each anchor, what the table signed: the heads
// of the batch's checkpoints and of those witnessed at the pool's seqs,
// and the prev_hash of each witnessed row above a pool row. Each row of
// the pool on such a walk is covered: the signature chains back to it.
func (j *judging) cover(pool map[seqHash]*heldRow, cps []*audit.Checkpoint) map[seqHash]*heldRow {
	var anchors []seqHash
	for _, c := range cps {
		anchors = append(anchors, seqHash{c.Seq, c.HeadHash})
	}
	for key := range pool {
		for _, c := range j.r.cpsAt[key.seq] {
			anchors = append(anchors, seqHash{c.seq, c.head})
		}
		if n, ok := j.r.rows[key.seq+1]; ok {
			anchors = append(anchors, seqHash{key.seq, n.prev})
		}
	}
	covered := map[seqHash]*heldRow{}
	for _, a := range anchors {
		for a.seq >= 1 {
			h, ok := pool[a]
			if !ok || covered[a] != nil {
				break
			}
			covered[a] = h
			a = seqHash{a.seq - 1, h.row.PrevHash}
		}
	}
	return covered
}

// rows judges the covered rows, in seq order, against what was
// witnessed: each is the table's signed word, so a contradiction is
// tamper.
func (j *judging) rows(covered map[seqHash]*heldRow) (ins, forks []*Row) {
	rows := make([]*Row, 0, len(covered))
	for _, h := range covered {
		rows = append(rows, h.row)
	}
	slices.SortFunc(rows, func(a, b *Row) int { return cmpInt(a.Seq, b.Seq) })
	t, r := j.t, j.r
	for _, row := range rows {
		if have, ok := r.rows[row.Seq]; ok {
			if have.hash != row.Hash {
				// One alert for a run of forked rows (a rewritten
				// stretch sent again): the forks table keeps each.
				if !r.forkAt[row.Seq-1] {
					j.raise(AlertFork, row.seqKey(), row.Seq, fmt.Sprintf("row %d of %s seen with two hashes, both under the table's signature: %s witnessed, now %s (and the rows after it that differ too, kept aside)", row.Seq, t, short(have.hash), short(row.Hash)))
				}
				r.forkAt[row.Seq] = true
				forks = append(forks, row)
			}
			continue
		}
		if row.Seq == 1 && row.PrevHash != (audit.Hash{}) {
			j.raise(AlertBrokenLink, row.seqKey(), row.Seq, fmt.Sprintf("row 1 of %s: prev_hash %s, want zero", t, short(row.PrevHash)))
		}
		if p, ok := r.rows[row.Seq-1]; ok && p.hash != row.PrevHash {
			j.raise(AlertBrokenLink, row.seqKey(), row.Seq, fmt.Sprintf("row %d of %s: prev_hash %s, but row %d was witnessed with hash %s", row.Seq, t, short(row.PrevHash), row.Seq-1, short(p.hash)))
		}
		if n, ok := r.rows[row.Seq+1]; ok && n.prev != row.Hash {
			j.raise(AlertBrokenLink, strconv.FormatInt(row.Seq+1, 10), row.Seq+1, fmt.Sprintf("row %d of %s: prev_hash %s, but row %d arrived with hash %s", row.Seq+1, t, short(n.prev), row.Seq, short(row.Hash)))
		}
		for _, c := range r.cpsAt[row.Seq] {
			if c.head != row.Hash {
				j.raise(AlertCheckpointClash, "row-"+row.seqKey(), row.Seq, fmt.Sprintf("row %d of %s has hash %s, but a checkpoint witnessed earlier signed head %s", row.Seq, t, short(row.Hash), short(c.head)))
			}
		}
		r.rows[row.Seq] = neighbour{prev: row.PrevHash, hash: row.Hash}
		ins = append(ins, row)
	}
	return ins, forks
}

// checkpoints judges the batch's signed checkpoints against the row at
// their seq, the other checkpoints at it, and those signed just before
// and after (backwards).
func (j *judging) checkpoints(cps []*audit.Checkpoint) {
	t, r := j.t, j.r
	seen := map[cpRef]bool{}
	for _, c := range cps {
		ref := cpRef{seq: c.Seq, head: c.HeadHash, ns: c.SignedAt.UnixNano()}
		seen[ref] = true
		if row, have := r.rows[c.Seq]; have && row.hash != c.HeadHash && !r.forkAt[c.Seq] {
			j.raise(AlertCheckpointClash, cpKey(c), c.Seq, fmt.Sprintf("checkpoint %d of %s signs head %s, but row %d was witnessed with hash %s", c.Seq, t, short(c.HeadHash), c.Seq, short(row.hash)))
		}
		for _, o := range r.cpsAt[c.Seq] {
			if o.head != c.HeadHash {
				j.raise(AlertCheckpointClash, cpKey(c), c.Seq, fmt.Sprintf("checkpoint %d of %s signs head %s, another witnessed at that seq signed %s", c.Seq, t, short(c.HeadHash), short(o.head)))
				break
			}
		}
		r.cpsAt[c.Seq] = append(r.cpsAt[c.Seq], ref)
		r.cpsAside = append(r.cpsAside, ref)
	}
	if len(cps) == 0 {
		return
	}
	// Backwards: in signing order, a seq lower than the one before.
	order := slices.Clone(r.cpsAside)
	slices.SortFunc(order, func(a, b cpRef) int {
		if a.ns != b.ns {
			return cmpInt(a.ns, b.ns)
		}
		return cmpInt(a.seq, b.seq)
	})
	order = slices.Compact(order)
	for k := 1; k < len(order); k++ {
		if order[k].seq < order[k-1].seq && (seen[order[k]] || seen[order[k-1]]) {
			c := order[k]
			j.raise(AlertCheckpointBack, "back-"+strconv.FormatInt(c.seq, 10)+"-"+strconv.FormatInt(c.ns, 10), c.seq,
				fmt.Sprintf("checkpoint of %s signed at %s names seq %d, below seq %d of the one signed before it", t, time.Unix(0, c.ns).UTC().Format(time.RFC3339Nano), c.seq, order[k-1].seq))
		}
	}
}

// pending decides what of the pool not covered is held on, and what is
// released: covered rows leave the pending rows; a row held past
// PendingGrace, or one past the bounds, is quarantined.
func (j *judging) pending(w *tableWrite, pool, covered map[seqHash]*heldRow) {
	perSeq := map[int64]int{}
	kept := 0
	var fresh []*heldRow
	for _, h := range j.r.held {
		key := seqHash{h.row.Seq, h.row.Hash}
		switch have, ok := j.r.rows[h.row.Seq]; {
		case covered[key] != nil, ok && have.hash == h.row.Hash:
			w.release = append(w.release, h)
		case j.now.Sub(h.since) >= PendingGrace:
			w.release = append(w.release, h)
			j.quarantine(QuarantineUnsigned, h.src, fmt.Sprintf("row %d held %s, and no checkpoint of the table covered it", h.row.Seq, j.now.Sub(h.since).Round(time.Second)))
		default:
			perSeq[h.row.Seq]++
			kept++
		}
	}
	held := map[seqHash]bool{}
	for _, h := range j.r.held {
		held[seqHash{h.row.Seq, h.row.Hash}] = true
	}
	for key, h := range pool {
		if covered[key] == nil && !held[key] {
			fresh = append(fresh, h)
		}
	}
	// The lowest seqs first: the table's next rows are what it signs next.
	slices.SortFunc(fresh, func(a, b *heldRow) int { return cmpInt(a.row.Seq, b.row.Seq) })
	for _, h := range fresh {
		if kept >= PendingMax || perSeq[h.row.Seq] >= pendingPerSeq {
			j.quarantine(QuarantinePendingFull, h.src, fmt.Sprintf("row %d: %d rows of the table held already", h.row.Seq, kept))
			continue
		}
		perSeq[h.row.Seq]++
		kept++
		w.hold = append(w.hold, *h)
	}
}

// line is the table's new line: how far it is contiguous, its highest
// seq, its last checkpoint and when it last spoke, from what it signed
// only.
func (j *judging) line(w *tableWrite, ins []*Row, cps []*audit.Checkpoint, covered map[seqHash]*heldRow, cpAt map[any]time.Time) {
	st, r, now := j.r.st, j.r, j.now
	for _, c := range cps {
		if c.Seq >= st.cpSeq {
			st.cpSeq, st.cpSignedAt = c.Seq, &c.SignedAt
		}
	}
	// What the table said, in the stream's time: the covered rows and
	// signed checkpoints of this batch.
	var signed []item
	seenAt := time.Time{}
	for _, h := range covered {
		if !h.at.IsZero() {
			signed = append(signed, item{table: j.t, row: h.row, at: h.at})
			seenAt = later(seenAt, h.at)
		}
	}
	for _, c := range cps {
		signed = append(signed, item{table: j.t, cp: c, at: cpAt[c]})
		seenAt = later(seenAt, cpAt[c])
	}
	if len(covered) == 0 && len(cps) == 0 {
		if !st.known {
			w.noLine = true
		}
		// Nothing signed: the line stays as it was.
		w.contig, w.maxSeq, w.holeSince, w.cpSeq, w.cpSignedAt = st.contig, st.max, st.holeSince, st.cpSeq, st.cpSignedAt
		if st.lastSeen != nil {
			w.seenAt = *st.lastSeen
		}
		return
	}
	if seenAt.IsZero() {
		seenAt = now
	}
	hb := j.reg.heartbeat(j.t)
	for _, q := range streamSilences(st, signed, hb) {
		j.alerts = append(j.alerts, Alert{State: "raised", Table: j.t, Kind: AlertSilent, Seq: q.seq, Witness: j.witness, At: now, over: now,
			key: strconv.FormatInt(q.from.UnixNano(), 10),
			Message: fmt.Sprintf("nothing from %s in the floor stream from %s to %s (%s; heartbeat %s): found when row %d was witnessed, after it",
				j.t, q.from.Format(time.RFC3339), q.to.Format(time.RFC3339), q.to.Sub(q.from).Round(time.Millisecond), hb, q.seq+1)})
	}
	contig, maxSeq := st.contig, st.max
	for _, row := range ins {
		maxSeq = max(maxSeq, row.Seq)
	}
	// A signed checkpoint says the table has rows up to its seq: rows
	// lost at the tail (the last ones before the table went quiet) are a
	// gap too, asked for like any other.
	for _, c := range cps {
		maxSeq = max(maxSeq, c.Seq)
	}
	for {
		if _, ok := r.rows[contig+1]; !ok {
			break
		}
		contig++
	}
	rescan := contig < maxSeq && contig > st.contig && st.max > st.contig
	holeSince := st.holeSince
	if contig >= maxSeq {
		holeSince = nil
	} else if st.holeSince == nil {
		holeSince = &now
	}
	w.contig, w.maxSeq, w.seenAt, w.holeSince, w.cpSeq, w.cpSignedAt, w.rescan = contig, maxSeq, seenAt, holeSince, st.cpSeq, st.cpSignedAt, rescan
	// A message stored before the silence (a redelivery) does not end
	// it; one the table sent since does.
	w.resolveSilent = st.silent && (st.lastSeen == nil || seenAt.After(*st.lastSeen))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// readSeqs are the seqs a store reads of a table before judging its
// items and the rows it holds: the witnessed rows at, before and after
// each row's seq and at each checkpoint's (seqs), the checkpoints at
// each (cpSeqs), and the signing times of the batch's checkpoints.
func readSeqs(its []item, held []heldRow) (seqs, cpSeqs, cpNs []int64) {
	for _, it := range its {
		if it.row != nil {
			seqs = append(seqs, it.row.Seq-1, it.row.Seq, it.row.Seq+1)
			cpSeqs = append(cpSeqs, it.row.Seq)
		}
		if it.cp != nil {
			seqs = append(seqs, it.cp.Seq)
			cpSeqs = append(cpSeqs, it.cp.Seq)
			cpNs = append(cpNs, it.cp.SignedAt.UnixNano())
		}
	}
	for _, h := range held {
		seqs = append(seqs, h.row.Seq-1, h.row.Seq, h.row.Seq+1)
		cpSeqs = append(cpSeqs, h.row.Seq)
	}
	return seqs, cpSeqs, cpNs
}
