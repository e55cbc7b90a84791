package signedcmd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tablectl/tablectl/base/clock"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// KindAccepted records a verified command that the table does not carry
// out itself (resync): the publisher acts on the row. Table actions are
// recorded as their in.cmd input and the table's command_accepted or
// command_refused event instead.
const KindAccepted = "ctl.command_accepted"

// AcceptedBody is the body of a KindAccepted row.
type AcceptedBody struct {
	ID     string `json:"id"`
	Action string `json:"action"`
	By     string `json:"by"`
	From   int64  `json:"from,omitempty"`
	To     int64  `json:"to,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// RejectedBody is the body of an audit.KindRejected row: a command refused
// before it reached the table. The command itself is not stored (it may be
// hostile); its size and SHA-256 identify it.
type RejectedBody struct {
	ID         string `json:"id,omitempty"`
	Action     string `json:"action,omitempty"`
	Supervisor string `json:"supervisor,omitempty"`
	Table      string `json:"table,omitempty"`
	Code       string `json:"code"`
	Reason     string `json:"reason"`
	Bytes      int    `json:"bytes"`
	SHA256     string `json:"sha256"`
}

// Results of a command.
const (
	Accepted = "accepted"
	Refused  = "refused"
)

// Reply answers one command on cmd/reply.
type Reply struct {
	// ID echoes the command's id ("" when it could not be read).
	ID     string `json:"id"`
	Action string `json:"action,omitempty"`
	By     string `json:"by,omitempty"`
	Result string `json:"result"`
	// Code and Reason say why a command was refused; Code is one of the
	// Code constants.
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Seq is the audit row that recorded the outcome (0 when the trail
	// could not be written).
	Seq int64     `json:"seq,omitempty"`
	At  time.Time `json:"at"`
	// From and To are the rows a resync sent again.
	From int64 `json:"from,omitempty"`
	To   int64 `json:"to,omitempty"`
}

// tableCommandEvent is the part of a command_accepted or command_refused
// event body a reply needs.
type tableCommandEvent struct {
	Command string `json:"command"`
	Action  string `json:"action"`
	By      string `json:"by"`
	Reason  string `json:"reason"`
}

// ReplyFor returns the reply a trail row calls for, if any: the table's
// command_accepted and command_refused events, and KindRejected rows.
// (KindAccepted rows are answered by whoever carries them out.)
func ReplyFor(rec audit.Record) (Reply, bool) {
	r := Reply{Seq: rec.Seq, At: rec.At}
	switch rec.Kind {
	case string(coup.EvCommandDone), string(coup.EvCommandRefused):
		var e tableCommandEvent
		if json.Unmarshal(rec.Body, &e) != nil {
			return Reply{}, false
		}
		r.ID, r.Action, r.By = e.Command, e.Action, e.By
		r.Result = Accepted
		if rec.Kind == string(coup.EvCommandRefused) {
			r.Result, r.Code, r.Reason = Refused, CodeTable, e.Reason
		}
		return r, true
	case audit.KindRejected:
		var b RejectedBody
		if json.Unmarshal(rec.Body, &b) != nil {
			return Reply{}, false
		}
		r.ID, r.Action, r.By, r.Result, r.Code, r.Reason = b.ID, b.Action, b.Supervisor, Refused, b.Code, b.Reason
		return r, true
	}
	return Reply{}, false
}

// Recorder is where the Handler records commands (*audit.Recorder).
type Recorder interface {
	Submit(ctx context.Context, in coup.Input) (audit.Commit, error)
	Record(ctx context.Context, e audit.Event) (audit.Record, error)
}

// Replier sends a reply directly, for the one case where no trail row can
// carry it: the trail cannot be written.
type Replier interface {
	Reply(Reply)
}

// Handler takes commands off the wire: it verifies each, records it
// (refused ones as audit.KindRejected rows, table actions as table inputs,
// resync as a KindAccepted row) and leaves the reply to whoever publishes
// the trail, so a reply never runs ahead of the record. Refusals beyond
// Limit are summarised instead (KindRefusals). Its methods may be called
// from several goroutines.
type Handler struct {
	Verifier *Verifier
	Recorder Recorder
	Replier  Replier
	// Clock stamps replies and times summaries; nil is the wall clock.
	Clock  clock.Clock
	Logger *slog.Logger
	// Limit bounds the rows refusals write; the zero value is the defaults.
	Limit RefusalLimit
	// Observe hears every command's outcome, for the metrics. It must not
	// block.
	Observe func(Outcome)

	mu      sync.Mutex
	bucket  refusalBucket
	summary clock.Timer // armed while a summary is gathered
	// gathered wakes the loop that takes commands when a summary begins
	// outside Handle (Screened, Lost), so it arms SummaryTimer.
	gathered chan struct{}
}

// Outcome is what became of one command.
type Outcome struct {
	// Result is Accepted or Refused.
	Result string
	// Code is the refusal code ("" when accepted): one of the Code
	// constants, CodeTable for a verified command the table refused.
	Code string
	// Summarised marks a refusal that got no row and no reply of its own,
	// only a count in the next KindRefusals row.
	Summarised bool
	// Screened marks a command dropped before it was queued: refused by
	// the Screen, its queue full (CodeQueueFull), or dropped by the embedded
	// broker (CodeRateLimited).
	Screened bool
}

func (h *Handler) log() *slog.Logger {
	if h.Logger == nil {
		return slog.Default()
	}
	return h.Logger
}

func (h *Handler) now() time.Time { return clock.Or(h.Clock).Now() }

func (h *Handler) observe(o Outcome) {
	if h.Observe != nil {
		h.Observe(o)
	}
}

// Handle deals with one command. size is the payload's size on the wire
// when payload was cut short (0 when it is whole).
func (h *Handler) Handle(ctx context.Context, payload []byte, size int) {
	h.HandleMessage(ctx, Message{Payload: payload, Size: size})
}

// HandleMessage deals with one command, as Handle does; a message that
// holds a token (Screened said so) spends it on its refusal.
func (h *Handler) HandleMessage(ctx context.Context, m Message) {
	payload, size := m.Payload, m.Size
	log := h.log()
	if size < len(payload) {
		size = len(payload)
	}
	var v Verified
	var err error
	if size > MaxBytes {
		err = refuse(CodeOversized, "the command is %d bytes; the limit is %d", size, MaxBytes)
	} else {
		v, err = h.Verifier.Verify(payload)
	}
	var ref *Refusal
	if errors.As(err, &ref) {
		h.refused(ctx, ref, payload, size, m.Token)
		return
	}
	c := v.Command
	log.Info("command verified", "id", c.ID, "action", c.Action, "supervisor", c.Supervisor, "key_id", v.KeyID, "key", v.KeyLabel)
	out := Outcome{Result: Accepted}
	if c.Action == ActionResync {
		_, err = h.Recorder.Record(ctx, audit.Event{Kind: KindAccepted, Body: AcceptedBody{ID: c.ID, Action: c.Action, By: c.Supervisor, From: c.From, To: c.To, Reason: c.Reason}})
	} else {
		var cm audit.Commit
		cm, err = h.Recorder.Submit(ctx, v.Input())
		for _, e := range cm.Events {
			if e.Kind == coup.EvCommandRefused {
				out = Outcome{Result: Refused, Code: CodeTable}
			}
		}
	}
	if err != nil {
		out = Outcome{Result: Refused, Code: CodeTrail}
		h.direct(Reply{ID: c.ID, Action: c.Action, By: c.Supervisor, Result: Refused, Code: CodeTrail,
			Reason: "the audit trail cannot be written: " + err.Error()})
	}
	h.observe(out)
}

// refused records a refusal in a row of its own while the limit allows (or
// a token was taken for it already), and otherwise counts it in the summary
// being gathered.
func (h *Handler) refused(ctx context.Context, ref *Refusal, payload []byte, size int, token bool) {
	log := h.log()
	now := h.now()
	limit := h.Limit.withDefaults()
	h.mu.Lock()
	own := token || h.bucket.take(limit, now)
	first := !own && h.bucket.gather(ref.Code, size, now)
	due, pending := h.bucket.due(limit)
	h.mu.Unlock()
	h.observe(Outcome{Result: Refused, Code: ref.Code, Summarised: !own})
	if first {
		log.Warn("commands are refused faster than the trail records them one by one: counting them in one row",
			"burst", limit.Burst, "every", limit.Every, "summary_in", limit.Summary)
	}
	if own {
		sum := sha256.Sum256(payload)
		body := RejectedBody{ID: ref.ID, Action: ref.Action, Supervisor: ref.Supervisor, Table: ref.Table,
			Code: ref.Code, Reason: ref.Reason, Bytes: size, SHA256: hex.EncodeToString(sum[:])}
		log.Warn("command refused", "id", ref.ID, "action", ref.Action, "supervisor", ref.Supervisor, "code", ref.Code, "reason", ref.Reason)
		if _, err := h.Recorder.Record(ctx, audit.Event{Kind: audit.KindRejected, Body: body}); err != nil {
			h.direct(Reply{ID: ref.ID, Action: ref.Action, By: ref.Supervisor, Result: Refused, Code: ref.Code,
				Reason: ref.Reason + " (and the refusal could not be recorded: " + err.Error() + ")"})
		}
	}
	if pending && !now.Before(due) {
		h.Flush(ctx)
	}
}

// Screened deals with a command the Screen refused (code) before it was
// queued, size bytes on the wire. While the limit allows a refusal a row of
// its own, it takes the token for it and reports true: the caller queues
// the command for HandleMessage with Message.Token set, so it is verified,
// recorded and answered as before. Otherwise the refusal is counted in the
// summary being gathered (as Handle counts refusals beyond the limit) and
// the command is dropped. It never blocks on the trail: it is for the MQTT
// client's message handler.
func (h *Handler) Screened(code string, size int) bool {
	now := h.now()
	limit := h.Limit.withDefaults()
	h.mu.Lock()
	own := h.bucket.take(limit, now)
	first := !own && h.bucket.gather(code, size, now)
	h.mu.Unlock()
	if own {
		return true
	}
	h.summarised(code, first, limit)
	return false
}

// Lost counts a command dropped unread in the summary being gathered: its
// queue was full (CodeQueueFull), or the embedded broker held its client to
// a rate (CodeRateLimited). So every command that reached the table's
// connection or its broker is on the trail, in a row or a count. Like
// Screened, it never blocks.
func (h *Handler) Lost(code string, size int) {
	now := h.now()
	limit := h.Limit.withDefaults()
	h.mu.Lock()
	first := h.bucket.gather(code, size, now)
	h.mu.Unlock()
	h.summarised(code, first, limit)
}

// summarised observes a refusal counted in the summary from outside
// Handle, and wakes the loop taking commands when it began a summary.
func (h *Handler) summarised(code string, first bool, limit RefusalLimit) {
	h.observe(Outcome{Result: Refused, Code: code, Summarised: true, Screened: true})
	if !first {
		return
	}
	h.log().Warn("commands are refused faster than the trail records them one by one: counting them in one row",
		"burst", limit.Burst, "every", limit.Every, "summary_in", limit.Summary)
	select {
	case h.wake() <- struct{}{}:
	default:
	}
}

func (h *Handler) wake() chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gathered == nil {
		h.gathered = make(chan struct{}, 1)
	}
	return h.gathered
}

// Gathered receives when a summary begins outside Handle (Screened, Lost):
// a loop that takes commands selects on it to arm SummaryTimer again.
func (h *Handler) Gathered() <-chan struct{} { return h.wake() }

// SummaryDue is when the refusals gathered so far must be written (Flush),
// if any are.
func (h *Handler) SummaryDue() (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bucket.due(h.Limit.withDefaults())
}

// Flush writes the refusals gathered so far as one KindRefusals row, due or
// not. A summary the trail does not take is kept, to go with the next.
func (h *Handler) Flush(ctx context.Context) error {
	h.mu.Lock()
	p := h.bucket.takeSummary()
	if h.summary != nil {
		h.summary.Stop() // re-armed by the next SummaryTimer if anything is gathered
	}
	h.mu.Unlock()
	if p.Count == 0 {
		return nil
	}
	if _, err := h.Recorder.Record(ctx, audit.Event{Kind: KindRefusals, Body: p}); err != nil {
		h.mu.Lock()
		h.bucket.putBack(h.Limit.withDefaults(), p, h.now())
		h.mu.Unlock()
		return fmt.Errorf("record a summary of %d refused commands: %w", p.Count, err)
	}
	h.log().Warn("commands refused without a row each", "count", p.Count, "bytes", p.Bytes, "codes", p.Codes, "from", p.From, "to", p.To)
	return nil
}

func (h *Handler) direct(r Reply) {
	r.At = h.now().UTC()
	if h.Replier != nil {
		h.Replier.Reply(r)
	}
}

// Run handles the commands from in until ctx is done or in is closed,
// writing each summary of refusals when it falls due and the last one on
// the way out.
func (h *Handler) Run(ctx context.Context, in <-chan Message) {
	defer h.Flush(context.WithoutCancel(ctx))
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-in:
			if !ok {
				return
			}
			h.HandleMessage(ctx, m)
		case <-h.SummaryTimer():
			h.Flush(ctx)
		case <-h.Gathered():
		}
	}
}

// SummaryTimer fires when the summary being gathered falls due; it is nil
// (never fires) while none is. For loops that take commands from elsewhere
// than Run: re-arm it after every command. One timer serves every call.
func (h *Handler) SummaryTimer() <-chan time.Time {
	due, ok := h.SummaryDue()
	h.mu.Lock()
	defer h.mu.Unlock()
	if !ok {
		if h.summary != nil {
			h.summary.Stop()
		}
		return nil
	}
	d := max(0, due.Sub(h.now()))
	if h.summary == nil {
		h.summary = clock.Or(h.Clock).NewTimer(d)
	} else {
		h.summary.Reset(d)
	}
	return h.summary.C()
}

// Message is one command as it came off the wire. Payload may be cut short
// (at MaxBytes+1) so an oversized message is never copied whole; Size is its
// size on the wire.
type Message struct {
	Payload []byte
	Size    int
	// Token says that Screened took a token of the refusal limit for this
	// command: its refusal has a row and a reply of its own.
	Token bool
}
