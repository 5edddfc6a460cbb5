package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/tool"
)

// dataDir is the journal's directory in the simulated filesystem.
const dataDir = "/data"

// session is the one session every run of a simulation joins: one hub,
// one seq space, one journal key to compare.
const session messages.SessionID = "sim"

// journalKey is session's key in the journal.
var journalKey = actors.JournalKey(messages.LocalTenant, session)

// world is one simulated server and its disk: the journal on an in-memory
// filesystem that can lose its unsynced tail (a crash) or fail an fsync,
// the engine on a Dispatcher, and the models and tools on a Scheduler.
// A crash replaces everything but the disk (and the scheduler, whose gates
// the old engine's shutdown cancelled).
type world struct {
	sc    Scenario
	opts  Options
	log   *slog.Logger
	sched *Scheduler
	ids   *idSource
	// markerIDs are the replay markers' ids (actors.Config.MarkerID).
	markerIDs *idSource

	mem  *vfs.MemFS
	hang *hangFS // the current journal's view of mem: holds a fsync for CommitCrashes
	// commitCrashes counts crashes inside a group commit: each starts the
	// ids over (idSource.reseed).
	commitCrashes int
	// diskRestarts counts the restarts after a failed disk (DiskFaults):
	// each starts the ids over too, at the next boot (reseedAtBoot).
	diskRestarts int
	reseedAtBoot bool
	faults       *journalFaults // of the current journal: a failed append
	// j is the journal: the durable one of the server, or in cluster mode
	// the driver's handle on the nodes' shared one.
	j    simJournal
	disp *Dispatcher
	e    *actors.Engine
	// cl is the cluster in cluster mode (Scenario.Nodes > 1): several
	// engines on one shared journal; e, disp and front are then those of
	// the node that owns the session (where the driver and the clients
	// send their requests, as the cluster forwards them).
	cl *simCluster
	// front serves e over HTTP to the SSE and WebSocket clients (nil
	// without such clients); boots counts the engines started, so that
	// each front draws its own request ids.
	front  *front
	boots  uint64
	models model.Factory
	tools  *tool.Set
	// base and inner are the models and tools of Options, before they
	// are wrapped (a cluster's nodes wrap them each under a tag).
	base     model.Factory
	inner    []tool.Tool
	flight   inflight
	repaired bool // the journal was repaired: acknowledged events were lost (DamageWAL)
}

// idSource hands out UUIDs drawn from the seed, in call order.
type idSource struct {
	mu  sync.Mutex
	rng io.Reader
}

func newIDSource(seed uint64) *idSource {
	return &idSource{rng: rand.NewChaCha8(idKey(seed, 0))}
}

func idKey(seed, epoch uint64) [32]byte {
	var key [32]byte
	for i := range 4 {
		key[i*8] = byte(seed >> (8 * i))
	}
	for i := range 7 { // beside the seed's bytes: epoch 0 keeps the old ids
		key[1+i] = byte(epoch >> (8 * i))
	}
	return key
}

// reseed starts the ids over from (seed, epoch): after a crash inside a
// group commit, how many ids the crashed server drew depends on the Go
// scheduler (how many events its lost group held), and the restarted one's
// must not.
func (s *idSource) reseed(seed, epoch uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rng = rand.NewChaCha8(idKey(seed, epoch))
}

func (s *idSource) New() uuid.UUID {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, err := uuid.NewRandomFromReader(s.rng)
	if err != nil {
		panic(err) // ChaCha8 never fails
	}
	return id
}

// inflight counts, per run, the streamed chunks models handed out and the
// streamed events the journal took (acknowledged, or refused: a failed
// append's events are dropped and their credits given back): their
// difference is what sits between the models and the journal, which
// backpressure bounds.
type inflight struct {
	mu        sync.Mutex
	handed    map[messages.RunID]int
	journaled map[messages.RunID]int
	worst     int
	worstRun  messages.RunID
	// off: the disk failed, and the hub drops what the models still
	// stream until the restart, without an append to count: no bound to
	// check then.
	off atomic.Bool
}

func (f *inflight) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handed, f.journaled = map[messages.RunID]int{}, map[messages.RunID]int{}
	f.off.Store(false)
}

// streamed tells the events a model chunk becomes.
func streamed(t messages.EventType) bool {
	switch t {
	case messages.TextDelta, messages.ReasoningDelta, messages.TokenUsage, messages.NodeProgress, messages.SynthesisProgress:
		return true
	}
	return false
}

func (f *inflight) handedOut(req *model.Request, c model.Chunk) {
	switch c.(type) {
	case *model.Text, *model.Reasoning:
		if req.Role == model.RoleAdvisor {
			return // a quiet turn: its text is not published
		}
	case *model.Usage, *model.Progress:
	default:
		return
	}
	if f.off.Load() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handed[req.RunID]++
	if d := f.handed[req.RunID] - f.journaled[req.RunID]; d > f.worst {
		f.worst, f.worstRun = d, req.RunID
	}
}

func (f *inflight) appended(events []*messages.Encoded) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range events {
		if streamed(e.Type) {
			f.journaled[e.RunID]++
		}
	}
}

// simJournal is a journal the engine runs on: the durable one, or a
// node's handle on a cluster's shared one (fencedJournal).
type simJournal interface {
	journal.Journal
	journal.Catalog
}

// countingJournal is the engine's view of the journal: the durable one (or
// a cluster node's), telling the in-flight count what it acknowledged, and
// failing as a disk does when journalFaults says so.
type countingJournal struct {
	simJournal
	flight *inflight
	faults *journalFaults
}

// journalFaults fails the journal, as a failed fsync fails a real one:
// once armed, the next append fails, after its batch was written (so that
// it may be on disk after the restart, unacknowledged) or before (lost),
// and every append after it fails too, until the server restarts.
//
// (Failing pebble's fsync itself, with errorfs, is what the journal's own
// tests do. Here it would also hit the sync of a write-ahead log being
// rotated, which pebble treats as fatal: the process dies with a fatal
// error no test can recover from. The engine's side of a failing disk is
// the same either way: an append that fails.)
type journalFaults struct {
	armed  atomic.Bool
	after  bool // the failing append writes its batch first
	failed atomic.Bool
}

// errDiskFailed is the error of an append journalFaults failed.
var errDiskFailed = errors.New("sim: the disk failed (an injected fsync failure)")

func (f *journalFaults) err() error {
	if f.failed.Load() {
		return errDiskFailed
	}
	return nil
}

func (j countingJournal) Append(ctx context.Context, s messages.SessionID, events []*messages.Encoded) error {
	// A refused batch leaves the window as an acknowledged one does: the
	// hub drops it and gives its credits back.
	defer j.flight.appended(events)
	if err := j.faults.err(); err != nil {
		return err
	}
	if j.faults.armed.CompareAndSwap(true, false) {
		if j.faults.after {
			_ = j.simJournal.Append(ctx, s, events)
		}
		j.faults.failed.Store(true)
		j.flight.off.Store(true)
		return errDiskFailed
	}
	return j.simJournal.Append(ctx, s, events)
}

func newWorld(sc Scenario, opts Options) (*world, error) {
	w := &world{sc: sc, opts: opts, log: opts.Logger, sched: NewScheduler(), ids: newIDSource(sc.Seed),
		markerIDs: &idSource{rng: rand.NewChaCha8(idKey(sc.Seed^0x3a4b3a4b, 0))}, mem: vfs.NewMem()}
	if len(sc.Crashes)+len(sc.DiskFaults)+len(sc.CommitCrashes) > 0 || sc.DamageWAL {
		// A crashable filesystem copies a file's data at every fsync (what
		// a crash keeps): quadratic in the write-ahead log's size, so only
		// a simulation that crashes pays for it.
		w.mem = vfs.NewCrashableMem()
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if opts.Model != nil && opts.Models != nil {
		return nil, errors.New("sim: set Options.Model or Options.Models, not both")
	}
	base := opts.Models
	if opts.Model != nil {
		m := opts.Model
		base = func(messages.Scenario) (model.Model, error) { return m, nil }
	}
	inner := opts.Tools
	switch {
	case base != nil:
	case inner == nil:
		base = scripted.NewFactory().Model
		inner = []tool.Tool{scripted.SearchTool(), scripted.PublishTool()}
	default:
		base = scripted.NewFactory().Model
		if !slices.ContainsFunc(inner, func(t tool.Tool) bool { return t.Def().Name == model.ToolSearch }) {
			inner = append([]tool.Tool{scripted.SearchTool()}, inner...)
		}
	}
	w.base, w.inner = base, inner
	w.models = w.modelsTagged("")
	set, err := w.toolsTagged("")
	if err != nil {
		return nil, err
	}
	w.tools = set
	return w, nil
}

// modelsTagged wraps the world's models for one engine; tag (a cluster
// node's name, "" for the one server) goes into their gates' keys, so
// that two nodes running the same run wait at gates of their own.
func (w *world) modelsTagged(tag string) model.Factory {
	return func(s messages.Scenario) (model.Model, error) {
		inner, err := w.base(s)
		if err != nil {
			return nil, err
		}
		m := WrapModel(inner, w.sched, w.sc.Seed, w.sc.Model)
		m.observe = w.flight.handedOut
		m.tag = tag
		return m, nil
	}
}

// toolsTagged wraps the world's tools for one engine, as modelsTagged.
func (w *world) toolsTagged(tag string) (*tool.Set, error) {
	wrapped := make([]tool.Tool, len(w.inner))
	for i, t := range w.inner {
		tt := WrapTool(t, w.sched, w.sc.Seed, w.sc.Tool)
		tt.tag = tag
		wrapped[i] = tt
	}
	return tool.NewSet(wrapped...)
}

// boot opens the journal on the disk as it is and starts an engine on it
// (recovering what the journal holds). A journal that lost acknowledged
// events is an error unless damage was injected, in which case it is
// repaired as an operator would.
func (w *world) boot(ctx context.Context) error {
	// The memtable is big enough that a simulation never rotates it: a
	// rotation closes (fsyncs) the old write-ahead log on a background
	// goroutine, which would race the commits for an injected fsync
	// failure. (A crashable filesystem copies a file at each fsync, so a
	// bigger log costs more; the simulations CI runs write a few MB.)
	// Sessions stay in memory: leaving it flushes the memtable, which
	// rotates the write-ahead log on a background goroutine (see above).
	if w.sc.cluster() {
		return w.bootCluster(ctx)
	}
	w.hang = newHangFS(w.mem)
	jopts := journal.Options{Logger: w.log, FS: w.hang, CacheSize: 1 << 20, MemTableSize: 16 << 20, IdleAfter: -1, WatchEvery: -1}
	j, err := journal.Open(dataDir, jopts)
	if errors.Is(err, journal.ErrDamaged) && w.sc.DamageWAL && !w.repaired {
		w.repaired = true
		jopts.Repair = true
		j, err = journal.Open(dataDir, jopts)
	}
	if err != nil {
		return fmt.Errorf("open the journal: %w", err)
	}
	w.j = j
	if w.reseedAtBoot {
		w.reseedAtBoot = false
		w.ids.reseed(w.sc.Seed, diskEpoch+uint64(w.diskRestarts))
	}
	w.faults = &journalFaults{}
	w.disp = NewDispatcher()
	w.flight.reset()
	e, err := actors.New(w.engineConfig(j, w.disp, w.models, w.tools))
	if err != nil {
		_ = w.disp.Shutdown(ctx)
		_ = j.Close()
		return fmt.Errorf("start the engine: %w", err)
	}
	w.e = e
	w.boots++
	if w.sc.httpClients() > 0 {
		f, err := startFront(e, w.log, w.sc.Seed, w.boots)
		if err != nil {
			return fmt.Errorf("start the HTTP server: %w", err)
		}
		w.front = f
	}
	return nil
}

// engineConfig is the configuration of an engine of the world on journal
// j, its actors on disp.
func (w *world) engineConfig(j simJournal, disp *Dispatcher, models model.Factory, tools *tool.Set) actors.Config {
	return actors.Config{
		Logger: w.log, NewID: w.ids.New,
		// Replay markers go to one client: when a client reads (up to the
		// Go scheduler) must not shift the journaled events' ids.
		MarkerID: w.markerIDs.New,
		Journal:  countingJournal{simJournal: j, flight: &w.flight, faults: w.faults},
		Models:   models, Tools: tools, Dispatcher: disp,
		HubIdleAfter:       -1, // a sweeper ticking on its own would race the driver
		SleepAfter:         -1, // likewise: the driver puts parked runs to sleep itself (loop)
		KeepRunsOnShutdown: true,
		InterruptTimeout:   DriverPatience * 10,
		ToolTimeout:        ToolTimeout,
		Concurrency:        w.opts.Concurrency,
	}
}

// halt stops the engine, its dispatcher and its journal. After a crash
// clone it only tidies up: the disk the old engine writes to is dropped.
func (w *world) halt(ctx context.Context) error {
	if w.cl != nil {
		return w.haltCluster(ctx)
	}
	var errs []error
	if w.e != nil {
		errs = append(errs, w.e.Shutdown(ctx))
		w.e = nil
	}
	if w.front != nil {
		// After the engine: the streams carry what it published last,
		// then their final frames.
		errs = append(errs, w.front.stop(ctx))
		w.front = nil
	}
	if w.disp != nil {
		errs = append(errs, w.disp.Shutdown(ctx))
		w.disp = nil
	}
	if w.j != nil {
		errs = append(errs, w.j.Close())
		w.j = nil
	}
	return errors.Join(errs...)
}

// crash kills the server. Drawn from rng, it is either the process that
// dies (kill -9: the page cache keeps everything written, fsynced or
// not) or the machine (power loss: the disk keeps what was fsynced and a
// torn part of the newest write-ahead log's unsynced tail). With damage,
// the process dies and the newest write-ahead log is then cut in half, as
// an operator's mistake or a failing disk would: acknowledged events are
// lost, and the restart must say so.
//
// (pebble's CrashClone can keep random unsynced blocks itself, but it
// draws them while ranging over maps, so the same seed would not give the
// same disk: it is asked for all or only the synced state, and the torn
// tail is added here.)
func (w *world) crash(ctx context.Context, rng *rand.Rand, damage bool) error {
	if w.cl != nil {
		return w.crashNode(ctx, rng) // the shared journal loses nothing acknowledged
	}
	if w.faults != nil && w.faults.err() != nil {
		// The disk failed: the hub dropped what the models went on
		// streaming, and how far they ran (how many ids they drew)
		// depends on the Go scheduler. The restarted server's ids start
		// over, as after a crash inside a group commit (seed 24054 gave a
		// different journal on each run).
		w.diskRestarts++
		w.reseedAtBoot = true
	}
	var head uint64
	if damage {
		head, _ = w.j.Head(ctx, journalKey)
	}
	if damage && w.sc.DamageHWM == HWMFlipped {
		return w.afterDamage(ctx, head, w.stopAndFlip(ctx))
	}
	var clone *vfs.MemFS
	if damage || rng.IntN(2) == 0 {
		clone = w.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(0, 0))})
	} else {
		clone = w.mem.CrashClone(vfs.CrashCloneCfg{})
		if err := tearWAL(w.mem, clone, rng); err != nil {
			return err
		}
	}
	if err := w.halt(ctx); err != nil && !isJournalFailure(err) {
		return fmt.Errorf("stop the crashed server: %w", err)
	}
	w.mem = clone
	if damage {
		if err := cutNewestWAL(w.mem, head/2+1, head); err != nil {
			return err
		}
		if w.sc.DamageHWM == HWMDeleted {
			if err := w.mem.Remove(w.mem.PathJoin(dataDir, hwmFile)); err != nil {
				return err
			}
		}
		return w.afterDamage(ctx, head, w.boot(ctx))
	}
	return w.boot(ctx)
}

// crashInCommit loses power while a write-ahead log fsync is held (a
// group commit's batch written, not synced): the disk keeps only what was
// synced, so the whole group is lost, whatever the Go scheduler put in it.
// The held fsync then goes on against the old disk, and the server stops.
func (w *world) crashInCommit(ctx context.Context) error {
	clone := w.mem.CrashClone(vfs.CrashCloneCfg{})
	w.hang.let()
	if err := w.halt(ctx); err != nil && !isJournalFailure(err) {
		return fmt.Errorf("stop the crashed server: %w", err)
	}
	w.mem = clone
	w.commitCrashes++
	w.ids.reseed(w.sc.Seed, uint64(w.commitCrashes))
	return w.boot(ctx)
}

// afterDamage checks the restart after damage lost acknowledged events:
// the journal's head must not be below the head acknowledged before (the
// next seq would be handed out a second time, to another event; a client
// that got the first one may never be told).
func (w *world) afterDamage(ctx context.Context, acked uint64, err error) error {
	if err != nil {
		return err
	}
	head, err := w.j.Head(ctx, journalKey)
	if err != nil {
		return err
	}
	if head < acked {
		what := "a cut write-ahead log"
		if w.sc.DamageHWM != "" {
			what += ", the high-water mark log " + string(w.sc.DamageHWM)
		}
		return fmt.Errorf("after damage (%s): the journal's head is %d, but seqs up to %d were acknowledged: seq %d would be handed out twice",
			what, head, acked, head+1)
	}
	return nil
}

// diskEpoch is where the ids' epochs after a failed disk start
// (idSource.reseed; a crash inside a group commit takes 1, 2, …, a stale
// cluster owner staleEpoch+1, …).
const diskEpoch = 1 << 48

// hwmFile is the journal's high-water mark log (journal/hwm.go).
const hwmFile = "CONCLAVE-JOURNAL-HWM"

// stopAndFlip is issue 27's first double fault: a graceful stop (the
// journal rewrites its high-water mark log as one snapshot), then one bit
// of that snapshot flips and every write-ahead log is lost.
func (w *world) stopAndFlip(ctx context.Context) error {
	if err := w.halt(ctx); err != nil && !isJournalFailure(err) {
		return fmt.Errorf("stop the server: %w", err)
	}
	path := w.mem.PathJoin(dataDir, hwmFile)
	b, err := readFile(w.mem, path)
	if err != nil {
		return err
	}
	b[len(b)-1] ^= 1
	if err := writeFile(w.mem, path, b); err != nil {
		return err
	}
	names, err := w.mem.List(dataDir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			if err := w.mem.Remove(w.mem.PathJoin(dataDir, n)); err != nil {
				return err
			}
		}
	}
	return w.boot(ctx)
}

// isJournalFailure: an error of an engine or journal that had failed
// (journalFaults) is expected when it stops.
func isJournalFailure(err error) bool {
	return errors.Is(err, errDiskFailed) || err != nil && strings.Contains(err.Error(), errDiskFailed.Error())
}

// newestWAL names the newest write-ahead log of the data directory ("" if none).
func newestWAL(fs *vfs.MemFS) (string, error) {
	names, err := fs.List(dataDir)
	if err != nil {
		return "", err
	}
	newest := ""
	for _, n := range names {
		if strings.HasSuffix(n, ".log") && n > newest {
			newest = n
		}
	}
	if newest == "" {
		return "", nil
	}
	return fs.PathJoin(dataDir, newest), nil
}

func readFile(fs *vfs.MemFS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func writeFile(fs *vfs.MemFS, path string, data []byte) error {
	out, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := out.Write(data); err != nil {
		return err
	}
	if err := out.Sync(); err != nil {
		return err
	}
	return out.Close()
}

// tearWAL gives the crash clone's newest write-ahead log a prefix, drawn
// from rng, of what the live one holds beyond its synced part: a write
// torn by the crash.
func tearWAL(live, clone *vfs.MemFS, rng *rand.Rand) error {
	path, err := newestWAL(clone)
	if err != nil || path == "" {
		return err
	}
	synced, err := readFile(clone, path)
	if err != nil {
		return err
	}
	all, err := readFile(live, path)
	if err != nil || len(all) <= len(synced) {
		return nil // gone or nothing unsynced: nothing to tear
	}
	keep := len(synced) + rng.IntN(len(all)-len(synced)+1)
	return writeFile(clone, path, all[:keep])
}

// cutNewestWAL cuts the newest write-ahead log of the data directory
// right before the record of the event with seq from (or the first later
// one it holds whole), losing it and everything after; in half if it
// holds none of them. The cut is at an event, not at a byte offset: how
// the log's bytes are laid out depends on how commits were grouped, which
// is up to the Go scheduler, and the same seed must lose the same events.
func cutNewestWAL(fs *vfs.MemFS, from, head uint64) error {
	path, err := newestWAL(fs)
	if err != nil || path == "" {
		return err
	}
	data, err := readFile(fs, path)
	if err != nil {
		return err
	}
	cut := len(data) / 2
	for seq := from; seq <= head; seq++ {
		// An event's JSON is stored as it is; one split by a log block
		// boundary is not found, and the next one is tried.
		if i := bytes.Index(data, fmt.Appendf(nil, `"seq":%d,"type"`, seq)); i >= 0 {
			if j := bytes.LastIndex(data[:i], []byte(`{"id":`)); j >= 0 {
				cut = j
				break
			}
		}
	}
	return writeFile(fs, path, data[:cut])
}
