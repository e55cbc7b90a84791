package mqttpub

import (
	"strings"
	"testing"

	"github.com/tablectl/tablectl/internal/mqtttest"
)

// debugSettled logs what keeps a subscriber from having settled.
func debugSettled(t *testing.T, topics Topics, head int64, stream string, msgs []mqtttest.Msg) {
	got := seqs(t, topics, msgs)
	t.Logf("seqs %d/%d", len(got), head)
	for _, topic := range retainedTopics {
		m, ok := mqtttest.Last(msgs, topics.Topic(topic))
		if !ok {
			t.Logf("no %s", topic)
			continue
		}
		if string(indent(t, m.Payload)) != readGolden(t, strings.ReplaceAll(topic, "/", "-")+".json") {
			t.Logf("%s differs: %s", topic, m.Payload)
		}
	}
	if s := streamLines(topics, msgs); s != stream {
		t.Logf("stream:\n%s", s)
	}
}
