package stats

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func (r Row) cells() []string {
	return []string{r.Key, strconv.Itoa(r.Coups), num(r.InPlay), num(r.CoupsPerHour), num(r.SecondsPerCoup),
		strconv.Itoa(r.Misdeals), num(r.MisdealsPer100), strconv.Itoa(r.Voids), num(r.VoidsPer100), strconv.Itoa(r.Alerts)}
}

// WriteCSV writes the rows and the total as CSV with a header line.
func WriteCSV(w io.Writer, rep Report) error {
	cw := csv.NewWriter(w)
	rows := [][]string{{string(rep.By), "coups", "in_play_seconds", "coups_per_hour", "seconds_per_coup", "misdeals",
		"misdeals_per_100_coups", "voids", "voids_per_100_coups", "alerts"}}
	for _, r := range rep.Rows {
		rows = append(rows, r.cells())
	}
	rows = append(rows, rep.Total.cells())
	if err := cw.WriteAll(rows); err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	return nil
}

// WriteText writes the rows and the total as an aligned table.
func WriteText(w io.Writer, rep Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.ToUpper(string(rep.By))+"\tCOUPS\tIN PLAY\tCOUPS/H\tS/COUP\tMISDEALS\t/100\tVOIDS\t/100\tALERTS\t")
	for _, r := range append(rep.Rows, rep.Total) {
		c := r.cells()
		c[2] = inPlay(r.InPlay)
		fmt.Fprintln(tw, strings.Join(c, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	return nil
}

// inPlay writes seconds as h:mm:ss.
func inPlay(s float64) string {
	n := int64(s)
	return fmt.Sprintf("%d:%02d:%02d", n/3600, n/60%60, n%60)
}
