package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/shoeread"
)

// benchDisplay measures what a player sees: a card from the shoe to the
// table display's public/coup and public/shoe, taken as
// display/web/app.js takes them, at QoS 0 beside status and public/roads,
// on a connection of its own. Card to display times pit/events, the row
// itself, which the pit's systems take; the views go out after it, once
// the publisher's copy of the table has taken the commit's rows. Paced as
// card to display: a sentence once the row and the views of the one
// before have arrived and the gap has passed.
func benchDisplay(ctx context.Context, o Options, dir string) ([]Row, error) {
	sub, err := subscribeBench(ctx, o.Broker, false)
	if err != nil {
		return nil, err
	}
	defer sub.close()
	prefix := sub.prefix
	views, err := subscribeViews(ctx, o.Broker, prefix)
	if err != nil {
		return nil, err
	}
	defer views.close()
	live, err := startBenchLive(ctx, o, filepath.Join(dir, "controller"), prefix, sub)
	if err != nil {
		return nil, err
	}
	var took, tookCoup []time.Duration // until both views have come; until public/coup has
	var last viewKey                   // the view of the last card
	simErr := dealOneByOne(ctx, o, live, func(ev shoeread.Event, wrote time.Time) error {
		if _, ok := ev.Input(time.Time{}); !ok {
			return nil // a heartbeat: nothing is recorded
		}
		if err := sub.wait(ctx, 30*time.Second, fmt.Sprintf("the row of shoe sentence %d", ev.Seq), func(s *benchState) bool {
			_, ok := s.arrived[ev.Seq]
			return ok
		}); err != nil {
			return err
		}
		if ev.Kind == shoeread.KindCard {
			var at [2]viewArrival
			for w := range at {
				v, err := views.next(ctx, 30*time.Second, w, last)
				if err != nil {
					return fmt.Errorf("the views of shoe sentence %d: %w", ev.Seq, err)
				}
				at[w] = v
			}
			last = at[viewCoup].key
			tookCoup = append(tookCoup, at[viewCoup].at.Sub(wrote))
			both := at[viewCoup].at
			if at[viewShoe].at.After(both) {
				both = at[viewShoe].at
			}
			took = append(took, both.Sub(wrote))
		}
		time.Sleep(o.Gap)
		if len(took) >= o.Cards {
			return errBenchStop
		}
		return nil
	})
	if err := errors.Join(simErr, live.stop()); err != nil {
		return nil, err
	}
	if len(took) < o.Cards {
		return nil, fmt.Errorf("the simulator dealt %d cards, want %d", len(took), o.Cards)
	}
	d, dc := distOf(took), distOf(tookCoup)
	vals := d.values("")
	for k, v := range dc.values("coup_") {
		vals[k] = v
	}
	return []Row{{ID: "card_to_view", Result: d.String(), Goal: "reference", Verdict: VerdictInfo,
		Detail: fmt.Sprintf("%d cards, each written once its row and views had arrived and %s had passed; "+
			"the time until a subscriber taking status, public/coup, public/shoe and public/roads at QoS 0, "+
			"as the web display does, has both the public/coup and the public/shoe that show the card "+
			"(public/coup alone: %s); %d cards over 10 ms",
			d.N, o.Gap, dc, countOver(took, 10*time.Millisecond)),
		Values: vals}}, nil
}

func countOver(ds []time.Duration, limit time.Duration) int {
	n := 0
	for _, d := range ds {
		if d > limit {
			n++
		}
	}
	return n
}

// viewKey orders the public views by the cards they show: every card
// drawn from the shoe, burns included, moves cards_dealt on.
type viewKey struct{ shoe, dealt int }

func (k viewKey) after(o viewKey) bool {
	return k.shoe > o.shoe || k.shoe == o.shoe && k.dealt > o.dealt
}

type viewArrival struct {
	key viewKey
	at  time.Time
}

// The views a card changes: the table (the cards themselves) and the
// shoe (cards dealt and remaining).
const (
	viewCoup = iota
	viewShoe
)

// viewSub subscribes as a table display does, in a process of its own
// (subproc.go), and timestamps each public/coup and public/shoe as paho
// hands it over, before decoding it.
type viewSub struct {
	proc  *subProc
	which map[string]int // topic -> viewCoup or viewShoe

	mu     sync.Mutex
	views  [2][]viewArrival
	from   [2]int // views before these are spent
	notify chan struct{}
}

func subscribeViews(ctx context.Context, broker, prefix string) (*viewSub, error) {
	topics := mqttpub.Topics{Prefix: prefix}
	s := &viewSub{notify: make(chan struct{}),
		which: map[string]int{topics.Topic(mqttpub.TopicPublicCoup): viewCoup, topics.Topic(mqttpub.TopicPublicShoe): viewShoe}}
	filters := map[string]byte{}
	for _, t := range []string{mqttpub.TopicStatus, mqttpub.TopicPublicCoup, mqttpub.TopicPublicShoe, mqttpub.TopicPublicRoads} {
		filters[topics.Topic(t)] = 0 // as display/web/app.js subscribes
	}
	var err error
	s.proc, err = startSubscriber(ctx, subSpec{Broker: broker, ClientID: "tablectl-bench-display-" + benchID(), Filters: filters}, s.receive)
	if err != nil {
		return nil, fmt.Errorf("display subscriber: %w", err)
	}
	return s, nil
}

// receive takes a view; a payload that is not one (the empty retained
// message that clears a topic) is not an error.
func (s *viewSub) receive(topic string, at time.Time, payload []byte) error {
	w, ok := s.which[topic]
	if !ok {
		return nil
	}
	var v struct {
		Shoe  int `json:"shoe"`
		Dealt int `json:"cards_dealt"`
	}
	if json.Unmarshal(payload, &v) != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.views[w] = append(s.views[w], viewArrival{key: viewKey{v.Shoe, v.Dealt}, at: at})
	close(s.notify)
	s.notify = make(chan struct{})
	return nil
}

// next waits for the first view of kind w that shows a card after last's,
// and spends the views before it.
func (s *viewSub) next(ctx context.Context, timeout time.Duration, w int, last viewKey) (viewArrival, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		s.mu.Lock()
		for i := s.from[w]; i < len(s.views[w]); i++ {
			if v := s.views[w][i]; v.key.dealt > 0 && v.key.after(last) {
				s.from[w] = i + 1
				s.mu.Unlock()
				return v, nil
			}
		}
		s.from[w] = len(s.views[w])
		ch := s.notify
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return viewArrival{}, ctx.Err()
		case <-s.proc.done:
			return viewArrival{}, fmt.Errorf("display subscriber: %w", s.proc.err)
		case <-t.C:
			return viewArrival{}, fmt.Errorf("no %s showing a card after shoe %d, card %d, in %s", []string{"public/coup", "public/shoe"}[w], last.shoe, last.dealt, timeout)
		}
	}
}

func (s *viewSub) close() { s.proc.close() }
