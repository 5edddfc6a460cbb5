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
//     event). It answers a small control endpoint (start, stop, stats,
//     pprof) on a second loopback port.
//   - The workload produces the session's events once started. With
//     WorkloadSynthetic (both modes) a publisher injects stamped text events
//     at a fixed rate. With WorkloadCouncil (Conclave only) one real council
//     run produces them (the scripted model with token delays, waves and
//     sub-agents: CouncilConfig), at whatever rate it does; councilRun
//     follows it through the engine's run index, adding no subscriber.
//   - The clients (in the measuring process) hold N loopback SSE or
//     WebSocket streams, check that every event arrives once and in order,
//     and record each event's latency into a log-linear histogram: from the
//     send timestamp written at the start of a synthetic event's payload
//     (Stamp), or from a council event's envelope timestamp (FindTimestamp);
//     either is found by a byte scan, without decoding the JSON.
//   - Run ties them together: launch the server, measure it before and
//     after the clients connected (memory per idle subscriber), publish for
//     a duration (or run the council to its terminal event), drain, and
//     collect a ModeResult per server mode.
//
// The small mechanisms have their own types and tests: Stamp (payload
// timestamps), FindTimestamp (envelope timestamps), Pacer (rate
// arithmetic), CouncilConfig and councilRun (the council workload). The
// measuring tools other benchmarks use too (the histogram, the SSE scanner
// and dialer, process CPU and RSS, tables) are in internal/benchkit.
package fanout
