package transport

import (
	"net/http"
	"slices"

	"github.com/conclave-ai/conclave/docs"
)

// routeTable is a mux that remembers what it mounts: each pattern and the
// methods it answers (every other method gets a 405). Everything the
// server serves is mounted through one, so its list is complete: the
// contract test compares it with the paths of docs/openapi.yaml, so that
// neither can drift from the other.
type routeTable struct {
	mux    *http.ServeMux
	routes map[string][]string // pattern → sorted methods
}

func newRouteTable() *routeTable {
	return &routeTable{mux: http.NewServeMux(), routes: map[string][]string{}}
}

// handle mounts h at pattern for methods (h answers the others itself).
func (t *routeTable) handle(pattern string, methods []string, h http.Handler) {
	t.mux.Handle(pattern, h)
	t.routes[pattern] = slices.Sorted(slices.Values(methods))
}

// openAPIPath serves docs/openapi.yaml, the contract of this API.
const openAPIPath = "/api/v1/openapi.yaml"

// serveOpenAPI answers GET /api/v1/openapi.yaml with the contract the
// server was built with. It needs no token: it describes the API, and
// holds nothing of any tenant.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Cache-Control", "max-age=300")
	_, _ = w.Write(docs.OpenAPI)
}
