package transport

import (
	"net/http"

	"github.com/conclave-ai/conclave/transport/internal/httpjson"
)

// DefaultMaxBody bounds request bodies.
const DefaultMaxBody = 1 << 20

// readBody reads a JSON request body of at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apiError) {
	return httpjson.ReadBody(w, r, limit)
}

// decodeStrict decodes exactly one JSON object into dst (httpjson.DecodeStrict).
func decodeStrict(body []byte, dst any) *apiError { return httpjson.DecodeStrict(body, dst) }
