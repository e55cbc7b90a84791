package mqttpub

import (
	"testing"

	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/internal/mqttbroker"
	"github.com/tablectl/tablectl/internal/mqtttest"
)

// BenchmarkCommitToSubscriber measures one input from the recorder's
// commit (SQLite, synchronous FULL) through the publisher and the broker to
// a QoS 1 subscriber: ns/op is the time per input with the path full.
func BenchmarkCommitToSubscriber(b *testing.B) {
	for _, name := range []string{"mosquitto", "embedded"} {
		b.Run(name, func(b *testing.B) {
			url := mqtttest.SharedURL
			if name == "mosquitto" {
				url = mqtttest.Shared(b)
			} else {
				br, err := mqttbroker.Start(mqttbroker.Options{TCP: "127.0.0.1:0", Logger: quiet(), Writer: "tablectl", WriterPassword: "pw",
					Anonymous: mqttbroker.Access{Read: []string{"#"}}})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { br.Close() })
				url = br.URL()
			}
			prefix := mqtttest.Prefix(b)
			topics := Topics{Prefix: prefix}
			sub := mqtttest.Subscribe(b, mqtttest.SubOptions{URL: url, Topics: []string{topics.Topic(TopicPitEvents)}})
			r := newRig(b, url, rigOptions{prefix: prefix})
			r.submit(shoeStart()...)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r.submit(coup.Input{Kind: coup.InStatus, Status: "ok"})
			}
			head := r.head()
			sub.Wait(wait, "every row", func(m []mqtttest.Msg) bool { return int64(len(m)) >= head })
			b.StopTimer()
		})
	}
}
