package nodeside

import _ "embed"

// updateScript is the update command's POSIX shell script (os-update.sh).
//
//go:embed os-update.sh
var updateScript string

// UpdateScript returns the update command that lands at UpdateCommand:
// `os-update [--retry] [--stage] IMAGE [VERSION]` switches the node to
// IMAGE (by digest) and reboots into it, printing gardener-node-agent's
// retriable ("network problems", exit 75) or fatal ("invalid arguments",
// exit 64; "system failure", exit 70) messages on failure; --retry
// retries network problems itself; --stage stages IMAGE for the next boot
// without a reboot. One run at a time (a lock).
func UpdateScript() string { return updateScript }
