// Package fanout measures how fast a server fans one session's events out
// to many stream clients, and what each idle client costs it. It backs
// `conclave bench fanout`.
//
// A run has three parts:
//
//   - The server under test (Server) runs in its own process, so that its
//     CPU time and memory are measured apart from the clients'. It is either
//     Conclave itself (ModeConclave: an actors.Engine behind a
//     transport.Server) or a naive baseline broadcaster (ModeNaive: one
//     goroutine and one buffered channel per client, one write and flush per
//     event). Both publish the same events at a fixed rate into one session
//     and answer a small control endpoint (start, stop, stats, pprof) on a
//     second loopback port.
//   - The clients (in the measuring process) hold N loopback SSE or
//     WebSocket streams, check that every event arrives once and in order,
//     and record each event's latency from the send timestamp written at the
//     start of its payload (Stamp) into a log-linear histogram.
//   - Run ties them together: launch the server, measure it before and
//     after the clients connected (memory per idle subscriber), publish for
//     a duration, drain, and collect a ModeResult per server mode.
//
// The small mechanisms have their own types and tests: Stamp (payload
// timestamps) and Pacer (rate arithmetic). The measuring tools other
// benchmarks use too (the histogram, the SSE scanner and dialer, process
// CPU and RSS, tables) are in internal/benchkit.
package fanout
