// Package channel serves the worker's long-lived terminal channels: the
// login terminal (loginPty*: an agent CLI's login on a real terminal in the
// sandbox, loginpty.go) and the duplex byte channel (duplexChannel*: a
// program's stdin and stdout over a raw terminal, duplex.go), on the shared
// machinery of channel.go (the terminal under a channel, its ordered
// writer, the end of a channel) and outbox.go. It knows leases only through
// the resolver provider gives it; provider keeps the lease lifecycle and
// ends a lease's channels on teardown, cmd/daytona-worker ends them all on
// shutdown.
package channel
