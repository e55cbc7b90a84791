package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/display"
)

func init() {
	register(command{Name: "recall", Short: "last-game recall: the last 10 coups of a trail with every card", Run: runRecall})
}

func runRecall(args []string, stdout io.Writer) error {
	fs := newFlagSet("recall")
	db := fs.String("db", "", "the audit trail: a SQLite `file`, a directory of segments, or segment files in order, comma-separated")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *db == "" {
		return usageError(fs, "--db is required")
	}
	ctx := context.Background()
	r, err := openTrail(ctx, *db)
	if err != nil {
		return err
	}
	defer r.Close()
	rp, err := audit.Replay(r.Events(ctx, audit.Query{}), audit.DefaultReplayConfig(), audit.ReplayVisitor{})
	if err != nil {
		return err
	}
	recall := display.RecallOf(rp.Table().Recall())
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(recall)
	}
	for _, c := range recall {
		fmt.Fprintf(stdout, "shoe %d coup %d  cards %s", c.Shoe, c.Coup, strings.Join(c.Cards, " "))
		if c.Winner != "" {
			fmt.Fprintf(stdout, "  P %s B %s  %s %s", coup.FormatCards(c.Player), coup.FormatCards(c.Banker), c.Winner, c.Points)
		}
		if c.Voided {
			fmt.Fprint(stdout, "  VOIDED")
		}
		if len(c.Manual) > 0 {
			fmt.Fprintf(stdout, "  manual: %s", strings.Join(c.Manual, " "))
		}
		for _, s := range []struct {
			what string
			at   []int
		}{{"drawn while betting was open", c.BettingOpen}, {"drawn while suspended", c.Suspended}} {
			if len(s.at) == 0 {
				continue
			}
			var strays []string
			for _, i := range s.at {
				strays = append(strays, c.Cards[i])
			}
			fmt.Fprintf(stdout, "  %s, in no hand: %s", s.what, strings.Join(strays, " "))
		}
		fmt.Fprintln(stdout)
	}
	if n := len(rp.Differences()); n > 0 {
		return fmt.Errorf("%w: %d rows (run tablectl replay)", errDiffers, n)
	}
	return nil
}
