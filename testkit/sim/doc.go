// Package sim is Conclave's deterministic simulator: one seed drives a whole
// system — the engine on the durable journal, over an in-memory disk that
// crashes and fails, with models, tools and stream clients — under
// testing/synctest virtual time, and every invariant is checked at the end.
// The same seed gives the same journal, byte for byte.
//
// How a seed becomes one history:
//
//   - Every actor of the engine runs on one goroutine (Dispatcher,
//     actors.Config.Dispatcher), in the order its messages were scheduled.
//   - Models and tools wait at gates (Scheduler) named by what they are (a
//     run, an agent, a turn, a chunk, a call), never by when they got
//     there. The driver waits until the system is quiet (synctest.Wait),
//     then lets one gate go, answers an interrupt, or moves a client, as
//     the seed says; so only one chain of messages runs at a time.
//   - Ids come from a generator seeded by the seed; timestamps from the
//     bubble's virtual clock, which moves only between steps.
//   - Crashes are pebble's in-memory filesystem cloned as a kill -9 (all
//     written data kept) or a power cut (only what was fsynced, and a torn
//     part of the log's tail) would leave it, then a new engine on it.
//     Scenario.DamageWAL and DamageHWM add disk damage to the first one
//     (a cut write-ahead log; the high-water mark file deleted, or a bit of
//     it flipped after a graceful stop with every write-ahead log gone):
//     the restart must refuse, and the repaired journal's head must not be
//     below what was acknowledged before. Scenario.CommitCrashes cut the
//     power inside a group commit instead: the next write-ahead log fsync
//     is held, and the crash keeps only what was synced before it, so the
//     whole group is lost, whatever the scheduler put in it.
//   - Stream clients (client.go) follow the session from cursors. Some
//     subscribe on the engine; Scenario.HTTPClients of them go through
//     the real transport server instead (front.go, httpclient.go): a
//     transport.Server on the current engine serves an in-memory
//     listener whose connections are net.Pipe ends (pipe.go), and the
//     clients read the SSE stream (parsing its frames, resuming with
//     Last-Event-ID or ?after=) or the WebSocket stream (gorilla's
//     client, resuming with ?after=). The driver connects and
//     disconnects them at its steps, as the direct ones; a crash drops
//     their connections before the disk is cloned, as a dead process
//     would. What they receive is checked as the direct clients'
//     streams are, and each frame's id and event against its envelope.
//   - Cluster mode (Scenario.Nodes > 1, cluster.go): several engines,
//     each with its own dispatcher and gates tagged with its name, share
//     one journal in memory with journal.JetStream's fencing (fenced.go;
//     it passes the journal conformance suite), and an ownership table
//     stands for cluster.Node's buckets. The driver talks to the
//     session's owner; a client connects to any node, which serves its
//     stream from the shared journal (cluster.Followers), so only the
//     streams on a node that is replaced drop. A crash kills the owner,
//     another node takes the session over (fence, then
//     actors.Engine.Adopt), and the dead node rejoins owning nothing; a
//     pause (Scenario.Pauses) holds the owner's actors while one of its
//     streams goes on, lets another node take the session over, then
//     resumes it: its appends must be refused, and it rejoins as a new
//     member. The shared journal records who wrote each session, and no
//     node may append after another took it over.
//
// Generate draws a Scenario (runs and their features, clients, crashes,
// crashes inside a group commit, disk faults, aborts, steering, rewinds, stalls, retention, model and tool
// faults) from a seed; Run simulates it and returns a Result whose Failures
// list the invariants that did not hold; Shrink makes a failing scenario
// smaller while it still fails. `conclave sim` runs many seeds in parallel;
// `go test ./testkit/sim -run 'TestSim$' -seed N` reproduces one.
//
// Your own models and tools join a simulation through Options (Model or
// Models, and Tools, as in conclave.Options; they are wrapped by WrapModel
// and WrapTool, which put them behind gates and inject ModelFaults and
// ToolFaults); they must be deterministic for the same request, as the
// scripted model is. Options.Check adds an invariant of your own (every
// run finishes, an answer cites its sources, …): a simulation that breaks
// it fails, so its seed reproduces the failure and Shrink shrinks it.
package sim
