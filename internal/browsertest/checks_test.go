package browsertest

import "testing"

func TestColour(t *testing.T) {
	for css, want := range map[string]string{
		"rgb(200, 30, 40)":       "red",
		"rgba(20, 60, 200, 0.5)": "blue",
		"rgb(20, 160, 60)":       "green",
		"rgb(230, 180, 40)":      "gold",
		"rgb(10, 10, 10)":        "black",
		"rgb(250, 250, 250)":     "white",
		"rgb(128, 128, 128)":     "grey",
		"transparent":            "unknown(transparent)",
	} {
		if got := Colour(css); got != want {
			t.Errorf("Colour(%q) = %s, want %s", css, got, want)
		}
	}
}
