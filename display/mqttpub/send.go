package mqttpub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tablectl/tablectl/base/mqttconn"
	"github.com/tablectl/tablectl/signedcmd"
)

// SendCommand publishes a signed command on the table's cmd topic and waits
// for the reply that echoes id on cmd/reply. conn must subscribe to
// cmd/reply (ConnOptions.Subscribe), so the reply cannot slip past between
// sending and listening.
func SendCommand(ctx context.Context, conn *mqttconn.Conn, topics Topics, payload []byte, id string) (signedcmd.Reply, error) {
	if err := conn.WaitConnected(ctx); err != nil {
		return signedcmd.Reply{}, err
	}
	replies := topics.Topic(TopicCmdReply)
	if r := conn.Refused(); len(r) > 0 {
		// The broker's ACL: this login may not read this table's replies,
		// so it may not command it either.
		return signedcmd.Reply{}, fmt.Errorf("%w: the broker does not let this login read the table's replies on %s (check the table id and the broker's ACL for the login)", ErrNotAllowed, strings.Join(r, ", "))
	}
	losses := conn.Losses()
	// A broker that refuses a publish by its ACL may close the connection
	// instead of acknowledging it (MQTT 3.1.1 has no other way to say so;
	// the embedded broker does). Only a loss before the acknowledgement
	// counts: after it the broker took the command, and the reply can
	// still come once paho reconnects.
	closed := func() error {
		if conn.Losses() > losses {
			return fmt.Errorf("%w: the broker closed the connection instead of taking the command to %s (check the table id and the broker's ACL for the login)", ErrNotAllowed, topics.Topic(TopicCmd))
		}
		return nil
	}
	check := time.NewTicker(50 * time.Millisecond)
	defer check.Stop()
	tok := conn.Publish(topics.Topic(TopicCmd), 1, false, payload)
acked:
	for {
		select {
		case <-ctx.Done():
			return signedcmd.Reply{}, fmt.Errorf("no reply to command %s: the broker did not even acknowledge it: %w", id, ctx.Err())
		case <-check.C:
			if err := closed(); err != nil {
				return signedcmd.Reply{}, err
			}
		case <-tok.Done():
			if err := tok.Error(); err != nil {
				return signedcmd.Reply{}, fmt.Errorf("send command: %w", err)
			}
			break acked
		}
	}
	for {
		select {
		case <-ctx.Done():
			// MQTT 3.1.1 brokers (Mosquitto) drop a publish their ACL
			// refuses without a word: say so.
			return signedcmd.Reply{}, fmt.Errorf("no reply to command %s (the table is down, or the broker's ACL does not let this login command %s or read its replies: check the table id): %w", id, topics.Topic(TopicCmd), ctx.Err())
		case m := <-conn.Messages():
			if m.Topic != replies {
				continue
			}
			var r signedcmd.Reply
			if json.Unmarshal(m.Payload, &r) != nil || r.ID != id {
				continue
			}
			return r, nil
		}
	}
}

// ErrNotAllowed: the broker did not let the login send the command or read
// its reply (its ACL); the table never saw it.
var ErrNotAllowed = errors.New("not allowed by the broker")
