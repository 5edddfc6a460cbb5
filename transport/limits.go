package transport

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/transport/internal/httpjson"
)

// streamRetryAfter is the Retry-After of a 429 too_many_streams.
const streamRetryAfter = 5 * time.Second

// Reasons of conclave_streams_refused_total.
const (
	refusedMaxStreams          = "max_streams"
	refusedMaxStreamsPerTenant = "max_streams_per_tenant"
)

// streamCaps bounds the open streams (SSE, WebSocket, AG-UI, A2A) in total
// and per tenant.
type streamCaps struct {
	max       int                         // <= 0: no cap
	perTenant func(messages.TenantID) int // <= 0: no cap for that tenant
	metrics   *metrics

	mu       sync.Mutex // guards open and byTenant
	open     int
	byTenant map[messages.TenantID]int
}

func newStreamCaps(max int, perTenant func(messages.TenantID) int, m *metrics) *streamCaps {
	return &streamCaps{max: max, perTenant: perTenant, metrics: m, byTenant: map[messages.TenantID]int{}}
}

// acquire takes a stream slot for tenant. The returned release frees it
// and may be called any number of times.
func (c *streamCaps) acquire(tenant messages.TenantID) (release func(), _ *apiError) {
	limit := c.perTenant(tenant)
	c.mu.Lock()
	switch {
	case c.max > 0 && c.open >= c.max:
		c.mu.Unlock()
		c.metrics.streamsRefused.WithLabelValues(refusedMaxStreams).Inc()
		return nil, &apiError{Status: http.StatusTooManyRequests, Code: httpjson.CodeTooManyStreams, RetryAfter: streamRetryAfter,
			Message: fmt.Sprintf("the server has its maximum of %d open streams; retry later", c.max)}
	case limit > 0 && c.byTenant[tenant] >= limit:
		c.mu.Unlock()
		c.metrics.streamsRefused.WithLabelValues(refusedMaxStreamsPerTenant).Inc()
		return nil, &apiError{Status: http.StatusTooManyRequests, Code: httpjson.CodeTooManyStreams, RetryAfter: streamRetryAfter,
			Message: fmt.Sprintf("you have your maximum of %d open streams; close one or retry later", limit)}
	}
	c.open++
	c.byTenant[tenant]++
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			c.open--
			if c.byTenant[tenant]--; c.byTenant[tenant] <= 0 {
				delete(c.byTenant, tenant)
			}
			c.mu.Unlock()
		})
	}, nil
}

// readDeadlineDone clears a request's read deadline (ReadTimeout) once
// its body has been read to the end. The deadline bounds how long a client
// may take to send its request; once it is in, a long answer (an AG-UI or
// A2A stream, a blocking A2A SendMessage) must not be cut by it: net/http's
// background read, which watches for the client leaving, would hit the
// deadline and cancel the request's context.
func readDeadlineDone(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &eofBody{ReadCloser: r.Body, rc: http.NewResponseController(w)}
		}
		next.ServeHTTP(w, r)
	})
}

type eofBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool // only the handler reads the body, from one goroutine at a time
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{}) // unsupported (a test recorder): nothing to clear
	}
	return n, err
}
