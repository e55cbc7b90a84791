package audit

import (
	"slices"
	"testing"

	"github.com/tablectl/tablectl/coup"
)

func TestShoeRows(t *testing.T) {
	// Two shoes: rows carry the shoe the table was in when they were
	// written, so the input starting shoe 2 is still marked shoe 1.
	rows := []Record{
		{Seq: 1, Kind: KindConfig},
		{Seq: 2, Kind: KindStart},
		{Seq: 3, Kind: string(coup.InButton), Shoe: 0},
		{Seq: 4, Kind: string(coup.EvShoeStarted), Shoe: 1},
		{Seq: 5, Kind: string(coup.InCard), Shoe: 1},
		{Seq: 6, Kind: string(coup.EvBurnCard), Shoe: 1},
		{Seq: 7, Kind: string(coup.InButton), Shoe: 1},
		{Seq: 8, Kind: string(coup.EvShoeStarted), Shoe: 2},
		{Seq: 9, Kind: string(coup.InCard), Shoe: 2},
		{Seq: 10, Kind: string(coup.EvBurnCard), Shoe: 2},
	}
	all := func(yield func(Record, error) bool) {
		for _, r := range rows {
			if !yield(r, nil) {
				return
			}
		}
	}
	for _, tt := range []struct {
		shoe int
		want []int64
	}{{1, []int64{1, 3, 4, 5, 6}}, {2, []int64{1, 7, 8, 9, 10}}, {3, nil}} {
		var got []int64
		for r, err := range ShoeRows(all, tt.shoe) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r.Seq)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("shoe %d: rows %v, want %v", tt.shoe, got, tt.want)
		}
	}
}
