package shoeread

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const docPath = "../docs/shoe-protocol.md"

// docBlock is one fenced code block of the protocol document.
type docBlock struct {
	info string // the fence's info string: v1, v1-stream, beetek, checksum...
	// resume is N from "v1-stream resume=N": the stream's Reader starts as
	// a controller that restarted having last recorded sentence N.
	resume uint32
	line   int // line number of the opening fence
	lines  []string
}

// readDoc splits the document into its fenced blocks and the prose outside them.
func readDoc(t *testing.T) (blocks []docBlock, prose []string) {
	t.Helper()
	f, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("the protocol document: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(f))
	var cur *docBlock
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			cur = &docBlock{line: n}
			info := strings.Fields(strings.TrimPrefix(l, "```"))
			if len(info) > 0 {
				cur.info = info[0]
			}
			for _, opt := range info[min(1, len(info)):] {
				v, ok := strings.CutPrefix(opt, "resume=")
				last, err := strconv.ParseUint(v, 10, 32)
				if !ok || err != nil || last == 0 || cur.info != "v1-stream" {
					t.Fatalf("%s:%d: fence option %q: want resume=N (N from 1) on a v1-stream block", docPath, n, opt)
				}
				cur.resume = uint32(last)
			}
		case cur != nil && l == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, l)
		default:
			prose = append(prose, l)
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: code block never closed", docPath, cur.line)
	}
	return blocks, prose
}

// TestDocExamples decodes every example line of docs/shoe-protocol.md
// ("input  ->  event ; event") and compares what the decoder makes of it
// with what the document says, in the notation fmtEvent writes. Lines in a
// v1 or beetek block stand alone; a v1-stream block is one stream through
// one Reader, which first resumes from N for "v1-stream resume=N", as the
// controller does after a restart. An input in double quotes is a Go string literal, fed as is;
// otherwise a v1 line gets CR LF and a Bee-Tek line spaces around it, as the
// shoes send them. Every v1 example's checksum is also recomputed here.
func TestDocExamples(t *testing.T) {
	blocks, prose := readDoc(t)
	if len(prose) == 0 || !strings.HasPrefix(prose[0], "# tablectl shoe protocol v1") {
		t.Errorf("the document must open with its versioned title, got %q", prose[0])
	}
	seen := map[string]bool{} // what the examples cover
	examples := map[string]bool{}
	for _, b := range blocks {
		var mk func() Driver
		switch b.info {
		case "v1", "v1-stream":
			mk = func() Driver { return NewV1() }
		case "beetek":
			mk = func() Driver { return NewBeetek() }
		case "checksum":
			checkWorkedChecksum(t, b)
			seen["worked checksum"] = true
			continue
		default:
			continue
		}
		stream := NewReader(mk())
		if b.resume != 0 {
			stream.Sequencer().Resume(b.resume)
			seen["resume"] = true
		}
		for i, l := range b.lines {
			at := fmt.Sprintf("%s:%d", docPath, b.line+1+i)
			if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
				continue
			}
			left, right, ok := strings.Cut(l, "->")
			if !ok {
				t.Errorf("%s: example %q has no '->' and expected event", at, l)
				continue
			}
			text := strings.TrimSpace(left)
			examples[text] = true
			in := []byte(text)
			switch {
			case strings.HasPrefix(text, `"`):
				s, err := strconv.Unquote(text)
				if err != nil {
					t.Errorf("%s: %s is not a Go string literal: %v", at, text, err)
					continue
				}
				in = []byte(s)
			case b.info == "beetek":
				in = []byte(" " + text + " ")
			default:
				in = append(in, "\r\n"...)
			}
			var want []string
			for _, w := range strings.Split(right, ";") {
				want = append(want, strings.Join(strings.Fields(w), " "))
			}

			r := stream
			if b.info != "v1-stream" {
				r = NewReader(mk())
			}
			var got []string
			evs := r.Decode(in)
			for i, e := range evs {
				got = append(got, fmtEvent(e))
				seen[fmtKind(e)] = true
				if e.Kind == KindHeartbeat && i > 0 && evs[i-1].Kind == KindGap {
					seen["gap revealed by heartbeat"] = true
				}
			}
			if strings.Join(got, " ; ") != strings.Join(want, " ; ") {
				t.Errorf("%s: %s\n  decodes to %s\n  the doc says %s", at, text, strings.Join(got, " ; "), strings.Join(want, " ; "))
			}
			if b.info != "beetek" && !strings.HasPrefix(text, `"`) && !strings.Contains(right, "protocol_error") {
				if err := checkDocChecksum(text); err != nil {
					t.Errorf("%s: %v", at, err)
				}
			}
		}
	}

	// Every sentence type, button and error the document describes has an
	// example that shows it.
	for _, k := range []string{
		"hello", "card", "card unreadable", "cut_card", "status", "heartbeat", "gap",
		"button new_shoe", "button burn_done", "button no_more_bets", "button reveal",
		"card burn", "protocol_error noise", "protocol_error framing", "protocol_error checksum",
		"protocol_error oversize", "protocol_error non_printable", "protocol_error unknown_type",
		"protocol_error malformed", "protocol_error bad_seq", "protocol_error bad_card",
		"protocol_error version", "protocol_error duplicate", "protocol_error backwards",
		"worked checksum", "resume", "gap revealed by heartbeat",
	} {
		if !seen[k] {
			t.Errorf("the document has no checked example of %s", k)
		}
	}

	// A sentence quoted in the prose must be one of the checked examples,
	// so the prose cannot show a sentence nobody decoded.
	sentence := regexp.MustCompile("`(\\$[^`*]*\\*[0-9A-Fa-f]{2})`")
	token := regexp.MustCompile("`((?:\\[[^]`]*\\])?<[^>`]*>)`")
	for _, l := range prose {
		for _, m := range sentence.FindAllStringSubmatch(l, -1) {
			if !examples[m[1]] {
				t.Errorf("%s: %s appears in the text but in no example block", docPath, m[1])
			}
		}
		for _, m := range token.FindAllStringSubmatch(l, -1) {
			for _, e := range NewBeetek().Decode([]byte(" " + m[1] + " ")) {
				if e.Kind == KindProtocolError {
					t.Errorf("%s: Bee-Tek text %s in the prose does not decode: %v", docPath, m[1], e.Err)
				}
			}
		}
	}
}

// fmtKind names an event's kind with the detail the coverage check needs.
func fmtKind(e Event) string {
	switch {
	case e.Kind == KindButton:
		return "button " + string(e.Button)
	case e.Kind == KindProtocolError:
		return "protocol_error " + Reason(e.Err)
	case e.Unreadable:
		return "card unreadable"
	case e.Burn:
		return "card burn"
	}
	return e.Kind.String()
}

// checkDocChecksum recomputes an example sentence's checksum.
func checkDocChecksum(s string) error {
	star := strings.LastIndexByte(s, '*')
	if !strings.HasPrefix(s, "$") || star < 0 {
		return fmt.Errorf("%q is not a sentence", s)
	}
	want, err := strconv.ParseUint(s[star+1:], 16, 8)
	if err != nil {
		return fmt.Errorf("%q: checksum: %v", s, err)
	}
	var x byte
	for i := 1; i < star; i++ {
		x ^= s[i]
	}
	if byte(want) != x {
		return fmt.Errorf("%q: checksum *%s, the bytes XOR to %02X", s, s[star+1:], x)
	}
	return nil
}

// checkWorkedChecksum verifies the step-by-step XOR table: each row's byte is
// its character's, each running value the XOR so far, the rows spell the
// sentence's body and the last value is its checksum.
func checkWorkedChecksum(t *testing.T, b docBlock) {
	if len(b.lines) < 3 || !strings.HasPrefix(b.lines[0], "sentence: ") {
		t.Fatalf("%s:%d: the worked checksum must start with 'sentence: $...*HH'", docPath, b.line)
	}
	sentence := strings.TrimPrefix(b.lines[0], "sentence: ")
	if err := checkDocChecksum(sentence); err != nil {
		t.Errorf("%s:%d: %v", docPath, b.line+1, err)
	}
	var body []byte
	var x byte
	for i, l := range b.lines[2:] {
		at := fmt.Sprintf("%s:%d", docPath, b.line+3+i)
		f := strings.Fields(l)
		if len(f) != 3 || len(f[0]) != 1 {
			t.Errorf("%s: row %q: want 'char 0xHH 0xHH'", at, l)
			continue
		}
		c := f[0][0]
		x ^= c
		if f[1] != fmt.Sprintf("0x%02X", c) || f[2] != fmt.Sprintf("0x%02X", x) {
			t.Errorf("%s: row %q: %q is 0x%02X and the XOR so far is 0x%02X", at, l, c, c, x)
		}
		body = append(body, c)
	}
	star := strings.LastIndexByte(sentence, '*')
	if star < 1 || string(body) != sentence[1:star] {
		t.Errorf("%s:%d: the rows spell %q, not the body of %s", docPath, b.line, body, sentence)
	}
	if fmt.Sprintf("%02X", x) != sentence[star+1:] {
		t.Errorf("%s:%d: the rows end at %02X, the sentence says %s", docPath, b.line, x, sentence[star+1:])
	}
}
