// Package soak runs many small runs through one `conclave serve --data`
// process while SSE clients come and go, and watches whether the server's
// memory and goroutines stay flat. It backs `conclave bench soak` (issue
// 11: after warm-up, RSS and goroutines stay within 10 %).
//
// A soak has four parts, each on its own goroutines:
//
//   - The server under test runs in a child process (Exec starts the
//     `serve` command of a conclave binary on a fresh data directory), so
//     that its RSS, goroutines and CPU time are its own.
//   - The driver keeps Options.InFlight runs in flight over HTTP
//     (POST /api/v1/runs, then GET /api/v1/runs/{id} until the run ended)
//     until Options.Runs have ended, and tallies answers and outcomes.
//   - Options.Clients SSE clients come and go: each follows the session of
//     a recent run from seq 1 or from a Last-Event-ID, reads some events or
//     up to that run's terminal event, leaves, pauses and comes back. Every
//     stream is checked to be gapless (streamCheck).
//   - The sampler reads the server's VmRSS and its /metrics (goroutines,
//     hubs, live runs…) every Options.Sample, and once more at the end of
//     the warm-up; after the driver stopped it keeps sampling until the
//     session hubs have gone idle.
//
// Summarize turns the samples into the figures the bound is judged on
// (Growth), and WriteReport prints a Result. The exit status of the
// command does not depend on the bound: a soak is a measurement.
package soak
