package audit

// canonicalizeRef is Canonicalize as first written, on encoding/json's token
// decoder: slow, but plainly right. FuzzCanonicalizeMatchesReference holds
// the hand-written pass in canon.go to the same bytes and the same refusals.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"unicode/utf8"
)

func canonicalizeRef(data []byte) ([]byte, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("canonical json: input is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out bytes.Buffer
	out.Grow(len(data))
	if err := refValue(dec, &out, 0); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("canonical json: data after the top-level value")
	}
	return out.Bytes(), nil
}

// refValue reads one value from dec and writes its canonical form.
func refValue(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return errors.New("unexpected end of input")
		}
		return err
	}
	return refToken(dec, out, tok, depth)
}

func refToken(dec *json.Decoder, out *bytes.Buffer, tok json.Token, depth int) error {
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxDepth {
			return fmt.Errorf("nested deeper than %d", maxDepth)
		}
		switch t {
		case '{':
			return refObject(dec, out, depth+1)
		case '[':
			return refArray(dec, out, depth+1)
		}
		return fmt.Errorf("unexpected %q", rune(t))
	case string:
		refAppendString(out, t)
	case json.Number:
		out.WriteString(string(t))
	case bool:
		if t {
			out.WriteString("true")
		} else {
			out.WriteString("false")
		}
	case nil:
		out.WriteString("null")
	default:
		return fmt.Errorf("unexpected token %v", tok)
	}
	return nil
}

func refArray(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	out.WriteByte('[')
	for first := true; ; first = false {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok && d == ']' {
			out.WriteByte(']')
			return nil
		}
		if !first {
			out.WriteByte(',')
		}
		if err := refToken(dec, out, tok, depth); err != nil {
			return err
		}
	}
}

func refObject(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	type member struct {
		key   string
		value []byte
	}
	var members []member
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok && d == '}' {
			break
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("object key is %v, not a string", tok)
		}
		var v bytes.Buffer
		if err := refValue(dec, &v, depth); err != nil {
			return err
		}
		members = append(members, member{key, v.Bytes()})
	}
	slices.SortFunc(members, func(a, b member) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	out.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].key == m.key {
				return fmt.Errorf("duplicate object key %q", m.key)
			}
			out.WriteByte(',')
		}
		refAppendString(out, m.key)
		out.WriteByte(':')
		out.Write(m.value)
	}
	out.WriteByte('}')
	return nil
}

// refAppendString writes s as a canonical JSON string. s is valid UTF-8: the
// decoder replaces bad sequences from escapes with U+FFFD and Canonicalize
// rejects raw invalid input.
func refAppendString(out *bytes.Buffer, s string) {
	out.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			out.WriteString(`\"`)
		case c == '\\':
			out.WriteString(`\\`)
		case c == '\b':
			out.WriteString(`\b`)
		case c == '\f':
			out.WriteString(`\f`)
		case c == '\n':
			out.WriteString(`\n`)
		case c == '\r':
			out.WriteString(`\r`)
		case c == '\t':
			out.WriteString(`\t`)
		case c < 0x20:
			out.WriteString(`\u00`)
			out.WriteByte(lowerHex[c>>4])
			out.WriteByte(lowerHex[c&0xf])
		default:
			out.WriteByte(c)
		}
	}
	out.WriteByte('"')
}

// FuzzCanonicalizeMatchesReference: the rows already in trails were hashed
// over canonicalizeRef's bytes, so the fast pass must give exactly those
// bytes and refuse exactly what it refused.
func FuzzCanonicalizeMatchesReference(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,null,"x\u0000"]}`, `1e5`, `"\ud800"`, `"\ud800\udc00"`, `"\udc00\ud800x"`, `"\ud83d\ude00\u00e9\/"`,
		`{"a":1,"a":2}`, `{"\u0061":1,"a":2}`, "[[[[]]]]", ` { "z" : [ 1 , -0.5e-3 ] , "é" : "<&>\u2028" } `,
		`{"kind":"card","card":"KH","hand":"banker","shoe_seq":118}`, `{"":{"":[]}}`, `"\t\"\\\b\f\n\r\u001f"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Canonicalize(data)
		want, werr := canonicalizeRef(data)
		if (err == nil) != (werr == nil) {
			t.Fatalf("Canonicalize(%q): error %v, the reference's %v", data, err, werr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Canonicalize(%q) = %q, the reference gives %q", data, got, want)
		}
	})
}

// TestCanonicalizeMatchesReferenceOnValues runs both over the JSON of
// random values, escapes and all.
func TestCanonicalizeMatchesReferenceOnValues(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for i := range 20000 {
		raw, err := json.Marshal(randomValue(r, 0))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Canonicalize(raw)
		want, werr := canonicalizeRef(raw)
		if err != nil || werr != nil || !bytes.Equal(got, want) {
			t.Fatalf("value %d %s: %s (%v), the reference %s (%v)", i, raw, got, err, want, werr)
		}
	}
}

func BenchmarkCanonicalize(b *testing.B) {
	body := []byte(`{"shoe_seq":118,"kind":"card","hand":"banker","card":"KH","manual":false,"coup":41,"shoe":3,"at":"2026-11-22T17:00:00Z","note":"a \"quoted\" \u00e9"}`)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, err := Canonicalize(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reference", func(b *testing.B) {
		for b.Loop() {
			if _, err := canonicalizeRef(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestCanonEncoderMatchesCanonicalJSON: the replayer's reusing encoder gives
// CanonicalJSON's bytes, call after call, whatever the previous call left in
// its buffers.
func TestCanonEncoderMatchesCanonicalJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	e := newCanonEncoder()
	for i := range 20000 {
		v := randomValue(r, 0)
		want, werr := CanonicalJSON(v)
		got, err := e.encode(v)
		if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("value %d %#v: %s (%v), CanonicalJSON %s (%v)", i, v, got, err, want, werr)
		}
	}
	for _, v := range []any{"<a & b>", map[string]any{"\u2028": "x\u2029", "b": []any{"<", 1.5}}, json.RawMessage(`{"z":1,"a":"\u003c"}`)} {
		want, _ := CanonicalJSON(v)
		if got, err := e.encode(v); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%#v: %s (%v), CanonicalJSON %s", v, got, err, want)
		}
	}
}
