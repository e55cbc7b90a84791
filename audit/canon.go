package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxBodyBytes bounds one event body in canonical form. Events describe a
// card, a button or a supervisor action; a megabyte is far beyond any of
// them, and the bound keeps a runaway caller from filling the disk.
const MaxBodyBytes = 1 << 20

// maxDepth bounds nesting in canonical JSON so hostile input cannot exhaust
// the stack.
const maxDepth = 64

// CanonicalJSON marshals v with encoding/json and returns its canonical form
// (see Canonicalize). It is what Append stores and hashes as an event body.
func CanonicalJSON(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("marshal body: %w", err)
	}
	// json.Marshal writes valid JSON (it checks what a Marshaler or a
	// RawMessage gives it), so only the encoding is left to check.
	if !utf8.Valid(raw) {
		return nil, errors.New("canonical json: input is not valid UTF-8")
	}
	return canonicalize(raw)
}

// Canonicalize returns the canonical form of the JSON text data:
//
//   - no insignificant whitespace;
//   - object keys sorted by their UTF-8 bytes; a duplicate key is an error;
//   - numbers exactly as written (encoding/json writes a Go value's number
//     the same way every time, so equal values give equal bytes);
//   - strings in double quotes with only '"', '\\' and the control
//     characters below U+0020 escaped: \b \f \n \r \t in short form, the
//     others as \u00xx in lower-case hex; every other character, including
//     '<', '>', '&', U+2028 and U+2029, is written as raw UTF-8. An escaped
//     lone surrogate becomes U+FFFD, as in encoding/json.
//
// The input must be valid UTF-8, hold exactly one JSON value and nest at
// most 64 deep. Canonicalize is idempotent: Canonicalize(Canonicalize(x))
// equals Canonicalize(x).
//
// Every row's hash covers these bytes, and replay re-derives them for every
// event, so this is a hand-written pass over the text (json.Valid checks
// the grammar first) rather than encoding/json's token decoder, which was
// most of replay's time. canon_ref_test.go keeps the decoder-based version
// and a fuzz target holds the two to the same output.
func Canonicalize(data []byte) ([]byte, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("canonical json: input is not valid UTF-8")
	}
	if !json.Valid(data) {
		// Only now pay for a decoder: it says what and where.
		var v any
		err := json.Unmarshal(data, &v)
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return canonicalize(data)
}

// canonicalize is Canonicalize on valid UTF-8 JSON text.
func canonicalize(data []byte) ([]byte, error) {
	c := canonicalizer{out: make([]byte, 0, len(data)),
		scratch: make([]byte, 0, len(data)), members: make([]member, 0, 16)}
	return c.run(data)
}

// run writes the canonical form of data, valid UTF-8 JSON text, over out.
func (c *canonicalizer) run(data []byte) ([]byte, error) {
	c.in, c.pos = data, 0
	c.out, c.scratch, c.members = c.out[:0], c.scratch[:0], c.members[:0]
	c.skipSpace()
	if err := c.value(0); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return c.out, nil
}

// canonEncoder is CanonicalJSON that keeps its buffers from one call to
// the next: replay encodes every event the rules derive to compare it with
// the row, and allocating for each was a good part of its time. One
// goroutine at a time.
type canonEncoder struct {
	raw bytes.Buffer
	enc *json.Encoder
	c   canonicalizer
}

func newCanonEncoder() *canonEncoder {
	e := &canonEncoder{}
	e.enc = json.NewEncoder(&e.raw)
	// The canonical form writes '<', '>' and '&' raw: escaping them only
	// to unescape them is waste.
	e.enc.SetEscapeHTML(false)
	return e
}

// encode returns v's canonical JSON, as CanonicalJSON does; the bytes are
// good until the next call.
func (e *canonEncoder) encode(v any) ([]byte, error) {
	e.raw.Reset()
	if err := e.enc.Encode(v); err != nil {
		return nil, fmt.Errorf("marshal body: %w", err)
	}
	raw := e.raw.Bytes()
	if !utf8.Valid(raw) {
		return nil, errors.New("canonical json: input is not valid UTF-8")
	}
	return e.c.run(raw)
}

// canonicalizer writes the canonical form of in, which json.Valid has
// accepted: it checks only what the grammar does not (depth, duplicate
// keys).
type canonicalizer struct {
	in      []byte
	pos     int
	out     []byte
	scratch []byte   // the values of the object being sorted
	members []member // a stack: the members of each open object
}

func (c *canonicalizer) skipSpace() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// value writes the value at pos and leaves pos after it and any space.
func (c *canonicalizer) value(depth int) error {
	switch b := c.in[c.pos]; b {
	case '{', '[':
		if depth >= maxDepth {
			return fmt.Errorf("nested deeper than %d", maxDepth)
		}
		if b == '{' {
			return c.object(depth + 1)
		}
		return c.array(depth + 1)
	case '"':
		s := c.str()
		c.out = appendString(c.out, s)
	default:
		// A number, true, false or null: copied as written.
		start := c.pos
		for c.pos < len(c.in) && !isDelim(c.in[c.pos]) {
			c.pos++
		}
		c.out = append(c.out, c.in[start:c.pos]...)
	}
	c.skipSpace()
	return nil
}

func isDelim(b byte) bool {
	switch b {
	case ',', ']', '}', ':', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

func (c *canonicalizer) array(depth int) error {
	c.pos++ // '['
	c.skipSpace()
	c.out = append(c.out, '[')
	for first := true; c.in[c.pos] != ']'; first = false {
		if !first {
			c.pos++ // ','
			c.skipSpace()
			c.out = append(c.out, ',')
		}
		if err := c.value(depth); err != nil {
			return err
		}
	}
	c.pos++
	c.skipSpace()
	c.out = append(c.out, ']')
	return nil
}

// member is one name/value pair of an object: the decoded key, and where
// the canonical value was written in out.
type member struct {
	key        []byte
	start, end int
}

func (c *canonicalizer) object(depth int) error {
	c.pos++ // '{'
	c.skipSpace()
	base := len(c.out)
	mbase := len(c.members)
	sorted := true
	for first := true; c.in[c.pos] != '}'; first = false {
		if !first {
			c.pos++ // ','
			c.skipSpace()
		}
		key := c.str()
		c.skipSpace()
		c.pos++ // ':'
		c.skipSpace()
		start := len(c.out)
		if err := c.value(depth); err != nil {
			return err
		}
		if n := len(c.members); n > mbase && string(c.members[n-1].key) >= string(key) {
			sorted = false
		}
		c.members = append(c.members, member{key: key, start: start, end: len(c.out)})
	}
	c.pos++
	c.skipSpace()
	members := c.members[mbase:]
	defer func() { c.members = c.members[:mbase] }()
	if !sorted {
		slices.SortStableFunc(members, func(a, b member) int { return compareBytes(a.key, b.key) })
		for i := 1; i < len(members); i++ {
			if string(members[i-1].key) == string(members[i].key) {
				return fmt.Errorf("duplicate object key %q", members[i].key)
			}
		}
	}
	// The values were written one after another from base; write the
	// object over them from a copy.
	c.scratch = append(c.scratch[:0], c.out[base:]...)
	vals := c.scratch
	c.out = append(c.out[:base], '{')
	for i, m := range members {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = appendString(c.out, m.key)
		c.out = append(c.out, ':')
		c.out = append(c.out, vals[m.start-base:m.end-base]...)
	}
	c.out = append(c.out, '}')
	return nil
}

func compareBytes(a, b []byte) int {
	switch {
	case string(a) < string(b):
		return -1
	case string(a) > string(b):
		return 1
	}
	return 0
}

// str reads the string at pos and returns its decoded bytes: a slice of
// the input when it holds no escape, else a new slice decoded as
// encoding/json decodes (an unpaired surrogate escape is U+FFFD).
func (c *canonicalizer) str() []byte {
	c.pos++ // '"'
	start := c.pos
	for c.in[c.pos] != '"' {
		if c.in[c.pos] == '\\' {
			return c.unescape(start)
		}
		c.pos++
	}
	s := c.in[start:c.pos]
	c.pos++
	return s
}

func (c *canonicalizer) unescape(start int) []byte {
	s := append([]byte(nil), c.in[start:c.pos]...)
	for {
		b := c.in[c.pos]
		switch b {
		case '"':
			c.pos++
			return s
		case '\\':
		default:
			s = append(s, b)
			c.pos++
			continue
		}
		e := c.in[c.pos+1]
		c.pos += 2
		switch e {
		case 'b':
			s = append(s, '\b')
		case 'f':
			s = append(s, '\f')
		case 'n':
			s = append(s, '\n')
		case 'r':
			s = append(s, '\r')
		case 't':
			s = append(s, '\t')
		case 'u':
			r := hex4(c.in[c.pos:])
			c.pos += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if c.pos+6 <= len(c.in) && c.in[c.pos] == '\\' && c.in[c.pos+1] == 'u' {
					r2 = hex4(c.in[c.pos+2:])
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					c.pos += 6
					r = d
				} else {
					r = utf8.RuneError
				}
			}
			s = utf8.AppendRune(s, r)
		default: // '"', '\\', '/'
			s = append(s, e)
		}
	}
}

// hex4 decodes four hex digits, which json.Valid has checked are there.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

const lowerHex = "0123456789abcdef"

// appendString appends s as a canonical JSON string. s is valid UTF-8:
// Canonicalize rejects raw invalid input and decoded escapes are whole runes.
func appendString[T string | []byte](out []byte, s T) []byte {
	out = append(out, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		out = append(out, s[start:i]...)
		start = i + 1
		switch c {
		case '"':
			out = append(out, '\\', '"')
		case '\\':
			out = append(out, '\\', '\\')
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			out = append(out, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xf])
		}
	}
	out = append(out, s[start:]...)
	return append(out, '"')
}
