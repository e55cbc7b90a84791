package shoesim

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FaultKind is a fault the simulator can inject.
type FaultKind string

// The faults. Each names what the controller must catch; see FaultSpecHelp
// for where each one lands.
const (
	FaultNoise      FaultKind = "noise"      // random bytes between sentences
	FaultBadSum     FaultKind = "badsum"     // a sentence with a wrong checksum (Bee-Tek: a garbled card)
	FaultDrop       FaultKind = "drop"       // sentences numbered but never sent: a sequence gap
	FaultUnreadable FaultKind = "unreadable" // a card the reader could not read (??)
	FaultExtra      FaultKind = "extra"      // a card beyond the tableau
	FaultEarly      FaultKind = "early"      // a card drawn while betting is open
	FaultImpossible FaultKind = "impossible" // a card the shoe cannot hold
	FaultSilence    FaultKind = "silence"    // no bytes at all, not even heartbeats
	FaultUnplug     FaultKind = "unplug"     // the cable pulled, then plugged back
	FaultShortBurn  FaultKind = "shortburn"  // BURNDONE pressed one card early (v1)
	FaultStatus     FaultKind = "status"     // a status report: lid open, a reader fault...
	FaultShort      FaultKind = "short"      // the dealer forgets a card the tableau wants and reveals
)

// FaultKinds lists every fault, in the order of FaultSpecHelp.
var FaultKinds = []FaultKind{
	FaultNoise, FaultBadSum, FaultDrop, FaultUnreadable, FaultExtra,
	FaultEarly, FaultImpossible, FaultSilence, FaultUnplug, FaultShortBurn, FaultStatus, FaultShort,
}

// Defaults for a fault's argument.
const (
	DefaultNoiseBytes = 16
	DefaultDrop       = 1
	DefaultFaultFor   = 2 * time.Second
	// DefaultStatusText is the text of a status fault that names none.
	DefaultStatusText = "simulated"
	// MaxStatusText bounds a status fault's text, so that its sentence fits
	// v1's 80 bytes at any sequence number and Bee-Tek's alarm item.
	MaxStatusText = 40
	// maxStatusCode is the longest status code v1 allows.
	maxStatusCode = 16
	// MaxNoiseBytes bounds one burst of noise.
	MaxNoiseBytes = 4096
	// maxCoupCards is the most cards the tableau puts in a coup.
	maxCoupCards = 6
)

// ErrFault reports a fault that cannot be injected as asked.
var ErrFault = errors.New("bad fault")

// Fault is one fault to inject, at a place in the dealing.
//
// The place is a coup of a shoe (both from 1) and a card of that coup: Card
// 0 is the moment before the dealer presses NOMOREBETS, Card k the k-th card
// the tableau places in it (1 to 6). What happens there:
//
//	noise       N random bytes (default 16) go on the line before it
//	badsum      its sentence is sent with a wrong checksum (Card 0: NOMOREBETS)
//	drop        N sentences (default 1) from it on are numbered but not sent
//	unreadable  the card is sent as ?? (Card >= 1)
//	impossible  a counterfeit card takes that place (Card >= 1); see Plan
//	silence     nothing at all is sent for For (default 2s) before it
//	unplug      the line is unplugged for For (default 2s) before it
//	extra       after the coup is complete, one more card (Card 0 only)
//	early       the coup's first card is drawn before NOMOREBETS (Card 0 only)
//	short       the dealer stops before the card (Card >= 1, a card the
//	            tableau wants) and presses REVEAL: the card stays in the
//	            shoe and is the next coup's first
//	status      a status report (v1 STAT, Bee-Tek alarm) with Status and
//	            Text (default DefaultStatusText) is sent before it
//
// One fault has a shoe for its place, not a coup (Coup and Card are 0):
//
//	shortburn   the dealer presses BURNDONE one card early: one card fewer
//	            is burned than the exposed card says (v1 only: Bee-Tek has
//	            no buttons)
type Fault struct {
	Kind FaultKind
	Shoe int // from 1; 0 means 1
	Coup int // from 1; 0 for shortburn
	Card int // 0: before NOMOREBETS; k: the coup's k-th card
	// N is the bytes of noise or the number of sentences dropped; 0 takes
	// the default.
	N int
	// For is how long a silence or an unplug lasts; 0 takes the default.
	For time.Duration
	// Status is a status fault's code: 1 to 16 of A-Z a-z 0-9 _ -, as v1
	// allows (LID_OPEN, SENSOR...).
	Status string
	// Text is a status fault's text: printable ASCII, at most
	// MaxStatusText bytes, none of $ * < > [ ] and no space at either end;
	// "" takes DefaultStatusText.
	Text string
}

// FaultSpecHelp documents the fault SPEC syntax that ParseFault reads.
const FaultSpecHelp = `a fault to inject (repeatable), SPEC being KIND@[SHOE/]COUP[.CARD][:ARG]
  or shortburn@SHOE. COUP counts from 1 in each shoe (SHOE from 1, default
  1); CARD 0 (default) is the moment before the dealer presses NOMOREBETS,
  CARD k the coup's k-th card. KIND and ARG:
    noise:N         N random bytes between sentences (default 16)
    badsum          the sentence goes out with a wrong checksum
                    (beetek: the card is garbled; CARD >= 1)
    drop:N          N sentences from there on are numbered but lost (default 1;
                    beetek sends only cards and alarms, so it loses those)
    unreadable      the card is sent as ?? (CARD >= 1)
    extra           one card more than the tableau allows, after the coup
    early           the coup's first card comes before NOMOREBETS
    short           the dealer forgets the coup's CARD-th card and reveals: it
                    stays in the shoe (CARD >= 1, a card the tableau wants)
    impossible      a counterfeit copy of a card whose every copy came out in
                    the burn takes the card's place (CARD >= 1)
    silence:DUR     no bytes at all, not even heartbeats (default 2s)
    unplug:DUR      the pseudo-terminal vanishes, its output held (default 2s)
    shortburn       written shortburn@SHOE: the dealer presses BURNDONE one
                    card early, so one card fewer is burned than the exposed
                    card says (v1 only: Bee-Tek has no buttons)
    status:CODE[,TEXT]
                    a status report goes out first: v1 $STAT,seq,CODE,TEXT
                    (beetek: an alarm); CODE is 1 to 16 of A-Z a-z 0-9 _ -
                    (LID_OPEN, SENSOR...), TEXT at most 40 printable bytes,
                    none of $ * < > [ ] (default "simulated")
  e.g. noise@3 badsum@2.3 drop@4.1:2 unreadable@5.2 extra@6 early@7
       impossible@8.1 silence@9.2:3s unplug@2/10.1:5s shortburn@2
       status@4.1:SENSOR status@2/5:LID_OPEN,lid_opened`

// ParseFault reads a fault written as FaultSpecHelp describes, with the
// defaults of what it leaves out filled in.
func ParseFault(spec string) (Fault, error) {
	kindText, rest, ok := strings.Cut(spec, "@")
	if !ok {
		return Fault{}, fmt.Errorf("%w %q: want KIND@[SHOE/]COUP[.CARD][:ARG]", ErrFault, clip(spec))
	}
	f := Fault{Kind: FaultKind(kindText)}
	if !f.Kind.valid() {
		return Fault{}, fmt.Errorf("%w %q: unknown kind %q (want one of %s)", ErrFault, clip(spec), clip(kindText), kindList())
	}
	if f.Kind == FaultShortBurn {
		// A shoe has one burn: its place is the shoe alone.
		n, err := positive(rest)
		if err != nil {
			return Fault{}, fmt.Errorf("%w %q: shortburn@SHOE names a shoe only: %w", ErrFault, clip(spec), err)
		}
		f.Shoe = n
		return f.withDefaults(), nil
	}
	where, arg, hasArg := strings.Cut(rest, ":")
	if shoe, after, ok := strings.Cut(where, "/"); ok {
		n, err := positive(shoe)
		if err != nil {
			return Fault{}, fmt.Errorf("%w %q: shoe: %w", ErrFault, clip(spec), err)
		}
		f.Shoe, where = n, after
	}
	coupText, cardText, hasCard := strings.Cut(where, ".")
	n, err := positive(coupText)
	if err != nil {
		return Fault{}, fmt.Errorf("%w %q: coup: %w", ErrFault, clip(spec), err)
	}
	f.Coup = n
	if hasCard {
		n, err := strconv.Atoi(cardText)
		if err != nil || n < 0 || len(cardText) > 1 {
			return Fault{}, fmt.Errorf("%w %q: card %q: want 0 to %d", ErrFault, clip(spec), clip(cardText), maxCoupCards)
		}
		f.Card = n
	}
	if hasArg {
		switch f.Kind {
		case FaultNoise, FaultDrop:
			n, err := positive(arg)
			if err != nil {
				return Fault{}, fmt.Errorf("%w %q: count: %w", ErrFault, clip(spec), err)
			}
			f.N = n
		case FaultSilence, FaultUnplug:
			d, err := time.ParseDuration(arg)
			if err != nil || d <= 0 {
				return Fault{}, fmt.Errorf("%w %q: duration %q: want a positive Go duration like 3s", ErrFault, clip(spec), clip(arg))
			}
			f.For = d
		case FaultStatus:
			code, text, hasText := strings.Cut(arg, ",")
			if hasText && text == "" {
				return Fault{}, fmt.Errorf("%w %q: empty text after the comma: write :%s alone for the default", ErrFault, clip(spec), clip(code))
			}
			f.Status, f.Text = code, text
		default:
			return Fault{}, fmt.Errorf("%w %q: %s takes no argument", ErrFault, clip(spec), f.Kind)
		}
	}
	if err := f.check(); err != nil {
		return Fault{}, fmt.Errorf("%w %q: %w", ErrFault, clip(spec), err)
	}
	return f.withDefaults(), nil
}

// String writes the fault as ParseFault reads it, with its defaults filled in.
func (f Fault) String() string {
	f = f.withDefaults()
	var b strings.Builder
	fmt.Fprintf(&b, "%s@", f.Kind)
	if f.Kind == FaultShortBurn {
		fmt.Fprintf(&b, "%d", f.Shoe)
		return b.String()
	}
	if f.Shoe != 1 {
		fmt.Fprintf(&b, "%d/", f.Shoe)
	}
	fmt.Fprintf(&b, "%d", f.Coup)
	if f.Card != 0 {
		fmt.Fprintf(&b, ".%d", f.Card)
	}
	switch f.Kind {
	case FaultNoise, FaultDrop:
		fmt.Fprintf(&b, ":%d", f.N)
	case FaultSilence, FaultUnplug:
		fmt.Fprintf(&b, ":%s", f.For)
	case FaultStatus:
		fmt.Fprintf(&b, ":%s,%s", f.Status, f.Text)
	}
	return b.String()
}

// withDefaults fills in the zero fields that have defaults.
func (f Fault) withDefaults() Fault {
	if f.Shoe == 0 {
		f.Shoe = 1
	}
	switch f.Kind {
	case FaultNoise:
		if f.N == 0 {
			f.N = DefaultNoiseBytes
		}
	case FaultDrop:
		if f.N == 0 {
			f.N = DefaultDrop
		}
	case FaultSilence, FaultUnplug:
		if f.For == 0 {
			f.For = DefaultFaultFor
		}
	case FaultStatus:
		if f.Text == "" {
			f.Text = DefaultStatusText
		}
	}
	return f
}

// check says what is wrong with a fault, if anything; it does not know how
// many coups the shoe will have (Plan does).
func (f Fault) check() error {
	f = f.withDefaults()
	switch {
	case !f.Kind.valid():
		return fmt.Errorf("unknown kind %q (want one of %s)", clip(string(f.Kind)), kindList())
	case f.Kind == FaultShortBurn:
		if f.Shoe < 1 || f.Coup != 0 || f.Card != 0 || f.N != 0 || f.For != 0 {
			return fmt.Errorf("shortburn names a shoe (from 1) and nothing else: shortburn@%d", max(f.Shoe, 1))
		}
		return nil
	case f.Shoe < 1 || f.Coup < 1:
		return fmt.Errorf("shoe %d coup %d: both count from 1", f.Shoe, f.Coup)
	case f.Card < 0 || f.Card > maxCoupCards:
		return fmt.Errorf("card %d: want 0 (before NOMOREBETS) to %d", f.Card, maxCoupCards)
	case f.N < 0 || f.For < 0:
		return fmt.Errorf("negative argument")
	case f.Kind == FaultNoise && f.N > MaxNoiseBytes:
		return fmt.Errorf("%d bytes of noise: at most %d", f.N, MaxNoiseBytes)
	}
	switch f.Kind {
	case FaultUnreadable, FaultImpossible, FaultShort:
		if f.Card == 0 {
			return fmt.Errorf("%s needs a card: %s@%d.1 for the coup's first", f.Kind, f.Kind, f.Coup)
		}
	case FaultExtra, FaultEarly:
		if f.Card != 0 {
			return fmt.Errorf("%s applies to the whole coup: write %s@%d", f.Kind, f.Kind, f.Coup)
		}
	case FaultStatus:
		return checkStatus(f.Status, f.Text)
	}
	if f.Status != "" || f.Text != "" {
		return fmt.Errorf("%s takes no status code or text", f.Kind)
	}
	return nil
}

// checkStatus says what is wrong with a status fault's code and text, by
// the rules of both protocols, so that the sentence can be sent in either.
func checkStatus(code, text string) error {
	if code == "" {
		return fmt.Errorf("status needs a code: status@COUP:SENSOR")
	}
	if len(code) > maxStatusCode {
		return fmt.Errorf("status code %q: at most %d characters", clip(code), maxStatusCode)
	}
	for i := 0; i < len(code); i++ {
		if c := code[i]; !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("status code %q: byte %q: want A-Z a-z 0-9 _ -", clip(code), c)
		}
	}
	if len(text) > MaxStatusText {
		return fmt.Errorf("status text of %d bytes: at most %d", len(text), MaxStatusText)
	}
	if strings.TrimSpace(text) != text {
		return fmt.Errorf("status text %q: no space at either end", clip(text))
	}
	for i := 0; i < len(text); i++ {
		if c := text[i]; c < 0x20 || c > 0x7e || strings.IndexByte("$*<>[]", c) >= 0 {
			return fmt.Errorf("status text %q: byte %q: want printable ASCII other than $ * < > [ ]", clip(text), c)
		}
	}
	return nil
}

func (k FaultKind) valid() bool {
	for _, v := range FaultKinds {
		if k == v {
			return true
		}
	}
	return false
}

func kindList() string {
	names := make([]string, len(FaultKinds))
	for i, k := range FaultKinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// positive reads a decimal integer of at least 1.
func positive(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || len(s) > 9 {
		return 0, fmt.Errorf("%q: want a whole number from 1", clip(s))
	}
	return n, nil
}

// clip shortens outside input before it goes into an error message.
func clip(s string) string {
	const max = 24
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
