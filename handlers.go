package conclave

import (
	"net/http"

	"github.com/conclave-ai/conclave/transport"
	"github.com/conclave-ai/conclave/transport/a2a"
)

// Authenticate finds the tenant of a request to a handler. An error
// refuses the request with 401, the error's text as its message. An empty
// tenant is LocalTenant; a nil Authenticate admits every caller as
// LocalTenant, which is only right behind authentication of the program's
// own. It must be safe for concurrent use.
type Authenticate = transport.Authenticate

// The paths of docs/api.md. A run created through the API names
// SSEPath and WebSocketPath in its stream_url and ws_url, and the A2A
// agent card names A2ARPCPath: mount the handlers there for those to be
// right.
const (
	APIPath       = "/api/v1/"
	SSEPath       = "/api/v1/events/stream"
	WebSocketPath = "/api/v1/events/ws"
	AGUIPath      = "/api/v1/agui"
	A2ARPCPath    = a2a.RPCPath
	A2ACardPath   = a2a.CardPath
)

// The handlers share the engine's streams, stream caps (HTTPOptions) and
// CORS settings; Engine.Shutdown ends whatever they serve. Each checks
// its requests with its own Authenticate.

// APIHandler serves the runs and interrupts API of docs/api.md (create,
// list, get, abort, steer, rewind runs; list, get and resume interrupts),
// routed by its paths under APIPath, where it is meant to be mounted;
// anything else is a JSON 404.
func (e *Engine) APIHandler(auth Authenticate) http.Handler { return e.http.APIHandler(auth) }

// SSEHandler serves a session's events as Server-Sent Events: GET with
// ?session_id=, and optionally ?after= or Last-Event-ID to resume, and
// ?until=run_end to end after a run's terminal event (docs/api.md). It
// serves them whatever path it is mounted at.
func (e *Engine) SSEHandler(auth Authenticate) http.Handler { return e.http.SSEHandler(auth) }

// WebSocketHandler serves a session's events over a WebSocket (GET with
// ?session_id=; docs/api.md), whatever path it is mounted at.
func (e *Engine) WebSocketHandler(auth Authenticate) http.Handler {
	return e.http.WebSocketHandler(auth)
}

// AGUIHandler serves AG-UI 1.0 runs (POST a RunAgentInput; docs/api.md),
// whatever path it is mounted at.
func (e *Engine) AGUIHandler(auth Authenticate) http.Handler { return e.http.AGUIHandler(auth) }

// A2AHandler serves A2A 1.0: the agent card on GET, JSON-RPC on POST. The
// card is public; auth checks the RPC calls. Mount it at both A2ACardPath
// and A2ARPCPath.
func (e *Engine) A2AHandler(auth Authenticate) http.Handler { return e.http.A2AHandler(auth) }
