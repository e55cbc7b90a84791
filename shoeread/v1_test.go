package shoeread

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/coup"
)

func TestV1Decode(t *testing.T) {
	kh := card(t, "KH")
	long := "$STAT,1,X," + strings.Repeat("a", 67) // 82 bytes with *HH and CRLF
	tests := []struct {
		name string
		in   string
		want []Event
	}{
		{"hello", line("HELO,1,1,SHOE-0042"),
			[]Event{{Kind: KindHello, Seq: 1, Text: "SHOE-0042", Raw: "$HELO,1,1,SHOE-0042*18"}}},
		{"card", line("CARD,12,KH"),
			[]Event{{Kind: KindCard, Seq: 12, Card: kh, Raw: "$CARD,12,KH*14"}}},
		{"every rank and suit", line("CARD,1,AS") + line("CARD,2,TD") + line("CARD,3,9C") + line("CARD,4,QH"),
			[]Event{
				{Kind: KindCard, Seq: 1, Card: coup.Card{Rank: coup.Ace, Suit: coup.Spades}, Raw: raw(line("CARD,1,AS"))},
				{Kind: KindCard, Seq: 2, Card: coup.Card{Rank: coup.Ten, Suit: coup.Diamonds}, Raw: raw(line("CARD,2,TD"))},
				{Kind: KindCard, Seq: 3, Card: coup.Card{Rank: coup.Nine, Suit: coup.Clubs}, Raw: raw(line("CARD,3,9C"))},
				{Kind: KindCard, Seq: 4, Card: coup.Card{Rank: coup.Queen, Suit: coup.Hearts}, Raw: raw(line("CARD,4,QH"))},
			}},
		{"unreadable card", line("CARD,3,??"),
			[]Event{{Kind: KindCard, Seq: 3, Unreadable: true, Raw: "$CARD,3,??*27"}}},
		{"cut card", line("CUT,40"), []Event{{Kind: KindCutCard, Seq: 40, Raw: "$CUT,40*6A"}}},
		{"buttons", line("BTN,5,NEWSHOE") + line("BTN,6,BURNDONE") + line("BTN,7,NOMOREBETS") + line("BTN,8,REVEAL"),
			[]Event{
				{Kind: KindButton, Seq: 5, Button: ButtonNewShoe, Raw: raw(line("BTN,5,NEWSHOE"))},
				{Kind: KindButton, Seq: 6, Button: ButtonBurnDone, Raw: raw(line("BTN,6,BURNDONE"))},
				{Kind: KindButton, Seq: 7, Button: ButtonNoMoreBets, Raw: raw(line("BTN,7,NOMOREBETS"))},
				{Kind: KindButton, Seq: 8, Button: ButtonReveal, Raw: raw(line("BTN,8,REVEAL"))},
			}},
		{"status with text", line("STAT,9,LID_OPEN,lid opened, close it"),
			[]Event{{Kind: KindStatus, Seq: 9, Status: "LID_OPEN", Text: "lid opened, close it", Raw: raw(line("STAT,9,LID_OPEN,lid opened, close it"))}}},
		{"status without text", line("STAT,9,E-7"),
			[]Event{{Kind: KindStatus, Seq: 9, Status: "E-7", Raw: raw(line("STAT,9,E-7"))}}},
		{"heartbeat", line("HB,2"), []Event{{Kind: KindHeartbeat, Seq: 2, Raw: "$HB,2*14"}}},
		{"largest seq", line("HB,4294967295"), []Event{{Kind: KindHeartbeat, Seq: 4294967295, Raw: raw(line("HB,4294967295"))}}},
		{"lower-case checksum", "$CUT,40*6a\r\n",
			[]Event{{Kind: KindCutCard, Seq: 40, Raw: "$CUT,40*6a"}}},
		{"LF alone ends a sentence", "$HB,2*14\n$CUT,40*6A\n",
			[]Event{{Kind: KindHeartbeat, Seq: 2, Raw: "$HB,2*14"}, {Kind: KindCutCard, Seq: 40, Raw: "$CUT,40*6A"}}},
		{"blank line ends between sentences are harmless", "\r\n\n$HB,2*14\r\n\r\r\n",
			[]Event{{Kind: KindHeartbeat, Seq: 2, Raw: "$HB,2*14"}}},
		{"82 bytes is the limit", line(long[1:]),
			[]Event{{Kind: KindStatus, Seq: 1, Status: "X", Text: strings.Repeat("a", 67), Raw: raw(line(long[1:]))}}},

		// Rejections.
		{"noise then a sentence", "\x00\xffxyz$HB,2*14\r\n",
			[]Event{{Kind: KindProtocolError, Err: ErrNoise, Rejected: 5, Raw: `\x00\xffxyz`}, {Kind: KindHeartbeat, Seq: 2, Raw: "$HB,2*14"}}},
		{"noise ends at a line end", "junk\r\n",
			[]Event{{Kind: KindProtocolError, Err: ErrNoise, Rejected: 6, Raw: `junk\r\n`}}},
		{"bad checksum", "$CARD,12,KH*15\r\n",
			[]Event{{Kind: KindProtocolError, Err: ErrChecksum, Rejected: 16, Raw: "$CARD,12,KH*15"}}},
		{"no checksum", "$CARD,12,KH\r\n",
			[]Event{{Kind: KindProtocolError, Err: ErrFraming, Rejected: 13, Raw: "$CARD,12,KH"}}},
		{"checksum of one digit", "$HB,2*4\r\n",
			[]Event{{Kind: KindProtocolError, Err: ErrFraming, Rejected: 9, Raw: "$HB,2*4"}}},
		{"checksum of three digits", "$HB,2*144\r\n",
			[]Event{{Kind: KindProtocolError, Err: ErrFraming, Rejected: 11, Raw: "$HB,2*144"}}},
		{"checksum not hex", "$HB,2*1G\r\n",
			[]Event{{Kind: KindProtocolError, Err: ErrFraming, Rejected: 10, Raw: "$HB,2*1G"}}},
		{"cut short by a new sentence", "$CARD,1$HB,2*14\r\n",
			[]Event{{Kind: KindProtocolError, Err: ErrFraming, Rejected: 7, Raw: "$CARD,1"}, {Kind: KindHeartbeat, Seq: 2, Raw: "$HB,2*14"}}},
		{"CR without LF", "$HB,2*14\r$HB,3*15\r\n",
			[]Event{{Kind: KindProtocolError, Err: ErrFraming, Rejected: 9, Raw: "$HB,2*14"}, {Kind: KindHeartbeat, Seq: 3, Raw: "$HB,3*15"}}},
		{"CR then noise", "$HB,2*14\rxy\n",
			[]Event{{Kind: KindProtocolError, Err: ErrFraming, Rejected: 9, Raw: "$HB,2*14"}, {Kind: KindProtocolError, Err: ErrNoise, Rejected: 3, Raw: `xy\n`}}},
		{"unknown type", line("CRAD,12,KH"),
			[]Event{{Kind: KindProtocolError, Err: ErrUnknownType, Rejected: 16, Raw: raw(line("CRAD,12,KH"))}}},
		{"lower-case type", line("hb,2"),
			[]Event{{Kind: KindProtocolError, Err: ErrUnknownType, Rejected: 10, Raw: raw(line("hb,2"))}}},
		{"empty sentence", line(""),
			[]Event{{Kind: KindProtocolError, Err: ErrUnknownType, Rejected: 6, Raw: "$*00"}}},
		{"card with two cards", line("CARD,12,KH,QS"),
			[]Event{{Kind: KindProtocolError, Err: ErrMalformed, Rejected: 19, Raw: raw(line("CARD,12,KH,QS"))}}},
		{"card with none", line("CARD,12"),
			[]Event{{Kind: KindProtocolError, Err: ErrMalformed, Rejected: 13, Raw: raw(line("CARD,12"))}}},
		{"heartbeat with a field", line("HB,2,x"),
			[]Event{{Kind: KindProtocolError, Err: ErrMalformed, Rejected: 12, Raw: raw(line("HB,2,x"))}}},
		{"cut with a field", line("CUT,2,"),
			[]Event{{Kind: KindProtocolError, Err: ErrMalformed, Rejected: 12, Raw: raw(line("CUT,2,"))}}},
		{"unknown button", line("BTN,5,SHUFFLE"),
			[]Event{{Kind: KindProtocolError, Err: ErrMalformed, Rejected: 19, Raw: raw(line("BTN,5,SHUFFLE"))}}},
		{"hello without id", line("HELO,1,1,"),
			[]Event{{Kind: KindProtocolError, Err: ErrMalformed, Rejected: 15, Raw: raw(line("HELO,1,1,"))}}},
		{"hello with two ids", line("HELO,1,1,a,b"),
			[]Event{{Kind: KindProtocolError, Err: ErrMalformed, Rejected: 18, Raw: raw(line("HELO,1,1,a,b"))}}},
		{"hello version not a number", line("HELO,1,v1,S"),
			[]Event{{Kind: KindProtocolError, Err: ErrMalformed, Rejected: 17, Raw: raw(line("HELO,1,v1,S"))}}},
		{"hello version 2", line("HELO,1,2,S"),
			[]Event{{Kind: KindProtocolError, Err: ErrVersion, Rejected: 16, Raw: raw(line("HELO,1,2,S"))}}},
		{"status without code", line("STAT,4"),
			[]Event{{Kind: KindProtocolError, Err: ErrMalformed, Rejected: 12, Raw: raw(line("STAT,4"))}}},
		{"status code with a space", line("STAT,4,LID OPEN"),
			[]Event{{Kind: KindProtocolError, Err: ErrMalformed, Rejected: 21, Raw: raw(line("STAT,4,LID OPEN"))}}},
		{"status code too long", line("STAT,4,ABCDEFGHIJKLMNOPQ"),
			[]Event{{Kind: KindProtocolError, Err: ErrMalformed, Rejected: 30, Raw: raw(line("STAT,4,ABCDEFGHIJKLMNOPQ"))}}},
		{"bad card rank", line("CARD,12,KX"),
			[]Event{{Kind: KindProtocolError, Err: coup.ErrBadCard, Rejected: 16, Raw: raw(line("CARD,12,KX"))}}},
		{"ten as 10", line("CARD,12,10H"),
			[]Event{{Kind: KindProtocolError, Err: coup.ErrBadCard, Rejected: 17, Raw: raw(line("CARD,12,10H"))}}},
		{"lower-case card", line("CARD,12,kh"),
			[]Event{{Kind: KindProtocolError, Err: coup.ErrBadCard, Rejected: 16, Raw: raw(line("CARD,12,kh"))}}},
		{"suit first", line("CARD,12,HK"),
			[]Event{{Kind: KindProtocolError, Err: coup.ErrBadCard, Rejected: 16, Raw: raw(line("CARD,12,HK"))}}},
		{"half unreadable", line("CARD,12,K?"),
			[]Event{{Kind: KindProtocolError, Err: coup.ErrBadCard, Rejected: 16, Raw: raw(line("CARD,12,K?"))}}},
		{"seq 0", line("HB,0"), []Event{{Kind: KindProtocolError, Err: ErrBadSeq, Rejected: 10, Raw: raw(line("HB,0"))}}},
		{"seq leading zero", line("HB,07"), []Event{{Kind: KindProtocolError, Err: ErrBadSeq, Rejected: 11, Raw: raw(line("HB,07"))}}},
		{"seq not a number", line("HB,x1"), []Event{{Kind: KindProtocolError, Err: ErrBadSeq, Rejected: 11, Raw: raw(line("HB,x1"))}}},
		{"seq negative", line("HB,-1"), []Event{{Kind: KindProtocolError, Err: ErrBadSeq, Rejected: 11, Raw: raw(line("HB,-1"))}}},
		{"seq missing", line("HB"), []Event{{Kind: KindProtocolError, Err: ErrBadSeq, Rejected: 8, Raw: raw(line("HB"))}}},
		{"seq empty", line("HB,"), []Event{{Kind: KindProtocolError, Err: ErrBadSeq, Rejected: 9, Raw: raw(line("HB,"))}}},
		{"seq past uint32", line("HB,4294967296"), []Event{{Kind: KindProtocolError, Err: ErrBadSeq, Rejected: 19, Raw: raw(line("HB,4294967296"))}}},
		{"seq of 11 digits", line("HB,99999999999"), []Event{{Kind: KindProtocolError, Err: ErrBadSeq, Rejected: 20, Raw: raw(line("HB,99999999999"))}}},
		{"seq of 20 digits", line("HB,18446744073709551617"), []Event{{Kind: KindProtocolError, Err: ErrBadSeq, Rejected: 29, Raw: raw(line("HB,18446744073709551617"))}}},
		{"control byte inside", "$CARD,1\x07,KH*00\r\n$HB,2*14\r\n",
			[]Event{{Kind: KindProtocolError, Err: ErrNonPrintable, Rejected: 16, Raw: `$CARD,1\x07,KH*00\r\n`}, {Kind: KindHeartbeat, Seq: 2, Raw: "$HB,2*14"}}},
		{"8-bit byte inside", "$HB,\xe92*14\r\n",
			[]Event{{Kind: KindProtocolError, Err: ErrNonPrintable, Rejected: 11, Raw: `$HB,\xe92*14\r\n`}}},
		{"83 bytes is too long", line("a"+long[1:]) + line("HB,2"),
			[]Event{{Kind: KindProtocolError, Err: ErrOversize, Rejected: 83, Raw: raw(line("a"+long[1:])) + `\r...`}, {Kind: KindHeartbeat, Seq: 2, Raw: "$HB,2*14"}}},
		{"LF alone does not stretch the limit", strings.TrimSuffix(line("a"+long[1:]), "\r\n") + "\n",
			[]Event{{Kind: KindProtocolError, Err: ErrOversize, Rejected: 82, Raw: raw(line("a"+long[1:])) + `\n`}}},
		{"oversize ends at the next $", "$" + strings.Repeat("A", 200) + "$HB,2*14\r\n",
			[]Event{{Kind: KindProtocolError, Err: ErrOversize, Rejected: 201, Raw: "$" + strings.Repeat("A", 81) + "..."}, {Kind: KindHeartbeat, Seq: 2, Raw: "$HB,2*14"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewV1()
			got := d.Decode([]byte(tt.in))
			sameEvents(t, got, tt.want)
			checkStats(t, d.Stats(), len(tt.in), got)
		})
	}
}

// checkStats asserts the driver's counters agree with the events it returned.
func checkStats(t testing.TB, st Stats, n int, evs []Event) {
	t.Helper()
	var runs, rej, ok uint64
	for _, e := range evs {
		if e.Kind == KindProtocolError {
			runs++
			rej += uint64(e.Rejected)
		} else {
			ok++
		}
	}
	want := Stats{Bytes: uint64(n), Sentences: ok, RejectedRuns: runs, RejectedBytes: rej}
	if st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
}

func TestV1NoiseFloodIsReportedInBoundedRuns(t *testing.T) {
	d := NewV1()
	flood := bytes.Repeat([]byte{0xAA}, 2*maxRejectRun+100)
	got := d.Decode(append(flood, "$HB,2*14\r\n"...))
	want := []int{maxRejectRun, maxRejectRun, 100}
	if len(got) != len(want)+1 {
		t.Fatalf("got %s", fmtEvents(got))
	}
	for i, n := range want {
		if got[i].Kind != KindProtocolError || !errors.Is(got[i].Err, ErrNoise) || got[i].Rejected != n {
			t.Errorf("event %d: %s, want noise of %d bytes", i, fmtEvent(got[i]), n)
		}
		if len(got[i].Raw) > 4*rawMax+3 {
			t.Errorf("event %d: Raw of %d bytes is not bounded", i, len(got[i].Raw))
		}
	}
	if got[3].Kind != KindHeartbeat {
		t.Errorf("after the flood: %s, want the heartbeat", fmtEvent(got[3]))
	}
	if p := d.pending(); p != 0 {
		t.Errorf("pending %d after a complete sentence, want 0", p)
	}
}

func TestV1OversizeHoldsNoMoreThanOneSentence(t *testing.T) {
	d := NewV1()
	got := d.Decode([]byte("$"))
	for i := 0; i < 100000; i++ {
		got = append(got, d.Decode([]byte("ABCDEFGHIJ"))...)
		if p := d.pending(); p > maxPending["v1"] {
			t.Fatalf("after %d bytes: %d pending, more than %d", 1+10*(i+1), p, maxPending["v1"])
		}
	}
	got = append(got, d.Decode([]byte("\n$HB,2*14\r\n"))...)
	var total int
	for _, e := range got[:len(got)-1] {
		if !errors.Is(e.Err, ErrOversize) {
			t.Fatalf("%s: want oversize", fmtEvent(e))
		}
		total += e.Rejected
	}
	if total != 1+1000000+1 {
		t.Errorf("rejected %d bytes, want %d", total, 1000002)
	}
	if last := got[len(got)-1]; last.Kind != KindHeartbeat || last.Seq != 2 {
		t.Errorf("after the long line: %s, want heartbeat seq=2", fmtEvent(last))
	}
}

// TestV1SplitAnywhere feeds a stream with every kind of sentence and fault in
// two pieces cut at every offset, and one byte at a time: the events must
// not depend on how the bytes arrived.
func TestV1SplitAnywhere(t *testing.T) {
	in := []byte(line("HELO,1,1,S") + "zz" + line("CARD,2,KH") + "$CARD,3,QS*00\r\n" +
		line("CARD,4,??") + "$HB,5\x01*00\r\n" + line("BTN,6,REVEAL") + "\r" + line("HB,7") +
		"$" + strings.Repeat("x", 90) + "\n" + line("STAT,8,JAM,card jam") + "$HB,9*1C\n")
	whole := NewV1().Decode(in)
	if len(whole) < 10 {
		t.Fatalf("stream decoded to only %s", fmtEvents(whole))
	}
	for cut := 0; cut <= len(in); cut++ {
		sameEvents(t, decodeSplit(NewV1(), in, cut), whole)
	}
	d := NewV1()
	var bytewise []Event
	for i := range in {
		bytewise = append(bytewise, d.Decode(in[i:i+1])...)
	}
	sameEvents(t, bytewise, whole)
}

// TestV1ResyncProperty interleaves random valid sentences with random noise
// between them: every sentence must come out, in order, and everything else
// must be a protocol error.
func TestV1ResyncProperty(t *testing.T) {
	r := newRand(1)
	for round := 0; round < 200; round++ {
		var in []byte
		var want []Event
		for i := 0; i < 20; i++ {
			e := randomV1Event(r, uint32(i+1))
			b, err := AppendV1(nil, e)
			if err != nil {
				t.Fatalf("AppendV1(%s): %v", fmtEvent(e), err)
			}
			e.Raw = raw(string(b))
			want = append(want, e)
			in = append(in, b...)
			if r.IntN(3) == 0 {
				in = append(in, randomNoise(r)...)
			}
		}
		got := NewV1().Decode(in)
		var good []Event
		for _, e := range got {
			if e.Kind != KindProtocolError {
				good = append(good, e)
			}
		}
		sameEvents(t, good, want)
	}
}

func TestV1Guarantees(t *testing.T) {
	d := NewV1()
	if g := d.Guarantees(); g != (Guarantees{Sequenced: true, Checksummed: true, Heartbeat: true}) {
		t.Errorf("guarantees %+v", g)
	}
	if d.Name() != "v1" {
		t.Errorf("name %q", d.Name())
	}
}

func BenchmarkV1Decode(b *testing.B) {
	var in []byte
	for i := 1; i <= 1000; i++ {
		in, _ = AppendV1(in, Event{Kind: KindCard, Seq: uint32(i), Card: coup.CardAt(i % coup.CardCount)})
	}
	d := NewV1()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		d.Decode(in)
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "sentences/s")
}
