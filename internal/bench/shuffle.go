package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tablectl/tablectl/coup"
)

// The shuffle check's record (docs/game-protection.md): false alarms over
// fair shoes dealt one after another, as a table deals them, and for each
// way a shoe reaches a table unshuffled, how often the check catches it
// and how many cards after the unshuffled stretch begins. Everything runs
// coup.ShuffleCheck, the table's own check, on shoes from shoes.go.

// ShuffleOptions size the record. Zero values take the defaults.
type ShuffleOptions struct {
	// Shoes is how many fair 8-deck shoes the false alarms are counted
	// over (1,000,000).
	Shoes int
	// Trials is how many shoes of each case are dealt (2,000).
	Trials int
	// Seed seeds every shoe (33).
	Seed uint64
	// Workers is how many goroutines deal (the processors).
	Workers  int
	Progress io.Writer
}

func (o *ShuffleOptions) defaults() {
	if o.Shoes == 0 {
		o.Shoes = 1_000_000
	}
	if o.Trials == 0 {
		o.Trials = 2000
	}
	if o.Seed == 0 {
		o.Seed = 33
	}
	if o.Workers == 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// ShuffleReport is the record.
type ShuffleReport struct {
	CPUs    int    `json:"cpus"`
	CPU     string `json:"cpu"`
	Go      string `json:"go"`
	Workers int    `json:"workers"`
	Seed    uint64 `json:"seed"`
	// FalseAlarms over Shoes fair shoes, CardsJudged cards in all.
	Shoes       int   `json:"shoes"`
	CardsJudged int64 `json:"cards_judged"`
	FalseAlarms int   `json:"false_alarms"`
	// AlarmSeeds name the shoes that raised one (chunk, shoe).
	AlarmSeeds []string      `json:"alarm_seeds,omitempty"`
	Cases      []ShuffleCase `json:"cases"`
	Elapsed    string        `json:"elapsed"`
	FAElapsed  string        `json:"false_alarm_elapsed"`
}

// ShuffleCase is one way a shoe reaches the table, measured.
type ShuffleCase struct {
	Group string `json:"group"`
	Name  string `json:"name"`
	// Trials shoes dealt; Caught raised the alarm on or after the
	// unshuffled stretch began, Early before it (on the fair cards
	// before: a false alarm).
	Trials, Caught, Early int
	// Cards to detect, counted from the stretch's first card (1: the
	// alarm came with it): mean, median, 90th percentile, most.
	Mean                float64 `json:"mean"`
	Median, P90, Most   int
	Goal                string `json:"goal"`
	Verdict             string `json:"verdict"`
	Within, WithinCards int    `json:"-"` // the goal: Within of Trials caught within WithinCards (0: no goal)
}

// A trial is one shoe of a case: the shoes the table dealt before it
// (oldest first, the cards each dealt up to its cut card), the shoe as it
// is dealt now, and the places (from 0) where its unshuffled stretches
// begin: an alarm before the first is a false alarm, one after is
// counted from the stretch it falls in.
type shuffleTrial struct {
	earlier [][]coup.Card
	shoe    []coup.Card
	from    []int
}

// shuffleCaseDef makes the trials of a case.
type shuffleCaseDef struct {
	group, name string
	within      int // all caught within this many cards of the stretch (0: no goal)
	make        func(r *rand.Rand) shuffleTrial
}

// memory is the table's last coup.ShoeMemory shoes, fair, each dealt to
// its cut card; full[i] is shoe i whole.
func memory(r *rand.Rand) (dealt, full [][]coup.Card) {
	for range coup.ShoeMemory {
		s := shuffled(r, 8)
		full = append(full, s)
		dealt = append(dealt, s[:len(s)-cutCard(r)])
	}
	return dealt, full
}

// reused is the shoe before (or the one back shoes before) put in again
// as prepare says; the stretch begins at the first card the table saw
// dealt.
func reused(back int, prepare func(r *rand.Rand, dealt, undealt []coup.Card) (shoe []coup.Card, from []int)) func(r *rand.Rand) shuffleTrial {
	return func(r *rand.Rand) shuffleTrial {
		earlier, full := memory(r)
		k := len(full) - back
		shoe, from := prepare(r, earlier[k], full[k][len(earlier[k]):])
		return shuffleTrial{earlier: earlier, shoe: shoe, from: from}
	}
}

// recut is the shoe before, whole, cut at: the table saw its dealt part,
// which comes first (from the cut on) and again after the undealt cards
// (from its start).
func recut(at func(r *rand.Rand) int) func(r *rand.Rand, dealt, undealt []coup.Card) ([]coup.Card, []int) {
	return func(r *rand.Rand, dealt, undealt []coup.Card) ([]coup.Card, []int) {
		whole := append(slices.Clone(dealt), undealt...)
		x := at(r) % len(whole)
		from := []int{len(whole) - x}
		if x < len(dealt) {
			from = []int{0, len(whole) - x}
		}
		return cut(whole, x), from
	}
}

func fixed(n int) func(*rand.Rand) int   { return func(*rand.Rand) int { return n } }
func anywhere(r *rand.Rand) int          { return r.IntN(8 * coup.CardCount) }
func fairOnly(r *rand.Rand) shuffleTrial { e, _ := memory(r); return shuffleTrial{earlier: e} }
func withFair(r *rand.Rand, s []coup.Card) shuffleTrial {
	t := fairOnly(r)
	t.shoe, t.from = s, []int{0}
	return t
}

// shuffleCases are the cases: issue 33's table, then the new ones.
func shuffleCases() []shuffleCaseDef {
	var cs []shuffleCaseDef
	rep := func(name string, back int, prepare func(*rand.Rand, []coup.Card, []coup.Card) ([]coup.Card, []int)) {
		cs = append(cs, shuffleCaseDef{group: "repeat", name: name, within: 15, make: reused(back, prepare)})
	}
	rep("the shoe before again, as it was", 1, recut(fixed(0)))
	for _, n := range []int{5, 10, 11, 15, 30, 100, 208} {
		rep(fmt.Sprintf("the shoe before, its cut moved by %d cards", n), 1, recut(fixed(n)))
	}
	rep("the shoe before, cut at random", 1, recut(anywhere))
	rep(fmt.Sprintf("the shoe %d before, cut at random", coup.ShoeMemory), coup.ShoeMemory, recut(anywhere))
	for _, reverse := range []bool{false, true} {
		for _, top := range []bool{true, false} {
			name := "the shoe before's discards in order, its undealt cards "
			if reverse {
				name = "the shoe before's discards in reverse, its undealt cards "
			}
			where := "below"
			if top {
				where = "on top"
			}
			rep(name+where, 1, func(r *rand.Rand, dealt, undealt []coup.Card) ([]coup.Card, []int) {
				d := dealt
				if reverse {
					d = reversed(dealt)
				}
				if top {
					return append(slices.Clone(undealt), d...), []int{len(undealt)}
				}
				return append(slices.Clone(d), undealt...), []int{0}
			})
		}
	}
	rep("the shoe before's discards in reverse, undealt on top, cut at random", 1, func(r *rand.Rand, dealt, undealt []coup.Card) ([]coup.Card, []int) {
		whole := append(slices.Clone(undealt), reversed(dealt)...)
		x := r.IntN(len(whole))
		from := []int{len(undealt) - x}
		if x >= len(undealt) {
			from = []int{0, len(whole) - x + len(undealt)}
		}
		return cut(whole, x), from
	})
	neu := func(name string, within int, f func(r *rand.Rand) shuffleTrial) {
		cs = append(cs, shuffleCaseDef{group: "new decks", name: name, within: within, make: f})
	}
	neu("new-deck order (US, A-K or K-A in every suit), cut at random", 15, func(r *rand.Rand) shuffleTrial {
		return withFair(r, cut(newDecks(r.IntN(deckOrders), 8), r.IntN(416)))
	})
	neu("new decks in reverse order, cut at random", 15, func(r *rand.Rand) shuffleTrial {
		return withFair(r, cut(reversed(newDecks(r.IntN(deckOrders), 8)), r.IntN(416)))
	})
	neu("decks sorted by rank (AS AH AD AC 2S ...), cut at random", 0, func(r *rand.Rand) shuffleTrial {
		return withFair(r, cut(fullDecks(8), r.IntN(416)))
	})
	neu("one new-deck-order deck as a block at a random place among 7 shuffled decks", 15, func(r *rand.Rand) shuffleTrial {
		t := fairOnly(r)
		rest := shuffled(r, 7)
		q := r.IntN(len(rest) + coup.CardCount - cutCard(r) - coup.CardCount + 1)
		block := cut(newDeck(r.IntN(deckOrders)), r.IntN(coup.CardCount))
		t.shoe = slices.Concat(rest[:q], block, rest[q:])
		t.from = []int{q}
		return t
	})
	neu("one new deck riffled once into a shuffled deck, at a random place among 6 more", 0, func(r *rand.Rand) shuffleTrial {
		t := fairOnly(r)
		rest := shuffled(r, 7)
		q := r.IntN(len(rest) - cutCard(r) - coup.CardCount + 1)
		mixed := riffleTwo(r, newDeck(r.IntN(deckOrders)), rest[q:q+coup.CardCount])
		t.shoe = slices.Concat(rest[:q], mixed, rest[q+coup.CardCount:])
		t.from = []int{q}
		return t
	})
	neu("one new deck riffled once into the 7 shuffled decks whole", 0, func(r *rand.Rand) shuffleTrial {
		return withFair(r, riffleTwo(r, newDeck(r.IntN(deckOrders)), shuffled(r, 7)))
	})
	neu("strip shuffle (packets of 5-15) of new decks", 0, func(r *rand.Rand) shuffleTrial {
		return withFair(r, strip(r, cut(newDecks(r.IntN(deckOrders), 8), r.IntN(416))))
	})
	for _, sd := range []float64{10, 30} {
		neu(fmt.Sprintf("wash of new decks (each card moved by %g places, sd)", sd), 0, func(r *rand.Rand) shuffleTrial {
			return withFair(r, wash(r, newDecks(r.IntN(deckOrders), 8), sd))
		})
	}
	cs = append(cs, shuffleCaseDef{group: "repeat, after a weak shuffle", name: "the shoe before's discards given one riffle", make: reused(1, func(r *rand.Rand, dealt, undealt []coup.Card) ([]coup.Card, []int) {
		return append(riffle(r, dealt), undealt...), []int{0}
	})})
	for k := 1; k <= 7; k++ {
		cs = append(cs, shuffleCaseDef{group: "riffles", name: fmt.Sprintf("new decks given %d riffle%s, cut at random", k, map[bool]string{true: "s"}[k > 1]), make: func(r *rand.Rand) shuffleTrial {
			s := newDecks(r.IntN(deckOrders), 8)
			for range k {
				s = riffle(r, s)
			}
			return withFair(r, cut(s, r.IntN(len(s))))
		}})
	}
	return cs
}

// RunShuffle makes the record.
func RunShuffle(ctx context.Context, o ShuffleOptions) (*ShuffleReport, error) {
	o.defaults()
	start := time.Now()
	m := benchMachineInfo(".")
	rep := &ShuffleReport{CPUs: m.CPUs, CPU: m.CPUModel, Go: m.Go, Workers: o.Workers, Seed: o.Seed, Shoes: o.Shoes}
	if err := falseAlarms(ctx, o, rep); err != nil {
		return nil, err
	}
	rep.FAElapsed = time.Since(start).Round(100 * time.Millisecond).String()
	for i, def := range shuffleCases() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c := runCase(o, uint64(i+1), def)
		fmt.Fprintf(o.Progress, "shuffle: %s: %d of %d caught (%s)\n", c.Name, c.Caught, c.Trials, c.Verdict)
		rep.Cases = append(rep.Cases, c)
	}
	rep.Elapsed = time.Since(start).Round(100 * time.Millisecond).String()
	return rep, nil
}

// faChunk is how many shoes one simulated table deals one after another.
const faChunk = 10_000

// falseAlarms deals o.Shoes fair 8-deck shoes, in chunks of faChunk each
// dealt by one table in order (each shoe compared with the ones before
// it), and counts the alarms.
func falseAlarms(ctx context.Context, o ShuffleOptions, rep *ShuffleReport) error {
	chunks := (o.Shoes + faChunk - 1) / faChunk
	var next, cards atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				k := int(next.Add(1) - 1)
				if k >= chunks {
					return
				}
				n := min(faChunk, o.Shoes-k*faChunk)
				r := chacha(o.Seed, 0, uint64(k))
				var c coup.ShuffleCheck
				var judged int64
				for s := range n {
					shoe := shuffled(r, 8)
					shoe = shoe[:len(shoe)-cutCard(r)]
					c.NewShoe(8)
					for _, card := range shoe {
						judged++
						if why := c.Card(card); why != "" {
							mu.Lock()
							rep.FalseAlarms++
							rep.AlarmSeeds = append(rep.AlarmSeeds, fmt.Sprintf("chunk %d shoe %d card %d: %s", k, s, c.Seen(), why))
							mu.Unlock()
						}
					}
				}
				cards.Add(judged)
				if k%10 == 9 {
					fmt.Fprintf(o.Progress, "shuffle: %d of %d chunks of fair shoes\n", k+1, chunks)
				}
			}
		}()
	}
	wg.Wait()
	rep.CardsJudged = cards.Load()
	return ctx.Err()
}

// runCase deals a case's trials.
func runCase(o ShuffleOptions, id uint64, def shuffleCaseDef) ShuffleCase {
	c := ShuffleCase{Group: def.group, Name: def.name, Trials: o.Trials, WithinCards: def.within}
	at := make([]int, o.Trials) // cards to detect; 0 not caught, -1 early
	var next atomic.Int64
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= o.Trials {
					return
				}
				r := chacha(o.Seed, id, uint64(i))
				t := def.make(r)
				var chk coup.ShuffleCheck
				for _, e := range t.earlier {
					chk.Remember(e)
				}
				chk.NewShoe(8)
				// Dealt to its cut card.
				for j, card := range t.shoe[:len(t.shoe)-cutCard(r)] {
					if chk.Card(card) != "" {
						at[i] = -1
						for _, f := range t.from {
							if j >= f {
								at[i] = j + 1 - f
							}
						}
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	var caught []int
	for _, n := range at {
		switch {
		case n > 0:
			caught = append(caught, n)
		case n < 0:
			c.Early++
		}
	}
	c.Caught = len(caught)
	if len(caught) > 0 {
		slices.Sort(caught)
		sum := 0
		for _, n := range caught {
			sum += n
		}
		c.Mean = float64(sum) / float64(len(caught))
		c.Median, c.P90, c.Most = caught[(len(caught)-1)/2], caught[(len(caught)*9+9)/10-1], caught[len(caught)-1]
		for _, n := range caught {
			if def.within == 0 || n <= def.within {
				c.Within++
			}
		}
	}
	c.Verdict = VerdictInfo
	if def.within > 0 {
		c.Goal = fmt.Sprintf("all, within %d cards", def.within)
		c.Verdict = verdict(c.Within == c.Trials)
	}
	return c
}

// ShufflePass reports whether the record meets issue 33's goals: at most
// one false alarm in a million shoes, and every case with a goal met.
func (r *ShuffleReport) ShufflePass() bool {
	if r.FalseAlarms > max(1, r.Shoes/1_000_000) {
		return false
	}
	for _, c := range r.Cases {
		if c.Verdict == VerdictFail {
			return false
		}
	}
	return true
}

// WriteShuffleTable prints the record as Markdown.
func WriteShuffleTable(w io.Writer, r *ShuffleReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Machine: %d CPUs (%s), %s, %d workers; seed %d. Run took %s (the fair shoes %s).\n\n", r.CPUs, r.CPU, r.Go, r.Workers, r.Seed, r.Elapsed, r.FAElapsed)
	verdict := verdict(r.FalseAlarms <= max(1, r.Shoes/1_000_000))
	fmt.Fprintf(&b, "False alarms: %d in %s fair 8-deck shoes dealt one after another (%s cards judged, each shoe against the %d before it); goal at most 1 in 1,000,000: %s.\n",
		r.FalseAlarms, commas(int64(r.Shoes)), commas(r.CardsJudged), coup.ShoeMemory, verdict)
	for _, s := range r.AlarmSeeds {
		fmt.Fprintf(&b, "- %s\n", s)
	}
	b.WriteString("\n| case | caught | cards to detect: mean, median, 90%, most | goal | pass/fail |\n| --- | --- | --- | --- | --- |\n")
	group := ""
	for _, c := range r.Cases {
		if c.Group != group {
			group = c.Group
			fmt.Fprintf(&b, "| **%s** | | | | |\n", group)
		}
		caught := fmt.Sprintf("%d of %d (%.1f%%)", c.Caught, c.Trials, 100*float64(c.Caught)/float64(max(c.Trials, 1)))
		if c.Early > 0 {
			caught += fmt.Sprintf("; %d early", c.Early)
		}
		cards := "-"
		if c.Caught > 0 {
			cards = fmt.Sprintf("%.1f, %d, %d, %d", c.Mean, c.Median, c.P90, c.Most)
		}
		goal := c.Goal
		if goal == "" {
			goal = "-"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(c.Name), caught, cards, goal, c.Verdict)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
