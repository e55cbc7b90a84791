package mqttpub

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/coup"
)

// TestStatusDealer: the status names the dealer on duty (as public/coup
// does), for the floor view, and nothing once the dealer signs out.
func TestStatusDealer(t *testing.T) {
	in := func(id, action, dealer string) coup.Input {
		return coup.Input{Kind: coup.InCmd, Command: &coup.Command{ID: id, Action: action, By: "alice", Dealer: dealer}}
	}
	for _, tc := range []struct {
		name string
		ins  []coup.Input
		want string
	}{
		{"none signed in", shoeStart(), ""},
		{"signed in", append(shoeStart(), in("d1", coup.ActionDealerIn, "D-1042")), "D-1042"},
		{"relieved", append(shoeStart(), in("d1", coup.ActionDealerIn, "D-1042"), in("d2", coup.ActionDealerIn, "D-7")), "D-7"},
		{"signed out", append(shoeStart(), in("d1", coup.ActionDealerIn, "D-1042"), in("d2", coup.ActionDealerOut, "")), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := newEngine(Topics{Prefix: "p"}, tableID, "v1", "online", vipConfig(t), quiet())
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range trailOf(t, tc.ins) {
				e.apply(r)
			}
			for _, m := range e.retainedMessages(true) {
				if strings.TrimPrefix(m.Topic, "p/") != TopicStatus {
					continue
				}
				var st Status
				if err := json.Unmarshal(m.Payload, &st); err != nil || st.Dealer != tc.want {
					t.Errorf("status %s: dealer %q, want %q (%v)", m.Payload, st.Dealer, tc.want, err)
				}
				return
			}
			t.Error("no status")
		})
	}
}
