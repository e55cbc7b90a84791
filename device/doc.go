// Package device owns the shoe's serial port, the way gpsd owns a GPS: it
// opens the port by path or by USB id with the configured line settings,
// hands every byte read to the protocol driver, says whether the shoe is
// connected, disconnected or silent, and reopens the port with capped
// exponential backoff, forever, when it vanishes.
//
// A Link's policies:
//
//   - Reading. go.bug.st/serial returns (0, nil) when a read times out, which
//     is not end of file: the reader polls with a short read timeout only so
//     it can stop without the port being closed under it. A read error ends
//     the session; on Linux an unplugged adapter, or a pseudo-terminal whose
//     master closed, reads as a hang-up (ErrHangup): a zero-length read or EIO.
//   - Delivery. Bytes go from the reader to the consumer through a bounded
//     queue of chunks; the chunks that queued while the consumer was busy
//     reach it in one call. When the queue is full the reader waits; nothing is
//     dropped here, so the bytes back up in the kernel's tty buffer, which
//     drops them if the consumer stays behind long enough. If the wait
//     lasts StallAfter, the Link logs a warning and counts a stall; it
//     resumes when the consumer catches up, and never waits past the end of
//     Run. The consumer is the protocol driver, which never blocks, so a
//     stall means the controller itself is wedged.
//   - Silence. An open port that delivers no byte for Config.SilentAfter is
//     Silent; the next byte makes it Connected again. Silence is judged on
//     bytes, not sentences: the driver above decides what a heartbeat is.
//   - Backoff. The first attempt is immediate; after a failure the wait
//     starts at BackoffMin and doubles up to BackoffMax. A session that
//     delivered at least one byte resets it, so a replugged shoe is back
//     within BackoffMin; a port that opens but never speaks keeps backing
//     off.
//
// Callbacks (OnData, OnState) are called from Run's goroutine, one at a
// time, in the order things happened, and never after Run returns.
package device
