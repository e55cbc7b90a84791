package audit

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// FindingKind says what Verify found wrong.
type FindingKind string

// The findings Verify reports. Seq names the row (or checkpoint) concerned;
// it is 0 for schema findings.
const (
	// FindingEdited: a row's stored hash is not the hash of its fields:
	// the row was changed after it was written.
	FindingEdited FindingKind = "edited"
	// FindingBrokenLink: a row's prev_hash is not the previous row's hash:
	// a row before it was replaced along with its hash, or rows were spliced.
	FindingBrokenLink FindingKind = "broken_link"
	// FindingGap: rows are missing (deleted); Seq is the first missing one.
	FindingGap FindingKind = "gap"
	// FindingTruncated: a checkpoint names a seq beyond the trail's head:
	// rows were cut off the end.
	FindingTruncated FindingKind = "truncated"
	// FindingCheckpointMismatch: the row a checkpoint names is missing or
	// has another hash: the chain was rewritten behind the checkpoint.
	FindingCheckpointMismatch FindingKind = "checkpoint_mismatch"
	// FindingBadSignature: a checkpoint's signature does not verify.
	FindingBadSignature FindingKind = "bad_signature"
	// FindingUnknownKey: a checkpoint is signed by a key not among those
	// given, so it cannot be trusted.
	FindingUnknownKey FindingKind = "unknown_key"
	// FindingWrongTable: an external checkpoint is of another table.
	FindingWrongTable FindingKind = "wrong_table"
	// FindingMissingTrigger: an append-only trigger was dropped.
	FindingMissingTrigger FindingKind = "missing_trigger"
	// FindingAlteredTrigger: a trigger differs from the one the store
	// creates, or an unknown trigger was added.
	FindingAlteredTrigger FindingKind = "altered_trigger"
	// FindingAlteredSchema: a table or index is missing or differs.
	FindingAlteredSchema FindingKind = "altered_schema"
	// FindingUnsignedRows: rows after the last checkpoint. The controller
	// signs a checkpoint in every transaction, so such rows were written
	// by something else (or the trail was cut back to before a checkpoint
	// and the checkpoint removed). Checked only when keys are given.
	FindingUnsignedRows FindingKind = "unsigned_rows"
	// FindingForgedCommand: a recorded command (in.cmd) whose signature
	// does not verify with a key the keyring holds for its supervisor, or
	// that says something else than what was signed. Found by the command
	// package's CheckTrail, reported here.
	FindingForgedCommand FindingKind = "forged_command"
	// FindingMalformed: a stored value cannot be decoded (wrong type, a
	// hash that is not 64 hex digits, a time not in stored form).
	FindingMalformed FindingKind = "malformed"
)

// Finding is one problem Verify found.
type Finding struct {
	Kind   FindingKind `json:"kind"`
	Seq    int64       `json:"seq"`
	Detail string      `json:"detail"`
}

func (f Finding) String() string {
	if f.Seq == 0 {
		return fmt.Sprintf("%s: %s", f.Kind, f.Detail)
	}
	return fmt.Sprintf("seq %d: %s: %s", f.Seq, f.Kind, f.Detail)
}

// VerifyOptions are the outside evidence Verify checks the trail against.
type VerifyOptions struct {
	// Checkpoints are copies held elsewhere (see ReadCheckpointFile). Each
	// is checked like a stored one, and catches truncation and rewriting
	// that also removed the stored checkpoints.
	Checkpoints []Checkpoint
	// PublicKeys verify checkpoint signatures, matched by key id. With
	// none, signatures are not checked and Report.SignaturesChecked is
	// false.
	//
	// Which signatures: by default the anchors only. They are the newest
	// stored checkpoint, every external checkpoint, and every checkpoint at
	// a seq in Anchors. The newest checkpoint signs a head whose hash, through the chain
	// every row and link of which is checked, covers every row before it,
	// as a signed tree head does in Certificate Transparency: one signature
	// authenticates the whole trail up to it. The other checkpoints' heads
	// are still held to the chain (checkpoint_mismatch), only their
	// signatures are not checked. A bad signature on one of those, behind
	// a valid chain, means the signer itself misbehaved (the chain was not
	// changed, or the newest signature would not hold): only
	// EverySignature finds that.
	PublicKeys []ed25519.PublicKey
	// EverySignature checks every checkpoint's signature (the forensic
	// mode), on all cores while the rows are read.
	EverySignature bool
	// Anchors are more seqs whose checkpoints' signatures are always
	// checked: segment seals, say, which a later segment's chain starts
	// from.
	Anchors []int64
	// MaxFindings caps the findings listed (the rest are counted in
	// Report.Omitted); 0 is 1000.
	MaxFindings int
}

// Report is what Verify found.
type Report struct {
	Path  string `json:"path"`
	Table string `json:"table"`
	// Events is the number of rows read; Head the last one.
	Events int64 `json:"events"`
	Head   Head  `json:"head"`
	// Checkpoints is the number of checkpoints checked, stored and external.
	Checkpoints       int       `json:"checkpoints"`
	SignaturesChecked bool      `json:"signatures_checked"`
	Findings          []Finding `json:"findings"`
	// Omitted counts findings past VerifyOptions.MaxFindings.
	Omitted int64 `json:"omitted,omitempty"`
	// Segments is how many files a trail of segments read (0 for one file).
	Segments int `json:"segments,omitempty"`
	// EverySignature says every checkpoint's signature was checked; else
	// only the anchors' (VerifyOptions.PublicKeys).
	EverySignature bool `json:"every_signature"`
	// SignaturesVerified is the number of checkpoint signatures checked,
	// SignaturesUnchecked the number left unchecked (not anchors).
	SignaturesVerified  int `json:"signatures_verified"`
	SignaturesUnchecked int `json:"signatures_unchecked"`
	// SignedHead is the seq of the newest stored checkpoint whose signature
	// verified and whose head the chain holds: it authenticates rows 1 to
	// SignedHead. 0 when there is none.
	SignedHead int64 `json:"signed_head"`
	newest     int64 // the newest stored checkpoint's seq
	// Unverifiable says why the signatures could not be checked with the
	// keys given: no checkpoint is signed by any of them (a wrong key
	// file, not tampering). OK is then false, but Tampered is not.
	Unverifiable string `json:"unverifiable,omitempty"`
}

// OK reports whether the trail is clean and, when keys were given, every
// signature was checked with them.
func (r *Report) OK() bool { return !r.Tampered() && r.Unverifiable == "" }

// Tampered reports whether Verify found anything wrong with the trail.
func (r *Report) Tampered() bool { return len(r.Findings) > 0 || r.Omitted > 0 }

func (r *Report) add(limit int, f Finding) {
	if len(r.Findings) >= limit {
		r.Omitted++
		return
	}
	r.Findings = append(r.Findings, f)
}

// Add adds a finding found by a check outside this package (a recorded
// command that does not verify, say), within the report's cap.
func (r *Report) Add(f Finding) { r.add(1000, f) }

// WriteText writes the report for a person: one line per finding, then a
// summary line.
func (r *Report) WriteText(w io.Writer) error {
	for _, f := range r.Findings {
		if _, err := fmt.Fprintln(w, f); err != nil {
			return err
		}
	}
	if r.Omitted > 0 {
		fmt.Fprintf(w, "... and %d more findings\n", r.Omitted)
	}
	verdict := "OK"
	sigs := "signatures verified"
	switch {
	case r.Tampered():
		verdict = fmt.Sprintf("TAMPERED: %d findings", int64(len(r.Findings))+r.Omitted)
	case r.Unverifiable != "":
		verdict = "UNVERIFIED"
	}
	switch {
	case r.Unverifiable != "":
		sigs = "signatures NOT checked: " + r.Unverifiable
	case !r.SignaturesChecked:
		sigs = "signatures NOT checked (no public key)"
	default:
		sigs = r.signatureText()
	}
	segs := ""
	if r.Segments > 0 {
		segs = fmt.Sprintf(" in %d segments", r.Segments)
	}
	_, err := fmt.Fprintf(w, "%s: %s table %q, %d events%s, head seq %d hash %s, %d checkpoints, %s\n",
		verdict, r.Path, r.Table, r.Events, segs, r.Head.Seq, r.Head.Hash, r.Checkpoints, sigs)
	return err
}

// signatureText says which signatures were checked, when keys were given.
func (r *Report) signatureText() string {
	newest := "no checkpoint's signature verified"
	switch {
	case r.SignedHead > 0 && r.SignedHead == r.newest:
		newest = fmt.Sprintf("newest checkpoint at seq %d verified, covering %d rows", r.SignedHead, r.SignedHead)
	case r.SignedHead > 0:
		newest = fmt.Sprintf("the newest checkpoint (seq %d) did not verify; the newest that did is at seq %d, covering %d rows", r.newest, r.SignedHead, r.SignedHead)
	case r.newest > 0:
		newest = fmt.Sprintf("the newest checkpoint (seq %d) did not verify", r.newest)
	}
	switch {
	case r.EverySignature:
		return fmt.Sprintf("signatures: every checkpoint's checked (%d); %s", r.SignaturesVerified, newest)
	case r.SignaturesUnchecked == 0:
		return fmt.Sprintf("signatures: %s; %d checked, none left unchecked", newest, r.SignaturesVerified)
	}
	return fmt.Sprintf("signatures: %s; %d checked, %d earlier checkpoints' signatures not checked (--every-signature checks them)",
		newest, r.SignaturesVerified, r.SignaturesUnchecked)
}

// WriteJSON writes the report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	out := *r
	if out.Findings == nil {
		out.Findings = []Finding{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// Verify opens the trail at path read-only and checks it; see
// Reader.Verify.
func Verify(ctx context.Context, path string, opt VerifyOptions) (*Report, error) {
	r, err := OpenReader(ctx, path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Verify(ctx, opt)
}

// Verify checks the whole trail from one consistent snapshot, streaming the
// rows: every row's hash, every link, the sequence, every stored and given
// checkpoint (signature, and the row it names), and the schema and
// triggers. Problems are findings in the report; an error means the check
// could not be done (the file is unreadable, or not a trail).
//
// Without external checkpoints, cutting rows off the end and deleting the
// stored checkpoints past the cut leaves a shorter trail that verifies:
// only a checkpoint held elsewhere catches that.
func (r *Reader) Verify(ctx context.Context, opt VerifyOptions) (*Report, error) {
	if r.parts != nil {
		return r.verifyParts(ctx, opt)
	}
	limit := opt.MaxFindings
	if limit <= 0 {
		limit = 1000
	}
	rep := &Report{Path: r.path, Table: r.table, SignaturesChecked: len(opt.PublicKeys) > 0, EverySignature: opt.EverySignature}
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", r.path, err)
	}
	defer conn.Close()
	var tx *sql.Tx
	// The schema is read first: that takes the snapshot every check uses.
	second, secondTx, err := snapshotConns(ctx, r.db, conn, func() error {
		if tx, err = conn.BeginTx(ctx, nil); err != nil {
			return err
		}
		return checkSchemaObjects(ctx, tx, func(f Finding) { rep.add(limit, f) })
	})
	if tx != nil {
		defer tx.Rollback()
	}
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", r.path, err)
	}
	if r.baseErr != nil {
		rep.add(limit, Finding{Kind: FindingMalformed, Detail: "the chain's base in meta: " + r.baseErr.Error()})
	}
	conns := []*sql.Conn{conn}
	if second != nil {
		defer second.Close()
		defer secondTx.Rollback()
		conns = append(conns, second)
	}

	stored, bad, err := readCheckpointsRaw(ctx, conn, r.table)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", r.path, err)
	}
	for _, f := range bad {
		rep.add(limit, f)
	}
	type claim struct {
		Checkpoint
		source string
	}
	var claims []claim
	for _, c := range stored {
		claims = append(claims, claim{c, "stored checkpoint"})
	}
	for _, c := range opt.Checkpoints {
		claims = append(claims, claim{c, "external checkpoint"})
	}
	// The hash of every row a checkpoint names, filled in while streaming.
	named := newSeqHashes(claims, func(c claim) int64 { return c.Seq })

	keys := make(map[string]ed25519.PublicKey, len(opt.PublicKeys))
	for _, k := range opt.PublicKeys {
		keys[KeyID(k)] = k
	}
	if len(keys) > 0 {
		// A key that signed none of the checkpoints is the wrong key file,
		// not evidence of tampering: say so instead of a finding for each.
		signers := map[string]bool{}
		for _, c := range claims {
			signers[c.KeyID] = true
		}
		matched := false
		for id := range keys {
			matched = matched || signers[id]
		}
		if !matched && len(signers) > 0 {
			rep.Unverifiable = fmt.Sprintf("the checkpoints are signed by key %s, not by the key given (%s)",
				strings.Join(slices.Sorted(maps.Keys(signers)), ", "), strings.Join(slices.Sorted(maps.Keys(keys)), ", "))
			rep.SignaturesChecked = false
			keys = nil
		}
	}
	// The signatures do not depend on the rows: they are checked on other
	// cores while the rows are read.
	slices.SortStableFunc(claims, func(a, b claim) int { return cmp.Compare(a.Seq, b.Seq) })
	anchor := anchorSeqs(stored, opt.Anchors)
	for _, c := range stored {
		rep.newest = max(rep.newest, c.Seq)
	}
	var toCheck []int // indexes into claims
	for i, c := range claims {
		if _, ok := keys[c.KeyID]; !ok || c.Table != r.table {
			continue // reported below, without a signature to check
		}
		if opt.EverySignature || c.source != "stored checkpoint" || anchor[c.Seq] {
			toCheck = append(toCheck, i)
		} else {
			rep.SignaturesUnchecked++
		}
	}
	rep.SignaturesVerified = len(toCheck)
	sigErrs := make([]error, len(claims))
	sigChecked := make([]bool, len(claims))
	sigsDone := verifySignatures(len(toCheck), func(j int) {
		i := toCheck[j]
		sigChecked[i] = true
		sigErrs[i] = claims[i].VerifySignature(keys[claims[i].KeyID])
	})

	prev := r.base // where this file's chain starts: row 0, or a sealed segment's head
	// check checks one row, its fields prepared.
	check := func(seq int64, at string, p *preparedRow) {
		rep.Events++
		link := true
		if seq != prev.Seq+1 {
			rep.add(limit, Finding{FindingGap, prev.Seq + 1, fmt.Sprintf("rows %d to %d are missing", prev.Seq+1, seq-1)})
			link = false // the predecessor is gone: its link cannot be checked
		}
		switch {
		case p.errPrev != nil:
			rep.add(limit, Finding{FindingMalformed, seq, "prev_hash: " + p.errPrev.Error()})
		case p.errHash != nil:
			rep.add(limit, Finding{FindingMalformed, seq, "hash: " + p.errHash.Error()})
		default:
			if !p.canonAt {
				rep.add(limit, Finding{FindingMalformed, seq, fmt.Sprintf("at %q is not a time in the trail's canonical form", at)})
			}
			if p.want != p.hash {
				rep.add(limit, Finding{FindingEdited, seq, fmt.Sprintf("stored hash %s, fields hash to %s", p.hash, p.want)})
			}
			if link && p.prev != prev.Hash {
				rep.add(limit, Finding{FindingBrokenLink, seq, fmt.Sprintf("prev_hash %s, row %d has hash %s", p.prev, prev.Seq, prev.Hash)})
			}
		}
		named.record(seq, p.hash)
		prev = Head{Seq: seq, Hash: p.hash}
	}
	var sc prepScratch
	// checkAny checks a row read value by value, whatever types a hostile
	// file holds.
	checkAny := func(vSeq, vAt, vKind, vShoe, vCoup, vBody, vPrev, vHash any) {
		seq, ok := vSeq.(int64)
		if !ok {
			// Cannot happen with an INTEGER PRIMARY KEY; kept so hostile
			// files never panic the checker.
			rep.Events++
			rep.add(limit, Finding{FindingMalformed, prev.Seq + 1, fmt.Sprintf("row after seq %d has seq %v", prev.Seq, vSeq)})
			return
		}
		shoe, ok1 := vShoe.(int64)
		coup, ok2 := vCoup.(int64)
		if !ok1 || !ok2 {
			rep.Events++
			if seq != prev.Seq+1 {
				rep.add(limit, Finding{FindingGap, prev.Seq + 1, fmt.Sprintf("rows %d to %d are missing", prev.Seq+1, seq-1)})
			}
			rep.add(limit, Finding{FindingMalformed, seq, fmt.Sprintf("shoe %v, coup %v: not integers", vShoe, vCoup)})
			h, _ := ParseHash(asText(vHash))
			named.record(seq, h)
			prev = Head{Seq: seq, Hash: h}
			return
		}
		at := asText(vAt)
		p := prepareRow(&sc, seq, at, asText(vKind), shoe, coup, asText(vBody), asText(vPrev), asText(vHash))
		check(seq, at, &p)
	}
	err = scanTrail(ctx, tx, conns, func(row *scanRow) {
		if l := row.loose; l != nil {
			checkAny(l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7])
			return
		}
		check(row.seq, row.at, &row.p)
	})
	<-sigsDone
	if err != nil {
		return nil, fmt.Errorf("verify %s: read events after seq %d: %w", r.path, prev.Seq, err)
	}
	rep.Head = prev

	if len(opt.PublicKeys) > 0 {
		last := r.base.Seq // signed in the sealed segment before this one
		for _, c := range stored {
			last = max(last, c.Seq)
		}
		if rep.Head.Seq > last {
			rep.add(limit, Finding{FindingUnsignedRows, last + 1, fmt.Sprintf("rows %d to %d come after the last checkpoint (seq %d): the controller signs every commit, so it did not write them", last+1, rep.Head.Seq, last)})
		}
	}
	for i, c := range claims {
		rep.Checkpoints++
		if c.Table != r.table {
			rep.add(limit, Finding{FindingWrongTable, c.Seq, fmt.Sprintf("%s is of table %q, the trail of %q", c.source, c.Table, r.table)})
			continue
		}
		if len(keys) > 0 {
			if _, ok := keys[c.KeyID]; !ok {
				rep.add(limit, Finding{FindingUnknownKey, c.Seq, fmt.Sprintf("%s signed by key %s, which is not among the keys given", c.source, c.KeyID)})
			} else if err := sigErrs[i]; err != nil {
				rep.add(limit, Finding{FindingBadSignature, c.Seq, fmt.Sprintf("%s: %v", c.source, err)})
			}
		}
		held := false
		switch h := named.get(c.Seq); {
		case c.Seq > rep.Head.Seq:
			rep.add(limit, Finding{FindingTruncated, c.Seq, fmt.Sprintf("%s names seq %d (hash %s) but the trail ends at seq %d", c.source, c.Seq, c.HeadHash, rep.Head.Seq)})
		case h == nil:
			rep.add(limit, Finding{FindingCheckpointMismatch, c.Seq, fmt.Sprintf("%s names seq %d, which is missing", c.source, c.Seq)})
		case *h != c.HeadHash:
			rep.add(limit, Finding{FindingCheckpointMismatch, c.Seq, fmt.Sprintf("%s says hash %s, the row has %s", c.source, c.HeadHash, *h)})
		default:
			held = true
		}
		if held && sigChecked[i] && sigErrs[i] == nil && c.source == "stored checkpoint" {
			rep.SignedHead = max(rep.SignedHead, c.Seq)
		}
	}
	return rep, nil
}

// readCheckpointsRaw is readCheckpoints through the driver's connection,
// in the transaction open on c: a trail holds a checkpoint per commit,
// hundreds of thousands, and database/sql's scanning was 40% of reading
// them.
func readCheckpointsRaw(ctx context.Context, c *sql.Conn, table string) (out []Checkpoint, bad []Finding, err error) {
	var n int64
	if err := c.QueryRowContext(ctx, `SELECT count(*) FROM checkpoints`).Scan(&n); err != nil {
		return nil, nil, fmt.Errorf("read checkpoints: %w", err)
	}
	out = make([]Checkpoint, 0, n)
	err = c.Raw(func(dc any) error {
		q, ok := dc.(driver.QueryerContext)
		if !ok {
			return errors.New("the SQLite driver cannot query")
		}
		rows, err := q.QueryContext(ctx, `SELECT seq, head_hash, signed_at, key_id, signature FROM checkpoints ORDER BY seq`, nil)
		if err != nil {
			return err
		}
		defer rows.Close()
		v := make([]driver.Value, 5)
		if len(rows.Columns()) != len(v) {
			return fmt.Errorf("%d columns, want %d", len(rows.Columns()), len(v))
		}
		for {
			switch err := rows.Next(v); {
			case err == io.EOF:
				return nil
			case err != nil:
				return err
			}
			cp, err := decodeCheckpointRow(table, v[0], v[1], v[2], v[3], v[4])
			if err != nil {
				s, _ := v[0].(int64)
				bad = append(bad, Finding{Kind: FindingMalformed, Seq: s, Detail: "stored checkpoint: " + err.Error()})
				continue
			}
			out = append(out, cp)
		}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read checkpoints: %w", err)
	}
	return out, bad, nil
}

// seqHashes holds the hash of the row at each seq a checkpoint names,
// filled in while the rows stream by in seq order. A map cost a lookup
// per row (a random access into a table of as many entries as commits):
// the seqs are sorted once and a cursor follows the rows instead.
type seqHashes struct {
	seqs   []int64 // sorted, distinct
	hashes []Hash
	seen   []bool
	next   int   // the first seq not below the last row recorded
	last   int64 // the last row's seq
}

func newSeqHashes[T any](items []T, seqOf func(T) int64) *seqHashes {
	seqs := make([]int64, 0, len(items))
	for _, it := range items {
		seqs = append(seqs, seqOf(it))
	}
	slices.Sort(seqs)
	seqs = slices.Compact(seqs)
	return &seqHashes{seqs: seqs, hashes: make([]Hash, len(seqs)), seen: make([]bool, len(seqs))}
}

// record notes h as the hash of row seq if a checkpoint names seq. Rows
// come in ascending seq; should one not, the cursor is found again by
// binary search.
func (a *seqHashes) record(seq int64, h Hash) {
	if seq < a.last {
		a.next, _ = slices.BinarySearch(a.seqs, seq)
	}
	a.last = seq
	for a.next < len(a.seqs) && a.seqs[a.next] < seq {
		a.next++
	}
	if a.next < len(a.seqs) && a.seqs[a.next] == seq {
		a.hashes[a.next], a.seen[a.next] = h, true
	}
}

// get is the hash recorded at seq, or nil if no row had that seq.
func (a *seqHashes) get(seq int64) *Hash {
	i, ok := slices.BinarySearch(a.seqs, seq)
	if !ok || !a.seen[i] {
		return nil
	}
	return &a.hashes[i]
}

// anchorSeqs is the set of seqs whose stored checkpoints' signatures
// Verify checks by default: the newest checkpoint's, which through the
// chain authenticates every row before it, and more's (segment seals).
func anchorSeqs(stored []Checkpoint, more []int64) map[int64]bool {
	set := make(map[int64]bool, len(more)+1)
	var newest int64
	for _, c := range stored {
		newest = max(newest, c.Seq)
	}
	if newest > 0 {
		set[newest] = true
	}
	for _, s := range more {
		set[s] = true
	}
	return set
}

// checkSchemaObjects compares the tables, index and triggers with the ones
// the store creates.
func checkSchemaObjects(ctx context.Context, q queryer, report func(Finding)) error {
	var version int
	if err := q.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	triggers := triggersFor(version)
	rows, err := q.QueryContext(ctx, `SELECT type, name, coalesce(sql, '') FROM sqlite_schema WHERE type IN ('table', 'index', 'trigger', 'view')`)
	if err != nil {
		return fmt.Errorf("read schema: %w", err)
	}
	defer rows.Close()
	type object struct{ typ, sql string }
	have := map[string]object{}
	for rows.Next() {
		var typ, name, sql string
		if err := rows.Scan(&typ, &name, &sql); err != nil {
			return fmt.Errorf("read schema: %w", err)
		}
		have[name] = object{typ, sql}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read schema: %w", err)
	}
	for _, o := range schemaTables {
		got, ok := have[o.name]
		switch {
		case !ok:
			report(Finding{Kind: FindingAlteredSchema, Detail: fmt.Sprintf("%s is missing", o.name)})
		case normSQL(got.sql) != normSQL(o.sql):
			report(Finding{Kind: FindingAlteredSchema, Detail: fmt.Sprintf("%s is %q, want %q", o.name, normSQL(got.sql), normSQL(o.sql))})
		}
	}
	for _, name := range sortedKeys(triggers) {
		got, ok := have[name]
		switch {
		case !ok:
			report(Finding{Kind: FindingMissingTrigger, Detail: fmt.Sprintf("trigger %s is missing: the table it guards can be changed", name)})
		case got.typ != "trigger" || normSQL(got.sql) != normSQL(triggers[name]):
			report(Finding{Kind: FindingAlteredTrigger, Detail: fmt.Sprintf("trigger %s is %q, want %q", name, normSQL(got.sql), normSQL(triggers[name]))})
		}
	}
	ours := map[string]bool{}
	for _, o := range schemaTables {
		ours[o.name] = true
	}
	for _, name := range sortedKeys(have) {
		_, known := triggers[name]
		switch o := have[name]; {
		case o.typ == "trigger" && !known:
			report(Finding{Kind: FindingAlteredTrigger, Detail: fmt.Sprintf("unknown trigger %s: %q", name, normSQL(o.sql))})
		case o.typ != "trigger" && !ours[name] && !strings.HasPrefix(name, "sqlite_"):
			report(Finding{Kind: FindingAlteredSchema, Detail: fmt.Sprintf("%s %s was not created by tablectl: %q", o.typ, name, normSQL(o.sql))})
		}
	}
	return nil
}

// verifySignatures runs check(i) for i in [0, n) on as many goroutines as
// there are cores, each at the caller's thread's nice value; the returned
// channel is closed when all are done.
func verifySignatures(n int, check func(i int)) <-chan struct{} {
	done := make(chan struct{})
	var next atomic.Int64
	var wg sync.WaitGroup
	nice := threadNice()
	for range min(runtime.GOMAXPROCS(0), max(n, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n > 0 {
				sameNice(nice)
			}
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				check(i)
			}
		}()
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}
