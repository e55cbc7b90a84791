package coup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/bits"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// ErrProfile reports a rule profile, or a profile config, that cannot be used.
var ErrProfile = errors.New("invalid rule profile")

// MaxProfileConfig is the largest profile config document ParseProfile reads:
// a real one is a few hundred bytes, so anything near this is not a config.
const MaxProfileConfig = 64 << 10

// MaxRatioTerm bounds each term of a payout ratio (after reduction), so that
// no stake up to MaxStake can overflow a payout and a typo like "1100:1" for
// "11:1" is still possible but "0.0000001:1" is not.
const MaxRatioTerm = 1_000_000

// maxConfigDepth bounds the nesting of a config document; the format needs 3.
const maxConfigDepth = 8

// String writes the ratio as "num:den", e.g. "19:20"; the zero Ratio is "0:1".
func (r Ratio) String() string {
	if r.IsZero() {
		return "0:1"
	}
	return strconv.FormatInt(r.Num, 10) + ":" + strconv.FormatInt(r.Den, 10)
}

// valid reports a ratio a profile may hold: zero (not paid), or positive
// terms within MaxRatioTerm.
func (r Ratio) valid() bool {
	return r.IsZero() || (r.Num > 0 && r.Den > 0 && r.Num <= MaxRatioTerm && r.Den <= MaxRatioTerm)
}

// MarshalText writes the ratio as String does. A negative or zero-denominator
// ratio is an error, so a broken profile never reaches JSON.
func (r Ratio) MarshalText() ([]byte, error) {
	if !r.IsZero() && (r.Num < 0 || r.Den <= 0) {
		return nil, fmt.Errorf("invalid ratio %d:%d", r.Num, r.Den)
	}
	return []byte(r.String()), nil
}

// UnmarshalText reads a ratio as ParseRatio does.
func (r *Ratio) UnmarshalText(b []byte) error {
	p, err := ParseRatio(string(b))
	if err != nil {
		return err
	}
	*r = p
	return nil
}

// ParseRatio reads a payout ratio written "num:den", each term a
// non-negative decimal ("11:1", "1:2", "0.95:1"). Decimals are converted
// exactly and the result reduced ("0.95:1" is 19:20). A zero numerator is the
// zero Ratio ("not paid"); a zero denominator, a sign, an exponent, or a term
// above MaxRatioTerm after reduction is an error.
func ParseRatio(s string) (Ratio, error) {
	ns, ds, ok := strings.Cut(s, ":")
	if !ok {
		return Ratio{}, fmt.Errorf("ratio %q: want num:den, like 11:1 or 0.95:1", clip(s))
	}
	nm, nscale, err := parseDecimal(strings.TrimSpace(ns))
	if err != nil {
		return Ratio{}, fmt.Errorf("ratio %q: numerator: %w", clip(s), err)
	}
	dm, dscale, err := parseDecimal(strings.TrimSpace(ds))
	if err != nil {
		return Ratio{}, fmt.Errorf("ratio %q: denominator: %w", clip(s), err)
	}
	if dm == 0 {
		return Ratio{}, fmt.Errorf("ratio %q: denominator is zero", clip(s))
	}
	if nm == 0 {
		return Ratio{}, nil
	}
	// n/10^a : d/10^b is n*10^b : d*10^a. Mantissas stay below 10^12 and
	// scales at most 6, so neither product overflows.
	num, den := nm*decimalScale[dscale], dm*decimalScale[nscale]
	g := ratioGCD(num, den)
	num, den = num/g, den/g
	if num > MaxRatioTerm || den > MaxRatioTerm {
		return Ratio{}, fmt.Errorf("ratio %q: reduces to %d:%d, terms above %d", clip(s), num, den, MaxRatioTerm)
	}
	return Ratio{Num: num, Den: den}, nil
}

var decimalScale = [...]int64{1, 10, 100, 1_000, 10_000, 100_000, 1_000_000}

// parseDecimal reads digits with an optional fraction ("0.95") as an integer
// mantissa and a count of fraction digits: at most 12 digits in all, of which
// at most 6 after the point.
func parseDecimal(s string) (mant int64, scale int, err error) {
	const maxDigits, maxScale = 12, len(decimalScale) - 1
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" || (dot && frac == "") {
		return 0, 0, fmt.Errorf("%q is not a decimal number", clip(s))
	}
	if len(whole)+len(frac) > maxDigits {
		return 0, 0, fmt.Errorf("%q has more than %d digits", clip(s), maxDigits)
	}
	if len(frac) > maxScale {
		return 0, 0, fmt.Errorf("%q has more than %d decimals", clip(s), maxScale)
	}
	for _, c := range []byte(whole + frac) {
		if c < '0' || c > '9' {
			return 0, 0, fmt.Errorf("%q is not a decimal number", clip(s))
		}
		mant = mant*10 + int64(c-'0')
	}
	return mant, len(frac), nil
}

func ratioGCD(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// knownBet reports a spot the rules define.
func knownBet(b Bet) bool {
	switch b {
	case BetPlayer, BetBanker, BetTie, BetPlayerPair, BetBankerPair, BetAnyPair,
		BetPerfectPair, BetPlayerBonus, BetBankerBonus:
		return true
	}
	_, ok := b.WinningNumber()
	return ok
}

// namedRatio is one entry of a pay table, named as in the config.
type namedRatio struct {
	name  string
	ratio Ratio
}

func (t *PayTable) ratios() []namedRatio {
	rs := []namedRatio{
		{"player", t.Player}, {"banker", t.Banker}, {"banker_on_six", t.BankerOnSix}, {"tie", t.Tie},
		{"player_pair", t.PlayerPair}, {"banker_pair", t.BankerPair}, {"any_pair", t.AnyPair},
		{"perfect_pair_one", t.PerfectPairOne}, {"perfect_pair_both", t.PerfectPairBoth},
		{"bonus_natural", t.BonusNatural},
	}
	for i, r := range t.BonusMargin {
		rs = append(rs, namedRatio{fmt.Sprintf("bonus_margin[%d]", i), r})
	}
	for i, r := range t.WinningNumber {
		rs = append(rs, namedRatio{fmt.Sprintf("winning_number[%d]", i), r})
	}
	return rs
}

// requiredPays names the ratios a spot cannot be offered without. The
// winning-number spots are absent on purpose: seed 001 puts them on the
// layout with no pay table, so a stake on one is refused instead
// (ValidateStakes) until its ratio is configured.
func (t *PayTable) requiredPays(b Bet) []namedRatio {
	switch b {
	case BetPlayer:
		return []namedRatio{{"player", t.Player}}
	case BetBanker:
		return []namedRatio{{"banker", t.Banker}}
	case BetTie:
		return []namedRatio{{"tie", t.Tie}}
	case BetPlayerPair:
		return []namedRatio{{"player_pair", t.PlayerPair}}
	case BetBankerPair:
		return []namedRatio{{"banker_pair", t.BankerPair}}
	case BetAnyPair:
		return []namedRatio{{"any_pair", t.AnyPair}}
	case BetPerfectPair:
		// Both, or a double perfect pair would lose a bet that won.
		return []namedRatio{{"perfect_pair_one", t.PerfectPairOne}, {"perfect_pair_both", t.PerfectPairBoth}}
	case BetPlayerBonus, BetBankerBonus:
		return []namedRatio{{"bonus_natural", t.BonusNatural}}
	}
	return nil
}

// validProfileName keeps names safe for logs, audit rows and MQTT topics.
func validProfileName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// Validate checks that the profile can be dealt and settled: a safe name, 6
// or 8 decks, known spots offered once each, valid ratios with every offered
// spot paid (winning-number spots excepted), and consistent limits. It lists
// every problem found, wrapped in ErrProfile.
func (p *Profile) Validate() error {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }

	if !validProfileName(p.Name) {
		bad("name %q: want 1-64 letters, digits, '-', '_' or '.'", clip(p.Name))
	}
	if !ValidDecks(p.Decks) {
		bad("decks %d: want 6 or 8", p.Decks)
	}
	if len(p.Bets) == 0 {
		bad("bets: the profile offers no bet")
	}
	seen := make(map[Bet]bool, len(p.Bets))
	for _, b := range p.Bets {
		switch {
		case !knownBet(b):
			bad("bets: unknown bet %q", clip(string(b)))
		case seen[b]:
			bad("bets: %s offered twice", b)
		default:
			for _, nr := range p.Pays.requiredPays(b) {
				if nr.ratio.IsZero() {
					bad("pays.%s: %s is offered but not paid", nr.name, b)
				}
			}
		}
		seen[b] = true
	}
	for _, nr := range p.Pays.ratios() {
		if !nr.ratio.valid() {
			bad("pays.%s: %d:%d is not a payout ratio (want positive terms up to %d)", nr.name, nr.ratio.Num, nr.ratio.Den, MaxRatioTerm)
		}
	}
	// Index 0 means nothing in either table (a bonus never wins by 0; there is
	// no winning point 0), so a value there is a mistake, not a rule.
	if !p.Pays.BonusMargin[0].IsZero() {
		bad("pays.bonus_margin[0]: a bonus cannot win by 0 points")
	}
	if !p.Pays.WinningNumber[0].IsZero() {
		bad("pays.winning_number[0]: the winning number is 1-9")
	}
	errs = append(errs, p.Limits.validate(p.Bets)...)
	if len(errs) > 0 {
		return fmt.Errorf("%w %q: %s", ErrProfile, clip(p.Name), strings.Join(errs, "; "))
	}
	return nil
}

// validate checks the limits are consistent with each other and the spots.
func (l *Limits) validate(offered []Bet) []string {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	money := func(name string, v int64) {
		if v < 0 || v > MaxStake {
			bad("limits.%s: %d: want 0 to %d minor units", name, v, MaxStake)
		}
	}
	money("min_total", l.MinTotal)
	money("max_total", l.MaxTotal)
	money("max_win", l.MaxWin)
	if l.MaxTotal > 0 && l.MaxTotal < l.MinTotal {
		bad("limits: max_total %d is below min_total %d", l.MaxTotal, l.MinTotal)
	}
	for _, b := range slices.Sorted(maps.Keys(l.PerBet)) { // sorted: a stable message
		v := l.PerBet[b]
		if !knownBet(b) {
			bad("limits.per_bet: unknown bet %q", clip(string(b)))
			continue
		}
		if v <= 0 || v > MaxStake {
			bad("limits.per_bet.%s: %d: want 1 to %d minor units (leave a spot out for no limit)", b, v, MaxStake)
		}
	}
	// A minimum no permitted stake can reach is a table nobody can play.
	var reach int64
	for _, b := range offered {
		v, ok := l.PerBet[b]
		if !ok {
			reach = -1
			break
		}
		reach = satAdd(reach, v)
	}
	if reach >= 0 && reach < l.MinTotal {
		bad("limits: min_total %d is more than all the per-bet limits together (%d)", l.MinTotal, reach)
	}
	seen := make(map[Bet]bool, len(l.RestrictedSideBets))
	for _, b := range l.RestrictedSideBets {
		switch {
		case !knownBet(b):
			bad("limits.restricted_side_bets: unknown bet %q", clip(string(b)))
		case b.IsMain():
			bad("limits.restricted_side_bets: %s is a main bet", b)
		case seen[b]:
			bad("limits.restricted_side_bets: %s listed twice", b)
		}
		seen[b] = true
	}
	if l.SideBetMinMainMultiple < 0 || l.SideBetMinMainMultiple > MaxRatioTerm {
		bad("limits.side_bet_min_main_multiple: %d: want 0 to %d", l.SideBetMinMainMultiple, MaxRatioTerm)
	}
	if !l.SideBetMaxMainShare.valid() {
		bad("limits.side_bet_max_main_share: %d:%d is not a ratio", l.SideBetMaxMainShare.Num, l.SideBetMaxMainShare.Den)
	}
	return errs
}

// satAdd adds non-negative amounts, stopping at the int64 maximum.
func satAdd(a, b int64) int64 {
	s, carry := bits.Add64(uint64(a), uint64(b), 0)
	if carry != 0 || s > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(s)
}

// profileDoc is the config document: a built-in profile by name and the
// parts to change. Absent (or null) fields keep the built-in's value.
type profileDoc struct {
	Profile string     `json:"profile"`
	Name    *string    `json:"name"`
	Decks   *int       `json:"decks"`
	Bets    *[]Bet     `json:"bets"`
	Pays    *paysDoc   `json:"pays"`
	Limits  *limitsDoc `json:"limits"`
}

// paysDoc overrides pay-table entries. In bonus_margin and winning_number,
// keyed "1".."9", null or "0:1" removes an entry (not paid).
type paysDoc struct {
	Player               *Ratio            `json:"player"`
	Banker               *Ratio            `json:"banker"`
	BankerOnSix          *Ratio            `json:"banker_on_six"`
	Tie                  *Ratio            `json:"tie"`
	PlayerPair           *Ratio            `json:"player_pair"`
	BankerPair           *Ratio            `json:"banker_pair"`
	AnyPair              *Ratio            `json:"any_pair"`
	PerfectPairOne       *Ratio            `json:"perfect_pair_one"`
	PerfectPairBoth      *Ratio            `json:"perfect_pair_both"`
	BonusNatural         *Ratio            `json:"bonus_natural"`
	BonusMargin          map[string]*Ratio `json:"bonus_margin"`
	WinningNumber        map[string]*Ratio `json:"winning_number"`
	WinningNumberTiePush *bool             `json:"winning_number_tie_push"`
}

// limitsDoc overrides limits, money in integer minor units. In per_bet, null
// removes a spot's own limit.
type limitsDoc struct {
	MinTotal               *int64         `json:"min_total"`
	MaxTotal               *int64         `json:"max_total"`
	PerBet                 map[Bet]*int64 `json:"per_bet"`
	RestrictedSideBets     *[]Bet         `json:"restricted_side_bets"`
	SideBetMinMainMultiple *int64         `json:"side_bet_min_main_multiple"`
	SideBetMaxMainShare    *Ratio         `json:"side_bet_max_main_share"`
	NoOpposingMain         *bool          `json:"no_opposing_main"`
	MaxWin                 *int64         `json:"max_win"`
}

// ParseProfile reads a profile config: a JSON object naming a built-in
// profile and overriding parts of it, for example
//
//	{"profile": "no-commission", "name": "nc-house",
//	 "pays": {"winning_number": {"1": "8:1", "9": "8:1"}, "winning_number_tie_push": true},
//	 "limits": {"min_total": 500, "per_bet": {"tie": 10000}}}
//
// Keys are the Profile's JSON names; ratios are text ("11:1", "0.95:1");
// money is integer minor units. Lists ("bets", "restricted_side_bets")
// replace the built-in's; maps ("per_bet", "bonus_margin", "winning_number")
// change only the keys given, null removing one. Without "name" the profile
// keeps the built-in's name. The document must be at most MaxProfileConfig
// bytes, use no unknown, duplicate or miscased key, and yield a profile that
// passes Validate.
func ParseProfile(data []byte) (Profile, error) {
	doc, err := decodeProfileDoc(data)
	if err != nil {
		return Profile{}, err
	}
	if doc.Profile == "" {
		return Profile{}, fmt.Errorf("%w: config must name a built-in profile (\"profile\": one of %v)", ErrProfile, ProfileNames())
	}
	p, err := BuiltinProfile(doc.Profile)
	if err != nil {
		return Profile{}, fmt.Errorf("%w: %w", ErrProfile, err)
	}
	return doc.apply(p)
}

// LoadProfile returns built-in profile name with overrides applied. The
// overrides are a ParseProfile document whose "profile" key may be left out
// (or must equal name); empty overrides give the built-in unchanged.
func LoadProfile(name string, overrides []byte) (Profile, error) {
	p, err := BuiltinProfile(name)
	if err != nil {
		return Profile{}, fmt.Errorf("%w: %w", ErrProfile, err)
	}
	if len(bytes.TrimSpace(overrides)) == 0 {
		if err := p.Validate(); err != nil {
			return Profile{}, err
		}
		return p, nil
	}
	doc, err := decodeProfileDoc(overrides)
	if err != nil {
		return Profile{}, err
	}
	if doc.Profile != "" && doc.Profile != name {
		return Profile{}, fmt.Errorf("%w: config is for profile %q but %q was selected", ErrProfile, clip(doc.Profile), name)
	}
	return doc.apply(p)
}

func decodeProfileDoc(data []byte) (profileDoc, error) {
	var doc profileDoc
	if len(data) > MaxProfileConfig {
		return doc, fmt.Errorf("%w: config is %d bytes, more than %d", ErrProfile, len(data), MaxProfileConfig)
	}
	if err := checkKeys(data); err != nil {
		return doc, fmt.Errorf("%w: config: %w", ErrProfile, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return doc, fmt.Errorf("%w: config: %s: %s is not allowed here, want %s", ErrProfile, te.Field, te.Value, wantType(te.Type))
		}
		return doc, fmt.Errorf("%w: config: %w", ErrProfile, err)
	}
	return doc, nil
}

// wantType says in the config's terms what a field holds.
func wantType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[Ratio]():
		return `a ratio string like "11:1" or "0.95:1"`
	case t.Kind() == reflect.Int64:
		return "a whole number of minor units"
	case t.Kind() == reflect.Int:
		return "a whole number"
	case t.Kind() == reflect.Bool:
		return "true or false"
	case t.Kind() == reflect.String:
		return "a string"
	case t.Kind() == reflect.Slice:
		return "a list"
	}
	return "an object"
}

// checkKeys walks the document once before decoding, since encoding/json
// alone would accept what a strict config must not: a key matched in another
// case ("Decks"), a key given twice (the last silently winning), deep
// nesting, a document that is not an object, or data after it.
func checkKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err == io.EOF {
		return errors.New("empty document")
	}
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("config must be a JSON object")
	}
	if err := walkObject(dec, 1); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the config object")
	}
	return nil
}

// nextToken is dec.Token where the end of input is always unexpected.
func nextToken(dec *json.Decoder) (json.Token, error) {
	tok, err := dec.Token()
	if err == io.EOF {
		return nil, io.ErrUnexpectedEOF
	}
	return tok, err
}

// walkObject checks the members of an object whose '{' was just read.
func walkObject(dec *json.Decoder, depth int) error {
	keys := make(map[string]bool)
	for {
		tok, err := nextToken(dec)
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok && d == '}' {
			return nil
		}
		k, _ := tok.(string) // inside an object Token yields only keys here
		if !validKey(k) {
			return fmt.Errorf("key %q: keys are lower-case letters, digits and '_'", clip(k))
		}
		if keys[k] {
			return fmt.Errorf("key %q given twice", clip(k))
		}
		keys[k] = true
		if tok, err = nextToken(dec); err != nil {
			return err
		}
		if err := walkValue(dec, tok, depth); err != nil {
			return err
		}
	}
}

// walkValue checks the value starting with tok.
func walkValue(dec *json.Decoder, tok json.Token, depth int) error {
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar
	}
	if depth >= maxConfigDepth {
		return fmt.Errorf("nested more than %d deep", maxConfigDepth)
	}
	if d == '{' {
		return walkObject(dec, depth+1)
	}
	for { // d == '[': Token never yields a closing delimiter unopened
		tok, err := nextToken(dec)
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok && d == ']' {
			return nil
		}
		if err := walkValue(dec, tok, depth+1); err != nil {
			return err
		}
	}
}

func validKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range []byte(k) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// apply changes p as the document says and validates the result.
func (d *profileDoc) apply(p Profile) (Profile, error) {
	if d.Name != nil {
		p.Name = *d.Name
	}
	if d.Decks != nil {
		p.Decks = *d.Decks
	}
	if d.Bets != nil {
		p.Bets = append([]Bet(nil), (*d.Bets)...)
	}
	if d.Pays != nil {
		if err := d.Pays.apply(&p.Pays); err != nil {
			return Profile{}, fmt.Errorf("%w %q: %w", ErrProfile, clip(p.Name), err)
		}
	}
	if d.Limits != nil {
		d.Limits.apply(&p.Limits)
	}
	if err := p.Validate(); err != nil {
		return Profile{}, err
	}
	return p, nil
}

func (d *paysDoc) apply(t *PayTable) error {
	set := func(dst *Ratio, src *Ratio) {
		if src != nil {
			*dst = *src
		}
	}
	set(&t.Player, d.Player)
	set(&t.Banker, d.Banker)
	set(&t.BankerOnSix, d.BankerOnSix)
	set(&t.Tie, d.Tie)
	set(&t.PlayerPair, d.PlayerPair)
	set(&t.BankerPair, d.BankerPair)
	set(&t.AnyPair, d.AnyPair)
	set(&t.PerfectPairOne, d.PerfectPairOne)
	set(&t.PerfectPairBoth, d.PerfectPairBoth)
	set(&t.BonusNatural, d.BonusNatural)
	if err := applyPoints("bonus_margin", &t.BonusMargin, d.BonusMargin); err != nil {
		return err
	}
	if err := applyPoints("winning_number", &t.WinningNumber, d.WinningNumber); err != nil {
		return err
	}
	if d.WinningNumberTiePush != nil {
		t.WinningNumberTiePush = *d.WinningNumberTiePush
	}
	return nil
}

// applyPoints sets table entries keyed "1".."9"; nil clears one.
func applyPoints(name string, dst *[10]Ratio, src map[string]*Ratio) error {
	for k, r := range src {
		if len(k) != 1 || k[0] < '1' || k[0] > '9' {
			return fmt.Errorf("pays.%s: key %q: want a point 1-9", name, clip(k))
		}
		i := int(k[0] - '0')
		dst[i] = Ratio{}
		if r != nil {
			dst[i] = *r
		}
	}
	return nil
}

func (d *limitsDoc) apply(l *Limits) {
	set := func(dst *int64, src *int64) {
		if src != nil {
			*dst = *src
		}
	}
	set(&l.MinTotal, d.MinTotal)
	set(&l.MaxTotal, d.MaxTotal)
	set(&l.MaxWin, d.MaxWin)
	set(&l.SideBetMinMainMultiple, d.SideBetMinMainMultiple)
	if len(d.PerBet) > 0 {
		per := make(map[Bet]int64, len(l.PerBet)+len(d.PerBet))
		for b, v := range l.PerBet {
			per[b] = v
		}
		for b, v := range d.PerBet {
			if v == nil {
				delete(per, b)
			} else {
				per[b] = *v
			}
		}
		l.PerBet = per
	}
	if d.RestrictedSideBets != nil {
		l.RestrictedSideBets = append([]Bet(nil), (*d.RestrictedSideBets)...)
	}
	if d.SideBetMaxMainShare != nil {
		l.SideBetMaxMainShare = *d.SideBetMaxMainShare
	}
	if d.NoOpposingMain != nil {
		l.NoOpposingMain = *d.NoOpposingMain
	}
}
