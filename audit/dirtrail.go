package audit

// Reading and verifying a trail of segments as one: a directory, or files
// given in order (tablectl audit verify, replay, export and recall).

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The findings only a trail of segments has.
const (
	// FindingSegmentOrder: a segment starts before the one listed before it
	// ends: the files are out of order, or one holds rows of another.
	FindingSegmentOrder FindingKind = "segment_order"
	// FindingUnsealed: a segment followed by another does not end with its
	// seal row, or a seal row is not the last row of its file.
	FindingUnsealed FindingKind = "unsealed_segment"
)

// OpenTrail opens a trail of segments read-only, as one trail: a directory
// (its segment files, in the order their names give) or the files given, in
// the order given. One plain file is opened as OpenReader does.
func OpenTrail(ctx context.Context, paths ...string) (*Reader, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("open audit trail: no file given")
	}
	name := strings.Join(paths, ",")
	if len(paths) == 1 {
		fi, err := os.Stat(paths[0])
		if err != nil {
			return nil, fmt.Errorf("open audit trail: %w", err)
		}
		if !fi.IsDir() {
			return openFileReader(ctx, paths[0])
		}
		if paths, err = ListSegments(paths[0]); err != nil {
			return nil, err
		}
		if len(paths) == 0 {
			return nil, fmt.Errorf("open audit trail: %s holds no segment (%s*%s)", name, segPrefix, segSuffix)
		}
	}
	r := &Reader{path: name}
	for i, p := range paths {
		part, err := openFileReader(ctx, p)
		if errors.Is(err, errEmptyFile) && i == len(paths)-1 && i > 0 {
			break // a segment whose creation never committed: no rows
		}
		if err != nil {
			r.Close()
			return nil, err
		}
		if i == len(paths)-1 && i > 0 && aheadOfSeal(ctx, r.parts[len(r.parts)-1], part) {
			part.Close()
			break // made ahead of a seal that was not written: no rows
		}
		r.parts = append(r.parts, part)
		if part.table != r.parts[0].table {
			r.Close()
			return nil, fmt.Errorf("audit segment %s belongs to table %q, %s to %q", p, part.table, r.parts[0].path, r.parts[0].table)
		}
	}
	r.table = r.parts[0].table
	r.base = r.parts[0].base
	return r, nil
}

// aheadOfSeal reports a newest segment made ahead of a seal that was never
// written, or went in at another head (Store.CutOver), before the process
// stopped: it has no row of its own and does not follow the segment before
// it. It holds nothing of the trail; the next start removes it.
func aheadOfSeal(ctx context.Context, prev, last *Reader) bool {
	h, err := last.Head(ctx)
	if err != nil || h != last.base {
		return false
	}
	ph, err := prev.Head(ctx)
	return err == nil && last.base != ph
}

// Segments lists the files a trail of segments reads, in order (one for a
// plain file).
func (r *Reader) Segments() []string {
	if r.parts == nil {
		return []string{r.path}
	}
	out := make([]string, len(r.parts))
	for i, p := range r.parts {
		out[i] = p.path
	}
	return out
}

// checkLinks reports what is wrong between segments: each must start where
// the one before it ends (a later start is a missing segment, an earlier
// one segments out of order, the same seq with another hash a broken link),
// and every segment but the last must end with its seal row, which no other
// row of any segment may be.
//
// With full false (a start), only each file's last row is read, not every
// seal row: time that does not grow with the segments' length.
func checkLinks(ctx context.Context, parts []*Reader, heads []Head, full bool, add func(Finding)) error {
	for i, p := range parts {
		name := filepath.Base(p.path)
		var seals []int64
		var err error
		if full {
			seals, err = p.sealRows(ctx, heads[i].Seq)
		} else {
			var kind string
			if kind, err = p.lastKind(ctx); kind == KindSeal {
				seals = []int64{heads[i].Seq}
			}
		}
		if err != nil {
			return err
		}
		last := i == len(parts)-1
		for _, seq := range seals {
			if seq != heads[i].Seq {
				add(Finding{FindingUnsealed, seq, fmt.Sprintf("segment %s: a seal row is not the file's last row (that is seq %d)", name, heads[i].Seq)})
			}
		}
		if !last && (len(seals) == 0 || seals[len(seals)-1] != heads[i].Seq) {
			add(Finding{FindingUnsealed, heads[i].Seq, fmt.Sprintf("segment %s is followed by %s but does not end with a seal row", name, filepath.Base(parts[i+1].path))})
		}
		if i == 0 {
			continue
		}
		prev, base := heads[i-1], p.base
		prevName := filepath.Base(parts[i-1].path)
		switch {
		case base.Seq > prev.Seq:
			add(Finding{FindingGap, prev.Seq + 1, fmt.Sprintf("rows %d to %d are missing: no segment between %s (ends at seq %d) and %s (starts at seq %d)", prev.Seq+1, base.Seq, prevName, prev.Seq, name, base.Seq+1)})
		case base.Seq < prev.Seq:
			add(Finding{FindingSegmentOrder, base.Seq + 1, fmt.Sprintf("segment %s starts at seq %d, before %s ends (seq %d): segments out of order or overlapping", name, base.Seq+1, prevName, prev.Seq)})
		case base.Hash != prev.Hash:
			add(Finding{FindingBrokenLink, base.Seq + 1, fmt.Sprintf("segment %s links to hash %s, but %s ends with hash %s", name, base.Hash, prevName, prev.Hash)})
		}
	}
	return nil
}

// sealRows lists the seqs of a file's seal rows up to its head as read
// (heads): a seal a live recorder commits after that is the live table's,
// not the verified history's (the background history check runs while the
// table deals and may cut over).
func (r *Reader) sealRows(ctx context.Context, head int64) ([]int64, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT seq FROM events WHERE kind = ? AND seq <= ? ORDER BY seq`, KindSeal, head)
	if err != nil {
		return nil, fmt.Errorf("audit trail %s: read seal rows: %w", r.path, err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			return nil, fmt.Errorf("audit trail %s: read seal rows: %w", r.path, err)
		}
		out = append(out, seq)
	}
	return out, rows.Err()
}

// verifyParts verifies each segment (Reader.Verify) and the links between
// them, as one report. External checkpoints go to the segment holding the
// row they name (past the last head: the last segment, as truncation).
func (r *Reader) verifyParts(ctx context.Context, opt VerifyOptions) (*Report, error) {
	limit := opt.MaxFindings
	if limit <= 0 {
		limit = 1000
	}
	rep := &Report{Path: r.path, Table: r.table, SignaturesChecked: len(opt.PublicKeys) > 0, EverySignature: opt.EverySignature}
	heads, err := r.partHeads(ctx)
	if err != nil {
		return nil, err
	}
	for i, p := range r.parts {
		po := opt
		po.Checkpoints = nil
		for _, c := range opt.Checkpoints {
			if (c.Seq > p.base.Seq && c.Seq <= heads[i].Seq) || (i == len(r.parts)-1 && c.Seq > heads[i].Seq) {
				po.Checkpoints = append(po.Checkpoints, c)
			}
		}
		pr, err := p.Verify(ctx, po)
		if err != nil {
			return nil, err
		}
		rep.merge(limit, pr, filepath.Base(p.path))
	}
	if err := checkLinks(ctx, r.parts, heads, true, func(f Finding) { rep.add(limit, f) }); err != nil {
		return nil, fmt.Errorf("verify %s: %w", r.path, err)
	}
	rep.Head = heads[len(heads)-1]
	return rep, nil
}

// verifyPartsFrom is VerifyFrom across segments: the segments holding rows
// from from-1 on, and the links between every segment.
func (r *Reader) verifyPartsFrom(ctx context.Context, from int64, keys []ed25519.PublicKey) (*Report, error) {
	const limit = 1000
	rep := &Report{Path: r.path, Table: r.table, SignaturesChecked: len(keys) > 0}
	heads, err := r.partHeads(ctx)
	if err != nil {
		return nil, err
	}
	for i, p := range r.parts {
		if heads[i].Seq < from-1 && i < len(r.parts)-1 {
			continue
		}
		pr, err := p.VerifyFrom(ctx, max(from, p.base.Seq+1), keys)
		if err != nil {
			return nil, err
		}
		rep.merge(limit, pr, filepath.Base(p.path))
	}
	if err := checkLinks(ctx, r.parts, heads, false, func(f Finding) { rep.add(limit, f) }); err != nil {
		return nil, fmt.Errorf("verify %s: %w", r.path, err)
	}
	rep.Head = heads[len(heads)-1]
	return rep, nil
}

// partHeads reads each segment's head, in order.
func (r *Reader) partHeads(ctx context.Context) ([]Head, error) {
	heads := make([]Head, len(r.parts))
	for i, p := range r.parts {
		h, err := p.Head(ctx)
		if err != nil {
			return nil, fmt.Errorf("verify %s: %w", p.path, err)
		}
		heads[i] = h
	}
	return heads, nil
}

// merge adds a segment's report to a trail's.
func (rep *Report) merge(limit int, pr *Report, name string) {
	rep.Events += pr.Events
	rep.Checkpoints += pr.Checkpoints
	rep.Omitted += pr.Omitted
	rep.Segments++
	// Each segment's newest checkpoint is its seal's (or the live head's),
	// so every seal's signature is checked; the trail's signed head is
	// the newest segment's.
	rep.SignaturesVerified += pr.SignaturesVerified
	rep.SignaturesUnchecked += pr.SignaturesUnchecked
	rep.SignedHead = max(rep.SignedHead, pr.SignedHead)
	rep.newest = max(rep.newest, pr.newest)
	if !pr.SignaturesChecked {
		rep.SignaturesChecked = false
	}
	if pr.Unverifiable != "" && rep.Unverifiable == "" {
		rep.Unverifiable = name + ": " + pr.Unverifiable
	}
	for _, f := range pr.Findings {
		if !strings.HasPrefix(f.Detail, "segment ") {
			f.Detail = "segment " + name + ": " + f.Detail
		}
		rep.add(limit, f)
	}
}
