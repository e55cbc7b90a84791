package viewer

import (
	"bytes"
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/tablectl/tablectl/coup"
)

// Report is one coup laid out for a dispute: every row of it with its
// time to the microsecond, the cards as they came, the result, the dealer,
// the alerts and the supervisors' actions with who signed them, and
// replay's differences. The page prints it (report.html).
type Report struct {
	Table   string
	Source  string
	Shoe    int
	Coup    int
	Dealer  string
	Rows    []ReportRow
	Player  []string
	Banker  []string
	Result  string
	Alerts  []string
	Actions []Action
	Diffs   []string
	Made    string // when the report was made, UTC
}

// ReportRow is one input row of the coup.
type ReportRow struct {
	Time, Seq, Input, Events string
}

// Report gathers the coup's steps (from its first row to the row before
// the next coup's).
func (tl *Timeline) Report(shoe, coupNo int, now time.Time) (Report, error) {
	first, ok := tl.CoupStep(shoe, coupNo)
	if !ok {
		return Report{}, fmt.Errorf("coup %d/%d is not in the trail", shoe, coupNo)
	}
	r := Report{Table: tl.Table, Shoe: shoe, Coup: coupNo, Made: now.UTC().Format(TimeLayoutMicro)}
	last := first
	for i := first; i < len(tl.Steps) && tl.Steps[i].Shoe == shoe && tl.Steps[i].Coup == coupNo; i++ {
		st := tl.Steps[i]
		last = i
		in := st.Input
		if st.Action != nil {
			in += " by " + st.Action.By
		}
		r.Rows = append(r.Rows, ReportRow{Time: st.TimeMicro, Seq: fmt.Sprint(st.Seq), Input: in, Events: strings.Join(st.Events, "; ")})
		for _, d := range st.Diffs {
			r.Diffs = append(r.Diffs, fmt.Sprintf("seq %d (%s): %s", d.Seq, d.Kind, d.Detail))
		}
	}
	s, err := tl.State(last)
	if err != nil {
		return Report{}, err
	}
	r.Dealer, r.Actions = s.View.Dealer, s.Actions
	r.Player, r.Banker = viewCards(s.View.Player), viewCards(s.View.Banker)
	if res := s.View.Result; res != nil {
		r.Result = fmt.Sprintf("%s wins, player %d, banker %d", strings.ToUpper(res.Winner.String()), res.PlayerPoint, res.BankerPoint)
		if res.Winner == coup.SideTie {
			r.Result = fmt.Sprintf("TIE, %d all", res.PlayerPoint)
		}
	}
	for _, a := range s.View.Alerts {
		r.Alerts = append(r.Alerts, fmt.Sprintf("%s (coup %d): %s, needs %s", a.Kind, a.Coup, a.Message, a.Needs))
	}
	return r, nil
}

func viewCards(vcs []coup.ViewCard) []string {
	out := []string{}
	for _, vc := range vcs {
		switch {
		case vc.Card != nil:
			c := vc.Card.String()
			if vc.Manual {
				c += " (entered by hand)"
			}
			out = append(out, c)
		case vc.Unreadable:
			out = append(out, "unreadable")
		default:
			out = append(out, "face down")
		}
	}
	return out
}

var reportPage = template.Must(template.ParseFS(webFiles, "web/report.html"))

// HTML renders the report as its printable page.
func (r Report) HTML() ([]byte, error) {
	var b bytes.Buffer
	if err := reportPage.Execute(&b, r); err != nil {
		return nil, fmt.Errorf("coup report: %w", err)
	}
	return b.Bytes(), nil
}
