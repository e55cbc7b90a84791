package coup

import "math/bits"

// The shuffle check sums logarithms of likelihood ratios. It does so in
// integers: a trail recorded on an arm64 box must replay bit for bit on an
// amd64 one, and Go may fuse floating-point operations differently on
// each (the spec allows it), so a float sum could cross a threshold one
// card apart. Logarithms are base 2 in units of 1/65536 bit.

// logOne is one bit in the units of log2Floor.
const logOne = 1 << 16

// log2Mant[i] is log2(1 + i/4096) in units of 1/65536 bit, rounded down,
// computed by repeated squaring in integers so every machine gets the same
// table. (A variable's initializer, not init: the thresholds computed
// from it are variables too, and Go initializes variables before any
// init function runs.)
var log2Mant = mantissaLogs()

func mantissaLogs() (t [4096]uint16) {
	for i := range t {
		y := uint64(4096+i) << 50 // 1 + i/4096 with 62 bits after the point
		var r uint32
		for range 18 {
			hi, lo := bits.Mul64(y, y)
			y = hi<<2 | lo>>62 // the square, still with 62 bits after the point
			r <<= 1
			if y >= 1<<63 { // the square is 2 or more: the next bit is 1
				y >>= 1
				r |= 1
			}
		}
		t[i] = uint16(r >> 2) // 18 bits computed, 16 kept: the error stays below one unit
	}
	return t
}

// log2Floor is log2(n) in units of 1/65536 bit, never above the true
// value and less than log2Slack below it. n must not be 0.
func log2Floor(n uint64) int64 {
	e := bits.Len64(n) - 1
	var m uint64
	if e >= 12 {
		m = n >> (e - 12)
	} else {
		m = n << (12 - e)
	}
	return int64(e)<<16 + int64(log2Mant[m&4095])
}

// log2Slack bounds how far log2Floor may fall below the true value: the
// mantissa cut to 12 bits (log2(1 + 1/4096) is 23.07 units) and the
// table's rounding (under one unit).
const log2Slack = 25

// log2Ceil is log2(n) in the same units, never below the true value.
func log2Ceil(n uint64) int64 { return log2Floor(n) + log2Slack }

// log2Ratio is log2(num/den), never above the true value: a statistic
// built from it is never larger than the exact one, so the false-alarm
// bounds computed for the exact statistic hold for it.
func log2Ratio(num, den uint64) int64 { return log2Floor(num) - log2Ceil(den) }
