package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/internal/mqtttest"
)

// TestMain lets this test binary serve as the bench's subscriber process.
func TestMain(m *testing.M) {
	ServeSubscriber()
	os.Exit(m.Run())
}

func TestFrameRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 28, 10, 0, 0, 123456789, time.UTC)
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	frames := []struct {
		topic   string
		payload []byte
	}{{subReady, nil}, {"t/pit/events", []byte(`{"seq":1}`)}, {"t/floor", []byte{}}, {"t/x", bytes.Repeat([]byte{0, 1, 2}, 1000)}}
	for _, f := range frames {
		if err := writeFrame(w, f.topic, at, f.payload); err != nil {
			t.Fatal(err)
		}
	}
	r := bufio.NewReader(&buf)
	for _, f := range frames {
		topic, got, payload, err := readFrame(r)
		if err != nil {
			t.Fatal(err)
		}
		if topic != f.topic || !got.Equal(at) || !bytes.Equal(payload, f.payload) {
			t.Errorf("read %q %s %d bytes, wrote %q %s %d bytes", topic, got, len(payload), f.topic, at, len(f.payload))
		}
	}
	if _, _, _, err := readFrame(r); !errors.Is(err, io.EOF) {
		t.Errorf("after the last frame: %v, want EOF", err)
	}
}

// TestFrameBad: a frame cut short or claiming more than maxFrame is an
// error, not a hang or a huge allocation.
func TestFrameBad(t *testing.T) {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := writeFrame(w, "topic", time.Now(), []byte("payload")); err != nil {
		t.Fatal(err)
	}
	whole := buf.Bytes()
	for n := 1; n < len(whole); n++ {
		if _, _, _, err := readFrame(bufio.NewReader(bytes.NewReader(whole[:n]))); err == nil {
			t.Errorf("a frame cut to %d of %d bytes read without error", n, len(whole))
		}
	}
	huge := append([]byte(nil), whole[:frameHead]...)
	huge[12], huge[13] = 0x7f, 0xff // payload length far over maxFrame
	if _, _, _, err := readFrame(bufio.NewReader(bytes.NewReader(huge))); err == nil || !strings.Contains(err.Error(), "a frame of") {
		t.Errorf("an oversized frame: %v", err)
	}
}

func TestRowFields(t *testing.T) {
	var f rowFields
	f.Seq, f.Kind, f.Body.ShoeSeq, f.Body.Link = 4321, "in.link", 17, "connected"
	got, err := parseRowFields(appendRowFields(nil, f))
	if err != nil || got != f {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, f)
	}
	for _, bad := range []string{"", "1\x002\x00in.card", "x\x002\x00in.card\x00", "1\x00-2\x00in.card\x00", "1\x0099999999999\x00in.card\x00"} {
		if _, err := parseRowFields([]byte(bad)); err == nil {
			t.Errorf("parseRowFields(%q) gave no error", bad)
		}
	}
}

// TestSubscriberProcess starts a subscriber process on the shared
// Mosquitto, publishes a row and a payload that is not one, and finds the
// row's fields, stamped between the publish and their arrival, and nothing
// for the other.
func TestSubscriberProcess(t *testing.T) {
	url := mqtttest.Shared(t)
	prefix := mqtttest.Prefix(t)
	type got struct {
		topic string
		at    time.Time
		f     rowFields
	}
	ch := make(chan got, 4)
	p, err := startSubscriber(context.Background(), subSpec{Broker: url, ClientID: mqtttest.ClientID(t, "bench-sub"), Filters: map[string]byte{prefix + "/pit/events": 1}, Rows: true},
		func(topic string, at time.Time, b []byte) error {
			f, err := parseRowFields(b)
			if err != nil {
				t.Errorf("fields %q: %v", b, err)
			}
			ch <- got{topic, at, f}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	before := time.Now()
	mqtttest.Publish(t, url, "", "", prefix+"/pit/events", 1, []byte("not a row"))
	mqtttest.Publish(t, url, "", "", prefix+"/pit/events", 1, []byte(`{"seq":9,"kind":"in.card","body":{"shoe_seq":31,"card":"KH"}}`))
	select {
	case g := <-ch:
		after := time.Now()
		if g.topic != prefix+"/pit/events" || g.f.Seq != 9 || g.f.Kind != "in.card" || g.f.Body.ShoeSeq != 31 {
			t.Errorf("got %q %+v", g.topic, g.f)
		}
		if g.at.Before(before.Add(-time.Millisecond)) || g.at.After(after) {
			t.Errorf("stamped %s, outside %s..%s", g.at, before, after)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no row from the subscriber process in 10s")
	}
	// A second message, had one come, comes before the next row sent.
	mqtttest.Publish(t, url, "", "", prefix+"/pit/events", 1, []byte(`{"seq":10,"kind":"in.card","body":{"shoe_seq":32,"card":"QH"}}`))
	select {
	case g := <-ch:
		if g.f.Seq != 10 {
			t.Errorf("a second message: %+v", g)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no second row from the subscriber process in 10s")
	}
}

// TestSubscriberProcessRefused: a broker that is not there is an error
// that says so, not a hang.
func TestSubscriberProcessRefused(t *testing.T) {
	_, err := startSubscriber(context.Background(), subSpec{Broker: "tcp://127.0.0.1:1", ClientID: "bench-sub-refused", Filters: map[string]byte{"x": 1}}, func(string, time.Time, []byte) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "connect to tcp://127.0.0.1:1") {
		t.Fatalf("err = %v, want the connect failure", err)
	}
}

// TestSubscriberProcessHandleError: an error from the handler ends the
// frames, and the bench's waits see it at once (done, err), not a timeout.
func TestSubscriberProcessHandleError(t *testing.T) {
	url := mqtttest.Shared(t)
	prefix := mqtttest.Prefix(t)
	bad := errors.New("not what the bench sent")
	p, err := startSubscriber(context.Background(), subSpec{Broker: url, ClientID: mqtttest.ClientID(t, "bench-sub"), Filters: map[string]byte{prefix + "/x": 1}},
		func(string, time.Time, []byte) error { return bad })
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	mqtttest.Publish(t, url, "", "", prefix+"/x", 1, []byte("m"))
	select {
	case <-p.done:
		if !errors.Is(p.err, bad) {
			t.Fatalf("ended with %v, want the handler's error", p.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the frames did not end in 10s")
	}
}

// TestSubscriberProcessLost: a subscriber whose broker goes away ends, and
// the bench's waits see why at once (done, err), not at their timeout.
func TestSubscriberProcessLost(t *testing.T) {
	m := mqtttest.StartMosquitto(t, "allow_anonymous true")
	p, err := startSubscriber(context.Background(), subSpec{Broker: m.URL, ClientID: mqtttest.ClientID(t, "bench-sub"), Filters: map[string]byte{"x": 1}},
		func(string, time.Time, []byte) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	m.Stop()
	select {
	case <-p.done:
		if p.err == nil || !strings.Contains(p.err.Error(), "the connection to "+m.URL+" was lost") {
			t.Fatalf("ended with %v, want the lost connection named", p.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the subscriber process did not end in 10s after its broker went")
	}
}
