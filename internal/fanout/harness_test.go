package fanout

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestRun runs the whole harness with the servers in this process: 20
// clients, 2,000 events/s for 300 ms, every mode and transport. It takes
// about a second.
func TestRun(t *testing.T) {
	t.Parallel()
	for _, tr := range []Transport{TransportSSE, TransportWS} {
		t.Run(string(tr), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := Run(ctx, Options{Transport: tr, Clients: 20, Rate: 2000, Duration: 300 * time.Millisecond,
				FlushDelay: 2 * time.Millisecond, Settle: time.Millisecond, Drain: 5 * time.Second, Launch: InProcess})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Modes) != 2 {
				t.Fatalf("%d mode results", len(res.Modes))
			}
			for _, m := range res.Modes {
				if m.Published == 0 || m.Delivered == 0 || m.Latency.Count == 0 {
					t.Errorf("%s: published %d, delivered %d, latencies %d", m.Mode, m.Published, m.Delivered, m.Latency.Count)
				}
				if m.Delivered+m.Lost != m.Expected {
					t.Errorf("%s: delivered %d + lost %d != expected %d", m.Mode, m.Delivered, m.Lost, m.Expected)
				}
				if m.Duplicates != 0 || m.Disconnected != 0 {
					t.Errorf("%s: %d duplicates, %d disconnected (%s)", m.Mode, m.Duplicates, m.Disconnected, m.DisconnectError)
				}
			}
			if c := res.Modes[0]; c.Mode != ModeConclave || c.Lost != 0 || c.Delivered != c.Published*20 {
				t.Errorf("conclave: delivered %d of %d (lost %d)", c.Delivered, c.Expected, c.Lost)
			}
			var out bytes.Buffer
			if err := WriteTable(&out, res); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"delivered/s", "conclave", "naive", "latency p99.9 (ms)", "targets"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

func TestServerConfig_ArgsRoundTrip(t *testing.T) {
	t.Parallel()
	want := ServerConfig{Mode: ModeNaive, Workload: WorkloadCouncil, Rate: 1234.5, Payload: 64, FlushDelay: 7 * time.Millisecond, Queue: 99,
		Council:    CouncilConfig{Nodes: 7, Waves: 2, Tokens: 3, Subagents: 2, Concurrency: 5, TokenDelay: 4 * time.Millisecond},
		CPUProfile: "/tmp/x.prof"}
	var got ServerConfig
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	got.BindFlags(fs)
	if err := fs.Parse(want.Args()); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestOptions_Validate(t *testing.T) {
	t.Parallel()
	ok := Options{Clients: 1, Rate: 1, Duration: time.Second, Launch: InProcess}
	for name, mut := range map[string]func(*Options){
		"no launcher": func(o *Options) { o.Launch = nil },
		"no clients":  func(o *Options) { o.Clients = 0 },
		"zero rate":   func(o *Options) { o.Rate = 0 },
		"bad mode":    func(o *Options) { o.Modes = []Mode{"fast"} },
		"bad payload": func(o *Options) { o.Payload = 5 },
		"bad transport": func(o *Options) {
			o.Transport = "carrier-pigeon"
		},
		"bad workload":           func(o *Options) { o.Workload = "lottery" },
		"council on naive":       func(o *Options) { o.Workload, o.Modes = WorkloadCouncil, []Mode{ModeConclave, ModeNaive} },
		"council delay in µs":    func(o *Options) { o.Workload, o.Council.TokenDelay = WorkloadCouncil, 1500*time.Microsecond },
		"council waves > nodes":  func(o *Options) { o.Workload, o.Council.Nodes, o.Council.Waves = WorkloadCouncil, 2, 3 },
		"council concurrency -1": func(o *Options) { o.Workload, o.Council.Concurrency = WorkloadCouncil, -1 },
	} {
		o := ok
		mut(&o)
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
