package fanout

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/internal/routine"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/transport"
)

// conclaveTarget is Conclave's own fan-out: the publisher injects events
// with Engine.Publish; the session hub journals them and offers them to
// every subscription, and transport.Server writes them to the streams.
type conclaveTarget struct {
	engine  *actors.Engine
	cluster *clusterParts // cluster mode (ServerConfig.Cluster)
	srv     *transport.Server
	reg     *prometheus.Registry
	lis     net.Listener
	after   uint64
	serve   routine.Group
}

var _ target = (*conclaveTarget)(nil)

// startConclave creates the session with a tiny run (a session exists once
// a run started in it), waits until that run ended so its events are not
// mixed with the measured ones, and starts serving.
func startConclave(ctx context.Context, cfg ServerConfig) (_ *conclaveTarget, err error) {
	ecfg := actors.Config{Logger: cfg.Logger, Now: cfg.Now, SubscriberQueue: cfg.Queue, Tracer: cfg.Tracer}
	var parts *clusterParts
	if cfg.Cluster != "" {
		if parts, err = joinCluster(ctx, cfg, &ecfg); err != nil {
			return nil, err
		}
	}
	engine, err := actors.New(ecfg)
	if err != nil {
		if parts != nil {
			_ = parts.shutdown(ctx)
		}
		return nil, err
	}
	t := &conclaveTarget{engine: engine, cluster: parts, reg: prometheus.NewRegistry()}
	defer func() {
		if err != nil {
			_ = t.shutdown(context.Background())
		}
	}()
	if parts != nil {
		parts.node.OnAdopt(engine.Adopt)
	}
	if cfg.Follower {
		t.after, err = followerAfter(ctx, ecfg.Journal)
	} else {
		t.after, err = runToEnd(ctx, engine)
	}
	if err != nil {
		return nil, err
	}
	t.srv, err = transport.New(transport.Config{Engine: engine, Logger: cfg.Logger, Now: cfg.Now,
		FlushDelay: cfg.FlushDelay, Registry: t.reg})
	if err != nil {
		return nil, err
	}
	if t.lis, err = t.srv.Listen("127.0.0.1:0"); err != nil {
		return nil, err
	}
	t.serve.Go(func() { _ = t.srv.Serve(t.lis) })
	return t, nil
}

// runToEnd runs a one-node, one-token council in sessionID and returns the
// session's last seq once the run's terminal event is journaled.
func runToEnd(ctx context.Context, engine *actors.Engine) (uint64, error) {
	ref, err := engine.StartRun(ctx, messages.StartRun{SessionID: sessionID, Question: "fan-out benchmark",
		Scenario: &messages.Scenario{Nodes: 1, Tokens: 1, SynthesisTokens: 1}})
	if err != nil {
		return 0, fmt.Errorf("fanout: start the session's run: %w", err)
	}
	sub, err := engine.Subscribe(ctx, messages.Subscribe{SessionID: ref.SessionID})
	if err != nil {
		return 0, err
	}
	defer sub.Close()
	var buf []*messages.Encoded
	for {
		buf, err = sub.Next(ctx, buf, 256)
		if err != nil {
			return 0, fmt.Errorf("fanout: follow the session's run: %w", err)
		}
		for _, e := range buf {
			if e.RunID == ref.RunID && e.Type.Terminal() {
				return e.Seq, nil
			}
		}
	}
}

func (t *conclaveTarget) ready() Ready {
	q := url.Values{"session_id": {string(sessionID)}, "after": {fmt.Sprint(t.after)}}.Encode()
	return Ready{Stream: t.lis.Addr().String(), SSEPath: "/api/v1/events/stream?" + q,
		WSPath: "/api/v1/events/ws?" + q, After: t.after}
}

func (t *conclaveTarget) publish(ctx context.Context, payload string) error {
	return t.engine.Publish(ctx, "", sessionID, benchEmit(payload))
}

// counts reads the transport's metrics in one gather: the open-streams
// gauge, the stream-writes counter and the catch-up counter (events streams
// read from the journal after their live queue overflowed, not a stream's
// replay from its cursor at connect). dropped is 0: a Conclave subscriber
// that overflows its queue catches up from the journal instead of losing
// events.
func (t *conclaveTarget) counts() targetCounts {
	mfs, err := t.reg.Gather()
	if err != nil {
		return targetCounts{clients: -1, writes: -1, catchup: -1}
	}
	sum := func(name string) float64 {
		n := 0.0
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				n += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
		return n
	}
	return targetCounts{clients: int(sum("conclave_stream_connections")), writes: int64(sum("conclave_stream_writes_total")),
		catchup: int64(sum("conclave_stream_catchup_events_total"))}
}

// shutdown stops the engine first, so that streams carry what was
// published, then the transport (transport.Server.Shutdown's contract).
func (t *conclaveTarget) shutdown(ctx context.Context) error {
	err := t.engine.Shutdown(ctx)
	if t.cluster != nil { // its streams follow the journal, not the engine
		if cerr := t.cluster.shutdown(ctx); err == nil {
			err = cerr
		}
	}
	if t.srv != nil {
		if serr := t.srv.Shutdown(ctx); err == nil && !errors.Is(serr, transport.ErrServerClosed) {
			err = serr
		}
	}
	if t.lis != nil {
		_ = t.lis.Close()
	}
	t.serve.Close()
	if werr := t.serve.Wait(ctx); err == nil {
		err = werr
	}
	return err
}
