package audit

import (
	"errors"
	"iter"
	"testing"
)

// rowsOf yields n records numbered from 1, then err if not nil, counting
// what it was asked for.
func rowsOf(n int, err error, asked *int) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		for i := 1; i <= n; i++ {
			*asked = i
			if !yield(Record{Seq: int64(i)}, nil) {
				return
			}
		}
		if err != nil {
			yield(Record{}, err)
		}
	}
}

func TestPrefetch(t *testing.T) {
	boom := errors.New("disk on fire")
	for _, tt := range []struct {
		name string
		n    int
		err  error
	}{{"empty", 0, nil}, {"one", 1, nil}, {"a batch and a bit", 300, nil}, {"many", 5000, nil},
		{"error first", 0, boom}, {"error after a batch", 256, boom}, {"error mid-batch", 1000, boom}} {
		t.Run(tt.name, func(t *testing.T) {
			var asked int
			next, gotErr := int64(1), error(nil)
			for rec, err := range Prefetch(rowsOf(tt.n, tt.err, &asked)) {
				if err != nil {
					gotErr = err
					continue
				}
				if gotErr != nil {
					t.Fatalf("row %d after the error", rec.Seq)
				}
				if rec.Seq != next {
					t.Fatalf("row %d, want %d", rec.Seq, next)
				}
				next++
			}
			if next-1 != int64(tt.n) || !errors.Is(gotErr, tt.err) {
				t.Fatalf("%d rows and error %v, want %d and %v", next-1, gotErr, tt.n, tt.err)
			}
		})
	}
	// Stopping early stops the reader: it reads ahead a few batches at most.
	var asked int
	got := 0
	for range Prefetch(rowsOf(1_000_000, nil, &asked)) {
		if got++; got == 10 {
			break
		}
	}
	if asked > 10_000 {
		t.Fatalf("the reader went on to row %d after the caller stopped at 10", asked)
	}
}
