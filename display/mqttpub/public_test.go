package mqttpub

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/coup"
)

// anonymousTopic reports whether a topic (without the prefix) is one a
// display reads without a login: status and public/# (docs/mqtt.md; the
// embedded broker's and deploy/mosquitto/acl's display access).
func anonymousTopic(topic string) bool {
	return topic == TopicStatus || strings.HasPrefix(topic, "public/")
}

// faceDown lists what in a payload gives away a card not yet revealed: a
// card marked hidden that names its card, or a result or outcomes while a
// card is still hidden. It walks the whole document, so a face-down card
// in any field of any topic is found.
func faceDown(payload []byte) []string {
	var doc any
	if err := json.Unmarshal(payload, &doc); err != nil {
		return []string{"not JSON: " + err.Error()}
	}
	var found []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if h, _ := v["hidden"].(bool); h {
				if c, ok := v["card"]; ok {
					found = append(found, fmt.Sprintf("%s: hidden card %v", path, c))
				}
			}
			if hidden(v["player"]) || hidden(v["banker"]) {
				// The points count the cards shown, so they may stand.
				for _, k := range []string{"result", "outcomes"} {
					if x, ok := v[k]; ok && x != nil {
						found = append(found, fmt.Sprintf("%s.%s while a card is face down", path, k))
					}
				}
			}
			for k, x := range v {
				walk(path+"."+k, x)
			}
		case []any:
			for i, x := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), x)
			}
		}
	}
	walk("", doc)
	return found
}

// hidden reports whether a list of view cards holds one face down.
func hidden(v any) bool {
	cards, _ := v.([]any)
	for _, c := range cards {
		if m, ok := c.(map[string]any); ok && m["hidden"] == true {
			return true
		}
	}
	return false
}

// TestPublicTopicsShowNoFaceDownCard runs the standard scenario (a coup
// dealt face down, then revealed by the button) a commit at a time and
// checks every message of every topic a display reads without a login: none
// gives away a face-down card. The same check on pit/coup at the same
// moments must find the cards (so the scenario has face-down cards to leak
// and the check sees them), and the golden files are checked too.
func TestPublicTopicsShowNoFaceDownCard(t *testing.T) {
	rows := scenarioTrail(t)
	e, err := newEngine(Topics{Prefix: "p"}, tableID, "v1", "online", vipConfig(t), quiet())
	if err != nil {
		t.Fatal(err)
	}
	public, pitFaceDown := 0, 0
	check := func(seq int64, topic string, payload []byte) {
		if !anonymousTopic(topic) {
			if topic == TopicPitCoup && len(faceDown(payload)) > 0 {
				pitFaceDown++
			}
			return
		}
		public++
		if leaks := faceDown(payload); len(leaks) > 0 {
			t.Errorf("row %d: %s gives away a face-down card: %v\n%s", seq, topic, leaks, payload)
		}
	}
	for i, r := range rows {
		e.apply(r)
		for _, m := range e.rowMessages(r) {
			check(r.Seq, strings.TrimPrefix(m.Topic, "p/"), m.Payload)
		}
		if i+1 == len(rows) || coup.IsInput(rows[i+1].Kind) || strings.HasPrefix(rows[i+1].Kind, "ctl.") {
			for _, m := range e.retainedMessages(false) {
				check(r.Seq, strings.TrimPrefix(m.Topic, "p/"), m.Payload)
			}
		}
	}
	if public == 0 || pitFaceDown == 0 {
		t.Fatalf("%d public messages, %d pit/coup messages with a face-down card: the scenario must deal face down", public, pitFaceDown)
	}
	t.Logf("%d public messages checked; pit/coup held a face-down card %d times", public, pitFaceDown)

	goldens, err := filepath.Glob(filepath.Join("testdata", "scenario", "*.json"))
	if err != nil || len(goldens) == 0 {
		t.Fatalf("golden files: %v %v", goldens, err)
	}
	for _, g := range goldens {
		topic := strings.Replace(strings.TrimSuffix(filepath.Base(g), ".json"), "-", "/", 1)
		if !anonymousTopic(topic) {
			continue
		}
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		if leaks := faceDown(b); len(leaks) > 0 {
			t.Errorf("%s gives away a face-down card: %v", g, leaks)
		}
	}
}

// TestFaceDownFinds: the check finds a face-down card however a payload
// carries it.
func TestFaceDownFinds(t *testing.T) {
	for _, tt := range []struct {
		payload string
		leaks   bool
	}{
		{`{"player":[{"hidden":true},{"card":"2H"}],"banker":[]}`, false},
		{`{"player":[{"hidden":true,"card":"KH"}],"banker":[]}`, true},
		{`{"deep":{"x":[{"hidden":true,"card":"KH"}]}}`, true},
		{`{"player":[{"hidden":true}],"banker":[],"result":{"winner":"banker"}}`, true},
		{`{"player":[{"hidden":true}],"banker":[],"outcomes":{"banker":{"outcome":"win"}}}`, true},
		{`{"player":[{"hidden":true},{"card":"7C"}],"banker":[],"player_point":7}`, false},
		{`{"player":[{"card":"KH"}],"banker":[{"card":"2C"}],"result":{"winner":"banker"},"banker_point":2}`, false},
	} {
		if got := len(faceDown([]byte(tt.payload))) > 0; got != tt.leaks {
			t.Errorf("%s: leak found %v, want %v", tt.payload, got, tt.leaks)
		}
	}
}
