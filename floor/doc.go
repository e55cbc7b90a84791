// Package floor is the casino floor's side of every table: the witness
// that keeps, off the table boxes, what each table published.
//
// Tables publish each audit row on pit/events and each signed checkpoint
// on pit/checkpoint (docs/mqtt.md). Each table's Mosquitto bridges them to
// the floor's NATS cluster (its MQTT listener), where a JetStream stream
// keeps them replicated until witnesses have them (docs/floor.md). A
// witness (tablectl-floor witness; run two or more, they share one durable
// consumer) takes them in batches and, per table, under a lock held in
// PostgreSQL so that witnesses never interleave on one table:
//
//   - drops, before judging, messages too big, on no table's subject or
//     of a table not in the registry (counted, alerted once an interval);
//   - holds each row pending until something the table signed covers it
//     (a checkpoint verified with the table's registered keys, whose head
//     hash chains back to it): only the table's signed word becomes its
//     witnessed copy; what no key of it signed is quarantined and counted,
//     never a tamper alert (judge.go);
//   - checks each covered row links to its neighbours already witnessed;
//   - keeps every row exactly once (the table and seq are the key; a
//     second copy with the same hash is a redelivery, with another hash a
//     fork, kept aside);
//   - checks every signed checkpoint against the rows and the checkpoints
//     already witnessed (a different head at a seq: conflict; a lower seq
//     signed later: backwards);
//   - raises floor alerts, in the database and on the floor's broker
//     (floor/alerts), for each of those and for a table silent past its
//     heartbeat, and for a gap, for which it asks the table to resync over
//     the signed command path.
//
// Nothing is acknowledged to JetStream before it is committed in the
// store, so a witness killed at any moment loses nothing: what it had
// not committed is delivered again, to it or another witness.
package floor
