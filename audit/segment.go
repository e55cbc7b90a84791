package audit

// Sealed segments: a trail kept as a directory of files, one per gaming
// day. Each file is a version 2 trail whose chain starts where the one
// before it ended (its base); the last row of every file but the newest is
// a KindSeal row with a signed checkpoint of it, and the next file opens
// with a snapshot of the table, so a segment replays alone. Seq numbers run
// on across files: the publisher, resync and recall read by seq through
// Store.Events as they do a single file.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// KindSeal is the last row of a sealed segment: nothing is written to the
// file after it, and the next segment's first row links to its hash.
const KindSeal = "ctl.seal"

// SealBody is a KindSeal row's body.
type SealBody struct {
	// Segment is the sealed file's name; FirstSeq its first row.
	Segment  string `json:"segment"`
	FirstSeq int64  `json:"first_seq"`
	// Day is the gaming day the segment holds (its name's date).
	Day string `json:"day"`
	// Reason is why it was cut: "cutover" (the gaming day ended) or
	// "shoes" (SegmentPolicy.EveryShoes shoes ended).
	Reason string `json:"reason"`
}

// The segment files of a directory trail: seg-<first seq, 12 digits>-<gaming
// day>.db. The seq first, so that names sort in chain order.
const (
	segPrefix = "seg-"
	segSuffix = ".db"
)

// SegmentName is the file name of the segment whose first row is first, of
// gaming day day (as SegmentPolicy.DayName gives it).
func SegmentName(first int64, day string) string {
	return fmt.Sprintf("%s%012d-%s%s", segPrefix, first, day, segSuffix)
}

// parseSegmentName returns the first seq a segment's name gives; ok is
// false for a name that is not a segment's.
func parseSegmentName(name string) (first int64, ok bool) {
	if !strings.HasPrefix(name, segPrefix) || !strings.HasSuffix(name, segSuffix) {
		return 0, false
	}
	rest := strings.TrimSuffix(strings.TrimPrefix(name, segPrefix), segSuffix)
	num, _, found := strings.Cut(rest, "-")
	if !found || len(num) != 12 || strings.Trim(num, "0123456789") != "" {
		return 0, false
	}
	first, err := strconv.ParseInt(num, 10, 64)
	if err != nil || first < 1 {
		return 0, false
	}
	return first, true
}

// ListSegments returns the segment files of a directory trail in chain
// order (by the first seq their names give).
func ListSegments(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("audit trail directory: %w", err)
	}
	type seg struct {
		path  string
		first int64
	}
	var segs []seg
	for _, e := range ents {
		if first, ok := parseSegmentName(e.Name()); ok && e.Type().IsRegular() {
			segs = append(segs, seg{filepath.Join(dir, e.Name()), first})
		}
	}
	slices.SortFunc(segs, func(a, b seg) int {
		if a.first != b.first {
			return int(min(max(a.first-b.first, -1), 1))
		}
		return strings.Compare(a.path, b.path)
	})
	out := make([]string, len(segs))
	for i, s := range segs {
		out[i] = s.path
	}
	return out, nil
}

// segment is a sealed file of a directory trail still on the box.
type segment struct {
	path       string
	base, head Head
	r          *Reader
}

// segments is a directory trail's state beside the live file's Store.
type segments struct {
	dir  string
	lock *os.File // the directory's writer lock

	mu     sync.RWMutex
	sealed []*segment // on the box, oldest first
	live   *Reader    // the live file's reader (the Store's)

	// retire is held for reading while rows of sealed segments are read,
	// and for writing while retention closes one: a reader never has its
	// file closed under it.
	retire sync.RWMutex
}

func (g *segments) close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	var errs []error
	for _, s := range g.sealed {
		if s.r != nil {
			errs = append(errs, s.r.Close())
		}
	}
	if g.live != nil {
		errs = append(errs, g.live.Close())
	}
	if g.lock != nil {
		errs = append(errs, unlockFile(g.lock))
	}
	return errors.Join(errs...)
}

// parts returns the readers a query from seq from reaches, oldest first.
func (g *segments) parts(from, to int64) []*Reader {
	g.mu.RLock()
	defer g.mu.RUnlock()
	var out []*Reader
	for _, s := range g.sealed {
		if s.head.Seq < from || (to > 0 && to <= s.base.Seq) {
			continue
		}
		out = append(out, s.r)
	}
	return append(out, g.live)
}

func (g *segments) events(ctx context.Context, q Query) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		g.retire.RLock()
		defer g.retire.RUnlock()
		for rec, err := range partsEvents(ctx, g.parts(q.From, q.To), q) {
			if !yield(rec, err) {
				return
			}
		}
	}
}

// newestFirst returns every reader, the live file's first.
func (g *segments) newestFirst() []*Reader {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := []*Reader{g.live}
	for i := len(g.sealed) - 1; i >= 0; i-- {
		out = append(out, g.sealed[i].r)
	}
	return out
}

// lastCheckpoint and lastOfKind take no retire lock: a reader of rows
// may call them between two rows, and a read lock taken twice deadlocks
// against a waiting writer. The live file nearly always answers; a sealed
// segment removed meanwhile is a read error, not a crash.
func (g *segments) lastCheckpoint(ctx context.Context) (Checkpoint, bool, error) {
	for _, r := range g.newestFirst() {
		if c, ok, err := r.LastCheckpoint(ctx); err != nil || ok {
			return c, ok, err
		}
	}
	return Checkpoint{}, false, nil
}

func (g *segments) lastOfKind(ctx context.Context, kind string, to int64) (Record, bool, error) {
	for _, r := range g.newestFirst() {
		if rec, ok, err := r.LastOfKind(ctx, kind, to); err != nil || ok {
			return rec, ok, err
		}
	}
	return Record{}, false, nil
}

// partsEvents streams the rows q selects from each part in turn.
func partsEvents(ctx context.Context, parts []*Reader, q Query) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		for _, p := range parts {
			for rec, err := range p.Events(ctx, q) {
				if !yield(rec, err) || err != nil {
					return
				}
			}
		}
	}
}

// lastKind returns the kind of a file's last row ("" when it has none).
func (r *Reader) lastKind(ctx context.Context) (string, error) {
	var kind string
	err := r.db.QueryRowContext(ctx, `SELECT kind FROM events ORDER BY seq DESC LIMIT 1`).Scan(&kind)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("audit trail %s: %w", r.path, err)
	}
	return kind, nil
}

// OpenDir opens the directory trail at dir for writing, creating the
// directory and its first segment if need be. The sealed segments on the
// box must form one chain (each starts at the head of the one before, which
// ends with a seal row); the newest file is the live one, unless it is
// sealed (the controller stopped between sealing it and opening the next),
// in which case the next segment is created, named for gaming day day. Like
// Open, OpenDir does not verify the rows: the recorder verifies first.
func OpenDir(ctx context.Context, dir, day string, opt Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, &WriteError{Op: "open", Err: fmt.Errorf("audit trail directory: %w", err)}
	}
	lock, err := lockFile(filepath.Join(dir, "lock"))
	if err != nil {
		return nil, err
	}
	g := &segments{dir: dir, lock: lock}
	st, err := openDir(ctx, g, day, opt)
	if err != nil {
		g.close()
		return nil, err
	}
	return st, nil
}

func openDir(ctx context.Context, g *segments, day string, opt Options) (*Store, error) {
	paths, err := ListSegments(g.dir)
	if err != nil {
		return nil, err
	}
	livePath := ""
	var base Head
	var prev *segment
	prevSealed := false
	for i, p := range paths {
		rd, err := openFileReader(ctx, p)
		if errors.Is(err, errEmptyFile) && i == len(paths)-1 && (prev == nil || prevSealed) {
			// Its creation never committed: it is the live file, to be made.
			livePath = p
			if prev != nil {
				base = prev.head
			}
			break
		}
		if err != nil {
			return nil, err
		}
		sg := &segment{path: p, base: rd.base, r: rd}
		g.sealed = append(g.sealed, sg) // the live one is taken off below
		if sg.head, err = rd.Head(ctx); err != nil {
			return nil, err
		}
		if first, _ := parseSegmentName(filepath.Base(p)); first != rd.base.Seq+1 {
			return nil, fmt.Errorf("audit segment %s: named for seq %d, but its chain starts after seq %d", p, first, rd.base.Seq)
		}
		if i == len(paths)-1 && madeAhead(prev, prevSealed, sg) {
			g.sealed = g.sealed[:len(g.sealed)-1]
			removeAhead(sg, opt.Logger)
			break
		}
		if prev != nil {
			if !prevSealed {
				return nil, fmt.Errorf("audit segment %s is followed by %s but does not end with a seal row", prev.path, p)
			}
			if rd.base != prev.head {
				return nil, fmt.Errorf("audit segment %s does not follow %s: it starts after seq %d (hash %s), that one ends at seq %d (hash %s)",
					p, prev.path, rd.base.Seq, rd.base.Hash, prev.head.Seq, prev.head.Hash)
			}
		}
		if rd.table != opt.Table && opt.Table != "" {
			return nil, fmt.Errorf("audit segment %s belongs to table %q, not %q", p, rd.table, opt.Table)
		}
		kind, err := rd.lastKind(ctx)
		if err != nil {
			return nil, err
		}
		prev, prevSealed = sg, kind == KindSeal
	}
	if livePath == "" {
		switch {
		case prev == nil:
			livePath = filepath.Join(g.dir, SegmentName(1, day))
		case prevSealed:
			base = prev.head
			livePath = filepath.Join(g.dir, SegmentName(base.Seq+1, day))
		default:
			// The newest file is live: the Store opens it afresh.
			livePath, base = prev.path, prev.base
			g.sealed = g.sealed[:len(g.sealed)-1]
			prev.r.Close()
		}
	}
	opt.base = base
	if err := makeSegment(ctx, livePath, opt.Table, base); err != nil {
		return nil, err
	}
	st, err := Open(ctx, livePath, opt)
	if err != nil {
		return nil, err
	}
	if st.base != base {
		st.closeAll()
		return nil, fmt.Errorf("audit segment %s starts after seq %d, want %d", livePath, st.base.Seq, base.Seq)
	}
	g.live = st.r
	st.seg = g
	return st, nil
}

// madeAhead reports a newest segment sg that has no row of its own and
// does not follow the one before it (prev, sealed or not): a successor made
// ahead of a seal that was never written, or went in at another head
// (Store.CutOver), before the process stopped. It holds nothing of the
// trail.
func madeAhead(prev *segment, prevSealed bool, sg *segment) bool {
	return prev != nil && sg.head == sg.base && (!prevSealed || sg.base != prev.head)
}

// removeAhead deletes a segment made ahead (madeAhead) and says so.
func removeAhead(sg *segment, log *slog.Logger) {
	sg.r.Close()
	for _, f := range []string{sg.path, sg.path + "-wal", sg.path + "-shm", sg.path + "-journal", sg.path + "-lock"} {
		os.Remove(f)
	}
	if log != nil {
		log.Warn("audit segment made ahead of a cut-over that did not happen: removed (it held no row)", "segment", sg.path)
	}
}

// ErrSealed is an append to a segment already sealed, before the next one
// is open.
var ErrSealed = errors.New("audit segment is sealed: open the next one first")

// Sealed reports whether the live file ends with its seal row (the next
// segment is not open yet).
func (s *Store) Sealed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sealedLive
}

// Empty reports whether the live file has no row of its own yet.
func (s *Store) Empty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.head == s.base
}

// Base is where the live file's chain starts.
func (s *Store) Base() Head {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.base
}

// TrailPath is the trail as tablectl's commands name it: the directory of
// a directory trail, else the file.
func (s *Store) TrailPath() string {
	if s.seg != nil {
		return s.seg.dir
	}
	return s.path
}

// Seal ends the live segment of a directory trail: a KindSeal row and a
// signed checkpoint of it, in one transaction. Nothing more is appended to
// the file; NextSegment opens the next.
func (s *Store) Seal(ctx context.Context, body SealBody) (Record, error) {
	if s.seg == nil {
		return Record{}, errors.New("audit seal: not a directory trail")
	}
	return s.seal(ctx, body)
}

func (s *Store) seal(ctx context.Context, body SealBody) (Record, error) {
	b, err := prepare(Event{Kind: KindSeal, Body: body})
	if err != nil {
		return Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Record{}, ErrClosed
	}
	if s.sealedLive {
		return Record{}, ErrSealed
	}
	return s.sealLocked(b, "")
}

// sealLocked commits the seal row (its canonical body b), stamped at when
// set. The caller holds s.mu.
func (s *Store) sealLocked(b []byte, at string) (Record, error) {
	// The seal always carries its checkpoint, whatever the interval.
	every := s.every
	s.every = 1
	recs, cp, err := s.commitAt([]Event{{Kind: KindSeal}}, [][]byte{b}, at)
	s.every = every
	if err != nil {
		return Record{}, err
	}
	s.head = Head{Seq: recs[0].Seq, Hash: recs[0].Hash}
	if cp != nil {
		s.lastCP = cp.Seq
		recs[0].Checkpoint = cp
	}
	s.sealedLive = true
	return recs[0], nil
}

// NextSegment opens the segment after the sealed live one, named for gaming
// day day, and makes it the live file: its chain starts at the seal row.
func (s *Store) NextSegment(ctx context.Context, day string) error {
	if s.seg == nil {
		return errors.New("audit next segment: not a directory trail")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if !s.sealedLive {
		return errors.New("audit next segment: the live one is not sealed")
	}
	n, err := s.openNext(ctx, s.head, day)
	if err != nil {
		return err
	}
	s.switchTo(ctx, n)
	return nil
}

// openNext makes and opens the segment whose chain starts after base, for
// gaming day day. The caller holds s.mu.
func (s *Store) openNext(ctx context.Context, base Head, day string) (*Store, error) {
	path := filepath.Join(s.seg.dir, SegmentName(base.Seq+1, day))
	_, statErr := os.Stat(path)
	if err := makeSegment(ctx, path, s.table, base); err != nil {
		return nil, err
	}
	n, err := Open(ctx, path, Options{Table: s.table, Clock: s.clock, Key: s.key, CheckpointEvery: s.every, Logger: s.log, base: base})
	if err != nil {
		if errors.Is(statErr, os.ErrNotExist) {
			// Made just now, and holding no row: not left behind.
			for _, f := range []string{path, path + "-wal", path + "-shm", path + "-journal", path + "-lock"} {
				os.Remove(f)
			}
		}
		return nil, err
	}
	if n.base != base || n.head != base {
		n.closeAll()
		return nil, fmt.Errorf("audit segment %s exists and does not start at seq %d", path, base.Seq+1)
	}
	return n, nil
}

// ErrCutPutOff is a cut-over that did not happen because the next segment
// could not be made (no descriptor, no room for a file): nothing was
// sealed, the live segment takes rows as before, and the cut is tried
// again later.
var ErrCutPutOff = errors.New("audit cut-over put off: the next segment could not be made; the live one goes on")

// CutOver seals the live segment and makes the next one live, the next one
// made and opened first, before the seal row is written: its base is the
// seal row to come (its seq and hash, computed ahead, the row stamped at
// that moment). So a cut-over that cannot get a new file (the process out
// of descriptors, the disk out of room for one) seals nothing: it fails
// with ErrCutPutOff and the live segment goes on taking rows, and no input
// waits on the cut. Only once the seal is written can a failure leave the
// trail sealed without a live segment (then Sealed reports it and
// NextSegment finishes the cut). sealed reports whether the seal row was
// written.
func (s *Store) CutOver(ctx context.Context, body SealBody, day string) (rec Record, sealed bool, err error) {
	if s.seg == nil {
		return Record{}, false, errors.New("audit cut-over: not a directory trail")
	}
	b, err := prepare(Event{Kind: KindSeal, Body: body})
	if err != nil {
		return Record{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Record{}, false, ErrClosed
	}
	if s.sealedLive {
		return Record{}, false, ErrSealed
	}
	at := formatTime(s.clock.Now())
	t, _ := parseTime(at)
	seq := s.head.Seq + 1
	next := Head{Seq: seq, Hash: rowHash(seq, at, KindSeal, 0, 0, b, s.head.Hash)}
	n, err := s.openNext(ctx, next, day)
	if err != nil {
		return Record{}, false, fmt.Errorf("%w: %w", ErrCutPutOff, err)
	}
	cutHook("prepared")
	rec, err = s.sealLocked(b, at)
	if err != nil {
		// Nothing sealed: the file made ahead holds no row of the trail.
		removeSegment(n)
		return Record{}, false, err
	}
	if got := (Head{Seq: rec.Seq, Hash: rec.Hash}); got != next || !rec.At.Equal(t) {
		// The seal went in elsewhere (the head had moved: adopt); the file
		// made ahead does not follow it.
		removeSegment(n)
		if n, err = s.openNext(ctx, Head{Seq: rec.Seq, Hash: rec.Hash}, day); err != nil {
			return rec, true, err
		}
	}
	cutHook("sealed")
	s.switchTo(ctx, n)
	cutHook("opened")
	return rec, true, nil
}

// removeSegment closes a segment opened ahead and never used, and deletes
// its files: it holds no row of the trail.
func removeSegment(n *Store) {
	n.closeAll()
	for _, f := range []string{n.path, n.path + "-wal", n.path + "-shm", n.path + "-journal", n.path + "-lock"} {
		os.Remove(f)
	}
}

// switchTo makes n, the segment opened after the sealed live one, the live
// file. The caller holds s.mu.
func (s *Store) switchTo(ctx context.Context, n *Store) {
	s.seg.mu.Lock()
	s.seg.sealed = append(s.seg.sealed, &segment{path: s.path, base: s.base, head: s.head, r: s.r})
	s.seg.live = n.r
	s.seg.mu.Unlock()
	// The old file's reader stays open as the sealed segment's; its writer
	// and lock go. Its WAL is folded into the file first, so the sealed
	// file alone holds every row (an archive copies just the file).
	var errs []error
	// The commit's statements go first: SQLite closes a connection only
	// once its statements are finalised.
	errs = append(errs, s.closeHot())
	if _, err := s.w.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		errs = append(errs, fmt.Errorf("fold the WAL into %s: %w", s.path, err))
	}
	for _, st := range []*sql.Stmt{s.insEvent, s.insCheckpoint, s.selHead} {
		errs = append(errs, st.Close())
	}
	errs = append(errs, s.w.Close(), unlockFile(s.lock))
	s.path, s.w, s.r, s.lock = n.path, n.w, n.r, n.lock
	s.insEvent, s.insCheckpoint, s.selHead = n.insEvent, n.insCheckpoint, n.selHead
	s.base, s.head, s.lastCP, s.attempt, s.sealedLive = n.base, n.head, n.lastCP, nil, false
	if err := errors.Join(errs...); err != nil {
		s.log.Warn("audit segment: closing the sealed file's writer", "err", err)
	}
}

// SealedSegments lists the sealed segments still on the box, oldest first.
func (s *Store) SealedSegments() []SegmentInfo {
	if s.seg == nil {
		return nil
	}
	s.seg.mu.RLock()
	defer s.seg.mu.RUnlock()
	out := make([]SegmentInfo, len(s.seg.sealed))
	for i, g := range s.seg.sealed {
		out[i] = SegmentInfo{Path: g.path, Base: g.base, Head: g.head}
	}
	return out
}

// SegmentInfo names a sealed segment and its rows (Base.Seq+1 to Head.Seq).
type SegmentInfo struct {
	Path       string
	Base, Head Head
}

// makeSegment creates the segment file at path, its schema and base
// committed, unless a trail file is there already. It is made under a
// temporary name, closed (its WAL folded in), fsynced and renamed into
// place: a file with a segment's name is always a whole trail, whatever
// moment the power goes (a reader never meets a half-made one).
func makeSegment(ctx context.Context, path, table string, base Head) error {
	if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
		return nil // made before (Open checks its base)
	}
	tmp := path + ".new"
	for _, f := range []string{tmp, tmp + "-wal", tmp + "-shm", tmp + "-journal"} {
		os.Remove(f)
	}
	dsn, err := sqliteDSN(tmp, url.Values{"_journal_mode": {"WAL"}, "_synchronous": {"FULL"}, "_txlock": {"immediate"}})
	if err != nil {
		return err
	}
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return &WriteError{Op: "create segment", Err: err}
	}
	db.SetMaxOpenConns(1)
	err = func() error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := createSchema(ctx, tx, table, base); err != nil {
			return err
		}
		return tx.Commit()
	}()
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncFile(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return &WriteError{Op: "create segment", Err: fmt.Errorf("%s: %w", path, err)}
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// MoveIntoDir makes the single-file trail at path the first segment of the
// directory trail dir, so a table's history goes on in segments with its
// chain and seq unbroken: the file is verified (with the key's public half
// when opt.Key is set), sealed (a KindSeal row and its signed checkpoint,
// under the file's own triggers, version 1 or 2), closed and renamed into
// dir as the segment of its first row. Nothing is done when path does not
// exist (moved already); a dir that already holds segments while path
// exists is refused. dir must be on the same file system as path.
func MoveIntoDir(ctx context.Context, path, dir, day string, opt Options) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return &WriteError{Op: "move into segments", Err: err}
	}
	if segs, err := ListSegments(dir); err != nil {
		return err
	} else if len(segs) > 0 {
		return fmt.Errorf("audit trail %s is to move into %s, which already holds segments: move or remove one of them", path, dir)
	}
	vopt := VerifyOptions{}
	if key, err := checkSigner(opt.Key); err != nil {
		return err
	} else if key != nil {
		vopt.PublicKeys = append(vopt.PublicKeys, SignerPublic(key))
	}
	rep, err := Verify(ctx, path, vopt)
	if err != nil {
		return err
	}
	if !rep.OK() {
		return fmt.Errorf("audit trail %s does not verify (%d findings, %s): it is not moved into segments", path, len(rep.Findings), rep.Unverifiable)
	}
	st, err := Open(ctx, path, opt)
	if err != nil {
		return err
	}
	base := st.Base()
	if _, err := st.seal(ctx, SealBody{Segment: filepath.Base(path), FirstSeq: base.Seq + 1, Day: day, Reason: "moved into segments"}); err != nil {
		st.Close()
		return err
	}
	if err := st.Close(); err != nil {
		return err
	}
	dst := filepath.Join(dir, SegmentName(base.Seq+1, day))
	for _, f := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(path + f); err == nil {
			return fmt.Errorf("audit trail %s: its %s file is still there after a clean close: not moved", path, f)
		}
	}
	if err := os.Rename(path, dst); err != nil {
		return fmt.Errorf("audit trail %s sealed but not moved into %s (same file system?): %w", path, dir, err)
	}
	os.Remove(path + "-lock")
	for _, d := range []string{dir, filepath.Dir(path)} {
		if f, err := os.Open(d); err == nil {
			f.Sync()
			f.Close()
		}
	}
	return nil
}
