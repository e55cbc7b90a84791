package browsertest

import (
	"fmt"
	"regexp"
	"strconv"
)

// Visible is JavaScript that is true when the element with id is on
// screen: present, not hidden, displayed and of some size.
func Visible(id string) string {
	return fmt.Sprintf(`(() => { const e = document.getElementById(%q); if (!e || e.hidden) return false;
		const r = e.getBoundingClientRect(); return getComputedStyle(e).display !== 'none' && r.width > 0 && r.height > 0; })()`, id)
}

var rgb = regexp.MustCompile(`rgba?\((\d+), (\d+), (\d+)`)

// Colour names a computed CSS colour as a viewer would: red, blue, green,
// gold, black, white or grey (unknown(css) when it is not rgb at all).
func Colour(css string) string {
	m := rgb.FindStringSubmatch(css)
	if m == nil {
		return "unknown(" + css + ")"
	}
	r, _ := strconv.Atoi(m[1])
	g, _ := strconv.Atoi(m[2])
	b, _ := strconv.Atoi(m[3])
	switch {
	case r > 150 && g < 90 && b < 90:
		return "red"
	case b > 150 && r < 90 && g < 150:
		return "blue"
	case g > 120 && r < 90 && b < 130:
		return "green"
	case r > 200 && g > 140 && b < 100:
		return "gold"
	case r < 70 && g < 70 && b < 70:
		return "black"
	case r > 230 && g > 230 && b > 230:
		return "white"
	}
	return "grey"
}
