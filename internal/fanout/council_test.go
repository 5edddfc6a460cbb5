package fanout

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/messages"
)

// tinyCouncil runs in well under a second: 6 nodes in 2 waves, 2 at once,
// 8 tokens 1 ms apart, a sub-agent per node.
var tinyCouncil = CouncilConfig{Nodes: 6, Waves: 2, Tokens: 8, Subagents: 1, Concurrency: 2, TokenDelay: time.Millisecond}

// TestRun_Council follows a real council run with 20 clients per transport
// (server in this process): every client gets every event of the run once
// and in order, each with a latency from its envelope timestamp, and the
// offered rate is the run's own.
func TestRun_Council(t *testing.T) {
	t.Parallel()
	for _, tr := range []Transport{TransportSSE, TransportWS} {
		t.Run(string(tr), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := Run(ctx, Options{Transport: tr, Workload: WorkloadCouncil, Council: tinyCouncil, Clients: 20,
				FlushDelay: 2 * time.Millisecond, Settle: time.Millisecond, Drain: 10 * time.Second, RunTimeout: 30 * time.Second,
				Launch: InProcess})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Modes) != 1 || res.Modes[0].Mode != ModeConclave {
				t.Fatalf("modes %+v", res.Modes)
			}
			m := res.Modes[0]
			r := m.Run
			if r == nil || !r.Ended || r.Status != messages.StatusFinished || r.Events < 6*8 || r.Seconds <= 0 {
				t.Fatalf("run %+v", r)
			}
			if m.Published != int64(r.Events) || m.Expected != int64(r.Events)*20 || m.Delivered != m.Expected {
				t.Errorf("published %d, expected %d, delivered %d; run events %d", m.Published, m.Expected, m.Delivered, r.Events)
			}
			if m.Lost != 0 || m.Duplicates != 0 || m.Disconnected != 0 {
				t.Errorf("lost %d, duplicates %d, disconnected %d (%s)", m.Lost, m.Duplicates, m.Disconnected, m.DisconnectError)
			}
			// Every event carries a timestamp: each delivery has a latency.
			if m.Latency.Count != uint64(m.Delivered) || m.Latency.Max <= 0 || m.Latency.Max > time.Minute {
				t.Errorf("latency %+v for %d deliveries", m.Latency, m.Delivered)
			}
			if res.Rate <= 0 || res.Offered != res.Rate*20 || res.Duration <= 0 || res.Council == nil || *res.Council != tinyCouncil {
				t.Errorf("result settings: rate %v, offered %v, duration %v, council %+v", res.Rate, res.Offered, res.Duration, res.Council)
			}
			if m.DeliveredPerSec <= 0 || m.EventsPerWrite <= 0 || m.ServerRSSPeak == 0 || m.CatchupEvents < 0 {
				t.Errorf("delivered/s %v, events/write %v, RSS peak %d, catch-up %d", m.DeliveredPerSec, m.EventsPerWrite, m.ServerRSSPeak, m.CatchupEvents)
			}
			var out bytes.Buffer
			if err := WriteTable(&out, res); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"fan-out of a council over " + strings.ToUpper(string(tr)), "finished,", "envelope timestamp", "catch-up events"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("table lacks %q:\n%s", want, out.String())
				}
			}
			for line := range strings.Lines(out.String()) {
				if strings.HasPrefix(line, "gapless") && !strings.HasSuffix(strings.TrimSpace(line), " yes") {
					t.Errorf("not gapless: %s", line)
				}
			}
			if strings.Contains(out.String(), "sustains") {
				t.Errorf("a council judged on a rate target:\n%s", out.String())
			}
		})
	}
}

// TestServer_CouncilStartsOnce: the council runs once per server, its
// progress follows it to its end, and Stop does not stop it.
func TestServer_CouncilStartsOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := StartServer(ctx, ServerConfig{Mode: ModeConclave, Workload: WorkloadCouncil, Council: tinyCouncil})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	if st, err := s.Stats(false); err != nil || st.Run != nil || st.Publishing {
		t.Fatalf("before start: %+v, %v", st, err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); !errors.Is(err, ErrPublishing) {
		t.Errorf("second start: %v, want ErrPublishing", err)
	}
	s.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := s.Progress() // what the harness polls
		if err != nil {
			t.Fatal(err)
		}
		if st.RSSBytes == 0 || st.Goroutines == 0 {
			t.Errorf("progress without process figures: %+v", st)
		}
		if st.Run != nil && st.Run.Ended {
			full, err := s.Stats(false)
			if err != nil || full.Run == nil || *full.Run != *st.Run || full.Clients != 0 || full.Writes != 0 {
				t.Errorf("stats %+v (%v), progress %+v", full, err, st)
			}
			if st.Run.LastSeq != s.Ready().After+st.Run.Events || st.Published != int64(st.Run.Events) || st.Publishing {
				t.Errorf("ended run: %+v (after %d), stats %+v", st.Run, s.Ready().After, st)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not end: %+v", st.Run)
		}
		time.Sleep(10 * time.Millisecond) // polling a run's progress: nothing to wait on
	}
}

func TestServerConfig_CouncilNeedsConclave(t *testing.T) {
	t.Parallel()
	if _, err := StartServer(context.Background(), ServerConfig{Mode: ModeNaive, Workload: WorkloadCouncil}); err == nil {
		t.Error("a naive server accepted the council workload")
	}
}

func TestCouncilConfig_Scenario(t *testing.T) {
	t.Parallel()
	c := CouncilConfig{Nodes: 3}.withDefaults()
	if c.Waves != 3 || c.Tokens != 100 || c.Concurrency != 16 || c.Subagents != 0 || c.TokenDelay != 0 {
		t.Errorf("defaults %+v", c)
	}
	cmd := DefaultCouncil().startRun()
	s := cmd.Scenario
	if cmd.SessionID != sessionID || cmd.Concurrency != 16 || s.Nodes != 200 || s.Waves != 4 || s.Tokens != 100 ||
		s.SubagentsPerNode != 1 || s.TokenDelayMS != 10 {
		t.Errorf("start %+v, scenario %+v", cmd, s)
	}
	if err := DefaultCouncil().validate(); err != nil {
		t.Error(err)
	}
}
