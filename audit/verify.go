package audit

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tablectl/tablectl/base/threadprio"
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
	v := &verifyRun{r: r, opt: opt, limit: opt.MaxFindings}
	if v.limit <= 0 {
		v.limit = 1000
	}
	v.rep = &Report{Path: r.path, Table: r.table, SignaturesChecked: len(opt.PublicKeys) > 0, EverySignature: opt.EverySignature}
	snap, err := r.openVerifySnapshot(ctx, func(f Finding) { v.rep.add(v.limit, f) })
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", r.path, err)
	}
	defer snap.close()
	if r.baseErr != nil {
		v.rep.add(v.limit, Finding{Kind: FindingMalformed, Detail: "the chain's base in meta: " + r.baseErr.Error()})
	}
	feed, waitFeed := v.readCheckpoints(ctx, snap)
	defer waitFeed() // before its connection is closed
	sigsDone := v.checkSignatures(feed)
	// Wait for it on every return: its goroutines read what the checks
	// below own.
	defer func() { <-sigsDone }()

	chain := v.newChainCheck(feed)
	err = scanTrail(ctx, snap.tx, snap.rowConns(), chain.visit)
	if err != nil {
		return nil, fmt.Errorf("verify %s: read events after seq %d: %w", r.path, chain.prev.Seq, err)
	}
	stored, err := feed.result()
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", r.path, err)
	}
	<-sigsDone
	v.rep.Head = chain.prev
	v.gather(stored, &chain.rowRep)
	v.checkUnsignedTail()
	v.checkClaims(stored, chain.match, chain.external)
	return v.rep, nil
}

// verifyRun is one Verify of a single file: its options, its report, and
// the signatures checked beside the rows.
type verifyRun struct {
	r     *Reader
	opt   VerifyOptions
	limit int
	rep   *Report
	sigs  signaturePlan // set by checkSignatures' goroutine; read once it is done
}

// verifySnapshot is the connections one Verify reads a single snapshot
// through: the first (the schema and the rows), and on more than one core
// two peers proven to see the same snapshot (a second reader of the rows,
// and one for the checkpoints beside them).
type verifySnapshot struct {
	conn     *sql.Conn
	tx       *sql.Tx
	others   []*sql.Conn
	otherTxs []*sql.Tx
}

// openVerifySnapshot reads the schema first, which takes the snapshot
// every check uses, and reports its findings to add.
func (r *Reader) openVerifySnapshot(ctx context.Context, add func(Finding)) (*verifySnapshot, error) {
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	s := &verifySnapshot{conn: conn}
	peers := 0
	if scanReaders() > 1 {
		peers = 2
	}
	s.others, s.otherTxs, err = snapshotPeers(ctx, r.db, conn, peers, func() error {
		if s.tx, err = conn.BeginTx(ctx, nil); err != nil {
			return err
		}
		return checkSchemaObjects(ctx, s.tx, add)
	})
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *verifySnapshot) close() {
	for i := len(s.others) - 1; i >= 0; i-- {
		s.otherTxs[i].Rollback()
		s.others[i].Close()
	}
	if s.tx != nil {
		s.tx.Rollback()
	}
	s.conn.Close()
}

// rowConns is the connections the rows are read through.
func (s *verifySnapshot) rowConns() []*sql.Conn {
	if len(s.others) > 0 {
		return []*sql.Conn{s.conn, s.others[0]}
	}
	return []*sql.Conn{s.conn}
}

// readCheckpoints reads the stored checkpoints, on a peer connection beside
// the rows when there is one; kept whole are the ones whose signatures may
// be checked (every one with EverySignature, else the anchors; the newest
// always is). wait waits for the reading to end.
func (v *verifyRun) readCheckpoints(ctx context.Context, snap *verifySnapshot) (feed *cpFeed, wait func()) {
	anchors := make(map[int64]bool, len(v.opt.Anchors))
	for _, s := range v.opt.Anchors {
		anchors[s] = true
	}
	keep := func(seq int64) bool {
		return len(v.opt.PublicKeys) > 0 && (v.opt.EverySignature || anchors[seq])
	}
	feed = newCPFeed()
	if len(snap.others) < 2 {
		readStoredCheckpoints(ctx, snap.conn, v.r.table, keep, feed)
		return feed, func() {}
	}
	nice := threadprio.Nice()
	go func() {
		threadprio.Same(nice)
		readStoredCheckpoints(ctx, snap.others[1], v.r.table, keep, feed)
	}()
	return feed, func() { feed.result() }
}

// checkSignatures checks the signatures on other cores while the rows are
// read, once the checkpoints are: they do not depend on the rows. The
// channel closes when v.sigs is final.
func (v *verifyRun) checkSignatures(feed *cpFeed) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		stored, err := feed.result()
		if err != nil {
			return
		}
		v.sigs = planSignatures(stored, v.opt, v.r.table)
		<-verifySignatures(len(v.sigs.toCheck), v.sigs.check)
	}()
	return done
}

// chainCheck checks the rows as they stream by: hash, link, sequence; and
// notes the hash of every row a checkpoint names (the stored ones' as they
// are read, the external ones' up front).
type chainCheck struct {
	rep      *Report // its Events count
	limit    int
	rowRep   Report // the rows' findings, put after the stored checkpoints' malformed ones
	prev     Head   // where the chain stands: row 0, a sealed segment's head, then the last row read
	match    *cpMatch
	external *seqHashes
	sc       prepScratch
}

func (v *verifyRun) newChainCheck(feed *cpFeed) *chainCheck {
	return &chainCheck{
		rep:      v.rep,
		limit:    v.limit,
		prev:     v.r.base,
		match:    newCPMatch(feed),
		external: newSeqHashes(v.opt.Checkpoints, func(c Checkpoint) int64 { return c.Seq }),
	}
}

func (c *chainCheck) add(f Finding) { c.rowRep.add(c.limit, f) }

// visit checks one row as the scan gives it.
func (c *chainCheck) visit(row *scanRow) {
	if l := row.loose; l != nil {
		c.checkAny(l[0], l[1], l[2], l[3], l[4], l[5], l[6], l[7])
		return
	}
	c.check(row.seq, row.at, &row.p)
}

// check checks one row, its fields prepared.
func (c *chainCheck) check(seq int64, at string, p *preparedRow) {
	c.rep.Events++
	link := true
	if seq != c.prev.Seq+1 {
		c.add(Finding{FindingGap, c.prev.Seq + 1, fmt.Sprintf("rows %d to %d are missing", c.prev.Seq+1, seq-1)})
		link = false // the predecessor is gone: its link cannot be checked
	}
	switch {
	case p.errPrev != nil:
		c.add(Finding{FindingMalformed, seq, "prev_hash: " + p.errPrev.Error()})
	case p.errHash != nil:
		c.add(Finding{FindingMalformed, seq, "hash: " + p.errHash.Error()})
	default:
		if !p.canonAt {
			c.add(Finding{FindingMalformed, seq, fmt.Sprintf("at %q is not a time in the trail's canonical form", at)})
		}
		if p.want != p.hash {
			c.add(Finding{FindingEdited, seq, fmt.Sprintf("stored hash %s, fields hash to %s", p.hash, p.want)})
		}
		if link && p.prev != c.prev.Hash {
			c.add(Finding{FindingBrokenLink, seq, fmt.Sprintf("prev_hash %s, row %d has hash %s", p.prev, c.prev.Seq, c.prev.Hash)})
		}
	}
	c.advance(seq, p.hash)
}

func (c *chainCheck) advance(seq int64, h Hash) {
	c.match.record(seq, h)
	c.external.record(seq, h)
	c.prev = Head{Seq: seq, Hash: h}
}

// checkAny checks a row read value by value, whatever types a hostile file
// holds.
func (c *chainCheck) checkAny(vSeq, vAt, vKind, vShoe, vCoup, vBody, vPrev, vHash any) {
	seq, ok := vSeq.(int64)
	if !ok {
		// Cannot happen with an INTEGER PRIMARY KEY; kept so hostile
		// files never panic the checker.
		c.rep.Events++
		c.add(Finding{FindingMalformed, c.prev.Seq + 1, fmt.Sprintf("row after seq %d has seq %v", c.prev.Seq, vSeq)})
		return
	}
	shoe, ok1 := vShoe.(int64)
	coup, ok2 := vCoup.(int64)
	if !ok1 || !ok2 {
		c.rep.Events++
		if seq != c.prev.Seq+1 {
			c.add(Finding{FindingGap, c.prev.Seq + 1, fmt.Sprintf("rows %d to %d are missing", c.prev.Seq+1, seq-1)})
		}
		c.add(Finding{FindingMalformed, seq, fmt.Sprintf("shoe %v, coup %v: not integers", vShoe, vCoup)})
		h, _ := ParseHash(asText(vHash))
		c.advance(seq, h)
		return
	}
	at := asText(vAt)
	p := prepareRow(&c.sc, seq, at, asText(vKind), shoe, coup, asText(vBody), asText(vPrev), asText(vHash))
	c.check(seq, at, &p)
}

// gather puts the findings in the report's order (the stored checkpoints'
// malformed ones, then the rows') and the signatures' counts.
func (v *verifyRun) gather(stored *storedCheckpoints, rowRep *Report) {
	rep := v.rep
	for _, f := range stored.bad {
		rep.add(v.limit, f)
	}
	for _, f := range rowRep.Findings {
		rep.add(v.limit, f)
	}
	rep.Omitted += rowRep.Omitted
	if v.sigs.unverifiable != "" {
		rep.Unverifiable = v.sigs.unverifiable
		rep.SignaturesChecked = false
	}
	rep.SignaturesVerified = len(v.sigs.toCheck)
	rep.SignaturesUnchecked = v.sigs.unchecked
	if n := stored.heads.len(); n > 0 {
		rep.newest = stored.heads.at(n - 1).seq
	}
}

// checkUnsignedTail finds rows after the last checkpoint, which the
// controller (signing every commit) did not write.
func (v *verifyRun) checkUnsignedTail() {
	if len(v.opt.PublicKeys) == 0 {
		return
	}
	rep := v.rep
	last := max(v.r.base.Seq, rep.newest) // the base is signed in the sealed segment before this one
	if rep.Head.Seq > last {
		rep.add(v.limit, Finding{FindingUnsignedRows, last + 1, fmt.Sprintf("rows %d to %d come after the last checkpoint (seq %d): the controller signs every commit, so it did not write them", last+1, rep.Head.Seq, last)})
	}
}

// checkClaims checks every claim, stored and external, in seq order
// (stored first at the same seq).
func (v *verifyRun) checkClaims(stored *storedCheckpoints, match *cpMatch, external *seqHashes) {
	opt := v.opt
	ext := make([]int, len(opt.Checkpoints))
	for i := range ext {
		ext[i] = i
	}
	slices.SortStableFunc(ext, func(a, b int) int { return cmp.Compare(opt.Checkpoints[a].Seq, opt.Checkpoints[b].Seq) })
	externalClaim := func(e int) {
		c := opt.Checkpoints[e]
		v.claim("external checkpoint", c.Seq, c.Table, c.KeyID, c.HeadHash, external.get(c.Seq), v.sigs.sigOf(-1, e))
	}
	j := 0
	for i := range stored.heads.len() {
		h := stored.heads.at(i)
		for ; j < len(ext) && opt.Checkpoints[ext[j]].Seq < h.seq; j++ {
			externalClaim(ext[j])
		}
		v.claim("stored checkpoint", h.seq, v.r.table, stored.keyIDs[h.key], h.head, match.get(i), v.sigs.sigOf(i, -1))
	}
	for ; j < len(ext); j++ {
		externalClaim(ext[j])
	}
}

// claim checks one checkpoint's claim: its table, its key and signature,
// and that the row it names is there with the hash it says.
func (v *verifyRun) claim(source string, seq int64, table, keyID string, headHash Hash, held *Hash, sig int) {
	rep, sigs := v.rep, &v.sigs
	rep.Checkpoints++
	if table != v.r.table {
		rep.add(v.limit, Finding{FindingWrongTable, seq, fmt.Sprintf("%s is of table %q, the trail of %q", source, table, v.r.table)})
		return
	}
	if len(sigs.keys) > 0 {
		if _, ok := sigs.keys[keyID]; !ok {
			rep.add(v.limit, Finding{FindingUnknownKey, seq, fmt.Sprintf("%s signed by key %s, which is not among the keys given", source, keyID)})
		} else if sig >= 0 && sigs.errs[sig] != nil {
			rep.add(v.limit, Finding{FindingBadSignature, seq, fmt.Sprintf("%s: %v", source, sigs.errs[sig])})
		}
	}
	ok := false
	switch h := held; {
	case seq > rep.Head.Seq:
		rep.add(v.limit, Finding{FindingTruncated, seq, fmt.Sprintf("%s names seq %d (hash %s) but the trail ends at seq %d", source, seq, headHash, rep.Head.Seq)})
	case h == nil:
		rep.add(v.limit, Finding{FindingCheckpointMismatch, seq, fmt.Sprintf("%s names seq %d, which is missing", source, seq)})
	case *h != headHash:
		rep.add(v.limit, Finding{FindingCheckpointMismatch, seq, fmt.Sprintf("%s says hash %s, the row has %s", source, headHash, *h)})
	default:
		ok = true
	}
	if ok && sig >= 0 && sigs.errs[sig] == nil && source == "stored checkpoint" {
		rep.SignedHead = max(rep.SignedHead, seq)
	}
}

// signaturePlan is which checkpoint signatures Verify checks, and what
// they gave.
type signaturePlan struct {
	keys         map[string]*CheckpointKey // by id; nil when none matched
	unverifiable string
	toCheck      []Checkpoint
	errs         []error // per toCheck
	stored       []int32 // per stored head: its index in toCheck, or -1
	external     []int32 // per external checkpoint: likewise
	unchecked    int
}

func (p *signaturePlan) check(i int) {
	p.errs[i] = p.toCheck[i].VerifyWith(p.keys[p.toCheck[i].KeyID])
}

// sigOf is the index in toCheck of stored head i or external checkpoint
// e (the other -1), or -1 when its signature is not checked.
func (p *signaturePlan) sigOf(i, e int) int {
	switch {
	case i >= 0 && i < len(p.stored):
		return int(p.stored[i])
	case e >= 0 && e < len(p.external):
		return int(p.external[e])
	}
	return -1
}

// planSignatures picks the signatures to check: with keys given that
// signed any checkpoint, every checkpoint's with EverySignature, else the
// anchors' only: the newest stored checkpoint's, which through the chain
// authenticates every row before it, every external one's, and those at
// opt.Anchors (segment seals).
func planSignatures(stored *storedCheckpoints, opt VerifyOptions, table string) signaturePlan {
	p := signaturePlan{keys: make(map[string]*CheckpointKey, len(opt.PublicKeys))}
	for _, k := range opt.PublicKeys {
		ck := NewCheckpointKey(k)
		p.keys[ck.ID()] = ck
	}
	if len(p.keys) > 0 {
		// A key that signed none of the checkpoints is the wrong key file,
		// not evidence of tampering: say so instead of a finding for each.
		signers := map[string]bool{}
		for _, id := range stored.keyIDs {
			signers[id] = true
		}
		for _, c := range opt.Checkpoints {
			signers[c.KeyID] = true
		}
		matched := false
		for id := range p.keys {
			matched = matched || signers[id]
		}
		if !matched && len(signers) > 0 {
			p.unverifiable = fmt.Sprintf("the checkpoints are signed by key %s, not by the key given (%s)",
				strings.Join(slices.Sorted(maps.Keys(signers)), ", "), strings.Join(slices.Sorted(maps.Keys(p.keys)), ", "))
			p.keys = nil
		}
	}
	anchor := make(map[int64]bool, len(opt.Anchors)+1)
	for _, s := range opt.Anchors {
		anchor[s] = true
	}
	if n := stored.heads.len(); n > 0 {
		anchor[stored.heads.at(n-1).seq] = true
	}
	known := make([]bool, len(stored.keyIDs))
	for i, id := range stored.keyIDs {
		_, known[i] = p.keys[id]
	}
	p.stored = make([]int32, stored.heads.len())
	for i := range stored.heads.len() {
		h := stored.heads.at(i)
		p.stored[i] = -1
		if !known[h.key] {
			continue // reported, without a signature to check
		}
		c, whole := stored.checkpoint(i)
		if !whole || !opt.EverySignature && !anchor[h.seq] {
			p.unchecked++
			continue
		}
		p.stored[i] = int32(len(p.toCheck))
		p.toCheck = append(p.toCheck, c)
	}
	p.external = make([]int32, len(opt.Checkpoints))
	for i, c := range opt.Checkpoints {
		p.external[i] = -1
		if _, ok := p.keys[c.KeyID]; !ok || c.Table != table {
			continue
		}
		p.external[i] = int32(len(p.toCheck))
		p.toCheck = append(p.toCheck, c)
	}
	p.errs = make([]error, len(p.toCheck))
	return p
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
	nice := threadprio.Nice()
	for range min(runtime.GOMAXPROCS(0), max(n, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n > 0 {
				threadprio.Same(nice)
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
