package mqttbroker

import (
	"strings"
	"sync"
	"sync/atomic"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// retainGuard keeps mochi's retained-message writes apart from a
// subscription's scan of the retained messages, which mochi v2.7.9 (the
// newest) does not: TopicsIndex.RetainMessage sets a topic node's
// retainPath under the index's and the node's locks, while scanMessages,
// run for a wildcard filter when a client subscribes, reads the retainPath
// of each node it walks with neither (topics.go:461 against :554 and
// :573). Upstream issue mochi-mqtt/server#200 reported it in 2023 and is
// closed; the race is still there. A retained publish racing a wildcard
// subscribe is a data race on a string, a torn read of which can crash
// the broker; it failed the controller's test under -race.
//
// A retained write holds mu, from the last OnPublish hook (or OnWill) to
// OnRetainMessage, which mochi calls right after RetainMessage; a
// subscribe read-holds it from its SUBACK's OnPacketSent (the scans follow
// the SUBACK) to its OnPacketProcessed (after the scans), so neither spans
// a network write that a slow client could stall. Two writes already
// exclude each other on the index's lock, so writing under mu costs them
// little more; scans share it.
//
// mochi writes retained messages on two more paths, with no hook before
// them: a will sent after a delay (MQTT 5), and the $SYS topics (every
// SysTopicResendInterval). A retained will is therefore sent at once
// (OnConnect drops its delay), and a wildcard filter under $SYS is not
// answered with retained messages (its subscriber has the values at the
// next $SYS update); no other scan walks the $SYS nodes.
//
// It must be the last hook: a hook after it could refuse a publish it has
// locked for, and mochi would then not call OnRetainMessage.
type retainGuard struct {
	mqtt.HookBase

	mu     sync.RWMutex
	writer atomic.Pointer[mqtt.Client] // the client whose retained write holds mu

	smu      sync.Mutex
	scanning map[*mqtt.Client]bool // clients whose subscribe read-holds mu
}

func newRetainGuard() *retainGuard {
	return &retainGuard{scanning: map[*mqtt.Client]bool{}}
}

func (g *retainGuard) ID() string { return "tablectl-retain-guard" }

func (g *retainGuard) Provides(b byte) bool {
	switch b {
	case mqtt.OnConnect, mqtt.OnPublish, mqtt.OnWill, mqtt.OnRetainMessage,
		mqtt.OnSubscribe, mqtt.OnPacketSent, mqtt.OnPacketProcessed:
		return true
	}
	return false
}

// OnConnect drops the delay of a retained will: mochi retains a delayed
// will from its event loop with no hook before it.
func (g *retainGuard) OnConnect(cl *mqtt.Client, _ packets.Packet) error {
	if cl.Properties.Will.Retain {
		cl.Properties.Will.WillDelayInterval = 0
	}
	return nil
}

// OnPublish locks for a retained message, which mochi writes next (every
// hook before this one let it through, and none comes after).
func (g *retainGuard) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if pk.FixedHeader.Retain {
		g.lock(cl)
	}
	return pk, nil
}

// OnWill locks for a retained will, which mochi writes next (OnConnect
// left it no delay).
func (g *retainGuard) OnWill(cl *mqtt.Client, will mqtt.Will) (mqtt.Will, error) {
	if will.Retain && cl.Properties.Will.WillDelayInterval == 0 {
		g.lock(cl)
	}
	return will, nil
}

func (g *retainGuard) lock(cl *mqtt.Client) {
	g.mu.Lock()
	g.writer.Store(cl)
}

// OnRetainMessage unlocks after the write OnPublish or OnWill locked for;
// a write it did not lock for (there should be none) leaves mu alone.
func (g *retainGuard) OnRetainMessage(cl *mqtt.Client, _ packets.Packet, _ int64) {
	if g.writer.CompareAndSwap(cl, nil) {
		g.mu.Unlock()
	}
}

// OnSubscribe keeps retained messages from wildcard filters under $SYS
// (see the type's comment).
func (g *retainGuard) OnSubscribe(_ *mqtt.Client, pk packets.Packet) packets.Packet {
	for i, f := range pk.Filters {
		if (f.Filter == mqtt.SysPrefix || strings.HasPrefix(f.Filter, mqtt.SysPrefix+"/")) && strings.ContainsAny(f.Filter, "+#") {
			pk.Filters[i].RetainHandling = 2
		}
	}
	return pk
}

// OnPacketSent read-locks once a SUBACK is written: mochi scans the
// retained messages for the subscription next, in this goroutine.
func (g *retainGuard) OnPacketSent(cl *mqtt.Client, pk packets.Packet, _ []byte) {
	if pk.FixedHeader.Type != packets.Suback {
		return
	}
	g.mu.RLock()
	g.smu.Lock()
	g.scanning[cl] = true
	g.smu.Unlock()
}

// OnPacketProcessed read-unlocks after a subscribe's scans.
func (g *retainGuard) OnPacketProcessed(cl *mqtt.Client, pk packets.Packet, _ error) {
	if pk.FixedHeader.Type != packets.Subscribe {
		return
	}
	g.smu.Lock()
	held := g.scanning[cl]
	delete(g.scanning, cl)
	g.smu.Unlock()
	if held {
		g.mu.RUnlock()
	}
}
