package mqttpub

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
)

// checkMarshalEvent holds MarshalEvent to encoding/json's bytes (and error)
// for ev.
func checkMarshalEvent(t *testing.T, ev Event) {
	t.Helper()
	want, werr := marshalEventJSON(ev)
	got, gerr := MarshalEvent(ev)
	if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
		t.Fatalf("MarshalEvent(%+v)\n got %s (%v)\nwant %s (%v)", ev, got, gerr, want, werr)
	}
}

// TestMarshalEventMatchesJSON: the field-by-field payload is encoding/json's
// byte for byte, over random rows and over what it must leave to it.
func TestMarshalEventMatchesJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 1))
	bodies := []string{`{"card":"KH","kind":"in.card","shoe_seq":118}`, `{}`, `[]`, `null`, `"<a&b>"`, `{"x": 1 ,"y" :[ 1, 2 ]}`,
		"{\"t\":\"\u2028é\"}", `{"x":`, ``, `1e400`, "{\"a\":\"\xff\"}"}
	kinds := []string{"in.card", "coup.result", "ctl.start", "a<b>&", "tab\there", `quo"te`, "é", ""}
	zones := []*time.Location{time.UTC, time.FixedZone("X", 3600), time.Local}
	years := []int{2026, 1, 0, 9999, 10000, -1}
	for range 20000 {
		var ev Event
		ev.Seq, ev.Shoe, ev.Coup = rng.Int64N(1<<40)-5, rng.Int64N(1000)-3, rng.Int64N(100)
		ev.At = time.Date(years[rng.IntN(len(years))], time.Month(1+rng.IntN(12)), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60),
			rng.IntN(1_000_000_000)/[]int{1, 1000, 1_000_000}[rng.IntN(3)], zones[rng.IntN(len(zones))])
		ev.Kind = kinds[rng.IntN(len(kinds))]
		if b := bodies[rng.IntN(len(bodies))]; b != "" || rng.IntN(2) == 0 {
			ev.Body = []byte(b)
		}
		for i := range ev.Hash {
			ev.Hash[i], ev.PrevHash[i] = byte(rng.Uint32()), byte(rng.Uint32())
		}
		checkMarshalEvent(t, ev)
	}
	// A row as the recorder writes it goes the fast way.
	rec := audit.Record{Seq: 7, At: time.Date(2026, 11, 25, 16, 0, 0, 123456000, time.UTC), Kind: "in.card", Body: []byte(`{"card":"KH"}`)}
	if _, ok := appendEvent(EventOf(rec)); !ok {
		t.Fatal("a plain row left to encoding/json")
	}
}

// FuzzMarshalEvent holds MarshalEvent to encoding/json on any kind, body
// and time.
func FuzzMarshalEvent(f *testing.F) {
	f.Add(int64(1), int64(1_800_000_000_000_000_000), "in.card", []byte(`{"card":"KH"}`), int64(3))
	f.Add(int64(-1), int64(0), "a<b>", []byte(` { "x" : "<&>" } `), int64(0))
	f.Fuzz(func(t *testing.T, seq, nanos int64, kind string, body []byte, shoe int64) {
		checkMarshalEvent(t, Event{Seq: seq, At: time.Unix(0, nanos).UTC(), Kind: kind, Shoe: shoe, Coup: seq ^ shoe, Body: body})
	})
}

func BenchmarkMarshalEvent(b *testing.B) {
	ev := Event{Seq: 123456, At: time.Date(2026, 11, 25, 16, 0, 0, 123456000, time.UTC), Kind: "in.card", Shoe: 12, Coup: 40,
		Body: []byte(`{"at":"2026-11-25T16:00:00.123456Z","card":"KH","kind":"in.card","shoe_seq":118}`)}
	for _, bc := range []struct {
		name string
		f    func(Event) ([]byte, error)
	}{{"fields", MarshalEvent}, {"encoding_json", marshalEventJSON}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := bc.f(ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
