// Package benchkit holds the measuring tools the benchmarks of
// `conclave bench` share: a log-linear latency Histogram, an SSE frame
// scanner and a raw SSE dialer (a client with little overhead, so that the
// cores go to the server under test), the CPU time and resident memory of
// any process (Linux), and plain-text tables.
package benchkit
