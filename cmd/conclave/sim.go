package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/conclave-ai/conclave/internal/regress"
	"github.com/conclave-ai/conclave/testkit/sim"
)

// simCmd holds the flags of `conclave sim`.
type simCmd struct {
	app          *app
	seeds        int
	from         uint64
	seed         uint64
	scenario     string
	parallel     int
	size         sim.Size
	noFeatures   bool
	noHTTP       bool
	cluster      bool
	councilNodes int
	shrink       int
	jsonOut      bool
	reintroduce  string
}

// fixedBugs are the bugs `conclave sim --reintroduce` can put back, to see
// the simulator find them (internal/regress).
var fixedBugs = map[string]*atomic.Bool{
	"damaged-wal":       &regress.TrustDamagedJournal,
	"damaged-hwm":       &regress.TrustDamagedMarks,
	"trim-live":         &regress.TrimLiveRuns,
	"abort-race":        &regress.AbortWithoutOutcome,
	"backpressure":      &regress.UnboundedStreams,
	"orphan-interrupts": &regress.OrphanParkedInterrupts,
	"marker-seq":        &regress.MarkerAtFirstRetained,
	"ack-before-sync":   &regress.AckBeforeSync,
	"resume-repeat":     &regress.LastEventIDInclusive,
	// Cluster mode's (--cluster): a stale owner's appends are not fenced
	// off; a takeover resumes none of the dead node's runs.
	"no-fencing":           &regress.NoFencing,
	"takeover-skip-replay": &regress.AdoptSkipsReplay,
}

// fixedBugNames lists fixedBugs' names, sorted, for the usage and errors.
func fixedBugNames() string {
	names := slices.Sorted(maps.Keys(fixedBugs))
	return strings.Join(names, "|")
}

func newSimCmd(a *app) *cobra.Command {
	c := &simCmd{app: a, size: sim.SmallSize}
	cmd := &cobra.Command{
		Use:   "sim [flags]",
		Short: "Run deterministic whole-system simulations (testkit/sim) and report what they found",
		Long: `Simulate seeds, in parallel: each seed drives a whole Conclave (engine, durable journal on a
simulated disk, scripted models and tools, stream clients) through councils, crashes, disk faults,
aborts, steering and retention under virtual time, then checks every invariant. The same seed always
does the same thing, so a failing seed is reproduced by "conclave sim --seed N" (or
"go test ./testkit/sim -run 'TestSim$' -seed N"); its scenario is then shrunk while it still fails.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return c.run() },
	}
	fs := cmd.Flags()
	fs.IntVar(&c.seeds, "seeds", 100, "how many seeds to simulate")
	fs.Uint64Var(&c.from, "from", 1, "the first seed")
	fs.Uint64Var(&c.seed, "seed", 0, "simulate only this seed")
	fs.StringVar(&c.scenario, "scenario", "", "simulate this scenario (JSON, as a failure prints it)")
	fs.IntVar(&c.parallel, "parallel", runtime.GOMAXPROCS(0), "seeds simulated at once")
	fs.IntVar(&c.size.Runs, "runs", c.size.Runs, "at most this many runs per seed")
	fs.IntVar(&c.size.Nodes, "nodes", c.size.Nodes, "at most this many nodes per run")
	fs.IntVar(&c.size.Tokens, "tokens", c.size.Tokens, "at most this many tokens per node")
	fs.IntVar(&c.size.Clients, "clients", c.size.Clients, "at most this many stream clients per seed")
	fs.IntVar(&c.size.Crashes, "crashes", c.size.Crashes, "at most this many crashes per seed")
	fs.BoolVar(&c.noFeatures, "no-features", false, "plain councils: no teams, debates, HITL, faults or actions besides crashes")
	fs.BoolVar(&c.noHTTP, "no-http", false, "every client subscribes on the engine: none reads the SSE or WebSocket stream through the HTTP server")
	fs.BoolVar(&c.cluster, "cluster", false, "simulate clusters of 2 or 3 nodes on one fenced journal, with node crashes, takeovers and stale owners")
	fs.IntVar(&c.councilNodes, "council-nodes", 0, "instead of random scenarios, simulate one council of this many nodes per seed (sim.BigCouncil)")
	fs.IntVar(&c.shrink, "shrink", 60, "simulations to spend shrinking each failing scenario (0: none)")
	fs.BoolVar(&c.jsonOut, "json", false, "print one JSON result per seed, then the summary as JSON")
	fs.StringVar(&c.reintroduce, "reintroduce", "", "put a fixed bug back, to see the simulator find it: "+fixedBugNames()+" (no-fencing and takeover-skip-replay with --cluster)")
	return cmd
}

// simReport gathers what the seeds found.
type simReport struct {
	mu      sync.Mutex
	results []sim.Result
	failed  []failedSeed
}

type failedSeed struct {
	sc  sim.Scenario
	res sim.Result
}

func (r *simReport) add(sc sim.Scenario, res sim.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, res)
	if res.Failed() {
		r.failed = append(r.failed, failedSeed{sc, res})
	}
}

// scenarios lists what to simulate.
func (c *simCmd) scenarios() ([]sim.Scenario, error) {
	if c.scenario != "" {
		var sc sim.Scenario
		if err := json.Unmarshal([]byte(c.scenario), &sc); err != nil {
			return nil, usageError(fmt.Errorf("--scenario: %w", err))
		}
		return []sim.Scenario{sc}, nil
	}
	if c.seeds < 1 || c.parallel < 1 {
		return nil, usageError(errors.New("--seeds and --parallel must be at least 1"))
	}
	if c.size.Runs < 1 || c.size.Nodes < 1 || c.size.Tokens < 1 || c.size.Clients < 0 || c.size.Crashes < 0 {
		return nil, usageError(errors.New("--runs, --nodes and --tokens must be at least 1; --clients and --crashes at least 0"))
	}
	size := c.size
	size.Features = !c.noFeatures
	size.NoHTTP = c.noHTTP
	size.Cluster = c.cluster
	first, n := c.from, c.seeds
	if c.seed != 0 {
		first, n = c.seed, 1
	}
	out := make([]sim.Scenario, 0, n)
	for i := range n {
		seed := first + uint64(i)
		if c.councilNodes > 0 {
			out = append(out, sim.BigCouncil(seed, c.councilNodes))
		} else {
			out = append(out, sim.Generate(seed, size))
		}
	}
	return out, nil
}

// run simulates the scenarios. A simulation runs in a testing/synctest
// bubble, which only a *testing.T can open, so the seeds run as parallel
// subtests of one test that testing.Main runs (its -test.* flags are set
// here; it exits the process with its status: 1 when a seed failed).
func (c *simCmd) run() error {
	scs, err := c.scenarios()
	if err != nil {
		return err
	}
	if c.reintroduce != "" {
		bug, ok := fixedBugs[c.reintroduce]
		if !ok {
			return usageError(fmt.Errorf("--reintroduce %q: one of %s", c.reintroduce, fixedBugNames()))
		}
		bug.Store(true) // this process only simulates
	}
	out := c.app.stdout
	rep := &simReport{}
	test := func(t *testing.T) {
		start := time.Now()
		t.Run("seeds", func(t *testing.T) {
			for _, sc := range scs {
				t.Run(strconv.FormatUint(sc.Seed, 10), func(t *testing.T) {
					t.Parallel()
					res := sim.Run(t, sc, sim.Options{})
					rep.add(sc, res)
					if c.jsonOut {
						b, _ := json.Marshal(res)
						rep.mu.Lock()
						fmt.Fprintf(out, "%s\n", b)
						rep.mu.Unlock()
					}
				})
			}
		})
		c.summary(out, rep, time.Since(start))
		slices.SortFunc(rep.failed, func(a, b failedSeed) int { return cmp.Compare(a.sc.Seed, b.sc.Seed) })
		for _, f := range rep.failed {
			c.explain(t, out, f.sc, f.res)
		}
		if len(rep.failed) > 0 {
			t.Fail()
		}
	}
	os.Args = []string{os.Args[0], "-test.parallel=" + strconv.Itoa(c.parallel), "-test.run=^Sim$"}
	testing.Main(func(pat, str string) (bool, error) { return true, nil }, []testing.InternalTest{{Name: "Sim", F: test}}, nil, nil)
	return nil // not reached: testing.Main exits
}

// summary prints what the seeds did, all together.
func (c *simCmd) summary(out io.Writer, rep *simReport, took time.Duration) {
	var runs, events, delivered, crashes, commitCrashes, steps, sleeps, markers, overHTTP, restarts, takeovers, stale, fenced int
	var virtual time.Duration
	for _, r := range rep.results {
		runs, events, delivered, crashes, steps = runs+r.Runs, events+r.Events, delivered+r.Delivered, crashes+r.Crashes, steps+r.Steps
		sleeps += r.Sleeps
		markers += r.Markers
		overHTTP, restarts = overHTTP+r.HTTP, restarts+r.Restarts
		commitCrashes += r.CommitCrashes
		takeovers, stale, fenced = takeovers+r.Takeovers, stale+r.Stale, fenced+r.Fenced
		virtual += r.Virtual
	}
	n := len(rep.results)
	if c.jsonOut {
		b, _ := json.Marshal(map[string]any{"seeds": n, "failed": len(rep.failed), "seconds": took.Seconds(),
			"seeds_per_second": float64(n) / took.Seconds(), "runs": runs, "events": events, "delivered": delivered,
			"delivered_http": overHTTP, "ws_restarts": restarts,
			"crashes": crashes, "commit_crashes": commitCrashes, "takeovers": takeovers, "stale_owners": stale, "fenced_appends": fenced, "sleeps": sleeps, "markers": markers, "steps": steps, "virtual_seconds": virtual.Seconds()})
		fmt.Fprintf(out, "%s\n", b)
		return
	}
	fmt.Fprintf(out, "conclave sim: %d seeds, %d at a time: %d passed, %d failed in %.1f s (%.1f seeds/s)\n",
		n, c.parallel, n-len(rep.failed), len(rep.failed), took.Seconds(), float64(n)/took.Seconds())
	fmt.Fprintf(out, "  simulated %d runs, %d events, %d deliveries to clients (%d over HTTP, %d WebSocket restarts), %d crashes (%d inside a group commit), %d runs put to sleep, %d replay markers, %d steps, %s of virtual time\n",
		runs, events, delivered, overHTTP, restarts, crashes, commitCrashes, sleeps, markers, steps, virtual.Round(time.Second))
	if c.cluster {
		fmt.Fprintf(out, "  cluster: %d sessions taken over from a crashed or paused node, %d stale owners resumed, %d of their appends fenced off\n", takeovers, stale, fenced)
	}
}

// explain prints a failing scenario's findings, shrinks it, and prints the
// commands that reproduce both.
func (c *simCmd) explain(t *testing.T, out io.Writer, sc sim.Scenario, res sim.Result) {
	fmt.Fprintf(out, "FAIL seed %d:\n", sc.Seed)
	for i, f := range res.Failures {
		if i == 5 {
			fmt.Fprintf(out, "  … and %d more\n", len(res.Failures)-i)
			break
		}
		fmt.Fprintf(out, "  %s\n", f)
	}
	if c.councilNodes == 0 && c.scenario == "" {
		fmt.Fprintf(out, "  reproduce: conclave sim --seed %d%s\n", sc.Seed, c.sizeFlags())
	}
	if c.shrink <= 0 {
		return
	}
	small, sres := sim.Shrink(t, sc, sim.Options{}, c.shrink)
	b, _ := json.Marshal(small)
	r0, n0, a0 := sc.Size()
	r1, n1, a1 := small.Size()
	again := ""
	if c.reintroduce != "" {
		again = " --reintroduce " + c.reintroduce
	}
	fmt.Fprintf(out, "  shrunk from %d runs, %d nodes, %d actions to %d, %d, %d; still fails with: %s\n  reproduce it: conclave sim%s --scenario '%s'\n",
		r0, n0, a0, r1, n1, a1, sres.Failures[0], again, b)
	// The same scenario does the same steps, but an invariant about timing
	// between goroutines (how far a model ran ahead of the journal) can
	// still depend on the Go scheduler: say so rather than hand out a
	// command that may pass.
	if failed := countFailures(t, small, shrinkRechecks); failed < shrinkRechecks {
		fmt.Fprintf(out, "  the shrunk scenario failed again in only %d of %d runs: this failure depends on how the Go scheduler interleaved goroutines; run the command a few times\n", failed, shrinkRechecks)
	}
}

// shrinkRechecks is how many more times a shrunk scenario is simulated to
// see whether it fails every time.
const shrinkRechecks = 2

func countFailures(t *testing.T, sc sim.Scenario, n int) int {
	failed := 0
	for range n {
		if sim.Run(t, sc, sim.Options{}).Failed() {
			failed++
		}
	}
	return failed
}

// sizeFlags are the flags that change what a seed generates, as given.
func (c *simCmd) sizeFlags() string {
	s, d := "", sim.SmallSize
	for _, f := range []struct {
		name    string
		v, dflt int
	}{{"runs", c.size.Runs, d.Runs}, {"nodes", c.size.Nodes, d.Nodes}, {"tokens", c.size.Tokens, d.Tokens}, {"clients", c.size.Clients, d.Clients}, {"crashes", c.size.Crashes, d.Crashes}} {
		if f.v != f.dflt {
			s += fmt.Sprintf(" --%s %d", f.name, f.v)
		}
	}
	if c.noFeatures {
		s += " --no-features"
	}
	if c.noHTTP {
		s += " --no-http"
	}
	if c.cluster {
		s += " --cluster"
	}
	if c.reintroduce != "" {
		s += " --reintroduce " + c.reintroduce
	}
	return s
}
