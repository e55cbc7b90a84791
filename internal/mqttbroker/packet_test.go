package mqttbroker

import "github.com/mochi-mqtt/server/v2/packets"

func connectPacket(id, user, pass string) packets.Packet {
	var pk packets.Packet
	pk.Connect.ClientIdentifier = id
	pk.Connect.Username = []byte(user)
	pk.Connect.Password = []byte(pass)
	return pk
}
