// Package shoesim is the shoe simulator: a dealing shoe in software that
// tablectl's tests, its demo and `tablectl shoe-sim` talk to through the real
// serial path.
//
// It works in two layers, so the dealing can be tested without a terminal:
//
//   - Plan is pure. From Options it shuffles a 6- or 8-deck shoe from a
//     seed (Shuffle), deals it as a dealer following the house procedure
//     would (button NEWSHOE; the burn: first card exposed, as many burned as
//     its value, tens and faces count 10; BURNDONE; then each coup:
//     NOMOREBETS, the cards in the order the tableau places them, REVEAL;
//     the cut card a configured number of cards from the end, after which
//     the coup in progress is finished and, by default, one more is dealt),
//     and weaves in the faults asked for. The result is a list of Steps.
//   - Sim runs a Plan over a Line (a pseudo-terminal, a real port, or
//     memory in tests) with a Clock: it numbers the sentences (HELO is 1),
//     encodes them with shoeread.AppendV1 or shoeread.AppendBeetek, keeps
//     the pace, sends a heartbeat whenever the v1 line has been idle for the
//     heartbeat interval (carrying the last number used, as the protocol
//     says, not a new one), and holds its output while unplugged. It records
//     every sentence and every fault, so a test knows exactly what the
//     controller should have seen.
//
// Faults (Fault, ParseFault): line noise, a bad checksum, dropped sentences
// (a sequence gap), an unreadable card, an extra card, a card drawn before
// betting closes, a card the shoe cannot hold, silence, unplugging, a burn
// one card short (BURNDONE pressed early) and a status report.
package shoesim
