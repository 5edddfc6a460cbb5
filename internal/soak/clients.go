package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/internal/benchkit"
	"github.com/conclave-ai/conclave/internal/routine"
	"github.com/conclave-ai/conclave/messages"
)

// A client's visit: it reads at most maxVisitEvents events (a uniform
// random number of them), and leaves after maxVisit whatever happened.
const (
	maxVisitEvents = 200
	maxVisit       = 10 * time.Second
	clientDial     = 10 * time.Second
	clientBuffer   = 16 << 10
	clientFrameMax = 1 << 20
	// maxExamples bounds the examples of each problem kept for the report.
	maxExamples = 5
)

// StreamTally is what the SSE clients saw.
type StreamTally struct {
	// Connections counts streams opened (200 text/event-stream), FromStart
	// those without a cursor and WithCursor those with a Last-Event-ID.
	Connections int64 `json:"connections"`
	FromStart   int64 `json:"from_start"`
	WithCursor  int64 `json:"with_cursor"`
	// Events counts events read (frames with an id).
	Events int64 `json:"events"`
	// How the visits ended: the followed run's terminal event was read, the
	// visit's number of events was read, or maxVisit passed.
	ReachedTerminal int64 `json:"reached_terminal"`
	ReadEnough      int64 `json:"read_enough"`
	HeldToLimit     int64 `json:"held_to_limit"`
	// Truncations counts replay_truncated events (none without retention).
	Truncations int64 `json:"truncations"`
	// Gaps counts breaks in a stream's seqs: a seq that is not the one
	// after the last (or after the cursor), except after replay_truncated.
	Gaps int64 `json:"gaps"`
	// ServerEnded counts streams the server ended before the client left
	// (EOF, a reset, or a stream_closed frame).
	ServerEnded int64 `json:"server_ended"`
	// Refused counts stream requests not answered with a stream, by code;
	// DialErrors those that failed before an answer.
	Refused    map[string]int64 `json:"refused,omitempty"`
	DialErrors int64            `json:"dial_errors"`
	// Examples of each problem, for the report.
	GapExamples   []string `json:"gap_examples,omitempty"`
	EndedExamples []string `json:"ended_examples,omitempty"`
	OtherExamples []string `json:"other_examples,omitempty"`
}

// Gapless reports whether every stream's seqs were gapless.
func (t StreamTally) Gapless() bool { return t.Gaps == 0 }

// streamCheck checks that one stream's events are gapless: the first is
// the one after the cursor, each next one is one more, and only a
// replay_truncated event may jump ahead (retention removed the events it
// jumps over). The zero value expects seq 1.
type streamCheck struct {
	last uint64 // the cursor, then the last seq read
}

// GapError is a break in a stream's seqs.
type GapError struct {
	After, Got uint64
}

func (e *GapError) Error() string {
	if e.Got <= e.After {
		return fmt.Sprintf("seq %d after seq %d: a repeat or out of order", e.Got, e.After)
	}
	return fmt.Sprintf("seq %d after seq %d: %d events missing", e.Got, e.After, e.Got-e.After-1)
}

// observe checks the event seq of type typ. After a gap it resumes from
// seq, so that one gap is reported once.
func (c *streamCheck) observe(seq uint64, typ messages.EventType) error {
	prev := c.last
	switch {
	case typ == messages.ReplayTruncated && seq > prev:
	case seq != prev+1:
		c.last = max(c.last, seq)
		return &GapError{After: prev, Got: seq}
	}
	c.last = seq
	return nil
}

// clients runs the SSE clients.
type clients struct {
	o      Options
	addr   string
	recent *recentRuns

	mu    sync.Mutex // guards tally
	tally StreamTally
}

func newClients(o Options, addr string, recent *recentRuns) *clients {
	return &clients{o: o, addr: addr, recent: recent, tally: StreamTally{Refused: map[string]int64{}}}
}

// run starts the clients and returns when ctx ended and they all left.
// round tells calls apart, so that each draws its own random choices.
func (cs *clients) run(ctx context.Context, round uint64) {
	var g routine.Group
	for i := range cs.o.Clients {
		rng := rand.New(rand.NewPCG(cs.o.Seed, round<<48|1<<32+uint64(i)))
		g.Go(func() { cs.client(ctx, rng) })
	}
	_ = g.Wait(context.Background()) // ctx's end closes every connection
}

// client comes and goes until ctx ends.
func (cs *clients) client(ctx context.Context, rng *rand.Rand) {
	sc := benchkit.NewSSEScanner(nil, clientBuffer, clientFrameMax, cs.o.Now)
	for {
		pause := time.Duration(rng.Int64N(int64(cs.o.ClientPause) + 1))
		if sleep(ctx, pause) != nil {
			return
		}
		target, ok := cs.recent.pick(rng)
		if !ok {
			continue
		}
		cs.visit(ctx, rng, sc, target)
	}
}

// visit follows target's session once.
func (cs *clients) visit(ctx context.Context, rng *rand.Rand, sc *benchkit.SSEScanner, target recentRun) {
	var (
		header http.Header
		check  streamCheck
	)
	if rng.IntN(2) == 1 {
		// Any cursor up to what is known of the session; an ended run's
		// cursor stays before its terminal event, so the visit reaches it.
		c := uint64(0)
		if target.cursorMax > 0 {
			c = rng.Uint64N(target.cursorMax)
			if !target.ended {
				c = rng.Uint64N(target.cursorMax + 1)
			}
		}
		header = http.Header{"Last-Event-ID": {strconv.FormatUint(c, 10)}}
		check.last = c
	}
	want := 1 + rng.IntN(maxVisitEvents)
	dctx, cancel := context.WithTimeout(ctx, clientDial)
	conn, body, err := benchkit.DialSSE(dctx, cs.addr, "/api/v1/events/stream?session_id="+target.session, header)
	cancel()
	if err != nil {
		cs.refused(ctx, err)
		return
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() }) // a soak that ends closes its streams
	defer stop()
	_ = conn.SetReadDeadline(cs.o.Now().Add(maxVisit))

	var (
		events int64
		end    func(*StreamTally)
	)
	runKey := []byte(`"run_id":"` + target.run + `"`)
	sc.Reset(body)
	for end == nil {
		f, err := sc.Next()
		if err != nil {
			switch {
			case ctx.Err() != nil:
				end = func(*StreamTally) {}
			case errors.Is(err, os.ErrDeadlineExceeded):
				end = func(t *StreamTally) { t.HeldToLimit++ }
			default:
				end = cs.serverEnded(fmt.Sprintf("session %s after seq %d: %v", target.session, check.last, err))
			}
			break
		}
		if len(f.ID) == 0 {
			if string(f.Event) == "stream_closed" {
				end = cs.serverEnded(fmt.Sprintf("session %s after seq %d: stream_closed %s", target.session, check.last, f.Data))
			}
			continue // the retry block, heartbeats
		}
		seq, err := strconv.ParseUint(string(f.ID), 10, 64)
		if err != nil {
			end = cs.other(fmt.Sprintf("session %s: frame id %q is not a seq", target.session, f.ID))
			break
		}
		typ := messages.EventType(f.Event)
		if err := check.observe(seq, typ); err != nil {
			cs.gap(fmt.Sprintf("session %s, cursor %s: %v", target.session, header.Get("Last-Event-ID"), err))
		}
		events++
		switch {
		case typ == messages.ReplayTruncated:
			cs.add(func(t *StreamTally) { t.Truncations++ })
		case typ.Terminal() && bytes.Contains(f.Data, runKey):
			end = func(t *StreamTally) { t.ReachedTerminal++ }
		case events >= int64(want):
			end = func(t *StreamTally) { t.ReadEnough++ }
		}
	}
	cs.add(func(t *StreamTally) {
		t.Connections++
		if header == nil {
			t.FromStart++
		} else {
			t.WithCursor++
		}
		t.Events += events
		end(t)
	})
}

// add applies f to the tally.
func (cs *clients) add(f func(*StreamTally)) {
	cs.mu.Lock()
	f(&cs.tally)
	cs.mu.Unlock()
}

func (cs *clients) gap(example string) {
	cs.add(func(t *StreamTally) {
		t.Gaps++
		t.GapExamples = appendExample(t.GapExamples, example)
	})
}

// serverEnded returns the ending of a stream the server ended.
func (cs *clients) serverEnded(example string) func(*StreamTally) {
	return func(t *StreamTally) {
		t.ServerEnded++
		t.EndedExamples = appendExample(t.EndedExamples, example)
	}
}

// other returns the ending of a stream that broke the protocol.
func (cs *clients) other(example string) func(*StreamTally) {
	return func(t *StreamTally) { t.OtherExamples = appendExample(t.OtherExamples, example) }
}

// refused counts a stream request that got no stream.
func (cs *clients) refused(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	var r *benchkit.SSERefusedError
	if errors.As(err, &r) {
		code := codeOf(r)
		cs.add(func(t *StreamTally) {
			t.Refused[code]++
			if code != "too_many_streams" {
				t.OtherExamples = appendExample(t.OtherExamples, r.Error())
			}
		})
		return
	}
	var ne net.Error
	cs.add(func(t *StreamTally) {
		t.DialErrors++
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.OtherExamples = appendExample(t.OtherExamples, "dial: "+err.Error())
		}
	})
}

// codeOf is the error code of a refusal's JSON body, or "http_<status>".
func codeOf(r *benchkit.SSERefusedError) string {
	var eb messages.ErrorBody
	if err := json.Unmarshal([]byte(r.Body), &eb); err == nil && eb.Error.Code != "" {
		return eb.Error.Code
	}
	return "http_" + strconv.Itoa(r.Status)
}

func appendExample(xs []string, x string) []string {
	if len(xs) < maxExamples {
		xs = append(xs, x)
	}
	return xs
}

// result returns the tally; call it after run returned.
func (cs *clients) result() StreamTally {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.tally
}
