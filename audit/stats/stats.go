// Package stats collates a table's audit trail into game statistics per
// dealer, per shift and per shoe: coups, coups per hour, seconds per coup,
// misdeals and voids per 100 coups (UKGC RTS 17: game logs analysed for
// trends relating to game performance and staff). It reads the rows the
// table derived (results, voids, alerts, sign-ins); it never writes.
//
// The figures, and what each counts:
//   - coups: coups dealt to a result, plus coups voided while in progress
//     (a coup voided after its result is counted once);
//   - in play: the time a shoe was in play (shoe started to shoe ended),
//     suspensions and any time the controller was down included, put
//     against the dealer on duty, the shift or the shoe of that moment;
//     coups per hour is coups over it;
//   - seconds per coup: the mean time from no more bets to the result (the
//     dealer's own part of a coup; betting time is the house's);
//   - misdeals: alerts that are the dealer's (a card drawn at the wrong
//     time, a card too many, a wrong burn, a short coup); alerts counts
//     every alert, faults of the shoe and the system too;
//   - voids: coups a supervisor voided, put against the dealer who dealt
//     the coup.
package stats

import (
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// By is how rows are grouped.
type By string

// The groupings.
const (
	ByDealer By = "dealer"
	ByShift  By = "shift"
	ByShoe   By = "shoe"
)

// NoDealer is the key of what happened with no dealer signed in.
const NoDealer = "(none)"

// DefaultShifts start at 06:00, 14:00 and 22:00.
var DefaultShifts = []time.Duration{6 * time.Hour, 14 * time.Hour, 22 * time.Hour}

// Options configure Compute.
type Options struct {
	By By
	// Shifts are the shifts' start times as offsets from midnight, in
	// Location (UTC when nil); nil is DefaultShifts.
	Shifts   []time.Duration
	Location *time.Location
}

// Row is one group's figures.
type Row struct {
	// Key is the dealer, the shift ("2026-11-25 06:00") or the shoe number.
	Key      string `json:"key"`
	Coups    int    `json:"coups"`
	Voids    int    `json:"voids"`
	Misdeals int    `json:"misdeals"`
	Alerts   int    `json:"alerts"`
	// InPlay is the time a shoe was in play, in seconds.
	InPlay float64 `json:"in_play_seconds"`
	// CoupsPerHour is Coups over InPlay; 0 with no time in play.
	CoupsPerHour float64 `json:"coups_per_hour"`
	// SecondsPerCoup is the mean time from no more bets to the result, of
	// the coups that had both; 0 with none.
	SecondsPerCoup float64 `json:"seconds_per_coup"`
	// MisdealsPer100 and VoidsPer100 are per 100 coups; 0 with no coup.
	MisdealsPer100 float64 `json:"misdeals_per_100_coups"`
	VoidsPer100    float64 `json:"voids_per_100_coups"`

	timed     int
	dealSecs  float64
	inPlayDur time.Duration
}

// Report is the rows in order (dealers by name, shifts and shoes in time
// order) and their total.
type Report struct {
	By    By    `json:"by"`
	Rows  []Row `json:"rows"`
	Total Row   `json:"total"`
}

// Kinds are the rows Compute reads; a caller may select only these.
var Kinds = []string{
	string(coup.EvShoeStarted), string(coup.EvShoeEnded), string(coup.EvDealerIn), string(coup.EvDealerOut),
	string(coup.EvBettingClosed), string(coup.EvCoupResult), string(coup.EvCoupVoided), string(coup.EvAlert),
}

// Misdeal reports whether an alert kind is a dealer's misdeal rather than
// a fault of the shoe, the reader or the system.
func Misdeal(k coup.AlertKind) bool {
	switch k {
	case coup.AlertCardBettingOpen, coup.AlertCardSuspended, coup.AlertCardNoCoup, coup.AlertExtraCard,
		coup.AlertWrongBurn, coup.AlertCoupIncomplete:
		return true
	}
	return false
}

type coupKey struct{ shoe, coup int }

// Collator takes rows one at a time, for figures kept up to date as the
// trail grows (the pit view's): Take every committed row, Report when
// asked. It is not safe for concurrent use.
type Collator struct{ c *collator }

// NewCollator starts figures with no row.
func NewCollator(o Options) (*Collator, error) {
	c, err := newCollator(o)
	if err != nil {
		return nil, err
	}
	return &Collator{c}, nil
}

// Take adds one row; rows already taken (by seq) are skipped.
func (c *Collator) Take(r audit.Record) error {
	if r.Seq <= c.c.seq {
		return nil
	}
	c.c.seq = r.Seq
	if err := c.c.take(r); err != nil {
		return fmt.Errorf("stats: row %d (%s): %w", r.Seq, r.Kind, err)
	}
	return nil
}

// Report is the figures as of the last row taken.
func (c *Collator) Report() Report { return c.c.report() }

// collator walks the rows in order.
type collator struct {
	seq    int64 // the last row taken
	o      Options
	rows   map[string]*Row
	order  []string
	last   time.Time
	inPlay bool
	shoe   int
	dealer string
	closed map[coupKey]time.Time // when betting closed on each coup
	dealt  map[coupKey]bool      // coups counted
}

// Compute collates the rows (in sequence order, as Reader.Events gives
// them). Rows of other kinds are skipped.
func Compute(rows iter.Seq2[audit.Record, error], o Options) (Report, error) {
	c, err := newCollator(o)
	if err != nil {
		return Report{}, err
	}
	for r, err := range rows {
		if err != nil {
			return Report{}, err
		}
		if err := c.take(r); err != nil {
			return Report{}, fmt.Errorf("stats: row %d (%s): %w", r.Seq, r.Kind, err)
		}
	}
	return c.report(), nil
}

func newCollator(o Options) (*collator, error) {
	switch o.By {
	case "":
		o.By = ByDealer
	case ByDealer, ByShift, ByShoe:
	default:
		return nil, fmt.Errorf("stats: group by %q: want dealer, shift or shoe", o.By)
	}
	if o.Location == nil {
		o.Location = time.UTC
	}
	if o.Shifts == nil {
		o.Shifts = DefaultShifts
	}
	o.Shifts = slices.Sorted(slices.Values(o.Shifts))
	for _, s := range o.Shifts {
		if s < 0 || s >= 24*time.Hour {
			return nil, fmt.Errorf("stats: shift start %v: want 00:00 to 23:59", s)
		}
	}
	if len(o.Shifts) == 0 {
		return nil, fmt.Errorf("stats: no shift")
	}
	return &collator{o: o, rows: map[string]*Row{}, closed: map[coupKey]time.Time{}, dealt: map[coupKey]bool{}}, nil
}

func (c *collator) row(key string) *Row {
	r, ok := c.rows[key]
	if !ok {
		r = &Row{Key: key}
		c.rows[key] = r
		c.order = append(c.order, key)
	}
	return r
}

// key is the group of what happened at at, by dealer d in shoe shoe.
func (c *collator) key(at time.Time, dealer string, shoe int) string {
	switch c.o.By {
	case ByShift:
		start, _ := c.shift(at)
		return start.Format("2006-01-02 15:04")
	case ByShoe:
		return strconv.Itoa(shoe)
	}
	if dealer == "" {
		return NoDealer
	}
	return dealer
}

// shift is the start of the shift at covers and the start of the next.
func (c *collator) shift(at time.Time) (start, next time.Time) {
	at = at.In(c.o.Location)
	day := time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, c.o.Location)
	starts := make([]time.Time, 0, 2*len(c.o.Shifts)+1)
	for _, d := range []time.Time{day.AddDate(0, 0, -1), day, day.AddDate(0, 0, 1)} {
		for _, s := range c.o.Shifts {
			// Add the wall-clock time to the day, so a shift starts at its
			// hour across a change of daylight saving time.
			h, m := int(s/time.Hour), int(s%time.Hour/time.Minute)
			starts = append(starts, time.Date(d.Year(), d.Month(), d.Day(), h, m, 0, 0, c.o.Location))
		}
	}
	for i := len(starts) - 1; i >= 0; i-- {
		if !starts[i].After(at) {
			return starts[i], starts[i+1]
		}
	}
	return starts[0], starts[1] // not reached: yesterday's first shift is before at
}

// elapse puts the time since the last row against the groups of that time.
func (c *collator) elapse(to time.Time) {
	from := c.last
	if to.After(c.last) {
		c.last = to
	}
	if !c.inPlay || from.IsZero() || !to.After(from) {
		return
	}
	for from.Before(to) {
		end := to
		if c.o.By == ByShift {
			if _, next := c.shift(from); next.Before(end) {
				end = next
			}
		}
		c.row(c.key(from, c.dealer, c.shoe)).inPlayDur += end.Sub(from)
		from = end
	}
}

func (c *collator) take(r audit.Record) error {
	if !slices.Contains(Kinds, r.Kind) {
		return nil
	}
	c.elapse(r.At)
	var e struct {
		Shoe   int    `json:"shoe"`
		Coup   int    `json:"coup"`
		By     string `json:"by"`
		Dealer string `json:"dealer"`
		Alert  *struct {
			Kind coup.AlertKind `json:"kind"`
		} `json:"alert"`
	}
	if err := json.Unmarshal(r.Body, &e); err != nil {
		return err
	}
	k := coupKey{e.Shoe, e.Coup}
	switch coup.EventKind(r.Kind) {
	case coup.EvShoeStarted:
		c.inPlay, c.shoe = true, e.Shoe
	case coup.EvShoeEnded:
		c.inPlay = false
	case coup.EvDealerIn:
		c.dealer = e.Dealer
	case coup.EvDealerOut:
		c.dealer = ""
	case coup.EvBettingClosed:
		c.closed[k] = r.At
	case coup.EvCoupResult:
		row := c.row(c.key(r.At, e.Dealer, e.Shoe))
		if !c.dealt[k] {
			c.dealt[k] = true
			row.Coups++
		}
		if at, ok := c.closed[k]; ok {
			row.timed++
			row.dealSecs += r.At.Sub(at).Seconds()
			delete(c.closed, k)
		}
	case coup.EvCoupVoided:
		// A void with no supervisor is the shoe ending before a coup took
		// a card: no coup was dealt and nobody voided it.
		if e.By == "" {
			return nil
		}
		row := c.row(c.key(r.At, e.Dealer, e.Shoe))
		row.Voids++
		if !c.dealt[k] {
			c.dealt[k] = true
			row.Coups++
		}
	case coup.EvAlert:
		if e.Alert == nil {
			return fmt.Errorf("alert without its alert")
		}
		row := c.row(c.key(r.At, e.Dealer, e.Shoe))
		row.Alerts++
		if Misdeal(e.Alert.Kind) {
			row.Misdeals++
		}
	}
	return nil
}

func (c *collator) report() Report {
	rep := Report{By: c.o.By, Total: Row{Key: "total"}}
	keys := slices.Clone(c.order)
	if c.o.By == ByDealer {
		slices.Sort(keys)
	}
	t := &rep.Total
	for _, k := range keys {
		r := c.rows[k]
		t.Coups += r.Coups
		t.Voids += r.Voids
		t.Misdeals += r.Misdeals
		t.Alerts += r.Alerts
		t.timed += r.timed
		t.dealSecs += r.dealSecs
		t.inPlayDur += r.inPlayDur
		r.finish()
		rep.Rows = append(rep.Rows, *r)
	}
	t.finish()
	return rep
}

// finish works out the rates, rounded to 0.01.
func (r *Row) finish() {
	r.InPlay = round(r.inPlayDur.Seconds())
	if h := r.inPlayDur.Hours(); h > 0 {
		r.CoupsPerHour = round(float64(r.Coups) / h)
	}
	if r.timed > 0 {
		r.SecondsPerCoup = round(r.dealSecs / float64(r.timed))
	}
	if r.Coups > 0 {
		r.MisdealsPer100 = round(100 * float64(r.Misdeals) / float64(r.Coups))
		r.VoidsPer100 = round(100 * float64(r.Voids) / float64(r.Coups))
	}
}

func round(f float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', 2, 64), 64)
	return v
}

// ParseShifts reads shift start times, "06:00,14:00,22:00".
func ParseShifts(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		t, err := time.Parse("15:04", strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("shift start %q: want HH:MM", f)
		}
		d := time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute
		if slices.Contains(out, d) {
			return nil, fmt.Errorf("shift start %q given twice", f)
		}
		out = append(out, d)
	}
	return out, nil
}
