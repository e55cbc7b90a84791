package netlimit

// The descriptor budget of a process: what its listeners' clients may
// hold together.

// Reserve is how many descriptors beyond those open at start the process
// keeps out of its clients' reach: for the audit trail's next segments
// (each sealed segment keeps a reader open; a cut-over opens the next
// file's writer and reader), an archive copy, the MQTT connection, the
// self-check's reads and the Go runtime's own.
const Reserve = 512

// MinBudget is the smallest budget made, whatever the limit: below it the
// process could not serve its own screens.
const MinBudget = 64

// ClientBudget is the descriptors clients may hold under a soft limit of
// limit with open already open: the limit less what is open and Reserve,
// at least MinBudget. short reports a limit too low to keep the reserve
// whole (raise LimitNOFILE).
func ClientBudget(limit uint64, open int) (budget int, short bool) {
	limit = min(limit, 1<<30) // RLIM_INFINITY, or near it
	b := int64(limit) - int64(open) - Reserve
	if b < MinBudget {
		return MinBudget, true
	}
	return int(b), false
}
