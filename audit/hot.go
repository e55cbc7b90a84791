package audit

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
)

// hotStmts are a commit's statements, prepared on the writer's driver
// connection, where the commit runs them directly instead of through
// database/sql. A database/sql transaction starts a goroutine to watch its
// context, and each query in it another: on a small VM every start wakes
// an idle core, tens of microseconds of a card's time, for a context this
// writer never cancels (see Append). SQLite's work and its errors are the
// same either way; only the Go around them is less.
type hotStmts struct {
	conn                                                     driver.Conn // the driver connection they belong to
	beginTx, commit, rollback, head, insEvent, insCheckpoint driver.Stmt
}

// errHeadMoved says the file's head is not the one this store committed
// last: the hot path has rolled back, and the commit goes the long way,
// which adopts the rows of a failed commit or refuses someone else's.
var errHeadMoved = errors.New("audit: head moved")

func prepareHot(ctx context.Context, c driver.Conn) (*hotStmts, error) {
	pc, ok := c.(driver.ConnPrepareContext)
	if !ok {
		return nil, fmt.Errorf("audit: driver connection %T cannot prepare with a context", c)
	}
	h := &hotStmts{conn: c}
	for _, st := range []struct {
		p *driver.Stmt
		q string
	}{
		{&h.beginTx, `BEGIN IMMEDIATE`},
		{&h.commit, `COMMIT`},
		{&h.rollback, `ROLLBACK`},
		{&h.head, headQuery},
		{&h.insEvent, insEventSQL},
		{&h.insCheckpoint, insCheckpointSQL},
	} {
		s, err := pc.PrepareContext(ctx, st.q)
		if err != nil {
			h.close()
			return nil, fmt.Errorf("prepare %q: %w", st.q, err)
		}
		*st.p = s
	}
	return h, nil
}

func (h *hotStmts) close() error {
	var errs []error
	for _, s := range []driver.Stmt{h.beginTx, h.commit, h.rollback, h.head, h.insEvent, h.insCheckpoint} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}

// execHot runs st with args given in order.
func execHot(st driver.Stmt, args ...any) error {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	_, err := st.(driver.StmtExecContext).ExecContext(context.Background(), nv)
	return err
}

// readHead runs the head query; no row is the zero Head.
func (h *hotStmts) readHead() (Head, error) {
	rows, err := h.head.(driver.StmtQueryContext).QueryContext(context.Background(), nil)
	if err != nil {
		return Head{}, err
	}
	defer rows.Close()
	v := make([]driver.Value, 2)
	if err := rows.Next(v); err == io.EOF {
		return Head{}, nil
	} else if err != nil {
		return Head{}, err
	}
	seq, ok := v[0].(int64)
	if !ok {
		return Head{}, fmt.Errorf("head row: seq is %T", v[0])
	}
	var text string
	switch x := v[1].(type) {
	case string:
		text = x
	case []byte:
		text = string(x)
	default:
		return Head{}, fmt.Errorf("head row %d: hash is %T", seq, v[1])
	}
	hash, err := ParseHash(text)
	if err != nil {
		return Head{}, fmt.Errorf("head row %d: %w", seq, err)
	}
	return Head{Seq: seq, Hash: hash}, nil
}

// commitHot is the commit's transaction on the writer's driver connection:
// BEGIN IMMEDIATE and the head check (unless Prepare did both), the rows,
// the checkpoint (signing nil: none due), COMMIT. It returns
// errHeadMoved, having rolled back and taken nothing from signing, when the
// file's head is not s.head; every other failure is a *WriteError, as on
// the long way. The caller holds s.mu.
func (s *Store) commitHot(recs []Record, ats []string, signing <-chan signed) (cp *Checkpoint, err error) {
	err = s.onWriter(func(c driver.Conn) error {
		if err := s.hotOn(context.Background(), c); err != nil {
			return &WriteError{Op: "begin", Seq: recs[0].Seq, Err: err}
		}
		var runErr error
		cp, runErr = s.hot.run(s, recs, ats, signing)
		return runErr
	})
	var we *WriteError
	if err != nil && !errors.Is(err, errHeadMoved) && !errors.As(err, &we) {
		err = &WriteError{Op: "begin", Seq: recs[0].Seq, Err: err} // no connection to write on
	}
	return cp, err
}

// onWriter runs f on the writer's driver connection, the one the hot
// statements belong to while database/sql keeps it.
func (s *Store) onWriter(f func(driver.Conn) error) error {
	conn, err := s.w.Conn(context.Background())
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		c, ok := dc.(driver.Conn)
		if !ok {
			return fmt.Errorf("driver connection %T", dc)
		}
		return f(c)
	})
}

func (h *hotStmts) run(s *Store, recs []Record, ats []string, signing <-chan signed) (cp *Checkpoint, err error) {
	seq := recs[0].Seq
	prepared := s.pre
	s.pre = false
	defer func() {
		if err != nil {
			execHot(h.rollback) // SQLite may have rolled back already; that error says nothing new
		}
	}()
	if !prepared {
		if err := h.begin(s); err != nil {
			return nil, err
		}
	}
	for i, r := range recs {
		if err := execHot(h.insEvent, r.Seq, ats[i], r.Kind, r.Shoe, r.Coup, string(r.Body), r.PrevHash.String(), r.Hash.String()); err != nil {
			return nil, &WriteError{Op: "insert", Seq: r.Seq, Err: err}
		}
	}
	if signing != nil {
		sg := <-signing
		if sg.err != nil {
			return nil, &WriteError{Op: "sign checkpoint", Seq: recs[len(recs)-1].Seq, Err: sg.err}
		}
		c := sg.c
		if err := execHot(h.insCheckpoint, checkpointArgs(c)...); err != nil {
			return nil, &WriteError{Op: "checkpoint", Seq: c.Seq, Err: err}
		}
		cp = &c
	}
	if err := execHot(h.commit); err != nil {
		// It may still have reached the disk: remember what it wrote, so
		// the next commit can tell these rows from someone else's.
		s.attempt = recs
		return nil, &WriteError{Op: "commit", Seq: seq, Err: err}
	}
	return cp, nil
}

// begin opens a write transaction and checks the file's head inside it:
// errHeadMoved if it is not s.head, a *WriteError if either fails. On an
// error after BEGIN the caller rolls back.
func (h *hotStmts) begin(s *Store) error {
	seq := s.head.Seq + 1
	if err := execHot(h.beginTx); err != nil {
		return &WriteError{Op: "begin", Seq: seq, Err: err}
	}
	head, err := h.readHead()
	if err != nil {
		return &WriteError{Op: "read head", Seq: seq, Err: err}
	}
	if head.Seq == 0 {
		head = s.base // no row in this segment yet
	}
	if head != s.head {
		return errHeadMoved
	}
	return nil
}

// Prepare opens the next commit's transaction ahead of it: BEGIN
// IMMEDIATE and the head check run now, between cards, and the next
// commit is only its inserts and COMMIT. The recorder calls it after each
// commit has been handed on. The head is still checked inside every write
// transaction, at its start; from then until its COMMIT the trail's write
// lock is this store's, so no other program can append in between (the
// sqlite3 shell gets "database is locked"). Rows another program slipped
// in before it are found here, and the transaction is given up: the next
// commit goes the long way, which names them. Every other write of the
// store gives up a prepared transaction first (endPre). Failures here are
// only a lost head start: the commit then begins its own transaction and
// reports what it finds.
func (s *Store) Prepare() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pre || s.closed || s.sealedLive || s.tampered != nil || s.refused != nil || s.attempt != nil {
		return
	}
	s.onWriter(func(c driver.Conn) error {
		if err := s.hotOn(context.Background(), c); err != nil {
			return err
		}
		if err := s.hot.begin(s); err != nil {
			execHot(s.hot.rollback)
			return err
		}
		s.pre = true
		return nil
	})
}

// endPre gives up a prepared transaction (see Prepare) before any write
// but a commit's. The caller holds s.mu.
func (s *Store) endPre() error {
	if !s.pre {
		return nil
	}
	s.pre = false
	return s.onWriter(func(c driver.Conn) error {
		if s.hot == nil || c != s.hot.conn {
			return nil // that connection is gone, its transaction with it
		}
		return execHot(s.hot.rollback)
	})
}

// hotOn makes sure s.hot holds statements prepared on c.
func (s *Store) hotOn(ctx context.Context, c driver.Conn) error {
	if s.hot != nil && s.hot.conn == c {
		return nil
	}
	// First use, or database/sql replaced a broken connection (the old
	// one's statements and any prepared transaction went with it).
	s.pre = false
	h, err := prepareHot(ctx, c)
	if err != nil {
		return err
	}
	s.hot = h
	return nil
}

// closeHot finalises the hot statements, which SQLite needs before it
// really closes the connection they belong to.
func (s *Store) closeHot() error {
	if s.hot == nil {
		return nil
	}
	h, pre := s.hot, s.pre
	s.hot, s.pre = nil, false
	return s.onWriter(func(c driver.Conn) error {
		if c != h.conn {
			return nil // that connection is gone, its transaction and statements with it
		}
		var errs []error
		if pre {
			errs = append(errs, execHot(h.rollback))
		}
		return errors.Join(append(errs, h.close())...)
	})
}
