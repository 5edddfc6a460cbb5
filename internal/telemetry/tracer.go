// Package telemetry exports runs as OpenTelemetry traces (OTLP over HTTP),
// with the GenAI semantic conventions: one trace per run, its spans built
// from the run's events by a Projector (the engine itself makes no span),
// their ids derived from the events (ids.go) so that the engine can hand
// the model's server and MCP servers the traceparent of the very span
// exported for a turn or a tool call.
//
// Tracing is off unless an OTLP endpoint is configured (Config.Endpoint,
// or the standard OTEL_EXPORTER_OTLP_ENDPOINT); when off, New returns a nil
// *Tracer and the engine has no tracer at all: nothing is computed.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/conclave-ai/conclave/internal/routine"
	"github.com/conclave-ai/conclave/messages"
)

// DefaultQueue bounds the batches of events waiting for the projector.
const DefaultQueue = 4096

// ErrProtocol is an OTEL_EXPORTER_OTLP_PROTOCOL this server cannot export with.
var ErrProtocol = errors.New("telemetry: only the http/protobuf OTLP protocol is supported")

// Config configures New. The zero value is valid: tracing as the standard
// OTEL_* variables say (off when they name no endpoint).
type Config struct {
	// Endpoint is the collector's OTLP/HTTP base URL (serve --otlp), as
	// OTEL_EXPORTER_OTLP_ENDPOINT: spans go to Endpoint/v1/traces. It
	// turns tracing on and wins over the variables.
	Endpoint string
	// Content records prompt and completion text, tool arguments and
	// results on the spans (serve --otel-content). Default off: they may
	// hold private data.
	Content bool
	// Risk names a tool's risk level for its execute_tool spans.
	Risk func(tool string) string
	// ServiceName is the service.name when OTEL_SERVICE_NAME does not
	// set one. Default "conclave".
	ServiceName string
	// Queue bounds the batches of events waiting for the projector: when
	// it is full (the exporter is far behind), a batch is dropped and
	// counted (Dropped), and the hub is never slowed. Default DefaultQueue.
	Queue int
	// Logger receives the tracer's logs. Default: discard.
	Logger *slog.Logger
	// Getenv reads the environment. Default os.Getenv.
	Getenv func(string) string
}

// Enabled reports whether cfg turns tracing on: an endpoint, given or in
// OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, and neither OTEL_SDK_DISABLED=true
// nor OTEL_TRACES_EXPORTER=none.
func (cfg Config) Enabled() bool {
	getenv := cfg.getenv()
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if cfg.Endpoint != "" {
		return true
	}
	if getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

func (cfg Config) getenv() func(string) string {
	if cfg.Getenv == nil {
		return os.Getenv
	}
	return cfg.Getenv
}

// Tracer projects the events the engine's hubs hand it (Observe) to spans
// and exports them. It implements actors.Tracer. One goroutine, its own,
// applies the events in the order they were observed.
type Tracer struct {
	log      *slog.Logger
	provider *sdktrace.TracerProvider
	proj     *Projector
	in       chan item
	stop     chan struct{}
	done     chan struct{}
	closed   atomic.Bool
	dropped  atomic.Uint64
	g        routine.Group
}

// item is one batch of events, or one resumed run.
type item struct {
	events  []*messages.Envelope
	resumed messages.RunID
	started *messages.RunStartedPayload
}

// New starts a Tracer exporting over OTLP/HTTP, or returns nil (and no
// error) when cfg does not turn tracing on. The exporter reads the
// standard variables (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION,
// OTEL_BSP_*), the provider the sampler's (OTEL_TRACES_SAMPLER, _ARG) and
// the resource's (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES).
func New(ctx context.Context, cfg Config) (*Tracer, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	getenv := cfg.getenv()
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return nil, fmt.Errorf("%w (OTEL_EXPORTER_OTLP_PROTOCOL is %q)", ErrProtocol, proto)
	}
	var opts []otlptracehttp.Option
	if cfg.Endpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(cfg.Endpoint, "/")+"/v1/traces"))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	name := cfg.ServiceName
	if name == "" {
		name = "conclave"
	}
	// The SDK's defaults, then ours, then the variables' (which win).
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", name)))
	if err == nil {
		res, err = resource.Merge(res, resource.Environment())
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithIDGenerator(NewIDGenerator()))
	if cfg.Logger != nil {
		// The SDK reports failed exports only through its process-wide
		// error handler (by default the standard log package): route them
		// to the server's log. The one global this package sets.
		log := cfg.Logger
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("telemetry: exporting spans failed", "err", err) }))
	}
	return newTracer(cfg, provider), nil
}

// NewWithProvider starts a Tracer on provider, which must use
// NewIDGenerator (tests and benchmarks give one with an in-memory
// exporter). Only cfg's Content, Risk, Queue and Logger apply.
func NewWithProvider(cfg Config, provider *sdktrace.TracerProvider) *Tracer {
	return newTracer(cfg, provider)
}

func newTracer(cfg Config, provider *sdktrace.TracerProvider) *Tracer {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	q := cfg.Queue
	if q <= 0 {
		q = DefaultQueue
	}
	t := &Tracer{
		log: log, provider: provider,
		proj: NewProjector(ProjectorConfig{Tracer: provider.Tracer("github.com/conclave-ai/conclave"), Content: cfg.Content, Risk: cfg.Risk}),
		// Buffered so that Observe never waits for the projector; the
		// bound is the point where batches are dropped instead.
		in:   make(chan item, q),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	t.g.Go(t.loop)
	return t
}

// Observe queues a journaled batch of events for the projector. It never
// blocks: with the queue full the batch is dropped and counted.
func (t *Tracer) Observe(_ messages.TenantID, events []*messages.Envelope) {
	t.enqueue(item{events: events}, len(events))
}

// Resumed queues the resumption of a run rebuilt from the journal.
func (t *Tracer) Resumed(run messages.RunID, started *messages.RunStartedPayload) {
	t.enqueue(item{resumed: run, started: started}, 0)
}

func (t *Tracer) enqueue(it item, n int) {
	if t.closed.Load() {
		return
	}
	select {
	case t.in <- it:
	default:
		if t.dropped.Add(uint64(n)) == uint64(n) {
			t.log.Warn("telemetry: the span queue is full; events are dropped and their runs' traces will miss spans", "queue", cap(t.in))
		}
	}
}

// Dropped is how many events were dropped because the queue was full.
func (t *Tracer) Dropped() uint64 { return t.dropped.Load() }

func (t *Tracer) loop() {
	defer close(t.done)
	for {
		select {
		case it := <-t.in:
			t.apply(it)
		case <-t.stop:
			for { // what was queued before Shutdown is still projected
				select {
				case it := <-t.in:
					t.apply(it)
				default:
					return
				}
			}
		}
	}
}

func (t *Tracer) apply(it item) {
	if it.resumed != "" {
		t.proj.Resumed(it.resumed, it.started)
		return
	}
	for _, env := range it.events {
		t.proj.Apply(env)
	}
}

// ForceFlush exports the spans ended so far (those the projector has
// applied).
func (t *Tracer) ForceFlush(ctx context.Context) error { return t.provider.ForceFlush(ctx) }

// Shutdown projects what was queued, then flushes the exporter and stops
// it. Spans of runs still live are not exported (they have not ended; a
// resumed run links to them). It is idempotent and returns ctx.Err() when
// ctx ends first.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if !t.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(t.stop)
	t.g.Close()
	if err := t.g.Wait(ctx); err != nil {
		return err
	}
	return t.provider.Shutdown(ctx)
}

// Done is closed once the tracer's goroutine has returned.
func (t *Tracer) Done() <-chan struct{} { return t.done }
