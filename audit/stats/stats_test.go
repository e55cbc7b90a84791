package stats

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/coup"
)

// step is one input of the hand-made shoe, at a wall-clock time of
// 2026-11-25 (UTC).
type step struct {
	at string // "15:04:05"
	in coup.Input
}

func card(s string) coup.Input {
	c, err := coup.ParseCard(s)
	if err != nil {
		panic(err)
	}
	return coup.Input{Kind: coup.InCard, Card: &c}
}

func btn(b string) coup.Input { return coup.Input{Kind: coup.InButton, Button: b} }

func cmd(action string, edit func(*coup.Command)) coup.Input {
	c := &coup.Command{ID: action, Action: action, By: "pit-boss"}
	if edit != nil {
		edit(c)
	}
	return coup.Input{Kind: coup.InCmd, Command: c}
}

func dealerIn(name string) coup.Input {
	in := cmd(coup.ActionDealerIn, func(c *coup.Command) { c.Dealer = name })
	in.Command.ID += "-" + name
	return in
}

// natural is a coup of four cards in suit s: Player 9 natural, Banker 7.
func natural(at string, s string) []step {
	var out []step
	for _, r := range []string{"9", "7", "K", "K"} {
		out = append(out, step{at, card(r + s)})
	}
	return out
}

// handShoe is one shoe dealt by ann from 05:50 and bob from 06:02, with a
// misdeal each, a void each, a sequence gap and a shoe end at 06:10. The
// table config reveals cards as dealt and holds each result 5 s.
func handShoe() []step {
	s := []step{
		{"05:50:00", dealerIn("ann")},
		{"05:50:00", btn(coup.ButtonNewShoe)},
		{"05:50:00", card("5S")},
	}
	for _, c := range []string{"2C", "3C", "4C", "6C", "7C"} {
		s = append(s, step{"05:50:00", card(c)})
	}
	s = append(s, step{"05:50:00", btn(coup.ButtonBurnDone)})
	// ann: coup 1 dealt in 30 s, coup 2 in 40 s.
	s = append(s, step{"05:51:00", btn(coup.ButtonNoMoreBets)})
	s = append(s, natural("05:51:30", "S")...)
	s = append(s, step{"05:53:00", btn(coup.ButtonNoMoreBets)})
	s = append(s, natural("05:53:40", "H")...)
	// ann draws a card while betting is open on coup 3: a misdeal; the
	// supervisor voids coup 3.
	s = append(s, step{"05:55:00", card("2D")}, step{"05:55:30", cmd(coup.ActionVoid, nil)})
	// bob relieves ann while coup 4 takes bets.
	s = append(s, step{"06:02:00", dealerIn("bob")})
	// bob: coup 4 in 20 s, coup 5 in 50 s (voided later), coup 6 in 30 s
	// and a card too many after it, a sequence gap, coup 7 in 10 s.
	s = append(s, step{"06:03:00", btn(coup.ButtonNoMoreBets)})
	s = append(s, natural("06:03:20", "D")...)
	s = append(s, step{"06:05:00", btn(coup.ButtonNoMoreBets)})
	s = append(s, natural("06:05:50", "C")...)
	s = append(s, step{"06:06:00", cmd(coup.ActionVoid, func(c *coup.Command) { c.Coup = 5; c.ID = "void-5" })})
	s = append(s, step{"06:07:00", btn(coup.ButtonNoMoreBets)})
	s = append(s, natural("06:07:30", "S")...)
	s = append(s, step{"06:07:32", card("3H")},
		step{"06:08:00", cmd(coup.ActionResume, nil)},
		step{"06:08:30", coup.Input{Kind: coup.InGap, GapFrom: 90, GapTo: 91}},
		step{"06:09:00", cmd(coup.ActionResume, func(c *coup.Command) { c.ID = "resume-2" })},
		step{"06:09:10", btn(coup.ButtonNoMoreBets)})
	s = append(s, natural("06:09:20", "H")...)
	// The shoe ends at 06:10 with coup 8 taking bets: it never happens.
	s = append(s, step{"06:10:00", cmd(coup.ActionShoeEnd, nil)})
	return s
}

// writeTrail records steps through a real recorder into a trail file.
func writeTrail(t *testing.T, steps []step) string {
	t.Helper()
	p, err := coup.BuiltinProfile(coup.ProfileVIP)
	if err != nil {
		t.Fatal(err)
	}
	tc := coup.DefaultTableConfig(p)
	tc.Reveal = coup.RevealImmediate
	tc.ResultTime = 5 * time.Second
	day := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(day)
	path := filepath.Join(t.TempDir(), "trail.db")
	rec, err := audit.OpenRecorder(context.Background(), path, audit.RecorderOptions{
		Table: "T-stats", Config: tc, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		hms, err := time.Parse("15:04:05", st.at)
		if err != nil {
			t.Fatal(err)
		}
		clk.Set(day.Add(time.Duration(hms.Hour())*time.Hour + time.Duration(hms.Minute())*time.Minute + time.Duration(hms.Second())*time.Second))
		cm, err := rec.Submit(context.Background(), st.in)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range cm.Events {
			if e.Kind == coup.EvCommandRefused || e.Kind == coup.EvIgnored {
				t.Fatalf("%s %s: %s %s", st.at, st.in, e.Kind, e.Reason)
			}
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func compute(t *testing.T, path string, o Options) Report {
	t.Helper()
	r, err := audit.OpenReader(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rep, err := Compute(r.Events(context.Background(), audit.Query{Kinds: Kinds}), o)
	if err != nil {
		t.Fatal(err)
	}
	// Reading every row gives the same figures as reading only Kinds.
	all, err := Compute(r.Events(context.Background(), audit.Query{}), o)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(rep)
	b, _ := json.Marshal(all)
	if !bytes.Equal(a, b) {
		t.Fatalf("figures differ when every row is read:\n%s\n%s", a, b)
	}
	return rep
}

// TestStatsHandMadeTrail checks the figures of the hand-made shoe against
// those worked out by hand:
//
// In play: the shoe runs 05:50:00 to 06:10:00, 1200 s; ann is on duty
// 05:50:00 to 06:02:00 (720 s), bob 06:02:00 to 06:10:00 (480 s).
//
//	ann: coups 1, 2 and 3 (voided in progress) = 3; voids 1; misdeals 1
//	     (card while betting open); alerts 1. 3 coups / 0.2 h = 15 per
//	     hour; (30 + 40) / 2 = 35 s per coup; 100 * 1/3 = 33.33 per 100.
//	bob: coups 4, 5, 6, 7 = 4; voids 1 (coup 5); misdeals 1 (extra
//	     card); alerts 2 (and the gap). 4 / (480/3600 h) = 30 per hour;
//	     (20 + 50 + 30 + 10) / 4 = 27.5 s; 25 per 100.
//	total: 7 coups in 1/3 h = 21 per hour; 180 s / 6 = 30 s; 2/7 = 28.57.
//
// By shift (06:00, 14:00, 22:00): the 22:00 shift of the 24th holds
// 05:50-06:00 (600 s): ann's three coups, 18 per hour. The 06:00 shift
// holds 06:00-06:10 (600 s): ann 06:00-06:02 without a coup and bob's
// four, 24 per hour.
func TestStatsHandMadeTrail(t *testing.T) {
	path := writeTrail(t, handShoe())
	row := func(key string, coups, voids, misdeals, alerts int, inPlay, cph, spc, mp100, vp100 float64) Row {
		return Row{Key: key, Coups: coups, Voids: voids, Misdeals: misdeals, Alerts: alerts, InPlay: inPlay,
			CoupsPerHour: cph, SecondsPerCoup: spc, MisdealsPer100: mp100, VoidsPer100: vp100}
	}
	total := row("total", 7, 2, 2, 3, 1200, 21, 30, 28.57, 28.57)
	for _, tt := range []struct {
		by   By
		rows []Row
	}{
		{ByDealer, []Row{
			row("ann", 3, 1, 1, 1, 720, 15, 35, 33.33, 33.33),
			row("bob", 4, 1, 1, 2, 480, 30, 27.5, 25, 25),
		}},
		{ByShift, []Row{
			row("2026-11-24 22:00", 3, 1, 1, 1, 600, 18, 35, 33.33, 33.33),
			row("2026-11-25 06:00", 4, 1, 1, 2, 600, 24, 27.5, 25, 25),
		}},
		{ByShoe, []Row{row("1", 7, 2, 2, 3, 1200, 21, 30, 28.57, 28.57)}},
	} {
		t.Run(string(tt.by), func(t *testing.T) {
			rep := compute(t, path, Options{By: tt.by})
			want := Report{By: tt.by, Rows: tt.rows, Total: total}
			got, _ := json.MarshalIndent(rep, "", " ")
			exp, _ := json.MarshalIndent(want, "", " ")
			if !bytes.Equal(got, exp) {
				t.Fatalf("got\n%s\nwant\n%s", got, exp)
			}
		})
	}
}

// TestStatsNoDealer: a trail with nobody signed in (every trail before
// dealers signed in) puts everything against NoDealer.
func TestStatsNoDealer(t *testing.T) {
	var steps []step
	for _, st := range handShoe() {
		if st.in.Kind == coup.InCmd && st.in.Command.Action == coup.ActionDealerIn {
			continue
		}
		steps = append(steps, st)
	}
	rep := compute(t, writeTrail(t, steps), Options{})
	if len(rep.Rows) != 1 || rep.Rows[0].Key != NoDealer || rep.Rows[0].Coups != 7 || rep.Rows[0].CoupsPerHour != 21 {
		t.Fatalf("%+v", rep)
	}
}

func TestShiftBoundaries(t *testing.T) {
	london, err := time.LoadLocation("Europe/London")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	c := &collator{o: Options{Shifts: DefaultShifts, Location: london}}
	for _, tt := range []struct {
		at          time.Time
		start, next string
	}{
		{time.Date(2026, 11, 25, 5, 59, 59, 0, time.UTC), "2026-11-24 22:00", "2026-11-25 06:00"},
		{time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC), "2026-11-25 06:00", "2026-11-25 14:00"},
		{time.Date(2026, 11, 25, 23, 0, 0, 0, time.UTC), "2026-11-25 22:00", "2026-11-26 06:00"},
		// Summer time in London: 06:00 local is 05:00 UTC.
		{time.Date(2026, 7, 1, 5, 30, 0, 0, time.UTC), "2026-07-01 06:00", "2026-07-01 14:00"},
		// The night the clocks go back (25 October 2026): the 22:00 shift
		// of the 24th runs nine hours to 06:00 GMT.
		{time.Date(2026, 10, 25, 3, 0, 0, 0, time.UTC), "2026-10-24 22:00", "2026-10-25 06:00"},
	} {
		s, n := c.shift(tt.at)
		if got := s.Format("2006-01-02 15:04"); got != tt.start || n.Format("2006-01-02 15:04") != tt.next {
			t.Errorf("%v: shift %s to %s, want %s to %s", tt.at, got, n.Format("2006-01-02 15:04"), tt.start, tt.next)
		}
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, o := range []Options{{By: "table"}, {Shifts: []time.Duration{25 * time.Hour}}, {Shifts: []time.Duration{}}} {
		if _, err := Compute(func(func(audit.Record, error) bool) {}, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	for _, s := range []string{"", "6", "25:00", "06:00,06:00"} {
		if _, err := ParseShifts(s); err == nil {
			t.Errorf("shifts %q accepted", s)
		}
	}
	if d, err := ParseShifts("22:00, 06:00,14:30"); err != nil || len(d) != 3 || d[2] != 14*time.Hour+30*time.Minute {
		t.Errorf("%v %v", d, err)
	}
}

func TestWriters(t *testing.T) {
	rep := compute(t, writeTrail(t, handShoe()), Options{})
	var txt, csv bytes.Buffer
	if err := WriteText(&txt, rep); err != nil {
		t.Fatal(err)
	}
	if err := WriteCSV(&csv, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"DEALER", "ann", "bob", "total", "27.5"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, txt.String())
		}
	}
	lines := strings.Split(strings.TrimSpace(csv.String()), "\n")
	if len(lines) != 4 || lines[0] != "dealer,coups,in_play_seconds,coups_per_hour,seconds_per_coup,misdeals,misdeals_per_100_coups,voids,voids_per_100_coups,alerts" ||
		lines[2] != "bob,4,480,30,27.5,1,25,1,25,2" {
		t.Fatalf("csv:\n%s", csv.String())
	}
}

// TestCollatorMatchesCompute: rows taken one at a time (some twice) give
// the figures Compute gives, at every row.
func TestCollatorMatchesCompute(t *testing.T) {
	path := writeTrail(t, handShoe())
	r, err := audit.OpenReader(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := NewCollator(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var seen []audit.Record
	for row, err := range r.Events(context.Background(), audit.Query{}) {
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, row)
		for range 2 { // a row taken twice counts once
			if err := c.Take(row); err != nil {
				t.Fatal(err)
			}
		}
		want, err := Compute(func(yield func(audit.Record, error) bool) {
			for _, s := range seen {
				if !yield(s, nil) {
					return
				}
			}
		}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(c.Report())
		b, _ := json.Marshal(want)
		if !bytes.Equal(a, b) {
			t.Fatalf("after row %d:\n%s\n%s", row.Seq, a, b)
		}
	}
}
