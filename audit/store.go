package audit

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/coup"

	"github.com/mattn/go-sqlite3"
)

// Options configure a Store.
type Options struct {
	// Table is the table id (0 to 64 bytes of A-Z a-z 0-9 _ . -). It is
	// recorded when the trail is created and named in every checkpoint;
	// opening a trail of another table is refused. Empty takes the id
	// recorded in an existing trail.
	Table string
	// Clock stamps rows and checkpoints; nil is the system clock.
	Clock clock.Clock
	// Key signs checkpoints; nil writes none.
	Key Signer
	// CheckpointEvery makes Append sign a checkpoint, in the same
	// transaction, whenever this many events have been appended since the
	// last one; 0 signs only on Checkpoint and Close. The controller uses
	// 1: every transaction carries a checkpoint of its own head, so no row
	// is ever unsigned and a row after the last checkpoint was not written
	// by the controller.
	CheckpointEvery int64
	// BusyTimeout is how long a statement waits for a lock held by a reader
	// before failing; 0 is 5 seconds.
	BusyTimeout time.Duration
	// Logger receives warnings; nil is slog.Default.
	Logger *slog.Logger

	// readOnly opens the SQLite connection read-only (mode=ro). Tests use it
	// to reach SQLITE_READONLY as root, whom file modes do not stop.
	readOnly bool
	// base is where a file created by Open starts its chain (a segment
	// after a sealed one; see OpenDir).
	base Head
}

// Store is the trail's single writer. Its methods are safe for concurrent
// use: appends are serialised by a mutex and go through one SQLite
// connection, while reads use a separate pool of read-only connections that
// WAL lets run beside the writer. A lock file (path + "-lock", flock) keeps a
// second process from writing the same trail.
type Store struct {
	path  string
	table string
	clock clock.Clock
	key   Signer
	every int64
	log   *slog.Logger

	w    *sql.DB // MaxOpenConns 1: the only writer
	r    *Reader
	lock *os.File

	insEvent, insCheckpoint, selHead *sql.Stmt
	hot                              *hotStmts // the commit's statements on the driver connection; nil until the first
	pre                              bool      // a transaction is open on it, begun and head-checked by Prepare

	// base is where this file's chain starts (the sealed segment's head);
	// seg is the directory trail's state, nil for a single file.
	base Head
	seg  *segments

	mu       sync.Mutex // serialises writes; guards the fields below
	head     Head       // last committed row
	lastCP   int64      // seq of the last checkpoint, 0 if none
	closed   bool
	attempt  []Record     // the rows of the last commit that reported failure
	tampered *TamperError // rows found that this store did not write; sticky
	refused  error        // a finding in the history (HistoryError); sticky

	sealedLive bool // the live segment ends with its seal row (guarded by mu)
}

// quarantine makes the store refuse every further write and signature,
// returning err: the background history check found the trail wrong.
func (s *Store) quarantine(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused == nil {
		s.refused = err
	}
}

// Open opens the trail at path for writing, creating it if it does not
// exist, and checks that WAL and synchronous=FULL are in force. If the file
// cannot be written (read-only file or directory, disk full at creation),
// the error wraps ErrWriteFailed; the trail can still be read with
// OpenReader. Open does not verify the chain: call Verify first, as the
// controller does on start.
func Open(ctx context.Context, path string, opt Options) (*Store, error) {
	if err := checkTableID(opt.Table); err != nil {
		return nil, err
	}
	key, err := checkSigner(opt.Key)
	if err != nil {
		return nil, err
	}
	if opt.CheckpointEvery < 0 {
		return nil, fmt.Errorf("checkpoint interval %d: want 0 or more", opt.CheckpointEvery)
	}
	s := &Store{
		path:  path,
		clock: clock.Or(opt.Clock),
		key:   key,
		every: opt.CheckpointEvery,
		log:   opt.Logger,
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	busy := opt.BusyTimeout
	if busy <= 0 {
		busy = 5 * time.Second
	}
	lock, err := lockFile(path + "-lock")
	if err != nil {
		return nil, err
	}
	s.lock = lock
	if err := s.open(ctx, opt, busy); err != nil {
		s.closeAll()
		return nil, err
	}
	return s, nil
}

func (s *Store) open(ctx context.Context, opt Options, busy time.Duration) error {
	params := url.Values{
		"_journal_mode": {"WAL"},
		"_synchronous":  {"FULL"},
		"_busy_timeout": {strconv.FormatInt(busy.Milliseconds(), 10)},
		"_txlock":       {"immediate"},
	}
	if opt.readOnly {
		params.Set("mode", "ro")
	}
	dsn, err := sqliteDSN(s.path, params)
	if err != nil {
		return err
	}
	s.w, err = sql.Open("sqlite3", dsn)
	if err != nil {
		return fmt.Errorf("open audit trail %s: %w", s.path, err)
	}
	// One connection: SQLite has one writer anyway, and per-connection
	// pragmas (WAL, synchronous) then hold for every write.
	s.w.SetMaxOpenConns(1)
	s.w.SetMaxIdleConns(1)
	s.w.SetConnMaxLifetime(0)
	s.w.SetConnMaxIdleTime(0)
	if err := s.w.PingContext(ctx); err != nil {
		return openErr(s.path, err)
	}
	if err := checkPragmas(ctx, s.w); err != nil {
		return fmt.Errorf("audit trail %s: %w", s.path, err)
	}

	v, empty, err := schemaState(ctx, s.w)
	if err != nil {
		return openErr(s.path, err)
	}
	if empty && v == 0 {
		if err := s.create(ctx, opt.Table, opt.base); err != nil {
			return err
		}
	} else if err := checkSchema(ctx, s.w); err != nil {
		return fmt.Errorf("audit trail %s: %w", s.path, err)
	}
	table, err := readTableID(ctx, s.w)
	if err != nil {
		return fmt.Errorf("audit trail %s: %w", s.path, err)
	}
	if opt.Table != "" && opt.Table != table {
		return fmt.Errorf("audit trail %s belongs to table %q, not %q", s.path, table, opt.Table)
	}
	s.table = table

	// Probe for write access now, so a read-only trail is reported at
	// start rather than on the first card.
	if _, err := s.w.ExecContext(ctx, `BEGIN IMMEDIATE; INSERT INTO meta (key, value) SELECT 'probe', '' WHERE 0; ROLLBACK`); err != nil {
		s.w.ExecContext(context.Background(), `ROLLBACK`)
		return &WriteError{Op: "open", Err: err}
	}

	if s.head, err = dbHead(ctx, s.w); err != nil {
		return fmt.Errorf("audit trail %s: %w", s.path, err)
	}
	if s.base, err = readBase(ctx, s.w); err != nil {
		return fmt.Errorf("audit trail %s: %w", s.path, err)
	}
	if s.head.Seq == 0 {
		s.head = s.base // a new segment: its chain goes on from the sealed one's head
	}
	var last sql.NullInt64
	if err := s.w.QueryRowContext(ctx, `SELECT max(seq) FROM checkpoints`).Scan(&last); err != nil {
		return fmt.Errorf("audit trail %s: read last checkpoint: %w", s.path, err)
	}
	s.lastCP = max(last.Int64, s.base.Seq) // the base is signed in the sealed segment

	if s.insEvent, err = s.w.PrepareContext(ctx, insEventSQL); err != nil {
		return fmt.Errorf("audit trail %s: %w", s.path, err)
	}
	if s.insCheckpoint, err = s.w.PrepareContext(ctx, insCheckpointSQL); err != nil {
		return fmt.Errorf("audit trail %s: %w", s.path, err)
	}
	// The head check in every write transaction: prepared once, as
	// preparing it on each commit cost more than running it.
	if s.selHead, err = s.w.PrepareContext(ctx, headQuery); err != nil {
		return fmt.Errorf("audit trail %s: %w", s.path, err)
	}
	if s.r, err = OpenReader(ctx, s.path); err != nil {
		return err
	}
	return nil
}

// openErr classifies a failure to open or read the file: storage failures
// are write failures (the controller cannot record), others are not.
func openErr(path string, err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code {
		case sqlite3.ErrFull, sqlite3.ErrReadonly, sqlite3.ErrIoErr, sqlite3.ErrCantOpen:
			return &WriteError{Op: "open", Err: fmt.Errorf("%s: %w", path, err)}
		}
	}
	return fmt.Errorf("open audit trail %s: %w", path, err)
}

func (s *Store) create(ctx context.Context, table string, base Head) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return &WriteError{Op: "create", Err: err}
	}
	defer tx.Rollback()
	if err := createSchema(ctx, tx, table, base); err != nil {
		return &WriteError{Op: "create", Err: err}
	}
	if err := tx.Commit(); err != nil {
		return &WriteError{Op: "create", Err: err}
	}
	s.log.Info("audit trail created", "path", s.path, "table", table, "base_seq", base.Seq)
	return nil
}

// checkPragmas confirms that the DSN's journal mode and synchronous level
// took effect: SQLite silently keeps another journal mode on some
// filesystems, and a trail that is not fsynced on commit is not durable.
func checkPragmas(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return fmt.Errorf("read journal_mode: %w", err)
	}
	if mode != "wal" {
		return fmt.Errorf("journal_mode is %q, want wal", mode)
	}
	var sync int
	if err := db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil {
		return fmt.Errorf("read synchronous: %w", err)
	}
	if sync != 2 {
		return fmt.Errorf("synchronous is %d, want 2 (FULL)", sync)
	}
	return nil
}

// sqliteDSN builds a file: URI for path, escaping what SQLite would read as
// URI syntax.
func sqliteDSN(path string, params url.Values) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("audit trail path %q: %w", path, err)
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: params.Encode()}
	return u.String(), nil
}

// Path returns the trail's file name: a directory trail's live segment.
func (s *Store) Path() string {
	if s.seg == nil {
		return s.path
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.path
}

// Table returns the table id recorded in the trail.
func (s *Store) Table() string { return s.table }

// Head returns the last committed row's seq and hash.
func (s *Store) Head() Head {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.head
}

// Append commits e as the next row and returns it once it is durable (the
// transaction is committed and fsynced). If a checkpoint fell due it is
// signed and committed in the same transaction and returned in
// Record.Checkpoint.
//
// A storage failure returns an error wrapping ErrWriteFailed (and
// ErrDiskFull, ErrReadOnly or ErrIO when the cause is known); nothing was
// committed and the head did not move, so the next Append that succeeds
// takes the next seq with no gap. ctx is only checked before the write
// starts: once begun, a write runs to commit or failure, so that a
// cancelled caller never leaves it unknown whether a card was recorded.
func (s *Store) Append(ctx context.Context, e Event) (Record, error) {
	recs, err := s.AppendBatch(ctx, []Event{e})
	if err != nil {
		return Record{}, err
	}
	return recs[0], nil
}

// AppendBatch commits events as consecutive rows in one transaction: all
// of them or none. At most one checkpoint is signed, after the last row.
func (s *Store) AppendBatch(ctx context.Context, events []Event) ([]Record, error) {
	if len(events) == 0 {
		return nil, nil
	}
	bodies := make([][]byte, len(events))
	for i, e := range events {
		var err error
		if bodies[i], err = prepare(e); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("audit append: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if s.sealedLive {
		return nil, ErrSealed
	}
	recs, cp, err := s.commit(events, bodies)
	if err != nil {
		return nil, err
	}
	s.head = Head{Seq: recs[len(recs)-1].Seq, Hash: recs[len(recs)-1].Hash}
	if cp != nil {
		s.lastCP = cp.Seq
		recs[len(recs)-1].Checkpoint = cp
	}
	return recs, nil
}

// prepare validates e and returns its canonical body.
func prepare(e Event) ([]byte, error) {
	if err := checkKind(e.Kind); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	if e.Shoe < 0 || e.Coup < 0 {
		return nil, fmt.Errorf("%w: %s: shoe %d, coup %d: ids must be 0 or more", ErrInvalidEvent, e.Kind, e.Shoe, e.Coup)
	}
	// A table's derived event, as nearly every row but the input is:
	// written field by field, the very bytes CanonicalJSON gives (the
	// tests hold them together, and fail when coup.Event gains a field),
	// without reflection and the canonicalizing pass, on the card's path.
	var body []byte
	if ev, ok := e.Body.(coup.Event); ok {
		if b, fine := appendEventJSON(nil, &ev); fine {
			body = b
		}
	}
	if body == nil {
		var err error
		if body, err = CanonicalJSON(e.Body); err != nil {
			return nil, fmt.Errorf("%w: %s body: %w", ErrInvalidEvent, e.Kind, err)
		}
	}
	if len(body) > MaxBodyBytes {
		return nil, fmt.Errorf("%w: %s body: %d bytes, more than %d", ErrInvalidEvent, e.Kind, len(body), MaxBodyBytes)
	}
	return body, nil
}

// commit writes the rows (and a checkpoint if due) in one transaction. The
// caller holds s.mu.
func (s *Store) commit(events []Event, bodies [][]byte) (recs []Record, cp *Checkpoint, err error) {
	return s.commitAt(events, bodies, "")
}

// commitAt is commit with every row stamped at (RFC 3339, as formatTime
// writes it) rather than by the clock, when at is set: a seal whose row
// the next segment's base was made from ahead of it (CutOver).
func (s *Store) commitAt(events []Event, bodies [][]byte, at string) (recs []Record, cp *Checkpoint, err error) {
	// Not the caller's ctx: see Append.
	ctx := context.Background()
	seq := s.head.Seq + 1
	if s.tampered != nil {
		return nil, nil, s.tampered
	}
	if s.refused != nil {
		return nil, nil, s.refused
	}
	// The rows and their hashes are made, and the checkpoint of their head
	// signed, before the transaction begins. A key in memory signs here
	// (about 20 µs on a small VM's core with edfast, 45 with
	// crypto/ed25519): a goroutine to overlap it with the statements took
	// longer than that to start on an idle core. A token's signature
	// (milliseconds) is made on another goroutine, and overlaps the head
	// check and the inserts. Either way it covers the chain this store
	// wrote, never the file's: if the head check finds rows of another
	// program, it is dropped unused.
	ats := make([]string, len(events))
	for i := range events {
		ats[i] = at
		if at == "" {
			ats[i] = formatTime(s.clock.Now())
		}
	}
	build := func(base Head) []Record {
		out := make([]Record, len(events))
		for i, e := range events {
			r := Record{Seq: base.Seq + 1, Kind: e.Kind, Shoe: e.Shoe, Coup: e.Coup, Body: bodies[i], PrevHash: base.Hash}
			r.At, _ = parseTime(ats[i]) // drop the monotonic reading and zone, as a reader would see it
			r.Hash = rowHash(r.Seq, ats[i], r.Kind, r.Shoe, r.Coup, r.Body, r.PrevHash)
			out[i] = r
			base = Head{Seq: r.Seq, Hash: r.Hash}
		}
		return out
	}
	recs = build(s.head)
	last := func() Head { return Head{Seq: recs[len(recs)-1].Seq, Hash: recs[len(recs)-1].Hash} }
	due := func() bool { return s.key != nil && s.every > 0 && last().Seq-s.lastCP >= s.every }
	var signing chan signed
	var signedAt time.Time
	if due() {
		signedAt = s.clock.Now()
		signing = make(chan signed, 1) // never blocks: an unused signature is dropped
		sign := func(h Head) {
			c, err := signCheckpoint(s.key, s.table, h, signedAt)
			signing <- signed{c, err}
		}
		if _, inMemory := s.key.(ed25519.PrivateKey); inMemory {
			sign(last())
		} else {
			go sign(last())
		}
	}
	if cp, err := s.commitHot(recs, ats, signing); !errors.Is(err, errHeadMoved) {
		if err != nil {
			return nil, nil, err
		}
		s.attempt = nil
		return recs, cp, nil
	}
	// The long way, through database/sql: it reads the head again and
	// adopts or refuses what it finds. (The hot path has rolled back, and
	// taken no prepared transaction: one is only kept when its head
	// matched.)
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, &WriteError{Op: "begin", Seq: seq, Err: err}
	}
	defer func() {
		if err != nil {
			tx.Rollback() // SQLite may have rolled back already; that error says nothing new
		}
	}()
	head, err := stmtHead(ctx, tx.StmtContext(ctx, s.selHead))
	if err != nil {
		return nil, nil, &WriteError{Op: "read head", Seq: seq, Err: err}
	}
	if head.Seq == 0 {
		head = s.base // no row in this segment yet
	}
	if head != s.head {
		if err := s.adopt(ctx, tx, head); err != nil {
			return nil, nil, err
		}
		// A commit that reported failure reached the disk: these rows go
		// after its rows, and the signature made for the old place is no
		// use.
		recs, signing = build(s.head), nil
		if due() {
			if signedAt.IsZero() {
				signedAt = s.clock.Now()
			}
			c, err := signCheckpoint(s.key, s.table, last(), signedAt)
			signing = make(chan signed, 1)
			signing <- signed{c, err}
		}
	}
	insEvent := tx.StmtContext(ctx, s.insEvent)
	for i, r := range recs {
		if _, err := insEvent.ExecContext(ctx, r.Seq, ats[i], r.Kind, r.Shoe, r.Coup, string(r.Body), r.PrevHash.String(), r.Hash.String()); err != nil {
			return nil, nil, &WriteError{Op: "insert", Seq: r.Seq, Err: err}
		}
	}
	if signing != nil {
		sg := <-signing
		if sg.err != nil {
			return nil, nil, &WriteError{Op: "sign checkpoint", Seq: last().Seq, Err: sg.err}
		}
		if err := s.insertCheckpoint(ctx, tx, sg.c); err != nil {
			return nil, nil, err
		}
		cp = &sg.c
	}
	if err := tx.Commit(); err != nil {
		// It may still have reached the disk: remember what it wrote, so
		// the next commit can tell these rows from someone else's.
		s.attempt = recs
		return nil, nil, &WriteError{Op: "commit", Seq: recs[0].Seq, Err: err}
	}
	s.attempt = nil
	return recs, cp, nil
}

// adopt is called inside a write transaction when the file's head is not
// the last one this store committed. The one legitimate cause is a commit
// that reported failure but reached the disk (an I/O error after the WAL
// frame was written): its rows match the attempt, hash for hash, and are
// taken as committed. Anything else is rows another program wrote: the
// store records that, refuses every further write and never signs over
// them. The caller holds s.mu.
func (s *Store) adopt(ctx context.Context, tx *sql.Tx, head Head) error {
	if a := s.attempt; len(a) > 0 && a[0].Seq == s.head.Seq+1 && a[len(a)-1].Seq == head.Seq && a[len(a)-1].Hash == head.Hash {
		s.log.Warn("audit trail: a commit that reported failure reached the disk; its rows are this controller's and stand",
			"path", s.path, "from_seq", a[0].Seq, "to_seq", head.Seq)
		var last sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT max(seq) FROM checkpoints`).Scan(&last); err != nil {
			return &WriteError{Op: "read checkpoints", Seq: head.Seq, Err: err}
		}
		s.head, s.lastCP, s.attempt = head, last.Int64, nil
		return nil
	}
	te := &TamperError{Path: s.path, From: s.head.Seq + 1, To: head.Seq}
	if head.Seq <= s.head.Seq {
		te.From, te.To = head.Seq+1, s.head.Seq // rows taken away: name what is gone
	}
	rows, err := tx.QueryContext(ctx, `SELECT kind FROM events WHERE seq BETWEEN ? AND ? ORDER BY seq LIMIT 16`, te.From, te.To)
	if err == nil {
		for rows.Next() {
			var k string
			if rows.Scan(&k) == nil {
				te.Kinds = append(te.Kinds, k)
			}
		}
		rows.Close()
	}
	s.tampered = te
	s.log.Error("audit trail tampered: rows this controller did not write; nothing more is recorded or signed",
		"path", s.path, "from_seq", te.From, "to_seq", te.To, "kinds", te.Kinds, "file_head", head.Seq, "own_head", s.head.Seq)
	return te
}

// Tampered reports the rows found that this store did not write, if any.
func (s *Store) Tampered() *TamperError {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tampered
}

// signed is a checkpoint signed on another goroutine, or why it was not.
type signed struct {
	c   Checkpoint
	err error
}

const (
	insEventSQL      = `INSERT INTO events (seq, at, kind, shoe, coup, body, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	insCheckpointSQL = `INSERT INTO checkpoints (seq, head_hash, signed_at, key_id, signature) VALUES (?, ?, ?, ?, ?)`
)

// checkpointArgs are insCheckpointSQL's arguments for c.
func checkpointArgs(c Checkpoint) []any {
	return []any{c.Seq, c.HeadHash.String(), formatTime(c.SignedAt), c.KeyID, fmt.Sprintf("%x", c.Signature)}
}

func (s *Store) insertCheckpoint(ctx context.Context, tx *sql.Tx, c Checkpoint) error {
	_, err := tx.StmtContext(ctx, s.insCheckpoint).ExecContext(ctx, checkpointArgs(c)...)
	if err != nil {
		return &WriteError{Op: "checkpoint", Seq: c.Seq, Err: err}
	}
	return nil
}

// Checkpoint signs and stores a checkpoint of the current head, unless the
// head already has one, which it returns. It fails with ErrNoKey when the
// store has no key and ErrEmptyTrail before the first row.
func (s *Store) Checkpoint(ctx context.Context) (Checkpoint, error) {
	if err := ctx.Err(); err != nil {
		return Checkpoint{}, fmt.Errorf("audit checkpoint: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Checkpoint{}, ErrClosed
	}
	return s.checkpointLocked()
}

func (s *Store) checkpointLocked() (Checkpoint, error) {
	ctx := context.Background() // see Append
	if s.key == nil {
		return Checkpoint{}, ErrNoKey
	}
	if s.tampered != nil {
		return Checkpoint{}, s.tampered
	}
	if s.refused != nil {
		return Checkpoint{}, s.refused
	}
	if s.head.Seq == s.base.Seq {
		return Checkpoint{}, ErrEmptyTrail
	}
	if s.lastCP == s.head.Seq {
		c, ok, err := s.LastCheckpoint(ctx)
		if err != nil {
			return Checkpoint{}, err
		}
		if ok && c.Seq == s.head.Seq {
			return c, nil
		}
	}
	c, err := signCheckpoint(s.key, s.table, s.head, s.clock.Now())
	if err != nil {
		return Checkpoint{}, &WriteError{Op: "sign checkpoint", Seq: s.head.Seq, Err: err}
	}
	if err := s.endPre(); err != nil {
		return Checkpoint{}, &WriteError{Op: "begin", Seq: c.Seq, Err: err}
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return Checkpoint{}, &WriteError{Op: "begin", Seq: c.Seq, Err: err}
	}
	if err := s.insertCheckpoint(ctx, tx, c); err != nil {
		tx.Rollback()
		return Checkpoint{}, err
	}
	if err := tx.Commit(); err != nil {
		return Checkpoint{}, &WriteError{Op: "commit checkpoint", Seq: c.Seq, Err: err}
	}
	s.lastCP = c.Seq
	return c, nil
}

// LastCheckpoint returns the newest stored checkpoint; ok is false if there
// is none.
func (s *Store) LastCheckpoint(ctx context.Context) (c Checkpoint, ok bool, err error) {
	if s.seg != nil {
		return s.seg.lastCheckpoint(ctx)
	}
	return s.r.LastCheckpoint(ctx)
}

// Events streams committed rows; see Reader.Events. A directory trail's
// rows come from every segment on the box the query reaches, in seq order.
func (s *Store) Events(ctx context.Context, q Query) iter.Seq2[Record, error] {
	if s.seg != nil {
		return s.seg.events(ctx, q)
	}
	return s.r.Events(ctx, q)
}

// Export writes rows as JSON lines; see Reader.Export.
func (s *Store) Export(ctx context.Context, w io.Writer, q Query) (int64, error) {
	return exportRows(s.Events(ctx, q), w)
}

// Close signs a final checkpoint of the head if the store has a key and the
// head has none yet, then closes the file and releases the writer lock.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	var errs []error
	if s.key != nil && s.head.Seq > s.lastCP && s.tampered == nil && s.refused == nil {
		if _, err := s.checkpointLocked(); err != nil {
			errs = append(errs, fmt.Errorf("final checkpoint: %w", err))
		}
	}
	errs = append(errs, s.closeAll())
	return errors.Join(errs...)
}

func (s *Store) closeAll() error {
	var errs []error
	if s.w != nil {
		errs = append(errs, s.closeHot())
	}
	for _, st := range []*sql.Stmt{s.insEvent, s.insCheckpoint, s.selHead} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	if s.seg != nil {
		errs = append(errs, s.seg.close())
	} else if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	if s.w != nil {
		errs = append(errs, s.w.Close())
	}
	if s.lock != nil {
		errs = append(errs, unlockFile(s.lock))
	}
	return errors.Join(errs...)
}

// WriteError is a failure to write the trail. It matches ErrWriteFailed
// with errors.Is, and ErrDiskFull, ErrReadOnly or ErrIO when SQLite said
// which; Unwrap gives the driver's error.
type WriteError struct {
	Op  string // what was being done: "insert", "commit", "open"...
	Seq int64  // the seq being written, 0 if none
	Err error
}

func (e *WriteError) Error() string {
	msg := ErrWriteFailed.Error()
	if c := e.cause(); c != nil {
		msg += " (" + c.Error() + ")"
	}
	if e.Seq > 0 {
		return fmt.Sprintf("%s: %s seq %d: %v", msg, e.Op, e.Seq, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", msg, e.Op, e.Err)
}

// Unwrap returns the underlying error.
func (e *WriteError) Unwrap() error { return e.Err }

// Is matches ErrWriteFailed and the cause sentinel.
func (e *WriteError) Is(target error) bool {
	return target == ErrWriteFailed || (target != nil && target == e.cause())
}

func (e *WriteError) cause() error {
	var se sqlite3.Error
	if !errors.As(e.Err, &se) {
		return nil
	}
	switch se.Code {
	case sqlite3.ErrFull: // max_page_count reached, or ENOSPC from the VFS
		return ErrDiskFull
	case sqlite3.ErrReadonly:
		return ErrReadOnly
	case sqlite3.ErrIoErr:
		return ErrIO
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
