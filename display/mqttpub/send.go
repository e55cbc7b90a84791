package mqttpub

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tablectl/tablectl/command"
)

// SendCommand publishes a signed command on the table's cmd topic and waits
// for the reply that echoes id on cmd/reply. conn must subscribe to
// cmd/reply (ConnOptions.Subscribe), so the reply cannot slip past between
// sending and listening.
func SendCommand(ctx context.Context, conn *Conn, topics Topics, payload []byte, id string) (command.Reply, error) {
	if err := conn.WaitConnected(ctx); err != nil {
		return command.Reply{}, err
	}
	tok := conn.Publish(topics.Topic(TopicCmd), 1, false, payload)
	select {
	case <-ctx.Done():
		return command.Reply{}, fmt.Errorf("no reply to command %s: the broker did not even acknowledge it: %w", id, ctx.Err())
	case <-tok.Done():
		if err := tok.Error(); err != nil {
			return command.Reply{}, fmt.Errorf("send command: %w", err)
		}
	}
	replies := topics.Topic(TopicCmdReply)
	for {
		select {
		case <-ctx.Done():
			return command.Reply{}, fmt.Errorf("no reply to command %s: %w", id, ctx.Err())
		case m := <-conn.Messages():
			if m.Topic != replies {
				continue
			}
			var r command.Reply
			if json.Unmarshal(m.Payload, &r) != nil || r.ID != id {
				continue
			}
			return r, nil
		}
	}
}
