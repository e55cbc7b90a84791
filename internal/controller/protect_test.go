package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/internal/supervisor"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/shoeread"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

// shortCoup finds a coup of seed's plan that deals five cards or more: the
// dealer will forget its fifth.
func shortCoup(t *testing.T, opts shoesim.Options) (shoesim.Options, int) {
	t.Helper()
	p, err := shoesim.NewPlan(opts)
	if err != nil {
		t.Fatal(err)
	}
	for n := 2; n < len(p.Shoes[0].Coups); n++ {
		if len(p.Shoes[0].Coups[n-1].Cards) >= 5 {
			opts.Faults = append(opts.Faults, fault(t, fmt.Sprintf("short@%d.5", n)))
			return opts, n
		}
	}
	t.Fatalf("seed %d deals no coup of five cards", opts.Seed)
	return opts, 0
}

// TestProtectShortCoup: the dealer reveals a coup the tableau has not
// finished and goes on to the next: coup_incomplete, and the card the next
// coup opens with is not put into the short one.
func TestProtectShortCoup(t *testing.T) {
	opts, n := shortCoup(t, shoesim.Options{Seed: 1307, Coups: 12})
	r := newRig(t, opts, tableConfig(t, nil))
	r.deal(coupCard(n, 4))
	_, cs := r.deal(faulted(shoesim.FaultShort))
	if got := kinds(events(cs)); got != "alert(coup_incomplete) suspended" {
		t.Fatalf("REVEAL on a short coup: %s", got)
	}
	r.expectSuspendedBy(coup.AlertCoupIncomplete, coup.NeedsCard)
	// The dealer goes on: the next coup's NOMOREBETS, then its first card,
	// the one the short coup wanted.
	r.deal(nmb(n + 1))
	_, cs = r.deal(coupCard(n+1, 1))
	if got := kinds(events(cs)); got != "alert(card_while_suspended)" {
		t.Fatalf("the card after a short coup: %s", got)
	}
	if v := r.pit(); len(v.Player)+len(v.Banker) != 4 || v.Coup != n {
		t.Fatalf("coup %d holds %d cards; the next coup's card went into the short coup %d", v.Coup, len(v.Player)+len(v.Banker), n)
	}
	r.refused(resume(), "needs the card entered or the coup voided")
	r.accepted(void(0))
}

// TestProtectRejectedInTrail: a sentence with a bad checksum is recorded
// with its bytes, and the card it carried shows as a gap.
func TestProtectRejectedInTrail(t *testing.T) {
	opts := shoesim.Options{Seed: 77, Coups: 3, Faults: []shoesim.Fault{fault(t, "badsum@2.3")}}
	r := newRig(t, opts, tableConfig(t, nil))
	bad, _ := r.deal(faulted(shoesim.FaultBadSum))
	cs := r.await("the rejected sentence recorded", func(c audit.Commit) bool { return c.Input.Kind == coup.InRejected })
	in := cs[len(cs)-1].Input
	if in.Rejected.Reason != "checksum" || in.Rejected.Count != 1 || !strings.Contains(in.Rejected.Raw, strings.TrimSpace(string(bad.Bytes))[:8]) {
		t.Fatalf("the rejected sentence recorded as %+v; the shoe sent %q", in.Rejected, bad.Bytes)
	}
	r.deal(coupCard(2, 4))
	if v := r.pit(); !v.Suspended || len(v.Alerts) == 0 || v.Alerts[0].Kind != coup.AlertSequenceGap {
		t.Fatalf("after the lost card: suspended %v, alerts %+v; want a sequence gap first", v.Suspended, v.Alerts)
	}
	// Replay shows it with the coup it came in.
	coups, _, err := audit.ReplayCoups(r.ctl.rec.Store().Events(context.Background(), audit.Query{}), r.tc)
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, rc := range coups {
		if rc.Coup == 2 {
			shown = rc.Rejected
		}
	}
	if len(shown) != 1 || !strings.HasPrefix(shown[0], "checksum: $CARD") {
		t.Fatalf("replay shows coup 2's rejected sentences as %q", shown)
	}
}

// TestProtectSequenceReused: a CARD sentence reusing the number of the
// sentence before with another card (issue 33 saw it only as an
// in.rejected row, the coup settling on the other cards) is recorded with
// its bytes and suspends the table, and its card is recorded as drawn
// while suspended, out of the shoe: nothing is dropped unseen.
func TestProtectSequenceReused(t *testing.T) {
	r := newRig(t, shoesim.Options{Seed: 33, Coups: 3}, tableConfig(t, nil))
	sent, _ := r.deal(coupCard(1, 2))
	other := coup.Card{Rank: coup.Nine, Suit: coup.Diamonds}
	if other == sent.Event.Card {
		other.Suit = coup.Clubs
	}
	repeat := v1Sentence(fmt.Sprintf("CARD,%d,%s", sent.Seq, other))
	if err := r.pty.Write(r.ctx, repeat); err != nil {
		t.Fatal(err)
	}
	cs := r.await("the reused number recorded", func(c audit.Commit) bool { return c.Input.Kind == coup.InRejected })
	rej := cs[len(cs)-1]
	if rej.Input.Rejected.Reason != coup.ReasonSeqReused || !strings.Contains(rej.Input.Rejected.Raw, strings.TrimSpace(string(repeat))) {
		t.Fatalf("recorded as %+v; the shoe sent %q", rej.Input.Rejected, repeat)
	}
	if got := kinds(rej.Events); got != "alert(sequence_reused) suspended" {
		t.Fatalf("the reused number: %s", got)
	}
	cs = r.await("its card", func(c audit.Commit) bool {
		return c.Input.Kind == coup.InCard && c.Input.ShoeSeq == sent.Seq && c.Input.Card != nil && *c.Input.Card == other
	})
	if got := kinds(cs[len(cs)-1].Events); got != "alert(card_while_suspended)" {
		t.Fatalf("the second card: %s", got)
	}
	if v := r.pit(); !v.Suspended || len(v.Alerts) != 2 || v.Alerts[0].Kind != coup.AlertSequenceReused || v.Alerts[0].Needs != coup.NeedsVoid {
		t.Fatalf("pit view: suspended %v, alerts %+v", v.Suspended, v.Alerts)
	}
	r.refused(resume(), "needs coup 1 voided")
	r.accepted(void(0))
}

// TestProtectProtocolVersion: a HELO announcing protocol version 2 is
// rejected, recorded, and suspends the table with an alert.
func TestProtectProtocolVersion(t *testing.T) {
	r := newRig(t, shoesim.Options{Seed: 5, Coups: 1}, tableConfig(t, nil))
	helo := v1Sentence("HELO,1,2,SHOE-0042")
	if err := r.pty.Write(r.ctx, helo); err != nil {
		t.Fatal(err)
	}
	cs := r.await("the HELO of version 2", func(c audit.Commit) bool { return c.Input.Kind == coup.InRejected })
	if got := kinds(events(cs[len(cs)-1:])); got != "alert(shoe_protocol_version) suspended" {
		t.Fatalf("HELO v2: %s", got)
	}
	al := r.expectSuspendedBy(coup.AlertShoeProtocol, coup.NeedsResume)
	if !strings.Contains(al.Message, "HELO,1,2,SHOE-0042") {
		t.Fatalf("alert %q does not show the sentence", al.Message)
	}
}

// TestProtectStrayCardAfterResult is the README's walk-through: suspended
// after a finished coup, the dealer draws on; resume clears it and the
// finished coup stands.
func TestProtectStrayCardAfterResult(t *testing.T) {
	r := newRig(t, shoesim.Options{Seed: 31, Coups: 4}, tableConfig(t, func(c *coup.TableConfig) { c.ResultTime = time.Hour }))
	r.deal(reveal(1))
	r.accepted(suspend("camera 3"))
	r.deal(nmb(2))
	_, cs := r.deal(coupCard(2, 1))
	if got := kinds(events(cs)); got != "alert(card_while_suspended)" {
		t.Fatalf("a card after the finished coup: %s", got)
	}
	r.refused(void(0), "no coup in progress")
	if got := kinds(r.accepted(resume())); got != "command_accepted alert_resolved resumed" {
		t.Fatalf("resume: %s", got)
	}
	rc := r.ctl.rec.Recall()
	if len(rc) != 1 || rc[0].Voided || rc[0].Coup != 1 {
		t.Fatalf("recall after resume: %+v; coup 1 must stand", rc)
	}
}

// TestProtectUnshuffledShoe deals through the pseudo-terminal a shoe of
// new decks, one riffled once, one that repeats the shoe before, and one
// that repeats it cut at a place the seed picks (the simulator deals
// every card of the shoe before): each is caught, within its goal, and
// the alert says why.
func TestProtectUnshuffledShoe(t *testing.T) {
	testenv.Long(t, "whole unshuffled shoes dealt through the controller")
	for _, tc := range []struct {
		mode   shoesim.ShuffleMode
		shoes  int
		within int
		says   string
	}{
		{shoesim.ShuffleNone, 1, 12, "as in a new deck"},
		{shoesim.ShuffleRiffle, 1, 30, "riffled once"},
		{shoesim.ShuffleRepeat, 2, coup.RepeatRunLen, "of the shoe before this one, its cards 1 to 8 in the same order"},
		// The cut may bring the cards behind the old cut card, which the
		// table never saw, first: up to shoesim.DefaultCut of them.
		{shoesim.ShuffleRecut, 2, coup.RepeatRunLen - 1 + shoesim.DefaultCut + coup.RepeatRunLen, "repeat 8 cards in a row of the shoe before this one"},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			tcfg := tableConfig(t, nil)
			opts := shoesim.Options{Seed: 99, Shoes: tc.shoes, Shuffle: tc.mode, Decks: tcfg.Profile.Decks}
			r := newRig(t, opts, tcfg)
			suspect := func(c audit.Commit) bool {
				al := alertsRaised(c.Events)
				return len(al) > 0 && al[0].Kind == coup.AlertShuffleSuspect
			}
			next := sentence{"the next sentence", func(shoesim.Sent) bool { return true }}
			var last *audit.Commit
			for range 1500 {
				_, cs := r.deal(next)
				if i := slices.IndexFunc(cs, suspect); i >= 0 {
					last = &cs[i]
					break
				}
			}
			if last == nil {
				t.Fatalf("no shuffle_suspect in 1500 sentences")
			}
			shoeCards := 0
			for _, c := range r.commits.since(0) {
				if c.Input.Kind == coup.InCard && c.Public.Shoe == last.Public.Shoe {
					shoeCards++
				}
				if c.Input.ShoeSeq == last.Input.ShoeSeq {
					break
				}
			}
			msg := alertsRaised(last.Events)[0].Message
			t.Logf("%s: caught at card %d: %s", tc.mode, shoeCards, msg)
			if last.Public.Shoe != tc.shoes {
				t.Fatalf("%s: caught in shoe %d; want shoe %d", tc.mode, last.Public.Shoe, tc.shoes)
			}
			if shoeCards > tc.within || !strings.Contains(msg, tc.says) {
				t.Fatalf("%s shoe caught at its card %d (want within %d): %q, want it to say %q", tc.mode, shoeCards, tc.within, msg, tc.says)
			}
		})
	}
}

// v1Sentence frames body as a v1 sentence with its checksum.
func v1Sentence(body string) []byte {
	var x byte
	for i := 0; i < len(body); i++ {
		x ^= body[i]
	}
	return fmt.Appendf(nil, "$%s*%02X\r\n", body, x)
}

// TestProtectRestartNoFalseMisdeal is a kill -9 while a result stands: the
// dealer goes on (the result time passes, NOMOREBETS, the next coup's
// cards), and the restarted controller reads it all in one burst. Judged
// at the times the shoe sent them, the sentences make no misdeal, and one
// controller_outage row says how many came late.
func TestProtectRestartNoFalseMisdeal(t *testing.T) {
	testenv.Long(t, "restarts mid-coup with late sentences")
	needRootToReopenKilled(t)
	t.Parallel()
	const resultTime = 2 * time.Second
	r := newProcessRigResult(t, shoesim.Options{Seed: 413, Coups: 3, CoupPace: 3 * time.Second, Heartbeat: time.Second}, resultTime.String())
	r.start()
	rev := r.send(reveal(1))
	r.waitRecorded(rev)
	revealed, shoeRevealed := time.Now(), r.simClock.Now()
	r.kill()
	// While no controller reads the line: the pause, NOMOREBETS and the
	// whole of coup 2.
	r.send(nmb(2))
	r.send(coupCard(2, lastCard(r.plan, 2)))
	// The simulated dealer's time runs on a virtual clock; the controller
	// reads the wall clock. Not synchronisation: the wall clock must catch
	// up with the shoe's time of the heartbeats it sent, and one more, so
	// the buffered sentences are late as a real shoe's would be, which is
	// what is tested.
	time.Sleep(time.Until(revealed.Add(r.simClock.Now().Sub(shoeRevealed) + shoeread.HeartbeatEvery)))
	r.start()
	r.deal(reveal(2))
	r.stop()
	var outages int
	for _, row := range r.rows {
		if row.Kind == string(coup.EvAlert) {
			t.Errorf("alert after the restart: %s", row.Body)
		}
		if row.Kind == KindControllerOutage {
			outages++
			var b struct {
				Late int `json:"late_sentences"`
			}
			if err := json.Unmarshal(row.Body, &b); err != nil || b.Late < 1 {
				t.Errorf("controller outage %s: want the late sentences counted", row.Body)
			}
			t.Logf("outage: %s", row.Body)
		}
	}
	if outages != 1 {
		t.Errorf("%d controller_outage rows, want one for the restart (a new trail has none)", outages)
	}
}

// TestDemoSuspendResume is the README's walk-through on the demo: a
// supervisor suspends the table between coups, the simulated dealer waits
// as a dealer would, and after resume the game goes on with no alert.
func TestDemoSuspendResume(t *testing.T) {
	testenv.Long(t, "the demo suspended and resumed by a supervisor")
	// A second of betting, the result standing half of it (as the demo
	// has it): wide margins for a busy machine.
	d := startDemoWith(t, DemoOptions{Seed: 21, MQTTWS: "off", Pace: 20 * time.Millisecond, CoupPace: time.Second, Shoes: 1})
	d.waitCoupResult(t)
	key, name, err := supervisor.LoadKey(d.info.Key)
	if err != nil {
		t.Fatal(err)
	}
	o := supervisor.Options{Broker: d.info.MQTT, Table: d.info.Table, Prefix: d.info.Prefix, Key: key, Name: name,
		Username: d.info.PitBrokerUser, Password: d.info.PitBrokerPassword, Logger: mqQuiet()}
	ctx := context.Background()
	if _, err := supervisor.Send(ctx, o, supervisor.Request{Action: coup.ActionSuspend, Reason: "a test"}); err != nil {
		t.Fatal(err)
	}
	// Not synchronisation: the suspension lasts three coups' worth of the
	// dealer's pace, in which a dealer who did not wait would deal.
	time.Sleep(3 * time.Second)
	if _, err := supervisor.Send(ctx, o, supervisor.Request{Action: coup.ActionResume}); err != nil {
		t.Fatalf("resume after a quiet suspension: %v", err)
	}
	// The game goes on: wait for the dealer's cards after the resume (a
	// loaded machine may take a few coups' time), then stop the demo.
	testenv.Eventually(t, 30*time.Second, "the dealer's cards after the resume", func() bool {
		_, after := cardsAroundSuspension(t, d.info.Trail, false)
		return after > 0
	})
	d.cancel()
	<-d.done
	cardsWhileSuspended, cardsAfter := cardsAroundSuspension(t, d.info.Trail, true)
	if cardsWhileSuspended != 0 || cardsAfter == 0 {
		t.Errorf("%d cards dealt while suspended, %d after resume; want none while suspended and the game going on after", cardsWhileSuspended, cardsAfter)
	}
}

// cardsAroundSuspension counts the cards the trail recorded while the
// table was suspended and after it was resumed; report says to fail on an
// alert row.
func cardsAroundSuspension(t *testing.T, trail string, report bool) (whileSuspended, after int) {
	t.Helper()
	ctx := context.Background()
	rd, err := audit.OpenReader(ctx, trail)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	suspended, resumed := false, false
	for row, err := range rd.Events(ctx, audit.Query{}) {
		if err != nil {
			t.Fatal(err)
		}
		switch row.Kind {
		case string(coup.EvAlert):
			if !report {
				continue
			}
			t.Errorf("alert: %s", row.Body)
			for r, err := range rd.Events(ctx, audit.Query{From: max(1, row.Seq-12), To: row.Seq}) {
				if err == nil {
					t.Logf("%d %s %s %.100s", r.Seq, r.At.Format("05.000"), r.Kind, r.Body)
				}
			}
		case string(coup.EvSuspended):
			suspended = true
		case string(coup.EvResumed):
			suspended, resumed = false, true
		case string(coup.InCard):
			switch {
			case suspended:
				whileSuspended++
			case resumed:
				after++
			}
		}
	}
	return whileSuspended, after
}
